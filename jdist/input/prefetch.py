"""Background producer threads with bounded queues: host batch preparation and the
host-to-device copy run while the devices compute the previous steps."""
from __future__ import annotations

import atexit
import queue
import threading
import weakref
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")

_OK, _END, _ERROR = "ok", "end", "error"
_POLL_S = 0.1
_LIVE: "weakref.WeakSet[Prefetcher]" = weakref.WeakSet()  # producers whose thread may still run


@atexit.register
def _stop_at_exit() -> None:
    """Stops every producer before the interpreter (and JAX's runtime) shuts down: a daemon
    thread still copying a batch to the devices then can abort the whole process at exit."""
    for prefetcher in list(_LIVE):
        prefetcher.close(timeout_s=2.0)


class Prefetcher(Generic[T]):
    """Calls `produce()` (which raises `StopIteration` at the end) ahead of the consumer.

    At most `depth` results wait in the queue. `depth=0` produces in the consumer's
    thread instead. An exception in `produce` is re-raised by `get` in the consumer.
    """

    def __init__(self, produce: Callable[[], T], depth: int, name: str = "jdist-prefetch"):
        self._produce = produce
        self._depth = depth
        self._finished: tuple[str, Any] | None = None
        self._stop = threading.Event()
        self._queue: queue.Queue = queue.Queue(maxsize=max(depth, 1))
        self._thread = None
        if depth > 0:
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()
            _LIVE.add(self)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                item = (_OK, self._produce())
            except StopIteration:
                item = (_END, None)
            except BaseException as err:  # handed to the consumer, never lost in this thread
                item = (_ERROR, err)
            while not self._stop.is_set():
                try:
                    self._queue.put(item, timeout=_POLL_S)
                    break
                except queue.Full:
                    continue
            if item[0] != _OK:
                return

    def get(self) -> T:
        if self._finished is not None:
            return self._finish()
        if self._thread is None:
            try:
                return self._produce()
            except StopIteration:
                self._finished = (_END, None)
                raise
        while True:
            try:
                kind, value = self._queue.get(timeout=_POLL_S)
                break
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    self._finished = (_ERROR, RuntimeError("The input prefetch thread stopped unexpectedly."))
                    return self._finish()
        if kind == _OK:
            return value
        self._finished = (kind, value)
        return self._finish()

    def _finish(self) -> T:
        assert self._finished is not None, "called once the stream finished"
        kind, value = self._finished
        if kind == _ERROR:
            raise value
        raise StopIteration

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stops the producer (later `get` calls end the iteration); waits up to `timeout_s`
        for it to leave `produce()`."""
        self._stop.set()
        if self._finished is None:
            self._finished = (_END, None)
        if self._thread is None:
            return
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self.join(timeout_s)

    def join(self, timeout_s: float) -> None:
        if self._thread is not None and timeout_s > 0:
            self._thread.join(timeout_s)


class TwoStagePrefetcher(Generic[T]):
    """Host stage then device stage, each in its own thread: reading and preparing the next batch
    overlaps with moving the previous one to the devices, and both with compute.

    `prepare()` builds a batch in host memory (raises `StopIteration` at the end); `transfer(item)`
    moves it. Up to `depth` transferred batches wait for the consumer (and one prepared batch
    behind them); `depth=0` does both in the consumer's thread.
    """

    def __init__(self, prepare: Callable[[], Any], transfer: Callable[[Any], T], depth: int,
                 name: str = "jdist-input"):
        if depth == 0:
            self._host = None
            self._device = Prefetcher(lambda: transfer(prepare()), 0)
        else:
            host = self._host = Prefetcher(prepare, 1, name=f"{name}-host")
            self._device = Prefetcher(lambda: transfer(host.get()), depth, name=f"{name}-device")

    def get(self) -> T:
        return self._device.get()

    @property
    def running(self) -> bool:
        return self._device.running or (self._host is not None and self._host.running)

    def close(self, timeout_s: float = 5.0) -> None:
        stages = [self._device] + ([self._host] if self._host is not None else [])
        for stage in stages:  # stop both first, so neither waits on the other
            stage.close(0.0)
        for stage in stages:
            stage.join(timeout_s)
