"""Leaf paths and PartitionSpec arithmetic: the one path rule (`path_str`), shard shapes and bytes,
and the checks that name a parameter whose spec cannot apply."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

if TYPE_CHECKING:
    from jax.typing import DTypeLike

Tactic = Callable[[tuple, Any, Mesh], P]
SpecLike = P | tuple | list | None
RuleValue = SpecLike | Tactic


class LayoutError(ValueError):
    """A partition rule that cannot apply to a parameter, or an ambiguous layout."""


# --------------------------------------------------------------------- paths
def path_str(keypath: Sequence[Any]) -> str:
    """The '/'-joined form of a `tree_flatten_with_path` key path (see module docs)."""
    parts = []
    for key in keypath:
        if isinstance(key, jax.tree_util.DictKey):
            parts.append(str(key.key))
        elif isinstance(key, jax.tree_util.GetAttrKey):
            parts.append(key.name)
        elif isinstance(key, jax.tree_util.SequenceKey):
            parts.append(str(key.idx))
        elif isinstance(key, jax.tree_util.FlattenedIndexKey):
            parts.append(str(key.key))
        else:
            parts.append(str(key).strip(".[]'\""))
    if parts and parts[-1] == "value" and isinstance(keypath[-1], jax.tree_util.GetAttrKey):
        parts.pop()
    return "/".join(parts)


def _shape_dtype(leaf: Any) -> tuple[tuple, Any]:
    shape = getattr(leaf, "shape", None)
    if shape is None:
        shape = np.shape(leaf)
    dtype = getattr(leaf, "dtype", None)
    if dtype is None:
        dtype = np.asarray(leaf).dtype
    return tuple(int(d) for d in shape), dtype


def itemsize(dtype: DTypeLike) -> int:
    try:
        return int(np.dtype(dtype).itemsize)
    except TypeError:  # e.g. typed PRNG keys
        return int(getattr(dtype, "itemsize", 0) or 0)


# ------------------------------------------------------------------- specs
def _as_spec(value: SpecLike, where: str) -> P:
    if isinstance(value, P):
        return value
    if value is None:
        return P()
    if isinstance(value, (tuple, list)):
        return P(*value)
    if hasattr(value, "axes"):  # a Keras TensorLayout
        return P(*value.axes)
    if isinstance(value, str):
        raise LayoutError(
            f"{where}: got the bare string {value!r}; a spec lists one entry per dimension, e.g. "
            f"P({value!r}) to split dimension 0 or P(None, {value!r}) to split dimension 1."
        )
    raise LayoutError(f"{where}: expected a PartitionSpec, tuple, None or a tactic function, got {value!r}.")


def _spec_axes(entry: Any) -> tuple[str, ...]:
    if entry is None:
        return ()
    if isinstance(entry, str):
        return (entry,)
    if isinstance(entry, (tuple, list)):
        return tuple(entry)
    raise LayoutError(f"unsupported PartitionSpec entry {entry!r}; use None, an axis name or a tuple of names.")


def spec_axis_names(spec: P) -> tuple[str, ...]:
    """Every mesh axis a spec uses, in order."""
    return tuple(a for entry in spec for a in _spec_axes(entry))


def shard_shape(shape: tuple, spec: P, mesh: Mesh) -> tuple:
    """The shape of one device's piece of an array of `shape` laid out as `spec`."""
    out = list(shape)
    for dim, entry in enumerate(spec):
        out[dim] //= math.prod(mesh.shape[a] for a in _spec_axes(entry))
    return tuple(out)


def shard_bytes(shape: tuple, dtype: DTypeLike, spec: P, mesh: Mesh) -> int:
    """Bytes one device holds for an array of `shape`/`dtype` laid out as `spec`."""
    return math.prod(shard_shape(shape, spec, mesh)) * itemsize(dtype)


def check_spec(spec: P, shape: tuple, mesh: Mesh, path: str, rule: str) -> None:
    """Raises `LayoutError` unless `spec` can lay out an array of `shape` on `mesh`."""
    where = f"parameter {path!r} with shape {shape}, rule {rule}"
    if len(spec) > len(shape):
        raise LayoutError(
            f"{where}: the spec {spec} has {len(spec)} entries but the array has rank {len(shape)}. "
            "A spec gives at most one entry per dimension; fix the rule or narrow its regex."
        )
    seen: set[str] = set()
    for dim, entry in enumerate(spec):
        axes = _spec_axes(entry)
        for axis in axes:
            if axis not in mesh.shape:
                raise LayoutError(
                    f"{where}: the spec names mesh axis {axis!r}, but the mesh has axes "
                    f"{dict(mesh.shape)}. Add the axis to mesh_shape or fix the rule."
                )
            if axis in seen:
                raise LayoutError(f"{where}: mesh axis {axis!r} appears twice in the spec {spec}.")
            seen.add(axis)
        size = math.prod(mesh.shape[a] for a in axes)
        if shape[dim] % size:
            names = " x ".join(f"{a}={mesh.shape[a]}" for a in axes)
            raise LayoutError(
                f"{where}: dimension {dim} of size {shape[dim]} is not divisible by mesh axis {names} "
                f"(split {size} ways). Replicate that dimension (None), choose a mesh axis size that "
                f"divides {shape[dim]}, or pad the parameter."
            )


def is_train_state(tree: object) -> bool:
    return hasattr(tree, "params") and hasattr(tree, "opt_state") and hasattr(tree, "replace")
