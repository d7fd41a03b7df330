"""TF's guides `function`, `intro_to_graphs` and `advanced_autodiff`, cell by cell: the rules their cells rely on.

Every expected value (printed text, tracing counts, error types and texts, computed values) was observed running
the same code under TF 2.21 (tensorflow-cpu, Keras 3.15) with `import tensorflow as tf`.
"""
from __future__ import annotations

import pytest

import jdist.tf_compat as tf


def test_retracing_on_python_values_not_on_tensors(capsys):
    @tf.function
    def train(num_steps):
        print("Tracing with num_steps = ", num_steps)
        for _ in tf.range(num_steps):
            pass

    train(num_steps=10)
    train(num_steps=20)
    train(num_steps=tf.constant(10))
    train(num_steps=tf.constant(20))
    # observed in TF 2.21, Keras 3.15 (function guide)
    assert capsys.readouterr().out.splitlines() == [
        "Tracing with num_steps =  10", "Tracing with num_steps =  20",
        'Tracing with num_steps =  Tensor("num_steps:0", shape=(), dtype=int32)']
    assert train.experimental_get_tracing_count() == 3


def test_input_signature_with_none_dims_traces_once(capsys):
    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    def s(x):
        print("trace", x.shape)
        return tf.reduce_sum(x)

    assert s(tf.ones([3, 2])).numpy() == 6.0 and s(tf.ones([5, 2])).numpy() == 10.0
    with pytest.raises(TypeError, match=r"Binding inputs to tf.function failed due to `Can not cast "
                       r"TensorSpec\(shape=\(5, 3\), dtype=tf.float32, name=None\) to TensorSpec\(shape=\(None, 2\)"):
        s(tf.ones([5, 3]))
    assert capsys.readouterr().out == "trace (None, 2)\n"  # observed in TF 2.21
    assert s.experimental_get_tracing_count() == 1


def test_reduce_retracing_generalizes_rank_to_unknown(capsys):
    @tf.function(reduce_retracing=True)
    def rr(x):
        print("rr trace", x.shape)
        return x

    for shape in ([2], [3], [2, 2], [3, 3], [4, 5]):
        assert rr(tf.ones(shape)).shape == tuple(shape)
    # observed in TF 2.21: (2,), then (None,), then a rank change gives an unknown shape and no more traces
    assert capsys.readouterr().out.splitlines() == ["rr trace (2,)", "rr trace (None,)", "rr trace <unknown>"]
    assert rr.experimental_get_tracing_count() == 3


def test_run_functions_eagerly_traces_nothing_then_graph_call_traces(capsys):
    @tf.function
    def eg(x):
        print("py", tf.executing_eagerly())
        return x + 1

    tf.config.run_functions_eagerly(True)
    try:
        assert eg(tf.constant(1)).numpy() == 2
        assert eg.experimental_get_tracing_count() == 0
    finally:
        tf.config.run_functions_eagerly(False)
    assert eg(tf.constant(1)).numpy() == 2
    assert eg.experimental_get_tracing_count() == 1  # observed in TF 2.21: 0, then 1
    assert capsys.readouterr().out == "py True\npy False\n"


def test_autograph_false_tensor_if_is_operator_not_allowed():
    @tf.function(autograph=False)
    def g(x):
        if x > 0:
            return x
        return -x

    # observed in TF 2.21: OperatorNotAllowedInGraphError (a TypeError), this text
    with pytest.raises(tf.errors.OperatorNotAllowedInGraphError) as caught:
        g(tf.constant(1.0))
    assert isinstance(caught.value, TypeError)
    assert str(caught.value).startswith("Using a symbolic `tf.Tensor` as a Python `bool` is not allowed. You can "
                                        "attempt the following resolutions to the problem:")
    assert g.experimental_get_tracing_count() == 0


def test_recursion_on_a_tensor_fails_and_on_a_python_number_traces_each_level(capsys):
    @tf.function
    def recursive_fn(n):
        if n > 0:
            return recursive_fn(n - 1)
        else:
            return 1

    # observed in TF 2.21: StagingError "... RecursionError: maximum recursion depth exceeded"
    with pytest.raises(Exception, match="maximum recursion depth exceeded"):
        recursive_fn(tf.constant(5))

    @tf.function
    def traced_levels(n):
        if n > 0:
            print("tracing")
            return traced_levels(n - 1)
        else:
            return 1

    assert traced_levels(5).numpy() == 1
    assert capsys.readouterr().out == "tracing\n" * 5  # observed in TF 2.21


def test_variables_made_on_a_later_call():
    @tf.function
    def later(x):
        if x == 2:
            v = tf.Variable(1.0)
            return v + 1.0
        return 0.0

    assert later(1).numpy() == 0.0
    with pytest.raises(ValueError) as caught:  # observed in TF 2.21: the first call made no variables
        later(2)
    assert str(caught.value).endswith("Creating variables on a non-first call to a function decorated with "
                                      "tf.function.")

    @tf.function
    def every_call(x):
        v = tf.Variable(1.0)
        return v

    with pytest.raises(ValueError, match="tf.function only supports singleton tf.Variables created on the first "
                       "call. Make sure the tf.Variable is only created once or created outside tf.function."):
        every_call(1.0)


