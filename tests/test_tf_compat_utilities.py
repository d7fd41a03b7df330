"""TF's utilities in jdist.tf_compat: the rest of `tf.debugging`, `tf.errors`' classes and codes, `tf.nest`'s checks,
`tf.test`'s helpers, `tf.dtypes.saturate_cast`, and the top-level `tf.name_scope`, `tf.custom_gradient`,
initializers, `tf.DeviceSpec`, `tf.IndexedSlices`, ... against TF 2.21 (tensorflow-cpu 2.21.0) observed with
/work/tfvenv/bin/python: values, dtypes, error types and messages are recorded literally below."""
import collections
import os
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

InvalidArgument = tf.errors.InvalidArgumentError
X = [1.0, -2.0, 3.0]


# ------------------------------------------------------------------------------------------- tf.debugging
@pytest.mark.parametrize("assertion, x, kwargs, expected", [
    # observed, TF 2.21 (eager): the message, the condition, x's shape and dtype, its first `summarize` (3) values
    (tf.debugging.assert_negative, X, {}, "\nCondition x < 0 did not hold element-wise:\n"
                                          "x (shape=(3,) dtype=float32) = \n['1.0', '-2.0', '3.0']"),
    (tf.debugging.assert_negative, X, {"message": "hi"}, "hi.  \nCondition x < 0 did not hold element-wise:\n"
                                                         "x (shape=(3,) dtype=float32) = \n['1.0', '-2.0', '3.0']"),
    (tf.debugging.assert_positive, [-1, -2, -3, -4, -5], {},
     "\nCondition x > 0 did not hold element-wise:\nx (shape=(5,) dtype=int32) = \n['-1', '-2', '-3', '...']"),
    (tf.debugging.assert_positive, [-1, -2, -3, -4, -5], {"summarize": 2},
     "\nCondition x > 0 did not hold element-wise:\nx (shape=(5,) dtype=int32) = \n['-1', '-2', '...']"),
    (tf.debugging.assert_positive, [[0.1, -2.0], [3.0, 4.0]], {},
     "\nCondition x > 0 did not hold element-wise:\nx (shape=(2, 2) dtype=float32) = \n['0.1', '-2.0', '3.0', '...']"),
    (tf.debugging.assert_positive, np.array([0.5, -1.5]), {},
     "\nCondition x > 0 did not hold element-wise:\nx (shape=(2,) dtype=float64) = \n['0.5', '-1.5']"),
    (tf.debugging.assert_negative, 2.5, {}, "\nCondition x < 0 did not hold element-wise:\n"
                                            "x (shape=() dtype=float32) = \n2.5"),
    (tf.debugging.assert_non_negative, X, {}, "\nCondition x >= 0 did not hold element-wise:\n"
                                              "x (shape=(3,) dtype=float32) = \n['1.0', '-2.0', '3.0']"),
    (tf.debugging.assert_non_positive, np.array([1, 2], np.int64), {},  # TF 2.21: no line break after the colon
     "\nCondition x <= 0 did not hold element-wise:x (shape=(2,) dtype=int64) = \n['1', '2']"),
    (tf.debugging.assert_positive, [-1, -2], {"summarize": 0},
     "\nCondition x > 0 did not hold element-wise:\nx (shape=(2,) dtype=int32) = \n['...']"),
])
def test_sign_assertions_raise_tfs_message(assertion, x, kwargs, expected):
    with pytest.raises(InvalidArgument) as info:
        assertion(tf.constant(x) if not isinstance(x, np.ndarray) else x, **kwargs)
    assert str(info.value) == expected


@pytest.mark.parametrize("assertion, holding", [
    (tf.debugging.assert_negative, [-1.0, -0.5]), (tf.debugging.assert_positive, [1, 2]),
    (tf.debugging.assert_non_negative, [0.0, 2.0]), (tf.debugging.assert_non_positive, [0, -3]),
    (tf.debugging.assert_negative, np.zeros(0, np.float32)),  # TF 2.21: an empty tensor passes
])
def test_sign_assertions_pass_and_check_inside_compiled_code(assertion, holding, clears_failed_effects):
    assert assertion(tf.constant(holding)) is None  # TF 2.21 returns None

    def compiled(v):
        assertion(v)
        return v * 2

    np.testing.assert_array_equal(jax.jit(compiled)(jnp.asarray(holding)), np.asarray(holding) * 2)
    if np.size(holding):
        with pytest.raises(Exception, match="did not hold element-wise"):
            jax.block_until_ready(jax.jit(compiled)(-jnp.asarray(holding) + jnp.asarray(holding).dtype.type(1)))


def test_sign_assertions_refuse_bool_and_text_as_tf():
    # observed, TF 2.21: TypeError 'Cannot convert 0 to EagerTensor of dtype bool' / '... of dtype string'
    with pytest.raises(TypeError, match="Cannot convert 0 to EagerTensor of dtype bool"):
        tf.debugging.assert_positive(tf.constant([True]))
    with pytest.raises(TypeError, match="Cannot convert 0 to EagerTensor of dtype string"):
        tf.debugging.assert_negative(tf.constant(["a"]))


