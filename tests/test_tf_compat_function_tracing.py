"""`tf.function` traced once per input signature into one compiled program, as TF traces it into a graph.

Every expected value and message below was observed in TF 2.21 (tensorflow-cpu, its Keras 3) running the same
code: the Python body runs once per signature (its `print` once), `tf.print` on every call, variables are read
and assigned on every call, and calls outside what compiles still give TF's values (the body then runs as Python).
"""
from __future__ import annotations

import numpy as np
import pytest

import jdist
import jdist.tf_compat as tf


def test_body_runs_once_per_signature_and_tf_print_every_call(capsys):
    runs = []

    @tf.function
    def double(a):
        runs.append(1)
        print("Tracing with", a)
        tf.print("Executing with", a)
        return a + a

    assert double(tf.constant(1)).numpy() == 2
    assert double(tf.constant(2)).numpy() == 4  # same signature: the compiled program, not the body
    assert double(tf.constant(1.5)).numpy() == 3.0
    out = capsys.readouterr()
    # TF 2.21: 'Tracing with Tensor("a:0", shape=(), dtype=int32)', then the float32 one; tf.print every call
    assert out.out.splitlines() == ['Tracing with Tensor("a:0", shape=(), dtype=int32)',
                                    'Tracing with Tensor("a:0", shape=(), dtype=float32)']
    assert out.err.splitlines() == ["Executing with 1", "Executing with 2", "Executing with 1.5"]
    assert len(runs) == 2 and double.experimental_get_tracing_count() == 2
    assert isinstance(double(tf.constant(3)), tf.Tensor) and str(double(tf.constant(3))) == \
        "tf.Tensor(6, shape=(), dtype=int32)"


def test_variables_passed_in_and_captured_are_read_and_assigned_every_call():
    @tf.function
    def add(v, x):
        v.assign_add(x)
        return v * 2

    a, b = tf.Variable(1.0), tf.Variable(10.0)
    # TF 2.21: 4.0 22.0, a 2.0, b 11.0, one trace (a variable argument traces by its spec)
    assert (add(a, 1.0).numpy(), add(b, 1.0).numpy()) == (4.0, 22.0)
    assert (a.numpy(), b.numpy(), add.experimental_get_tracing_count()) == (2.0, 11.0, 1)

    counter = tf.Variable(0)

    @tf.function
    def step(x):
        counter.assign_add(1)
        return counter.read_value() + x

    assert [int(step(tf.constant(10))) for _ in range(3)] == [11, 12, 13]
    assert counter.numpy() == 3 and step.experimental_get_tracing_count() == 1


def test_a_variable_made_in_the_first_call_traces_twice_and_a_later_one_is_refused(capsys):
    class Counter(tf.Module):
        def __init__(self):
            self.v = None

        @tf.function
        def __call__(self, x):
            print("trace", x.shape)
            if self.v is None:
                self.v = tf.Variable(1.0)
            self.v.assign_add(x)
            return self.v.read_value()

    c = Counter()
    # TF 2.21: prints "trace ()" twice on the first call, gives 2.0 then 4.0, counts 2 traces
    assert (c(tf.constant(1.0)).numpy(), c(tf.constant(2.0)).numpy()) == (2.0, 4.0)
    assert capsys.readouterr().out.splitlines() == ["trace ()", "trace ()"]
    assert c.__call__.experimental_get_tracing_count() == 2

    @tf.function
    def makes_one_each_call(x):
        return tf.Variable(1.0) + x

    with pytest.raises(ValueError, match="tf.function only supports singleton tf.Variables created on the first"):
        makes_one_each_call(1.0)


def test_python_values_are_fixed_at_trace_time_and_side_effects_happen_once():
    scale = 3
    appended = []

    @tf.function
    def f(x):
        appended.append(x)
        return x + scale

    assert f(tf.constant(1)).numpy() == 4
    scale = 10  # noqa: F841 - TF 2.21 still gives 4: the global was read when tracing
    assert f(tf.constant(1)).numpy() == 4
    f(tf.constant(5))
    assert len(appended) == 1  # TF's guide: "The list append only happened once!"


