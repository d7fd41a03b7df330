"""Host tensors as a TF script sees them: numpy methods, numpy ufuncs with numpy scalars, vector matmul, shapes,
tf.function results' dtypes, and the cost of the calling-frame check (jdist.input.calling_code).

Every expected value and error text was observed in TF 2.21 (tensorflow-cpu 2.21, Keras 3.15), running the same
expression with `import tensorflow as tf`.
"""
from __future__ import annotations

import importlib.util
import re
import types

import jax.numpy as jnp
import numpy as np
import pytest

import jdist.tf_compat as tf
from jdist.input import calling_code
from jdist.tfdata import tensor_methods, tensor_numpy
from jdist.tfdata.structure import HostTensor

tnp = tf.experimental.numpy


@pytest.fixture
def tf_methods():
    """TF's rule for numpy methods (jdist.tfdata.tensor_methods, on since jdist.tf_compat loaded), put back as it
    was after the test."""
    was_on = tensor_methods.installed(HostTensor)
    tensor_methods.install(HostTensor)
    yield
    (tensor_methods.install if was_on else tensor_methods.uninstall)(HostTensor)


@pytest.fixture
def numpy_behavior():
    """`tnp.experimental_enable_numpy_behavior()` is process-wide (as TF's): put it back after the test."""
    saved = dict(tensor_numpy.NUMPY_BEHAVIOR)
    tnp.experimental_enable_numpy_behavior()
    yield
    tensor_numpy.NUMPY_BEHAVIOR.update(saved)


def _in_library(source: str, **names):
    """Runs `source` as the code of a library module (`numpy`'s, here) would, giving its `result`."""
    scope = {"__name__": "numpy.testing._jdist_probe", "np": np, **names}
    exec(compile(source, "<library>", "exec"), scope)
    return scope["result"]


# --- numpy methods: TF's AttributeError in a script, numpy's in libraries ---------------------------------------

_SWITCH_TEXT = ("EagerTensor object has no attribute 'T'. \n        If you are looking for numpy-related methods, "
                "please run the following:\n        tf.experimental.numpy.experimental_enable_numpy_behavior()\n      ")


def test_numpy_methods_are_attribute_errors_in_a_script(tf_methods):
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    # observed in TF 2.21: x.T -> AttributeError with the switch's text; x.sum() -> the plain text
    with pytest.raises(AttributeError) as info:
        x.T  # noqa: B018
    assert str(info.value) == _SWITCH_TEXT
    with pytest.raises(AttributeError) as info:
        x.sum()
    assert str(info.value) == "'tensorflow.python.framework.ops.EagerTensor' object has no attribute 'sum'"
    # observed in TF 2.21: these have the switch's text, the others the plain one
    for name in ("astype", "clip", "ravel", "reshape", "size", "tolist", "transpose"):
        with pytest.raises(AttributeError, match="numpy-related methods"):
            getattr(x, name)
    for name in ("mean", "max", "min", "copy", "flatten", "item", "argmax", "std", "any", "squeeze", "nbytes",
                 "itemsize", "real", "round", "prod", "cumsum", "dot", "var", "all"):
        with pytest.raises(AttributeError, match=f"^'tensorflow.python.framework.ops.EagerTensor' object has no "
                                                 f"attribute '{name}'$"):
            getattr(x, name)
        assert not hasattr(x, name)  # observed in TF 2.21: hasattr is False
    # what TF's tensors have: ndim, shape, dtype, numpy()
    assert x.ndim == 2 and x.shape == (2, 2) and x.numpy().sum() == 10.0


def test_numpy_and_libraries_still_call_the_methods(tf_methods):
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    # numpy's functions reach the methods from numpy's own code (observed in TF 2.21: np.sum(x) 10.0, a numpy value)
    assert np.sum(x) == 10.0 and np.mean(x) == 2.5 and np.round(x)[1, 1] == 4.0
    np.testing.assert_array_equal(np.reshape(x, [4]), [1, 2, 3, 4])
    np.testing.assert_array_equal(np.transpose(x), [[1, 3], [2, 4]])
    # a library's own code reads them as numpy's
    assert _in_library("result = (x.T.tolist(), float(x.sum()), x.size, x.astype(np.int32).dtype)", x=x) == (
        [[1.0, 3.0], [2.0, 4.0]], 10.0, 4, np.dtype(np.int32))
    assert float(jnp.sum(x)) == 10.0 and tf.reduce_sum(x).numpy() == 10.0
    assert tf.reshape(x, [4]).shape == (4,) and tf.transpose(x).numpy().tolist() == [[1, 3], [2, 4]]