@pytest.mark.parametrize("condition, data, kwargs, expected", [
    # observed, TF 2.21 (eager)
    (tf.constant(False), [tf.constant(X), "text"], {},
     "Expected 'tf.Tensor(False, shape=(), dtype=bool)' to be true. Summarized data: 1.0, -2.0, 3.0\nb'text'"),
    (False, [tf.constant(X), 3], {}, "Expected 'False' to be true. Summarized data: 1.0, -2.0, 3.0\n3"),
    (False, [tf.range(10)], {"summarize": 3}, "Expected 'False' to be true. Summarized data: 0, 1, 2, ..."),
    (False, [tf.range(5), tf.constant([[1.5, 2.0], [3.0, 4.0]]), "s", tf.constant(["a", "b"])], {},
     "Expected 'False' to be true. Summarized data: 0, 1, 2, ...\n1.5, 2.0, 3.0, ...\nb's'\nb'a', b'b'"),
    (False, [tf.range(5)], {"summarize": 10}, "Expected 'False' to be true. Summarized data: 0, 1, 2, 3, 4"),
    (np.bool_(False), [np.arange(3), 2.5], {}, "Expected 'False' to be true. Summarized data: 0, 1, 2\n2.5"),
    (tf.constant(False), [], {}, "Expected 'tf.Tensor(False, shape=(), dtype=bool)' to be true. Summarized data: "),
    (tf.constant([False]), [1], {},
     "Expected 'tf.Tensor([False], shape=(1,), dtype=bool)' to be true. Summarized data: 1"),
])
def test_assert_raises_tfs_message(condition, data, kwargs, expected):
    with pytest.raises(InvalidArgument) as info:
        tf.debugging.Assert(condition, data, **kwargs)
    assert str(info.value) == expected


def test_assert_passes_and_checks_when_compiled_code_runs(clears_failed_effects):
    assert tf.debugging.Assert(tf.constant(True), [tf.constant(X)]) is None
    assert tf.Assert is tf.debugging.Assert  # TF 2.21's top-level alias
    with pytest.raises(ValueError, match="truth value of an array with more than one element is ambiguous"):
        tf.debugging.Assert(tf.constant([True, False]), [1])  # observed, TF 2.21: numpy's ValueError

    def compiled(v):
        tf.debugging.Assert(jnp.all(v > 0), [v, "values"])
        return v + 1

    np.testing.assert_array_equal(jax.jit(compiled)(jnp.asarray([1.0, 2.0])), [2.0, 3.0])
    with pytest.raises(Exception, match=r"to be true. Summarized data: 1.0, -1.0\nb'values'"):
        jax.block_until_ready(jax.jit(compiled)(jnp.asarray([1.0, -1.0])))


@pytest.mark.parametrize("call, error, expected", [
    # observed, TF 2.21
    (lambda: tf.debugging.assert_integer(tf.constant(X)), TypeError,
     "Expected \"x\" to be integer type.  Found: tensor of dtype <dtype: 'float32'>"),
    (lambda: tf.debugging.assert_integer(tf.constant(X), message="m"), TypeError,
     "m.  Expected \"x\" to be integer type.  Found: tensor of dtype <dtype: 'float32'>"),
    (lambda: tf.debugging.assert_integer(tf.constant([True])), TypeError,
     "Expected \"x\" to be integer type.  Found: tensor of dtype <dtype: 'bool'>"),
    (lambda: tf.debugging.assert_type(tf.constant(X), tf.int32), TypeError,
     "tensor must be of type tf.int32; got tf.float32"),
    (lambda: tf.debugging.assert_type(tf.constant(X), tf.int32, message="m"), TypeError,
     "m.  tensor must be of type tf.int32; got tf.float32"),
    (lambda: tf.debugging.assert_scalar(tf.constant(X)), ValueError, "Expected scalar shape, saw shape: (3,)."),
    (lambda: tf.debugging.assert_scalar(tf.constant(X), message="m"), ValueError,
     "m.  Expected scalar shape, saw shape: (3,)."),
    (lambda: tf.debugging.assert_rank_at_least(tf.constant(X), 2), ValueError,
     "Tensor  must have rank at least 2.  Received rank 1, shape (3,)"),
    (lambda: tf.debugging.assert_rank_at_least(tf.constant(X), 2, message="m"), ValueError,
     "m.  Tensor  must have rank at least 2.  Received rank 1, shape (3,)"),
    (lambda: tf.debugging.assert_rank_in(tf.constant(X), [0, 2]), ValueError,
     "Tensor  must have rank in (0, 2).  Received rank 1, shape (3,)"),
    (lambda: tf.debugging.assert_same_float_dtype([tf.constant([1.0]), tf.constant([1.0], tf.float64)]),
     ValueError, "[1.], type=<dtype: 'float64'>, must be of the same type (<dtype: 'float32'>) as [1.]."),
    (lambda: tf.debugging.assert_same_float_dtype([tf.constant([1])]), ValueError,
     "Expected floating point type, got <dtype: 'int32'>."),
    (lambda: tf.debugging.assert_same_float_dtype(None, tf.int32), ValueError,
     "Expected floating point type, got <dtype: 'int32'>."),
    (lambda: tf.debugging.assert_proper_iterable("abc"), TypeError,
     "Expected argument \"values\" to be a \"proper\" iterable.  Found: <class 'str'>"),
    (lambda: tf.debugging.assert_proper_iterable(b"abc"), TypeError,
     "Expected argument \"values\" to be a \"proper\" iterable.  Found: <class 'bytes'>"),
    (lambda: tf.debugging.assert_proper_iterable(np.ones(2)), TypeError,
     "Expected argument \"values\" to be a \"proper\" iterable.  Found: <class 'numpy.ndarray'>"),
    (lambda: tf.debugging.assert_proper_iterable(3), TypeError,
     "Expected argument \"values\" to be iterable.  Found: <class 'int'>"),
    (lambda: tf.debugging.assert_none_equal(tf.constant(X), tf.constant([1.0, 0.0, 0.0])), InvalidArgument,
     "Condition x != y did not hold.\nIndices of first 1 different values:\n[[0]]\nCorresponding x values:\n[1.]\n"
     "Corresponding y values:\n[1.]\nFirst 3 elements of x:\n[ 1. -2.  3.]\nFirst 3 elements of y:\n[1. 0. 0.]"),
    (lambda: tf.debugging.assert_none_equal(tf.constant([1, 2, 3]), 2), InvalidArgument,  # no indices: shapes differ
     "Condition x != y did not hold.\nFirst 3 elements of x:\n[1 2 3]\nFirst 1 elements of y:\n[2]"),
    (lambda: tf.debugging.assert_equal(tf.constant([1, 2, 3]), 2), InvalidArgument,
     "Condition x == y did not hold.\nFirst 3 elements of x:\n[1 2 3]\nFirst 1 elements of y:\n[2]"),
    (lambda: tf.debugging.assert_all_finite(tf.constant([1.0, np.nan]), "bad"), InvalidArgument,
     "bad : Tensor had NaN values"),  # TF 2.21 wraps it: "{{function_node ...}} bad : Tensor had NaN values ..."
    (lambda: tf.debugging.assert_all_finite(tf.constant([1.0, np.inf]), "bad"), InvalidArgument,
     "bad : Tensor had Inf values"),
])
def test_static_and_value_checks_raise_tfs_errors(call, error, expected):
    with pytest.raises(error) as info:
        call()
    assert str(info.value) == expected


