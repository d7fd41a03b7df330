"""`tf.experimental.dtensor` on jax.sharding, against TF 2.21's DTensor (tensorflow-cpu 2.21.0, 8 logical CPUs).

Every expected value here was printed by TF 2.21 for the same call (scratch scripts run side by side), unless the
test says it is jdist's own rule. The training test checks each layout against one device and against the losses
TF printed for the same model, data and starting weights.
"""
from __future__ import annotations

import numpy as np
import pytest
from dtensor_mlp import MLP, TF_MLP_STEPS, mlp_data, placed, repack, train_step

import jdist.tf_compat as tf
from jdist.tf_compat.experimental import dtensor

U = dtensor.UNSHARDED
DEVICES = [f"CPU:{i}" for i in range(8)]
NAMES = ",".join(f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(8))


@pytest.fixture(scope="module")
def mesh():
    return dtensor.create_mesh([("batch", 4), ("model", 2)], devices=DEVICES)


def test_mesh_and_layout_read_as_tf(mesh):
    assert mesh.dim_names == ["batch", "model"] and mesh.shape() == [4, 2] and mesh.size == 8
    assert mesh["batch"] == dtensor.MeshDimension(name="batch", size=4) and mesh.dim_size("model") == 2
    assert mesh.num_local_devices() == 8 and mesh.local_device_ids() == list(range(8))
    assert mesh.local_devices()[:2] == ["/job:localhost/replica:0/task:0/device:CPU:0",
                                        "/job:localhost/replica:0/task:0/device:CPU:1"]
    assert mesh.device_type() == "CPU"
    assert mesh.local_device_locations()[:3] == [{"batch": 0, "model": 0}, {"batch": 0, "model": 1},
                                                 {"batch": 1, "model": 0}]
    assert repr(mesh) == f"Mesh.from_string(|batch=4,model=2|0,1,2,3,4,5,6,7|0,1,2,3,4,5,6,7|{NAMES})"
    assert dtensor.create_mesh({"x": 8}, devices=DEVICES).dim_names == ["x"]
    assert dtensor.create_mesh(devices=DEVICES).dim_names == ["x"]  # TF's default: one dimension "x"
    assert mesh == dtensor.create_mesh([("batch", 4), ("model", 2)], devices=DEVICES)
    with pytest.raises(ValueError, match=r"length of devices \(8\) must be equal to total size of the mesh of "
                                         r"shape \[3\]"):
        dtensor.create_mesh([("x", 3)], devices=DEVICES)

    layout = dtensor.Layout(["batch", U], mesh)
    assert (dtensor.UNSHARDED, dtensor.MATCH) == ("unsharded", "match")
    assert layout.shape == [4, 1] and layout.rank == 2 and layout.num_shards(0) == 4
    assert not layout.is_fully_replicated() and dtensor.Layout.replicated(mesh, 2).is_fully_replicated()
    assert layout.delete([0]).sharding_specs == [U]
    assert dtensor.Layout.batch_sharded(mesh, "batch", rank=3).sharding_specs == ["batch", U, U]
    assert dtensor.Layout.batch_sharded(mesh, "batch", rank=3, axis=1).sharding_specs == [U, "batch", U]
    assert dtensor.Layout.inner_sharded(mesh, "model", rank=3).sharding_specs == [U, U, "model"]
    assert dtensor.Layout(["batch", "model"], mesh).shape == [4, 2]
    assert layout.offset_to_shard()[:3] == [(0, 0), (0, 0), (1, 0)]
    assert layout.to_string().startswith("sharding_specs:batch,unsharded, mesh:|batch=4,model=2|")
    assert dtensor.Layout.from_string(layout.to_string()) == layout
    with pytest.raises(ValueError, match="nope: A dimension sharding must either be a valid mesh dimension or "
                                         "UNSHARDED."):
        dtensor.Layout(["nope", U], mesh)
    with pytest.raises(ValueError, match=r"Mesh dimension batch was repeated in sharding specification "
                                         r"\['batch', 'batch'\]"):
        dtensor.Layout(["batch", "batch"], mesh)


