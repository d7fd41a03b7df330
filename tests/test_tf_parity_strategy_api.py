"""The tf.distribute Strategy API used directly (no Keras fit), through `jdist.tf_compat`, against TF 2.21.

TF observations (TF 2.21, tensorflow-cpu 2.21.0 with Keras 3; MirroredStrategy over N logical CPUs,
`tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * N)`), each run
as its own process:
- `strategy.run(replica_step, args=batch)` with `batch` a `(x, y)` element of a distributed dataset (the
  tutorials' `args=(dataset_inputs,)` without the tuple) runs: TF hands the replica function the element's
  components. jdist raised "positional args must be a list or tuple".
- `reduce`/`gather` of a plain tensor (not a `run` result) over 4 replicas: `reduce(SUM, t, axis=None)` is
  ValueError "A non-DistributedValues value ... cannot be reduced with the given reduce op ReduceOp.SUM.";
  `reduce(MEAN, t, axis=None)` and `gather(t, axis=0)` return `t`; with `axis=0` the value counts once per replica
  (SUM of [1., 2.] is 12.0, MEAN 1.5). jdist counted it once per replica in all of them (SUM 4x, gather 4 copies).
- `for x, y in dist_dataset: print(x)`: each component prints as TF's PerReplica of each replica's real rows, and
  `x.values` holds them. jdist printed the padded global batch (`tf.Tensor([4. 4. 4. 4.], ...)` for a last batch
  of one row) and had no `.values`.
- `strategy.extended.variable_created_in_scope(v)`: True for a variable made in the strategy's scope, False for
  one made outside; the default strategy's is True for a variable made outside every scope and False for one made
  in a MirroredStrategy's. jdist answered False for OneDeviceStrategy and the default strategy.
- `print(tf.Variable(tf.ones([3, 1])))`: a value of several lines starts on a new line after `numpy=`.
"""
import os
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

FOUR = [f"/cpu:{i}" for i in range(4)]


def _mirrored(n: int = 4):
    return tf.distribute.MirroredStrategy(devices=FOUR[:n])


def _linear_data():
    rs = np.random.RandomState(0)
    return rs.randn(20, 3).astype("float32"), rs.randn(20, 1).astype("float32")


def _train(strategy, unpack: bool, wrap: bool):
    """A custom loop: `run` of a replica step on each distributed batch, gradients all-reduced."""
    x_all, y_all = _linear_data()
    with strategy.scope():
        w = tf.Variable(tf.ones([3, 1]), name="w")
        b = tf.Variable(tf.zeros([1]), name="b")
    dds = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x_all, y_all)).batch(8))

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            per_example = tf.reduce_sum(tf.square(tf.matmul(x, w) + b - y), axis=1)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=8)
        gw, gb = tape.gradient(loss, [w, b])
        gw, gb = tf.distribute.get_replica_context().all_reduce("SUM", [gw, gb])
        w.assign_sub(0.1 * gw)
        b.assign_sub(0.1 * gb)
        return loss

    def train_step(batch):
        per_replica = strategy.run(replica_step, args=tuple(batch) if unpack else batch)
        return strategy.reduce("SUM", per_replica, axis=None)

    step = tf.function(train_step) if wrap else train_step
    losses = [float(step(batch)) for _ in range(2) for batch in dds]
    return losses, w.numpy().ravel(), b.numpy()


@pytest.mark.parametrize("wrap", [False, True], ids=["eager", "tf_function"])
@pytest.mark.parametrize("unpack", [False, True], ids=["args_batch", "args_tuple"])
def test_run_takes_a_distributed_tuple_element_as_args(unpack, wrap):
    losses, w, b = _train(_mirrored(), unpack, wrap)
    # observed, TF 2.21 (Keras 3): `strategy.run(replica_step, args=batch)`, 4 replicas, printed rounded to 5 places
    np.testing.assert_allclose(losses, [6.32871, 1.25807, 0.23074, 1.85923, 0.59509, 0.10883], atol=2e-5)
    np.testing.assert_allclose(w, [0.12145, 0.47151, 0.34396], atol=2e-5)
    np.testing.assert_allclose(b, [-0.31763], atol=2e-5)
    # the same loop on one device
    one_losses, one_w, one_b = _train(tf.distribute.OneDeviceStrategy("/cpu:0"), unpack, wrap)
    np.testing.assert_allclose(losses, one_losses, rtol=1e-5)
    np.testing.assert_allclose(w, one_w, rtol=1e-5)
    np.testing.assert_allclose(b, one_b, rtol=1e-5)