def test_static_checks_pass_and_return_as_tf():
    x = tf.constant(X)
    # observed, TF 2.21: None for passing checks; assert_same_float_dtype returns the dtype (float32 when none)
    assert tf.debugging.assert_integer(tf.constant([1], tf.uint8)) is None
    assert tf.debugging.assert_type(x, tf.float32) is None and tf.debugging.assert_type(1.0, tf.float32) is None
    assert tf.debugging.assert_scalar(tf.constant(1.0)) is None and tf.debugging.assert_scalar(1.0) is None
    assert tf.debugging.assert_rank_at_least(x, 1) is None and tf.debugging.assert_rank_in(x, [1, 2]) is None
    assert tf.debugging.assert_proper_iterable([1, 2]) is None
    assert tf.debugging.assert_same_float_dtype([x, x]) == tf.float32
    assert tf.debugging.assert_same_float_dtype(None, tf.float64) == tf.float64
    assert tf.debugging.assert_same_float_dtype() == tf.float32
    np.testing.assert_array_equal(tf.debugging.assert_all_finite(tf.constant([1.0, 2.0]), "bad"), [1.0, 2.0])
    with pytest.raises(InvalidArgument):  # observed, TF 2.21: int32 is not among CheckNumerics' dtypes
        tf.debugging.assert_all_finite(tf.constant([1, 2]), "bad")
    with pytest.raises(ValueError, match=r"Expected scalar shape, saw shape: \(2,\)"):  # while tracing, as TF's
        jax.jit(lambda v: tf.debugging.assert_scalar(v))(jnp.ones(2))


def test_debugging_switches_and_top_level_aliases():
    # observed, TF 2.21: the switches read back what was set (filtering is on in a fresh process; other tests in
    # this process may have turned it off, so it is restored, not assumed); five top-level aliases
    filtering, placement = tf.debugging.is_traceback_filtering_enabled(), tf.debugging.get_log_device_placement()
    try:
        tf.debugging.disable_traceback_filtering()
        assert tf.debugging.is_traceback_filtering_enabled() is False
        tf.debugging.enable_traceback_filtering()
        assert tf.debugging.is_traceback_filtering_enabled() is True
        tf.debugging.set_log_device_placement(True)
        assert tf.debugging.get_log_device_placement() is True
        tf.debugging.set_log_device_placement(False)
        assert tf.debugging.get_log_device_placement() is False
    finally:
        (tf.debugging.enable_traceback_filtering if filtering else tf.debugging.disable_traceback_filtering)()
        tf.debugging.set_log_device_placement(placement)
    assert (tf.assert_equal, tf.assert_greater, tf.assert_less, tf.assert_rank) == (
        tf.debugging.assert_equal, tf.debugging.assert_greater, tf.debugging.assert_less, tf.debugging.assert_rank)
    # TF 2.21: True for a float / complex tensor; False for string, bool and a Python number
    assert [tf.debugging.is_numeric_tensor(v) for v in (tf.constant(X), tf.constant(["a"]), 1.0,
                                                         tf.constant([True]), tf.constant([1j]))] == [
        True, False, False, False, True]


# ------------------------------------------------------------------------------------------- tf.errors
CODES = {  # observed, TF 2.21
    "OK": 0, "CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4, "NOT_FOUND": 5,
    "ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8, "FAILED_PRECONDITION": 9, "ABORTED": 10,
    "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12, "INTERNAL": 13, "UNAVAILABLE": 14, "DATA_LOSS": 15,
    "UNAUTHENTICATED": 16,
}


@pytest.mark.parametrize("name, code", [
    ("CancelledError", 1), ("UnknownError", 2), ("InvalidArgumentError", 3), ("DeadlineExceededError", 4),
    ("NotFoundError", 5), ("AlreadyExistsError", 6), ("PermissionDeniedError", 7), ("ResourceExhaustedError", 8),
    ("FailedPreconditionError", 9), ("AbortedError", 10), ("UnimplementedError", 12), ("InternalError", 13),
    ("UnavailableError", 14), ("DataLossError", 15), ("UnauthenticatedError", 16),
])
def test_error_classes_have_tfs_constructor_message_and_code(name, code):
    assert {k: getattr(tf.errors, k) for k in CODES} == CODES
    cls = getattr(tf.errors, name)
    error = cls(None, None, "msg")  # TF 2.21: str(e) == e.message == "msg", e.error_code the class's code
    assert (str(error), error.message, error.error_code, error.op, error.node_def) == ("msg", "msg", code, None, None)
    with pytest.raises(tf.errors.OpError):
        raise error
    assert tf.errors.OpError(None, None, "m", 3).error_code == 3  # TF's OpError(node_def, op, message, error_code)


