"""Distributed values through `jdist.tf_compat`'s strategies, against TF 2.21.

TF observations (TF 2.21, tensorflow-cpu 2.21.0 with Keras 3; MirroredStrategy over N logical CPUs,
`tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * N)`), each run
as its own process:
- `strategy.run` hands back as it is a result that every replica returned as the same object: a tensor made
  outside `run` (`run(lambda: c)`), an argument that is not per-replica returned unchanged, a value
  `ReplicaContext.merge_call` gave back where its function returned plain values (`s.reduce(...)`,
  `s.experimental_local_results(x)`); also in a `tf.function`. jdist returned a PerReplica of N copies.
- `strategy.run(lambda: v)` of a variable made in the scope returns `v` itself (`out is v`), also after the
  function assigned it. jdist raised "strategy.run's function reads the Keras variable 'Variable', which belongs
  to no Keras model, ...".
- `v.assign_add([1.0, 1.0])` of a MirroredStrategy's variable (a Python list) inside `run` adds it; jdist raised
  "unsupported operand type(s) for +: 'DynamicJaxprTracer' and 'list'".
- `repr` of a scalar float tensor shows the Python float (`numpy=0.10000000149011612`); `print` numpy's text
  (`0.1`). jdist showed `numpy=0.1`.
- a custom training loop over 11 examples in global batches of 8 on 4 replicas (the last batch short, one
  replica without examples) and a step over 3 examples on 4 replicas: the numbers below.
"""
import os
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

FOUR = [f"/cpu:{i}" for i in range(4)]
C = np.array([1.0, 2.0], np.float32)


def _mirrored(n: int = 4):
    return tf.distribute.MirroredStrategy(devices=FOUR[:n])


def _replica_id() -> Any:
    return tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32)


def _merged(merge_fn):
    return lambda: tf.distribute.get_replica_context().merge_call(merge_fn, args=(_replica_id(),))


def _cases(c: Any) -> dict:
    """name: (replica function, args); `c` a tensor made outside `run`."""
    return {
        "captured": (lambda: c, ()),
        "argument": (lambda x: x, (c,)),
        "captured_plus_one": (lambda: c + 1.0, ()),
        "made_inside": (lambda: tf.constant([1.0, 2.0]), ()),
        "merge_reduce": (_merged(lambda s, x: s.reduce("SUM", x, axis=None)), ()),
        "merge_identity": (_merged(lambda s, x: x), ()),
        "merge_local_results": (_merged(lambda s, x: s.experimental_local_results(x)), ()),
        "all_reduce_and_merge": (lambda: (
            tf.distribute.get_replica_context().all_reduce("SUM", _replica_id()),
            tf.distribute.get_replica_context().merge_call(lambda s, x: s.reduce("MEAN", x, axis=None),
                                                           args=(_replica_id(),))), ()),
    }


def _per_replica(parts: list) -> str:
    return "PerReplica:{\n" + ",\n".join(f"  {i}: {p}" for i, p in enumerate(parts)) + "\n}"


PAIR = "tf.Tensor([1. 2.], shape=(2,), dtype=float32)"
# observed, TF 2.21 (Keras 3), 4 replicas: `str` of each case's result, eager and in a tf.function alike
SHARED = {
    "captured": PAIR,
    "argument": PAIR,
    "captured_plus_one": _per_replica(["tf.Tensor([2. 3.], shape=(2,), dtype=float32)"] * 4),
    "made_inside": _per_replica([PAIR] * 4),
    "merge_reduce": "tf.Tensor(6.0, shape=(), dtype=float32)",
    "merge_identity": _per_replica([f"tf.Tensor({i}.0, shape=(), dtype=float32)" for i in range(4)]),
    "merge_local_results": "(" + ", ".join(f"<tf.Tensor: shape=(), dtype=float32, numpy={i}.0>"
                                           for i in range(4)) + ")",
    "all_reduce_and_merge": "(" + _per_replica(["<tf.Tensor: shape=(), dtype=float32, numpy=6.0>"] * 4)
                            + ", <tf.Tensor: shape=(), dtype=float32, numpy=1.5>)",
}


