"""Keras variables made in a `ParameterServerStrategy` scope live on the parameter servers, as TF's do.

TF places every variable created under the strategy's scope on a parameter server
(round robin) and a scheduled function reads and writes it there: a worker's
`optimizer.apply_gradients` and `accuracy.update_state` change the servers' values,
and the coordinator reads them back (`accuracy.result()` after `coordinator.join()`).
Keras 3 on JAX keeps a variable's value in the variable object, and a scheduled
function reaches a worker as a pickled copy. So:

- Coordinator: each Keras variable created in the scope gets a key and a server
  (`count % num_ps`, the count shared with the strategy's other placements); its
  value is sent there before the next function is scheduled. An `assign` on the
  coordinator (`metric.reset_state()`, `model.set_weights`) is written through to the
  server; a read after a scheduled function finished pulls the servers' values first.
- `schedule`: the Keras models, optimizers and metrics the function uses are found as
  `strategy.run` finds them (`interop.keras_objects.keras_objects`); an unbuilt optimizer is
  built in the scope first (TF builds it on first use, on the servers). Their keys
  travel with the function.
- Worker: before the function runs, its copies of those objects are loaded from the
  servers. An optimizer's `apply_gradients` there updates nothing on the worker: its
  gradients go to the servers, which apply the optimizer to their current values
  (`remote_optimizer`, `server_optimizer`), as TF's servers do. Afterwards each other
  changed variable (metrics, a layer's statistics) is pushed. A server applies a push as
  an assignment when nobody changed the variable since the worker's pull, and otherwise
  adds the worker's change (new - pulled) to its current value: increments such as
  metric counts from concurrent workers all count, as TF's `assign_add` on the servers
  does. With one worker the result equals the same steps run in one process.
"""
from __future__ import annotations

import sys
import threading
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from jdist.parameter_server import remote_optimizer
from jdist.parameter_server.remote_state import call_servers
from jdist.parameter_server.server_optimizer import OptimizerSpec


class KerasVariableStore:
    """The coordinator's registry of a strategy's Keras variables on its servers."""

    def __init__(self, store_id: str, servers: Sequence[Any], timeout_s: float, next_server: Callable[[], int]):
        self.store_id = store_id
        self._servers = tuple(servers)
        self._timeout_s = timeout_s
        self._next_server = next_server
        self._variables: list[weakref.ref] = []
        self._server_of: list[int] = []
        self._pending: dict[int, np.ndarray] = {}  # created or assigned here, not yet on the servers
        self._lock = threading.RLock()
        self._stale = False
        self._refreshing = False
        self._specs: dict[int, tuple[weakref.ref, OptimizerSpec]] = {}  # id(optimizer) -> its layout

    # --------------------------------------------------------------- creation
    def register(self, variable: Any) -> None:
        with self._lock:
            key = len(self._variables)
            server = self._next_server()
            self._variables.append(weakref.ref(variable))
            self._server_of.append(server)
            variable._jdist_ps_store = self
            variable._jdist_ps_key = key
            variable._jdist_ps_device = server_device(server)
            self._pending[key] = np.asarray(variable._value)

    def key_of(self, variable: Any) -> int | None:
        return variable._jdist_ps_key if getattr(variable, "_jdist_ps_store", None) is self else None

    def colocate(self, key: int, with_key: int) -> None:
        """Moves `key`'s value to the server of `with_key` (an optimizer slot to its model variable's server)."""
        with self._lock:
            target = self._server_of[with_key]
            if self._server_of[key] == target:
                return
            self.flush()
            ((_, value),) = pull(self._servers, self.store_id, [self._server_of[key]], [key], self._timeout_s)
            call_servers([self._servers[target]], "assign_variables", [(self.store_id, {key: value})],
                         self._timeout_s)
            self._server_of[key] = target
            variable = self._variables[key]()
            if variable is not None:
                variable._jdist_ps_device = server_device(target)

    def optimizer_spec(self, optimizer: Any) -> OptimizerSpec:
        """How the servers apply `optimizer`'s updates (described once; its slots moved to their variables)."""
        with self._lock:
            known = self._specs.get(id(optimizer))
            if known is not None and known[0]() is optimizer:
                return known[1]
            spec = remote_optimizer.describe(optimizer, self.key_of, self.colocate)
            self._specs[id(optimizer)] = (weakref.ref(optimizer), spec)
            return spec

    # ---------------------------------------------------- coordinator writes
    def assigned(self, variable: Any) -> None:
        """An assignment on the coordinator: the servers get the value before anything reads it there."""
        if self._refreshing:
            return
        with self._lock:
            self._pending[variable._jdist_ps_key] = np.asarray(variable._value)

    def flush(self) -> None:
        """Sends what was created or assigned here since the last flush."""
        with self._lock:
            if not self._pending:
                return
            pending, self._pending = self._pending, {}
            per_server: list[dict] = [{} for _ in self._servers]
            for key, value in pending.items():
                per_server[self._server_of[key]][key] = value
            call_servers(self._servers, "assign_variables", [(self.store_id, part) for part in per_server],
                         self._timeout_s)

    # ----------------------------------------------------- coordinator reads
    def mark_stale(self) -> None:
        """A scheduled function finished: the next read here pulls the servers' values."""
        self._stale = True

    def refresh_if_stale(self) -> None:
        if not self._stale or self._refreshing:
            return
        with self._lock:
            if not self._stale:
                return
            self._stale = False
            self.flush()
            keys = list(range(len(self._variables)))
            values = pull(self._servers, self.store_id, [self._server_of[k] for k in keys], keys, self._timeout_s)
            self._refreshing = True
            try:
                for key, (_, value) in zip(keys, values):
                    variable = self._variables[key]()
                    if variable is not None:
                        variable._direct_assign(value)
            finally:
                self._refreshing = False

    # ------------------------------------------------------------ scheduling
    def sync_plan(self, variables: Sequence[Any], optimizers: Sequence[Any] = (), sharing: Any = None) -> "SyncPlan":
        """What a worker needs to load and push these coordinator variables (checked: all made in the scope),
        to have the servers apply these optimizers' updates, and to make its copies share variables as
        `sharing` says the originals do (`interop.keras_shared`)."""
        keys = []
        for variable in variables:
            key = self.key_of(variable)
            if key is None:
                raise ValueError(
                    f"The scheduled function uses the Keras variable {variable.path!r}, which was created outside "
                    "the ParameterServerStrategy's scope, so it does not live on the parameter servers and the "
                    "workers' updates to it would be lost. Create its model, optimizer or metric inside "
                    "`with strategy.scope():`.")
            keys.append(key)
        specs = [self.optimizer_spec(optimizer) for optimizer in optimizers]
        self.flush()
        return SyncPlan(self.store_id, self._servers, self._timeout_s, keys, [self._server_of[k] for k in keys],
                        [tuple(v.shape) for v in variables], specs, sharing)


