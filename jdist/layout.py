"""Partition rules: which mesh axes split each parameter, chosen by its path.

A layout is an ordered list of `(regex, value)` rules (a dict or a Keras
`LayoutMap`-like mapping works too). The value is a `PartitionSpec` (a tuple,
`None` or a Keras `TensorLayout` is converted: `(None, "model")` is
`P(None, "model")`, `None` is `P()`), or a *tactic*: a function `(shape, dtype, mesh) -> PartitionSpec` that
picks the spec from the array's shape, such as `fsdp()`.

Paths. A leaf's path is its key path in the pytree joined by "/": dict keys,
attribute names (dataclass fields, NamedTuple fields) and sequence indices, as
`jax.tree_util.tree_flatten_with_path` reports them. A trailing `value`
attribute (the box of a flax nnx `Variable` or a linen `Partitioned`) is
dropped. Flax linen parameters look like `params/block_0/attn/query/kernel`.
`path_str` is the one rule: layout errors, checkpoints, memory reports, the
parameter-server layout and the advisor all name a leaf by it, so a name jdist
prints is one a rule can match.

Matching. A rule matches a leaf when its regex `re.fullmatch`es the path or a
trailing part of it made of whole components: `dense/kernel` matches
`params/dense/kernel`, and the same rule matches the Adam moment
`0/mu/params/dense/kernel`. So optimizer state follows its parameter with no
extra rules. Two rules matching one leaf is an error, as in Keras. Scalars are
always replicated (optimizer step counts, loss scales).

Checks. A spec naming an axis the mesh lacks, longer than the array's rank, or
splitting a dimension its axes do not divide is a `LayoutError` naming the
parameter, its shape and the rule. Unlike Keras, a rule that matches no
parameter is an error too (a renamed layer otherwise silently falls back to
replication; the error lists the nearest parameter paths), also when no rule
matches anything in a train state's parameters or flax variables, and parameters
no rule matches are replicated with one warning that counts them; `default=P()`
replicates them silently, and `default` may be a tactic, e.g.
`Layout(MEGATRON_RULES, default=fsdp())`.

Train states. For a `TrainState` (anything with `params` and `opt_state`),
parameters are resolved by the rules, and every other array follows the
parameter whose path is the longest trailing part of its own path and whose
shape equals its own (Adam's `mu`/`nu`, EMA copies, gradient accumulators).
Optimizer state of another shape (Adafactor's factored moments) is replicated.

Refinements. `split_over_data` adds the data axis to a leaf's spec, for what only
one replica's share of the optimizer update touches: weight-update sharding
computes the update in that layout, and ZeRO-1 (`shard_optimizer_state=True`)
stores the optimizer state in it between steps (`shard_optimizer_state`,
`weight_update_shardings`).

Caching and restore. A strategy resolves a tree's shardings once per structure,
shapes and dtypes (`ShardingCache`); `abstract_tree` gives the shape-only tree
(with shardings) a restore asks for.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import re
import warnings
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence, Union

import jax
import numpy as np
from jax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec as P

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy

Tactic = Callable[[tuple, Any, Mesh], P]
SpecLike = P | tuple | list | None
RuleValue = SpecLike | Tactic
LayoutLike = Union["Layout", Sequence[tuple[str, RuleValue]], Mapping[str, RuleValue]]

__all__ = [
    "WEIGHT_UPDATE_MIN_BYTES",
    "Layout",
    "LayoutError",
    "Placement",
    "ShardingCache",
    "abstract_tree",
    "as_layout",
    "fsdp",
    "path_str",
    "replicated_shardings",
    "shard_bytes",
    "shard_optimizer_state",
    "split_over_data",
    "split_shardings_over_data",
    "tree_signature",
    "weight_update_shardings",
]


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


def itemsize(dtype: Any) -> int:
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


def shard_bytes(shape: tuple, dtype: Any, spec: P, mesh: Mesh) -> int:
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


# ------------------------------------------------------------------ tactics
def fsdp(axis: str = "data", min_size_bytes: int = 1 << 20) -> Tactic:
    """A tactic for fully sharded data parallelism (ZeRO-3): split the largest
    dimension that the `axis` size divides; replicate arrays smaller than
    `min_size_bytes` (their all-gathers cost more than they save) or with no
    divisible dimension, and rank-1 arrays (biases, norms).

    Ties go to the later dimension, so `(d, d)` kernels split their output.
    """
    return _FsdpTactic(axis, min_size_bytes)


class _FsdpTactic:
    """`fsdp(axis, min_size_bytes)`: a `Tactic` that also names the mesh axes it uses (`mesh_axes`)."""

    def __init__(self, axis: str, min_size_bytes: int):
        self.axis, self.min_size_bytes = axis, min_size_bytes
        self.mesh_axes = (axis,)
        self.__name__ = self.__qualname__ = f"fsdp({axis!r}, min_size_bytes={min_size_bytes})"

    def __call__(self, shape: tuple, dtype: Any, mesh: Mesh) -> P:
        axis = self.axis
        if axis not in mesh.shape:
            raise LayoutError(f"fsdp(axis={axis!r}): the mesh has axes {dict(mesh.shape)}.")
        size = mesh.shape[axis]
        if len(shape) < 2 or size == 1 or math.prod(shape) * itemsize(dtype) < self.min_size_bytes:
            return P()
        candidates = [d for d in range(len(shape)) if shape[d] % size == 0]
        if not candidates:
            return P()
        dim = max(candidates, key=lambda d: (shape[d], d))
        # Full length, so a dim-0 split reads P("data", None), not a batch's P("data").
        return P(*(axis if d == dim else None for d in range(len(shape))))

    def __repr__(self) -> str:
        return self.__name__


# ------------------------------------------------- refinements over the data axis
# Below this size a leaf's update is cheaper to repeat on every replica than to split
# and all-gather again (measured: it made a small Transformer's step 15-35% slower on
# 8 simulated CPU devices, while the MLP's 3-4 MiB kernels gained 3x).
WEIGHT_UPDATE_MIN_BYTES = 1 << 20


def split_over_data(spec: P, shape: tuple, dtype: Any, mesh: Mesh | AbstractMesh, axis: str = "data",
                    min_bytes: int | None = None) -> P:
    """`spec` refined so each replica holds 1/N of the array: the data `axis` added on the first
    unsplit dimension its size N divides. A tactic on top of a leaf's layout, for the arrays only
    one replica's share of the optimizer update touches: where weight-update sharding computes
    that share, and where ZeRO-1 stores the optimizer state between steps (the same slice, so a
    step all-gathers only the new parameters). Arrays below `min_bytes` (default
    `WEIGHT_UPDATE_MIN_BYTES`), already split over `axis`, or with no such dimension keep `spec`."""
    n = int(mesh.shape[axis])
    min_bytes = WEIGHT_UPDATE_MIN_BYTES if min_bytes is None else min_bytes
    if n == 1 or not shape or math.prod(shape) * itemsize(dtype) < min_bytes or axis in spec_axis_names(spec):
        return spec
    entries = list(spec) + [None] * (len(shape) - len(spec))
    for dim, (extent, entry) in enumerate(zip(shape, entries)):
        if entry is None and extent % n == 0:
            entries[dim] = axis
            return P(*entries)
    return spec


def split_shardings_over_data(tree: Any, shardings: Any, axis: str = "data", min_bytes: int | None = None) -> Any:
    """`shardings` (of `tree`'s leaves) with each `NamedSharding` refined by `split_over_data`."""

    def refine(leaf: Any, sharding: Any) -> Any:
        if not isinstance(sharding, NamedSharding):
            return sharding
        shape, dtype = _shape_dtype(leaf)
        spec = split_over_data(sharding.spec, shape, dtype, sharding.mesh, axis, min_bytes)
        return sharding if spec is sharding.spec else NamedSharding(sharding.mesh, spec,
                                                                    memory_kind=sharding.memory_kind)

    return jax.tree.map(refine, tree, shardings)


def weight_update_shardings(strategy: Strategy, tree: Any, min_bytes: int | None = None) -> Any:
    """Where each leaf's share of the optimizer update runs under `strategy`: its stored layout
    refined by `split_over_data` (leaves below `min_bytes`, default `WEIGHT_UPDATE_MIN_BYTES`,
    keep their layout)."""
    return split_shardings_over_data(tree, strategy.parameter_shardings(tree), strategy.data_axis, min_bytes)


def shard_optimizer_state(tree: Any, shardings: Any, axis: str = "data") -> Any:
    """`shardings` (of `tree`) with the optimizer state of every train state in `tree` (the tree
    itself, or one inside a checkpoint's dict) split over the data axis: ZeRO-1's stored layout."""
    nodes, treedef = jax.tree_util.tree_flatten(tree, is_leaf=is_train_state)
    parts = treedef.flatten_up_to(shardings)
    return treedef.unflatten([
        s.replace(opt_state=split_shardings_over_data(n.opt_state, s.opt_state, axis)) if is_train_state(n) else s
        for n, s in zip(nodes, parts)])


# ------------------------------------------------------------------- caching
def tree_signature(tree: Any) -> Any:
    """What a tree's placement depends on: its structure and each leaf's shape and dtype
    (None when that cannot be a dictionary key, e.g. a pytree node with unhashable static data)."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    key = (treedef, tuple(_shape_dtype(leaf) for leaf in leaves))
    try:
        hash(key)
    except TypeError:
        return None
    return key


class ShardingCache:
    """A strategy's placement answers, computed once per tree signature (structure, shapes,
    dtypes) and kind ("stored", "update"), so a train state's layout is resolved once however
    often it is asked for (placing, creating, compiling, restoring)."""

    def __init__(self) -> None:
        self._answers: dict[Any, tuple[Any, list]] = {}

    def get(self, kind: str, tree: Any, compute: Callable[[Any], Any]) -> Any:
        """`compute(tree)`, or the answer given for a tree with the same signature (fresh containers)."""
        signature = tree_signature(tree)
        if signature is None:
            return compute(tree)
        key = (kind, WEIGHT_UPDATE_MIN_BYTES, signature)  # the threshold is a module setting tests change
        if key not in self._answers:
            leaves, treedef = jax.tree_util.tree_flatten(compute(tree))
            self._answers[key] = (treedef, leaves)
        treedef, leaves = self._answers[key]
        return treedef.unflatten(leaves)


def replicated_shardings(mesh: Mesh, tree: Any) -> Any:
    """Every leaf of `tree` whole on every device of `mesh`."""
    replicated = NamedSharding(mesh, P())
    return jax.tree.map(lambda _: replicated, tree)


def abstract_tree(tree: Any, shardings: Any = None) -> Any:
    """`tree` as `jax.ShapeDtypeStruct`s, each with its sharding from `shardings` (a tree of
    shardings shaped like `tree`) when given: what a restore asks for before any array exists."""
    def leaf(x: Any, sharding: Any = None) -> jax.ShapeDtypeStruct:
        shape, dtype = _shape_dtype(x)
        return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)

    if shardings is None:
        return jax.tree.map(leaf, tree)
    return jax.tree.map(leaf, tree, shardings)


def describe(value: RuleValue) -> str:
    """A rule value for messages: the spec, or the tactic's name."""
    if callable(value) and not isinstance(value, P):
        return getattr(value, "__name__", repr(value))
    return str(value)


