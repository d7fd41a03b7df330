"""`tf.train.Checkpoint`, `tf.Module` and `tf.Variable` as TF training scripts use them, against what TF 2.21
printed for the same calls (tensorflow-cpu 2.21.0, 4 logical CPUs; the comments say which Keras ran)."""
from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

VALUE = ".ATTRIBUTES/VARIABLE_VALUE"


class Dense(tf.Module):
    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.w = tf.Variable(tf.fill([n_in, n_out], 0.5), name="w")
        self.b = tf.Variable(tf.zeros([n_out]), name="b")

    def __call__(self, x):
        return tf.nn.relu(x @ self.w + self.b)


class MLP(tf.Module):
    later: object  # set after construction by a test

    def __init__(self):
        super().__init__()
        self.layers = [Dense(3, 4), Dense(4, 2)]
        self.extra = {"scale": tf.Variable(2.0, name="scale"), "off": tf.Variable(1.0, trainable=False)}
        self.count = tf.Variable(0, trainable=False)


def _keys(directory) -> list:
    return [(key[:-len(VALUE) - 1] if key.endswith(VALUE) else key, shape)
            for key, shape in tf.train.list_variables(str(directory))]


# observed, TF 2.21 (Keras 3): tf.train.list_variables of these checkpoints of tf.Modules
MLP_KEYS = [("_CHECKPOINTABLE_OBJECT_GRAPH", []), ("model/count", []), ("model/extra/off", []),
            ("model/extra/scale", []), ("model/layers/0/b", [4]), ("model/layers/0/w", [3, 4]),
            ("model/layers/1/b", [2]), ("model/layers/1/w", [4, 2]), ("save_counter", [])]
ROOT_KEYS = [("_CHECKPOINTABLE_OBJECT_GRAPH", []), ("count", []), ("extra/off", []), ("extra/scale", []),
             ("layers/0/b", [4]), ("layers/0/w", [3, 4]), ("layers/1/b", [2]), ("layers/1/w", [4, 2]),
             ("save_counter", [])]
ROOT_AND_STEP_KEYS = ROOT_KEYS[:-1] + [("save_counter", []), ("step", [])]


@pytest.mark.parametrize("make, keys", [
    (lambda m: tf.train.Checkpoint(model=m), MLP_KEYS),
    (lambda m: tf.train.Checkpoint(m), ROOT_KEYS),
    (lambda m: tf.train.Checkpoint(root=m), ROOT_KEYS),
    (lambda m: tf.train.Checkpoint(m, step=tf.Variable(3)), ROOT_AND_STEP_KEYS),
])
def test_module_values_are_named_by_attribute_paths(tmp_path, make, keys):
    """A tf.Module's variables are saved under their attribute paths (TF's), not by position, so a module that
    gains an attribute still restores each saved value into the variable it came from."""
    model = MLP()
    model.layers[0].w.assign(np.arange(12, dtype=np.float32).reshape(3, 4))
    model.extra["off"].assign(7.0)
    path = make(model).save(str(tmp_path / "ck"))
    assert _keys(tmp_path) == keys

    class Grown(MLP):
        def __init__(self):
            self.added_first = tf.Variable([9.0, 9.0])  # sorts and is set before the saved ones
            super().__init__()

    grown = Grown()
    status = make(grown).restore(path)
    np.testing.assert_array_equal(grown.layers[0].w.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4))
    assert grown.extra["off"].numpy() == 7.0 and grown.extra["scale"].numpy() == 2.0
    np.testing.assert_array_equal(grown.added_first.numpy(), [9.0, 9.0])
    with pytest.raises(AssertionError):  # `added_first` has no saved value
        status.assert_existing_objects_matched()
    status.assert_nontrivial_match()