def test_numpy_behavior_adds_tfs_numpy_methods(numpy_behavior, tf_methods):
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    # observed in TF 2.21 after experimental_enable_numpy_behavior(): these are tensors
    np.testing.assert_array_equal(x.T.numpy(), [[1, 3], [2, 4]])
    assert x.mean().numpy() == 2.5 and x.max().numpy() == 4.0 and x.reshape([4]).shape == (4,)
    assert x.astype(np.int32).dtype == tf.int32 and x.ravel().shape == (4,) and x.flatten().shape == (4,)
    assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]] and x.clip(0, 1).numpy().max() == 1.0
    assert x.transpose().numpy()[0, 1] == 3.0 and int(x.size) == 4
    # ... and these still are not (observed, TF 2.21)
    for name in ("sum", "copy", "argmax", "std", "any", "squeeze", "item"):
        with pytest.raises(AttributeError, match=f"object has no attribute '{name}'"):
            getattr(x, name)


def test_refused_names_are_tfs(tf_methods):
    # observed in TF 2.21: the public names of np.ndarray an EagerTensor lacks, less those kept (module docstring)
    kept = {"base", "ctypes", "flags", "strides", "view"}
    observed = {"T", "all", "any", "argmax", "argmin", "argpartition", "argsort", "astype", "base", "byteswap",
                "choose", "clip", "compress", "conj", "conjugate", "copy", "ctypes", "cumprod", "cumsum", "data",
                "diagonal", "dot", "dump", "dumps", "fill", "flags", "flat", "flatten", "getfield", "imag", "item",
                "itemsize", "mT", "max", "mean", "min", "nbytes", "nonzero", "partition", "prod", "put", "ravel",
                "real", "repeat", "reshape", "resize", "round", "searchsorted", "setfield", "setflags", "size",
                "sort", "squeeze", "std", "strides", "sum", "swapaxes", "take", "to_device", "tobytes", "tofile",
                "tolist", "trace", "transpose", "var", "view"}
    assert set(tensor_methods.REFUSED) == observed - kept
    x = tf.constant([1.0])
    assert [name for name in sorted(observed - kept) if hasattr(x, name)] == []


def test_numpy_methods_are_tfs_by_default_and_uninstall_gives_numpys():
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    # on since jdist.tf_compat loaded (observed in TF 2.21: x.sum() is AttributeError without NumPy behavior)
    assert tensor_methods.installed(HostTensor) and not hasattr(x, "sum")
    tensor_methods.uninstall(HostTensor)
    try:
        assert not tensor_methods.installed(HostTensor) and x.sum() == 10.0
        assert x.T.tolist() == [[1.0, 3.0], [2.0, 4.0]]
    finally:
        tensor_methods.install(HostTensor)
    assert tensor_methods.installed(HostTensor) and not hasattr(x, "T")


# --- numpy ufuncs with a numpy scalar ---------------------------------------------------------------------------

def test_numpy_function_of_a_numpy_scalar_and_a_tensor_is_numpys():
    i32, f32 = tf.constant([1, 2]), tf.constant([1.0, 2.0])
    # observed in TF 2.21: np.multiply(np.float32(2), int32 tensor) is a float64 np.ndarray [2., 4.]
    for result, dtype in ((np.multiply(np.float32(2), i32), np.float64), (np.add(np.int64(2), i32), np.int64),
                          (np.multiply(np.float32(2), f32), np.float32), (np.subtract(np.float64(2), f32), np.float64),
                          (np.true_divide(np.int32(2), i32), np.float64), (np.power(np.int32(2), i32), np.int32),
                          (np.maximum(i32, np.float64(2)), np.float64)):
        assert type(result) is np.ndarray and result.dtype == dtype
    np.testing.assert_array_equal(np.subtract(np.float32(2), i32), [1.0, 0.0])
    # the operator follows TF's operand rule (observed, TF 2.21: np.float32(2) * int32 tensor is an int32 tensor,
    # np.int64(2) + float32 tensor float32, np.int32(2) - int32 tensor [1 0] int32)
    for result, dtype in ((np.float32(2) * i32, tf.int32), (np.float64(2) * f32, tf.float32),
                          (np.int64(2) + f32, tf.float32), (np.int32(2) - i32, tf.int32)):
        assert isinstance(result, tf.Tensor) and result.dtype == dtype
    assert (np.float32(2) * i32).numpy().tolist() == [2, 4] and (np.int32(2) - i32).numpy().tolist() == [1, 0]


# --- matmul with a vector ---------------------------------------------------------------------------------------