PLAIN = np.array([1.0, 2.0], np.float32)
# observed, TF 2.21 (Keras 3), 4 replicas: what each call gives for the plain tensor [1., 2.] (None: ValueError)
PLAIN_CASES = {
    "reduce_sum_none": (lambda s, t: s.reduce("SUM", t, axis=None), None),
    "reduce_mean_none": (lambda s, t: s.reduce("MEAN", t, axis=None), [1.0, 2.0]),
    "reduce_sum_axis0": (lambda s, t: s.reduce("SUM", t, axis=0), 12.0),
    "reduce_mean_axis0": (lambda s, t: s.reduce("MEAN", t, axis=0), 1.5),
    "gather_axis0": (lambda s, t: s.gather(t, axis=0), [1.0, 2.0]),
}


@pytest.mark.parametrize("case", sorted(PLAIN_CASES))
def test_reduce_and_gather_of_a_plain_tensor(case):
    strategy = _mirrored()
    call, expected = PLAIN_CASES[case]
    if expected is None:
        with pytest.raises(ValueError, match="A non-DistributedValues value .* cannot be reduced with the given "
                                             "reduce op ReduceOp.SUM"):
            call(strategy, tf.constant(PLAIN))
        return
    np.testing.assert_allclose(np.asarray(call(strategy, tf.constant(PLAIN))), expected)
    # a run result of the same value is a PerReplica: every call counts each replica's copy
    out = strategy.run(lambda: tf.constant(PLAIN))
    assert len(out.values) == 4
    assert float(np.sum(strategy.reduce("SUM", out, axis=None))) == pytest.approx(12.0)
    np.testing.assert_allclose(np.asarray(strategy.gather(out, axis=0)), np.tile(PLAIN, 4))


# observed, TF 2.21 (Keras 3): `for x, y in dist_dataset: print(x); print(repr(x)); x.values`, 2 replicas,
# tf.data.Dataset.range(5) mapped to (float x, float 10 x), batch(4): a full batch, then one row
BATCH_TEXT = [
    "PerReplica:{\n  0: tf.Tensor([0. 1.], shape=(2,), dtype=float32),\n  1: tf.Tensor([2. 3.], shape=(2,), "
    "dtype=float32)\n}",
    "PerReplica:{\n  0: tf.Tensor([4.], shape=(1,), dtype=float32),\n  1: tf.Tensor([], shape=(0,), "
    "dtype=float32)\n}",
]
BATCH_REPR = [
    "PerReplica:{\n  0: <tf.Tensor: shape=(2,), dtype=float32, numpy=array([ 0., 10.], dtype=float32)>,\n"
    "  1: <tf.Tensor: shape=(2,), dtype=float32, numpy=array([20., 30.], dtype=float32)>\n}",
    "PerReplica:{\n  0: <tf.Tensor: shape=(1,), dtype=float32, numpy=array([40.], dtype=float32)>,\n"
    "  1: <tf.Tensor: shape=(0,), dtype=float32, numpy=array([], dtype=float32)>\n}",
]


@pytest.mark.parametrize("source", ["distribute_dataset", "from_function"])
def test_unpacked_batch_components_print_as_per_replica(source):
    strategy = _mirrored(2)
    ds = tf.data.Dataset.range(5).map(lambda x: (tf.cast(x, tf.float32), tf.cast(x * 10, tf.float32)))
    if source == "distribute_dataset":
        dds = strategy.experimental_distribute_dataset(ds.batch(4))
    else:
        dds = strategy.distribute_datasets_from_function(lambda ctx: ds.batch(ctx.get_per_replica_batch_size(4)))
    seen = []
    for x, y in dds:
        seen.append((str(x), repr(y), [v.numpy().tolist() for v in x.values]))
        out = strategy.run(lambda a: a * 2, args=(x,))  # the component is still the batch's, masked
        assert [v.numpy().tolist() for v in out.values] == [[2 * e for e in v] for v in seen[-1][2]]
    assert [s for s, _, _ in seen] == BATCH_TEXT
    assert [r for _, r, _ in seen] == BATCH_REPR
    assert [v for _, _, v in seen] == [[[0.0, 1.0], [2.0, 3.0]], [[4.0], []]]
    with pytest.raises(AttributeError, match="values"):
        getattr(tf.constant([1.0]), "values")  # noqa: B009 (a plain tensor has none, as in TF)


