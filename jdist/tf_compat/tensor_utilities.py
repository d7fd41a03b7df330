"""TF's small top-level utilities: `tf.control_dependencies`, `tf.get_static_value`, `tf.inside_function`,
`tf.is_symbolic_tensor`, `tf.tuple`, `tf.shape_n`, `tf.dtypes.saturate_cast` and `tf.version`.

jdist compiles pure functions: XLA orders operations by their data, and the effects jdist keeps (`tf.print`,
variable updates in Keras's state) are ordered by JAX. So `tf.control_dependencies(...)` is a context that runs
its body, as TF2's eager one does, and `tf.tuple` returns its tensors. A "symbolic" tensor is a traced value
(inside `tf.function` / `strategy.run`), whose value `get_static_value` cannot give (None, as TF's).
"""
from __future__ import annotations

import builtins
import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

import jax
import ml_dtypes
import numpy as np
from jax.core import Tracer

from jdist.tf_compat.dtype_table import as_dtype, numpy_dtype
from jdist.tf_compat.ops import convert_to_tensor, xp
from jdist.tf_compat.predicates import executing_eagerly


@contextlib.contextmanager
def control_dependencies(control_inputs: Iterable[Any] | None) -> Iterator[None]:
    """`tf.control_dependencies(inputs)`: runs the block; XLA orders compiled operations by their data."""
    yield None


def get_static_value(tensor: Any, partial: bool = False) -> Any:
    """`tf.get_static_value`: a tensor's numpy value; None for a traced one or a variable (as TF's); any other
    value as it is (TF 2.21: 3 gives 3, [1, 2] gives [1, 2])."""
    if isinstance(tensor, Tracer) or (hasattr(tensor, "assign") and hasattr(tensor, "path")):
        return None
    if isinstance(tensor, (np.ndarray, np.generic, jax.Array)):
        value = np.asarray(tensor)
        return value[()] if value.ndim == 0 else value  # TF 2.21: np.int32(3) for a scalar tensor
    return tensor


get_static_value._jdist_tensors = True  # type: ignore[attr-defined]  # numpy's values, not tensors (TF 2.21)


def inside_function() -> bool:
    """`tf.inside_function()`: True while a `tf.function` (or `strategy.run`, `jax.jit`) traces the code."""
    return not executing_eagerly()


def is_symbolic_tensor(tensor: Any) -> bool:
    """`tf.is_symbolic_tensor`: a traced value (TF's graph tensor); False for values, variables, numbers."""
    return isinstance(tensor, Tracer)


def tuple(tensors: Iterable[Any], control_inputs: Iterable[Any] | None = None,  # noqa: A001 (TF's name)
          name: str | None = None) -> list:
    """`tf.tuple`: the tensors as a list, None kept (TF's grouping orders nothing in compiled code)."""
    return list(tensors)


def shape_n(input: Iterable[Any], out_type: Any = "int32", name: str | None = None) -> list:  # noqa: A002
    """`tf.shape_n`: each tensor's shape, int32 (or `out_type`), known while tracing."""
    return [np.asarray(np.shape(convert_to_tensor(t)), numpy_dtype(out_type)) for t in input]


def _limits(dtype: np.dtype) -> builtins.tuple[Any, Any]:
    info = ml_dtypes.finfo(dtype) if dtype.kind == "f" or dtype == ml_dtypes.bfloat16 else np.iinfo(dtype)
    return info.min, info.max


def saturate_cast(value: Any, dtype: Any, name: str | None = None) -> Any:
    """`tf.dtypes.saturate_cast`: clamps into `dtype`'s range, then casts (TF 2.21's rule: the limits are
    nudged toward zero where the input dtype cannot hold them; float32 3e9 to int32 gives 2147483520)."""
    x = convert_to_tensor(value)
    target, source = np.dtype(numpy_dtype(dtype)), np.dtype(x.dtype)
    if target.kind == "b" or source.kind == "b":
        name_ = as_dtype(target if target.kind == "b" else source)
        raise TypeError(f"Cannot find minimum value of {name_} with type {name_}.")
    module = xp(x)
    if source.kind == "c":
        if target.kind == "c":
            low, high = _limits(np.dtype(target.type(0).real.dtype))
            re, im = (module.clip(part, low, high) for part in (module.real(x), module.imag(x)))
            return (re + 1j * im).astype(target)
        x, source = module.real(x), np.dtype(module.real(x).dtype)
    out_real = np.dtype(target.type(0).real.dtype) if target.kind == "c" else target
    (in_min, in_max), (out_min, out_max) = _limits(source), _limits(out_real)
    try:
        promoted = np.promote_types(source, out_real)
    except TypeError:
        promoted = np.dtype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        low = source.type(np.maximum(in_min, out_min))
        if np.array([low, out_min], promoted)[0] < np.array([low, out_min], promoted)[1]:
            low = np.nextafter(low, source.type(0), dtype=source)
        high = source.type(np.minimum(float(in_max), float(out_max)))
        if np.array([high, out_max], promoted)[0] > np.array([high, out_max], promoted)[1]:
            high = np.nextafter(high, source.type(0), dtype=source)
        return module.clip(x, low, high).astype(target)


def version_names(version: str) -> dict[str, str]:
    """`tf.version`: VERSION is `tf.__version__` (TF's API version, marked as jdist's)."""
    return {"VERSION": version, "GIT_VERSION": f"v{version}", "COMPILER_VERSION": f"XLA (jax {jax.__version__})"}