def test_operator_not_allowed_in_graph_error_is_a_type_error():
    # observed, TF 2.21: OperatorNotAllowedInGraphError's bases are (TypeError,), not OpError
    error = tf.errors.OperatorNotAllowedInGraphError("x")
    assert isinstance(error, TypeError) and not isinstance(error, tf.errors.OpError) and str(error) == "x"


# ------------------------------------------------------------------------------------------- tf.nest
P = collections.namedtuple("P", "a b")
Q = collections.namedtuple("Q", "a b")


@pytest.mark.parametrize("a, b, kwargs, error, detail, entire", [
    # observed, TF 2.21: "More specifically: <detail>" and the two structures with '.' for leaves
    ([1, 2], [1, 2, 3], {}, ValueError, "The two structures don't have the same number of elements. First "
     "structure: type=list str=[1, 2]. Second structure: type=list str=[1, 2, 3]", "[., .]\nEntire second "
     "structure:\n[., ., .]"),
    ([1, (2, 3)], [1, 2, 3], {}, ValueError, 'Substructure "type=tuple str=(2, 3)" is a sequence, while '
     'substructure "type=int str=2" is not', "[., (., .)]\nEntire second structure:\n[., ., .]"),
    ([1, 2], (1, 2, 3), {}, TypeError, "The two namedtuples don't have the same sequence type. First structure "
     "type=list str=[1, 2] has type list, while second structure type=tuple str=(1, 2, 3) has type tuple",
     "[., .]\nEntire second structure:\n(., ., .)"),
    ({"a": 1}, {"b": 1}, {}, ValueError, "The two dictionaries don't have the same set of keys. First structure "
     "has keys type=list str=['a'], while second structure has keys type=list str=['b']",
     "{'a': .}\nEntire second structure:\n{'b': .}"),
    (P(1, 2), Q(1, 2), {}, TypeError, "The two namedtuples don't have the same sequence type. First structure "
     "type=P str=P(a=1, b=2) has type P, while second structure type=Q str=Q(a=1, b=2) has type Q",
     "P(a=., b=.)\nEntire second structure:\nQ(a=., b=.)"),
    ({"a": [1, 2]}, {"a": [1]}, {}, ValueError, "The two structures don't have the same number of elements. "
     "First structure: type=list str=[1, 2]. Second structure: type=list str=[1]",
     "{'a': [., .]}\nEntire second structure:\n{'a': [.]}"),
    ("ab", ["a", "b"], {}, ValueError, "Substructure \"type=list str=['a', 'b']\" is a sequence, while substructure "
     "\"type=str str=ab\" is not", ".\nEntire second structure:\n[., .]"),
    ([], [[]], {"check_types": False}, ValueError, "The two structures don't have the same number of elements. "
     "First structure: type=list str=[]. Second structure: type=list str=[[]]", "[]\nEntire second structure:\n[[]]"),
])
def test_assert_same_structure_raises_tfs_errors(a, b, kwargs, error, detail, entire):
    with pytest.raises(error) as info:
        tf.nest.assert_same_structure(a, b, **kwargs)
    assert str(info.value) == (f"The two structures don't have the same nested structure.\n\nFirst structure: "
                               f"type={type(a).__name__} str={a}\n\nSecond structure: type={type(b).__name__} "
                               f"str={b}\n\nMore specifically: {detail}\nEntire first structure:\n{entire}")


def test_nest_accepts_what_tf_accepts_and_maps_as_tf():
    # observed, TF 2.21: these pass; OrderedDict matches dict; check_types=False lets list match tuple
    for a, b, kwargs in [([1, (2, 3)], [4, (5, 6)], {}), ([1, 2], (1, 2), {"check_types": False}),
                         (P(1, 2), Q(1, 2), {"check_types": False}), (None, 1, {}),
                         ({"a": 1}, collections.OrderedDict(a=1), {}), (tf.constant([1, 2]), 3, {})]:
        assert tf.nest.assert_same_structure(a, b, **kwargs) is None
    assert [tf.nest.is_nested(v) for v in ([], (), {}, [1], P(1, 2), 1, "ab", np.ones(2), tf.constant([1]), None,
                                           {1, 2}, b"x")] == [True] * 5 + [False] * 7
    assert tf.nest.flatten({"b": 1, "a": 2, "c": [3, 4]}) == [2, 1, 3, 4]
    assert tf.nest.flatten(P(a=[1, None], b={"y": 2, "x": 3})) == [1, None, 3, 2]
    assert tf.nest.flatten(None) == [None]
    assert tf.nest.map_structure(lambda x, y: x + y, P(1, 2), P(3, 4)) == P(a=4, b=6)
    assert tf.nest.map_structure(lambda x, y: x + y, [1, 2], (1, 2), check_types=False) == [2, 4]
    with pytest.raises(TypeError, match="don't have the same sequence type"):
        tf.nest.map_structure(lambda x, y: x + y, [1, 2], (1, 2))
    with pytest.raises(ValueError, match="don't have the same number of elements"):
        tf.nest.map_structure(lambda x, y: x + y, [1, 2], [1, 2, 3])


def test_nest_rebuilds_dicts_in_their_own_key_order():
    # observed, TF 2.21: flatten sorts a dict's keys, but map_structure / pack_sequence_as rebuild each dict with
    # the first structure's key order (and its type), nested dicts and namedtuples included
    d = {"b": 1, "a": 2, "c": {"z": 1, "y": 2}}
    mapped = tf.nest.map_structure(lambda x: x * 10, d)
    assert (list(mapped), list(mapped["c"])) == (["b", "a", "c"], ["z", "y"])
    assert mapped == {"b": 10, "a": 20, "c": {"z": 10, "y": 20}}
    packed = tf.nest.pack_sequence_as(d, [1, 2, 3, 4])
    assert (list(packed), packed) == (["b", "a", "c"], {"b": 2, "a": 1, "c": {"z": 4, "y": 3}})
    assert list(tf.nest.map_structure(lambda x, y: x + y, {"b": 1, "a": 2}, {"a": 5, "b": 6})) == ["b", "a"]
    counts = tf.nest.map_structure(lambda x: x, collections.defaultdict(int, {"b": 1, "a": 2}))
    assert (type(counts).__name__, list(counts), counts["new"]) == ("defaultdict", ["b", "a"], 0)
    inside = tf.nest.map_structure(lambda x: -x, [P(a={"q": 1, "p": 2}, b=(3,))])
    assert list(inside[0].a) == ["q", "p"] and inside == [P(a={"q": -1, "p": -2}, b=(-3,))]
    with pytest.raises(ValueError, match="Must provide at least one structure"):
        tf.nest.map_structure(lambda: 1)