def test_host_state_reads_run_every_call_not_frozen():
    @tf.function
    def draw():
        return tf.random.uniform([2])

    assert not np.array_equal(draw().numpy(), draw().numpy())  # TF 2.21: a fresh draw per call

    it = iter(tf.data.Dataset.range(5))

    @tf.function
    def next_of(iterator):
        return next(iterator)

    # TF 2.21: 0 then 1 (the iterator is read on every call), one trace
    assert (int(next_of(it)), int(next_of(it))) == (0, 1)


def test_input_signature_binds_as_tf():
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def total(x):
        return tf.reduce_sum(x)

    assert total(tf.constant([1.0])).numpy() == 1.0 and total(tf.constant([1.0, 2.0])).numpy() == 3.0
    assert total([1.0, 2.0]).numpy() == 3.0 and total(np.array([1.0, 2.0])).numpy() == 3.0  # converted
    assert total.experimental_get_tracing_count() == 1
    with pytest.raises(TypeError) as error:
        total(tf.constant([[1.0]]))
    assert str(error.value).startswith(
        "Binding inputs to tf.function failed due to `Can not cast TensorSpec(shape=(1, 1), dtype=tf.float32, "
        "name=None) to TensorSpec(shape=(None,), dtype=tf.float32, name=None)`. Received args: (<tf.Tensor: "
        "shape=(1, 1), dtype=float32, numpy=array([[1.]], dtype=float32)>,) and kwargs: {} for signature: (x: "
        "TensorSpec(shape=(None,), dtype=tf.float32, name=None)).")
    with pytest.raises(TypeError, match=r"Can not cast TensorSpec\(shape=\(2,\), dtype=tf.int32"):
        total(tf.constant([1, 2]))


def test_reduce_retracing_generalizes_shapes():
    @tf.function(reduce_retracing=True)
    def g(x):
        return x + 1

    for n in (3, 5, 7, 9):
        np.testing.assert_array_equal(g(tf.range(n)).numpy(), np.arange(n) + 1)
    assert g.experimental_get_tracing_count() == 2  # TF 2.21: (3,), then (None,) for all later lengths


def test_concrete_functions_fix_python_arguments_and_check_dtypes():
    @tf.function
    def pow_(a, b):
        return a ** b

    square = pow_.get_concrete_function(a=tf.TensorSpec(None, tf.float32), b=2)
    assert square(tf.constant(10.0)).numpy() == 100.0
    with pytest.raises(TypeError, match=r"Can not cast 3 to Literal\[2\]"):
        square(tf.constant(10.0), b=3)

    @tf.function
    def double(a):
        return a + a

    strings = double.get_concrete_function(tf.constant("a"))
    assert strings(tf.constant("b")).numpy() == b"bb"
    with pytest.raises(tf.errors.InvalidArgumentError, match="was expected to be a string tensor but is a int32"):
        strings(tf.constant(1))


def test_pretty_printed_concrete_signatures_are_tfs():
    @tf.function
    def double(a):
        return a + a

    double(tf.constant(1))
    double(tf.constant(1.1))
    double(tf.constant("a"))
    blocks = [f"Input Parameters:\n  a (POSITIONAL_OR_KEYWORD): TensorSpec(shape=(), dtype=tf.{t}, name=None)\n"
              f"Output Type:\n  TensorSpec(shape=(), dtype=tf.{t}, name=None)\nCaptures:\n  None"
              for t in ("int32", "float32", "string")]
    assert double.pretty_printed_concrete_signatures() == "\n\n".join(blocks)


def test_gradients_flow_through_a_traced_function_and_eager_mode_switch():
    @tf.function
    def add(a, b):
        return a + b

    v = tf.Variable(1.0)
    with tf.GradientTape() as tape:
        result = add(v, 1.0)
    assert tape.gradient(result, v).numpy() == 1.0  # TF's guide: 1.0

    runs = []

    @tf.function
    def body(x):
        runs.append(1)
        return x * 2

    tf.config.run_functions_eagerly(True)
    try:
        body(tf.constant(1.0))
        body(tf.constant(1.0))
    finally:
        tf.config.run_functions_eagerly(False)
    assert len(runs) == 2  # TF's debugging switch: the Python body on every call


