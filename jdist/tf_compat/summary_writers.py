"""`tf.summary.write`, `flush`, `create_noop_writer` and the graph tracing names, next to jdist's
`tf.summary` writers (jdist.tf_compat.summary).

`write` records any tensor with the `SummaryMetadata` given (a serialized proto, or an object with
`SerializeToString`, such as TF's); TF 2.21 writes an empty plugin name without one (observed). A tensor from
compiled code is written by a `jax.debug.callback` from replica 0, as `tf.summary.scalar`'s is. A no-op writer
made default records nothing (every summary returns False). jdist has no TF graphs: `trace_on` / `trace_off` /
`trace_export` accept TF's arguments and write nothing (JAX's profiler is `jax.profiler`, its programs'
HLO `jax.jit(f).lower(...).as_text()`), and `graph` raises.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from jdist.callbacks.event_file import encode_tensor_value, proto_fields
from jdist.strategy.context import get_replica_context
from jdist.tf_compat.ops import convert_to_tensor
from jdist.tf_compat.summary import _STATE, WriterBase, get_step, read_variables, should_record_summaries


def default_writer() -> Any:
    """The default writer, if summaries are being recorded now (else None)."""
    if not should_record_summaries():
        return None
    return _STATE["writer"]


def record(name: str, data: Any, step: Any, encode: Callable[[np.ndarray], bytes]) -> jax.Array:
    """Writes `encode(data)` (a serialized `Summary.Value`) to the default writer at `step`; True if written.
    Traced `data` or `step` are written when the compiled program runs, from replica 0 only."""
    writer = default_writer()
    if writer is None:
        return jnp.asarray(False)
    step = get_step() if step is None else step
    if step is None:
        raise ValueError("No step set. Please specify one either through the `step` argument or through "
                         "tf.summary.experimental.set_step()")
    data, step = read_variables(data), read_variables(step)
    if not any(isinstance(v, Tracer) for v in jax.tree.leaves((data, step))):
        writer.write(int(np.asarray(step)), encode(np.asarray(data)))
        return jnp.asarray(True)
    encode(np.zeros(np.shape(data), np.dtype(data.dtype)))  # shape and dtype checks while tracing
    context = get_replica_context()
    replica = 0 if context is None else context.replica_id_in_sync_group

    def written(values: Any, at: Any, replica_id: Any) -> None:
        if int(replica_id) == 0:
            writer.write(int(np.asarray(at)), encode(np.asarray(values)))

    jax.debug.callback(written, data, step, replica)
    return jnp.asarray(True)


def _message_fields(buf: bytes) -> dict[int, bytes]:
    """The length-delimited fields of a protobuf message (the last of each number), varints skipped."""
    return {number: value for number, wire, value in proto_fields(buf) if wire == 2 and isinstance(value, bytes)}


def _metadata(metadata: Any) -> tuple[str, bytes, str]:
    """(plugin name, plugin content, description) of a `SummaryMetadata` proto or its serialization."""
    if metadata is None:
        return "", b"", ""
    if hasattr(metadata, "SerializeToString"):
        metadata = metadata.SerializeToString()
    if not isinstance(metadata, bytes):
        raise TypeError(f"metadata must be a SummaryMetadata proto or its serialized bytes, got "
                        f"{type(metadata).__name__}")
    fields = _message_fields(metadata)
    plugin = _message_fields(fields.get(1, b""))
    return plugin.get(1, b"").decode(), plugin.get(2, b""), fields.get(3, b"").decode()


def write(tag: str, tensor: Any, step: Any = None, metadata: Any = None, name: str | None = None) -> jax.Array:
    """`tf.summary.write`: `tensor` (or what the callable `tensor` returns) under `tag`, with `metadata`'s
    plugin name, content and description; True if written."""
    plugin, content, description = _metadata(metadata)
    if default_writer() is None:
        return jnp.asarray(False)
    value: Any = tensor() if callable(tensor) else tensor
    value = value if isinstance(value, (jax.Array, Tracer)) else convert_to_tensor(value)
    return record(tag, value, step, lambda v: encode_tensor_value(tag, v, plugin, description, content))


def flush(writer: Any = None, name: str | None = None) -> None:
    """`tf.summary.flush`: pushes `writer`'s (else the default writer's) events to disk."""
    writer = _STATE["writer"] if writer is None else writer
    if writer is not None:
        writer.flush()


class NoopSummaryWriter(WriterBase):
    """`tf.summary.create_noop_writer()`'s writer: made default, summaries record nothing and return False."""

    closed = True  # what `should_record_summaries` reads: nothing is recorded through it

    def init(self) -> None:
        """Nothing to open."""

    def flush(self) -> None:
        """Nothing to write."""

    def close(self) -> None:
        """Nothing to close."""


def create_noop_writer() -> NoopSummaryWriter:
    """`tf.summary.create_noop_writer`."""
    return NoopSummaryWriter()


_TRACE_WARNED = [False]


def trace_on(graph: bool = True, profiler: bool = False, profiler_outdir: str | None = None) -> None:
    """`tf.summary.trace_on`: accepted; nothing is traced (warns once): profile with `jax.profiler`."""
    if not _TRACE_WARNED[0]:
        _TRACE_WARNED[0] = True
        warnings.warn("tf.summary.trace_on/trace_export write nothing under jdist (there are no TF graphs): profile "
                      "with jax.profiler.trace(logdir) or jax.profiler.start_trace(logdir), which TensorBoard's "
                      "profile plugin reads, and print a compiled program with jax.jit(f).lower(*args).as_text().",
                      stacklevel=2)


def trace_off() -> None:
    """`tf.summary.trace_off`: nothing to stop."""


def trace_export(name: str, step: Any = None, profiler_outdir: str | None = None) -> None:
    """`tf.summary.trace_export`: writes nothing (see `trace_on`)."""


def graph(graph_data: Any) -> Any:
    """`tf.summary.graph`: jdist has no TF graphs to write."""
    raise NotImplementedError("tf.summary.graph writes a TensorFlow graph, which jdist programs do not have: "
                              "print a compiled program with jax.jit(f).lower(*args).as_text(), or profile with "
                              "jax.profiler.trace(logdir) for TensorBoard's profile plugin.")


NAMES = dict(write=write, flush=flush, create_noop_writer=create_noop_writer, trace_on=trace_on, trace_off=trace_off,
             trace_export=trace_export, graph=graph)
