"""AutoGraph in `tf.function` and `strategy.run`: Python `if`/`while`/`for` on tensors converted as TF 2.21 does.

Every expected value and error text below was observed running the same code under TF 2.21 (tensorflow-cpu,
Keras 3.15): prints once per trace (both branches of a tensor `if`, a tensor loop's body once), TF's errors for
branches and loop variables that disagree, Python conditions left as Python, and the concrete-function
attributes TF scripts read.
"""
from __future__ import annotations

import numpy as np
import pytest

import jdist.tf_compat as tf

TWO = ["/cpu:0", "/cpu:1"]


def test_fizzbuzz_traces_each_branch_once_and_prints_every_pass(capfd):
    @tf.function
    def fizzbuzz(n):
        for i in tf.range(1, n + 1):
            print("Tracing for loop")
            if i % 15 == 0:
                print("Tracing fizzbuzz branch")
                tf.print("fizzbuzz")
            elif i % 3 == 0:
                print("Tracing fizz branch")
                tf.print("fizz")
            else:
                print("Tracing default branch")
                tf.print(i)

    fizzbuzz(tf.constant(5))
    fizzbuzz(tf.constant(15))
    out = capfd.readouterr()
    text = out.out + out.err
    # observed, TF 2.21 (the tf.function guide): each "Tracing" line once, then tf.print on every pass
    assert [line for line in text.splitlines() if line.startswith("Tracing")] == [
        "Tracing for loop", "Tracing fizzbuzz branch", "Tracing fizz branch", "Tracing default branch"]
    printed = [line for line in text.splitlines() if not line.startswith("Tracing")]
    assert printed[:5] == ["1", "2", "fizz", "4", "5"] and printed[-1] == "fizzbuzz" and len(printed) == 20
    assert fizzbuzz.experimental_get_tracing_count() == 1


def test_if_on_a_tensor_traces_both_branches_and_a_python_condition_one(capsys):
    @tf.function
    def f(x, flag):
        if flag:
            print("python true")
        else:
            print("python false")
        if x > 0 and x < 10:
            print("main")
            y = x * 2
        else:
            print("else")
            y = -x
        return y if y > 1 else y - 1, not x > 0

    assert f(tf.constant(3.0), True)[0].numpy() == 6.0
    assert capsys.readouterr().out.split() == ["python", "true", "main", "else"]  # observed, TF 2.21
    value, negated = f(tf.constant(-0.5), True)
    assert value.numpy() == pytest.approx(0.5 - 1) and bool(negated.numpy()) is True
    assert capsys.readouterr().out == ""  # the same signature: no retrace
    assert f.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("kind, message", [
    ("else", (ValueError, r"^'y' must also be initialized in the else branch$")),
    ("main", (ValueError, r"^'y' must also be initialized in the main branch$")),
    ("dtypes", (TypeError, r"^'y' has dtype int32 in the main branch, but dtype float32 in the else branch$")),
    ("structure", (TypeError, r"^'y' must have the same nested structure in the main and else branches")),
    ("return", (ValueError, r"^the else branch must also have a return statement\.$")),
    ("vector", (ValueError, r"^condition of if statement expected to be `tf.bool` scalar")),
])
def test_branch_errors_are_tfs(kind, message):
    def else_missing(x):
        if x > 0:
            y = x
        return y

    def main_missing(x):
        if x > 0:
            pass
        else:
            y = x
        return y

    def dtypes(x):
        if x > 0:
            y = 1
        else:
            y = x
        return y

    def structure(x):
        if x > 0:
            y = (x, x)
        else:
            y = x
        return y

    def no_return(x):
        if x > 0:
            return x

    def vector(x):
        if tf.stack([x, x]) > 0:
            y = x
        else:
            y = -x
        return y

    body = dict(zip(["else", "main", "dtypes", "structure", "return", "vector"],
                    [else_missing, main_missing, dtypes, structure, no_return, vector]))[kind]
    error, text = message
    with pytest.raises(error, match=text):  # observed, TF 2.21 (each text)
        tf.function(body)(tf.constant(1.0))


def test_a_variable_set_in_one_branch_and_unused_after_is_no_error():
    @tf.function
    def f(x):
        if x > 0:
            y = x * 2
            print(y.shape)
        return x

    assert f(tf.constant(1.0)).numpy() == 1.0  # observed, TF 2.21


