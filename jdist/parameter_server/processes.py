"""The code a parameter server's Ray actor process runs, and what every actor process shares.

Plain classes, turned into Ray actors by `start_actor`, so this module imports
without Ray. Each actor configures JAX for its own process before its first use
(`prepare_process`); a worker's actor is `jdist.parameter_server.worker_process`.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Sequence

import numpy as np


def prepare_process(sys_path: Sequence[str], num_cpu_devices: int, cpu_only: bool = False) -> None:
    """Makes the coordinator's modules importable and sizes JAX's CPU backend for this process.

    An inherited `--xla_force_host_platform_device_count` (e.g. from a test run)
    is dropped so each worker has exactly its own devices.
    """
    for entry in reversed(list(sys_path)):
        if entry and entry not in sys.path and os.path.isdir(entry):
            sys.path.insert(0, entry)
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
             if not f.startswith("--xla_force_host_platform_device_count")]
    os.environ["XLA_FLAGS"] = " ".join(flags)
    import jax

    if cpu_only:
        jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", int(num_cpu_devices))


def start_actor(cls: type, options: dict, *args: Any) -> Any:
    import ray

    return ray.remote(cls).options(**options).remote(*args)


class _Store:
    """One placed pytree on one server: its rows of every leaf, the optimizer state, a version."""

    def __init__(self, local_tree: Any, tx: Any, version: int):
        import jax

        self.treedef = jax.tree.structure(local_tree)
        self.params = jax.tree.map(jax.numpy.asarray, local_tree)
        self.tx = tx
        self.opt_state = tx.init(self.params) if tx is not None else None
        self.version = version
        self.staleness: list[int] = []
        self._apply = None

    def apply(self, grads: Any) -> None:
        import jax
        import optax

        if self._apply is None:
            tx = self.tx

            def apply(params, opt_state, grads):
                updates, opt_state = tx.update(grads, opt_state, params)
                return optax.apply_updates(params, updates), opt_state

            self._apply = jax.jit(apply)
        self.params, self.opt_state = self._apply(self.params, self.opt_state, grads)


class VariableEntries:
    """A server's Keras variables of one strategy (`keras_state`): key -> [version, value]. A push whose pull
    saw the current version is the worker's value; otherwise its change (new - pulled) is added."""

    def __init__(self):
        self.entries: dict[int, list] = {}

    def assign(self, values: dict) -> None:
        for key, value in values.items():
            entry = self.entries.setdefault(key, [0, None])
            entry[0] += 1
            entry[1] = np.array(value)

    def pull(self, keys: Sequence[int]) -> dict:
        return {key: (self.entries[key][0], self.entries[key][1]) for key in keys}

    def fetch_add(self, key: int) -> np.ndarray:
        """The value before adding 1 (an optimizer's `iterations`, advanced once per applied update)."""
        entry = self.entries[key]
        before = entry[1]
        entry[1] = (before + 1).astype(before.dtype)
        entry[0] += 1
        return before

    def push(self, changes: dict) -> None:
        for key, (version, new, delta) in changes.items():
            entry = self.entries[key]
            if entry[0] == version or delta is None:
                entry[1] = np.array(new)  # nobody wrote it since the pull: the worker's value exactly
            else:
                entry[1] = (entry[1] + delta).astype(entry[1].dtype)  # concurrent writes: the change adds up
            entry[0] += 1


class ParameterServerProcess:
    """A parameter server: stores rows of parameters and applies optimizer updates as they arrive.

    Ray runs one method at a time per actor, so each push is applied atomically
    with respect to pulls from other workers on this server.
    """

    def __init__(self, index: int, sys_path: Sequence[str]):
        prepare_process(sys_path, num_cpu_devices=1, cpu_only=True)
        self._index = index
        self._stores: dict[str, _Store] = {}
        self._variables: dict[str, VariableEntries] = {}
        self._optimizers: dict[tuple, Any] = {}  # Keras optimizers applied here (server_optimizer)

    def pid(self) -> int:
        return os.getpid()

    def create(self, store_id: str, local_tree: Any, tx: Any = None, version: int = 0) -> None:
        self._stores[store_id] = _Store(local_tree, tx, version)

    def delete(self, store_id: str) -> None:
        self._stores.pop(store_id, None)

    def pull(self, store_id: str) -> tuple[int, list]:
        import jax

        store = self._stores[store_id]
        return store.version, [np.asarray(x) for x in jax.tree.leaves(store.params)]

    def push(self, store_id: str, grad_leaves: list, pulled_version: int | None) -> int | None:
        """Applies one worker's gradients; returns the staleness: updates applied since its pull."""
        import jax

        store = self._stores[store_id]
        if store.tx is None:
            raise ValueError("These values were placed without an optimizer; create them with "
                             "jdist.TrainState.create(..., tx=...) to apply gradients.")
        store.apply(jax.tree.unflatten(store.treedef, grad_leaves))
        staleness = None if pulled_version is None else store.version - pulled_version
        if staleness is not None:
            store.staleness.append(staleness)
        store.version += 1
        return staleness

    def assign(self, store_id: str, local_tree: Any, opt_state: Any = None, version: int | None = None) -> None:
        import jax

        store = self._stores[store_id]
        store.params = jax.tree.map(jax.numpy.asarray, local_tree)
        if opt_state is not None:
            store.opt_state = jax.tree.map(jax.numpy.asarray, opt_state)
        elif store.tx is not None:
            store.opt_state = store.tx.init(store.params)
        if version is not None:
            store.version = int(version)

    def read(self, store_id: str) -> tuple[int, list, Any]:
        """Version, parameter rows and optimizer state, as numpy (for checkpoints)."""
        import jax

        store = self._stores[store_id]
        to_numpy = lambda t: jax.tree.map(np.asarray, t)  # noqa: E731
        return store.version, [np.asarray(x) for x in jax.tree.leaves(store.params)], to_numpy(store.opt_state)

    # Keras variables made in the strategy's scope (keras_state): key -> (version, value)
    def assign_variables(self, store_id: str, values: dict) -> None:
        self._variables.setdefault(store_id, VariableEntries()).assign(values)

    def pull_variables(self, store_id: str, keys: list) -> dict:
        return self._variables[store_id].pull(keys)

    def push_variables(self, store_id: str, changes: dict) -> None:
        self._variables[store_id].push(changes)

    def fetch_add_variable(self, store_id: str, key: int) -> np.ndarray:
        return self._variables[store_id].fetch_add(key)

    def apply_optimizer(self, store_id: str, spec: Any, iteration: Any, shared: list, grads: dict,
                        reads: dict | None = None) -> None:
        """One update of the variables held here, from their current values, or from `reads` (the values the
        worker loaded, by key) for an optimizer whose update TF computes from its step's reads
        (`server_optimizer`)."""
        from jdist.parameter_server.server_optimizer import ServerOptimizer

        entries = self._variables[store_id].entries
        cache_key = (store_id, spec.variable_keys, tuple(sorted(grads)))
        optimizer = self._optimizers.get(cache_key)
        if optimizer is None:
            optimizer = self._optimizers[cache_key] = ServerOptimizer(spec, sorted(grads), entries)
        for key, value in (reads or {}).items():
            entries[key][1] = np.asarray(value).astype(entries[key][1].dtype)
        optimizer.apply(entries, iteration, shared, grads)

    def stats(self, store_id: str) -> dict:
        store = self._stores[store_id]
        return {"server": self._index, "updates": store.version, "staleness": list(store.staleness)}
