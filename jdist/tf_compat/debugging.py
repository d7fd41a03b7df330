"""`tf.debugging`: assertions and `check_numerics` with TF 2.21's errors and messages (observed).

On values (eager, host) a failed check raises `tf.errors.InvalidArgumentError` at once. On traced values (inside
`tf.function` / `strategy.run` / `Dataset.map`) the check runs on the host when the program runs (`host_check`:
an unordered `io_callback`, effectful, so XLA keeps it when nothing reads its result: TF 2.21 raises for
`check_numerics(x, ...)` or an assert whose output is unused, observed) and the call raises the same
InvalidArgumentError, as TF 2.21's does (observed), not JAX's runtime error: the failing callback records its
error and returns normally (every replica runs to the end, no collective waits forever), and
`jdist.strategy.host_checks` waits for a program that holds checks and raises the failure after it (Keras
`fit`/`evaluate`/`predict` included: `jdist.interop.keras_checks`). `tf.config.optimizer`'s `debug_stripper`
option drops traced checks (used `check_numerics` results included) and keeps eager ones, as TF 2.21's
(observed).
Static checks (`assert_rank`, `assert_shapes`) raise ValueError while tracing, as TF's do.
`enable_check_numerics` turns on JAX's `jax_debug_nans` / `jax_debug_infs` (a FloatingPointError naming the
first operation that made a NaN or Inf; compiled functions re-run op by op to find it).
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np
from jax.core import Tracer
from jax.experimental import io_callback

from jdist.strategy import host_checks
from jdist.tf_compat.config_switches import get_experimental_options
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.ops import convert_to_tensor


def _traced(*values: Any) -> bool:
    return any(isinstance(v, Tracer) for v in values)


def _stripped() -> bool:
    """`tf.config.optimizer.set_experimental_options({'debug_stripper': True})`: TF 2.21 drops the checks and
    asserts of traced functions (used results included) and keeps eager ones (observed)."""
    return bool(get_experimental_options().get("debug_stripper", False))


def host_check(check: Callable[..., Any], result: Any, *values: Any) -> Any:
    """`check(*values)` on the host when the compiled program runs (an `io_callback`, kept when its result is
    unused). A failed check never raises inside the program (a replica stopped there leaves the others waiting
    at their next collective): its InvalidArgumentError is recorded, the callback returns the first value
    unchanged (or None), and the program's caller raises it after the program (`jdist.strategy.host_checks`)."""
    def run(*arrays: Any) -> Any:
        try:
            return check(*arrays)
        except InvalidArgumentError as error:
            host_checks.failed(error)  # raises only outside any boundary (a program jdist did not compile)
            return None if result is None else np.asarray(arrays[0], dtype=result.dtype)

    host_checks.note_placed()
    return io_callback(run, result, *values)


def _prefix(message: str | None) -> str:
    return f"{message}\n" if message else ""


def _compare(symbol: str, compare: Callable[[Any, Any], Any]) -> Callable[..., None]:
    def check_values(x: np.ndarray, y: np.ndarray, message: str | None, summarize: int | None) -> None:
        try:
            x_b, y_b = np.broadcast_arrays(x, y)
        except ValueError:
            raise InvalidArgumentError(message=f"{_prefix(message)}Incompatible shapes: {list(np.shape(x))} vs. "
                                               f"{list(np.shape(y))}") from None
        holds = compare(x_b, y_b)
        if np.all(holds):
            return
        n = 3 if summarize is None else summarize
        bad = np.argwhere(~holds)[:n]
        where = (f"Indices of first {len(bad)} different values:\n{bad}\nCorresponding x values:\n"
                 f"{x_b[tuple(bad.T)]}\nCorresponding y values:\n{y_b[tuple(bad.T)]}\n"
                 if np.shape(x) == np.shape(y) and np.ndim(x) else "")  # TF: equal shapes, not scalars (observed)
        raise InvalidArgumentError(message=(
            f"{_prefix(message)}Condition x {symbol} y did not hold.\n{where}"
            f"First {min(n, np.size(x))} elements of x:\n{np.ravel(x)[:n]}\n"
            f"First {min(n, np.size(y))} elements of y:\n{np.ravel(y)[:n]}"))

    def assertion(x: Any, y: Any, data: Any = None, summarize: int | None = None, message: str | None = None,
                  name: str | None = None) -> None:
        x, y = convert_to_tensor(x), convert_to_tensor(y)
        if _traced(x, y):
            if not _stripped():
                host_check(lambda a, b: check_values(np.asarray(a), np.asarray(b), message, summarize), None, x, y)
            return None
        check_values(np.asarray(x), np.asarray(y), message, summarize)
        return None

    assertion.__doc__ = f"`tf.debugging.assert_...`: InvalidArgumentError unless x {symbol} y everywhere."
    return assertion


