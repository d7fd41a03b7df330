"""Python called from TF code: `tf.numpy_function`, `tf.py_function`, and the host's clock, `tf.timestamp`.

Eagerly (the host, a `tf.data` map function, a `tf.function`'s body outside `strategy.run`) the Python
function is simply called. Inside compiled code (`strategy.run`, `jax.jit`) it becomes a `jax.pure_callback`:
XLA calls back into Python with the values when the program runs, and must know the outputs' dtypes (`Tout`)
and shapes when it compiles. The shapes are what the function returns when called once, while compiling, on
zeros of the traced inputs' shapes and dtypes; where that call fails, `Tout` may give each output as a
`tf.TensorSpec` with its full shape instead. TF 2.21's rules (observed, eager): `numpy_function` returns what
the function returns, converted as `tf.constant` would (its `Tout` is not applied), `py_function` converts to
`Tout`; its function gets tensors with `.numpy()`, `numpy_function`'s gets numpy arrays.
"""
from __future__ import annotations

import contextlib
import functools
import io
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from jdist import thread_stdout
from jdist.input.tensor_spec import TensorSpec
from jdist.strategy import context, function_trace
from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.ops import convert_to_tensor
from jdist.tf_compat.predicates import tracing
from jdist.tfdata import user_functions
from jdist.tfdata.structure import HostTensor


def _traced(values: Sequence[Any]) -> bool:
    return any(isinstance(v, jax.core.Tracer) for v in jax.tree.leaves(list(values)))  # pyright: ignore[reportAttributeAccessIssue]


def _outputs(result: Any) -> tuple[list[Any], bool]:
    """The function's outputs as a list, and whether it returned several."""
    if isinstance(result, (list, tuple)):
        return list(result), True
    return [result], False


def _specs(op: str, func: Callable[..., Any], inp: Sequence[Any], Tout: Any,
           wrap: Callable[[Any], Any]) -> tuple[list[jax.ShapeDtypeStruct], bool]:
    """The outputs' shapes and dtypes for `pure_callback`: from TensorSpecs in `Tout`, else from one call on zeros
    (its prints hidden: TF calls the function only when the program runs)."""
    touts = list(Tout) if isinstance(Tout, (list, tuple)) else [Tout]
    several = isinstance(Tout, (list, tuple))
    if user_functions.tracing():  # a tf.data function's trace: TF does not call the function (see there)
        return [jax.ShapeDtypeStruct(_placeholder(t).shape, jax.dtypes.canonicalize_dtype(_placeholder(t).dtype))
                for t in touts], several
    if all(isinstance(t, TensorSpec) and t.shape is not None and None not in tuple(t.shape) for t in touts):
        return [jax.ShapeDtypeStruct(tuple(t.shape), jax.dtypes.canonicalize_dtype(numpy_dtype(t.dtype)))
                for t in touts], several
    zeros = [wrap(np.zeros(np.shape(v), np.dtype(v.dtype))) if hasattr(v, "dtype") else v for v in inp]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            probe, _ = _outputs(func(*zeros))
    except Exception as err:
        raise ValueError(
            f"tf.{op} inside compiled code needs its outputs' shapes when compiling; calling the function on zeros "
            f"of the inputs' shapes to learn them raised {type(err).__name__}: {err}. Give each output in `Tout` as "
            "a tf.TensorSpec(shape, dtype) with its full shape, or call it outside the compiled step") from err
    if len(probe) != len(touts):
        raise ValueError(f"tf.{op}: the function returned {len(probe)} outputs for {len(touts)} dtypes in Tout")
    specs = []
    for value, tout in zip(probe, touts):
        dtype = numpy_dtype(tout.dtype if isinstance(tout, TensorSpec) else tout)
        specs.append(jax.ShapeDtypeStruct(np.shape(value), jax.dtypes.canonicalize_dtype(dtype)))
    return specs, several


def _placeholder(tout: Any) -> np.ndarray:
    """A `Tout` entry's stand-in while a tf.data function is traced: zeros (b"" for text) of its TensorSpec's
    shape, unknown dimensions 1, or a scalar."""
    shape = tuple(tout.shape) if isinstance(tout, TensorSpec) and tout.shape is not None else ()
    dtype = numpy_dtype(tout.dtype if isinstance(tout, TensorSpec) else tout)
    shape = tuple(1 if d is None else int(d) for d in shape)
    return np.full(shape, b"", dtype=object) if dtype.kind in "OSU" else np.zeros(shape, dtype)


def _traced_result(Tout: Any, several: bool) -> Any:
    touts = list(Tout) if isinstance(Tout, (list, tuple)) else [Tout]
    out = [HostTensor.of(_placeholder(t)) for t in touts]
    user_functions.note_host_output(out)  # their shapes are unknown to TF's trace
    return out if several else out[0]


def _callback(op: str, func: Callable[..., Any], inp: Sequence[Any], Tout: Any, wrap: Callable[[Any], Any]) -> Any:
    specs, several = _specs(op, func, inp, Tout, wrap)

    def host(*values: Any) -> list[np.ndarray]:
        outputs, _ = _outputs(func(*[wrap(np.asarray(v)) for v in values]))
        converted = [np.asarray(o, dtype=s.dtype) for o, s in zip(outputs, specs)]
        for value, spec in zip(converted, specs):
            if value.shape != spec.shape:
                raise ValueError(f"tf.{op}: the function returned shape {value.shape} where it returned "
                                 f"{spec.shape} when compiled; a compiled call's outputs keep their shapes")
        return converted

    out = jax.pure_callback(host, specs, *inp, vmap_method="sequential")
    return list(out) if several else out[0]