def test_py_function_decorator_runs_every_call_inside_a_traced_function(capsys):
    @tf.py_function(Tout=tf.float32)
    def py_plus(x, y):
        print("Executing eagerly.")
        return x + y

    @tf.function
    def wrapper(x, y):
        print("Tracing.")
        return py_plus(x, y)

    assert wrapper(tf.constant(1.0), tf.constant(2.0)).numpy() == 3.0
    assert wrapper(tf.constant(1.0), tf.constant(2.0)).numpy() == 3.0
    # TF 2.21: "Tracing." then "Executing eagerly.", then "Executing eagerly." alone
    assert capsys.readouterr().out.splitlines() == ["Tracing.", "Executing eagerly.", "Executing eagerly."]


def test_a_keras_layer_inside_matches_the_layer_called_directly():
    layer = tf.keras.layers.Dense(3)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)

    @tf.function
    def apply(inputs):
        return layer(inputs)

    traced = apply(x).numpy()  # builds the layer in the first trace
    np.testing.assert_allclose(traced, np.asarray(layer(x)), rtol=1e-6)
    layer.kernel.assign(np.ones((4, 3), np.float32))  # a later call reads the new weights
    np.testing.assert_allclose(apply(x).numpy(), x @ np.ones((4, 3)) + np.asarray(layer.bias), rtol=1e-6)
    assert apply.experimental_get_tracing_count() == 2  # TF 2.21 counts the first call's two traces too


def test_strategy_run_inside_a_function_called_outside_the_scope():
    strategy = jdist.MirroredStrategy()

    @tf.function
    def step(x):
        return strategy.run(lambda v: v * 2.0, args=(x,))

    result = step(np.ones((4,), np.float32))  # broadcast to every replica: each doubles all of it
    for local in strategy.experimental_local_results(result):
        np.testing.assert_array_equal(np.asarray(local), np.full((4,), 2.0))


def test_generators_in_traced_functions_follow_tfs_variable_rules():
    """TF's random-numbers guide, "Interaction with tf.function" (TF 2.21: the same counts, new draws per call)."""
    outside = tf.random.Generator.from_seed(1)

    @tf.function
    def draw_outside():
        return outside.normal([])

    assert draw_outside().numpy() != draw_outside().numpy()  # the state moves on every call
    made = []

    @tf.function
    def draw_made_inside():
        if not made:
            made.append(tf.random.Generator.from_seed(1))
        return made[0].normal([])

    assert draw_made_inside().numpy() != draw_made_inside().numpy()  # made in the first trace, then kept
    traces = []

    @tf.function
    def takes(g):
        traces.append(1)
        return g.normal([])

    takes(tf.random.Generator.from_seed(1))
    takes(tf.random.Generator.from_seed(2))
    assert len(traces) == 2  # different generator objects retrace

    @tf.function
    def reads(v):
        traces.append(1)
        return v.read_value()

    reads(tf.Variable(1))
    reads(tf.Variable(2))
    assert len(traces) == 3  # variables trace by their spec: one more trace


def test_init_scope_runs_its_block_once_at_trace_time():
    """TF's function guide: the `Model` whose `__call__` assigns inside `tf.init_scope()` prints 1, 1, 1."""
    class Model(tf.Module):
        def __init__(self):
            self.v = tf.Variable(0)
            self.counter = 0

        @tf.function
        def __call__(self):
            if self.counter == 0:
                with tf.init_scope():
                    self.counter += 1
                    self.v.assign_add(1)
            return self.v

    m = Model()
    assert [int(m().numpy()) for _ in range(3)] == [1, 1, 1]
    with tf.init_scope():  # outside a trace it changes nothing
        m.v.assign_add(1)
    assert int(m().numpy()) == 2


def test_another_threads_prints_are_not_held_back_by_a_trace(capsys):
    """A trace holds back its own prints (dropped if it is redone), never another thread's: the other thread's
    line is out while the trace still runs."""
    import threading

    started, printed, seen = threading.Event(), threading.Event(), []

    @tf.function
    def slow(x):
        print("traced")
        started.set()
        printed.wait(10)
        seen.append(capsys.readouterr().out)  # at trace time
        return x * 2

    def other():
        started.wait(10)
        print("from the other thread")
        printed.set()

    thread = threading.Thread(target=other)
    thread.start()
    assert slow(tf.constant(1.0)).numpy() == 2.0
    thread.join(10)
    assert seen == ["from the other thread\n"]  # the trace's own "traced" is held back until it is kept
    assert capsys.readouterr().out == "traced\n"
