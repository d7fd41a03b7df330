"""`ParameterServerStrategy`: parameters on parameter-server processes, asynchronous workers.

TF's model, on Ray: the coordinator (this process) creates parameter-server
actors at construction and places parameters on them round robin (split along
axis 0 when a `variable_partitioner` says so); `ClusterCoordinator` starts the
worker actors and schedules functions on them. A worker pulls parameters,
computes gradients with a jitted step on its own devices and pushes them; each
server applies its optimizer on arrival, without waiting for other workers.
"""
from __future__ import annotations

import itertools
import logging
import sys
import uuid
import weakref
from typing import TYPE_CHECKING, Any, Callable

import jax
import jax.numpy as jnp

from jdist.cluster import worker_context
from jdist.parameter_server.cluster import ParameterServerCluster, cluster_plan
from jdist.parameter_server.errors import PSUnavailableError, UnavailableError
from jdist.parameter_server.keras_state import KerasVariableStore, server_device
from jdist.parameter_server.layout import ParameterLayout
from jdist.parameter_server.processes import ParameterServerProcess, start_actor
from jdist.parameter_server.ray_lifetime import ensure_ray, stop_local_ray
from jdist.parameter_server.remote_state import RemoteParameters, RemoteTrainState, call_servers
from jdist.strategy.base import Strategy
from jdist.strategy.gradient_capture import GRADIENT_CAPTURE, NotApplied, captured_gradients
from jdist.typing import PyTree

if TYPE_CHECKING:
    import optax

    from jdist.parameter_server.coordinator import ClusterCoordinator

log = logging.getLogger(__name__)
_STARTUP_TIMEOUT_S = 300.0


def compile_remote_step(strategy: Strategy, step_fn: Callable, state: RemoteTrainState,
                        batch_sharding: PyTree = None, out_sharding: PyTree = None) -> Callable:
    """A global-view step over `state` (a `RemoteTrainState`): pull, jitted gradients on `strategy`'s devices, push.

    `batch` may be an iterator (a per-worker dataset's): one batch is taken from it.
    """
    apply_fn = state.apply_fn  # one object for every call: it is static in the compiled step

    def compute(proxy, batch):
        new_proxy, out = step_fn(proxy, batch, None)  # the update runs on the parameter servers
        return captured_gradients(new_proxy), out

    replicated = strategy.replicated_sharding()
    compute_jit = jax.jit(
        compute, in_shardings=(replicated, strategy.data_sharding() if batch_sharding is None else batch_sharding),
        out_shardings=(replicated, replicated if out_sharding is None else out_sharding))

    def step(state: RemoteTrainState, batch: PyTree) -> tuple[RemoteTrainState, Any]:
        from jdist.training.train_state import TrainState

        if hasattr(batch, "__next__"):
            batch = next(batch)
        params = jax.device_put(state.pull_numpy(), strategy.replicated_sharding())
        version = state.pulled_version
        proxy = TrainState(step=jnp.asarray(version, jnp.int32), apply_fn=apply_fn, params=params,
                           tx=GRADIENT_CAPTURE, opt_state=NotApplied())
        grads, out = compute_jit(proxy, batch)
        if grads is not None:
            state.apply_gradients(grads=grads)
        return state, out

    return step


class RemoteStepsStrategy(Strategy):
    """A strategy whose steps over a `RemoteTrainState` pull, compute on its devices and push
    (synchronously on the coordinator; inside a scheduled function on a worker)."""

    def compile_step(self, step_fn: Callable, state: PyTree, *, donate: bool, batch_sharding: PyTree = None,
                     out_sharding: PyTree = None) -> Callable:
        if isinstance(state, RemoteTrainState):
            return compile_remote_step(self, step_fn, state, batch_sharding, out_sharding)
        return super().compile_step(step_fn, state, donate=donate, batch_sharding=batch_sharding,
                                    out_sharding=out_sharding)


class WorkerStrategy(RemoteStepsStrategy):
    """What a `ParameterServerStrategy` is inside a worker: a mirrored strategy over the worker's devices."""

    def __init__(self, devices_per_worker: int | None = None):
        devices = jax.local_devices()
        super().__init__(devices=devices[:devices_per_worker] if devices_per_worker else devices)

    def __repr__(self) -> str:
        return f"WorkerStrategy(worker={worker_context.get_current_worker_index()}, devices={len(self.worker_devices)})"


