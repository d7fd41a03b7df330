"""A process-wide bound on programs in flight, so no order of user calls can deadlock XLA:CPU.

Why it is needed. JAX dispatches asynchronously: `strategy.run`, a compiled step or `reduce`
returns before its program ran, so a loop that never reads a result (TF's custom-training
tutorial: `total_loss += distributed_train_step(x)`, read once per epoch) queues programs
without limit. XLA:CPU's client admits a fixed number of computations in flight per device
and launches each device's share of a program on a shared thread pool, where a share that
reaches an all-reduce waits for the other devices' shares. With the queue full, the launch of
one device's share blocks on that device's admission limit, the other shares of the same
all-reduce wait for it, and after 40 s XLA aborts the process ("Termination timeout for all
reduce RendezvousKey ... cross_module"); a stack dump of a hung process shows seven pool
threads in the all-reduce's rendezvous and one blocked in the launch's admission semaphore.
Measured on a 2-core host with 8 CPU devices (JAX 0.10.2): one program with an all-reduce,
dispatched in a chain, survives 36 programs ahead of the host and aborts at 48; two programs
alternating survive 34 and abort at 38. So what matters is how many programs are in flight
on a device, whichever programs they are.

What jdist does. Every jdist call that dispatches a program over several CPU devices (`run`,
steps from `make_train_step` / `make_eval_step` / `compile_step`, `reduce`, `gather`, metric
updates and reads, the Trainer's executions) registers one output here; when more than
`max_in_flight()` (4) are pending, the host waits for the oldest. The same program still
pipelines (four steps queued keep the devices busy: the Trainer and the benchmark already ran
this way), and programs of several kinds interleave freely, since the hazard counts programs,
not kinds. Four leaves a wide margin under the ~32 where the client saturates, for the
programs a user adds between jdist calls (`total_loss += loss`).

Only on the CPU platform with several devices: GPU and TPU clients launch each device's work
on its own stream in order, so a full queue only waits, and blocking there would cost
pipelining for nothing; single-device programs have no rendezvous to starve.
"""
from __future__ import annotations

import collections
import threading
from typing import Any

import jax
import jax.core

_DEFAULT_MAX_IN_FLIGHT = 4

_lock = threading.Lock()
_pending: collections.deque = collections.deque()
_max_in_flight = _DEFAULT_MAX_IN_FLIGHT
_bounded_by_sharding: dict[Any, bool] = {}


def max_in_flight() -> int:
    """How many jdist programs may be pending on several CPU devices before the host waits."""
    return _max_in_flight


def set_max_in_flight(count: int) -> None:
    """Changes the bound (>= 1). Near 32 the XLA:CPU abort described above comes back."""
    global _max_in_flight
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"max_in_flight must be an int >= 1, got {count!r}.")
    _max_in_flight = count
    wait(count)


def dispatched(outputs: Any) -> Any:
    """Registers the outputs of a program just dispatched; waits for the oldest pending program
    when more than `max_in_flight()` are. Returns `outputs` unchanged.

    One output array stands for its whole program: all outputs of one execution on a device
    become ready together, and every output of a jitted program spans its devices.
    """
    leaf = _first_array(outputs)
    if leaf is None or not _is_bounded(leaf):
        return outputs
    with _lock:
        _pending.append(leaf)
        excess = len(_pending) - _max_in_flight
    if excess > 0:
        wait(_max_in_flight)
    return outputs


def dispatched_each(outputs: Any) -> Any:
    """`dispatched` for a pytree whose array leaves each came from a program of its own (an
    eager `reduce` or `gather` over several values)."""
    for leaf in jax.tree.leaves(outputs):
        dispatched(leaf)
    return outputs


def wait(keep: int = 0) -> None:
    """Blocks until at most `keep` registered programs are pending (0: all finished).

    A program that failed (a `tf.debugging` check, a host callback that raised) has finished, which
    is all this waits for: its error is its caller's, raised where the caller reads its outputs (and
    by whatever reads a value computed from them), never by an unrelated call that waits here."""
    while True:
        with _lock:
            if len(_pending) <= keep:
                return
            oldest = _pending.popleft()
        try:
            _block(oldest)
        except Exception:  # noqa: BLE001 - see the docstring: the outputs still hold the error
            pass


def pending() -> int:
    """How many registered programs have not been waited for (finished ones included)."""
    return len(_pending)


class InFlightLimiter:
    """Bounds how many dispatched steps of one loop may run ahead of the host.

    The loop's own pipelining depth (`Trainer(max_in_flight=...)`); the process-wide bound
    above applies on top of it, whatever this one allows.
    """

    def __init__(self, max_in_flight: int = 4):
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}.")
        self.max_in_flight = max_in_flight
        self._queue: collections.deque = collections.deque()

    def push(self, value: Any) -> None:
        """Registers a step's output; blocks on the oldest when too many are pending.

        As in `dispatched`, one array of the output stands for its whole program (an output
        without arrays has nothing to wait for)."""
        leaf = _first_array(value)
        if leaf is None:
            return
        self._queue.append(leaf)
        while len(self._queue) > self.max_in_flight:
            _block(self._queue.popleft())

    def drain(self) -> None:
        while self._queue:
            _block(self._queue.popleft())


def _block(leaf: jax.Array) -> None:
    # A donated output (the state passed on to the next step) is deleted; the program that
    # consumed it is registered after this one, so waiting for it covers this one too.
    if not leaf.is_deleted():
        leaf.block_until_ready()


def _first_array(tree: Any) -> jax.Array | None:
    for leaf in jax.tree.leaves(tree):
        if isinstance(leaf, jax.Array) and not isinstance(leaf, jax.core.Tracer):
            return leaf
    return None


def _is_bounded(leaf: jax.Array) -> bool:
    """Whether the program that made `leaf` ran on several CPU devices (cached per sharding)."""
    sharding = leaf.sharding
    try:
        return _bounded_by_sharding[sharding]
    except KeyError:
        pass
    except TypeError:  # an unhashable sharding: decide without caching
        return _decide(sharding)
    decision = _decide(sharding)
    if len(_bounded_by_sharding) < 256:
        _bounded_by_sharding[sharding] = decision
    return decision


def _decide(sharding: Any) -> bool:
    devices = sharding.device_set
    return len(devices) > 1 and all(d.platform == "cpu" for d in devices)
