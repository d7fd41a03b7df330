"""Partition rules and the `Layout` that resolves a tree's specs from them (see `jdist.layout`)."""
from __future__ import annotations

import dataclasses
import difflib
import re
import warnings
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence, Union

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from jdist.layout.cache import describe
from jdist.layout.specs import (
    LayoutError,
    RuleValue,
    _as_spec,
    _shape_dtype,
    check_spec,
    is_train_state,
    path_str,
    shard_bytes,
    spec_axis_names,
)

if TYPE_CHECKING:
    from jax.typing import DTypeLike

    from jdist.typing import PyTree

LayoutLike = Union["Layout", Sequence[tuple[str, RuleValue]], Mapping[str, RuleValue]]


# -------------------------------------------------------------------- rules
@dataclasses.dataclass(frozen=True)
class Rule:
    pattern: str
    value: Any  # a PartitionSpec or a tactic
    regex: re.Pattern

    def __str__(self) -> str:
        return f"({self.pattern!r}, {describe(self.value)})"

    def spec_for(self, shape: tuple, dtype: DTypeLike, mesh: Mesh) -> P:
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
    def resolve(self, tree: PyTree, mesh: Mesh) -> PyTree:
        """A pytree of `Placement`s shaped like `tree` (see the module docs for the rules)."""
        if is_train_state(tree):
            return self._resolve_train_state(tree, mesh)
        return self._resolve_params(tree, mesh)

    def specs(self, tree: PyTree, mesh: Mesh) -> PyTree:
        """The `PartitionSpec` of every leaf."""
        return jax.tree.map(lambda p: p.spec, self.resolve(tree, mesh), is_leaf=is_placement)

    def shardings(self, tree: PyTree, mesh: Mesh) -> PyTree:
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

    def follow(self, tree: PyTree, params: PyTree) -> PyTree:
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


def is_placement(x: object) -> bool:
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
