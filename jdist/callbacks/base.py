"""The callback protocol: hooks the `Trainer` calls during `fit`, `evaluate` and `predict`.

A callback sees the trainer through `self.trainer` (set by `set_trainer`), which
exposes `state` (the `TrainState`; assign a new one to restore weights), `epoch`
(0-based epoch about to run or running; a callback may set it in
`on_train_begin` to resume), `resume_step` (steps of that epoch already done:
set with `epoch` to resume mid-epoch; the trainer skips those batches),
`step` (optimizer steps taken), `stop_training`
(set True to stop after the current epoch), `strategy` and `history`.

Hooks receive `logs`, a mapping of metric names to floats. Batch hooks receive a
lazy mapping: nothing is read back from the devices unless a callback looks at it,
so callbacks that ignore batch logs cost no synchronisation. With
`steps_per_execution=k`, batch hooks run once per execution of k steps:
`on_*_batch_begin(first step, {})` and `on_*_batch_end(first step + k - 1, logs)`,
as in Keras 3 (which numbers a shorter last execution the same way). Every hook
below is called, in Keras 3's order: `fit` runs the test hooks for its validation
passes, and `on_predict_batch_end` gets `{"outputs": ...}` (that execution's real rows).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

if TYPE_CHECKING:
    from jdist.trainer.trainer import Trainer

Logs = Mapping[str, float]


class Callback:
    """Base class: override the hooks you need (all default to doing nothing)."""

    def __init__(self) -> None:
        self.trainer: "Trainer | None" = None
        self.params: dict[str, int | None] = {}

    def set_trainer(self, trainer: "Trainer") -> None:
        self.trainer = trainer

    def _running_trainer(self) -> "Trainer":
        """`self.trainer`, for hooks that only a Trainer calls (it sets the trainer before the first hook)."""
        if self.trainer is None:
            raise RuntimeError(
                f"{type(self).__name__} is a jdist.Trainer callback: pass it to Trainer.fit(callbacks=...).")
        return self.trainer

    def set_params(self, params: dict[str, int | None]) -> None:
        """`epochs`, `steps` (per epoch, or None when unknown) and `verbose` of the current call."""
        self.params = params

    def on_train_begin(self, logs: Logs | None = None) -> None: ...
    def on_train_end(self, logs: Logs | None = None) -> None: ...
    def on_epoch_begin(self, epoch: int, logs: Logs | None = None) -> None: ...
    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None: ...
    def on_train_batch_begin(self, batch: int, logs: Logs | None = None) -> None: ...
    def on_train_batch_end(self, batch: int, logs: Logs | None = None) -> None: ...
    def on_test_begin(self, logs: Logs | None = None) -> None: ...
    def on_test_end(self, logs: Logs | None = None) -> None: ...
    def on_test_batch_begin(self, batch: int, logs: Logs | None = None) -> None: ...
    def on_test_batch_end(self, batch: int, logs: Logs | None = None) -> None: ...
    def on_predict_begin(self, logs: Logs | None = None) -> None: ...
    def on_predict_end(self, logs: Logs | None = None) -> None: ...
    def on_predict_batch_begin(self, batch: int, logs: Logs | None = None) -> None: ...
    def on_predict_batch_end(self, batch: int, logs: Logs | None = None) -> None: ...


class LazyLogs(Mapping):
    """Logs read from the devices on first access only."""

    def __init__(self, read: Callable[[], dict[str, float]]):
        self._read = read
        self._value: dict[str, float] | None = None

    def _logs(self) -> dict[str, float]:
        if self._value is None:
            self._value = self._read()
        return self._value

    def __getitem__(self, key: str) -> float:
        return self._logs()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._logs())

    def __len__(self) -> int:
        return len(self._logs())

    def __repr__(self) -> str:
        return repr(self._logs())


class CallbackList:
    """Calls a hook on every callback in order; skips hooks no callback overrides."""

    def __init__(self, callbacks: Iterable[Callback], trainer: "Trainer", params: dict[str, int | None]):
        self.callbacks = list(callbacks)
        for cb in self.callbacks:
            if not isinstance(cb, Callback):
                raise TypeError(f"callbacks must be jdist.callbacks.Callback instances, got {cb!r}.")
            cb.set_trainer(trainer)
            cb.set_params(params)

    def wants(self, hook: str) -> bool:
        """Whether any callback overrides `hook` (so the trainer need not build its logs)."""
        return any(getattr(type(cb), hook) is not getattr(Callback, hook) for cb in self.callbacks)

    def call(self, hook: str, *args: int | Logs | None) -> None:
        for cb in self.callbacks:
            getattr(cb, hook)(*args)
