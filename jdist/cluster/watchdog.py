"""Turns a dead or failed worker into a prompt, named exit of every other worker.

What JAX 0.10 does on its own (measured with gloo on CPU):
- a worker killed outright stops sending heartbeats; the coordination service
  aborts the survivors (SIGABRT, exit 134, a C++ stack trace) between half and
  all of `heartbeat_timeout_seconds` later;
- a worker that raises runs JAX's exit handler, which waits in a shutdown
  barrier for peers that are themselves stuck in a collective: both sides hang
  until `shutdown_timeout_seconds` (300 s by default);
- SIGTERM does not stop a worker stuck in a collective (JAX's preemption
  handler takes it);
- a worker whose collective reads from a vanished peer's socket may instead
  raise `JaxRuntimeError: Gloo all-reduce failed ... Connection reset by peer`.

So every worker runs this watchdog over the coordination service's key-value
store: it posts a liveness counter every `interval` and reads the others'. An
uncaught exception posts the error and leaves at once (skipping the barrier);
a peer whose counter stalls for `timeout` seconds is declared dead. Either way
the survivors print which worker failed and exit with `EXIT_PEER_FAILED`, also
when their own collective broke first: the error is blamed on a peer whose
counter then stands still for a few intervals (`quick_timeout`, 5 s with the
default 60 s timeout: a broken collective is evidence enough), or on the chief
when the coordination service it hosts stops answering. Without that a
survivor waited the whole `timeout` (60 s) after gloo had already reported the
dead peer. A Python thread keeps running while the main thread waits
on XLA (compilation and execution release the GIL), so it sees failures mid-step.
"""
from __future__ import annotations

import atexit
import os
import socket
import sys
import threading
import time
import traceback
from typing import Any, Callable, Sequence

from jdist.cluster import heartbeat

EXIT_FAILED = 1
EXIT_PEER_FAILED = 3
_PREFIX = "jdist/watchdog"