class ParameterServerStrategy(RemoteStepsStrategy):
    """`jdist.ParameterServerStrategy(cluster_resolver, variable_partitioner=None)`.

    cluster_resolver: `jdist.ParameterServerCluster(num_workers, num_ps, address)`,
      or any resolver whose `cluster_spec()` lists "ps" and "worker" tasks (at
      least one of each, as TF requires).
    variable_partitioner: e.g. `jdist.partitioners.MinSizePartitioner(...)`;
      parameters it splits into several axis-0 shards go to several servers.

    `num_replicas_in_sync` is `devices_per_worker` of the cluster (1 unless set):
    the replicas of one worker's step.
    """

    _is_parameter_server_strategy = True
    _between_graph = True

    def _parameter_device_names(self) -> tuple[str, ...]:
        return tuple(server_device(i) for i in range(self._plan.num_ps))

    def __init__(self, cluster_resolver: Any, variable_partitioner: Callable | None = None):
        plan = cluster_plan(cluster_resolver)
        self._owns_ray = ensure_ray(plan.address)
        local = jax.local_devices()
        super().__init__(devices=local[:plan.devices_per_worker] if plan.devices_per_worker else local[:1])
        self._cluster_resolver = cluster_resolver
        self._plan = plan
        self._variable_partitioner = variable_partitioner
        self._variable_count = 0
        self._cluster_coordinator: ClusterCoordinator | None = None
        self._keras_store: KerasVariableStore | None = None
        self._store_ids = (f"{uuid.uuid4().hex[:8]}-{i}" for i in itertools.count())
        self._servers = [self._start_server(i) for i in range(plan.num_ps)]
        try:
            call_servers(self._servers, "pid", [()] * plan.num_ps, _STARTUP_TIMEOUT_S)
        except PSUnavailableError as e:
            self.shutdown()
            raise UnavailableError(
                f"Ray could not start parameter server {e.server_index} ({e.reason}). Check that the Ray cluster "
                "has the resources asked for in ParameterServerCluster(ps_options=...) and that jdist imports there."
            ) from None

    def _start_server(self, index: int) -> Any:
        options = {"num_cpus": 0, "max_restarts": 0, **dict(self._plan.ps_options or {})}
        return start_actor(ParameterServerProcess, options, index, list(sys.path))

    # ---------------------------------------------------------------- properties
    @property
    def cluster_resolver(self) -> Any:
        return self._cluster_resolver

    @property
    def cluster(self) -> ParameterServerCluster:
        """The cluster this strategy runs: counts, Ray address and actor options."""
        return self._plan

    @property
    def num_ps(self) -> int:
        return self._plan.num_ps

    @property
    def num_workers(self) -> int:
        return self._plan.num_workers

    @property
    def parameter_servers(self) -> tuple:
        """The parameter servers' Ray actor handles, by server index."""
        return tuple(self._servers)

    @property
    def variable_partitioner(self) -> Callable | None:
        return self._variable_partitioner

    def __repr__(self) -> str:
        return f"ParameterServerStrategy(num_workers={self.num_workers}, num_ps={self.num_ps})"

    def __reduce__(self):
        # Sent to a worker inside a scheduled function, the strategy becomes that worker's view.
        return (worker_context.current_worker_strategy, ())

    # ----------------------------------------------------------------- placement
    def _store(self, tree: Any, tx: Any) -> tuple[str, ParameterLayout]:
        """Sends `tree` (and, with `tx`, its optimizer) to the servers; returns its store id and layout."""
        tree = jax.device_get(tree)
        layout, self._variable_count = ParameterLayout.plan(
            tree, self.num_ps, self._variable_partitioner, self._variable_count)
        leaves = jax.tree.leaves(tree)
        store_id = next(self._store_ids)
        call_servers(self._servers, "create",
                     [(store_id, layout.local_tree(leaves, k), tx) for k in range(self.num_ps)],
                     self._plan.timeout_s)
        return store_id, layout

    def place(self, tree: PyTree) -> RemoteParameters:
        """Stores `tree` on the parameter servers, round robin by leaf (and shard); returns its handle."""
        store_id, layout = self._store(tree, None)
        handle = RemoteParameters(store_id, layout, self._servers, self._plan.timeout_s)
        handle._placed_by = weakref.ref(self)
        return handle

    def create_train_state(self, state_cls: type, *, apply_fn: Callable, params: PyTree,
                           tx: optax.GradientTransformation,
                           **kwargs: Any) -> RemoteTrainState:
        """`TrainState.create` in this scope: parameters and the optimizer go to the servers."""
        if kwargs:
            raise ValueError(
                f"ParameterServerStrategy serves parameters and their optimizer only; extra train-state fields "
                f"{sorted(kwargs)} are not supported. Keep them on the workers."
            )
        store_id, layout = self._store(params, tx)
        handle = RemoteTrainState(store_id, layout, self._servers, self._plan.timeout_s, apply_fn, tx)
        handle._placed_by = weakref.ref(self)
        return handle

    @property
    def single_program_step(self) -> bool:
        return False

    def keras_variable_store(self) -> KerasVariableStore:
        """Keras variables created in this scope live on the servers, round robin (`keras_state`)."""
        if self._keras_store is None:
            self._keras_store = KerasVariableStore(next(self._store_ids), self._servers, self._plan.timeout_s,
                                                   self._next_server)
        return self._keras_store

    def _next_server(self) -> int:
        server = self._variable_count % self.num_ps
        self._variable_count += 1
        return server

    # ------------------------------------------------ hooks: where a state lives
    def place_state(self, state: PyTree, into: PyTree = None) -> PyTree:
        """A train state goes to the servers; a host copy given back (`into` on the servers)
        is pushed into the storage it came from."""
        if isinstance(state, RemoteTrainState):
            return state
        if isinstance(into, RemoteTrainState):
            self.restore(into, state)
            return into
        if getattr(state, "model_state", None) is not None:
            raise ValueError(
                "Under ParameterServerStrategy the Trainer keeps parameters and optimizer state only; this "
                "model also has mutable collections (e.g. batch statistics), which asynchronous workers "
                "cannot share. Use a model without them, or a synchronous strategy.")
        from jdist.training.train_state import TrainState

        return self.create_train_state(TrainState, apply_fn=state.apply_fn, params=state.params, tx=state.tx)

    def keeps_remotely(self, value: Any) -> bool:
        return isinstance(value, RemoteParameters)

    def host_copy(self, tree: PyTree) -> PyTree:
        """Values on the servers gathered to the host (a train state as a `jdist.TrainState`)."""
        if isinstance(tree, RemoteTrainState):
            return self.gather_train_state(tree)
        if isinstance(tree, RemoteParameters):
            return self.gather_parameters(tree)
        return super().host_copy(tree)

    def checkpoint_view(self, tree: PyTree) -> PyTree:
        """A checkpoint holds a host copy of what lives on the servers."""
        if isinstance(tree, RemoteParameters):
            return self.host_copy(tree)
        return tree

    def restore_into(self, target: PyTree, restored: PyTree) -> PyTree:
        """Restored values are pushed back to the servers that hold `target`."""
        if isinstance(target, RemoteParameters):
            self.restore(target, restored)
            return target
        return restored

    @property
    def should_use_with_coordinator(self) -> bool:
        return True

    # `jdist.parameter_server` sets this to `ClusterCoordinator` (whose module imports this one).
    coordinator_class: Any = None

    def cluster_coordinator(self) -> Any:
        return self.coordinator_class(self)

    def compute_view(self, tree: PyTree) -> PyTree:
        """The current parameters, pulled to the coordinator's devices (a train state becomes a
        `jdist.TrainState` without optimizer state): for evaluating and predicting here."""
        if isinstance(tree, RemoteTrainState):
            from jdist.training.train_state import TrainState

            return TrainState(step=jnp.asarray(tree.version, jnp.int32), apply_fn=tree.apply_fn,
                              params=jax.device_put(tree.pull_numpy(), self.replicated_sharding()),
                              # flax types opt_state as optax's OptState, which leaves out None (an empty
                              # pytree): this view has no optimizer state.
                              tx=tree.tx, opt_state=None)  # pyright: ignore[reportArgumentType]
        if isinstance(tree, RemoteParameters):
            return jax.device_put(tree.pull_numpy(), self.replicated_sharding())
        return tree

    # --------------------------------------------------------------- checkpoints
    def gather_parameters(self, values: RemoteParameters) -> Any:
        """The parameters of `values` (a placed tree or a train state) as one numpy pytree."""
        return values.gather()

    def gather_train_state(self, state: RemoteTrainState) -> Any:
        """A `jdist.TrainState` (numpy) of step, parameters and optimizer state, restorable anywhere."""
        return state.gather_train_state()

    def restore(self, values: RemoteParameters, source: Any) -> None:
        """Pushes a checkpoint back to the servers: a `TrainState`, or a parameter pytree."""
        if isinstance(values, RemoteTrainState):
            values.restore(source)
        else:
            values.assign(source)

    def parameter_server_stats(self, values: RemoteParameters) -> list[dict]:
        """Per server: updates applied to `values` and the staleness of each push (updates between its pull and it)."""
        return call_servers(self._servers, "stats", [(values._store_id,)] * self.num_ps, self._plan.timeout_s)

    # ----------------------------------------------------------------- lifetime
    def shutdown(self) -> None:
        """Stops the coordinator's workers and the parameter servers (their values are lost), and the
        local Ray cluster if this strategy started it: no process of the job outlives this call."""
        import ray

        if self._cluster_coordinator is not None:
            self._cluster_coordinator._stop()
        for server in self._servers:
            try:
                ray.kill(server)
            except Exception:  # already gone
                pass
        self._servers = []
        if self._owns_ray:
            self._owns_ray = False
            stop_local_ray()


def is_parameter_server_strategy(strategy: Any) -> bool:
    return getattr(strategy, "_is_parameter_server_strategy", False)