@pytest.mark.parametrize("wrap", [False, True], ids=["eager", "tf_function"])
@pytest.mark.parametrize("case", sorted(SHARED))
def test_one_object_of_every_replica_comes_back_as_it_is(case, wrap):
    strategy = _mirrored()
    c = tf.constant(C)
    fn, args = _cases(c)[case]
    def step():
        return strategy.run(fn, args=args)

    call: Any = tf.function(step) if wrap else step
    out = call()
    assert str(out) == SHARED[case]
    if case in ("captured", "argument"):
        # observed, TF 2.21: a plain tensor: one local result, reduce(SUM) refuses it, MEAN and gather return it
        assert not isinstance(out, tf.distribute.DistributedValues)
        assert len(strategy.experimental_local_results(out)) == 1
        with pytest.raises(ValueError, match="A non-DistributedValues value .* cannot be reduced with the given "
                                             "reduce op ReduceOp.SUM"):
            strategy.reduce("SUM", out, axis=None)
        np.testing.assert_allclose(np.asarray(strategy.reduce("MEAN", out, axis=None)), C)
        np.testing.assert_allclose(np.asarray(strategy.gather(out, axis=0)), C)
    elif case == "made_inside":  # each replica's own tensor: counted once per replica
        np.testing.assert_allclose(np.asarray(strategy.reduce("SUM", out, axis=None)), 4 * C)


def test_a_returned_variable_is_the_variable():
    strategy = _mirrored()
    with strategy.scope():
        v = tf.Variable([1.0, 2.0], name="v")
    # observed, TF 2.21 (Keras 3), 4 replicas: `out is v` (a MirroredVariable), in a tuple too, beside a PerReplica
    assert strategy.run(lambda: v) is v
    pair = strategy.run(lambda: (v, v * 2.0))
    assert pair[0] is v and type(pair[1]).__name__ == "PerReplica"
    assert [p.numpy().tolist() for p in pair[1].values] == [[2.0, 4.0]] * 4

    def assign_then_return():
        v.assign_add([1.0, 1.0])  # a Python list, added on every replica (observed, TF 2.21)
        return v

    out = strategy.run(assign_then_return)
    assert out is v and v.numpy().tolist() == [2.0, 3.0]
    assert [p.numpy().tolist() for p in strategy.experimental_local_results(v)] == [[2.0, 3.0]] * 4


@pytest.mark.parametrize("value,dtype,text", [
    # observed, TF 2.21: repr(tensor) | str(tensor)
    (0.1, "float32", ("<tf.Tensor: shape=(), dtype=float32, numpy=0.10000000149011612>",
                      "tf.Tensor(0.1, shape=(), dtype=float32)")),
    (1e-8, "float32", ("<tf.Tensor: shape=(), dtype=float32, numpy=9.99999993922529e-09>",
                       "tf.Tensor(1e-08, shape=(), dtype=float32)")),
    (123456789.0, "float32", ("<tf.Tensor: shape=(), dtype=float32, numpy=123456792.0>",
                              "tf.Tensor(1.2345679e+08, shape=(), dtype=float32)")),
    (0.1, "bfloat16", ("<tf.Tensor: shape=(), dtype=bfloat16, numpy=0.10009765625>",
                       "tf.Tensor(0.100098, shape=(), dtype=bfloat16)")),
    (0.1, "float64", ("<tf.Tensor: shape=(), dtype=float64, numpy=0.1>", "tf.Tensor(0.1, shape=(), dtype=float64)")),
    (2.5, "float32", ("<tf.Tensor: shape=(), dtype=float32, numpy=2.5>", "tf.Tensor(2.5, shape=(), dtype=float32)")),
    (float("nan"), "float32", ("<tf.Tensor: shape=(), dtype=float32, numpy=nan>",
                               "tf.Tensor(nan, shape=(), dtype=float32)")),
    (-0.0, "float32", ("<tf.Tensor: shape=(), dtype=float32, numpy=-0.0>",
                       "tf.Tensor(-0.0, shape=(), dtype=float32)")),
    (3, "int32", ("<tf.Tensor: shape=(), dtype=int32, numpy=3>", "tf.Tensor(3, shape=(), dtype=int32)")),
    (True, "bool", ("<tf.Tensor: shape=(), dtype=bool, numpy=True>", "tf.Tensor(True, shape=(), dtype=bool)")),
    (1 + 2j, "complex64", ("<tf.Tensor: shape=(), dtype=complex64, numpy=(1+2j)>",
                           "tf.Tensor((1+2j), shape=(), dtype=complex64)")),
])
def test_scalar_text(value, dtype, text):
    t = tf.constant(value, getattr(tf, dtype))
    assert (repr(t), str(t)) == text
    # the same number in a printed tuple, and computed on the devices
    assert str((t,)) == f"({text[0]},)"
    if dtype == "float32" and value != 0:
        assert repr(tf.reduce_sum(tf.constant([value], tf.float32))) == text[0]


