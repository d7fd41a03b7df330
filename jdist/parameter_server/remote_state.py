"""Handles to values stored on the parameter servers.

`RemoteParameters` is what `ParameterServerStrategy.place` returns (TF: variables
created in the strategy's scope); `RemoteTrainState` is what `TrainState.create`
returns there. Both are small picklable handles: a worker that receives one
pulls the current parameters from the servers (`pull`) and pushes gradients
(`apply_gradients`), which each server applies with the optimizer on arrival.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.core
import numpy as np

from jdist.parameter_server.errors import PSUnavailableError
from jdist.parameter_server.layout import ParameterLayout
from jdist.strategy import context
from jdist.typing import PyTree


def call_servers(servers: Sequence[Any], method: str, args: Sequence[tuple], timeout_s: float) -> list:
    """Calls `method(*args[k])` on every server `k` in parallel; a dead or hung server is `PSUnavailableError`."""
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

    refs = [getattr(server, method).remote(*a) for server, a in zip(servers, args)]
    results = []
    for index, ref in enumerate(refs):
        try:
            results.append(ray.get(ref, timeout=timeout_s))
        except RayActorError as e:
            raise PSUnavailableError(index, f"its process died: {type(e).__name__}") from None
        except GetTimeoutError:
            raise PSUnavailableError(index, f"no answer within {timeout_s:g} s") from None
        except RayTaskError as e:  # a bug surfaced on the server: raise the server's own exception
            cause = getattr(e, "cause", None)
            raise (cause if isinstance(cause, BaseException) else e) from None
    return results


@jax.tree_util.register_pytree_node_class
class RemoteParameters:
    """A pytree whose leaves live on the parameter servers, placed as `placement` shows."""

    def __init__(self, store_id: str, layout: ParameterLayout, servers: Sequence[Any], timeout_s: float):
        self._store_id = store_id
        self._layout = layout
        self._servers = tuple(servers)
        self._timeout_s = timeout_s
        self._pulled_versions: list | None = None
        self._placed_by: Callable[[], Any] | None = None  # a weak reference to the strategy

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_pulled_versions"] = None  # a copy starts without a pull of its own
        state["_placed_by"] = None  # on a worker, the worker's own strategy runs the steps
        return state

    @property
    def placed_by(self) -> Any:
        """The strategy that placed these values (None in another process): its hooks save and
        restore them (`jdist.checkpoint.CheckpointManager` asks)."""
        return None if self._placed_by is None else self._placed_by()

    # A handle is a pytree node without leaves whose identity is its store, so
    # copies of one handle (one per scheduled call on a worker) share compiled steps.
    def __eq__(self, other: Any) -> bool:
        return type(other) is type(self) and other._store_id == self._store_id

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._store_id))

    def tree_flatten(self) -> tuple[tuple, "RemoteParameters"]:
        return (), self

    @classmethod
    def tree_unflatten(cls, handle: "RemoteParameters", children: tuple) -> "RemoteParameters":
        return handle

    # ------------------------------------------------------------------ queries
    @property
    def placement(self) -> dict[str, list[tuple[int, int, int]]]:
        """`{path: [(server, start_row, stop_row), ...]}` for every leaf (TF's variable devices)."""
        return self._layout.placement()

    @property
    def num_servers(self) -> int:
        return len(self._servers)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(leaves={len(self._layout.leaves)}, servers={self.num_servers})"

    # -------------------------------------------------------------- pull / push
    def _call(self, method: str, args: Sequence[tuple]) -> list:
        return call_servers(self._servers, method, args, self._timeout_s)

    def pull_numpy(self) -> Any:
        """The current values as numpy, assembled from every server; remembers their versions."""
        replies = self._call("pull", [(self._store_id,)] * self.num_servers)
        self._pulled_versions = [version for version, _ in replies]
        leaves = self._layout.assemble([leaves for _, leaves in replies])
        return jax.tree.unflatten(self._layout.treedef, leaves)

    def pull(self) -> Any:
        """The current values, replicated on the current strategy's devices (a worker's own devices)."""
        tree = self.pull_numpy()
        strategy = context.get_strategy()
        return jax.device_put(tree, strategy.replicated_sharding())

    @property
    def pulled_version(self) -> int | None:
        """Server 0's version at this handle's last pull (None before any)."""
        return None if self._pulled_versions is None else self._pulled_versions[0]

    @property
    def version(self) -> int:
        """Updates applied so far (by server 0; every push reaches every server)."""
        return self._call_one(0, "stats")["updates"]

    def _call_one(self, server: int, method: str, *args: Any) -> Any:
        return call_servers([self._servers[server]], method, [(self._store_id, *args)], self._timeout_s)[0]

    # --------------------------------------------------------------- checkpoints
    def gather(self) -> Any:
        """All values as one numpy pytree (for checkpoints and for synchronous strategies)."""
        return self.pull_numpy()

    def assign(self, tree: PyTree) -> None:
        """Overwrites the stored values with `tree` (same structure and shapes)."""
        leaves = self._full_leaves(tree, "assign()")
        self._call("assign", [(self._store_id, self._layout.local_tree(leaves, k)) for k in range(self.num_servers)])

    def _full_leaves(self, tree: Any, what: str) -> list:
        leaves, treedef = jax.tree.flatten(tree)
        if treedef != self._layout.treedef:
            raise ValueError(
                f"{what}: the tree's structure {treedef} differs from the stored structure "
                f"{self._layout.treedef}. Pass a pytree of the same model."
            )
        leaves = [np.asarray(jax.device_get(x)) for x in leaves]
        self._layout.check_matches(leaves, what)
        return [x.astype(leaf.dtype, copy=False) for x, leaf in zip(leaves, self._layout.leaves)]

    def delete(self) -> None:
        """Frees the stored values on the servers."""
        self._call("delete", [(self._store_id,)] * self.num_servers)


@jax.tree_util.register_pytree_node_class
class RemoteTrainState(RemoteParameters):
    """A train state on the parameter servers: parameters, and the optimizer that updates them there.

    Inside a scheduled function: `params = state.pull()`, compute gradients, then
    `state.apply_gradients(grads=grads)`. `jdist.make_train_step` steps do this
    for you. The optimizer must act leaf by leaf and row by row (sgd, momentum,
    adam, adamw, rmsprop, adagrad, ...): each server updates only its rows. Clip
    gradients by global norm in the step, before `apply_gradients`.
    """

    def __init__(self, store_id: str, layout: ParameterLayout, servers: Sequence[Any], timeout_s: float,
                 apply_fn: Callable, tx: Any):
        super().__init__(store_id, layout, servers, timeout_s)
        self.apply_fn = apply_fn
        self.tx = tx

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state["tx"] = None  # the optimizer runs on the servers; workers never need it
        return state

    @property
    def params(self) -> Any:
        """Pulls the current parameters (each access is a pull)."""
        return self.pull()

    @property
    def step(self) -> int:
        return self.version

    def apply_gradients(self, *, grads: PyTree) -> "RemoteTrainState":
        """Pushes `grads` (full parameter structure); each server updates its rows with the optimizer.

        Staleness is measured against this handle's last `pull`.
        """
        if any(isinstance(g, jax.core.Tracer) for g in jax.tree.leaves(grads)):
            raise RuntimeError(
                "apply_gradients() on a RemoteTrainState was traced inside jax.jit: the push to the parameter "
                "servers must run outside compiled code. Run jdist.make_train_step steps under the "
                "ParameterServerStrategy's scope or schedule them with ClusterCoordinator.schedule; in a hand-"
                "written step, jit only the gradient computation and call apply_gradients after it."
            )
        leaves = self._full_leaves(grads, "apply_gradients(grads=...)")
        versions = self._pulled_versions or [None] * self.num_servers
        self._call("push", [(self._store_id, self._layout.local_leaves(leaves, k), versions[k])
                            for k in range(self.num_servers)])
        return self

    # --------------------------------------------------------------- checkpoints
    def gather_train_state(self) -> Any:
        """A `jdist.TrainState` of numpy values: step, parameters and the optimizer state, reassembled.

        Place it with any synchronous strategy (`strategy.place(...)`) or save it.
        """
        from jdist.training.train_state import TrainState

        if self.tx is None:
            raise RuntimeError("gather_train_state() needs the optimizer: call it on the coordinator's state.")
        replies = self._call("read", [(self._store_id,)] * self.num_servers)
        params = jax.tree.unflatten(self._layout.treedef, self._layout.assemble([r[1] for r in replies]))
        opt_state = _join_optimizer_states(self._layout, self.tx, params, [r[2] for r in replies])
        # flax types step as int | jax.Array; this host copy holds numpy values throughout.
        return TrainState(step=np.asarray(replies[0][0], np.int32),  # pyright: ignore[reportArgumentType]
                          apply_fn=self.apply_fn, params=params, tx=self.tx, opt_state=opt_state)

    def restore(self, source: Any) -> None:
        """Loads a checkpoint: a `TrainState` (step, params, opt_state) or a parameter pytree."""
        if not hasattr(source, "params"):
            self.assign(source)
            return
        if self.tx is None:
            raise RuntimeError("restore() needs the optimizer: call it on the coordinator's state.")
        leaves = self._full_leaves(source.params, "restore()")
        params = jax.tree.unflatten(self._layout.treedef, leaves)
        opt_parts = _split_optimizer_state(self._layout, self.tx, params, source.opt_state)
        step = int(np.asarray(jax.device_get(source.step)))
        self._call("assign", [(self._store_id, self._layout.local_tree(leaves, k), opt_parts[k], step)
                              for k in range(self.num_servers)])


# ------------------------------------------------------------ optimizer states
def _slot_nodes(layout: ParameterLayout, tx: Any, params: Any) -> tuple[Any, list[bool]]:
    """Where parameter-shaped subtrees (e.g. Adam's mu, nu) sit in `tx.init(params)`'s structure."""
    def is_slot(x):
        return jax.tree.structure(x) == layout.treedef

    full = jax.eval_shape(tx.init, params)
    nodes, outer = jax.tree.flatten(full, is_leaf=is_slot)
    shapes = [leaf.shape for leaf in layout.leaves]
    flags = [is_slot(node) and [tuple(x.shape) for x in jax.tree.leaves(node)] == [tuple(s) for s in shapes]
             for node in nodes]
    return (outer, is_slot), flags


def _join_optimizer_states(layout: ParameterLayout, tx: Any, params: Any, per_server: Sequence[Any]) -> Any:
    (outer, is_slot), flags = _slot_nodes(layout, tx, params)
    server_nodes = [jax.tree.flatten(state, is_leaf=is_slot)[0] for state in per_server]
    joined = []
    for i, flag in enumerate(flags):
        if flag:
            leaves = layout.assemble([jax.tree.leaves(nodes[i]) for nodes in server_nodes])
            joined.append(jax.tree.unflatten(layout.treedef, leaves))
        else:  # per-server scalars such as Adam's count agree: every push reaches every server
            joined.append(server_nodes[0][i])
    return jax.tree.unflatten(outer, joined)


def _split_optimizer_state(layout: ParameterLayout, tx: Any, params: Any, opt_state: Any) -> list:
    (outer, is_slot), flags = _slot_nodes(layout, tx, params)
    nodes, treedef = jax.tree.flatten(opt_state, is_leaf=is_slot)
    if treedef != outer:
        raise ValueError(
            f"restore(): the optimizer state's structure {treedef} differs from this optimizer's {outer}. "
            "Restore a checkpoint made with the same optimizer."
        )
    parts = []
    for server in range(layout.num_servers):
        local = []
        for node, flag in zip(nodes, flags):
            if flag:
                full = [np.asarray(jax.device_get(x)) for x in jax.tree.leaves(node)]
                local.append(jax.tree.unflatten(layout.treedef, layout.local_leaves(full, server)))
            else:
                local.append(np.asarray(jax.device_get(node)))
        parts.append(jax.tree.unflatten(outer, local))
    return parts