# observed, TF 2.21 (Keras 3), 4 logical CPUs: variable_created_in_scope of (v made in the scope, o made outside),
# asked of the strategy and of the default strategy
SCOPES = {
    "mirrored": (lambda: _mirrored(), (True, False, False, True)),
    "one_device": (lambda: tf.distribute.OneDeviceStrategy("/cpu:0"), (True, False, False, True)),
    "default": (lambda: tf.distribute.get_strategy(), (True, True, True, True)),
}


@pytest.mark.parametrize("name", sorted(SCOPES))
def test_variable_created_in_scope(name):
    make, expected = SCOPES[name]
    strategy = make()
    outside = tf.Variable(1.0)
    with strategy.scope():
        inside = tf.Variable(2.0)
    default = tf.distribute.get_strategy().extended
    got = (strategy.extended.variable_created_in_scope(inside), strategy.extended.variable_created_in_scope(outside),
           default.variable_created_in_scope(inside), default.variable_created_in_scope(outside))
    assert got == expected


@pytest.mark.parametrize("shape,text", [
    # observed, TF 2.21 (Keras 3)
    ((3, 1), "<tf.Variable 'w:0' shape=(3, 1) dtype=float32, numpy=\narray([[1.],\n       [1.],\n       [1.]], "
             "dtype=float32)>"),
    ((2,), "<tf.Variable 'w:0' shape=(2,) dtype=float32, numpy=array([1., 1.], dtype=float32)>"),
])
def test_variable_text_of_several_lines(shape, text):
    v = tf.Variable(tf.ones(shape), name="w")
    assert repr(v) == text and str(v) == text


def _replica_id():
    return tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32)


# observed, TF 2.21 (Keras 3), MirroredStrategy over 4 logical CPUs: results every replica returns as the same
# Python object come back as they are; tensors as a PerReplica (None: a PerReplica of each replica's id)
PYTHON_RESULTS = {
    "none": (lambda x: None, None),
    "int": (lambda x: 3, 3),
    "float": (lambda x: 2.5, 2.5),
    "static_rows": (lambda x: x.shape[0], 2),
    "tuple": (lambda x: (1, _replica_id()), (1, None)),
    "dict": (lambda x: {"n": x.shape[0], "id": _replica_id()}, {"n": 2, "id": None}),
}


@pytest.mark.parametrize("wrap", [False, True], ids=["eager", "tf_function"])
@pytest.mark.parametrize("case", sorted(PYTHON_RESULTS))
def test_run_returns_python_values_as_they_are(case, wrap):
    strategy = _mirrored()
    fn, expected = PYTHON_RESULTS[case]

    def step(x):
        return strategy.run(fn, args=(x,))

    call: Any = tf.function(step) if wrap else step
    out = call(tf.constant([1.0, 2.0]))
    if expected is None:
        assert out is None
        return
    is_distributed = lambda v: isinstance(v, tf.distribute.DistributedValues)  # noqa: E731
    assert jax.tree.structure(jax.tree.map(lambda _: 0, out, is_leaf=is_distributed)) == \
        jax.tree.structure(jax.tree.map(lambda _: 0, expected, is_leaf=lambda v: v is None))
    for value, single in zip(jax.tree.leaves(out, is_leaf=is_distributed),
                             jax.tree.leaves(expected, is_leaf=lambda v: v is None)):
        if single is None:  # a tensor result: one per replica
            assert is_distributed(value) and type(value).__name__ == "PerReplica"
            assert [float(v) for v in value.values] == [0.0, 1.0, 2.0, 3.0]
            with pytest.raises(AttributeError, match="'PerReplica' object has no attribute 'numpy'"):
                value.numpy()  # observed, TF 2.21 (Keras 3)
        elif wrap:  # observed, TF 2.21: a tf.function returns a Python number as an int32 / float32 tensor
            assert not is_distributed(value) and float(value) == single
        else:
            assert type(value) is type(single) and value == single