def test_to_code_shows_the_converted_source():
    def simple_relu(x):
        if tf.greater(x, 0):
            return x
        else:
            return 0

    code = tf.autograph.to_code(simple_relu)
    # observed in TF 2.21: a str defining tf__simple_relu that calls ag__.if_stmt
    assert isinstance(code, str) and code.startswith("def tf__simple_relu(x):") and "ag__.if_stmt" in code
    lam = tf.autograph.to_code(lambda x: x * 2 if x > 0 else x)
    assert lam.startswith("tf__lam = lambda x: ") and "ag__.if_exp" in lam  # observed in TF 2.21


def test_lambda_is_converted():
    f = tf.function(lambda x: x * 2 if x > 0 else x)
    assert f(tf.constant(1.0)).numpy() == 2.0 and f(tf.constant(-1.0)).numpy() == -1.0  # observed in TF 2.21
    assert f.experimental_get_tracing_count() == 1
    ops = [op.type for op in f.get_concrete_function(tf.constant(1.0)).graph.get_operations()]
    assert ops[0] == "Placeholder" and ops[-1] == "Identity" and len(ops) > 3  # a compiled conditional


def test_concrete_function_graph_nodes_and_inference_fn():
    @tf.function
    def double(a):
        return a + a

    concrete = double.get_concrete_function(tf.constant(1.0))
    # observed in TF 2.21: these three lines, and the operations a, add, Identity
    assert [f"{node.input} -> {node.name}" for node in concrete.graph.as_graph_def().node] == [
        "[] -> a", "['a', 'a'] -> add", "['add'] -> Identity"]
    assert [op.name for op in concrete.graph.get_operations()] == ["a", "add", "Identity"]
    assert concrete.inference_fn(tf.constant(2.0)).numpy() == 4.0  # observed in TF 2.21

    @tf.function
    def mm(x, w):
        return tf.matmul(x, w) * 2.0

    graph = mm.get_concrete_function(tf.TensorSpec([1, 2], tf.float32), tf.TensorSpec([2, 2], tf.float32)).graph
    nodes = graph.as_graph_def().node
    # observed in TF 2.21: placeholders x and w, a matmul of both, a constant, their product, one Identity
    assert [(n.name, n.input) for n in nodes[:2]] == [("x", []), ("w", [])]
    assert nodes[2].input == ["x", "w"] and nodes[3].op == "Const" and nodes[4].name == "mul"
    assert nodes[4].input == [nodes[2].name, nodes[3].name] and nodes[5].input == ["mul"]


def test_captured_inputs_and_unknown_rank_output_type():
    v = tf.Variable(3.0)

    @tf.function
    def cap(x):
        return x * v

    concrete = cap.get_concrete_function(tf.TensorSpec([], tf.float32))
    assert len(concrete.captured_inputs) == 1 and [x.numpy() for x in concrete.variables] == [3.0]  # observed

    @tf.function
    def pw(a, b):
        return a ** b

    square = pw.get_concrete_function(a=tf.TensorSpec(None, tf.float32), b=2)
    unknown = "TensorSpec(shape=<unknown>, dtype=tf.float32, name=None)"
    assert str(square.function_type) == f"(a: {unknown}, b: Literal[2]) -> {unknown}"  # observed in TF 2.21
    assert f"Output Type:\n  {unknown}\n" in str(square)
    assert square(tf.constant([[1.0, 2.0]])).numpy().tolist() == [[1.0, 4.0]]


def test_trace_type_protocol(capsys):
    @tf.function
    def mix(a, b):
        print("trace")
        return a.flavor + b.flavor

    class Apple:
        flavor = tf.constant([1, 2])

    class Mango:
        flavor = tf.constant([3, 4])

    assert mix(Apple(), Mango()).numpy().tolist() == [4, 6]
    assert mix(Apple(), Mango()).numpy().tolist() == [4, 6]
    assert mix.experimental_get_tracing_count() == 2  # observed in TF 2.21: new objects, a new trace

    class FruitType(tf.types.experimental.TraceType):
        def __init__(self, fruit):
            self.fruit_type, self.fruit_value = type(fruit), fruit

        def is_subtype_of(self, other):
            return type(other) is FruitType and self.fruit_type is other.fruit_type

        def most_specific_common_supertype(self, others):
            return self if all(self == o for o in others) else None

        def placeholder_value(self, placeholder_context=None):
            return self.fruit_value

        def __eq__(self, other):
            return type(other) is FruitType and self.fruit_type == other.fruit_type

        def __hash__(self):
            return hash(self.fruit_type)

    class Typed:
        def __tf_tracing_type__(self, context):
            return FruitType(self)

    class Apple2(Typed):
        flavor = tf.constant([1, 2])

    class Mango2(Typed):
        flavor = tf.constant([3, 4])

    first, second = Apple2(), Apple2()
    first.flavor, second.flavor = tf.constant([10, 20]), tf.constant([100, 200])
    assert mix(first, Mango2()).numpy().tolist() == [13, 24]
    assert mix(second, Mango2()).numpy().tolist() == [13, 24]  # observed in TF 2.21: the trace keeps `first`
    assert mix.experimental_get_tracing_count() == 3
    assert mix(Mango2(), Mango2()).numpy().tolist() == [6, 8]
    assert mix.experimental_get_tracing_count() == 4
    assert capsys.readouterr().out == "trace\n" * 4
    with pytest.raises(TypeError, match="Can't instantiate abstract class TraceType"):  # observed in TF 2.21
        tf.types.experimental.TraceType()