def _loop_data():
    rs = np.random.RandomState(0)
    return rs.randn(11, 3).astype("float32"), rs.randn(11, 1).astype("float32")


def _train(strategy):
    """A custom loop, SGD applied in the replica function; 11 examples in global batches of 8."""
    x_all, y_all = _loop_data()
    with strategy.scope():
        w = tf.Variable(np.ones([3, 1], "float32"), name="w")
        b = tf.Variable(np.zeros([1], "float32"), name="b")
        optimizer = tf.keras.optimizers.SGD(0.1)
    dds = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x_all, y_all)).batch(8))

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            per_example = tf.reduce_sum(tf.square(tf.matmul(x, w) + b - y), axis=1)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=8)
        optimizer.apply_gradients(zip(tape.gradient(loss, [w, b]), [w, b]))
        return loss

    @tf.function
    def step(batch):
        per_replica = strategy.run(replica_step, args=batch)
        return strategy.reduce("SUM", per_replica, axis=None), per_replica

    out = [step(batch) for batch in dds]
    totals = [float(total) for total, _ in out]
    parts = [[float(p) for p in strategy.experimental_local_results(pr)] for _, pr in out]
    return totals, parts, w.numpy().ravel(), b.numpy()


def test_training_with_a_short_last_batch():
    totals, parts, w, b = _train(_mirrored())
    # observed, TF 2.21 (Keras 3), 4 replicas: the second batch holds 3 examples, the fourth replica none
    np.testing.assert_allclose(totals, [6.803901672363281, 2.616840124130249], rtol=1e-5)
    np.testing.assert_allclose(parts, [[4.79459810256958, 0.11211921274662018, 0.5069013833999634,
                                        1.3902828693389893],
                                       [0.27990227937698364, 1.4773054122924805, 0.8596324324607849, 0.0]],
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w, [0.47257331013679504, 0.5585196018218994, 0.6111154556274414], rtol=1e-5)
    np.testing.assert_allclose(b, [-0.33498120307922363], rtol=1e-5)
    one_totals, _, one_w, one_b = _train(tf.distribute.OneDeviceStrategy("/cpu:0"))  # the same on one device
    np.testing.assert_allclose(totals, one_totals, rtol=1e-5)
    np.testing.assert_allclose(w, one_w, rtol=1e-5)
    np.testing.assert_allclose(b, one_b, rtol=1e-5)


