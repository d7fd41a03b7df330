"""`tf.summary`: file writers, `scalar`, `histogram`, `text`, `record_if` and the default step, writing
TensorBoard event files with jdist's writer (jdist.callbacks.event_file, no TensorFlow needed).

Events hold what TF 2.21 writes for the same calls (observed, read back with TensorBoard's loader): a float32
scalar tensor under the "scalars" plugin, a float64 [30, 3] (left edge, right edge, count) tensor under
"histograms", a string tensor under "text". A call with no default writer, inside `record_if(False)` or
after the writer is closed records nothing and returns False, as TF's.

Inside compiled code (`strategy.run`, `jax.jit`) a traced `data` or `step` is written by a
`jax.debug.callback` when the program runs, from replica 0 only (TF 2.21's MirroredStrategy writes replica 0's
value only, observed); the call returns True there once the writer and `record_if` allow it (decided while tracing).
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from jdist.callbacks.event_file import EventFileWriter, encode_tensor_value, histogram_buckets, next_file_suffix
from jdist.strategy.context import get_replica_context

_STATE: dict[str, Any] = {"writer": None, "step": None, "record": True}


class WriterBase:
    """What makes a writer the default one (and a step the default step): shared by every `tf.summary` writer."""

    def _check_open(self) -> None:
        """Raises where this writer cannot be made default (a closed file writer)."""

    @contextlib.contextmanager
    def as_default(self, step: Any = None) -> Iterator[Any]:
        """Makes this the default writer (and `step` the default step, if given) inside the block."""
        self._check_open()
        saved = dict(_STATE)
        _STATE["writer"] = self
        if step is not None:
            _STATE["step"] = step
        try:
            yield self
        finally:
            _STATE["writer"] = saved["writer"]
            if step is not None:
                _STATE["step"] = saved["step"]

    def set_as_default(self, step: Any = None) -> None:
        """Makes this the default writer from now on."""
        self._check_open()
        _STATE["writer"] = self
        if step is not None:
            _STATE["step"] = step


class SummaryWriter(WriterBase):
    """`tf.summary.create_file_writer`'s result: one event file in `logdir`."""

    def __init__(self, logdir: str, filename_suffix: str | None = None):
        self._events = EventFileWriter(logdir, filename_suffix=next_file_suffix(filename_suffix))
        self.closed = False

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError(f"SummaryWriter {self!r} is already closed")

    def init(self) -> None:
        """Nothing to do: the file is open from creation."""

    def flush(self) -> None:
        if not self.closed:
            self._events.flush()

    def close(self) -> None:
        if not self.closed:
            self._events.close()
            self.closed = True

    def write(self, step: int, value: bytes) -> None:
        if not self.closed:
            self._events.add_values(step, [value])


def create_file_writer(logdir: str, max_queue: int | None = None, flush_millis: int | None = None,
                       filename_suffix: str | None = None, name: str | None = None,
                       experimental_trackable: bool = False, experimental_mesh: Any = None) -> SummaryWriter:
    """`tf.summary.create_file_writer`: events written as each call is made (flush to push them to disk)."""
    return SummaryWriter(str(logdir), filename_suffix)


def set_step(step: Any) -> None:
    """`tf.summary.experimental.set_step`: the step summaries use when called without one."""
    _STATE["step"] = step


def get_step() -> Any:
    """`tf.summary.experimental.get_step`."""
    return _STATE["step"]


@contextlib.contextmanager
def record_if(condition: bool | Callable[[], bool]) -> Iterator[None]:
    """`tf.summary.record_if`: summaries inside the block are written only while `condition` (or its call) holds."""
    saved = _STATE["record"]
    _STATE["record"] = condition
    try:
        yield
    finally:
        _STATE["record"] = saved


def should_record_summaries() -> bool:
    """`tf.summary.should_record_summaries`: a default writer is set, open, and `record_if` allows it."""
    writer = _STATE["writer"]
    if writer is None or writer.closed:
        return False
    condition = _STATE["record"]
    return bool(condition() if callable(condition) else condition)


def read_variables(value: Any) -> Any:
    """`value` with each variable read (`step=optimizer.iterations`, `data=optimizer.learning_rate`, as TF's
    custom loops pass them, observed in TF 2.21): inside compiled code a variable's value is traced, and a
    variable object cannot be handed to the host callback that writes it."""
    return jax.tree.map(lambda v: jnp.asarray(v) if hasattr(v, "__jax_array__") and not isinstance(
        v, (jax.Array, Tracer)) else v, value)


def _write(name: str, data: Any, step: Any, prepare: Callable[[np.ndarray], np.ndarray], plugin: str,
           description: str | None) -> jax.Array:
    if not should_record_summaries():
        return jnp.asarray(False)
    step = _STATE["step"] if step is None else step
    if step is None:
        raise ValueError("No step set. Please specify one either through the `step` argument or through "
                         "tf.summary.experimental.set_step()")
    writer: SummaryWriter = _STATE["writer"]
    data, step = read_variables(data), read_variables(step)
    traced = any(isinstance(v, Tracer) for v in jax.tree.leaves((data, step)))
    if not traced:
        writer.write(int(np.asarray(step)), encode_tensor_value(name, prepare(np.asarray(data)), plugin,
                                                                description or ""))
        return jnp.asarray(True)
    if plugin == "text":
        raise TypeError(f"tf.summary.text({name!r}, ...) takes host strings: call it outside compiled code.")
    prepare(np.zeros(np.shape(data)))  # shape checks while tracing
    context = get_replica_context()
    replica = 0 if context is None else context.replica_id_in_sync_group

    def record(values: Any, at: Any, replica_id: Any) -> None:
        if int(replica_id) == 0:
            writer.write(int(np.asarray(at)), encode_tensor_value(name, prepare(np.asarray(values)), plugin,
                                                                  description or ""))

    jax.debug.callback(record, data, step, replica)
    return jnp.asarray(True)


def _scalar_value(data: np.ndarray) -> np.ndarray:
    if data.dtype.kind in "USO":
        raise TypeError(f"tf.summary.scalar takes a number, got a {data.dtype} value: use tf.summary.text.")
    if data.ndim != 0:
        raise ValueError(f"Expected scalar shape, saw shape: {data.shape}.")
    return data.astype(np.float32)


def scalar(name: str, data: Any, step: Any = None, description: str | None = None) -> jax.Array:
    """`tf.summary.scalar`: a float32 scalar at `step` (or the default step); True if written."""
    return _write(name, data, step, _scalar_value, "scalars", description)


def histogram(name: str, data: Any, step: Any = None, buckets: int | None = None,
              description: str | None = None) -> jax.Array:
    """`tf.summary.histogram`: TensorBoard's bucketed histogram (30 buckets unless given); True if written."""
    return _write(name, data, step, lambda d: histogram_buckets(d, buckets or 30), "histograms", description)


def _text_value(data: np.ndarray) -> np.ndarray:
    if data.dtype.kind not in "USO":
        raise TypeError(f"tf.summary.text takes strings, got {data.dtype}: format the value first, e.g. str(x).")
    return data


def text(name: str, data: Any, step: Any = None, description: str | None = None) -> jax.Array:
    """`tf.summary.text`: a string (or array of strings) at `step`; True if written (host values only)."""
    return _write(name, data, step, _text_value, "text", description)