class Watchdog:
    """One per process; `start()` once the distributed runtime is connected."""

    def __init__(
        self,
        client: Any,
        process_id: int,
        task_names: Sequence[str],
        timeout: float,
        *,
        interval: float | None = None,
        exit_fn: Callable[[int], None] = os._exit,
        coordinator_address: str | None = None,
    ):
        self._client = client
        self._pid = process_id
        self._names = list(task_names)
        self._timeout = float(timeout)
        self._interval = interval if interval is not None else max(0.2, min(1.0, self._timeout / 10))
        self._exit = exit_fn
        self._coordinator = coordinator_address
        self._stop = threading.Event()
        self._exiting = False
        self._thread: threading.Thread | None = None
        self._previous_hook: Any = None

    def name(self, process_id: int) -> str:
        task = self._names[process_id] if process_id < len(self._names) else "unknown task"
        return f"{task} (process {process_id})"

    # ----------------------------------------------------------------- public
    def start(self) -> "Watchdog":
        self._previous_hook = sys.excepthook
        sys.excepthook = self._on_uncaught
        atexit.register(self._on_exit)  # runs before JAX's own exit handler (registered earlier)
        self._thread = threading.Thread(target=self._loop, name="jdist-watchdog", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if sys.excepthook == self._on_uncaught:
            sys.excepthook = self._previous_hook

    # --------------------------------------------------------------- internals
    def _key(self, kind: str, process_id: int) -> str:
        return f"{_PREFIX}/{kind}/{process_id}"

    def _entries(self, kind: str) -> dict[int, str]:
        out = {}
        for key, value in self._client.key_value_dir_get(f"{_PREFIX}/{kind}/"):
            try:
                out[int(key.rsplit("/", 1)[1])] = value
            except ValueError:
                continue
        return out

    def _loop(self) -> None:
        counter, last_seen, lost_since, exited_since = 0, {}, None, {}
        started = time.monotonic()
        while not self._stop.wait(self._interval):
            try:
                counter += 1
                self._client.key_value_set(self._key("alive", self._pid), str(counter), allow_overwrite=True)
                failed = {p: m for p, m in self._entries("failed").items() if p != self._pid}
                alive = self._entries("alive")
                exited = set(self._entries("exited"))
                lost_since = None
            except Exception as err:  # the coordination service itself is gone
                now = time.monotonic()
                lost_since = lost_since or now
                if now - lost_since > self._timeout and not self._stop.is_set():
                    self._abort(f"lost contact with the coordination service on {self.name(0)} for "
                                f"{now - lost_since:.0f} s ({err}); that process has probably died.")
                continue
            if failed:
                pid, message = min(failed.items())
                self._acknowledge()
                self._abort(f"{self.name(pid)} failed: {message.rstrip('.')}.")
            now = time.monotonic()
            for pid in exited - set(exited_since):
                exited_since[pid] = now
            for pid, since in list(exited_since.items()):
                if since is not None and now - since > self._timeout:
                    exited_since[pid] = None  # say it once
                    _say(f"{self.name(pid)} ended its program {now - since:.0f} s ago and this worker is still "
                         f"running. If this worker waits on a collective with it, JAX's exit barrier stops both "
                         f"within {5 * self._timeout:.0f} s.")
            for pid in range(len(self._names)):
                if pid == self._pid or pid in exited:
                    continue
                value = alive.get(pid)
                if pid not in last_seen or last_seen[pid][0] != value:
                    last_seen[pid] = (value, now if pid in last_seen or value is not None else started)
                elif now - last_seen[pid][1] > self._timeout:
                    self._abort(f"{self.name(pid)} stopped responding {now - last_seen[pid][1]:.0f} s ago "
                                "(no liveness signal); it has died, been killed or stopped (hung).")

    def _dead_peer(self) -> str | None:
        """After a broken collective: which peer is dead, judged within a few liveness intervals.

        A live peer (its own collective broke too) keeps posting its counter, so one whose counter
        does not move for `quick_timeout` seconds is dead; the coordination service not answering
        means the chief, which hosts it, is. None when every peer is alive (this worker's failure).
        """
        peers = {p for p in range(len(self._names)) if p != self._pid}
        window = self.quick_timeout
        started = time.monotonic()
        first: dict[int, str] | None = None
        moved: set[int] = set()
        ended: set[int] = set()
        if self._pid != 0 and not self._coordinator_listening():
            # Asked over JAX's client instead, the failed call makes JAX abort this process unnamed.
            return (f"{self.name(0)} is gone: the coordination service it hosts ({self._coordinator}) refuses "
                    "connections after a collective with it failed.")
        while not self._exiting:
            try:
                alive = self._entries("alive")
                ended = set(self._entries("exited")) | set(self._entries("failed"))
            except Exception as err:
                if self._pid == 0:
                    return None
                return (f"{self.name(0)} is gone: the coordination service it hosts stopped answering after a "
                        f"collective with it failed ({str(err).splitlines()[0][:200]}).")
            first = alive if first is None else first
            moved |= {p for p in peers if alive.get(p) != first.get(p)}
            if moved | ended >= peers:
                return None
            elapsed = time.monotonic() - started
            if elapsed > window:
                stalled = sorted(peers - moved - ended)
                return (f"{', '.join(self.name(p) for p in stalled)} stopped responding (no liveness signal for "
                        f"{elapsed:.0f} s after a collective with it failed); it has died, been killed or stopped.")
            time.sleep(self._interval / 2)
        return None

    def _coordinator_listening(self) -> bool:
        """A plain TCP connect to the coordination service: refused means its process (the chief) is gone."""
        if not self._coordinator:
            return True
        host, _, port = self._coordinator.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=2.0):
                return True
        except ConnectionRefusedError:
            return False
        except (OSError, ValueError):
            return True  # unreachable for another reason (a slow network): judged by the counters below

    @property
    def quick_timeout(self) -> float:
        """How long a peer's counter may stand still after a broken collective before it counts as dead."""
        return min(self._timeout, max(3.0, 5 * self._interval))

    def _acknowledge(self) -> None:
        try:
            self._client.key_value_set(self._key("ack", self._pid), "1", allow_overwrite=True)
        except Exception:
            pass

    def _abort(self, reason: str) -> None:
        if self._stop.is_set() or self._exiting:
            return
        self._exiting = True
        _say(f"{reason} Stopping {self.name(self._pid)}: the collectives it waits on cannot finish.")
        self._exit(EXIT_PEER_FAILED)

    def _on_uncaught(self, exc_type, exc, tb) -> None:
        if self._exiting or issubclass(exc_type, SystemExit):
            return self._previous_hook(exc_type, exc, tb)
        traceback.print_exception(exc_type, exc, tb)
        if is_transport_error(exc) and self._thread is not None and self._thread.is_alive():
            # A collective broke because a peer vanished: name that peer, not this worker.
            _say(f"a collective failed on {self.name(self._pid)}; checking whether another worker died first.")
            dead = self._dead_peer()
            if dead is not None:
                self._abort(dead)
            if self._exiting:
                return
        self._exiting = True
        self._stop.set()
        summary = "".join(traceback.format_exception_only(exc_type, exc)).strip()
        try:
            self._client.key_value_set(self._key("failed", self._pid), summary[:2000], allow_overwrite=True)
            self._wait_for_acks()
            told = "the other workers were told to stop"
        except Exception:
            told = "the other workers could not be told; they stop once their timeout passes"
        _say(f"{self.name(self._pid)} failed ({exc_type.__name__}); {told}.")
        self._exit(EXIT_FAILED)

    def _wait_for_acks(self) -> None:
        """The chief hosts the coordination service: give peers a moment to read the error first."""
        deadline = time.monotonic() + (3 * self._interval + 2 if self._pid == 0 else 0)
        while time.monotonic() < deadline:
            if len(self._entries("ack")) >= len(self._names) - 1:
                return
            time.sleep(0.05)

    def _on_exit(self) -> None:
        """A normal exit: tell the others not to wait for this worker's liveness signal."""
        if self._exiting:
            return
        self._stop.set()
        heartbeat.mark_ended()  # before JAX's exit barrier, which may wait on peers for long
        try:
            self._client.key_value_set(self._key("exited", self._pid), "1", allow_overwrite=True)
        except Exception:
            pass


_TRANSPORT_MARKERS = ("gloo", "nccl", "connection reset", "connection closed", "connection refused", "broken pipe",
                      "socket closed", "unavailable")


def is_transport_error(exc: BaseException) -> bool:
    """An XLA runtime error from the collective transport (what a vanished peer looks like)."""
    if type(exc).__name__ not in ("JaxRuntimeError", "XlaRuntimeError"):
        return False
    text = str(exc).lower()
    return any(marker in text for marker in _TRANSPORT_MARKERS)


def _say(message: str) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    sys.stderr.write(f"[jdist] {message}\n")
    sys.stderr.flush()