def test_custom_gradient_through_an_input_signature_function():
    @tf.custom_gradient
    def clip_gradients(y):
        def backward(dy):
            return tf.clip_by_norm(dy, 0.5)
        return y, backward

    class MyModule(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec(None)])
        def call_custom_grad(self, x):
            return clip_gradients(x)

    v = tf.Variable(2.0)
    with tf.GradientTape() as tape:
        output = MyModule().call_custom_grad(v * v)
    assert tape.gradient(output, v).numpy() == 2.0  # observed in TF 2.21 (advanced_autodiff guide): 4 clipped to 2


def test_branch_shapes_and_loop_dtype():
    @tf.function
    def branches(x):
        if x > 0:
            y = tf.zeros([2])
        else:
            y = tf.zeros([3])
        return y

    assert branches(tf.constant(1.0)).numpy().tolist() == [0.0, 0.0]  # observed in TF 2.21
    assert branches(tf.constant(-1.0)).numpy().tolist() == [0.0, 0.0, 0.0]

    @tf.function
    def loop(n):
        s = tf.constant(0)
        i = 0
        while i < n:
            s = tf.cast(s, tf.float32)
            i += 1
        return s

    with pytest.raises(TypeError, match="'s' has dtype int32 before the loop, but dtype float32 after one "
                       "iteration"):  # observed in TF 2.21
        loop(tf.constant(3))


def test_leaked_tensor_has_no_numpy():
    leaked = []

    @tf.function
    def leaky_function(a):
        leaked.append(a + 1)
        return a + 2

    assert leaky_function(tf.constant(1)).numpy() == 3
    with pytest.raises(AttributeError) as caught:
        leaked[0].numpy()
    assert str(caught.value) == "'SymbolicTensor' object has no attribute 'numpy'"  # observed in TF 2.21
    assert not hasattr(leaked[0], "numpy")

    @tf.function
    def asks_numpy(a):
        return a.numpy()

    with pytest.raises(AttributeError, match="'SymbolicTensor' object has no attribute 'numpy'"):  # observed
        asks_numpy(tf.constant(1))


def test_string_signature_prints_its_argument_as_a_symbolic_tensor(capsys):
    @tf.function
    def double(a):
        print("Tracing with", a)
        return a + a

    assert double(tf.constant("a")).numpy() == b"aa" and double(tf.constant("b")).numpy() == b"bb"
    # observed in TF 2.21 (function guide): one trace, its argument printed as a symbolic tensor
    assert capsys.readouterr().out == 'Tracing with Tensor("a:0", shape=(), dtype=string)\n'
    assert str(tf.constant("a")) == "tf.Tensor(b'a', shape=(), dtype=string)"


def test_a_second_optimizer_on_a_later_call_is_tfs_value_error():
    opt1 = tf.keras.optimizers.Adam(learning_rate=1e-2)
    opt2 = tf.keras.optimizers.Adam(learning_rate=1e-3)

    @tf.function
    def train_step(w, x, y, optimizer):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(w * x - y))
        gradients = tape.gradient(loss, [w])
        optimizer.apply_gradients(zip(gradients, [w]))

    w, x, y = tf.Variable(2.0), tf.constant([-1.0]), tf.constant([2.0])
    train_step(w, x, y, opt1)
    # observed in TF 2.21 (function guide): w 1.9900001, two traces (the first call made variables)
    assert abs(w.numpy() - 1.9900001) < 1e-6 and train_step.experimental_get_tracing_count() == 2
    with pytest.raises(ValueError, match="tf.function only supports singleton tf.Variables created on the first "
                       "call"):
        train_step(w, x, y, opt2)
    assert abs(w.numpy() - 1.9900001) < 1e-6 and train_step.experimental_get_tracing_count() == 2
    train_step(w, x, y, opt1)
    assert abs(w.numpy() - 1.9800009) < 1e-6 and train_step.experimental_get_tracing_count() == 2
