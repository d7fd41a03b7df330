"""`ClusterCoordinator`: schedules functions on parameter-server workers, asynchronously.

TF's contract (`tf.distribute.coordinator.ClusterCoordinator`), on Ray actors:
- `schedule(fn, args, kwargs)` queues `fn` and returns a `RemoteValue` at once;
  any idle worker runs it. `join()` waits for everything scheduled; `done()` asks.
- At least once: if a worker process dies, the functions it was running are
  queued again for the other workers, and a replacement worker is started
  (after its per-worker datasets are rebuilt).
- An exception raised by a scheduled function is raised once, by a later
  `schedule`, `join` or `done`; functions still queued then are cancelled
  (their `RemoteValue`s raise `CancelledError`), and none is still running.
- A dead or hung parameter server raises `PSUnavailableError` from then on:
  the parameters are gone, restart and restore from the last checkpoint.
"""
from __future__ import annotations

import collections
import itertools
import logging
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import jax

from jdist.cluster.worker_context import WorkerResource
from jdist.parameter_server import keras_state
from jdist.parameter_server.errors import CancelledError, PSUnavailableError, UnavailableError
from jdist.parameter_server.processes import start_actor
from jdist.parameter_server.strategy import is_parameter_server_strategy
from jdist.parameter_server.worker_process import WorkerProcess
from jdist.typing import PyTree

if TYPE_CHECKING:
    from jdist.parameter_server.strategy import ParameterServerStrategy

log = logging.getLogger(__name__)
_STARTUP_TIMEOUT_S = 300.0