def _ndims_error(a: str, b: str) -> str:
    return re_escape(f"In[0] and In[1] has different ndims: {a} vs. {b} [Op:MatMul]")


def re_escape(text: str) -> str:
    return "^" + re.escape(text)


def test_vector_matmul_is_invalid_argument():
    v, m = tf.constant([1.0, 2.0]), tf.constant([[1.0, 2.0], [3.0, 4.0]])
    # observed in TF 2.21: "... In[0] and In[1] has different ndims: [2] vs. [2,2] [Op:MatMul] name: "
    for call, (a, b) in ((lambda: v @ m, ("[2]", "[2,2]")), (lambda: m @ v, ("[2,2]", "[2]")),
                         (lambda: tf.matmul(v, m), ("[2]", "[2,2]")), (lambda: tf.matmul(m, v), ("[2,2]", "[2]")),
                         (lambda: tf.constant([1.0, 2.0, 3.0]) @ m, ("[3]", "[2,2]")),
                         (lambda: tf.matmul(tf.constant(1.0), m), ("[]", "[2,2]")),
                         (lambda: np.ones(2, np.float32) @ m, ("[2]", "[2,2]")),
                         (lambda: m @ np.ones(2, np.float32), ("[2,2]", "[2]"))):
        with pytest.raises(tf.errors.InvalidArgumentError, match=_ndims_error(a, b)):
            call()
    # observed in TF 2.21: v @ v -> "In[0] and In[1] ndims must be == 2: 1"; scalars "... == 2: 0"
    with pytest.raises(tf.errors.InvalidArgumentError, match=re_escape("In[0] and In[1] ndims must be == 2: 1 [Op")):
        v @ v
    with pytest.raises(tf.errors.InvalidArgumentError, match=re_escape("In[0] and In[1] ndims must be == 2: 0 [Op")):
        tf.constant(1.0) @ tf.constant(2.0)
    # batches broadcast (observed, TF 2.21: ones([2,2,2]) @ m has shape (2, 2, 2), [[4, 6], ...])
    batch = tf.ones([2, 2, 2]) @ m
    assert batch.shape == (2, 2, 2) and batch.numpy()[1, 0].tolist() == [4.0, 6.0]
    assert tf.matmul(m, tf.reshape(v, [2, 1])).numpy().ravel().tolist() == [5.0, 11.0]  # observed, TF 2.21


def test_variable_vector_matmul_is_invalid_argument():
    v, m = tf.Variable([1.0, 2.0]), tf.Variable([[1.0, 2.0], [3.0, 4.0]])
    # observed in TF 2.21: as for tensors (vm @ [[1], [1]] is [[3], [7]])
    for call, (a, b) in ((lambda: v @ tf.constant([[1.0, 2.0], [3.0, 4.0]]), ("[2]", "[2,2]")),
                         (lambda: m @ tf.constant([1.0, 2.0]), ("[2,2]", "[2]")),
                         (lambda: tf.constant([[1.0, 2.0], [3.0, 4.0]]) @ v, ("[2,2]", "[2]")),
                         (lambda: tf.matmul(v, m), ("[2]", "[2,2]"))):
        with pytest.raises(tf.errors.InvalidArgumentError, match=_ndims_error(a, b)):
            call()
    assert (m @ tf.constant([[1.0], [1.0]])).numpy().ravel().tolist() == [3.0, 7.0]


def test_numpy_behavior_vector_matmul(numpy_behavior):
    v, m = tf.constant([1.0, 2.0]), tf.constant([[1.0, 2.0], [3.0, 4.0]])
    # observed in TF 2.21 after enable: v @ m and tf.Variable(v) @ m are [7, 10], v @ v 5.0; tf.matmul(v, m)
    # still raises
    assert (v @ m).numpy().tolist() == [7.0, 10.0] and float(v @ v) == 5.0
    assert np.asarray(tf.Variable([1.0, 2.0]) @ m).tolist() == [7.0, 10.0]
    with pytest.raises(tf.errors.InvalidArgumentError, match=_ndims_error("[2]", "[2,2]")):
        tf.matmul(v, m)


def test_library_matmul_of_host_vectors_is_numpys():
    v, m = tf.constant([1.0, 2.0]), tf.constant([[1.0, 2.0], [3.0, 4.0]])
    assert _in_library("result = (v @ m).tolist()", v=v, m=m) == [7.0, 10.0]
    assert np.matmul(v, m).tolist() == [7.0, 10.0]  # a numpy function: numpy's (TF 2.21 gives the same)


# --- TensorShape ------------------------------------------------------------------------------------------------

