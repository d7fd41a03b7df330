"""Tensors as TF scripts print and index them (jdist.tfdata.tensor_text, HostTensor).

Every expected string was printed by TF 2.21 (tensorflow-cpu 2.21.0) for the same expression."""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

# (expression, TF's str(), TF's repr()), observed.
OBSERVED = [
    ("tf.constant([1, 2])", "tf.Tensor([1 2], shape=(2,), dtype=int32)",
     "<tf.Tensor: shape=(2,), dtype=int32, numpy=array([1, 2], dtype=int32)>"),
    ("tf.constant(3.5)", "tf.Tensor(3.5, shape=(), dtype=float32)", "<tf.Tensor: shape=(), dtype=float32, numpy=3.5>"),
    ("tf.constant([[1.5, 2], [3, 4]])", "tf.Tensor(\n[[1.5 2. ]\n [3.  4. ]], shape=(2, 2), dtype=float32)",
     "<tf.Tensor: shape=(2, 2), dtype=float32, numpy=\narray([[1.5, 2. ],\n       [3. , 4. ]], dtype=float32)>"),
    ("tf.constant('ab')", "tf.Tensor(b'ab', shape=(), dtype=string)", None),
    ("tf.constant(['ab', 'c'])", None,
     "<tf.Tensor: shape=(2,), dtype=string, numpy=array([b'ab', b'c'], dtype=object)>"),
    ("tf.constant(True)", "tf.Tensor(True, shape=(), dtype=bool)", None),
    ("tf.zeros([0, 3])", "tf.Tensor([], shape=(0, 3), dtype=float32)",
     "<tf.Tensor: shape=(0, 3), dtype=float32, numpy=array([], shape=(0, 3), dtype=float32)>"),
    ("tf.range(2000)", "tf.Tensor([   0    1    2 ... 1997 1998 1999], shape=(2000,), dtype=int32)",
     "<tf.Tensor: shape=(2000,), dtype=int32, numpy=\narray([   0,    1,    2, ..., 1997, 1998, 1999],\n"
     "      shape=(2000,), dtype=int32)>"),
    ("tf.constant(np.float64(0.1))", "tf.Tensor(0.1, shape=(), dtype=float64)", None),
    ("tf.constant(np.float16(0.1))", "tf.Tensor(0.1, shape=(), dtype=float16)", None),
    ("tf.constant([1 + 2j])", "tf.Tensor([1.+2.j], shape=(1,), dtype=complex128)", None),
    ("tf.constant(np.uint8(3))", "tf.Tensor(3, shape=(), dtype=uint8)", None),
    ("tf.ones([1000, 4])", "tf.Tensor(\n[[1. 1. 1. 1.]\n [1. 1. 1. 1.]\n [1. 1. 1. 1.]\n ...\n [1. 1. 1. 1.]\n"
     " [1. 1. 1. 1.]\n [1. 1. 1. 1.]], shape=(1000, 4), dtype=float32)", None),
]


@pytest.mark.parametrize("expression,text,shown", OBSERVED, ids=[o[0] for o in OBSERVED])
def test_a_tensor_prints_as_tfs(expression, text, shown):
    value = eval(expression)
    if text is not None:
        assert str(value) == text
    if shown is not None:
        assert repr(value) == shown


def test_containers_and_format_strings_print_as_tfs():
    # TF 2.21: "[<tf.Tensor: shape=(), dtype=int32, numpy=1>, <tf.Tensor: shape=(2,), dtype=float32, numpy=array([1.,
    # 2.], dtype=float32)>]", "(<tf.Tensor: ...numpy=1>,)", "{'a': <tf.Tensor: ...numpy=1>}", and an f-string shows
    # the values: "1.5 and [1 2]"; "%s" is str: "tf.Tensor([1 2], shape=(2,), dtype=int32)".
    one = "<tf.Tensor: shape=(), dtype=int32, numpy=1>"
    assert str([tf.constant(1), tf.constant([1.0, 2.0])]) == (
        f"[{one}, <tf.Tensor: shape=(2,), dtype=float32, numpy=array([1., 2.], dtype=float32)>]")
    assert str((tf.constant(1),)) == f"({one},)"
    assert str({"a": tf.constant(1)}) == f"{{'a': {one}}}"
    assert f"{tf.constant(1.5)} and {tf.constant([1, 2])}" == "1.5 and [1 2]"
    assert "%s" % tf.constant([1, 2]) == "tf.Tensor([1 2], shape=(2,), dtype=int32)"  # noqa: UP031
    assert f"{tf.constant(2.0):.3f}" == "2.000"