def test_module_lists_tuples_private_attributes_and_late_attributes(tmp_path):
    class T(tf.Module):
        def __init__(self):
            super().__init__()
            self.t = (tf.Variable(1.0), tf.Variable(2.0))
            self._priv = tf.Variable(3.0)

    t = T()
    assert [float(v.numpy()) for v in t.variables] == [3.0, 1.0, 2.0]  # observed, TF 2.21 (Keras 3)
    tf.train.Checkpoint(t=t).save(str(tmp_path / "a" / "ck"))
    # observed, TF 2.21 (Keras 3)
    assert _keys(tmp_path / "a") == [("_CHECKPOINTABLE_OBJECT_GRAPH", []), ("save_counter", []), ("t/_priv", []),
                                     ("t/t/0", []), ("t/t/1", [])]
    model = MLP()
    model.later = tf.Variable([1.0, 2.0])  # an attribute set after construction
    model.layers.append(Dense(2, 2))
    # observed, TF 2.21 (Keras 3)
    assert [v.name for v in model.trainable_variables] == ["scale:0", "Variable:0", "b:0", "w:0", "b:0", "w:0",
                                                           "b:0", "w:0"]
    tf.train.Checkpoint(model=model).save(str(tmp_path / "b" / "ck"))
    assert _keys(tmp_path / "b") == MLP_KEYS[:4] + [("model/later", [2])] + MLP_KEYS[4:8] + [
        ("model/layers/2/b", [2]), ("model/layers/2/w", [2, 2]), ("save_counter", [])]  # observed, TF 2.21


def test_save_counter_is_an_int64_variable_and_restores(tmp_path):
    v = tf.Variable(1.0)
    checkpoint = tf.train.Checkpoint(v=v)
    # observed, TF 2.21 (Keras 3)
    assert repr(checkpoint.save_counter) == "<tf.Variable 'save_counter:0' shape=() dtype=int64, numpy=0>"
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path), max_to_keep=2)
    for _ in range(2):
        manager.save()
    assert checkpoint.save(str(tmp_path / "other")) == str(tmp_path / "other-3")
    assert repr(checkpoint.save_counter) == "<tf.Variable 'save_counter:0' shape=() dtype=int64, numpy=3>"
    assert type(checkpoint.save_counter.numpy()) is np.int64 and int(checkpoint.save_counter) == 3
    fresh = tf.train.Checkpoint(v=tf.Variable(0.0))
    fresh.restore(str(tmp_path / "ckpt-2")).assert_consumed()
    assert fresh.save_counter.numpy() == 2
    reader = tf.train.load_checkpoint(str(tmp_path / "ckpt-2"))
    counter = reader.get_tensor("save_counter/" + VALUE)
    assert type(counter) is np.int64 and counter == 2  # observed, TF 2.21: a numpy scalar
    step = tf.Variable(3, dtype=tf.int64)
    tf.train.Checkpoint(step=step).write(str(tmp_path / "step"))
    assert reader.get_variable_to_dtype_map()["save_counter/" + VALUE].name == "int64"
    assert tf.train.load_checkpoint(str(tmp_path / "step")).get_variable_to_dtype_map()[
        "step/" + VALUE].name == "int64"  # observed, TF 2.21: int64 (held in 32 bits by JAX, saved in 64)


@pytest.mark.parametrize("value", [3, "a", np.zeros(3), None, (lambda: 1)])
def test_checkpoint_refuses_what_is_not_trackable_with_tfs_error(value):
    # observed, TF 2.21: ValueError "`Checkpoint` was expecting x to be a trackable object (an object derived
    # from `Trackable`), got 3. If you believe ..."
    with pytest.raises(ValueError, match="`Checkpoint` was expecting x to be a trackable object"):
        tf.train.Checkpoint(x=value)


def test_restore_of_a_missing_checkpoint_is_tfs_not_found_error(tmp_path):
    tf.train.Checkpoint(epoch=tf.Variable(5)).save(str(tmp_path / "ck"))
    # observed, TF 2.21: NotFoundError "... Failed to find any matching files for d/ck-999 ..."
    with pytest.raises(tf.errors.NotFoundError, match="ck-999"):
        tf.train.Checkpoint(epoch=tf.Variable(0)).restore(str(tmp_path / "ck-999"))


# observed, TF 2.21: each an InvalidArgumentError "tensor_name = epoch/.ATTRIBUTES/VARIABLE_VALUE; expected dtype
# int32 does not equal original dtype int64 [Op:RestoreV2]" (int32 and int64, float32 and float64 alike)
@pytest.mark.parametrize("saved, restoring", [
    (5, 0.0), (tf.constant(2, dtype=tf.int64), 0), (2, tf.constant(0, dtype=tf.int64)),
    (1.5, tf.constant(0.0, dtype=tf.float64))])