def test_tensor_shape_text_and_reads():
    s = tf.constant([[1.0, 2.0], [3.0, 4.0]]).shape
    # observed in TF 2.21: str (2, 2), repr TensorShape([2, 2]); format and f-strings as str
    assert str(s) == "(2, 2)" and repr(s) == "TensorShape([2, 2])" and format(s) == f"{s}" == "(2, 2)"
    assert str(tf.constant(1.0).shape) == "()" and repr(tf.constant(1.0).shape) == "TensorShape([])"
    assert str(tf.constant([1]).shape) == "(1,)" and repr(tf.constant([1]).shape) == "TensorShape([1])"
    assert s == (2, 2) and s != (2, 3) and s.as_list() == [2, 2] and s.rank == 2 and len(s) == 2
    assert type(s[0]) is int and s[-1] == 2 and tuple(s) == (2, 2) and hash(s) == hash((2, 2))
    u = tf.TensorShape([None, 3])
    assert str(u) == "(None, 3)" and repr(u) == "TensorShape([None, 3])" and u[0] is None and u == (None, 3)
    assert u.as_list() == [None, 3] and f"{s[0]} x {s[1]}" == "2 x 2"


# --- a tf.function's device arrays ------------------------------------------------------------------------------

def test_tf_function_results_dtype_compares_as_tfs():
    f = tf.function(lambda x: x * 2)
    # observed in TF 2.21: f(x).dtype == tf.float32 is True, .name 'float32', print shows <dtype: 'float32'>
    host = f(tf.constant([1.0, 2.0]))
    assert str(host.dtype) == "<dtype: 'float32'>" and host.dtype == tf.float32 and host.dtype.name == "float32"
    device = f(jnp.array([1.0, 2.0]))  # a JAX array in, a JAX array out: numpy's dtype (module docstring)
    assert device.dtype == tf.float32 and device.dtype.name == "float32" and tf.as_dtype(device.dtype) is tf.float32


# --- the calling-frame check's caches ---------------------------------------------------------------------------

def test_calling_code_decisions_are_cached_and_unchanged():
    frames = {name: types.SimpleNamespace(f_globals={"__name__": name})
              for name in ("numpy.linalg", "jax._src.numpy", "jdist.tf_compat.ops", "keras.src.ops", "__main__",
                           "numpyish", "my_script", "tests.test_x")}
    expected = {"numpy.linalg": True, "jax._src.numpy": True, "jdist.tf_compat.ops": True, "keras.src.ops": True,
                "__main__": False, "numpyish": False, "my_script": False, "tests.test_x": False}
    calling_code.CACHING["on"] = False
    try:
        uncached = {name: calling_code.library_code(frame) for name, frame in frames.items()}
    finally:
        calling_code.CACHING["on"] = True
    cached = {name: calling_code.library_code(frame) for name, frame in frames.items()}
    assert uncached == cached == expected and calling_code.module_is_library("numpy") is True
    assert all(calling_code._BY_MODULE[name] is value for name, value in expected.items())
    script = frames["my_script"]
    assert calling_code.dtype_for(np.dtype(np.int64), script) is tf.int64
    assert calling_code.dtype_for(np.dtype(np.int64), script) is tf.int64  # from the cache, the same DType
    assert calling_code.dtype_for(np.dtype(np.int64), frames["numpy.linalg"]) == np.dtype(np.int64)
    assert not isinstance(calling_code.dtype_for(np.dtype(np.int64), frames["numpy.linalg"]), tf.DType)
    assert calling_code.dtype_for(np.dtype([("a", np.int8)]), script) == np.dtype([("a", np.int8)])  # no TF name
    # a script's read in this module, then a library's: each its own form
    t = tf.constant([1, 2])
    library = _in_library("result = t.dtype", t=t)
    assert str(t.dtype) == "<dtype: 'int32'>" and library == np.int32 and str(library) == "int32"


def test_benchmark_runs_and_measures_both_sides():
    spec = importlib.util.spec_from_file_location("bench_host_tensors", "scripts/bench_host_tensors.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = bench.main(["--repeats", "1", "--reads", "200"])
    frame_check = {name: results.pop(name) for name in ("t.dtype", "np.sqrt(t)")}
    assert all(set(sides) == {"np", "uncached", "cached"} and min(sides.values()) > 0
               for sides in frame_check.values())
    # the method rule's cases (jdist.tfdata.tensor_methods), off against on
    assert set(results) == {"np.sum(t)", "np.round(t)", "np.unique(t)", "t[1]", "t[1:3]",
                            "t.numpy().tolist()"}
    assert all(set(sides) == {"rule off", "rule on"} and min(sides.values()) > 0 for sides in results.values())