class SyncPlan:
    """Sent with a scheduled function: which server holds each of its Keras variables, in the order found."""

    def __init__(self, store_id: str, servers: Sequence[Any], timeout_s: float, keys: list[int],
                 server_of: list[int], shapes: list[tuple], optimizers: Sequence[OptimizerSpec] = (),
                 sharing: Any = None):
        self.store_id, self.servers, self.timeout_s = store_id, tuple(servers), timeout_s
        self.keys, self.server_of, self.shapes = keys, server_of, shapes
        self.optimizers = list(optimizers)  # whose apply_gradients the servers apply
        self.sharing = sharing  # which variables of the function's Keras objects are one (None: none are)

    def load(self, variables: Sequence[Any]) -> list[tuple[int, np.ndarray]]:
        """Assigns the servers' values to the worker's copies; returns (version, value) per variable."""
        shapes = [tuple(v.shape) for v in variables]
        if shapes != self.shapes:
            raise RuntimeError(
                f"The worker's copies of the scheduled function's Keras objects have variables of shapes {shapes}, "
                f"the coordinator's {self.shapes}. Schedule functions that use their Keras objects by name "
                "(globals or closures) so both sides find the same objects.")
        pulled = pull(self.servers, self.store_id, self.server_of, self.keys, self.timeout_s)
        for variable, (_, value) in zip(variables, pulled):
            variable.assign(value)
        return pulled

    def push(self, variables: Sequence[Any], pulled: Sequence[tuple[int, np.ndarray]]) -> None:
        """Pushes each changed variable: its new value and its change since the pull."""
        per_server: list[dict] = [{} for _ in self.servers]
        for variable, key, server, (version, old) in zip(variables, self.keys, self.server_of, pulled):
            new = np.asarray(variable.value)
            if np.array_equal(new, old):
                continue
            delta = new - old if np.issubdtype(new.dtype, np.number) else None
            per_server[server][key] = (version, new, delta)
        touched = [k for k, part in enumerate(per_server) if part]
        if touched:
            call_servers([self.servers[k] for k in touched], "push_variables",
                         [(self.store_id, per_server[k]) for k in touched], self.timeout_s)

    def deferred_optimizers(self, variables: Sequence[Any], optimizers: Sequence[Any]) -> dict[int, OptimizerSpec]:
        """id -> layout of each of the worker's `optimizers` (copies) whose updates the servers apply."""
        key_of = {id(v): k for v, k in zip(variables, self.keys)}
        by_keys = {spec.variable_keys: spec for spec in self.optimizers}
        found = {}
        for optimizer in optimizers:
            spec = by_keys.get(tuple(key_of.get(id(v), -1) for v in optimizer.variables))
            if spec is not None:
                found[id(optimizer)] = spec
        return found

    def apply(self, updates: Sequence[tuple[OptimizerSpec, list, list]], variables: Sequence[Any],
              pulled: Sequence[tuple[int, np.ndarray]]) -> None:
        """Has the servers apply each deferred `apply_gradients` (layout, gradients, the worker's variables)."""
        key_of = {id(v): k for v, k in zip(variables, self.keys)}
        server_of = dict(zip(self.keys, self.server_of))
        values = {k: value for k, (_, value) in zip(self.keys, pulled)}
        for spec, grads, targets in updates:
            missing = [getattr(v, "path", v) for v in targets if id(v) not in key_of]
            if missing:
                raise ValueError(f"optimizer.apply_gradients got gradients for {missing}, which the scheduled "
                                 "function's Keras objects do not hold; apply gradients to their variables only.")
            by_key = {key_of[id(v)]: np.asarray(g) for g, v in zip(grads, targets)}
            remote_optimizer.send(spec, self.store_id, self.servers, server_of, values, by_key, self.timeout_s)


