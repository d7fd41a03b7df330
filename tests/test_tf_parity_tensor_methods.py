"""A host tensor's numpy methods as a TF script sees them: TF's rule on by default, NumPy behavior's subset,
library code (numpy, site-packages, the standard library) keeping numpy's methods, and TensorShape's text.

Every expected value and error text was observed in TF 2.21 (tensorflow-cpu 2.21, Keras 3.15), running the same
expression with `import tensorflow as tf` (/work/tfvenv).
"""
from __future__ import annotations

import subprocess
import sys
import sysconfig

import numpy as np
import pytest

import jdist.tf_compat as tf
from jdist.tfdata import tensor_methods, tensor_numpy
from jdist.tfdata.structure import HostTensor

# observed in TF 2.21: the error of `t.tolist()` (and T, astype, clip, data, ravel, reshape, size, transpose)
_SWITCH = ("EagerTensor object has no attribute '{}'. \n        If you are looking for numpy-related methods, "
           "please run the following:\n        tf.experimental.numpy.experimental_enable_numpy_behavior()\n      ")
# observed in TF 2.21: `[n for n in dir(np.ndarray) if not n.startswith("_") and hasattr(t, n)]` after
# experimental_enable_numpy_behavior(), less those a tensor had before
_WITH_NUMPY_BEHAVIOR = ["T", "astype", "clip", "data", "flatten", "max", "mean", "min", "ravel", "reshape", "size",
                        "tolist", "transpose"]


@pytest.fixture
def numpy_behavior():
    """`experimental_enable_numpy_behavior()` is process-wide (as TF's): put back after the test."""
    saved = dict(tensor_numpy.NUMPY_BEHAVIOR)
    tf.experimental.numpy.experimental_enable_numpy_behavior()
    yield
    tensor_numpy.NUMPY_BEHAVIOR.update(saved)


def _run_as(filename: str, module: str, source: str, **names):
    """Runs `source` as code of the module `module` in file `filename`, giving its `result`."""
    scope = {"__name__": module, "np": np, **names}
    exec(compile(source, filename, "exec"), scope)
    return scope["result"]