def _no_outputs(Tout: Any) -> bool:
    return Tout is None or (isinstance(Tout, (list, tuple)) and not Tout)


def numpy_function(func: Callable[..., Any] | None = None, inp: Sequence[Any] | None = None, Tout: Any = None,
                   stateful: bool = True, name: str | None = None) -> Any:
    """Calls `func` on numpy arrays; inside compiled code through `jax.pure_callback` (see the module)."""
    if func is None:  # the decorator form: the decorated function takes the inputs
        return lambda f: functools.wraps(f)(lambda *args: numpy_function(f, list(args), Tout, stateful, name))
    inp = list(inp or [])
    if _traced(inp) or context.in_replica_context() or function_trace.active():
        if _no_outputs(Tout):
            raise ValueError("tf.numpy_function inside compiled code needs `Tout` (XLA only calls back for outputs)")
        return _callback("numpy_function", func, inp, Tout, lambda v: v)
    if user_functions.tracing():  # a tf.data function's trace: TF does not call the function
        return None if _no_outputs(Tout) else _traced_result(Tout, isinstance(Tout, (list, tuple)))
    with thread_stdout.shown():  # it runs on every call, as TF's op
        result = func(*[np.asarray(v) for v in inp])
    if result is None or _no_outputs(Tout):
        return None
    outputs, several = _outputs(result)
    converted = [HostTensor.of(convert_to_tensor(o)) for o in outputs]  # TF's tensors (`.numpy()`, `set_shape`)
    return converted if several else converted[0]


@contextlib.contextmanager
def _as_op_errors() -> Any:
    """An error raised by a `py_function`'s function as TF 2.21 raises it (observed): TypeError and ValueError as
    InvalidArgumentError, StopIteration (OutOfRangeError) and tf.errors' classes unchanged, any other as
    UnknownError; the text names the original ("TypeError: ...") and the original is the cause."""
    from jdist.errors import InvalidArgumentError, OpError
    from jdist.tf_compat.error_types import UnknownError

    try:
        yield
    except (OpError, StopIteration):
        raise
    except Exception as e:
        kind = InvalidArgumentError if isinstance(e, (TypeError, ValueError)) else UnknownError
        raise kind(None, None, f"{type(e).__name__}: {e} [Op:EagerPyFunc]") from e


def py_function(func: Callable[..., Any] | None = None, inp: Sequence[Any] | None = None, Tout: Any = None,
                name: str | None = None) -> Any:
    """Calls `func` on tensors (with `.numpy()`), its outputs converted to `Tout`; inside compiled code through
    `jax.pure_callback` (see the module)."""
    if Tout is None:
        raise TypeError("Missing required argument: 'Tout'. If using tf.py_function as a decorator, set `Tout` by "
                        "name above the function: `@tf.py_function(Tout=tout)`")
    if func is None:  # the decorator form (`@tf.py_function(Tout=...)`): the decorated function takes the inputs
        return lambda f: functools.wraps(f)(lambda *args: py_function(f, list(args), Tout, name))
    inp = list(inp or [])
    if _traced(inp) or context.in_replica_context() or function_trace.active():
        if _no_outputs(Tout):
            raise ValueError("tf.py_function inside compiled code needs `Tout` (XLA only calls back for outputs)")
        return _callback("py_function", func, inp, Tout, HostTensor.of)
    if user_functions.tracing():  # a tf.data function's trace: TF does not call the function
        return None if _no_outputs(Tout) else _traced_result(Tout, isinstance(Tout, (list, tuple)))
    with thread_stdout.shown(), _as_op_errors():  # it runs on every call, as TF's op
        result = func(*[HostTensor.of(np.asarray(v)) for v in inp])
    if _no_outputs(Tout):
        return None
    outputs, _ = _outputs(result)
    touts = list(Tout) if isinstance(Tout, (list, tuple)) else [Tout]
    if len(outputs) != len(touts):
        raise ValueError(f"tf.py_function: the function returned {len(outputs)} outputs for {len(touts)} dtypes in "
                         "Tout")
    dtypes = [numpy_dtype(t.dtype if isinstance(t, TensorSpec) else t) for t in touts]
    converted = [HostTensor.of(convert_to_tensor(o if isinstance(o, (bytes, list)) else np.asarray(o),
                                                 None if d.kind == "O" else d))  # text: bytes, trailing NULs kept
                 for o, d in zip(outputs, dtypes)]
    return converted if isinstance(Tout, (list, tuple)) else converted[0]


def timestamp(name: str | None = None) -> np.float64:
    """Seconds since the epoch, float64, read on the host when called."""
    if tracing() or context.in_replica_context():
        raise ValueError("tf.timestamp inside compiled code would be read once, when compiling (and float64 needs "
                         "jax_enable_x64): read it around the step, outside strategy.run / jax.jit")
    return np.float64(time.time())


NAMES = dict(numpy_function=numpy_function, py_function=py_function, timestamp=timestamp)
