"""`run` on a short batch whose replicas hold different numbers of real rows, for a function that communicates.

TF runs the replica function on each replica's real rows, whatever their number: on 4 replicas,
`range(10).batch(8)`'s last batch gives the replicas [1, 1, 0, 0] rows (a replica without rows gets an empty
tensor), and the collectives combine what the replicas hold (TF 2.21, observed: `all_gather(x, axis=0)` gives
`[8., 9.]` on every replica, `all_reduce(SUM, reduce_sum(x))` 17., `all_reduce(MEAN, ...)` 4.25 (the mean over
replicas), `tf.shape(x)[0]` [1, 1, 0, 0]). One SPMD program cannot hold replicas of different shapes, so the
replicas run here as TF's eager MirroredStrategy runs them: one thread per replica, each on its own device and
its own rows, meeting at every `all_reduce`, `all_gather` and `merge_call` to combine their values.

Only these three collectives are served. A function that uses Keras objects or `tf.Variable`s (a run extension
takes the call over and runs it through `run` again) runs so too: each thread reads the variables' values and
assigns them in its own Keras scope and call frame (`thread_state`), and the variables' updates are combined at
the collectives as in the compiled program (TF 2.21, observed: a mirrored variable read in the step,
`all_reduce(SUM, v * reduce_sum(x))` with v = 2., gives 34. on every replica; a Keras `Sum` metric updated with
`x` then holds 17.; a Dense layer of ones, `all_reduce(SUM, reduce_sum(model(x)))`, 17.). Code that uses the
replicas' mesh axis in any other way (it is unbound here) fails with JAX's unbound-axis error, which `run` turns
into its padding error.
"""
from __future__ import annotations

import contextvars
import threading
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp

from jdist.strategy import context
from jdist.strategy.padded_run import alone
from jdist.strategy.reduce_op import ReduceOp
from jdist.strategy.replica_context import ReplicaContext
from jdist.strategy.values import PerReplica, mark_mirrored, mark_single, stack_on_devices
from jdist.typing import PyTree

_TIMEOUT_S = 300.0  # a replica that never reaches the collective the others wait at (and never returns)


class _Meeting:
    """Where the replicas' threads hand their values over, one collective at a time."""

    def __init__(self, replicas: int):
        self.replicas = replicas
        self.cond = threading.Condition()
        self.slots: dict[int, Any] = {}
        self.generation = 0  # collectives completed
        self.result: Any = None  # the last one's; read by every replica before any posts to the next
        self.done: list[int] = []  # replicas whose function returned: they meet no one any more
        self.broken = False  # a replica failed
        # One replica runs at a time, as TF's replica threads do: the turn passes at a collective and when a
        # replica's function returns, so the module state its code keeps per call is never shared mid-statement.
        self.turn = threading.Lock()

    def finish(self, replica: int, failed: bool = False) -> None:
        """`replica`'s function returned (or failed): a replica waiting at a collective waits in vain."""
        with self.cond:
            self.done.append(replica)
            self.broken = self.broken or failed
            self.cond.notify_all()

    def exchange(self, replica: int, value: Any, combine: Callable[[list], Any]) -> Any:
        """Every replica's `value` in; `combine(values)` (run once) out, to every replica."""
        self.turn.release()
        try:
            return self._exchange(replica, value, combine)
        finally:
            self.turn.acquire()

    def _exchange(self, replica: int, value: Any, combine: Callable[[list], Any]) -> Any:
        with self.cond:
            generation = self.generation
            self._check(replica)
            self.slots[replica] = value
            if len(self.slots) == self.replicas:
                values = [self.slots[r] for r in range(self.replicas)]
                self.slots = {}
                try:
                    self.result = ("ok", combine(values))
                except BaseException as error:  # noqa: BLE001 (handed to every replica)
                    self.result = ("error", error)
                self.generation += 1
                self.cond.notify_all()
            else:
                self.cond.wait_for(lambda: self.generation != generation or self.done, timeout=_TIMEOUT_S)
                if self.generation == generation:
                    self._check(replica)
                    raise threading.BrokenBarrierError("timed out at a collective")
            status, result = self.result
        if status == "error":
            raise result
        return result

    def _check(self, replica: int) -> None:
        if self.broken:
            raise threading.BrokenBarrierError("another replica failed")
        if self.done:  # a replica that returned (or failed with the error below) meets no one
            raise RuntimeError(
                f"replica {replica} calls a collective (all_reduce, all_gather, merge_call) that replica "
                f"{self.done[0]} never reached: its function returned first (a branch on the replica's row "
                "count?). Every replica must call the same collectives in the same order (TF 2.21 raises "
                "RuntimeError: 'Some replicas made a different number of replica_context().merge_call() calls.').")


