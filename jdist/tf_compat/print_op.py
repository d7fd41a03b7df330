"""`tf.print`: eagerly it writes at once; in compiled code (a traced `tf.function`, `strategy.run`) it writes
each time the program runs, as TF's graph op, through `jax.debug.callback`.

Values print as TF prints them (observed, TF 2.21): Python bools as True / False, None as None, tensors and
variables by their values (`summarize` elements per dimension). A `GradientTape`'s replay of code that ran
already (`jdist.interop.gradient_tape`) prints nothing again. Inside `strategy.run` each replica prints,
also a line of constants only (TF prints it once per replica); replicas may print in any order. Without a
strategy a compiled function's prints keep their program order (an ordered callback).
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp

from jdist import thread_stdout
from jdist.interop.gradient_tape import replaying
from jdist.interop.trace_state import under_jit
from jdist.strategy import context, function_trace
from jdist.tf_compat.ops import is_jax
from jdist.tf_compat.tensor_summary import summarize_tensor

if TYPE_CHECKING:
    from _typeshed import SupportsWrite


def _format(value: object, summarize: int) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, (tuple, list)):  # structures print their parts, as TF prints a nest of tensors
        inner = ", ".join(_format(v, summarize) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_format(v, summarize)}" for k, v in value.items()) + "}"
    return summarize_tensor(value, summarize)


def _arrays(value: Any) -> Any:
    """`value` with its variables read (a callback takes arrays, not objects that convert to them)."""
    return jax.tree.map(lambda leaf: jnp.asarray(leaf) if hasattr(leaf, "__jax_array__") else leaf, value)


def _replica_id() -> list:
    """Inside `strategy.run`'s compiled replicas, the replica's id: an argument that makes a callback of
    constants run once per replica."""
    if not context.in_replica_context():
        return []
    replica = context.get_replica_context()
    replica_id = getattr(replica, "replica_id_in_sync_group", None)
    return [replica_id] if is_jax(replica_id) else []


def print(*inputs: object, output_stream: SupportsWrite[str] | None = None, summarize: int = 3,  # noqa: A001
          sep: str = " ", end: str = "\n", name: str | None = None) -> None:
    """`tf.print`: to stderr (TF's default stream); inside compiled code it prints when the step runs."""
    if replaying():  # a tape's gradient runs the code again: it printed the first time (TF prints once)
        return None
    stream = sys.stderr if output_stream is None else output_stream

    def emit(*values: object) -> None:
        with thread_stdout.shown():  # printed on every call, also where a body's `print` is held back
            stream.write(sep.join(_format(v, summarize) for v in values) + end)

    if is_jax(*inputs) or function_trace.active() or under_jit():  # compiled: printed on every run, as TF's
        strings = {i: v for i, v in enumerate(inputs) if not is_jax(v)}
        arrays = [_arrays(v) for v in inputs if is_jax(v)]
        extra = [] if arrays else _replica_id()

        def callback(*values: object) -> None:
            it = iter(values[:len(arrays)])
            emit(*(strings[i] if i in strings else next(it) for i in range(len(inputs))))

        # one device (no strategy): in program order, as TF orders a function's prints; replicas cannot order
        ordered = context.get_strategy().num_replicas_in_sync == 1
        jax.debug.callback(callback, *arrays, *extra, ordered=ordered)
    else:
        emit(*inputs)