def test_restore_into_another_dtype_is_tfs_invalid_argument_error(tmp_path, saved, restoring):
    path = tf.train.Checkpoint(epoch=tf.Variable(saved)).save(str(tmp_path / "ck"))
    variable = tf.Variable(restoring)
    with pytest.raises(tf.errors.InvalidArgumentError, match="tensor_name = epoch/.ATTRIBUTES/VARIABLE_VALUE; "
                                                              "expected dtype"):
        tf.train.Checkpoint(epoch=variable).restore(path)
    assert variable.numpy() == 0


def test_write_and_read_leave_the_save_counter_out_as_tf(tmp_path):
    v = tf.Variable([1.0, 2.0])
    written = tf.train.Checkpoint(v=v).write(str(tmp_path / "x"))
    assert written == str(tmp_path / "x")
    # observed, TF 2.21: no save_counter in a checkpoint from `write` (the counter was never made), no index
    assert _keys(tmp_path / "x") == [("_CHECKPOINTABLE_OBJECT_GRAPH", []), ("v", [2])]
    assert tf.train.latest_checkpoint(str(tmp_path)) is None
    target = tf.Variable([0.0, 0.0])
    tf.train.Checkpoint(v=target).read(written).assert_consumed()  # observed, TF 2.21: ok
    np.testing.assert_array_equal(target.numpy(), [1.0, 2.0])
    saved = tf.train.Checkpoint(v=v).save(str(tmp_path / "s"))
    # observed, TF 2.21: `read` of a `save` leaves the counter unresolved, `restore` of a `write` leaves the
    # checkpoint's counter unmatched; both fail assert_consumed, and restore(None) fails every assertion
    with pytest.raises(AssertionError, match="save_counter"):
        tf.train.Checkpoint(v=tf.Variable([0.0, 0.0])).read(saved).assert_consumed()
    with pytest.raises(AssertionError, match="save_counter"):
        tf.train.Checkpoint(v=tf.Variable([0.0, 0.0])).restore(written).assert_consumed()
    status = tf.train.Checkpoint(v=tf.Variable([0.0, 0.0])).restore(None)
    assert type(status).__name__ == "InitializationOnlyStatus" and status.expect_partial() is status
    for check in (status.assert_consumed, status.assert_existing_objects_matched, status.assert_nontrivial_match):
        with pytest.raises(AssertionError, match=r"No checkpoint specified \(save_path=None\); nothing is being "
                                                 "restored."):
            check()


@pytest.mark.parametrize("value, dtype, raises", [  # observed, TF 2.21
    (1.0, "int32", True), (1.5, "int32", True), ([1, 2.0], "int64", True), (0.0, "bool", True),
    (np.float32(1.5), "int32", False), (3, "float32", False), (True, "int32", False)])
def test_python_floats_for_an_integer_variable_are_tfs_type_error(value, dtype, raises):
    if raises:
        with pytest.raises(TypeError, match=f"Cannot convert .* to EagerTensor of dtype {dtype}"):
            tf.Variable(value, dtype=getattr(tf, dtype))
    else:
        assert tf.Variable(value, dtype=getattr(tf, dtype)).numpy() == np.asarray(value).astype(dtype)