def test_return_in_both_paths_of_a_tensor_if():
    @tf.function
    def f(x):
        if x > 0:
            return x
        return -x

    assert [f(tf.constant(v)).numpy() for v in (-2.0, 3.0)] == [2.0, 3.0]  # observed, TF 2.21
    assert f.experimental_get_tracing_count() == 1


def test_while_loop_on_a_tensor_traces_its_body_once(capsys):
    @tf.function
    def f(n):
        i = 0
        total = tf.constant(0.0)
        while i < n:
            print("trace while")
            total += tf.cast(i, tf.float32)
            i += 1
        return i, total

    i, total = f(tf.constant(4))
    assert (i.numpy(), total.numpy()) == (4, 6.0)  # observed, TF 2.21: a Python 0 loop variable becomes int32
    assert capsys.readouterr().out == "trace while\n"


def test_loop_variable_changing_shape_is_tfs_error():
    @tf.function
    def f(n):
        i = 0
        x = tf.zeros([1])
        while i < n:
            x = tf.concat([x, x], 0)
            i += 1
        return x

    # observed, TF 2.21
    with pytest.raises(ValueError, match=r"^'x' has shape \(1,\) before the loop, but shape \(2,\) after one "
                                         r"iteration\. Use tf\.autograph\.experimental\.set_loop_options"):
        f(tf.constant(3))


def test_break_and_continue_in_a_tensor_loop_and_rows_of_a_tensor():
    @tf.function
    def f(n):
        s = 0
        for i in tf.range(n):
            if i > 3:
                break
            if i % 2 == 0:
                continue
            s += i
        return s

    @tf.function
    def rows(t):
        s = tf.constant(0.0)
        for row in t:
            if tf.reduce_sum(row) > 2.0:
                break
            s += tf.reduce_sum(row)
        return s

    assert f(tf.constant(10)).numpy() == 4  # observed, TF 2.21
    assert rows(tf.constant([[1.0, 0.0], [0.5, 0.5], [3.0, 0.0], [1.0, 1.0]])).numpy() == 2.0  # observed


def test_return_inside_a_tensor_loop_and_a_loop_turning_tensor_are_tfs_errors():
    @tf.function
    def returns(n):
        for i in tf.range(n):
            if i > 3:
                return i
        return -1

    @tf.function
    def turns(n):
        i = tf.constant(0)
        while True:
            i += 1
            if i >= n:
                break
        return i

    with pytest.raises(NotImplementedError, match="^a return statement cannot be placed inside this TensorFlow "
                                                  "loop; this may happen if a return statement depends on a "
                                                  "static Python condition such as a hyperparameter$"):
        returns(tf.constant(10))  # observed, TF 2.21
    with pytest.raises(NotImplementedError, match="^The condition of while loop started as non-Tensor, then "
                                                  "changed to Tensor"):
        turns(tf.constant(5))  # observed, TF 2.21


def test_python_range_loops_in_python_and_nested_functions_are_converted(capsys):
    def helper(x):
        if x > 0:
            print("helper main")
            return x
        return -x

    @tf.function
    def f(x):
        for i in range(3):
            print("pyrange", i)
            x += i
        return helper(x)

    assert f(tf.constant(-9)).numpy() == 6  # observed, TF 2.21
    assert capsys.readouterr().out.splitlines() == ["pyrange 0", "pyrange 1", "pyrange 2", "helper main"]


def test_variables_assigned_in_a_branch_and_a_loop():
    v = tf.Variable(0.0)
    w = tf.Variable(0)

    @tf.function
    def branch(x):
        if x > 0:
            v.assign_add(x)
        else:
            v.assign_sub(1.0)
        return v.read_value()

    @tf.function
    def loop(n):
        for i in tf.range(n):
            w.assign_add(i)
        return w.read_value()

    # observed, TF 2.21: 2.0, then 1.0 (v == 1.0); the loop adds 0+1+2+3 (w == 6)
    assert [branch(tf.constant(2.0)).numpy(), branch(tf.constant(-2.0)).numpy(), v.numpy()] == [2.0, 1.0, 1.0]
    assert loop(tf.constant(4)).numpy() == 6 and w.numpy() == 6