def test_printed_shape_is_tfs():
    # TF 2.21: print(t.shape) -> (2, 3); repr -> TensorShape([2, 3]); as_list() -> [2, 3]; a scalar's ().
    t = tf.zeros([2, 3])
    assert str(t.shape) == "(2, 3)" and repr(t.shape) == "TensorShape([2, 3])" and t.shape.as_list() == [2, 3]
    assert str(tf.constant(1.0).shape) == "()" and str(tf.constant([1]).shape) == "(1,)"
    assert t.shape == (2, 3) and t.shape.rank == 2
    # TF 2.21: tf.constant(1).device, a tf.data element's and an op result's: the host's CPU.
    assert t.device == tf.constant(1).device == (t + 1).device == "/job:localhost/replica:0/task:0/device:CPU:0"


def test_an_element_and_arithmetic_on_scalars_stay_tensors():
    # TF's guide "Introduction to Tensors": rank_1_tensor[0].numpy(), and (a + b).numpy() of scalars.
    t = tf.constant([2, 3, 5])
    assert t[0].numpy() == 2 and isinstance(t[0].numpy(), np.int32)
    assert str(t[1]) == "tf.Tensor(3, shape=(), dtype=int32)"
    m = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    assert str(m[1, 1]) == "tf.Tensor(4.0, shape=(), dtype=float32)"
    assert m[:, 0].numpy().tolist() == [1.0, 3.0]
    total = tf.constant(2.0) + tf.constant(3.0)
    assert total.numpy() == 5.0 and str(total) == "tf.Tensor(5.0, shape=(), dtype=float32)"
    assert float(total) == 5.0 and int(t[2]) == 5
    with pytest.raises(TypeError):  # as TF's: a tensor is not a dict key (TF names tensor.ref())
        {t[0]: 1}


def test_run_results_of_a_tf_strategy_print_as_tfs(capsys):
    # TF 2.21, guide/random_numbers.ipynb on 2 logical CPUs: "PerReplica:{\n  0: tf.Tensor(-0.87930447, shape=(),
    # dtype=float32),\n  1: tf.Tensor(0.020661574, shape=(), dtype=float32)\n}" (the values are TF's Philox draws).
    strategy = tf.distribute.MirroredStrategy(["cpu:0", "cpu:1"])
    with strategy.scope():
        out = strategy.run(lambda: tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group,
                                           tf.float32) + 0.5)
    print(out)
    assert capsys.readouterr().out == ("PerReplica:{\n  0: tf.Tensor(0.5, shape=(), dtype=float32),\n"
                                       "  1: tf.Tensor(1.5, shape=(), dtype=float32)\n}\n")
    with strategy.scope():
        total = strategy.reduce("SUM", out, axis=None)
    assert float(total) == 2.0


def test_device_results_print_as_tfs(capsys):
    # TF 2.21 on 2 logical CPUs, the same calls (observed): experimental_local_results, a reduce and a Keras model's
    # output (JAX arrays here) print as TF's eager tensors, inside the scope and out.
    strategy = tf.distribute.MirroredStrategy(["cpu:0", "cpu:1"])
    with strategy.scope():
        out = strategy.run(lambda: tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group,
                                           tf.float32) + 0.5)
        print(strategy.experimental_local_results(out))
        print(strategy.reduce("SUM", out, axis=None))
        model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(2, kernel_initializer="ones")])
    print(model(np.ones((1, 2), np.float32)))
    print([model(np.ones((1, 2), np.float32))])
    assert capsys.readouterr().out == (
        "(<tf.Tensor: shape=(), dtype=float32, numpy=0.5>, <tf.Tensor: shape=(), dtype=float32, numpy=1.5>)\n"
        "tf.Tensor(2.0, shape=(), dtype=float32)\n"
        "tf.Tensor([[2. 2.]], shape=(1, 2), dtype=float32)\n"
        "[<tf.Tensor: shape=(1, 2), dtype=float32, numpy=array([[2., 2.]], dtype=float32)>]\n")