def test_the_rule_is_on_once_tf_compat_is_imported():
    # a fresh process: importing jdist.tf_compat alone turns it on (observed in TF 2.21: `t.tolist()` after
    # `import tensorflow as tf` is AttributeError naming the switch; `t.numpy().tolist()` is the list)
    code = ("import jdist.tf_compat as tf\nt = tf.constant([[1, 2]])\nprint(t.numpy().tolist())\n"
            "try:\n    t.tolist()\nexcept AttributeError as e:\n    print(repr(str(e)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == ["[[1, 2]]", repr(_SWITCH.format("tolist"))]


def test_a_scripts_numpy_methods_are_tfs_errors():
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    assert tensor_methods.installed(HostTensor)
    for name in ("T", "astype", "clip", "data", "ravel", "reshape", "size", "tolist", "transpose"):
        with pytest.raises(AttributeError) as info:
            getattr(x, name)
        assert str(info.value) == _SWITCH.format(name)  # observed in TF 2.21
    for name in ("sum", "mean", "max", "min", "flatten", "item", "copy", "argmax", "squeeze", "round", "all"):
        with pytest.raises(AttributeError) as info:
            getattr(x, name)
        # observed in TF 2.21
        assert str(info.value) == f"'tensorflow.python.framework.ops.EagerTensor' object has no attribute '{name}'"
    # observed in TF 2.21: the public names of np.ndarray a tensor has are only these
    public = {n for n in dir(np.ndarray) if not n.startswith("_")}
    kept = {"base", "ctypes", "flags", "strides", "view"}  # how libraries reach the memory (module docstring)
    assert {n for n in public if hasattr(x, n)} - kept == {"device", "dtype", "ndim", "shape"}
    # what a TF script writes instead (observed in TF 2.21: the same values)
    assert x.numpy().tolist() == [[1.0, 2.0], [3.0, 4.0]] and x.numpy().sum() == 10.0
    assert tf.reshape(x, [4]).numpy().tolist() == [1.0, 2.0, 3.0, 4.0] and tf.size(x).numpy() == 4


def test_indexing_and_element_values_are_tfs():
    x = tf.constant([[1, 2, 3], [4, 5, 6]])
    # observed in TF 2.21: x[1] tf.Tensor([4 5 6], shape=(3,), dtype=int32); x[1:3] shape (1, 3); x[0, 1] a
    # 0-d tensor whose .numpy() is 2; int() and float() of it 2 and 2.0
    assert str(x[1]) == "tf.Tensor([4 5 6], shape=(3,), dtype=int32)" and x[1:3].shape == (1, 3)
    assert x[0, 1].numpy() == 2 and int(x[0, 1]) == 2 and float(x[0, 1]) == 2.0
    with pytest.raises(AttributeError, match="no attribute 'item'"):
        x[0, 1].item()  # observed in TF 2.21


def test_libraries_keep_numpys_methods():
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    # numpy's functions call the methods from numpy's code (observed in TF 2.21: np.sum(x) 10.0, np.round, ...)
    assert np.sum(x) == 10.0 and np.mean(x) == 2.5 and np.max(x) == 4.0 and np.round(x)[1, 1] == 4.0
    assert np.reshape(x, [4]).shape == (4,) and np.transpose(x)[0, 1] == 3.0 and np.size(x) == 4
    probe = "result = (x.T.tolist(), float(x.sum()), x.size, x.astype(np.int32).dtype.name, x.copy()[0, 0])"
    expected = ([[1.0, 3.0], [2.0, 4.0]], 10.0, 4, "int32", 1.0)
    # a package of LIBRARIES by name, any module installed in site-packages (matplotlib, PIL, ...), the stdlib
    site = sysconfig.get_paths()["purelib"]
    assert _run_as("<library>", "keras.src.probe", probe, x=x) == expected
    assert _run_as(f"{site}/somepackage/probe.py", "somepackage.probe", probe, x=x) == expected
    assert _run_as(f"{sysconfig.get_paths()['stdlib']}/probe.py", "probe", probe, x=x) == expected
    # ... a script's file is not one (observed in TF 2.21: AttributeError)
    with pytest.raises(AttributeError, match="no attribute 'T'"):
        _run_as("/home/user/train.py", "__main__", probe, x=x)
    import pandas as pd  # real libraries: pandas and matplotlib take tensors as arrays
    frame = pd.DataFrame(x, columns=["a", "b"])
    assert frame["b"].tolist() == [2.0, 4.0] and float(pd.Series(x[:, 0]).sum()) == 4.0
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axes = plt.subplots()
    try:
        (line,) = axes.plot(x[:, 0], x[:, 1])
        assert np.asarray(line.get_ydata()).tolist() == [2.0, 4.0]
        image = axes.imshow(x)
        assert np.asarray(image.get_array()).shape == (2, 2)
    finally:
        plt.close(figure)


def test_a_scripts_numpy_functions_give_numpys_arrays():
    t = tf.constant([[3.0, 1.0], [2.0, 2.0]])
    # observed in TF 2.21: numpy's functions of tensors give np.ndarray (numpy scalars for reductions), so their
    # numpy methods work: np.unique(t).tolist() is [1.0, 2.0, 3.0]
    for value in (np.unique(t), np.concatenate([t, t]), np.reshape(t, [4]), np.sort(t), np.stack([t, t]),
                  np.where(t > 1, t, 0), np.clip(t, 0, 1), np.transpose(t), np.round(t), np.expand_dims(t, 0),
                  np.copy(t), np.zeros_like(t), np.cumsum(t), np.dot(t, t), np.isclose(t, t), np.sum(t, axis=0),
                  np.histogram(t)[0]):
        assert type(value) is np.ndarray
    for value in (np.sum(t), np.mean(t), np.max(t), np.linalg.norm(t), np.percentile(t, 50)):
        assert type(value) is np.float32
    assert type(np.argmax(t)) is np.int64 and np.allclose(t, t) is True and np.array_equal(t, t) is True
    assert np.unique(t).tolist() == [1.0, 2.0, 3.0] and float(np.percentile(t, 50)) == 2.0
    assert all(type(v) is np.ndarray for v in np.where(t > 1))
    # a library's call keeps numpy's subclass rule: host tensors stay host tensors
    assert type(_run_as("<library>", "jdist.probe", "result = np.sort(x)", x=t)) is HostTensor
    # observed in TF 2.21: tf.get_static_value gives numpy's values (np.ndarray, np.int32 for a scalar)
    static = tf.get_static_value(tf.constant([1, 2]))
    assert type(static) is np.ndarray and static.tolist() == [1, 2]
    assert type(tf.get_static_value(tf.constant(3))) is np.int32


def test_numpy_behavior_gives_tfs_subset(numpy_behavior):
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    public = {n for n in dir(np.ndarray) if not n.startswith("_")}
    kept = {"base", "ctypes", "flags", "strides", "view", "device", "dtype", "ndim", "shape"}
    assert sorted(n for n in public - kept if hasattr(x, n)) == _WITH_NUMPY_BEHAVIOR  # observed in TF 2.21
    # observed in TF 2.21: tensors (EagerTensor) for all but tolist (a list) and size (np.int64(4)); data is x
    for value, shape, dtype in ((x.T, (2, 2), "float32"), (x.astype(np.int32), (2, 2), "int32"),
                                (x.clip(0, 1), (2, 2), "float32"), (x.flatten(), (4,), "float32"),
                                (x.max(), (), "float32"), (x.mean(axis=0), (2,), "float32"),
                                (x.min(), (), "float32"), (x.ravel(), (4,), "float32"),
                                (x.reshape(4, 1), (4, 1), "float32"), (x.transpose(), (2, 2), "float32")):
        assert isinstance(value, HostTensor) and value.shape == shape and value.dtype.name == dtype
    assert x.T.numpy().tolist() == [[1.0, 3.0], [2.0, 4.0]] and x.mean().numpy() == 2.5 and x.max(0).numpy()[1] == 4
    assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]] and type(x.size) is np.int64 and x.size == 4 and x.data is x
    for name in ("sum", "copy", "item", "argmax", "squeeze", "std"):  # observed in TF 2.21: still plain errors
        with pytest.raises(AttributeError, match=f"^'tensorflow.python.framework.ops.EagerTensor' object has no "
                                                 f"attribute '{name}'$"):
            getattr(x, name)