# ------------------------------------------------------------------------------------------- tf.test
def test_tf_test_helpers():
    assert tf.test.is_built_with_xla() is True  # JAX compiles with XLA (TF 2.21's wheel: True as well)
    assert tf.test.is_built_with_gpu_support() is tf.test.is_gpu_available()
    assert tf.test.is_built_with_rocm() is False or tf.test.is_gpu_available()
    import platform
    host = platform.machine().lower()
    assert tf.test.is_cpu_target_available("x86") is (host in ("x86_64", "amd64", "i386", "i686"))
    with pytest.raises(AssertionError, match="Unknown CPU target: foo"):  # observed, TF 2.21
        tf.test.is_cpu_target_available("foo")

    class Case:
        pass

    assert tf.test.with_eager_op_as_function(Case) is Case  # TF 2.21: the class itself, both forms
    assert tf.test.with_eager_op_as_function(only_as_function=True)(Case) is Case
    assert tf.test.Benchmark.is_abstract() and not type("B", (tf.test.Benchmark,), {}).is_abstract()


def test_compute_gradient_gives_tfs_jacobians():
    # observed, TF 2.21: (theoretical, numeric), each a tuple of (y size, x size) arrays
    theoretical, numeric = tf.test.compute_gradient(lambda x, y: x * y, [tf.constant([1.0, 2.0]), tf.constant(3.0)])
    for jacobians in (theoretical, numeric):
        np.testing.assert_allclose(jacobians[0], [[3.0, 0.0], [0.0, 3.0]], rtol=1e-3)
        np.testing.assert_allclose(jacobians[1], [[1.0], [2.0]], rtol=1e-3)
        assert jacobians[0].dtype == np.float32
    theoretical, numeric = tf.test.compute_gradient(lambda x: x ** 3, [tf.constant([2.0])], delta=0.1)
    np.testing.assert_allclose(theoretical[0], [[12.0]])
    np.testing.assert_allclose(numeric[0], [[12.0099945]], rtol=1e-6)  # central differences, as TF's
    theoretical, numeric = tf.test.compute_gradient(lambda x: tf.sin(x), [np.array([1.0])])
    assert theoretical[0].dtype == np.float64  # TF 2.21: [[0.54030231]] and [[0.54030222]] (delta 1/1024)
    np.testing.assert_allclose(theoretical[0], [[0.54030231]], rtol=1e-8)
    np.testing.assert_allclose(numeric[0], [[0.54030222]], rtol=1e-8)
    t2, n2 = tf.test.compute_gradient(lambda x: tf.reduce_sum(x, axis=1), [tf.ones([2, 2])])
    np.testing.assert_array_equal(t2[0], [[1, 1, 0, 0], [0, 0, 1, 1]])
    with pytest.raises(AssertionError, match="Cannot compute gradient for unsupported type int32 of argument 0"):
        tf.test.compute_gradient(lambda x: x * 2, [tf.constant([1, 2])])
    with pytest.raises(ValueError, match="`x` must be a list or tuple of values convertible to a Tensor"):
        tf.test.compute_gradient(lambda x: x * 2, tf.constant([1.0, 2.0]))


# ------------------------------------------------------------------------------------------- tf.dtypes
@pytest.mark.parametrize("value, in_dtype, dtype, expected", [
    # observed, TF 2.21
    ([-300.0, 1.7, 300.0, np.nan, np.inf], np.float32, tf.uint8, np.array([0, 1, 255, 0, 255], np.uint8)),
    ([-300, 5, 300], np.int32, tf.int8, np.array([-128, 5, 127], np.int8)),
    ([2**31 - 1], np.int32, tf.float16, np.array([65504.0], np.float16)),
    ([1e10, -1e10], np.float32, tf.float16, np.array([65504.0, -65504.0], np.float16)),
    ([3e9, -3e9, -2.7], np.float64, tf.int32, np.array([2147483647, -2147483648, -2], np.int32)),
    ([3e9, -3e9, 2.9], np.float32, tf.int32, np.array([2147483520, -2147483648, 2], np.int32)),
    ([1 + 2j], np.complex64, tf.float32, np.array([1.0], np.float32)),
    ([1.5], np.float32, tf.complex64, np.array([1.5 + 0j], np.complex64)),
    ([200], np.uint8, tf.int8, np.array([127], np.int8)),
    ([-5], np.int32, tf.uint32, np.array([0], np.uint32)),
])
def test_saturate_cast_clamps_as_tf(value, in_dtype, dtype, expected):
    out = tf.dtypes.saturate_cast(np.array(value, in_dtype), dtype)
    assert out.dtype == expected.dtype
    np.testing.assert_array_equal(out, expected)
    compiled = jax.jit(lambda v: tf.dtypes.saturate_cast(v, dtype))(jnp.asarray(np.array(value, in_dtype)))
    if in_dtype not in (np.float64,) and expected.dtype != np.float16 and not np.isnan(value).any():
        np.testing.assert_array_equal(compiled, expected)  # the same clamp in compiled code