def test_default_replica_context():
    ctx = tf.distribute.get_replica_context()
    # observed, TF 2.21 (Keras 3): outside every scope the replica id is the Python int 0, all_reduce is the
    # identity as a tensor (`print(ctx.all_reduce("SUM", 2.0))` shows `tf.Tensor(2.0, shape=(), dtype=float32)`)
    assert type(ctx.replica_id_in_sync_group) is int and ctx.replica_id_in_sync_group == 0
    assert ctx.num_replicas_in_sync == 1
    assert str(ctx.all_reduce("SUM", 2.0)) == "tf.Tensor(2.0, shape=(), dtype=float32)"
    assert str(ctx.all_reduce("MEAN", tf.constant(2.0))) == "tf.Tensor(2.0, shape=(), dtype=float32)"
    assert str(ctx.merge_call(lambda s, x: x * 2, args=(tf.constant(3.0),))) == \
        "tf.Tensor(6.0, shape=(), dtype=float32)"
    # inside a run of the default strategy the id is a tensor, as TF's
    assert str(tf.distribute.get_strategy().run(
        lambda: tf.distribute.get_replica_context().replica_id_in_sync_group)) == \
        "tf.Tensor(0, shape=(), dtype=int32)"


@pytest.mark.parametrize("make", [lambda: tf.distribute.OneDeviceStrategy("/cpu:0"), lambda: _mirrored(1)],
                         ids=["one_device", "mirrored_1"])
def test_one_replica_batches_print_as_tensors(make):
    strategy = make()
    ds = tf.data.Dataset.range(5).map(lambda x: tf.cast(x, tf.float32)).batch(2)
    for dds in (strategy.experimental_distribute_dataset(ds), strategy.distribute_datasets_from_function(lambda c: ds)):
        # observed, TF 2.21 (Keras 3): the element itself, the last one short
        assert [str(x) for x in dds] == ["tf.Tensor([0. 1.], shape=(2,), dtype=float32)",
                                        "tf.Tensor([2. 3.], shape=(2,), dtype=float32)",
                                        "tf.Tensor([4.], shape=(1,), dtype=float32)"]
    last = list(strategy.experimental_distribute_dataset(ds))[-1]
    doubled, total = strategy.run(lambda v: (v * 2, tf.reduce_sum(v)), args=(last,))
    assert str(doubled) == "tf.Tensor([8.], shape=(1,), dtype=float32)" and float(total) == 4.0


def test_local_results_sit_on_their_replicas_devices():
    strategy = _mirrored(2)
    with strategy.scope():
        v = tf.Variable([1.0, 2.0])
    ids = strategy.run(lambda: tf.distribute.get_replica_context().replica_id_in_sync_group * 2)
    batch = next(iter(strategy.experimental_distribute_dataset(tf.data.Dataset.range(4).batch(4))))
    # observed, TF 2.21 (Keras 3): the i-th part of each has `.device` '/job:localhost/replica:0/task:0/device:CPU:i'
    for parts in (strategy.experimental_local_results(v), ids.values, batch.values):
        assert [p.devices() for p in parts] == [{d} for d in jax.devices()[:2]]
    assert [p.numpy().tolist() for p in strategy.experimental_local_results(v)] == [[1.0, 2.0]] * 2
    assert [p.numpy().tolist() for p in batch.values] == [[0, 1], [2, 3]]  # a one-tensor element's PerReplica
    pair = next(iter(strategy.experimental_distribute_dataset(tf.data.Dataset.range(4).map(lambda i: (i, i)).batch(4))))
    with pytest.raises(AttributeError, match="values"):
        getattr(pair, "values")  # noqa: B009 (TF's element of two components is a tuple)


def test_distributed_optional_is_tfs():
    strategy = _mirrored(2)
    iterator = iter(strategy.experimental_distribute_dataset(tf.data.Dataset.range(4).batch(4)))
    first, end = iterator.get_next_as_optional(), iterator.get_next_as_optional()
    # observed, TF 2.21 (Keras 3)
    assert str(first.has_value()) == "tf.Tensor(True, shape=(), dtype=bool)"
    assert repr(end.has_value()) == "<tf.Tensor: shape=(), dtype=bool, numpy=False>"
    assert [v.numpy().tolist() for v in first.get_value().values] == [[0, 1], [2, 3]]
    assert repr(end.element_spec).startswith("PerReplicaSpec(TensorSpec(shape=(None,), dtype=tf.")
    with pytest.raises(tf.errors.InvalidArgumentError, match="The given optional does not have a value."):
        end.get_value()
