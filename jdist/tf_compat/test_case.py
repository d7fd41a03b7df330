"""`tf.test`: TF's `TestCase` and its helpers, for the unit tests that come with a TF script.

A TF project's tests subclass `tf.test.TestCase` and call `self.assertAllClose`, `self.evaluate`,
`tf.test.main()`. Each rule here was observed in TF 2.21 (tests/test_tf_compat_test_case.py): `setUp` seeds
Python's, numpy's and `tf.random`'s generators with 87654321 (TF's DEFAULT_GRAPH_SEED); `assertAllClose`
compares nested dicts, lists and tuples leaf by leaf with rtol = atol = 1e-6 whatever the dtype, NaN equal to
NaN, shapes equal (not broadcast); `evaluate` turns tensors into numpy values and refuses a Python number, as
TF's does. There is no graph mode: `session()` / `cached_session()` are contexts whose `run` is `evaluate`.
`compute_gradient` compares JAX's Jacobian with TF's central differences; the `is_built_with_*` answers describe
the JAX installation (XLA always; a GPU where JAX has one).
"""
from __future__ import annotations

import contextlib
import platform
import random
import tempfile
import unittest
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jax
import numpy as np

from jdist.tf_compat import nn_ops

DEFAULT_GRAPH_SEED = 87654321  # TF's random_seed.DEFAULT_GRAPH_SEED


def _value(x: Any) -> np.ndarray:
    return np.asarray(x.numpy() if hasattr(x, "numpy") and not isinstance(x, np.ndarray) else x)