def test_dtypes_complex_and_left_out_dtypes():
    assert tf.dtypes.complex is tf.complex  # TF 2.21: the same function
    np.testing.assert_array_equal(tf.dtypes.complex(tf.constant([1.0]), tf.constant([2.0])), [1 + 2j])
    with pytest.raises(TypeError, match="Cannot find minimum value of <dtype: 'bool'>"):  # observed, TF 2.21
        tf.dtypes.saturate_cast(tf.constant([2.0]), tf.bool)
    with pytest.raises(AttributeError, match="quantized dtypes.*no JAX array type"):
        _ = tf.dtypes.qint8
    with pytest.raises(AttributeError, match="resource and variant dtypes are handles"):
        _ = tf.dtypes.resource


# ------------------------------------------------------------------------------------------- name scopes
def test_name_scope_follows_tfs_eager_rules():
    # observed, TF 2.21 (eager)
    assert tf.get_current_name_scope() == ""
    with tf.name_scope("outer") as outer:
        assert (outer, tf.get_current_name_scope()) == ("outer/", "outer")
        with tf.name_scope("inner") as inner:
            assert (inner, tf.get_current_name_scope()) == ("outer/inner/", "outer/inner")
        with tf.name_scope("outer") as again:
            assert again == "outer/outer/"
        with tf.name_scope("/abs/") as absolute:
            assert (absolute, tf.get_current_name_scope()) == ("/abs/", "/abs")
        with tf.name_scope("") as top:
            assert (top, tf.get_current_name_scope()) == ("", "")
        with tf.name_scope("a/b") as nested:
            assert nested == "outer/a/b/"
        with tf.name_scope("x/") as trailing:
            assert (trailing, tf.get_current_name_scope()) == ("x/", "x")
        assert tf.get_current_name_scope() == "outer"
    with tf.name_scope("outer") as same:
        assert same == "outer/"  # eager TF does not make it "outer_1/"
    assert tf.get_current_name_scope() == "" and tf.name_scope("q").name == "q"
    for bad in (None, 3):
        with pytest.raises(ValueError, match="name for name_scope must be a string."):
            tf.name_scope(bad)

    def scoped(x):
        with tf.name_scope("fn"):
            return x * 2 if tf.get_current_name_scope() == "fn" else x

    compiled: Any = tf.function(scoped)
    assert float(compiled(tf.constant(1.0))) == 2.0


# ------------------------------------------------------------------------------------------- gradients
@tf.custom_gradient
def log1pexp(x):
    e: Any = tf.exp(x)

    def grad(upstream):
        return upstream * (1 - 1 / (1 + e))
    return tf.math.log(1 + e), grad


@tf.custom_gradient
def clip_gradient(x, norm):
    def grad(dy):
        return tf.clip_by_norm(dy, norm), None
    return tf.identity(x), grad


@tf.custom_gradient
def two_outputs(x):
    def grad(d1, d2):
        return d1 * 2 + d2 * 3
    return (x, x), grad


def test_custom_gradient_through_the_tape_and_jax_grad():
    # observed, TF 2.21: log1pexp at [0, 1, 100] is [0.6931472, 1.3132616, inf], gradient [0.5, 0.7310586, 1.0]
    x = tf.constant([0.0, 1.0, 100.0])
    with tf.GradientTape() as tape, np.errstate(over="ignore"):  # exp(100) is inf in float32, as in TF
        tape.watch(x)
        y = log1pexp(x)
    np.testing.assert_allclose(y, [0.6931472, 1.3132616, np.inf], rtol=1e-6)
    np.testing.assert_allclose(tape.gradient(y, x), [0.5, 0.7310586, 1.0], rtol=1e-6)
    np.testing.assert_allclose(jax.grad(lambda v: jnp.sum(log1pexp(v)))(jnp.asarray([0.0, 1.0, 100.0])),
                               [0.5, 0.7310586, 1.0], rtol=1e-6)
    # TF 2.21: the clipped gradient of [3, 4] * 10 is [0.70710677, 0.70710677]; two outputs a*5 + b*7 give 31
    np.testing.assert_allclose(jax.grad(lambda v: jnp.sum(clip_gradient(v, 1.0) * 10.0))(jnp.asarray([3.0, 4.0])),
                               [0.70710677, 0.70710677], rtol=1e-6)
    assert float(jax.grad(lambda v: (lambda a, b: a * 5 + b * 7)(*two_outputs(v)))(1.0)) == 31.0
    assert float(jax.jit(jax.grad(lambda v: jnp.sum(log1pexp(v))))(jnp.asarray([0.0]))[0]) == 0.5


def test_custom_gradient_whose_grad_fn_takes_variables_on_a_function_without_any():
    @tf.custom_gradient
    def with_variables(x):
        def grad(dy, variables=None):
            return dy, []
        return x * 2.0, grad

    assert float(jax.grad(lambda v: with_variables(v))(1.0)) == 1.0  # observed, TF 2.21: its gradient is 1.0


def test_grad_pass_through_recompute_grad_and_no_gradient():
    # observed, TF 2.21: round(2 * 1.3) = 3 with gradient 1; recompute_grad(sin(x) * x) at [1, 2] has gradient
    # [1.3817732, 0.07700372]; no_gradient(3) is TypeError, a second registration a KeyError
    passing = tf.grad_pass_through(lambda z: tf.round(z * 1.3))
    assert float(passing(tf.constant(2.0))) == 3.0
    assert float(jax.grad(passing)(2.0)) == 1.0
    recomputed = tf.recompute_grad(lambda v: jnp.sin(v) * v)
    np.testing.assert_allclose(jax.grad(lambda v: jnp.sum(recomputed(v)))(jnp.asarray([1.0, 2.0])),
                               [1.3817732, 0.07700372], rtol=1e-6)
    np.testing.assert_allclose(recomputed(np.array([1.0, 2.0], np.float32)), [0.84147096, 1.8185948], rtol=1e-6)
    assert tf.no_gradient("JdistTestOp") is None
    with pytest.raises(KeyError, match="Registering two gradient with name 'JdistTestOp'"):
        tf.no_gradient("JdistTestOp")
    with pytest.raises(TypeError, match="op_type must be a string"):
        tf.no_gradient(3)


