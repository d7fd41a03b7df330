"""What every preemption handler shares: hearing the notice, agreeing on a step, counting runs, exiting.

A notice is SIGTERM by default, or whatever `TerminationConfig.termination_watcher_fn` reports. In a
multi-process job (`jax.distributed` initialized) JAX's preemption service catches SIGTERM on any process
and agrees on one step for all of them (`multihost_utils.reached_preemption_sync_point`); in a single process
the watch installs its own SIGTERM handler. At that step the handler saves (`_save`, its own), waits for the
write and calls `exit_fn` (default `sys.exit(42)`, TF's restartable exit code). jdist's handler
(`jdist.checkpoint.preemption`) saves a functional training state; TF's (`jdist.train.preemption`) saves a
`tf.train.CheckpointManager`.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import os
import signal
import sys
import threading
import time
from typing import Any, Callable

import jax

logger = logging.getLogger("jdist.checkpoint.preemption")

RESTART_EXIT_CODE = 42
_SAFETY_STEPS = 6  # TF keeps 3 x 2 estimated step times in reserve before the grace period ends


def _default_exit() -> None:
    sys.exit(RESTART_EXIT_CODE)


@dataclasses.dataclass
class TerminationConfig:
    """How a platform announces termination and how to react (TF's `TerminationConfig`).

    Attributes:
      termination_watcher_fn: polled about once a second from a background thread; returns
        True once termination is imminent. None: SIGTERM is the notice.
      exit_fn: called after the checkpoint is written. None: `sys.exit(42)`.
      grace_period: seconds between the notice and the actual kill. With it, the handler saves
        at once, keeps training while time allows, then saves again and exits (TF's countdown).
        None or 0: save at the next step boundary and exit.
      save_fn: replaces the handler's own save: `save_fn(total_run_calls, state)` for jdist's handler,
        `save_fn(*args, **kwargs)` (what `manager.save` would get) for TF's.
    """

    termination_watcher_fn: Callable[[], bool] | None = None
    exit_fn: Callable[[], Any] | None = None
    grace_period: float | None = None
    save_fn: Callable[..., Any] | None = None


def _jax_preemption_service_active() -> bool:
    if not jax.distributed.is_initialized():
        return False
    from jax._src import distributed

    return getattr(distributed.global_state, "preemption_sync_manager", None) is not None


class PreemptionWatch:
    """The notice, the run counter, the agreed save step and the exit; subclasses say how to save."""

    def __init__(self, cluster_resolver: Any, termination_config: TerminationConfig | None):
        config = termination_config or TerminationConfig()
        self._cluster_resolver = cluster_resolver
        self._exit_fn = config.exit_fn or _default_exit
        self._save_fn = config.save_fn
        self._grace_period = float(config.grace_period or 0.0)
        self._run_counter = 0
        self._notice = threading.Event()
        self._notice_time: float | None = None
        self._final_step: int | None = None  # set during a grace-period countdown
        self._last_run_end: float | None = None
        self._step_time = 0.0
        self._step_samples = 0
        self._use_jax_service = _jax_preemption_service_active()
        self._previous_sigterm: Any = None
        self._stop_polling = threading.Event()
        self._poll_thread: threading.Thread | None = None
        self._watcher = config.termination_watcher_fn
        if config.termination_watcher_fn is not None:
            self._poll_thread = threading.Thread(
                target=self._poll, args=(config.termination_watcher_fn,), name="jdist-termination-watcher",
                daemon=True,
            )
            self._poll_thread.start()
        elif not self._use_jax_service:
            self._install_sigterm_handler()

    # ------------------------------------------------------------------ notice
    def _install_sigterm_handler(self) -> None:
        try:
            self._previous_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
        except ValueError:  # not the main thread
            raise RuntimeError(
                "PreemptionCheckpointHandler must be created in the main thread to catch SIGTERM; "
                "or pass TerminationConfig(termination_watcher_fn=...)."
            ) from None

    def _on_sigterm(self, signum, frame) -> None:
        self._record_notice("SIGTERM")

    def _poll(self, watcher: Callable[[], bool]) -> None:
        while not self._stop_polling.is_set():
            if watcher():
                self._record_notice("termination_watcher_fn")
                return
            self._stop_polling.wait(1.0)

    def _record_notice(self, source: str) -> None:
        if self._notice.is_set():
            return
        self._notice_time = time.monotonic()
        self._notice.set()
        if self._use_jax_service and source != "SIGTERM":
            # JAX's preemption service listens for SIGTERM; forward the notice so peers learn of it.
            os.kill(os.getpid(), signal.SIGTERM)

    # --------------------------------------------------------------- progress
    @property
    def total_run_calls(self) -> int:
        """How many times `run` has been called, counting runs before a restore."""
        return self._run_counter

    @property
    def cluster_resolver(self) -> Any:
        return self._cluster_resolver

    def _count_run(self) -> None:
        self._run_counter += 1
        now = time.monotonic()
        if self._last_run_end is not None:
            self._step_samples += 1
            self._step_time += ((now - self._last_run_end) - self._step_time) / self._step_samples
        self._last_run_end = now

    # ------------------------------------------------------------------- save
    def _save(self, state: Any) -> None:
        raise NotImplementedError

    def _wait_for_writes(self) -> None:
        """Blocks until every checkpoint write has finished (before the process exits)."""

    def _preemption_step_reached(self) -> bool:
        if self._use_jax_service:
            from jax.experimental import multihost_utils

            return multihost_utils.reached_preemption_sync_point(self._run_counter)
        return self._notice.is_set()

    def _maybe_checkpoint(self, state: Any) -> None:
        if self._final_step is not None:
            if self._run_counter >= self._final_step:
                self._save(state)
                self._exit()
            return
        if not self._preemption_step_reached():
            return
        started = time.monotonic()
        self._save(state)
        if self._grace_period > 0:
            self._final_step = self._run_counter + self._extra_steps(time.monotonic() - started)
            if self._final_step > self._run_counter:
                logger.warning("Preemption notice: saved at run %d; training on until run %d within the "
                               "grace period.", self._run_counter, self._final_step)
                return
        self._exit()

    def _extra_steps(self, save_seconds: float) -> int:
        """Steps that still fit in the grace period, agreed by all processes."""
        elapsed = time.monotonic() - (self._notice_time or time.monotonic())
        reserve = 2 * save_seconds + _SAFETY_STEPS * self._step_time
        left = self._grace_period - elapsed - reserve
        steps = int(math.floor(left / self._step_time)) if self._step_time > 0 and left > 0 else 0
        if jax.process_count() > 1:
            import numpy as np
            from jax.experimental import multihost_utils

            steps = int(multihost_utils.broadcast_one_to_all(np.int32(steps)))
        return max(0, steps)

    def _exit(self) -> None:
        self._final_step = None
        self._notice.clear()
        self._wait_for_writes()
        self._exit_fn()
        # A custom exit_fn may return (e.g. an in-process restart): keep watching.
        if self._poll_thread is not None and not self._poll_thread.is_alive():
            self._poll_thread = threading.Thread(target=self._poll, args=(self._watcher,),
                                                 name="jdist-termination-watcher", daemon=True)
            self._poll_thread.start()

    def close(self) -> None:
        """Stops watching for notices and gives SIGTERM back to its previous handler."""
        self._stop_polling.set()
        if self._poll_thread is not None and self._poll_thread is not threading.current_thread():
            self._poll_thread.join(timeout=5)
        self._poll_thread = None
        if self._previous_sigterm is not None:
            try:
                signal.signal(signal.SIGTERM, self._previous_sigterm)
            except ValueError:
                pass
            self._previous_sigterm = None