# -------------------------------------------------------------------- rules
@dataclasses.dataclass(frozen=True)
class Rule:
    pattern: str
    value: Any  # a PartitionSpec or a tactic
    regex: re.Pattern

    def __str__(self) -> str:
        return f"({self.pattern!r}, {describe(self.value)})"

    def spec_for(self, shape: tuple, dtype: Any, mesh: Mesh) -> P:
        if isinstance(self.value, P):
            return self.value
        return _as_spec(self.value(shape, dtype, mesh), f"tactic of rule {self}")


def _make_rule(pattern: Any, value: Any) -> Rule:
    if not isinstance(pattern, str):
        raise LayoutError(f"A rule's pattern must be a regex string, got {pattern!r} (rule value {value!r}).")
    try:
        regex = re.compile(rf"(?:.*/)?(?:{pattern})")
    except re.error as err:
        raise LayoutError(f"Rule pattern {pattern!r} is not a valid regular expression: {err}.") from None
    if not (callable(value) and not isinstance(value, P)):
        value = _as_spec(value, f"rule {pattern!r}")
    return Rule(pattern, value, regex)


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where one array of a pytree lives: its spec and why it got it."""

    path: str
    shape: tuple
    dtype: Any
    spec: P
    source: str  # "rule (...)", "default ...", "unmatched", "scalar", "follows <param path>", "replicated"

    def bytes_per_device(self, mesh: Mesh) -> int:
        return shard_bytes(self.shape, self.dtype, self.spec, mesh)


def is_train_state(tree: Any) -> bool:
    return hasattr(tree, "params") and hasattr(tree, "opt_state") and hasattr(tree, "replace")


# ------------------------------------------------------------------- layout
class Layout:
    """Ordered partition rules plus what unmatched parameters get.

        layout = jdist.Layout([(r".*/mlp/wi/kernel", P(None, "model")),
                               (r".*/mlp/wo/kernel", P("model", None))])
        shardings = layout.shardings(params, mesh)

    `default=None` replicates unmatched parameters and warns once with their
    count; `default=P()` replicates them silently; a tactic applies to them.
    """

    def __init__(self, rules: Iterable[tuple[str, RuleValue]] | Mapping[str, RuleValue] = (), *,
                 default: RuleValue | None = None):
        items = rules.items() if isinstance(rules, Mapping) else rules
        parsed = []
        for item in items:
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise LayoutError(f"Each rule must be a (regex, spec) pair, got {item!r}.")
            parsed.append(_make_rule(*item))
        patterns = [r.pattern for r in parsed]
        duplicates = sorted({p for p in patterns if patterns.count(p) > 1})
        if duplicates:
            raise LayoutError(f"Duplicate rule patterns {duplicates}; give each pattern once.")
        self.rules: tuple[Rule, ...] = tuple(parsed)
        self._warn_unmatched = default is None
        self.default: Any = P() if default is None else (
            default if callable(default) and not isinstance(default, P) else _as_spec(default, "default"))
        self._warned = False

    def __repr__(self) -> str:
        rules = ", ".join(str(r) for r in self.rules)
        return f"Layout([{rules}], default={describe(self.default)})"

    @property
    def warns_unmatched(self) -> bool:
        """True when unmatched parameters are replicated with a warning (no `default` given)."""
        return self._warn_unmatched

    def mesh_axes(self) -> set[str]:
        """Axes the static specs (and tactics that declare theirs) may use."""
        axes: set[str] = set()
        for value in [r.value for r in self.rules] + [self.default]:
            if isinstance(value, P):
                axes.update(spec_axis_names(value))
            else:
                axes.update(getattr(value, "mesh_axes", ()))
        return axes

    def check_mesh(self, mesh: Mesh) -> None:
        """Fails early, before any parameter exists, on rules naming axes the mesh lacks."""
        named = [(str(r), r.value) for r in self.rules] + [(f"default={describe(self.default)}", self.default)]
        for where, value in named:
            axes = spec_axis_names(value) if isinstance(value, P) else getattr(value, "mesh_axes", ())
            missing = [a for a in axes if a not in mesh.shape]
            if missing:
                raise LayoutError(
                    f"Rule {where} names mesh axis {missing[0]!r}, but the mesh has axes "
                    f"{dict(mesh.shape)}. Add the axis to mesh_shape or fix the rule."
                )

    # ---------------------------------------------------------------- resolve
    def resolve(self, tree: Any, mesh: Mesh) -> Any:
        """A pytree of `Placement`s shaped like `tree` (see the module docs for the rules)."""
        if is_train_state(tree):
            return self._resolve_train_state(tree, mesh)
        return self._resolve_params(tree, mesh)

    def specs(self, tree: Any, mesh: Mesh) -> Any:
        """The `PartitionSpec` of every leaf."""
        return jax.tree.map(lambda p: p.spec, self.resolve(tree, mesh), is_leaf=is_placement)

    def shardings(self, tree: Any, mesh: Mesh) -> Any:
        """The `NamedSharding` of every leaf."""
        cache: dict[P, NamedSharding] = {}

        def sharding(p: Placement) -> NamedSharding:
            if p.spec not in cache:
                cache[p.spec] = NamedSharding(mesh, p.spec)
            return cache[p.spec]

        return jax.tree.map(sharding, self.resolve(tree, mesh), is_leaf=is_placement)

    def _resolve_params(self, tree: Any, mesh: Mesh, *, parameters: bool = False) -> Any:
        """`parameters`: `tree` is known to hold model parameters (a train state's), so a rule
        matching none of them is an error even when no rule matches anything."""
        parameters = parameters or _is_variables(tree)
        leaves, treedef = jax.tree_util.tree_flatten_with_path(tree)
        placements = []
        used: set[int] = set()
        unmatched: list[str] = []
        for keypath, leaf in leaves:
            path = path_str(keypath)
            shape, dtype = _shape_dtype(leaf)
            if not shape:
                placements.append(Placement(path, shape, dtype, P(), "scalar"))
                continue
            matches = [i for i, rule in enumerate(self.rules) if rule.regex.fullmatch(path)]
            if len(matches) > 1:
                listed = ", ".join(str(self.rules[i]) for i in matches)
                raise LayoutError(
                    f"Parameter {path!r} with shape {shape} matches {len(matches)} rules: {listed}. "
                    "Each parameter may match only one rule; make the regexes disjoint."
                )
            if matches:
                rule = self.rules[matches[0]]
                used.add(matches[0])
                spec = rule.spec_for(shape, dtype, mesh)
                check_spec(spec, shape, mesh, path, str(rule))
                source = f"rule {rule}"
            else:
                spec = self._default_spec(shape, dtype, mesh)
                check_spec(spec, shape, mesh, path, f"default={describe(self.default)}")
                if self._warn_unmatched:
                    unmatched.append(path)
                    source = "unmatched"
                else:
                    source = f"default {describe(self.default)}"
            placements.append(Placement(path, shape, dtype, spec, source))
        self._check_rules_used(used, placements, parameters)
        if unmatched and used and not self._warned:
            self._warned = True
            shown = ", ".join(unmatched[:5]) + (", ..." if len(unmatched) > 5 else "")
            warnings.warn(
                f"{len(unmatched)} parameters match no layout rule and are replicated: {shown}. "
                "strategy.summary(params) lists them; pass default=P() to the Layout to replicate "
                "them without this warning.",
                stacklevel=4,
            )
        return jax.tree.unflatten(treedef, placements)

    def _default_spec(self, shape: tuple, dtype: Any, mesh: Mesh) -> P:
        if isinstance(self.default, P):
            return self.default
        return _as_spec(self.default(shape, dtype, mesh), f"default tactic {describe(self.default)}")

    def _check_rules_used(self, used: set[int], placements: list[Placement], parameters: bool) -> None:
        """Every rule must match some parameter, once the tree is evidently a parameter
        tree for this layout (some rule matched, or it is a train state's parameters or flax
        variables). Any other tree no rule matches (an RNG key, a batch) is replicated with
        a warning instead."""
        arrays = [p for p in placements if p.shape]
        if not arrays or not self.rules:
            return
        if not used and not parameters:
            warnings.warn(
                f"No layout rule matches any of the {len(arrays)} arrays of this tree (paths like "
                f"{arrays[0].path!r}); all are laid out by default={describe(self.default)}. If these "
                "are model parameters, the rules' regexes do not match their paths.",
                stacklevel=4,
            )
            return
        unused = [self.rules[i] for i in range(len(self.rules)) if i not in used]
        if unused:
            listed = ", ".join(str(r) for r in unused)
            paths = [p.path for p in arrays]
            nearest = "; ".join(f"nearest to {r.pattern!r}: {', '.join(map(repr, nearest_paths(r.pattern, paths)))}"
                                for r in unused)
            raise LayoutError(
                f"{len(unused)} layout rule(s) match no parameter: {listed}. The parameter paths {nearest}. "
                "Fix the regex (it must fullmatch the path or a trailing part of it) or drop the rule."
            )

    def _resolve_train_state(self, state: Any, mesh: Mesh) -> Any:
        params = self._resolve_params(state.params, mesh, parameters=True)
        return self.follow(state.replace(params=None), params).replace(params=params)

    def follow(self, tree: Any, params: Any) -> Any:
        """Placements for non-parameter arrays (optimizer state): each follows the
        parameter (from the resolved `params` placements) whose path is the longest
        trailing part of its own path and whose shape equals its own; others replicate."""
        by_path = {p.path: p for p in jax.tree.leaves(params, is_leaf=is_placement)}
        leaves, treedef = jax.tree_util.tree_flatten_with_path(tree)
        return jax.tree.unflatten(treedef, [self._follow(path_str(kp), leaf, by_path) for kp, leaf in leaves])

    @staticmethod
    def _follow(path: str, leaf: Any, params: Mapping[str, Placement]) -> Placement:
        shape, dtype = _shape_dtype(leaf)
        if not shape:
            return Placement(path, shape, dtype, P(), "scalar")
        parts = path.split("/")
        for start in range(len(parts)):
            param = params.get("/".join(parts[start:]))
            if param is not None and param.shape == shape:
                return Placement(path, shape, dtype, param.spec, f"follows {param.path}")
        return Placement(path, shape, dtype, P(), "replicated")


def _is_variables(tree: Any) -> bool:
    """Flax linen variables (`model.init`'s output): a mapping with a "params" collection."""
    return isinstance(tree, Mapping) and "params" in tree


def nearest_paths(pattern: str, paths: Sequence[str], n: int = 3) -> list[str]:
    """The `n` paths most like `pattern` (difflib), compared over as many trailing
    components as the pattern has."""
    k = pattern.count("/") + 1

    def likeness(path: str) -> float:
        tail = "/".join(path.split("/")[-k:])
        return max(difflib.SequenceMatcher(None, pattern, tail).ratio(),
                   difflib.SequenceMatcher(None, pattern, path).ratio())

    return sorted(dict.fromkeys(paths), key=likeness, reverse=True)[:n]


def is_placement(x: Any) -> bool:
    return isinstance(x, Placement)


def as_layout(layout: LayoutLike | None) -> Layout | None:
    """A `Layout` from a `Layout`, a list of `(regex, spec)` pairs or a mapping."""
    if layout is None or isinstance(layout, Layout):
        return layout
    is_mapping = isinstance(layout, Mapping) or hasattr(layout, "items")
    if isinstance(layout, (str, bytes)) or not (is_mapping or isinstance(layout, Sequence)):
        raise LayoutError(
            f"layout must be a jdist.Layout, a list of (regex, PartitionSpec) pairs or a mapping, got {layout!r}."
        )
    return Layout(layout)