# ---------------------------------------------------------------------- values
class RemoteValue:
    """The future result of a scheduled function; `fetch()` blocks and returns numpy."""

    def __init__(self):
        self._done = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None

    def _set_value(self, value: Any) -> None:
        self._value = value
        self._done.set()

    def _set_error(self, error: BaseException) -> None:
        self._error = error
        self._done.set()

    def fetch(self) -> PyTree:
        """Waits for the function and returns its result (numpy arrays), or raises its error."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value

    def get(self) -> PyTree:
        """Same as `fetch()`: results already arrive as numpy on the coordinator."""
        return self.fetch()

    def ready(self) -> bool:
        """Whether the function has finished (so `fetch()` returns at once)."""
        return self._done.is_set()

    def __repr__(self) -> str:
        state = "pending" if not self.ready() else ("failed" if self._error else "ready")
        return f"RemoteValue({state})"


class PerWorkerValues:
    """One value per worker; passed to `schedule`, each worker receives its own (TF's `PerWorkerValues`)."""

    def __init__(self, values: Iterable[Any]):
        self._values = tuple(values)

    def __repr__(self) -> str:
        return f"PerWorkerValues({self._values!r})"


class PerWorkerIterator(PerWorkerValues):
    """The per-worker iterators of a per-worker dataset: pass it to `schedule`; `next()` happens on workers."""

    def __iter__(self) -> "PerWorkerIterator":
        return self

    def __next__(self):
        raise TypeError("Calling next() on a per-worker iterator on the coordinator is not supported: pass it "
                        "to ClusterCoordinator.schedule and call next() inside the scheduled function.")


def _make_iterator(dataset: Any) -> Any:
    return iter(dataset)


def _identity(value: Any) -> Any:
    return value


class PerWorkerDataset:
    """A dataset built on each worker; `iter()` gives `PerWorkerValues` of per-worker iterators."""

    def __init__(self, coordinator: "ClusterCoordinator", resource_id: str):
        self._coordinator = coordinator
        self._resource_id = resource_id

    def __iter__(self) -> PerWorkerIterator:
        rid = self._coordinator._create_resource(_make_iterator, (WorkerResource(self._resource_id),))
        return PerWorkerIterator([WorkerResource(rid)] * self._coordinator.strategy.num_workers)


# ---------------------------------------------------------------------- queue
class _Closure:
    def __init__(self, fn: Callable, fn_token: str, args: Any, kwargs: Any, keras_plan: Any = None):
        self.fn = fn
        self.fn_token = fn_token
        self.args = tuple(args or ())
        self.kwargs = dict(kwargs or {})
        self.keras_plan = keras_plan  # the Keras variables it uses, on the servers (keras_state.SyncPlan)
        self.remote_value = RemoteValue()

    def for_worker(self, index: int) -> tuple[tuple, dict]:
        pick = lambda x: x._values[index] if isinstance(x, PerWorkerValues) else x  # noqa: E731
        is_leaf = lambda x: isinstance(x, PerWorkerValues)  # noqa: E731
        return jax.tree.map(pick, self.args, is_leaf=is_leaf), jax.tree.map(pick, self.kwargs, is_leaf=is_leaf)

    def cancel(self) -> None:
        self.remote_value._set_error(CancelledError(
            "The corresponding function is cancelled because an earlier scheduled function failed. "
            "Please reschedule the function."))


class _ClosureQueue:
    """Queued and in-flight closures, and the first error among them (TF's coordinated closure queue)."""

    def __init__(self):
        self._cond = threading.Condition()
        self._queue: collections.deque = collections.deque()
        self._inflight = 0
        self._error: BaseException | None = None
        self._fatal: BaseException | None = None
        self._stopped = False

    def put(self, closure: _Closure) -> None:
        with self._cond:
            self._queue.append(closure)
            self._raise_if_error()
            self._cond.notify_all()

    def get(self) -> _Closure | None:
        with self._cond:
            while not self._stopped and not self._queue:
                self._cond.wait()
            if self._stopped:
                return None
            self._inflight += 1
            return self._queue.popleft()

    def _finish(self) -> None:
        self._inflight -= 1
        self._cond.notify_all()

    def mark_finished(self) -> None:
        with self._cond:
            self._finish()

    def put_back(self, closure: _Closure) -> None:
        """A closure whose worker died: the next free worker runs it again."""
        with self._cond:
            if self._error is not None or self._fatal is not None or self._stopped:
                closure.cancel()
            else:
                self._queue.appendleft(closure)
            self._finish()

    def mark_failed(self, error: BaseException, inflight: bool = True) -> None:
        with self._cond:
            if self._error is None:
                self._error = error
            if inflight:
                self._finish()
            self._cond.notify_all()

    def mark_fatal(self, error: BaseException, inflight: bool = True) -> None:
        with self._cond:
            if self._fatal is None:
                self._fatal = error
            if inflight:
                self._finish()
            self._cond.notify_all()

    def wait(self) -> None:
        with self._cond:
            while self._error is None and self._fatal is None and (self._queue or self._inflight):
                self._cond.wait()
            self._raise_if_error()

    def done(self) -> bool:
        with self._cond:
            self._raise_if_error()
            return not self._queue and self._inflight == 0

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            while self._queue:
                self._queue.popleft().cancel()
            self._cond.notify_all()

    def _raise_if_error(self) -> None:
        """Cancels what is queued, waits for what runs, raises. Errors raise once; fatal ones always."""
        if self._error is None and self._fatal is None:
            return
        while self._queue:
            self._queue.popleft().cancel()
        while self._inflight > 0:
            self._cond.wait()
        if self._fatal is not None:
            raise self._fatal
        error, self._error = self._error, None
        if error is not None:  # None: a caller that waited beside this one has raised it
            raise error


# ---------------------------------------------------------------- coordinator
class _Worker:
    def __init__(self, index: int):
        self.index = index
        self.actor: Any = None
        self.thread: threading.Thread | None = None
        # Functions this worker process already holds: each is sent (and its jitted
        # steps compiled) once per process, not once per call.
        self.known_functions: set[str] = set()


class ClusterCoordinator:
    """`jdist.ClusterCoordinator(strategy)`: one per `ParameterServerStrategy`; starts its workers."""

    def __new__(cls, strategy: ParameterServerStrategy):
        existing = getattr(strategy, "_cluster_coordinator", None)
        if existing is not None:
            return existing
        return super().__new__(cls)

    def __init__(self, strategy: ParameterServerStrategy):
        if getattr(self, "_initialized", False):
            return
        if not is_parameter_server_strategy(strategy):
            raise ValueError(
                "Only `jdist.ParameterServerStrategy` is supported to work with `jdist.ClusterCoordinator` "
                "currently."
            )
        import ray

        self._ray = ray
        self._strategy = strategy
        self._plan = strategy.cluster
        self._queue = _ClosureQueue()
        self._lock = threading.Lock()
        self._resources: list[tuple[str, Callable, tuple]] = []
        self._resource_ids = (f"resource-{i}" for i in itertools.count())
        self._function_tokens: dict[int, tuple[str, Callable]] = {}
        self._stopping = False
        self._worker_restarts = 0
        self._workers = [_Worker(i) for i in range(self._plan.num_workers)]
        for worker in self._workers:
            worker.actor = self._start_worker_actor(worker.index)
        try:
            ray.get([w.actor.pid.remote() for w in self._workers], timeout=_STARTUP_TIMEOUT_S)
        except Exception as e:
            for w in self._workers:
                self._kill(w.actor)
            raise UnavailableError(
                f"Ray could not start the {len(self._workers)} workers ({type(e).__name__}: {e}). Check that the "
                "Ray cluster has the resources asked for in ParameterServerCluster(worker_options=...)."
            ) from None
        for worker in self._workers:
            worker.thread = threading.Thread(target=self._process_queue, args=(worker,),
                                             name=f"jdist-worker-{worker.index}", daemon=True)
            worker.thread.start()
        strategy._cluster_coordinator = self
        self._initialized = True

    @property
    def strategy(self) -> ParameterServerStrategy:
        return self._strategy

    @property
    def num_workers(self) -> int:
        """The worker processes that run scheduled functions."""
        return len(self._workers)

    @property
    def worker_restarts(self) -> int:
        """How many dead workers were replaced so far."""
        return self._worker_restarts

    # ------------------------------------------------------------------ public
    def schedule(self, fn: Callable[..., PyTree], args: Sequence[PyTree] | None = None,
                 kwargs: Mapping[str, PyTree] | None = None) -> RemoteValue:
        """Queues `fn(*args, **kwargs)` for some worker; returns its `RemoteValue` without waiting.

        `PerWorkerValues` arguments become the executing worker's own component.
        Raises the error of an earlier failed function, if any (once).
        """
        if not callable(fn):
            raise TypeError(
                "`jdist.ClusterCoordinator.schedule` only accepts a function (a callable, e.g. a step from "
                f"jdist.make_train_step); got {type(fn).__name__}."
            )
        for leaf in jax.tree.leaves((args, kwargs), is_leaf=lambda x: isinstance(x, (RemoteValue, PerWorkerValues))):
            if isinstance(leaf, RemoteValue):
                raise ValueError("`jdist.RemoteValue` used as an input to scheduled function is not yet supported.")
        closure = _Closure(fn, self._token(fn), args, kwargs, self._keras_plan(fn))
        self._queue.put(closure)
        return closure.remote_value

    def _keras_plan(self, fn: Callable) -> Any:
        """The servers' keys of the Keras variables `fn` uses (None if it uses none): each run loads them on the
        worker, has the servers apply its optimizers' updates and pushes what else changed (`keras_state`)."""
        variables = keras_state.worker_objects(fn, self._strategy)
        if not variables:
            return None
        return self._strategy.keras_variable_store().sync_plan(variables, keras_state.optimizers_of(fn),
                                                              keras_state.sharing_of(fn))

    def _token(self, fn: Callable) -> str:
        """A stable name for `fn` (kept alive here, so its id is never reused)."""
        with self._lock:
            entry = self._function_tokens.get(id(fn))
            if entry is None:
                entry = self._function_tokens[id(fn)] = (f"fn-{len(self._function_tokens)}", fn)
            return entry[0]

    def join(self) -> None:
        """Blocks until every scheduled function has finished; raises an earlier function's error (once)."""
        self._queue.wait()

    def done(self) -> bool:
        """Whether every scheduled function has finished; raises an earlier function's error (once)."""
        return self._queue.done()

    def fetch(self, val: PyTree) -> PyTree:
        """`val` with every `RemoteValue` in it replaced by its fetched result."""
        return jax.tree.map(lambda v: v.fetch() if isinstance(v, RemoteValue) else v, val,
                            is_leaf=lambda v: isinstance(v, RemoteValue))

    def create_per_worker_dataset(self, dataset_fn: Any) -> PerWorkerDataset:
        """Builds `dataset_fn()` on every worker (or copies an iterable dataset there).

        Make it repeat: scheduled functions may run on any worker, more than once.
        """
        if callable(dataset_fn):
            rid = self._create_resource(dataset_fn, ())
        elif hasattr(dataset_fn, "__iter__"):
            rid = self._create_resource(_identity, (dataset_fn,))
        else:
            raise TypeError(
                f"create_per_worker_dataset needs a function returning an iterable dataset, or an iterable; "
                f"got {type(dataset_fn).__name__}."
            )
        return PerWorkerDataset(self, rid)

    # --------------------------------------------------------------- resources
    def _create_resource(self, fn: Callable, args: tuple) -> str:
        """Builds `fn(*args)` on every worker now, and again on any replacement worker."""
        from ray.exceptions import RayActorError, RayTaskError

        rid = next(self._resource_ids)
        fn = keras_state.sendable(fn, self._strategy)  # Keras models it uses (preprocessing) rebuilt as here
        with self._lock:
            self._resources.append((rid, fn, args))
            refs = [w.actor.create_resource.remote(rid, fn, args) for w in self._workers if w.actor is not None]
        for ref in refs:
            try:
                self._ray.get(ref, timeout=_STARTUP_TIMEOUT_S)
            except RayTaskError as e:
                cause = getattr(e, "cause", None)
                raise (cause if isinstance(cause, BaseException) else e) from None
            except RayActorError:
                pass  # that worker died; its replacement builds the resource
        return rid

    # ----------------------------------------------------------------- workers
    def _start_worker_actor(self, index: int) -> Any:
        options = {"num_cpus": 0, "max_restarts": 0, **dict(self._plan.worker_options or {})}
        return start_actor(WorkerProcess, options, index, self._plan.devices_per_worker, list(sys.path))

    def _replace_worker(self, worker: _Worker) -> bool:
        """Starts a new process for `worker` and rebuilds its resources; False if it cannot be done in time."""
        from ray.exceptions import RayTaskError

        deadline = time.monotonic() + self._plan.worker_recovery_timeout_s
        delay = 0.5
        while not self._stopping:
            with self._lock:
                actor = self._start_worker_actor(worker.index)
                replays = [actor.create_resource.remote(rid, fn, args) for rid, fn, args in self._resources]
                worker.actor = actor
                worker.known_functions = set()
            try:
                self._ray.get([actor.pid.remote(), *replays], timeout=_STARTUP_TIMEOUT_S)
                self._worker_restarts += 1
                log.warning("Worker %d was replaced by a new process.", worker.index)
                return True
            except RayTaskError as e:  # a dataset function that worked before fails now: stop here
                cause = getattr(e, "cause", None)
                self._queue.mark_fatal(cause if isinstance(cause, BaseException) else e, inflight=False)
                return False
            except Exception as e:  # the new process died or did not start
                if self._stopping:
                    return False
                log.warning("Restarting worker %d failed (%s); retrying.", worker.index, e)
                with self._lock:
                    worker.actor = None
                self._kill(actor)
                if time.monotonic() + delay > deadline:
                    break
                time.sleep(delay)
                delay = min(delay * 2, 30.0)
        if not self._stopping and all(w.actor is None for w in self._workers):
            self._queue.mark_fatal(UnavailableError(
                f"No worker could be restarted within {self._plan.worker_recovery_timeout_s:g} s; the scheduled "
                "functions cannot run. Check the Ray cluster's resources."), inflight=False)
        return False

    def _process_queue(self, worker: _Worker) -> None:
        """One thread per worker: take a closure, run it on the worker's actor, record the outcome."""
        from ray.exceptions import RayActorError, RayTaskError

        while not self._stopping:
            if worker.actor is None and not self._replace_worker(worker):
                return
            closure = self._queue.get()
            if closure is None:
                return
            try:
                args, kwargs = closure.for_worker(worker.index)
                token = closure.fn_token
                fn = None if token in worker.known_functions else closure.fn
                if fn is not None:
                    fn = keras_state.sendable(fn, self._strategy)
                # Started above or by _replace_worker; None only if _stop ran meanwhile (an error for this closure).
                assert worker.actor is not None, "the worker has no process"
                value = self._ray.get(worker.actor.run.remote(token, fn, args, kwargs, closure.keras_plan))
                worker.known_functions.add(token)
                if closure.keras_plan is not None:
                    self._strategy.keras_variable_store().mark_stale()
            except RayTaskError as e:
                cause = getattr(e, "cause", None)
                error = cause if isinstance(cause, BaseException) else e
                closure.remote_value._set_error(error)
                if isinstance(error, PSUnavailableError):
                    self._queue.mark_fatal(error)
                else:
                    self._queue.mark_failed(error)
            except RayActorError as e:  # the worker process died: run the function elsewhere
                log.warning("Worker %d died (%s); its function is queued again.", worker.index, type(e).__name__)
                self._queue.put_back(closure)
                with self._lock:
                    dead, worker.actor = worker.actor, None
                self._kill(dead)
            except Exception as e:  # e.g. arguments that cannot be sent to a worker
                closure.remote_value._set_error(e)
                self._queue.mark_failed(e)
            else:
                closure.remote_value._set_value(value)
                self._queue.mark_finished()

    def _kill(self, actor: Any) -> None:
        if actor is None:
            return
        try:
            self._ray.kill(actor)
        except Exception:  # already gone
            pass

    def _stop(self) -> None:
        """Stops the worker threads and processes (called by `strategy.shutdown()`)."""
        self._stopping = True
        self._queue.stop()
        with self._lock:
            actors = [w.actor for w in self._workers]
            for w in self._workers:
                w.actor = None
        for actor in actors:
            self._kill(actor)
        for w in self._workers:
            if w.thread is not None:
                w.thread.join(timeout=30)