def _pairs(a: Any, b: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """Leaves of two nested structures, side by side; a KeyError / length difference is an AssertionError."""
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        if not (isinstance(a, Mapping) and isinstance(b, Mapping)) or set(a) != set(b):
            keys = (getattr(a, "keys", lambda: type(a).__name__)(), getattr(b, "keys", lambda: type(b).__name__)())
            raise AssertionError(f"mismatched keys: a has keys {keys[0]}, but b has keys {keys[1]}. {path}")
        for key in a:
            yield from _pairs(a[key], b[key], f"{path}[{key!r}]")
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and (
            any(isinstance(x, (Mapping, list, tuple)) and not _numeric(x) for x in (*a, *b))):
        if len(a) != len(b):
            raise AssertionError(f"Length of a ({len(a)}) != length of b ({len(b)}) {path}")
        for i, (x, y) in enumerate(zip(a, b)):
            yield from _pairs(x, y, f"{path}[{i}]")
    else:
        yield path, a, b


def _numeric(x: Any) -> bool:
    """A list that numpy reads as one array (nested numbers), not a structure of arrays."""
    try:
        return np.asarray(x).dtype != object
    except ValueError:
        return False


class TestCase(unittest.TestCase):
    """`tf.test.TestCase` (TF 2.21's assertions, eager only)."""

    def setUp(self) -> None:
        super().setUp()
        random.seed(DEFAULT_GRAPH_SEED)
        np.random.seed(DEFAULT_GRAPH_SEED)
        nn_ops.set_seed(DEFAULT_GRAPH_SEED)

    def get_temp_dir(self) -> str:
        """A temporary directory for this test case (made once per instance)."""
        if not hasattr(self, "_jdist_temp_dir"):
            self._jdist_temp_dir = tempfile.mkdtemp(prefix=f"{type(self).__name__}_")
        return self._jdist_temp_dir

    def evaluate(self, tensors: Any) -> Any:
        """Tensors (nested) as numpy values; a numpy scalar for a 0-d one. A Python number is refused, as TF's."""
        def leaf(x: Any) -> Any:
            if x is None:
                return None
            if isinstance(x, (bool, int, float, complex, str)):
                raise ValueError(f"Unsupported type {type(x).__name__!r}.")
            value = _value(x)
            return value[()] if value.ndim == 0 else value
        return jax.tree.map(leaf, tensors, is_leaf=lambda x: x is None)

    @contextlib.contextmanager
    def session(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        """No graphs here: a context whose `run(fetches)` is `evaluate(fetches)`."""
        yield _EagerSession(self)

    cached_session = session

    def _close(self, a: Any, b: Any, rtol: float, atol: float, msg: str | None, close: bool) -> None:
        for path, x, y in _pairs(a, b):
            x, y = _value(x), _value(y)
            self.assertEqual(x.shape, y.shape, f"Shape mismatch: expected {x.shape}, got {y.shape} with contents "
                                               f"{y}. {path} {msg or ''}")
            if x.dtype.kind in "OSUb" or y.dtype.kind in "OSUb":
                np.testing.assert_array_equal(x, y, err_msg=f"{path} {msg or ''}")
                continue
            same = np.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True)
            if close and not same:
                np.testing.assert_allclose(y, x, rtol=rtol, atol=atol, equal_nan=True,
                                           err_msg=f"Mismatched value: a is different from b. {path} {msg or ''}")
            if not close and same:
                raise AssertionError(f"The two values are close at all elements. {path} {msg or ''}")

    def assertAllClose(self, a: Any, b: Any, rtol: float = 1e-6, atol: float = 1e-6, msg: str | None = None) -> None:
        self._close(a, b, rtol, atol, msg, close=True)

    def assertNotAllClose(self, a: Any, b: Any, rtol: float = 1e-6, atol: float = 1e-6, msg: str | None = None,
                          ) -> None:
        self._close(a, b, rtol, atol, msg, close=False)

    def assertAllCloseAccordingToType(self, a: Any, b: Any, rtol: float = 1e-6, atol: float = 1e-6,
                                      float_rtol: float = 1e-6, float_atol: float = 1e-6,
                                      half_rtol: float = 1e-3, half_atol: float = 1e-3,
                                      bfloat16_rtol: float = 1e-2, bfloat16_atol: float = 1e-2,
                                      msg: str | None = None) -> None:
        """Tolerances by the lower precision of a and b, as TF's."""
        dtypes = {_value(x).dtype.name for x in jax.tree.leaves((a, b))}
        if dtypes & {"float32", "complex64"}:
            rtol, atol = max(rtol, float_rtol), max(atol, float_atol)
        if "float16" in dtypes:
            rtol, atol = max(rtol, half_rtol), max(atol, half_atol)
        if "bfloat16" in dtypes:
            rtol, atol = max(rtol, bfloat16_rtol), max(atol, bfloat16_atol)
        self.assertAllClose(a, b, rtol=rtol, atol=atol, msg=msg)

    def assertAllEqual(self, a: Any, b: Any, msg: str | None = None) -> None:
        x, y = _value(a), _value(b)
        self.assertEqual(x.shape, y.shape, f"Shape mismatch: expected {x.shape}, got {y.shape}. Contents: {y!r}. "
                                           f"{msg or ''}")
        np.testing.assert_array_equal(x, y, err_msg=msg or "")

    def assertNotAllEqual(self, a: Any, b: Any, msg: str | None = None) -> None:
        x, y = _value(a), _value(b)
        if x.shape == y.shape and np.array_equal(x, y):
            raise AssertionError(f"The two values are equal at all elements. {msg or ''}")

    def assertAllGreater(self, a: Any, comparison_target: Any) -> None:
        self.assertGreater(np.min(_value(a)), comparison_target)

    def assertAllGreaterEqual(self, a: Any, comparison_target: Any) -> None:
        self.assertGreaterEqual(np.min(_value(a)), comparison_target)

    def assertAllLess(self, a: Any, comparison_target: Any) -> None:
        self.assertLess(np.max(_value(a)), comparison_target)

    def assertAllLessEqual(self, a: Any, comparison_target: Any) -> None:
        self.assertLessEqual(np.max(_value(a)), comparison_target)

    def assertAllInRange(self, target: Any, lower_bound: float, upper_bound: float, open_lower_bound: bool = False,
                         open_upper_bound: bool = False) -> None:
        x = _value(target)
        low = x > lower_bound if open_lower_bound else x >= lower_bound
        high = x < upper_bound if open_upper_bound else x <= upper_bound
        bad = np.argwhere(~(low & high))
        if len(bad):
            left, right = "([" [not open_lower_bound], ")]" [not open_upper_bound]
            interval = f"{left}{lower_bound}, {upper_bound}{right}"
            shown = "\n".join(f"  {list(i)} : {x[tuple(i)]}" for i in bad)
            raise AssertionError(f"{len(bad)} of the {x.size} element(s) are outside the range {interval}. "
                                 f"Subscript(s) and value(s) of the offending elements:\n{shown}")

    def assertAllInSet(self, target: Any, expected_set: Any) -> None:
        values = set(_value(target).ravel().tolist())
        extra = values - set(expected_set)
        if extra:
            raise AssertionError(f"{sorted(extra)} not in {set(expected_set)}")

    def assertNear(self, f1: float, f2: float, err: float, msg: str | None = None) -> None:
        self.assertTrue(abs(f1 - f2) <= err, f"{f1} != {f2} +/- {err}{' (' + msg + ')' if msg else ''}")

    def assertArrayNear(self, farray1: Any, farray2: Any, err: float, msg: str | None = None) -> None:
        self.assertEqual(len(farray1), len(farray2), msg)
        for f1, f2 in zip(farray1, farray2):
            self.assertNear(float(f1), float(f2), err, msg)

    def assertNDArrayNear(self, ndarray1: Any, ndarray2: Any, err: float, msg: str | None = None) -> None:
        self.assertTrue(np.linalg.norm(_value(ndarray1) - _value(ndarray2)) <= err, msg)

    def assertDTypeEqual(self, target: Any, expected_dtype: Any) -> None:
        self.assertEqual(_value(target).dtype, np.dtype(getattr(expected_dtype, "as_numpy_dtype", expected_dtype)))

    def assertShapeEqual(self, input_a: Any, input_b: Any, msg: str | None = None) -> None:
        self.assertEqual(tuple(np.shape(_value(input_a))), tuple(np.shape(_value(input_b))), msg)

    def assertStartsWith(self, actual: Any, expected_start: Any, msg: str | None = None) -> None:
        if not actual.startswith(expected_start):
            self.fail(f"{actual!r} does not start with {expected_start!r}{' : ' + msg if msg else ''}")

    def assertRaisesOpError(self, expected_err_re_or_predicate: str) -> Any:
        """TF's ops raise Python exceptions here; any exception whose message matches."""
        return self.assertRaisesRegex(Exception, expected_err_re_or_predicate)


class _EagerSession:
    def __init__(self, case: TestCase):
        self._case = case

    def run(self, fetches: Any, *args: Any, **kwargs: Any) -> Any:
        return self._case.evaluate(fetches)


def main(argv: list[str] | None = None) -> None:
    """`tf.test.main()`: runs the module's test cases (unittest)."""
    unittest.main(argv=argv)


def is_gpu_available(cuda_only: bool = False, min_cuda_compute_capability: Any = None) -> bool:
    """Whether JAX has a GPU (TF's deprecated name; `tf.config.list_physical_devices('GPU')` is the new one)."""
    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:
        return False


def gpu_device_name() -> str:
    """TF's name of the first GPU, "" without one."""
    return "/device:GPU:0" if is_gpu_available() else ""


def is_built_with_cuda() -> bool:
    """Whether JAX can use CUDA here (TF's answers for its own wheel)."""
    return is_gpu_available()


def is_built_with_rocm() -> bool:
    """Whether JAX's GPU here runs on ROCm (AMD)."""
    if not is_gpu_available():
        return False
    return "rocm" in str(getattr(jax.devices("gpu")[0].client, "platform_version", "")).lower()


def is_built_with_gpu_support() -> bool:
    """Whether JAX can use a GPU here (CUDA or ROCm)."""
    return is_gpu_available()


def is_built_with_xla() -> bool:
    """True: JAX compiles every program with XLA (TF 2.21's wheel says True as well)."""
    return True


_CPU_TARGETS = {"x86": ("x86_64", "amd64", "i386", "i686"), "aarch64": ("aarch64", "arm64"), "arm": ("armv7l", "arm"),
                "powerpc": ("ppc64le", "ppc64", "powerpc")}


def is_cpu_target_available(target: str) -> bool:
    """Whether XLA compiles for CPU `target` ("x86", "aarch64", "arm", "powerpc"): JAX's XLA compiles for this
    host's CPU only (TF 2.21's wheel answers True for all four). Another name is TF's AssertionError."""
    if target not in _CPU_TARGETS:
        raise AssertionError(f"Unknown CPU target: {target}")
    return platform.machine().lower() in _CPU_TARGETS[target]


def with_eager_op_as_function(cls: Any = None, only_as_function: bool = False) -> Any:
    """`tf.test.with_eager_op_as_function`: the test class unchanged (jdist has one way to run ops); with no
    class, the decorator itself."""
    return (lambda c: c) if cls is None else cls


class Benchmark:
    """`tf.test.Benchmark`: `report_benchmark` prints TF's entry for the measured values; `evaluate` gives numpy
    values. There are no sessions: `run_op_benchmark` is not provided (time a `tf.function` call instead)."""

    @classmethod
    def is_abstract(cls) -> bool:
        return cls is Benchmark

    def evaluate(self, tensors: Any) -> Any:
        return jax.tree.map(_value, tensors)

    def report_benchmark(self, iters: int | None = None, cpu_time: float | None = None,
                         wall_time: float | None = None, throughput: float | None = None,
                         extras: dict[str, Any] | None = None, name: str | None = None,
                         metrics: list[dict[str, Any]] | None = None) -> None:
        lines = [f'  name: "{type(self).__name__ if type(self) is not Benchmark else "TensorFlowBenchmark"}'
                 f'.{name or "benchmark"}"']
        for key, value in (("iters", iters), ("cpu_time", cpu_time), ("wall_time", wall_time),
                           ("throughput", throughput)):
            if value is not None:
                lines.append(f"  {key}: {value:g}" if isinstance(value, float) else f"  {key}: {value}")
        for key, value in (extras or {}).items():
            kind = "double_value" if isinstance(value, (int, float)) else "string_value"
            shown = f"{value:g}" if kind == "double_value" else f'"{value}"'
            lines.append(f'  extras {{\n    key: "{key}"\n    value {{\n      {kind}: {shown}\n    }}\n  }}')
        print("entry {\n" + "\n".join(lines) + "\n}\n")

    def run_op_benchmark(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("tf.test.Benchmark.run_op_benchmark runs a TF1 session, which jdist does not "
                                  "have: time the tf.function call (time.perf_counter) and report_benchmark it.")


def compute_gradient(f: Callable[..., Any], x: list | tuple, delta: float | None = None,
                     ) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """`tf.test.compute_gradient`: (theoretical, numeric) Jacobians of `f` for each argument, each of shape
    (y size, x size): JAX's `jax.jacrev`, and central differences with step `delta` (TF's 1/1024)."""
    if not isinstance(x, (list, tuple)):
        raise ValueError(f"`x` must be a list or tuple of values convertible to a Tensor (arguments to `f`), not "
                         f"a {type(x)}")
    xs = [np.array(_value(v)) for v in x]
    for i, v in enumerate(xs):
        if v.dtype.kind not in "fc":
            raise AssertionError(f"Cannot compute gradient for unsupported type {v.dtype.name} of argument {i}")
    step = 1.0 / 1024 if delta is None else float(delta)
    y_dtype = _value(f(*xs)).dtype
    theoretical, numeric = [], []
    for i, v in enumerate(xs):
        def along(xi: Any, i: int = i) -> Any:
            return jax.numpy.asarray(f(*xs[:i], xi, *xs[i + 1:]))

        with jax.enable_x64(True):  # keeps float64 arguments float64, as TF's
            jac = np.asarray(jax.jacrev(along)(jax.numpy.asarray(v)))
        theoretical.append(jac.reshape(-1, v.size).astype(y_dtype))
        columns = []
        for col in range(v.size):
            plus, minus = v.copy(), v.copy()
            plus.reshape(-1)[col] += v.dtype.type(step)
            minus.reshape(-1)[col] -= v.dtype.type(step)
            diff = (_value(f(*xs[:i], plus, *xs[i + 1:])).astype(y_dtype) -
                    _value(f(*xs[:i], minus, *xs[i + 1:])).astype(y_dtype))
            columns.append(diff.ravel() / np.asarray(2 * step, dtype=y_dtype)[()])
        numeric.append(np.stack(columns, axis=1))
    return tuple(theoretical), tuple(numeric)


TEST = {"TestCase": TestCase, "main": main, "is_gpu_available": is_gpu_available, "gpu_device_name": gpu_device_name,
        "is_built_with_cuda": is_built_with_cuda, "is_built_with_rocm": is_built_with_rocm,
        "is_built_with_gpu_support": is_built_with_gpu_support, "is_built_with_xla": is_built_with_xla,
        "is_cpu_target_available": is_cpu_target_available, "with_eager_op_as_function": with_eager_op_as_function,
        "Benchmark": Benchmark, "compute_gradient": compute_gradient}