def test_autograph_false_keeps_python_semantics_and_to_graph_converts():
    def g(x):
        if x > 0:
            return x
        return -x

    # observed, TF 2.21: unconverted, `if x > 0` on a traced tensor is TF's OperatorNotAllowedInGraphError
    with pytest.raises(tf.errors.OperatorNotAllowedInGraphError, match="as a Python `bool` is not allowed"):
        tf.function(g, autograph=False)(tf.constant(-2.0))
    assert tf.function(g, autograph=False)(-2.0).numpy() == 2.0  # a Python number: Python's `if`
    assert tf.autograph.to_graph(g)(-3) == 3  # observed, TF 2.21: a Python call of the converted function
    assert tf.autograph.to_graph(g)(tf.constant(-3)).numpy() == 3  # observed, TF 2.21
    wrapped = tf.autograph.experimental.do_not_convert(g)
    assert wrapped is not g and wrapped(-2) == 2  # observed, TF 2.21: a new wrapper
    assert tf.autograph.set_verbosity(0) is None


def test_strategy_run_converts_the_replica_function():
    strategy = tf.distribute.MirroredStrategy(TWO)

    def step(x):
        if x > 0:
            y = x * 2
        else:
            y = -x
        return y

    @tf.function
    def outer(x):
        return strategy.run(step, args=(x,))

    # observed, TF 2.21: 2.0 on each replica, both inside a tf.function and eagerly
    inside = strategy.experimental_local_results(outer(tf.constant(1.0)))
    eager = strategy.experimental_local_results(strategy.run(step, args=(tf.constant(-3.0),)))
    assert [np.asarray(r).item() for r in inside] == [2.0, 2.0]
    assert [np.asarray(r).item() for r in eager] == [3.0, 3.0]


def test_numpy_and_variables_made_on_every_call_are_tfs_errors():
    @tf.function
    def to_numpy(x):
        return x.numpy()

    @tf.function
    def makes_variable(x):
        return tf.Variable(1.0) + x

    # observed, TF 2.21
    with pytest.raises(AttributeError, match="^'SymbolicTensor' object has no attribute 'numpy'$"):
        to_numpy(tf.constant(1.0))
    with pytest.raises(ValueError, match="^tf.function only supports singleton tf.Variables created on the first "
                                         "call"):
        makes_variable(tf.constant(1.0))


def test_concrete_function_structure():
    @tf.function
    def f(x, y=2):
        return {"a": x * 2, "b": (x, y)}

    concrete = f.get_concrete_function(tf.TensorSpec([None, 3], tf.float32))
    spec = "TensorSpec(shape=(None, 3), dtype=tf.float32, name={})"
    # observed, TF 2.21
    assert repr(concrete.structured_input_signature) == f"(({spec.format(repr('x'))}, 2), {{}})"
    outputs = concrete.structured_outputs
    assert sorted(outputs) == ["a", "b"]
    assert [(tuple(o.shape), np.dtype(o.dtype).name) for o in concrete.outputs] == [
        ((None, 3), "float32"), ((None, 3), "float32"), ((), "int32")]
    assert [tuple(i.shape) for i in concrete.inputs] == [(None, 3)]
    assert concrete.name.startswith(b"__inference_f_")
    assert concrete.pretty_printed_signature() == (
        "Input Parameters:\n"
        f"  x (POSITIONAL_OR_KEYWORD): {spec.format(None)}\n"
        "  y (POSITIONAL_OR_KEYWORD): Literal[2]\n"
        "Output Type:\n"
        f"  Dict[['a', {spec.format(None)}], ['b', Tuple[{spec.format(None)}, "
        "TensorSpec(shape=(), dtype=tf.int32, name=None)]]]\n"
        "Captures:\n  None")
    v = tf.Variable(2.0)

    @tf.function
    def g(x):
        return x * v

    assert [var is v for var in g.get_concrete_function(tf.TensorSpec([], tf.float32)).variables] == [True]