assert_equal = _compare("==", np.equal)
assert_not_equal = assert_none_equal = _compare("!=", np.not_equal)  # TF 2.21's name is assert_none_equal
assert_greater = _compare(">", np.greater)
assert_greater_equal = _compare(">=", np.greater_equal)
assert_less = _compare("<", np.less)
assert_less_equal = _compare("<=", np.less_equal)


def _default_tolerance(dtype: Any) -> float:
    """TF's default rtol/atol: 10 * machine epsilon of the dtype (TF 2.21: 1.1920929e-06 for float32)."""
    dtype = np.dtype(dtype)
    return float(10 * np.finfo(dtype).eps) if dtype.kind in "fc" else 0.0


def assert_near(x: Any, y: Any, rtol: Any = None, atol: Any = None, data: Any = None, summarize: int | None = None,
                message: str | None = None, name: str | None = None) -> None:
    """`tf.debugging.assert_near`: InvalidArgumentError unless |x - y| <= atol + rtol * |y| everywhere."""
    x, y = convert_to_tensor(x), convert_to_tensor(y)
    default = _default_tolerance(x.dtype)
    rtol_v = default if rtol is None else float(rtol)
    atol_v = default if atol is None else float(atol)

    def check_values(a: np.ndarray, b: np.ndarray) -> None:
        if np.all(np.abs(a - b) <= atol_v + rtol_v * np.abs(b)):
            return
        raise InvalidArgumentError(message=(
            f"{message + '.  ' if message else ''}x and y not equal to tolerance rtol = {rtol_v:.8g}, "
            f"atol = {atol_v:.8g}\nx (shape={a.shape} dtype={a.dtype}) = {a.ravel()[:summarize or 3]}\n"
            f"y (shape={b.shape} dtype={b.dtype}) = {b.ravel()[:summarize or 3]}"))

    if _traced(x, y):
        if not _stripped():
            host_check(lambda a, b: check_values(np.asarray(a), np.asarray(b)), None, x, y)
        return None
    check_values(np.asarray(x), np.asarray(y))
    return None


def assert_rank(x: Any, rank: int, message: str | None = None, name: str | None = None) -> None:
    """`tf.debugging.assert_rank`: ValueError with TF's message when x's rank (static in JAX) is not `rank`."""
    shape = tuple(np.shape(x))
    if len(shape) != int(rank):
        lead = f"{message}.  " if message else ""
        raise ValueError(f"{lead}Tensor  must have rank {int(rank)}.  Received rank {len(shape)}, shape {shape}")
    return None


def assert_shapes(shapes: Sequence[tuple[Any, Sequence[Any]]] | Mapping[Any, Sequence[Any]], data: Any = None,
                  summarize: int | None = None, message: str | None = None, name: str | None = None) -> None:
    """`tf.debugging.assert_shapes`: each tensor's shape against its spec of ints, names and None, names shared
    across tensors (TF 2.21's messages). A spec of one entry also admits a scalar, as TF's."""
    pairs = list(shapes.items()) if isinstance(shapes, Mapping) else list(shapes)
    lead = f"{message}.  " if message else ""
    sizes: dict[str, tuple[int, str]] = {}
    for tensor, spec in pairs:
        shape = tuple(np.shape(tensor))
        spec = tuple(spec)
        describe = f"shape={shape} dtype={np.dtype(getattr(tensor, 'dtype', np.asarray(tensor).dtype)).name}"
        ranks = (0, 1) if len(spec) == 1 else (len(spec),)
        if len(shape) not in ranks:
            want = f"rank in {ranks}" if len(ranks) > 1 else f"rank {ranks[0]}"
            raise ValueError(f"{lead}Tensor  must have {want}.  Received rank {len(shape)}, shape {shape}")
        if not shape:
            continue
        for dim, (want, got) in enumerate(zip(spec, shape)):
            if want is None:
                continue
            if isinstance(want, str):
                if want not in sizes:
                    sizes[want] = (got, f"Specified by tensor {describe} dimension {dim}.  ")
                    continue
                expected, origin = sizes[want]
            else:
                expected, origin = int(want), "Specified explicitly.  "
            if got != expected:
                raise ValueError(f"{lead}{origin}Tensor {describe} dimension {dim} must have size {expected}.  "
                                 f"Received size {got}, shape {shape}")
    return None


