"""TF's guides on variables, modules and training loops (`guide/variable`, `guide/intro_to_modules`,
`guide/basics`, `guide/basic_training_loops`) under `import jdist.tf_compat as tf`, and the rules behind them.

Every expected value was observed in TF 2.21 (tensorflow-cpu 2.21.0, Keras 3.15), MirroredStrategy over 2
logical CPUs where a strategy is used: `tf.Variable.dtype` is a `tf.DType`, `v.value()` a method,
`tf.TensorShape(None)` the shape of unknown rank, `tf.Module`'s name scopes and names, and a sliced
`v[i].assign(x)` in `tf.function` and in the replicas of `strategy.run`.
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from tf_parity_common import local_lists, replica_id  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

S = tf.TensorShape


@pytest.fixture(scope="module")
def two():
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


_rid, _locals = replica_id, local_lists


# --- tf.Variable.dtype: TF's DType ---

def test_variable_dtype_is_tf_dtype():
    v = tf.Variable([1.0, 2.0, 3.0])
    # observed in TF 2.21: repr tf.float32, print <dtype: 'float32'> (guide/variable: "DType:  <dtype: 'float32'>")
    assert repr(v.dtype) == "tf.float32" and str(v.dtype) == "<dtype: 'float32'>" and f"{v.dtype}" == str(v.dtype)
    assert isinstance(v.dtype, tf.DType) and v.dtype.name == "float32" and v.dtype.is_floating
    assert v.dtype.as_numpy_dtype is np.float32 and v.dtype.size == 4
    assert v.dtype == tf.float32 and v.dtype == "float32" and v.dtype == np.float32  # all True in TF
    assert {tf.float32: 1}[v.dtype] == 1
    observed = [(1, "tf.int32"), (True, "tf.bool"), (5 + 4j, "tf.complex128"), (1.5, "tf.float32")]
    for value, shown in observed:
        assert repr(tf.Variable(value).dtype) == shown
    assert repr(tf.Variable(1, dtype=tf.int64).dtype) == "tf.int64"
    assert tf.Variable(1).dtype.min == -2147483648  # observed
    # the variable's own text keeps the name: "dtype=float32"
    assert repr(v) == "<tf.Variable 'Variable:0' shape=(3,) dtype=float32, numpy=array([1., 2., 3.], dtype=float32)>"
    assert repr(v.assign([1.0, 1.0, 1.0]).dtype) == "tf.float32"  # the UnreadVariable's too


def test_variable_dtype_feeds_tf_ops_and_functions():
    v = tf.Variable([1.0, 2.0])
    np.testing.assert_array_equal(tf.cast(tf.constant([1, 2]), v.dtype), np.array([1.0, 2.0], np.float32))
    assert tf.zeros([2], dtype=v.dtype).dtype == np.float32
    w = tf.Variable(1, dtype=v.dtype)
    assert repr(w) == "<tf.Variable 'Variable:0' shape=() dtype=float32, numpy=1.0>"  # observed
    assert np.asarray(tf.function(lambda: str(v.dtype))()).item() == b"<dtype: 'float32'>"  # observed: a tensor
    assert tf.constant([1.0]).dtype == v.dtype


def test_keras_optimizers_update_tf_variables():
    # Keras's code reads the variable's dtype and value as its own: observed in TF 2.21 with Keras 3.15
    v = tf.Variable([1.0, 2.0])
    tf.keras.optimizers.SGD(0.5).apply_gradients([(tf.constant([1.0, 1.0]), v)])
    np.testing.assert_array_equal(v.numpy(), [0.5, 1.5])
    w = tf.Variable([1.0, 2.0])
    adam = tf.keras.optimizers.Adam(0.1)
    for _ in range(2):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(w * w)
        adam.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
    np.testing.assert_allclose(w.numpy(), [0.8004099726676941, 1.8001699447631836], rtol=1e-5)


# --- v.value(): TF's method ---

def test_value_is_a_method(two):
    v = tf.Variable([1.0, 2.0, 3.0])
    assert callable(v.value) and repr(v.value).startswith("<bound method BaseResourceVariable.value of")
    np.testing.assert_array_equal(v.value(), [1.0, 2.0, 3.0])
    v.assign([4.0, 5.0, 6.0])
    np.testing.assert_array_equal(v.value(), v.read_value())
    np.testing.assert_array_equal(tf.function(lambda: v.value() * 2)(), [8.0, 10.0, 12.0])
    with two.scope():
        m = tf.Variable([0.0, 10.0, 0.0], aggregation=tf.VariableAggregation.MEAN)
    assert _locals(two, two.run(lambda: m.value() * 2)) == [[0.0, 20.0, 0.0]] * 2  # observed


# --- tf.TensorShape(None): unknown rank ---

def test_tensor_shape_of_unknown_rank():
    u = S(None)
    assert repr(u) == "TensorShape(None)" and str(u) == "<unknown>" and type(u).__name__ == "TensorShape"
    assert isinstance(u, tf.TensorShape)
    assert u.rank is None and u.ndims is None and u.dims is None and u.num_elements() is None
    assert not u and not u.is_fully_defined() and u[0] is None and u[-1] is None and repr(u[1:]) == repr(u)
    for call, text in [(u.as_list, "as_list() is not defined on an unknown TensorShape."),
                       (lambda: len(u), "Cannot take the length of shape with unknown rank."),
                       (lambda: list(u), "Cannot iterate over a shape with unknown rank."),
                       (u.assert_is_fully_defined, "Shape <unknown> is not fully defined")]:
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value) == text
    assert u == S(None) and u == None and not u != S(None)  # noqa: E711 (TF: True)
    assert not u == S([]) and not S([]) == u and not u == S([1])
    assert hash(u) == hash(S(None)) and repr(S(u)) == "TensorShape(None)"
    assert u.is_compatible_with([2, 3]) and S([None, 3]).is_compatible_with(u)
    assert u.merge_with([2, 3]) == S([2, 3]) and S([2, None]).merge_with(u) == S([2, None])
    assert repr(u.concatenate([2])) == repr(S([2]).concatenate(u)) == "TensorShape(None)"
    assert repr(u + [2]) == repr([2] + u) == "TensorShape(None)"
    assert u.with_rank(2) == S([None, None]) and u.assert_has_rank(2) is None
    assert repr(u.most_specific_compatible_shape(S([2]))) == "TensorShape(None)"
    assert repr(tf.TensorSpec(shape=u, dtype=tf.float32)) == "TensorSpec(shape=<unknown>, dtype=tf.float32, name=None)"


def test_tensor_shape_algebra():
    # observed in TF 2.21
    assert S([2, None]).is_compatible_with([2, 3]) and not S([2, None]).is_compatible_with([3, 3])
    assert not S([2, None]).is_compatible_with([2])
    assert S([2, None]).merge_with([None, 4]) == S([2, 4])
    for other, text in [([3, 4], "Shapes (2, None) and (3, 4) are not compatible"),
                        ([3], "Shapes (2, None) and (3,) are not compatible")]:
        with pytest.raises(ValueError) as info:
            S([2, None]).merge_with(other)
        assert str(info.value) == text
    assert S([2]).concatenate([3, None]) == S([2, 3, None]) and S([2, 3]).with_rank(2) == S([2, 3])
    for call, text in [(lambda: S([2, 3]).with_rank(3), "Shape (2, 3) must have rank 3"),
                       (lambda: S([2, 3]).assert_has_rank(3), "Shape (2, 3) must have rank 3"),
                       (lambda: S([2, 3]).assert_is_compatible_with([2, 4]),
                        "Shapes (2, 3) and [2, 4] are incompatible"),
                       (lambda: S([2, None]).assert_is_fully_defined(), "Shape (2, None) is not fully defined")]:
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value) == text
    assert S([2, 3]).assert_is_compatible_with([2, 3]) is None
    assert S([2, 3]).num_elements() == 6 and S([2, None]).num_elements() is None and S([2, 3]).ndims == 2


def test_variable_of_unknown_rank_takes_any_shape():
    w = tf.Variable([1.0, 2.0], shape=S(None))
    assert repr(w) == ("<tf.Variable 'Variable:0' shape=<unknown> dtype=float32, "
                       "numpy=array([1., 2.], dtype=float32)>")  # observed
    w.assign([[1.0, 2.0, 3.0]])
    assert repr(w.shape) == repr(w.get_shape()) == "TensorShape(None)"  # observed: still unknown
    np.testing.assert_array_equal(w.numpy(), [[1.0, 2.0, 3.0]])
    w.assign(3.0)
    w.assign_add(1.0)
    assert float(w.numpy()) == 4.0 and repr(w.shape) == "TensorShape(None)"  # observed (4.0, TensorShape(None))
    with pytest.raises(ValueError) as info:
        w.assign(tf.constant([1, 2]))
    assert str(info.value).startswith("Tensor conversion requested dtype float32 for Tensor with dtype int32")
    assert repr(tf.Variable(1.0, shape=S(None))).endswith("shape=<unknown> dtype=float32, numpy=1.0>")


# --- tf.Module: names, name scopes, variables ---

class Dense(tf.Module):
    def __init__(self, n, name=None):
        super().__init__(name=name)
        with self.name_scope:
            self.w = tf.Variable(tf.ones([2, n]), name="w")
        self.b = tf.Variable(tf.zeros([n]), name="b")
        self.scopes = []

    @tf.Module.with_name_scope
    def __call__(self, x):
        self.scopes.append(tf.get_current_name_scope())
        with tf.name_scope("inner") as scope:
            self.scopes.append(scope)
        return tf.matmul(x, self.w) + self.b


class Seq(tf.Module):
    def __init__(self):
        super().__init__()
        self.layers = [Dense(2, name="d1"), Dense(2)]
        self.extra = {"z": tf.Variable(1.0, trainable=False, name="z"), "a": Dense(1, name="da")}
        self._private = tf.Variable(7.0, name="private")


def test_module_name_scope_names_its_variables():
    m = Seq()
    assert m.name == "seq" and m.name_scope.name == "seq/"
    for _ in range(2):  # the same scope each time
        with m.name_scope as scope:
            assert (scope, tf.get_current_name_scope()) == ("seq/", "seq")
    assert tf.get_current_name_scope() == ""
    names = ["private:0", "z:0", "b:0", "da/w:0", "b:0", "d1/w:0", "b:0", "dense/w:0"]  # observed order and names
    assert [v.name for v in m.variables] == names
    assert [v.name for v in m.trainable_variables] == [n for n in names if n != "z:0"]
    assert [v.name for v in m.non_trainable_variables] == ["z:0"]
    assert [s.name for s in m.submodules] == ["da", "d1", "dense"]
    with tf.name_scope("outer"):
        nested = Dense(1, name="nn")
    assert (nested.name, nested.name_scope.name, nested.w.name, nested.b.name) == (
        "nn", "outer/nn/", "outer/nn/w:0", "outer/b:0")


def test_with_name_scope_runs_the_method_in_the_module_scope():
    d = Dense(2, name="d1")
    np.testing.assert_array_equal(d(tf.ones([1, 2])), [[2.0, 2.0]])
    assert d.scopes == ["d1", "d1/inner/"]
    q = Dense(1, name="q")
    with tf.name_scope("outer"):
        q(tf.ones([1, 2]))
    assert q.scopes == ["q", "q/inner/"]  # observed: the module's scope, not "outer/q"

    class M(tf.Module):
        @tf.Module.with_name_scope
        def go(self, x):
            """doc"""
            return x

    assert (M.go.__name__, M.go.__doc__, M(name="m").go(3)) == ("go", "doc", 3)
    inner = Dense(1, name="inner_mod")

    @tf.function
    def entered():
        with inner.name_scope as scope:
            return scope

    assert np.asarray(entered()).item() == b"inner_mod/"  # observed: a string tensor


def test_module_default_names_are_tf_snake_case():
    observed = {"HTTPServer": "http_server", "ABC": "abc", "A1B": "a1_b", "MyModule": "my_module",
                "Dense2D": "dense2_d", "myModule": "my_module", "ResNet50V2": "res_net50_v2",
                "XMLHttpRequest": "xml_http_request", "MyHTTPModule2": "my_http_module2"}
    assert {cls: type(cls, (tf.Module,), {})().name for cls in observed} == observed
    assert tf.Module().name == "module"


def test_module_flatten_keywords():
    class Inner(tf.Module):
        def __init__(self):
            super().__init__()
            self.v = tf.Variable(1.0, name="iv")

    class Outer(tf.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()
            self.w = tf.Variable(2.0, name="ow")

    o = Outer()
    is_var = lambda x: isinstance(x, tf.Variable)  # noqa: E731
    assert [v.name for v in o._flatten(recursive=False, predicate=is_var)] == ["ow:0"]  # observed
    found = o._flatten(predicate=lambda x: isinstance(x, (tf.Variable, tf.Module)))
    assert [type(x).__name__ for x in found][0] == "Inner" and len(found) == 3


def test_module_checkpoint_round_trip(tmp_path):
    a = Seq()
    for v in a.variables:
        v.assign(v + 1.0)
    path = tf.train.Checkpoint(model=a).save(str(tmp_path / "ck"))
    b = Seq()
    tf.train.Checkpoint(model=b).restore(path).assert_consumed()
    # observed in TF 2.21
    assert os.path.basename(path) == "ck-1"
    assert [float(np.sum(v.numpy())) for v in b.variables] == [8.0, 2.0, 1.0, 4.0, 2.0, 8.0, 2.0, 8.0]
    assert [n for n, _ in tf.train.list_variables(path)] == [
        "_CHECKPOINTABLE_OBJECT_GRAPH", "model/_private/.ATTRIBUTES/VARIABLE_VALUE",
        "model/extra/a/b/.ATTRIBUTES/VARIABLE_VALUE", "model/extra/a/w/.ATTRIBUTES/VARIABLE_VALUE",
        "model/extra/z/.ATTRIBUTES/VARIABLE_VALUE", "model/layers/0/b/.ATTRIBUTES/VARIABLE_VALUE",
        "model/layers/0/w/.ATTRIBUTES/VARIABLE_VALUE", "model/layers/1/b/.ATTRIBUTES/VARIABLE_VALUE",
        "model/layers/1/w/.ATTRIBUTES/VARIABLE_VALUE", "save_counter/.ATTRIBUTES/VARIABLE_VALUE"]


# --- v[i].assign(x) traced: in tf.function and in the replicas of strategy.run ---

def test_sliced_assign_in_tf_function():
    v = tf.Variable([1.0, 2.0, 3.0])

    @tf.function
    def f(x):
        v[1].assign(x)
        return v.value() * 2

    np.testing.assert_array_equal(f(tf.constant(7.0)), [2.0, 14.0, 6.0])  # observed
    np.testing.assert_array_equal(v.numpy(), [1.0, 7.0, 3.0])
    # only a slice of a variable has `assign`, traced or not (observed: False, True)
    found = tf.function(lambda x: (hasattr(x * 2, "assign"), hasattr(v[0], "assign")))(tf.constant([1.0]))
    assert [bool(b) for b in found] == [False, True]
    assert not hasattr(tf.constant([1.0]), "assign")


@pytest.mark.parametrize("aggregation", ["NONE", "MEAN", "ONLY_FIRST_REPLICA"])
def test_sliced_assign_in_replicas_writes_each_copy(two, aggregation):
    with two.scope():
        v = tf.Variable([1.0, 2.0, 3.0], aggregation=getattr(tf.VariableAggregation, aggregation))

    def same():
        v[1].assign(10.0)
        return v.read_value()

    assert _locals(two, two.run(same)) == [[1.0, 10.0, 3.0]] * 2  # observed, every aggregation
    assert _locals(two, v) == [[1.0, 10.0, 3.0]] * 2

    def own():
        rid = _rid()
        v[0:2].assign(tf.stack([rid, rid + 5.0]))
        return tf.identity(v.value())

    # observed: unaggregated, each replica's copy its own values
    assert _locals(two, tf.function(lambda: two.run(own))()) == [[0.0, 5.0, 3.0], [1.0, 6.0, 3.0]]
    assert _locals(two, v) == [[0.0, 5.0, 3.0], [1.0, 6.0, 3.0]]


def test_sliced_assign_in_replicas_of_outside_variable(two):
    v = tf.Variable([1.0, 2.0, 3.0])

    def own():
        rid = _rid()
        v[0:2].assign(tf.stack([rid, rid + 5.0]))
        return v.read_value()

    two.run(own)
    np.testing.assert_array_equal(v.numpy(), [1.0, 6.0, 3.0])  # observed: the last replica's


# --- the guides' own lines ---

def test_guide_variable_lines():
    a = tf.Variable([2.0, 3.0])
    a.assign([1, 2])
    with pytest.raises(ValueError) as info:
        a.assign([1.0, 2.0, 3.0])
    assert str(info.value) == ("Cannot assign value to variable ' Variable:0': Shape mismatch.The variable shape (2,), "
                               "and the assigned value shape (3,) are incompatible.")  # observed
    my_variable = tf.Variable(tf.constant([[1.0, 2.0], [3.0, 4.0]]))
    assert f"DType:  {my_variable.dtype}" == "DType:  <dtype: 'float32'>"
    assert str(my_variable.shape) == "(2, 2)"


def test_guide_intro_to_modules_lines():
    class SimpleModule(tf.Module):
        def __init__(self, name=None):
            super().__init__(name=name)
            self.a_variable = tf.Variable(5.0, name="train_me")
            self.non_trainable_variable = tf.Variable(5.0, trainable=False, name="do_not_train_me")

        def __call__(self, x):
            return self.a_variable * x + self.non_trainable_variable

    simple = SimpleModule(name="simple")
    assert float(simple(tf.constant(5.0))) == 30.0
    # observed, printed by the guide
    assert str(simple.trainable_variables) == "(<tf.Variable 'train_me:0' shape=() dtype=float32, numpy=5.0>,)"
    assert str(simple.variables) == ("(<tf.Variable 'train_me:0' shape=() dtype=float32, numpy=5.0>, "
                                     "<tf.Variable 'do_not_train_me:0' shape=() dtype=float32, numpy=5.0>)")


def test_guide_basic_training_loop():
    x = tf.cast(tf.linspace(-2, 2, 201), tf.float32)
    y = x * 3.0 + 2.0 + np.random.RandomState(0).normal(size=201).astype("float32")

    class MyModel(tf.Module):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.w = tf.Variable(5.0)
            self.b = tf.Variable(0.0)

        def __call__(self, x):
            return self.w * x + self.b

    model = MyModel()
    assert str(model.variables) == ("(<tf.Variable 'Variable:0' shape=() dtype=float32, numpy=0.0>, "
                                    "<tf.Variable 'Variable:0' shape=() dtype=float32, numpy=5.0>)")  # observed
    loss = lambda target, predicted: tf.reduce_mean(tf.square(target - predicted))  # noqa: E731
    for _ in range(10):
        with tf.GradientTape() as t:
            current = loss(y, model(x))
        dw, db = t.gradient(current, [model.w, model.b])
        model.w.assign_sub(0.1 * dw)
        model.b.assign_sub(0.1 * db)
    # observed in TF 2.21 on the same data: "W = 3.04, b = 1.85, loss=1.09575"
    text = f"W = {model.w.numpy():1.2f}, b = {model.b.numpy():1.2f}, loss={loss(y, model(x)):2.5f}"
    assert text == "W = 3.04, b = 1.85, loss=1.09575"