def server_device(server: int) -> str:
    """TF's name of parameter server `server`'s device (where its variables live)."""
    return f"/job:ps/replica:0/task:{server}/device:CPU:0"


def pull(servers: Sequence[Any], store_id: str, server_of: Sequence[int], keys: Sequence[int],
         timeout_s: float) -> list[tuple[int, np.ndarray]]:
    """(version, value) of each key, from the server that holds it."""
    asked = sorted(set(server_of))
    replies = call_servers([servers[k] for k in asked], "pull_variables",
                           [(store_id, [key for key, s in zip(keys, server_of) if s == k]) for k in asked], timeout_s)
    found = {key: item for reply in replies for key, item in reply.items()}
    return [found[key] for key in keys]


# ------------------------------------------------------------------ worker side
def worker_objects(fn: Callable, strategy: Any, sharing: Any = None) -> list:
    """The Keras variables of the objects `fn` uses, unbuilt optimizers built: the same list, in the same order,
    on the coordinator (before sending `fn`) and on a worker (its copy, whose objects first share the variables
    `sharing` names, as the coordinator's do: Keras pickles each object on its own)."""
    from jdist.interop import keras_objects, keras_run

    explicit: Any = getattr(fn, "keras_variables", None)
    if callable(explicit):  # a function that names its variables (Keras's fit steps: `interop/keras_ps_fit.py`)
        named: Any = explicit()
        return list(named)
    objects = keras_objects.keras_objects(fn)
    if not objects:
        return []
    import keras

    if sharing is not None:
        from jdist.interop import keras_shared

        keras_shared.share([o for o in objects if not isinstance(o, keras.optimizers.Optimizer)], sharing)
    keras_run._build_optimizers(strategy, objects, keras)
    return keras_run._variables(objects)


def sharing_of(fn: Callable) -> Any:
    """Which variables the Keras models, layers and metrics `fn` uses share (None: none do), for its worker copy
    (`interop.keras_shared`). Optimizers are left out: a worker builds its unbuilt ones after sharing."""
    if callable(getattr(fn, "keras_variables", None)) or "keras" not in sys.modules:
        return None
    import keras

    from jdist.interop import keras_objects, keras_shared

    objects = keras_objects.keras_objects(fn)
    return keras_shared.sharing([o for o in objects if not isinstance(o, keras.optimizers.Optimizer)])


def sendable(fn: Callable, strategy: Any) -> Any:
    """`fn` as a worker receives it: Keras objects it carries are rebuilt there with `jdist.tf_compat`'s Keras
    prepared as on the coordinator (its `StringLookup` registered, its patches installed) and, where the strategy
    splits Keras weights, with the same pieces (`interop/keras_sharded.py`)."""
    if "keras" not in sys.modules:
        return fn
    partitioner = getattr(strategy, "variable_partitioner", None)
    if strategy.keras_variable_store() is None:
        partitioner = None
    extras = sys.modules.get("jdist.tf_compat.keras_extras")
    preludes = [extras.prepare_worker] if extras is not None else []
    if partitioner is None and not preludes:
        return fn
    from jdist.interop import keras_sharded

    return keras_sharded.worker_copy(fn, partitioner, preludes)


def optimizers_of(fn: Callable) -> list:
    """The Keras optimizers `fn` uses whose updates the servers apply (for a function that names its variables
    itself, those its `keras_optimizers()` names, if it has one)."""
    if "keras" not in sys.modules:
        return []
    if callable(getattr(fn, "keras_variables", None)):
        if not hasattr(fn, "keras_optimizers"):
            return []
        named: Any = fn.keras_optimizers()  # pyright: ignore[reportFunctionMemberAccess]
        return list(named)
    import keras

    from jdist.interop import keras_objects

    return [o for o in keras_objects.keras_objects(fn) if isinstance(o, keras.optimizers.Optimizer)]