def test_variable_name_shape_truth_iteration_and_ref():
    v = tf.Variable(4.0, name="w")
    m = tf.Variable([[1.0, 2.0], [3.0, 4.0]], trainable=False, name="m")
    # observed, TF 2.21 (Keras 3)
    assert v.name == "w:0" and m.name == "m:0" and tf.Variable(1).name == "Variable:0"
    assert repr(v) == "<tf.Variable 'w:0' shape=() dtype=float32, numpy=4.0>"
    assert repr(m.shape) == "TensorShape([2, 2])" and m.shape.as_list() == [2, 2] and v.shape.rank == 0
    assert m.get_shape() == (2, 2)
    assert bool(v) is True and bool(tf.Variable(0.0)) is False
    rows = list(m)  # TF: the rows; it must end (a JAX array's indexing never raises IndexError)
    assert len(rows) == 2 and [r.tolist() for r in map(np.asarray, rows)] == [[1.0, 2.0], [3.0, 4.0]]
    with pytest.raises(TypeError):
        iter(v)
    with pytest.raises(TypeError):  # observed, TF 2.21: "Variable is unhashable. Instead, use variable.ref() ..."
        hash(v)
    table = {v.ref(): "v", m.ref(): "m"}
    assert table[v.ref()] == "v" and table[m.ref()] == "m" and v.ref().deref() is v
    assert v.assign(1.0, read_value=False) is None and v.numpy() == 1.0  # observed, TF 2.21: None
    assert v.assign_add(2.0, read_value=False) is None and v.assign_sub(1.0, read_value=False) is None
    assert float(v.assign_add(1.0)) == 3.0 and float(tf.add(v, 1.0)) == 4.0


def _mirrored(k: int):
    return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(k)])


def _strategy(kind: str):
    return {"none": tf.distribute.get_strategy, "one_device": lambda: tf.distribute.OneDeviceStrategy("/cpu:1"),
            "mirrored3": lambda: _mirrored(3), "mirrored4": lambda: _mirrored(4)}[kind]()


def _training(strategy):
    """A model, Adam and a step counter made in `strategy`'s scope, and a tf.function that trains one batch."""
    import keras

    global_batch = 12
    x = np.random.RandomState(0).randn(global_batch * 6, 3).astype(np.float32)
    y = np.random.RandomState(1).randn(global_batch * 6, 2).astype(np.float32)
    with strategy.scope():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(2)])
        model.set_weights([np.linspace(-1, 1, w.size, dtype=np.float32).reshape(w.shape) for w in model.get_weights()])
        optimizer = keras.optimizers.Adam(0.05)
        step = tf.Variable(0, dtype=tf.int64)
        checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(global_batch)
    iterator = iter(strategy.experimental_distribute_dataset(dataset))

    @tf.function
    def train_step(iterator):
        def replica_step(xb, yb):
            with tf.GradientTape() as tape:
                per_example = tf.reduce_mean((model(xb) - yb) ** 2, axis=1)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            step.assign_add(1)
            return loss

        return strategy.reduce("SUM", strategy.run(replica_step, args=next(iterator)), axis=None)

    return model, optimizer, step, checkpoint, iterator, train_step


# observed, TF 2.21 (tf_keras: TF's Keras 3 fails this loop under MirroredStrategy, "You must feed a value for
# placeholder tensor"): 3 steps under MirroredStrategy(4), saved, then 3 more steps (the same after a restore
# under any strategy below), and the first kernel row after the 6 steps.
LOSSES_BEFORE = [4.461711883544922, 2.035414695739746, 1.9526419639587402]
LOSSES_AFTER = [2.011624574661255, 1.573011040687561, 1.894054889678955]
KERNEL_ROW_AFTER = [-1.034978, -0.669761, -0.777794, -0.601693]


@pytest.fixture(scope="module")
def saved_under_mirrored4(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("mirrored4"))
    model, optimizer, step, checkpoint, iterator, train_step = _training(_mirrored(4))
    before = [float(train_step(iterator)) for _ in range(3)]
    checkpoint.save(directory + "/ck")
    slots = [np.asarray(v.value).copy() for v in optimizer.variables]
    after = [float(train_step(iterator)) for _ in range(3)]  # the uninterrupted run
    return directory, before, after, slots, model.weights[0].numpy()[0]


