"""Turning a training-state pytree into what goes on disk, and back.

A state is stored as a nested dict keyed by each leaf's '/'-joined path
(`params/Dense_0/kernel`, `opt_state/0/mu/...`: `jdist.layout.path_str`, the name
layout rules match), whatever containers held it
(flax `TrainState`, dicts, tuples). The restore target supplies the structure
again, so a checkpoint depends only on leaf paths, shapes and dtypes.

Leaf kinds:
  array   a jax.Array (or ShapeDtypeStruct in a target); restored sharded
  key     a typed PRNG key; stored as its `key_data`, re-wrapped on restore
  host    a numpy array or numpy scalar; restored as numpy
  scalar  a Python bool / int / float; restored as the same Python type
"""
from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jdist.layout import path_str
from jdist.typing import PyTree

_PY_SCALARS = (bool, int, float)


@dataclasses.dataclass(frozen=True)
class LeafSpec:
    """What the manifest records about one leaf."""

    path: str
    kind: str
    shape: tuple[int, ...]
    dtype: str
    key_impl: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"path": self.path, "kind": self.kind, "shape": list(self.shape), "dtype": self.dtype}
        if self.key_impl is not None:
            out["key_impl"] = self.key_impl
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "LeafSpec":
        return cls(d["path"], d["kind"], tuple(int(s) for s in d["shape"]), d["dtype"], d.get("key_impl"))


def is_prng_key(x: object) -> bool:
    dtype = getattr(x, "dtype", None)
    return dtype is not None and jnp.issubdtype(dtype, jax.dtypes.prng_key)


def leaf_kind(x: Any, path: str) -> str:
    if is_prng_key(x):
        return "key"
    if isinstance(x, (jax.Array, jax.ShapeDtypeStruct)):
        return "array"
    if isinstance(x, (np.ndarray, np.generic)):
        return "host"
    if isinstance(x, _PY_SCALARS):
        return "scalar"
    raise TypeError(
        f"Cannot checkpoint the leaf at {path!r}: a {type(x).__name__}. Checkpointed state may hold "
        "jax arrays, PRNG keys, numpy arrays and Python numbers; keep other objects out of the state "
        "pytree (e.g. as static fields) or save them in `metadata=`."
    )


def leaf_spec(x: Any, path: str) -> LeafSpec:
    kind = leaf_kind(x, path)
    if kind == "key":
        impl = str(jax.random.key_impl(x)) if isinstance(x, jax.Array) else _impl_of_dtype(x.dtype)
        return LeafSpec(path, kind, tuple(x.shape), "key", impl)
    if kind == "scalar":
        return LeafSpec(path, kind, (), str(np.asarray(x).dtype))
    return LeafSpec(path, kind, tuple(np.shape(x)), str(np.dtype(x.dtype)))


def _impl_of_dtype(dtype: Any) -> str:
    return str(dtype._impl.name)


def flatten(tree: PyTree) -> tuple[list[str], list[Any], Any]:
    """(paths, leaves, treedef) with paths checked to be unique."""
    with_paths, treedef = jax.tree_util.tree_flatten_with_path(tree)
    paths = [path_str(kp) for kp, _ in with_paths]
    leaves = [leaf for _, leaf in with_paths]
    seen: set[str] = set()
    for p in paths:
        if p in seen or p == "":
            raise ValueError(
                f"Two leaves of the state share the path {p!r} (or a leaf has an empty path). "
                "Checkpointed leaves are named by their '/'-joined pytree path; wrap a bare array "
                "in a dict (e.g. {'x': x}) and avoid '/' inside dict keys."
            )
        seen.add(p)
    return paths, leaves, treedef


def nest(paths: list[str], values: list[Any]) -> dict[str, Any]:
    """{'a/b': v} -> {'a': {'b': v}}; errors if one path is a prefix of another."""
    root: dict[str, Any] = {}
    for path, value in zip(paths, values):
        parts = path.split("/")
        node = root
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(f"State path {path!r} clashes with another leaf at {part!r}; avoid '/' in dict keys.")
            node = child
        if parts[-1] in node:
            raise ValueError(f"State path {path!r} clashes with another leaf; avoid '/' in dict keys.")
        node[parts[-1]] = value
    return root


def unnest(tree: dict[str, Any], paths: list[str]) -> list[Any]:
    out = []
    for path in paths:
        node: Any = tree
        for part in path.split("/"):
            node = node[part]
        out.append(node)
    return out


def to_storable(x: Any, kind: str) -> Any:
    """What orbax writes for one leaf."""
    return jax.random.key_data(x) if kind == "key" else x


def key_data_shape(spec: LeafSpec) -> tuple[int, ...]:
    abstract = jax.ShapeDtypeStruct(spec.shape, jax.random.key(0, impl=spec.key_impl).dtype)
    return tuple(jax.eval_shape(jax.random.key_data, abstract).shape)


def from_stored(value: Any, spec: LeafSpec, target_leaf: Any) -> Any:
    """Turns a restored leaf back into the kind the target holds."""
    if spec.kind == "key":
        return jax.random.wrap_key_data(value, impl=spec.key_impl)
    if spec.kind == "scalar":
        return type(target_leaf)(np.asarray(value).item())
    if spec.kind == "host":
        value = np.asarray(value)
        return value[()] if isinstance(target_leaf, np.generic) else value
    return value