def test_constant_tensors_are_graph_tensors_too(capsys):
    @tf.function
    def loops(x):
        for i in tf.range(3):
            print("trace range const")
            x += i
        for r in tf.constant([1, 2]):
            print("trace const rows")
            x += r
        return x

    @tf.function
    def branches(x):
        if tf.constant(True):
            print("const main")
        else:
            print("const else")
        return x

    # observed, TF 2.21: each loop body traced once (6), both branches of a constant condition traced
    assert loops(tf.constant(0)).numpy() == 6
    assert capsys.readouterr().out.splitlines() == ["trace range const", "trace const rows"]
    assert branches(tf.constant(0)).numpy() == 0
    assert capsys.readouterr().out.splitlines() == ["const main", "const else"]


def test_keras_custom_training_step_with_a_tensor_if_under_strategy_run():
    strategy = tf.distribute.MirroredStrategy(TWO)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(1, kernel_initializer="ones")])
        model.build((None, 2))
        opt = tf.keras.optimizers.SGD(0.1)

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - y) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        if loss > 1.0:
            grads = [g * 0.5 for g in grads]
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function
    def train(x, y):
        return strategy.reduce("SUM", strategy.run(step, args=(x, y)), axis=None)

    data = tf.data.Dataset.from_tensor_slices((np.ones((4, 2), "float32"), np.zeros((4, 1), "float32"))).batch(4)
    x, y = next(iter(strategy.experimental_distribute_dataset(data)))
    losses = [float(train(x, y)), float(train(x, y))]
    # observed, TF 2.21 (Keras 3.15): losses 8.0 then 1.28, kernel [0.28, 0.28]
    np.testing.assert_allclose(losses, [8.0, 1.2800002], rtol=1e-5)
    np.testing.assert_allclose(model.get_weights()[0].ravel(), [0.28, 0.28], rtol=1e-5)


def test_keras_training_step_with_a_tensor_if_in_a_tf_function(capsys):
    model = tf.keras.Sequential([tf.keras.layers.Dense(1, kernel_initializer="ones")])
    model.build((None, 2))
    opt = tf.keras.optimizers.SGD(0.1)

    @tf.function
    def train(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - y) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        if loss > 1.0:
            print("trace clip")
            grads = [g * 0.5 for g in grads]
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    x, y = tf.constant(np.ones((4, 2), "float32")), tf.constant(np.zeros((4, 1), "float32"))
    losses = [float(train(x, y)), float(train(x, y))]
    # observed, TF 2.21 (Keras 3.15): losses 4.0 then 1.96, kernel [0.66, 0.66], "trace clip" printed once
    np.testing.assert_allclose(losses, [4.0, 1.9599999], rtol=1e-5)
    np.testing.assert_allclose(model.get_weights()[0].ravel(), [0.66, 0.66], rtol=1e-5)
    assert capsys.readouterr().out == "trace clip\n"


def test_set_loop_options_is_accepted_in_a_tensor_loop_and_a_shape_change_names_the_fix():
    @tf.function
    def count(n):
        x = tf.constant(0)
        i = tf.constant(0)
        while i < n:
            tf.autograph.experimental.set_loop_options(maximum_iterations=10, parallel_iterations=4)
            x += i
            i += 1
        return x

    @tf.function
    def ones(n):
        x = tf.zeros([1])
        for _ in tf.range(n):
            tf.autograph.experimental.set_loop_options(shape_invariants=[(x, tf.TensorShape([1]))])
            x = x + 1.0
        return x

    # observed, TF 2.21: 10 and [3.]
    assert int(count(tf.constant(5))) == 10
    np.testing.assert_array_equal(np.asarray(ones(tf.constant(3))), [3.0])

    @tf.function
    def grows(n):
        x = tf.zeros([1])
        for _ in tf.range(n):
            tf.autograph.experimental.set_loop_options(shape_invariants=[(x, tf.TensorShape([None]))])
            x = tf.concat([x, x], 0)
        return x

    @tf.function
    def grows_unrelaxed(n):
        x = tf.zeros([1])
        for _ in tf.range(n):
            x = tf.concat([x, x], 0)
        return x

    # observed, TF 2.21: with the invariant the loop runs ([0. 0. 0. 0.]); without, TF's ValueError
    np.testing.assert_array_equal(np.asarray(grows(tf.constant(2))), [0.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"'x' has shape \(1,\) before the loop, but shape \(2,\) after one "
                                         "iteration. Use tf.autograph.experimental.set_loop_options"):
        grows_unrelaxed(tf.constant(2))