@pytest.mark.parametrize("kind", ["none", "one_device", "mirrored3"])
def test_training_restored_under_another_strategy_continues_as_the_uninterrupted_run(saved_under_mirrored4,
                                                                                    kind):
    directory, before, uninterrupted, saved_slots, kernel_row = saved_under_mirrored4
    np.testing.assert_allclose(before, LOSSES_BEFORE, rtol=1e-5)
    np.testing.assert_allclose(uninterrupted, LOSSES_AFTER, rtol=1e-5)
    np.testing.assert_allclose(kernel_row, KERNEL_ROW_AFTER, atol=1e-5)
    strategy = _strategy(kind)
    model, optimizer, step, checkpoint, iterator, train_step = _training(strategy)
    status = checkpoint.restore(tf.train.latest_checkpoint(directory))
    assert int(step.numpy()) == 3 and int(np.asarray(optimizer.variables[0])) == 3  # observed, TF 2.21 (tf_keras)
    for _ in range(3):
        next(iterator)
    after = [float(train_step(iterator)) for _ in range(3)]
    np.testing.assert_allclose(after, LOSSES_AFTER, rtol=1e-5)  # observed, TF 2.21 (tf_keras), each strategy
    np.testing.assert_allclose(after, uninterrupted, rtol=1e-5)
    np.testing.assert_allclose(model.weights[0].numpy()[0], kernel_row, atol=1e-5)
    assert int(step.numpy()) == 6
    status.assert_consumed()  # the optimizer's slots were restored when it was built, as in TF
    assert len(optimizer.variables) == len(saved_slots)


def test_a_tf_variable_attribute_of_a_keras_model_is_saved_under_its_attribute_name(tmp_path):
    import keras

    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.head = keras.layers.Dense(1)
            self.scale = tf.Variable(2.0)  # unnamed: 'Variable:0'

        def call(self, x):
            return self.head(x) * self.scale

    net = Net()
    net(tf.ones([1, 4]))
    net.scale.assign(3.0)
    tf.train.Checkpoint(net=net).save(str(tmp_path / "ck"))
    # observed, TF 2.21 (Keras 3): `net/scale/.ATTRIBUTES/VARIABLE_VALUE`, the attribute's name
    assert ("net/scale", []) in _keys(tmp_path)
    fresh = Net()
    status = tf.train.Checkpoint(net=fresh).restore(str(tmp_path / "ck-1"))
    fresh(tf.ones([1, 4]))
    status.assert_consumed()
    assert fresh.scale.numpy() == 3.0
    np.testing.assert_array_equal(fresh.head.get_weights()[0], net.head.get_weights()[0])


def test_variable_scatter_methods_are_tfs():
    v = tf.Variable([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    # observed, TF 2.21: the values after each call
    np.testing.assert_array_equal(v.scatter_nd_update([[0, 1], [2, 0]], [9.0, 8.0]), [[1, 9], [3, 4], [8, 6]])
    np.testing.assert_array_equal(v.scatter_nd_add([[1]], [[10.0, 10.0]]), [[1, 9], [13, 14], [8, 6]])
    np.testing.assert_array_equal(v.scatter_nd_sub([[1, 1]], [1.0]), [[1, 9], [13, 13], [8, 6]])
    v.scatter_update(tf.IndexedSlices(tf.constant([[0.0, 0.0]]), tf.constant([2])))
    np.testing.assert_array_equal(v.numpy(), [[1, 9], [13, 13], [0, 0]])
    w = tf.Variable([1, 2, 3])
    w.scatter_nd_update([[0]], [7])
    assert w.numpy().tolist() == [7, 2, 3] and w.dtype == tf.int32


def test_a_model_restored_before_strategy_run_builds_it_has_the_saved_values(tmp_path):
    import keras

    def make():
        return keras.Sequential([keras.layers.Dense(3), keras.layers.Dense(1)])

    saved = make()
    saved.build((None, 2))
    saved.set_weights([np.full(w.shape, 0.5 * (i + 1), np.float32) for i, w in enumerate(saved.get_weights())])
    path = tf.train.Checkpoint(model=saved).save(str(tmp_path / "ck"))
    strategy = _mirrored(3)
    with strategy.scope():
        model = make()
        status = tf.train.Checkpoint(model=model).restore(path)

    @tf.function
    def forward(x):
        return strategy.run(model, args=(x,))  # builds the model from the first replica's rows

    out = forward(np.ones((6, 2), np.float32))
    # observed, TF 2.21 (Keras 3): each replica's rows (all 6: the array is not split) 11.0, the second bias [1, 1, 1]
    for replica_out in strategy.experimental_local_results(out):
        np.testing.assert_allclose(np.asarray(replica_out), np.full((6, 1), 11.0))
    np.testing.assert_array_equal(model.get_weights()[1], [1.0, 1.0, 1.0])
    status.assert_consumed()