# ------------------------------------------------------------------------------------------- initializers
def test_initializers_give_tfs_dtypes_values_and_errors():
    # observed, TF 2.21
    out = tf.constant_initializer(3)(shape=[2, 2])
    assert out.dtype == np.int32 and out.tolist() == [[3, 3], [3, 3]]
    out = tf.constant_initializer(3.5)(shape=[2], dtype=tf.float64)
    assert out.dtype == np.float64 and out.tolist() == [3.5, 3.5]
    assert tf.constant_initializer([1, 2, 3, 4])([2, 2]).tolist() == [[1, 2], [3, 4]]
    assert tf.constant_initializer()([2]).tolist() == [0, 0]
    with pytest.raises(TypeError, match=r"has 3 elements, but got `shape` \(2, 2\) with 4 elements"):
        tf.constant_initializer([1, 2, 3])([2, 2])
    with pytest.raises(TypeError, match=r"Keyword argument should be one of \['partition_shape', "
                                        r"'partition_offset'\]. Received: partition_info"):
        tf.constant_initializer(2)(shape=[1], partition_info=None)
    zeros, ones = tf.zeros_initializer()([2]), tf.ones_initializer()([2], dtype="int64")
    assert (zeros.dtype, zeros.tolist(), ones.dtype, ones.tolist()) == (np.float32, [0, 0], np.int64, [1, 1])
    assert tf.ones_initializer()([2], dtype=tf.bool).tolist() == [True, True]
    with pytest.raises(ValueError, match="Argument `dtype` expected to be numeric or boolean. Received "
                                         "<dtype: 'string'>."):
        tf.zeros_initializer()([2], tf.string)
    with pytest.raises(ValueError, match="Argument `dtype` is expected to be floating point. Received: "
                                         "<dtype: 'int32'>."):
        tf.random_normal_initializer()([3], tf.int32)
    with pytest.raises(ValueError, match="Argument `dtype` expected to be numeric or boolean. Received "
                                         "<dtype: 'bool'>."):
        tf.random_uniform_initializer(0, 10, seed=1)([3], tf.bool)
    assert tf.random_normal_initializer().get_config() == {"mean": 0.0, "stddev": 0.05, "seed": None}
    assert tf.random_uniform_initializer().get_config() == {"minval": -0.05, "maxval": 0.05, "seed": None}
    assert tf.constant_initializer.from_config({"value": 2})([1]).tolist() == [2]


def test_random_initializers_draw_seeded_values_in_range():
    normal = tf.random_normal_initializer(0.0, 1.0, seed=1)
    first = normal([1000])
    np.testing.assert_array_equal(first, tf.random_normal_initializer(0.0, 1.0, seed=1)([1000]))  # TF: same too
    assert first.dtype == np.float32 and abs(first.mean()) < 0.15 and 0.85 < first.std() < 1.15
    uniform = tf.random_uniform_initializer(-1.0, 1.0, seed=1)([1000])
    assert uniform.dtype == np.float32 and uniform.min() >= -1.0 and uniform.max() < 1.0
    ints = tf.random_uniform_initializer(0, 10, seed=1)([100], tf.int64)
    assert ints.dtype == np.int64 and ints.min() >= 0 and ints.max() < 10
    assert tf.random_normal_initializer()([4, 3]).shape == (4, 3)
    # observed, TF 2.21: Dense(2, kernel_initializer=tf.constant_initializer(0.5)) on ones([1, 3]) gives [[1.5, 1.5]]
    dense = tf.keras.layers.Dense(2, kernel_initializer=tf.constant_initializer(0.5))
    np.testing.assert_allclose(dense(np.ones([1, 3], np.float32)), [[1.5, 1.5]])


# ------------------------------------------------------------------------------------------- DeviceSpec
@pytest.mark.parametrize("text, fields, canonical", [
    # observed, TF 2.21: (job, replica, task, device_type, device_index), to_string()
    ("/job:worker/replica:0/task:1/device:GPU:0", ("worker", 0, 1, "GPU", 0),
     "/job:worker/replica:0/task:1/device:GPU:0"),
    ("/cpu:0", (None, None, None, "CPU", 0), "/device:CPU:0"),
    ("/gpu:1", (None, None, None, "GPU", 1), "/device:GPU:1"),
    ("GPU:0", (None, None, None, "GPU", 0), "/device:GPU:0"),
    ("/device:CPU:*", (None, None, None, "CPU", None), "/device:CPU:*"),
    ("/job:ps", ("ps", None, None, None, None), "/job:ps"),
    ("/job:ps/task:2", ("ps", None, 2, None, None), "/job:ps/task:2"),
    ("", (None, None, None, None, None), ""),
    ("/task:3/device:TPU:1", (None, None, 3, "TPU", 1), "/task:3/device:TPU:1"),
    ("/device:cpu:0", (None, None, None, "CPU", 0), "/device:CPU:0"),
    ("CPU", (None, None, None, "CPU", None), "/device:CPU:*"),
])
def test_device_spec_parses_as_tf(text, fields, canonical):
    spec = tf.DeviceSpec.from_string(text)
    assert (spec.job, spec.replica, spec.task, spec.device_type, spec.device_index) == fields
    assert spec.to_string() == canonical