class MeetingReplicaContext(ReplicaContext):
    """One replica of a run whose replicas are threads: collectives meet the other threads."""

    runs_alone = True  # its values are its own: no mesh axis marks them per replica (aggregation.mark_per_replica)

    def __init__(self, strategy: Any, axis_name: str, example_masks: Sequence[Any], replica_id: int,
                 meeting: _Meeting, devices: Sequence[Any]):
        super().__init__(strategy, axis_name, example_masks, replica_id=replica_id)
        self._meeting = meeting
        self._devices = list(devices)
        self._id = replica_id

    @property
    def replica_id_in_sync_group(self) -> jax.Array:
        return jnp.asarray(self._id, jnp.int32)

    def _mine(self, value: PyTree) -> PyTree:
        return jax.tree.map(lambda x: jax.device_put(x, self._devices[self._id]), value)

    def all_reduce(self, reduce_op: ReduceOp | str, value: PyTree, options: Any = None) -> PyTree:
        op = ReduceOp.from_value(reduce_op)
        n = self.num_replicas_in_sync

        def combine(values: list) -> PyTree:
            def leaf(*xs):
                shapes = {tuple(x.shape) for x in xs}
                if len(shapes) != 1:
                    raise ValueError(
                        f"all_reduce: the replicas' values have different shapes {sorted(shapes)} (TF 2.21 fails "
                        "too: 'Shape mismatch in the collective instance'). A short last batch gives the replicas "
                        "different numbers of real rows (they run on those, never on padding rows): reduce each "
                        "replica's rows first (tf.reduce_sum), weight them by the mask of real examples "
                        "(get_replica_context().example_mask), or batch the dataset with drop_remainder=True.")
                with alone(self._devices[0]):
                    total = sum(jax.device_put(x, self._devices[0]) for x in xs[1:]) + xs[0]  # pyright: ignore
                    return total / n if op is ReduceOp.MEAN else total
            return jax.tree.map(leaf, *values)

        return self._mine(self._meeting.exchange(self._id, jax.tree.map(jnp.asarray, value), combine))

    def all_gather(self, value: PyTree, axis: int, options: Any = None) -> PyTree:
        def combine(values: list) -> PyTree:
            def leaf(*xs):
                if xs[0].ndim < 1:
                    raise ValueError("all_gather needs values of rank >= 1; got a scalar. Add an axis first, "
                                     "e.g. x[None].")
                with alone(self._devices[0]):
                    return jnp.concatenate([jax.device_put(x, self._devices[0]) for x in xs], axis=axis % xs[0].ndim)
            return jax.tree.map(leaf, *values)

        return self._mine(self._meeting.exchange(self._id, jax.tree.map(jnp.asarray, value), combine))

    def merge_call(self, merge_fn: Callable, args: tuple = (), kwargs: dict | None = None) -> Any:
        strategy, devices = self._strategy, self._devices

        def combine(values: list) -> Any:
            def collect(*xs):
                if isinstance(xs[0], (bool, int, float)) or (not isinstance(xs[0], jax.Array)
                                                             and not hasattr(xs[0], "dtype")):
                    return xs[0]  # a Python value: the same on every replica, handed over as it is
                return stack_on_devices(list(zip(devices, xs)), strategy._replica_mesh(), strategy.data_axis)
            merged_args, merged_kwargs = jax.tree.map(collect, *values)
            with jax.set_mesh(strategy.mesh), context.push(strategy, None):
                return merge_fn(strategy, *merged_args, **merged_kwargs)

        result = self._meeting.exchange(self._id, (tuple(args), dict(kwargs or {})), combine)
        self.merged.extend(jax.tree.leaves(result))
        return jax.tree.map(lambda v: v.values[self._id] if isinstance(v, PerReplica) else v, result,
                            is_leaf=lambda v: isinstance(v, PerReplica))


class Unserved(Exception):
    """The replicas run as threads gave results of another structure than the compiled program's."""


def run_threads(body: Callable[[MeetingReplicaContext, list], list], inputs: Sequence[list], strategy: Any,
                axis_name: str, devices: Sequence[Any], outputs: int) -> list[list]:
    """`body(ctx, inputs[r])` for every replica r at once, one thread each; its results (`outputs` arrays
    each), in replica order. The first replica's error is raised (the others' broken meetings are its
    consequence); results of another number than the compiled program's raise `Unserved`."""
    meeting = _Meeting(len(devices))
    results: list = [None] * len(devices)
    errors: list = [None] * len(devices)

    def one(r: int) -> None:
        ctx = MeetingReplicaContext(strategy, axis_name, (), r, meeting, devices)
        meeting.turn.acquire()
        try:
            with alone(devices[r]):
                results[r] = body(ctx, inputs[r])
            meeting.finish(r)
        except BaseException as error:  # noqa: BLE001 (raised on the caller's thread)
            errors[r] = error
            meeting.finish(r, failed=not isinstance(error, threading.BrokenBarrierError))
        finally:
            meeting.turn.release()

    threads = [threading.Thread(target=contextvars.copy_context().run, args=(one, r), daemon=True)
               for r in range(len(devices))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    real = [e for e in errors if e is not None and not isinstance(e, threading.BrokenBarrierError)]
    if real or any(e is not None for e in errors):
        raise (real or [e for e in errors if e is not None])[0]
    if any(len(r) != outputs for r in results):
        raise Unserved(f"the replicas returned {sorted({len(r) for r in results})} results, the program {outputs}")
    return results


def one_object(parts: Sequence[Any]) -> bool:
    """Whether every replica returned the same object (a `merge_call` result handed back as it is)."""
    return len(parts) > 1 and all(p is parts[0] for p in parts)


def single_result(parts: Sequence[Any], strategy: Any) -> Any:
    """A result every replica returned as one object: one value, as TF 2.21 returns it (observed: `run` of
    `merge_call(lambda s, v: s.reduce(SUM, v, axis=None), ...)` gives one tensor, 17.)."""
    return mark_single(mark_mirrored(jax.device_put(parts[0], strategy.replicated_sharding())))
