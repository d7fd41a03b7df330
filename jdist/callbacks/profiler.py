"""`ProfilerCallback`: a `jax.profiler` trace of chosen training steps (Keras's `profile_batch`)."""
from __future__ import annotations

import os

from jdist.callbacks.base import Callback, Logs
from jdist.diagnostics.profiler import Profile


class ProfilerCallback(Callback):
    """Traces global training steps `profile_batch` into `logdir` for TensorBoard / Perfetto.

    `profile_batch=(start, stop)` traces steps start..stop inclusive, counted
    from 1 across epochs (as Keras's `TensorBoard(profile_batch=...)`); an int
    traces that one step. With `steps_per_execution=k` the trace covers whole
    executions. After training, `trace_files` lists the files written.
    """

    def __init__(self, logdir: str | os.PathLike, profile_batch: int | tuple[int, int] = (2, 4),
                 *, perfetto: bool = False):
        super().__init__()
        start, stop = (profile_batch, profile_batch) if isinstance(profile_batch, int) else profile_batch
        if isinstance(start, bool) or not 0 < start <= stop:
            raise ValueError(f"profile_batch must be a positive int or a pair 0 < start <= stop, "
                             f"got {profile_batch!r}.")
        self._start, self._stop = start, stop
        self._profile = Profile(os.fspath(logdir), None, perfetto)
        self._done = 0  # steps finished, when there is no trainer to ask

    @property
    def trace_files(self) -> list[str]:
        return self._profile.trace_files

    @property
    def active(self) -> bool:
        return self._profile.active

    def _steps_done(self) -> int:
        return int(getattr(self.trainer, "step", self._done)) if self.trainer is not None else self._done

    def _maybe_start(self) -> None:
        # The next step to run is steps_done + 1; start just before `start`.
        if not self._profile.active and not self._profile.trace_files and self._steps_done() + 1 >= self._start:
            if self._steps_done() < self._stop:
                self._profile.start()

    def on_train_begin(self, logs: Logs | None = None) -> None:
        self._maybe_start()

    def on_train_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        self._done += 1
        if self._profile.active and self._steps_done() >= self._stop:
            self._profile.stop()
        self._maybe_start()

    def on_train_end(self, logs: Logs | None = None) -> None:
        self._profile.stop()