def test_device_spec_methods_as_tf():
    spec = tf.DeviceSpec.from_string("/job:worker/replica:0/task:1/device:GPU:0")
    # observed, TF 2.21
    assert repr(spec) == "<DeviceSpec(job=worker, replica=0, task=1, device_type=GPU, device_index=0)>"
    assert spec.replace(job="ps", device_index=1).to_string() == "/job:ps/replica:0/task:1/device:GPU:1"
    assert tf.DeviceSpec(job="w", task=2, device_type="gpu", device_index=1).to_string() == "/job:w/task:2/device:GPU:1"
    assert tf.DeviceSpec(job="w", task="2").task == 2
    merged = spec.make_merged_spec(tf.DeviceSpec.from_string("/job:ps/device:CPU:0"))
    assert merged.to_string() == "/job:ps/replica:0/task:1/device:CPU:0"
    assert tf.DeviceSpec.from_string("/cpu:0") == tf.DeviceSpec(device_type="CPU", device_index=0)
    assert hash(tf.DeviceSpec.from_string("/cpu:0")) == hash(tf.DeviceSpec(device_type="CPU", device_index=0))
    with pytest.raises(ValueError, match=r"Unknown attribute 'foo' is encountered while parsing the device spec: "
                                         r"'/foo:3'."):
        tf.DeviceSpec.from_string("/foo:3")
    with pytest.raises(TypeError, match="unexpected keyword argument 'foo'"):
        spec.replace(foo=1)
    with pytest.raises(AttributeError):
        spec.job = "x"  # TF 2.21: "property 'job' of 'DeviceSpecV2' object has no setter"


# ------------------------------------------------------------------------------------------- tensor utilities
def test_get_static_value_symbolic_tensors_and_inside_function():
    # observed, TF 2.21: a tensor's numpy value, Python values as they are, None for a variable and a traced value
    value = tf.get_static_value(tf.constant([1, 2]))
    assert isinstance(value, np.ndarray) and value.dtype == np.int32 and value.tolist() == [1, 2]
    assert tf.get_static_value(3) == 3 and tf.get_static_value([1, 2]) == [1, 2]
    assert tf.get_static_value(tf.Variable(1.0)) is None
    assert jax.jit(lambda v: jnp.asarray(tf.get_static_value(v) is None))(jnp.ones(2))
    assert (tf.is_symbolic_tensor(tf.constant(1.0)), tf.is_symbolic_tensor(np.ones(1)), tf.is_symbolic_tensor(3)) == (
        False, False, False)
    assert tf.inside_function() is False
    seen = []

    def traced(x):
        seen.append((tf.inside_function(), tf.is_symbolic_tensor(x)))
        return x + 1

    compiled: Any = tf.function(traced)
    compiled(tf.constant(1.0))
    assert seen[0] == (True, True)  # TF 2.21: both True inside a tf.function


def test_control_dependencies_tuple_and_shape_n():
    with tf.control_dependencies([tf.constant(1.0)]) as entered:  # TF 2.21 eager: a context giving None
        assert entered is None
    with tf.control_dependencies(None):
        pass
    # observed, TF 2.21: tf.tuple gives a list, None kept; Python values as they are
    out = tf.tuple([tf.constant(1.0), None])
    assert isinstance(out, list) and float(out[0]) == 1.0 and out[1] is None
    assert tf.tuple([1, 2.0]) == [1, 2.0]
    shapes = tf.shape_n([tf.ones([2, 3]), tf.ones([4])])
    assert [s.numpy().tolist() for s in shapes] == [[2, 3], [4]] and shapes[0].dtype == np.int32
    assert tf.shape_n([tf.ones([2, 3])], out_type=tf.int64)[0].dtype == np.int64
    np.testing.assert_array_equal(jax.jit(lambda v: tf.shape_n([v])[0])(jnp.ones([5, 2])), [5, 2])


def test_indexed_slices_as_tf():
    slices = tf.IndexedSlices(tf.constant([[1.0, 2.0], [3.0, 4.0]]), tf.constant([0, 2]), tf.constant([3, 2]))
    # observed, TF 2.21: the dense tensor [[1, 2], [0, 0], [3, 4]]; repeated indices summed; shape from dense_shape
    dense = tf.convert_to_tensor(slices)
    assert dense.dtype == np.float32 and dense.numpy().tolist() == [[1.0, 2.0], [0.0, 0.0], [3.0, 4.0]]
    assert slices.dtype == tf.float32 and slices.shape == tf.TensorShape([3, 2])
    assert np.asarray(slices.values).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert np.asarray(slices.indices).tolist() == [0, 2]
    repeated = tf.IndexedSlices(tf.constant([[1.0], [2.0]]), tf.constant([1, 1]), tf.constant([3, 1]))
    assert tf.convert_to_tensor(repeated).numpy().tolist() == [[0.0], [3.0], [0.0]]
    assert tf.convert_to_tensor(-slices).numpy().tolist() == [[-1.0, -2.0], [0.0, 0.0], [-3.0, -4.0]]
    on_device = tf.IndexedSlices(jnp.asarray([[1.0]]), jnp.asarray([1]), (2, 1))
    assert isinstance(jnp.asarray(on_device), jax.Array) and jnp.asarray(on_device).tolist() == [[0.0], [1.0]]
    with pytest.raises(ValueError, match="Tensor conversion requested for IndexedSlices for argument `value` "
                                         "without dense_shape"):
        tf.convert_to_tensor(tf.IndexedSlices(tf.constant([[1.0]]), tf.constant([0])))


def test_version_is_tfs_api_version_marked():
    # TF 2.21: tf.version.VERSION == tf.__version__ == "2.21.0"; jdist marks it as its own build
    assert tf.version.VERSION == tf.__version__ and tf.version.VERSION.startswith("2.21.0+jdist.")
    assert tf.version.GIT_VERSION.startswith("v2.21.0") and isinstance(tf.version.COMPILER_VERSION, str)