def test_replica_without_examples():
    strategy = _mirrored()
    x_all, y_all = _loop_data()
    w = np.ones([3, 1], "float32")
    dds = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((x_all[:3], y_all[:3])).batch(4))

    def replica_fn(x, y):
        per_example = tf.reduce_sum(tf.square(tf.matmul(x, w) - y), axis=1)
        return (tf.nn.compute_average_loss(per_example, global_batch_size=4), per_example,
                tf.reduce_mean(per_example), tf.reduce_sum(per_example), tf.shape(x)[0])  # pyright: ignore[reportIndexIssue]

    (batch,) = list(dds)
    out = [[np.asarray(p).tolist() for p in r.values] for r in strategy.run(replica_fn, args=batch)]
    # observed, TF 2.21 (Keras 3), 3 examples on 4 replicas: the fourth replica's loss 0.0, its per-example
    # losses empty, their mean nan, its row count 0
    expected = [[6.563188076019287, 3.026008367538452, 0.07267428189516068, 0.0],
                [[26.25275230407715], [12.104033470153809], [0.2906971275806427], []],
                [26.25275230407715, 12.104033470153809, 0.2906971275806427, float("nan")],
                [26.25275230407715, 12.104033470153809, 0.2906971275806427, 0.0],
                [1, 1, 1, 0]]
    for got, want in zip(out, expected):
        assert len(got) == len(want)
        for g, e in zip(got, want):
            np.testing.assert_allclose(g, e, rtol=1e-5)
    single = ((x_all[:3] @ w - y_all[:3]) ** 2).sum(axis=1)  # against numpy on one device
    np.testing.assert_allclose([v for part in out[1] for v in part], single, rtol=1e-5)


@pytest.mark.parametrize("replicas", [1, 2])
def test_what_is_a_distributed_value(replicas):
    strategy = _mirrored(replicas) if replicas > 1 else tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        v = tf.Variable(1.0)
    x, _ = next(iter(strategy.experimental_distribute_dataset(
        tf.data.Dataset.range(4).map(lambda i: (i, i)).batch(4))))
    batch = next(iter(strategy.experimental_distribute_dataset(tf.data.Dataset.range(4).batch(4))))
    out = strategy.run(lambda: _replica_id() + 1.0)
    got = {name: isinstance(value, tf.distribute.DistributedValues) for name, value in [
        ("component", x), ("element", batch), ("run", out), ("variable", v), ("tensor", tf.constant(1.0)),
        ("plain_variable", tf.Variable(1.0)), ("list", [x])]}
    # observed, TF 2.21 (Keras 3): MirroredStrategy over 2 logical CPUs; a OneDeviceStrategy's are all False
    many = replicas > 1
    assert got == {"component": many, "element": many, "run": many, "variable": many, "tensor": False,
                   "plain_variable": False, "list": False}
    if many:
        assert issubclass(type(out), tf.distribute.DistributedValues)
        assert [np.asarray(p).tolist() for p in strategy.experimental_local_results(x)] == [[0, 1], [2, 3]]


# observed, TF 2.21 (Keras 3), 2 replicas, elements {"a": float32 0..5, "b": int32 0..50 by 10} in batches of 4:
# (len, list, "a" in, "c" in, keys of items(), len(values()), get("c")), then per replica: run(kwargs=element) of
# a * b + 1, run(**kwargs) of a + 1, experimental_local_results(element["b"])
DICT_ELEMENTS = [
    ((2, ["a", "b"], True, False, ["a", "b"], 2, None),
     [[1.0, 11.0], [41.0, 91.0]], [[1.0, 2.0], [3.0, 4.0]], [[0, 10], [20, 30]]),
    ((2, ["a", "b"], True, False, ["a", "b"], 2, None), [[161.0], [251.0]], [[5.0], [6.0]], [[40], [50]]),
]


def test_a_dict_element_is_a_dict():
    strategy = _mirrored(2)
    ds = tf.data.Dataset.from_tensor_slices({"a": np.arange(6, dtype="float32"),
                                             "b": np.arange(6, dtype="int32") * 10}).batch(4)
    seen = []
    for el in strategy.experimental_distribute_dataset(ds):
        shape = (len(el), list(el), "a" in el, "c" in el, [k for k, _ in el.items()], len(list(el.values())),
                 el.get("c"))
        product = strategy.run(lambda a, b: a * tf.cast(b, tf.float32) + 1.0, kwargs=el)
        star = strategy.run(lambda **d: d["a"] + 1.0, kwargs=el)
        seen.append((shape, *([np.asarray(p).tolist() for p in strategy.experimental_local_results(v)]
                              for v in (product, star, el["b"]))))
    assert seen == DICT_ELEMENTS
    # against numpy: a * b + 1 over the real rows, in replica order
    a, b = np.arange(6.0), np.arange(6) * 10
    assert [v for _, rows, _, _ in seen for part in rows for v in part] == list(a * b + 1.0)