def test_pack_unpack_and_relayout_place_the_pieces_as_tf(mesh):
    """The guide's `dtensor_from_array` (copy_to_mesh, then relayout) and `pack`; the pieces TF printed."""
    small = dtensor.create_mesh([("x", 3), ("y", 2)], devices=DEVICES[:6])
    value = np.arange(6, dtype=np.int32).reshape(3, 2)
    pieces = [p.numpy().tolist() for p in dtensor.unpack(placed(value, dtensor.Layout(["x", U], small)))]
    assert pieces == [[[0, 1]], [[0, 1]], [[2, 3]], [[2, 3]], [[4, 5]], [[4, 5]]]
    fully = dtensor.unpack(placed(value, dtensor.Layout(["x", "y"], small)))
    assert [p.numpy().tolist() for p in fully] == [[[i]] for i in range(6)]
    assert [p.device for p in fully][:2] == ["/job:localhost/replica:0/task:0/device:CPU:0",
                                             "/job:localhost/replica:0/task:0/device:CPU:1"]
    assert str(fully[5]) == "tf.Tensor([[5]], shape=(1, 1), dtype=int32)"

    layout = dtensor.Layout(["batch", U], mesh)
    packed = dtensor.pack([tf.fill([2, 2], float(i // 2)) for i in range(8)], layout)  # model replicates a row
    assert dtensor.fetch_layout(packed) == layout and packed.shape == (8, 2)
    assert dtensor.relayout(packed, dtensor.Layout.replicated(mesh, 2)).numpy()[:, 0].tolist() == [0, 0, 1, 1, 2, 2,
                                                                                                    3, 3]
    # jdist's rule: pieces that differ where the layout replicates are refused. TF packs them as given (observed:
    # devices 0 and 1 then hold [[0 0] ...] and [[1 1] ...] of one tensor) and reads device 0's.
    with pytest.raises(ValueError, match="pieces 0 and 1 hold the same part of the tensor"):
        dtensor.pack([tf.fill([2, 2], float(i)) for i in range(8)], layout)
    with pytest.raises(tf.errors.InvalidArgumentError, match="expected 8 inputs to DTensorPack, but got 4"):
        dtensor.pack([tf.fill([2, 2], 1.0)] * 4, layout)
    with pytest.raises(tf.errors.UnimplementedError, match="Components of a PackedTensor must currently all have "
                                                           "the same shape"):
        dtensor.pack([tf.ones([2, 2])] * 7 + [tf.ones([1, 2])], layout)
    # ... as for a fully replicated layout, where TF's `.numpy()` gives device 0's piece (observed: [0., 0.]).
    with pytest.raises(ValueError, match="hold the same part of the tensor"):
        dtensor.pack([tf.fill([2], float(i)) for i in range(8)], dtensor.Layout.replicated(mesh, 1))
    with pytest.raises(ValueError, match="does not divide it"):  # TF: "requires dimension 0 to be divisible"
        placed(np.zeros((6, 2), np.float32), layout)
    with pytest.raises(tf.errors.InvalidArgumentError, match="FetchLayout expects a tensor placed on the layout "
                                                             "device"):
        dtensor.fetch_layout(tf.constant([1.0]))
    assert not dtensor.is_dtensor(tf.constant([1.0])) and dtensor.is_dtensor(packed)
    dtensor.check_layout(packed, layout)
    with pytest.raises(ValueError, match="Layout of tensor: Layout.from_string"):
        dtensor.check_layout(packed, dtensor.Layout.replicated(mesh, 2))
    matched = dtensor.relayout(packed, dtensor.Layout([dtensor.MATCH, "model"], mesh))
    assert dtensor.fetch_layout(matched).sharding_specs == ["batch", "model"]


def test_ops_keep_laying_out_their_results(mesh):
    """TF's layouts of results (the guide's matmuls, observed), and values equal to the same ops on one device."""
    small = dtensor.create_mesh([("x", 3), ("y", 2)], devices=DEVICES[:6])
    a = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    b = np.array([[6, 5], [4, 3], [2, 1]], np.int32)
    c = tf.matmul(placed(a, dtensor.Layout([U, "x"], small)), placed(b, dtensor.Layout(["x", U], small)))
    assert dtensor.fetch_layout(c).sharding_specs == [U, U]
    c = tf.matmul(placed(a, dtensor.Layout(["y", "x"], small)), placed(b, dtensor.Layout(["x", U], small)))
    assert dtensor.fetch_layout(c).sharding_specs == ["y", U]
    assert [p.numpy().tolist() for p in dtensor.unpack(c)] == [[[20, 14]], [[56, 41]]] * 3

    x = placed(np.arange(16.0, dtype=np.float32).reshape(8, 2), dtensor.Layout(["batch", U], mesh))
    assert dtensor.fetch_layout(tf.reduce_sum(x)).sharding_specs == []
    assert dtensor.fetch_layout(tf.reduce_sum(x, axis=1)).sharding_specs == ["batch"]
    assert dtensor.fetch_layout(x + 1.0).sharding_specs == ["batch", U]
    assert dtensor.fetch_layout(x[:, 0]).sharding_specs == ["batch"]
    assert float(tf.reduce_sum(x)) == 120.0
    # jdist's rule: a regular operand is replicated onto the mesh; TF refuses any but a scalar (observed:
    # UnimplementedError "got a regular tensor for input 1 ... but was expecting a DTensor").
    np.testing.assert_array_equal(dtensor.relayout(x + tf.ones([2]), dtensor.Layout.replicated(mesh, 2)).numpy(),
                                  np.arange(16.0).reshape(8, 2) + 1)
    ones = dtensor.call_with_layout(tf.ones, dtensor.Layout(["batch", "model"], mesh), shape=(8, 4))
    assert dtensor.fetch_layout(ones).sharding_specs == ["batch", "model"]
    assert dtensor.fetch_layout(tf.zeros([8], layout=dtensor.Layout(["batch"], mesh))).sharding_specs == ["batch"]
    both = dtensor.call_with_layout(lambda: (tf.ones([8]), tf.zeros([8])), dtensor.Layout(["batch"], mesh))
    assert [dtensor.fetch_layout(t).sharding_specs for t in both] == [["batch"], ["batch"]]


def test_printing_and_numpy_are_tfs(mesh):
    """TF 2.21's text of a DTensor (observed on a 2 x 2 mesh): C++'s summary of the values, per device when split;
    `.numpy()` of a split tensor is UnimplementedError."""
    four = dtensor.create_mesh([("x", 2), ("y", 2)], devices=DEVICES[:4])
    names = ",".join(f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(4))
    split = placed(np.arange(8.0).reshape(4, 2), dtensor.Layout(["x", U], four))
    assert str(split) == (
        'tf.Tensor({"CPU:0": [[0 1]\n [2 3]], "CPU:1": [[0 1]\n [2 3]], "CPU:2": [[4 5]\n [6 7]], "CPU:3": [[4 5]\n '
        f'[6 7]]}}, layout="sharding_specs:x,unsharded, mesh:|x=2,y=2|0,1,2,3|0,1,2,3|{names}", shape=(4, 2), '
        "dtype=float32)")
    assert repr(split).startswith('<tf.Tensor: shape=(4, 2), dtype=float32, value={"CPU:0": [[0 1]\n [2 3]], ')
    replicated = dtensor.Layout.replicated
    shown = {
        "[0 1 2 ... 7 8 9]": np.arange(10, dtype=np.int32), "[0 1 2 3 4 5]": np.arange(6, dtype=np.int32),
        "[[0 0.5 1 1.5]\n [2 2.5 3 3.5]\n [4 4.5 5 5.5]]": np.arange(12.0, dtype=np.float32).reshape(3, 4) * 0.5,
        "2.5": np.float32(2.5), "[1e-05 1e+10 -3.25]": np.array([1e-5, 1e10, -3.25], np.float32),
        "[1 0]": np.array([True, False]), "[nan inf]": np.array([np.nan, np.inf], np.float32),
        "[[[0 1 2 3]\n  [4 5 6 7]\n  [8 9 10 11]]\n\n [[12 13 14 15]\n  [16 17 18 19]\n  [20 21 22 23]]]":
            np.arange(24.0, dtype=np.float32).reshape(2, 3, 4),
    }
    for text, value in shown.items():
        on_mesh = dtensor.copy_to_mesh(tf.constant(value), replicated(four, np.ndim(value)))
        assert str(on_mesh).startswith(f"tf.Tensor({text}, layout="), text
    rows = dtensor.copy_to_mesh(tf.constant(np.arange(1000, dtype=np.int32).reshape(10, 100)), replicated(four, 2))
    assert str(rows).startswith("tf.Tensor([[0 1 2 ... 97 98 99]\n [100 101 102 ... 197 198 199]\n [200 201 202 ... "
                                "297 298 299]\n ...\n [700 701 702 ... 797 798 799]\n")
    with pytest.raises(tf.errors.UnimplementedError, match="Trying to copy a non-single-device and non-replicated "
                                                           "DTensor is not supported"):
        split.numpy()
    assert dtensor.relayout(split, replicated(four, 2)).numpy().tolist() == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert "layout=" not in str(tf.constant([1.0]))  # other tensors print as before


def test_dvariable_keeps_its_layout(mesh):
    layout = dtensor.Layout(["batch", U], mesh)
    v = dtensor.DVariable(placed(np.zeros((8, 2), np.float32), layout))
    assert dtensor.fetch_layout(v) == layout and v.layout == layout and isinstance(v, dtensor.DVariable)
    assert not isinstance(tf.Variable(1.0), dtensor.DVariable)
    v.assign(dtensor.copy_to_mesh(tf.ones([8, 2]), dtensor.Layout.replicated(mesh, 2)))
    assert dtensor.fetch_layout(v) == layout
    v.assign_add(tf.ones([8, 2]))  # jdist's rule: a regular value is laid out as the variable (TF refuses it)
    assert dtensor.fetch_layout(v) == layout
    assert dtensor.relayout(v.read_value(), dtensor.Layout.replicated(mesh, 2)).numpy().tolist() == [[2, 2]] * 8
    other = dtensor.create_mesh([("x", 2)], devices=DEVICES[:2])
    with pytest.raises(ValueError, match="layout is fixed"):  # the guide's "variable's layout is immutable" cell
        v.assign(dtensor.copy_to_mesh(tf.ones([8, 2]), dtensor.Layout.replicated(other, 2)))
    with pytest.raises(tf.errors.InvalidArgumentError, match="Neither layout nor DTensor initial value are provided"):
        dtensor.DVariable(tf.ones([2]))
    w = dtensor.DVariable(tf.ones([8]), layout=dtensor.Layout(["batch"], mesh))
    assert dtensor.fetch_layout(w).sharding_specs == ["batch"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="Conflicting layout"):
        dtensor.DVariable(placed(np.zeros(8, np.float32), dtensor.Layout(["batch"], mesh)),
                          layout=dtensor.Layout.replicated(mesh, 1))
    assert str(w.handle).startswith('tf.Tensor(<ResourceHandle(name="Variable/')
    assert 'dtype and shapes : "[ DType enum: 1, Shape: [8] ]")>, layout="sharding_specs:batch,' in str(w.handle)


MLP_LAYOUTS = {  # mesh, kernel layouts, the input's layout
    "one_device": ([("world", 1)], [[U, U], [U, U]], [U, U]),
    "data": ([("batch", 8)], [[U, U], [U, U]], ["batch", U]),
    "model": ([("batch", 4), ("model", 2)], [[U, "model"], ["model", U]], ["batch", U]),
    "spt": ([("batch", 2), ("feature", 2), ("model", 2)], [["feature", "model"], ["model", U]], ["batch", "feature"]),
}


def _train(name):
    dims, kernels, x_spec = MLP_LAYOUTS[name]
    mesh = dtensor.create_mesh(dims, devices=DEVICES[:int(np.prod([s for _, s in dims]))])
    w1, w2, xs, ys = mlp_data()
    model = MLP(w1, w2, [dtensor.Layout(kernels[0], mesh), dtensor.Layout(kernels[1], mesh)])
    steps = []
    for x, y in zip(xs, ys):
        x, y = repack(x, dtensor.Layout(x_spec, mesh)), repack(y, dtensor.Layout([x_spec[0]], mesh))
        out = train_step(model, x, y, 0.05)
        assert list(out) == ["loss", "accuracy"]  # the body's order, as TF returns the dict
        steps.append((float(out["loss"]), float(out["accuracy"])))
    weights = [dtensor.relayout(v, dtensor.Layout.replicated(mesh, len(v.shape))).numpy()
               for v in model.trainable_variables]
    return model, steps, weights


def test_the_tutorials_training_is_tfs_under_every_layout():
    _, one_steps, one_weights = _train("one_device")
    np.testing.assert_allclose(one_steps, TF_MLP_STEPS, rtol=1e-5)
    for name in ("data", "model", "spt"):
        model, steps, weights = _train(name)
        np.testing.assert_allclose(steps, one_steps, rtol=1e-5, err_msg=name)
        for w, w_one in zip(weights, one_weights):
            np.testing.assert_allclose(w, w_one, rtol=1e-5, atol=1e-6, err_msg=name)
        # the variables are still laid out as made (the kernels' layouts), after the compiled assignments
        assert dtensor.fetch_layout(model.dense1.weight).sharding_specs == MLP_LAYOUTS[name][1][0]
        assert dtensor.fetch_layout(model.dense2.weight).sharding_specs == MLP_LAYOUTS[name][1][1]


def test_a_checkpoint_restores_onto_other_layouts(tmp_path):
    """The tutorial's checkpoints: saved from one mesh's layouts, restored onto another's (values kept, each
    variable keeping its new layout)."""
    w1, w2, _, _ = mlp_data()
    data = dtensor.create_mesh([("batch", 8)], devices=DEVICES)
    saved = MLP(w1, w2, [dtensor.Layout.replicated(data, 2)] * 2)
    saved.dense1.bias.assign(tf.fill([8], 0.5))
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(root=saved), str(tmp_path), max_to_keep=3)
    manager.save()
    spt = dtensor.create_mesh([("batch", 2), ("feature", 2), ("model", 2)], devices=DEVICES)
    layouts = [dtensor.Layout(["feature", "model"], spt), dtensor.Layout(["model", U], spt)]
    restored = MLP(np.zeros_like(w1), np.zeros_like(w2), layouts)
    tf.train.Checkpoint(root=restored).restore(manager.latest_checkpoint).assert_consumed()
    for v, expected in zip(restored.trainable_variables, saved.trainable_variables):
        got = dtensor.relayout(v, dtensor.Layout.replicated(spt, len(v.shape))).numpy()
        np.testing.assert_array_equal(got, dtensor.relayout(expected, dtensor.Layout.replicated(
            data, len(v.shape))).numpy())
    assert dtensor.fetch_layout(restored.dense1.weight) == layouts[0]
    assert dtensor.fetch_layout(restored.dense1.bias).sharding_specs == ["model"]


def test_the_rest_of_dtensors_namespace():
    assert dtensor.num_local_devices("CPU") == 8 and dtensor.num_global_devices("CPU") == 8
    assert dtensor.client_id() == 0 and dtensor.num_clients() == 1
    assert dtensor.local_devices("CPU")[:1] == ["/job:localhost/replica:0/task:0/device:CPU:0"]
    assert dtensor.job_name() == "localhost" and dtensor.heartbeat_enabled() is False
    assert dtensor.initialize_accelerator_system() == "CPU"
    mesh = dtensor.create_mesh([("x", 8)], devices=DEVICES)
    with dtensor.default_mesh(mesh):
        assert dtensor.get_default_mesh() == mesh
    assert dtensor.get_default_mesh() is None
    with pytest.raises(AttributeError, match="DTensorCheckpoint"):
        dtensor.DTensorCheckpoint  # noqa: B018
    with pytest.raises(AttributeError, match="has no tf.keras.dtensor either"):  # TF 2.21: AttributeError too
        tf.keras.dtensor.experimental.LayoutMap  # noqa: B018


# TF's Core guide "Distributed training with Core APIs and DTensor" (guide/core/distribution.ipynb) writes Adam as a
# tf.Module whose slots are DVariables, passed to the @tf.function step with the model and the loss and metric
# functions. Three such steps from fixed weights (16 -> 12 -> 4 -> 4, learning rate 1e-2, 32 rows a step): TF 2.21
# without DTensor (tf.Variable, one device) printed these (loss, accuracy, sum of |parameters|). TF 2.21 with
# DTensor printed the same first loss but other parameters from the first update on (62.55142, then losses
# 1.3810236, 1.3844825), which its own single-device program does not give; jdist gives the single-device result.
TF_CORE_GUIDE_STEPS = [(1.4067872, 0.21875, 62.65574), (1.3802171, 0.3125, 62.64784), (1.3859558, 0.1875, 62.6763)]


class _CoreAdam(tf.Module):
    def __init__(self, model_vars, make, learning_rate=1e-2, beta_1=0.9, beta_2=0.999, ep=1e-7):
        self.model_vars, self.learning_rate, self.beta_1, self.beta_2, self.ep = model_vars, learning_rate, beta_1, \
            beta_2, ep
        self.t = 1.0  # a Python number: fixed when the step is traced, as in TF
        self.v_dvar = [make(np.zeros(v.shape, np.float32)) for v in model_vars]
        self.s_dvar = [make(np.zeros(v.shape, np.float32)) for v in model_vars]

    def apply_gradients(self, grads):
        for i, (d_var, var) in enumerate(zip(grads, self.model_vars)):
            self.v_dvar[i].assign(self.beta_1 * self.v_dvar[i] + (1 - self.beta_1) * d_var)
            self.s_dvar[i].assign(self.beta_2 * self.s_dvar[i] + (1 - self.beta_2) * tf.square(d_var))
            v_bc = self.v_dvar[i] / (1 - (self.beta_1 ** self.t))
            s_bc = self.s_dvar[i] / (1 - (self.beta_2 ** self.t))
            var.assign_sub(self.learning_rate * (v_bc / (tf.sqrt(s_bc) + self.ep)))
        self.t += 1.0


class _CoreDense(tf.Module):
    def __init__(self, w, make, activation=tf.identity):
        super().__init__()
        self.activation, self.w, self.b = activation, make(w), make(np.zeros(w.shape[1], np.float32))

    def __call__(self, x):
        return self.activation(tf.add(tf.matmul(x, self.w), self.b))


class _CoreMLP(tf.Module):
    def __init__(self, layers):  # no super().__init__(), as the guide's
        self.layers = layers

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


@tf.function
def _core_step(model, x, y, loss, metric, optimizer):
    with tf.GradientTape() as tape:
        y_pred = model(x)
        batch_loss = loss(y_pred, y)
    optimizer.apply_gradients(tape.gradient(batch_loss, model.trainable_variables))
    return batch_loss, metric(y_pred, y)


@pytest.mark.parametrize("laid_out", [False, True], ids=["one_device", "dtensor"])
def test_a_module_optimizer_with_dvariable_slots_trains_as_tf_on_one_device(laid_out):
    mesh = dtensor.create_mesh([("batch", 8)], devices=DEVICES)
    if laid_out:
        def make(value):
            return dtensor.DVariable(dtensor.copy_to_mesh(tf.constant(value), dtensor.Layout.replicated(
                mesh, np.ndim(value))))
    else:
        make = tf.Variable
    rng = np.random.default_rng(1)
    w = [rng.uniform(-0.5, 0.5, size=s).astype(np.float32) for s in [(16, 12), (12, 4), (4, 4)]]
    xs, ys = rng.normal(size=(3, 32, 16)).astype(np.float32), rng.integers(0, 4, size=(3, 32)).astype(np.int64)
    model = _CoreMLP([_CoreDense(w[0], make, tf.nn.relu), _CoreDense(w[1], make, tf.nn.relu), _CoreDense(w[2], make)])
    optimizer = _CoreAdam(model.trainable_variables, make)

    def loss(y_pred, y):
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=y_pred))

    def metric(y_pred, y):
        return tf.reduce_mean(tf.cast(tf.equal(y, tf.argmax(y_pred, axis=1)), tf.float32))

    steps = []
    for x, y in zip(xs, ys):
        if laid_out:
            x = dtensor.pack(np.split(x, 8), dtensor.Layout(["batch", U], mesh))
            y = dtensor.pack(np.split(y, 8), dtensor.Layout(["batch"], mesh))
        batch_loss, batch_accuracy = _core_step(model, x, y, loss, metric, optimizer)
        size = sum(float(tf.reduce_sum(tf.abs(v))) for v in model.trainable_variables)
        steps.append((float(batch_loss), float(batch_accuracy), size))
    np.testing.assert_allclose(steps, TF_CORE_GUIDE_STEPS, rtol=2e-6)
    assert optimizer.t == 2.0  # incremented once, when the step was traced (TF: 2.0)


def test_unread_steps_over_the_mesh_do_not_pile_up():
    """A loop that never reads its step's results (TF's custom loops often don't) keeps XLA:CPU within its
    programs-in-flight limit: 120 unread steps over 8 devices (without the bound, 300 aborted the process)."""
    model, _, _ = _train("model")
    _, _, xs, ys = mlp_data()
    mesh = model.dense1.weight.layout.mesh
    x, y = repack(xs[0], dtensor.Layout(["batch", U], mesh)), repack(ys[0], dtensor.Layout(["batch"], mesh))
    for _ in range(120):
        out = train_step(model, x, y, 0.01)
    assert np.isfinite(float(out["loss"]))