def test_library_reads_are_numpys_under_numpy_behavior(numpy_behavior):
    x = tf.constant([1.0, 2.0])
    # a library's x.size is numpy's int, x.data numpy's memoryview (TF's forms are the script's only)
    size, data = _run_as("<library>", "numpy.probe", "result = (x.size, x.data)", x=x)
    assert type(size) is int and isinstance(data, memoryview) and np.frombuffer(data, np.float32).tolist() == [1, 2]


def test_uninstall_gives_numpys_methods_back():
    x = tf.constant([1.0, 2.0])
    tensor_methods.uninstall(HostTensor)
    try:
        assert not tensor_methods.installed(HostTensor) and x.sum() == 3.0 and x.tolist() == [1.0, 2.0]
    finally:
        tensor_methods.install(HostTensor)
    assert not hasattr(x, "sum")


def test_tensor_shape_text_is_tfs():
    s, one, scalar = tf.constant([[1, 2, 3]]).shape, tf.constant([1, 2]).shape, tf.constant(1).shape
    # observed in TF 2.21: str, f-string, format, str.format are "(1, 3)"; repr and %r "TensorShape([1, 3])"
    assert str(s) == f"{s}" == format(s) == "{}".format(s) == f"{s!s}" == "(1, 3)"  # noqa: UP031, UP032
    assert repr(s) == f"{s!r}" == "%r" % (s,) == "TensorShape([1, 3])" and "%s" % (s,) == "(1, 3)"  # noqa: UP031
    assert str(one) == "(2,)" and "%s" % (one,) == "(2,)"  # noqa: UP031
    assert str(scalar) == "()" and repr(scalar) == "TensorShape([])"
    assert str(tf.TensorShape([None, 3])) == "(None, 3)" and str(tf.TensorShape(None)) == "<unknown>"
    assert repr(tf.TensorShape(None)) == "TensorShape(None)"
    # observed in TF 2.21: TypeError "unsupported format string passed to TensorShape.__format__"
    with pytest.raises(TypeError, match="unsupported format string passed to TensorShape.__format__"):
        f"{s:>10}"  # noqa: B018
    assert "%d x %d" % (s[0], s[1]) == "1 x 3"  # noqa: UP031 (a dimension is an int, observed in TF 2.21)


def test_benchmark_measures_the_rule_off_and_on():
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_host_tensors", "scripts/bench_host_tensors.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = bench._method_rule(1, 50)
    assert set(results) == {"np.sum(t)", "np.round(t)", "np.unique(t)", "t[1]", "t[1:3]",
                            "t.numpy().tolist()"}
    assert all(min(sides.values()) > 0 for sides in results.values())
    assert tensor_methods.installed(HostTensor)  # put back as it was
