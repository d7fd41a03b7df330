"""Cost of a host tensor's calling-frame check: `t.dtype` and `np.sqrt(t)` in a script's code.

A host tensor shows TF's forms to a script and numpy's to libraries, deciding from the calling frame
(jdist.input.calling_code) on every `dtype` read and every numpy ufunc. This measures, interleaved in one run
(A/B/C per repeat, so load on the machine hits all sides alike):

* `np`: a plain `np.ndarray` (the floor);
* `uncached`: a host tensor with the frame check as first written (a copy below: the module name split on each
  read, `tf.as_dtype` on each read, `getattr(ufunc, method)` and a generator over the inputs);
* `cached`: jdist's host tensor as it is.

Then TF's rule for a script's numpy methods and functions (jdist.tfdata.tensor_methods: one descriptor per numpy
name and `__array_function__`, asking the calling frame) is measured off against on, interleaved the same way
(`rule off`/`rule on` per repeat): numpy's functions (`np.sum(t)`, `np.round(t)`, `np.unique(t)`), indexing
(`t[1]`, `t[1:3]`) and the portable `t.numpy().tolist()`.

It prints the median time per batch and the ratios. Run: `python scripts/bench_host_tensors.py [--repeats N]
[--reads N]`.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

import jdist.tf_compat as tf
from jdist.input import calling_code
from jdist.tfdata import tensor_methods, tensor_numpy
from jdist.tfdata.structure import HostTensor


def _old_library_code(frame: Any) -> bool:
    return str(frame.f_globals.get("__name__", "")).split(".")[0] in calling_code.LIBRARIES


def _old_dtype_for(dtype: Any, frame: Any) -> Any:
    if _old_library_code(frame):
        return dtype
    try:
        return tf.as_dtype(dtype)
    except TypeError:
        return dtype


def _old_plain(value: Any, tensor_type: type) -> Any:
    if isinstance(value, tensor_type):
        return value.view(np.ndarray)
    if isinstance(value, tuple):
        return tuple(_old_plain(v, tensor_type) for v in value)
    return value


def _old_array_ufunc(self: np.ndarray, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    tensor_type = type(self)
    frame, inner = sys._getframe(1), ""
    while frame is not None and str(frame.f_globals.get("__name__", "")).split(".")[0] == "numpy":
        inner = str(frame.f_globals["__name__"])
        frame = frame.f_back
    user = frame is not None and not _old_library_code(frame)
    if user:
        user = method == "__call__" if not inner else not inner.endswith("._methods")
    if (user and method == "__call__" and not kwargs and len(inputs) == 2 and ufunc in tensor_numpy.BY_UFUNC
            and isinstance(inputs[0], np.generic) and inputs[1] is self):
        return tensor_numpy.BY_UFUNC[ufunc](inputs[0], self)
    result = getattr(ufunc, method)(*_old_plain(inputs, tensor_type), **kwargs)
    if user or result is NotImplemented:
        return result
    return np.asarray(result).view(tensor_type)


class _UncachedTensor(HostTensor):
    """A host tensor with the first frame check (the benchmark's `uncached` side)."""

    @property
    def dtype(self) -> Any:  # pyright: ignore[reportIncompatibleVariableOverride]
        return _old_dtype_for(np.ndarray.dtype.__get__(self), sys._getframe(1))

    __array_ufunc__ = _old_array_ufunc


def _dtype_reads(value: Any, reads: int) -> float:
    start = time.perf_counter()
    for _ in range(reads):
        value.dtype  # noqa: B018 (the read is what is timed)
    return time.perf_counter() - start


def _sqrts(value: Any, reads: int) -> float:
    start = time.perf_counter()
    for _ in range(reads):
        np.sqrt(value)
    return time.perf_counter() - start


def _timed(operation: Callable[[Any], Any]) -> Callable[[Any, int], float]:
    def work(value: Any, reads: int) -> float:
        start = time.perf_counter()
        for _ in range(reads):
            operation(value)
        return time.perf_counter() - start
    return work


# The method rule's cases: numpy's code reading a method, indexing, and the portable form of `t.tolist()`.
_RULE_CASES: dict[str, Callable[[Any, int], float]] = {
    "np.sum(t)": _timed(np.sum), "np.round(t)": _timed(np.round), "np.unique(t)": _timed(np.unique),
    "t[1]": _timed(lambda t: t[1]),
    "t[1:3]": _timed(lambda t: t[1:3]), "t.numpy().tolist()": _timed(lambda t: t.numpy().tolist())}


def _set_rule(on: bool, own_function: Any) -> None:
    """TF's rule on (the methods' descriptors, the script's `__array_function__`) or numpy's for every caller."""
    (tensor_methods.install if on else tensor_methods.uninstall)(HostTensor)
    HostTensor.__array_function__ = own_function if on else np.ndarray.__array_function__


def _method_rule(repeats: int, reads: int) -> dict[str, dict[str, float]]:
    """`rule off` against `rule on` (tensor_methods installed or not on the host tensor class, with its
    `__array_function__` or numpy's), interleaved."""
    value = np.array([1.0, 2.0, 3.0, 4.0], np.float32).view(HostTensor)
    was_on = tensor_methods.installed(HostTensor)
    own_function = HostTensor.__dict__["__array_function__"]
    results: dict[str, dict[str, float]] = {}
    try:
        for name, work in _RULE_CASES.items():
            times: dict[str, list[float]] = {"rule off": [], "rule on": []}
            for _ in range(repeats):
                for side in times:
                    _set_rule(side == "rule on", own_function)
                    times[side].append(work(value, reads))
            median = {side: statistics.median(ts) for side, ts in times.items()}
            results[name] = median
            print(f"{name:<19} per {reads} reads: rule off {1e3 * median['rule off']:.2f} ms, rule on "
                  f"{1e3 * median['rule on']:.2f} ms | on/off {median['rule on'] / median['rule off']:.2f}x")
    finally:
        _set_rule(was_on, own_function)
    return results


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds (median taken)")
    parser.add_argument("--reads", type=int, default=20000, help="reads per timed batch")
    args = parser.parse_args(argv)
    base = np.array([1.0, 2.0, 3.0], np.float32)
    sides = {"np": base, "uncached": base.view(_UncachedTensor), "cached": base.view(HostTensor)}
    # the sides read what they should: numpy's dtype for an array, TF's DType for a tensor in a script
    assert str(sides["cached"].dtype) == str(sides["uncached"].dtype) == "<dtype: 'float32'>"
    results: dict[str, dict[str, float]] = {}
    for name, work in (("t.dtype", _dtype_reads), ("np.sqrt(t)", _sqrts)):
        times: dict[str, list[float]] = {side: [] for side in sides}
        for _ in range(args.repeats):
            for side, value in sides.items():
                times[side].append(work(value, args.reads))
        median = {side: statistics.median(ts) for side, ts in times.items()}
        results[name] = median
        print(f"{name:<11} per {args.reads} reads: " + ", ".join(f"{s} {1e3 * t:.2f} ms" for s, t in median.items())
              + f" | uncached/np {median['uncached'] / median['np']:.1f}x, cached/np "
              f"{median['cached'] / median['np']:.1f}x, uncached/cached {median['uncached'] / median['cached']:.2f}x")
    results.update(_method_rule(args.repeats, args.reads))
    return results


_: Callable[..., Any] = main
if __name__ == "__main__":
    main()