def _numerics_problem(values: np.ndarray) -> str | None:
    has_inf, has_nan = bool(np.isinf(values).any()), bool(np.isnan(values).any())
    if has_inf and has_nan:
        return "Inf and NaN"
    return "Inf" if has_inf else "NaN" if has_nan else None


def check_numerics(tensor: Any, message: str, name: str | None = None) -> Any:
    """`tf.debugging.check_numerics`: the tensor, or InvalidArgumentError "<message> : Tensor had NaN values"."""
    tensor = convert_to_tensor(tensor)
    if np.dtype(tensor.dtype).kind != "f" and str(tensor.dtype) != "bfloat16":
        raise InvalidArgumentError(message=f"check_numerics takes floating-point tensors (bfloat16, float16, "
                                           f"float32, float64), got {tensor.dtype}.")

    def check_values(values: Any) -> None:
        problem = _numerics_problem(np.asarray(values, dtype=np.float64))
        if problem is not None:
            raise InvalidArgumentError(message=f"{message} : Tensor had {problem} values")

    if _traced(tensor):
        if _stripped():
            return tensor
        def checked(values: Any) -> np.ndarray:
            check_values(values)
            return np.asarray(values)

        return host_check(checked, jax.ShapeDtypeStruct(tensor.shape, tensor.dtype), tensor)
    check_values(tensor)
    return tensor


def enable_check_numerics(stack_height_limit: int = 30, path_length_limit: int = 50) -> None:
    """`tf.debugging.enable_check_numerics`: JAX's `jax_debug_nans` and `jax_debug_infs` on."""
    jax.config.update("jax_debug_nans", True)
    jax.config.update("jax_debug_infs", True)


def disable_check_numerics() -> None:
    """`tf.debugging.disable_check_numerics`: JAX's `jax_debug_nans` and `jax_debug_infs` off."""
    jax.config.update("jax_debug_nans", False)
    jax.config.update("jax_debug_infs", False)


_LOG_DEVICE_PLACEMENT = [False]
_PLACEMENT_WARNED = [False]


def set_log_device_placement(enabled: bool) -> None:
    """`tf.debugging.set_log_device_placement`: kept, and a warning (once) that jdist logs no placements.

    TF 2.21 prints its placer's lines (`MatMul: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0`, stdout)
    and logs `Executing op MatMul in device ...` (stderr) per op (observed). jdist's ops are JAX operations and
    its functions whole XLA programs, placed by XLA: there is no per-op placement to print without wrapping every
    op. `x.devices()` or `jax.debug.visualize_array_sharding(x)` shows where an array lives."""
    _LOG_DEVICE_PLACEMENT[0] = bool(enabled)
    if enabled and not _PLACEMENT_WARNED[0]:
        _PLACEMENT_WARNED[0] = True
        warnings.warn("tf.debugging.set_log_device_placement(True): jdist prints no placement lines. Its ops run "
                      "as JAX operations and its functions as whole XLA programs, which XLA places itself; use "
                      "`x.devices()` or `jax.debug.visualize_array_sharding(x)` to see where an array lives.",
                      UserWarning, stacklevel=2)


def get_log_device_placement() -> bool:
    """`tf.debugging.get_log_device_placement`: what `set_log_device_placement` was last given (False at first)."""
    return _LOG_DEVICE_PLACEMENT[0]


NAMES = dict(
    assert_equal=assert_equal, assert_not_equal=assert_not_equal, assert_greater=assert_greater,
    assert_greater_equal=assert_greater_equal, assert_less=assert_less, assert_less_equal=assert_less_equal,
    assert_near=assert_near, assert_rank=assert_rank, assert_shapes=assert_shapes, check_numerics=check_numerics,
    enable_check_numerics=enable_check_numerics, disable_check_numerics=disable_check_numerics,
    set_log_device_placement=set_log_device_placement, assert_none_equal=assert_none_equal,
    get_log_device_placement=get_log_device_placement,
)
