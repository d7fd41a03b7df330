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
import sys
import types

from jdist.layout import data_axis as _data_axis
from jdist.layout.cache import ShardingCache, abstract_tree, describe, replicated_shardings, tree_signature
from jdist.layout.data_axis import (
    fsdp,
    shard_optimizer_state,
    split_over_data,
    split_shardings_over_data,
    weight_update_shardings,
)
from jdist.layout.rules import (
    Layout,
    LayoutLike,
    Placement,
    Rule,
    as_layout,
    is_placement,
    nearest_paths,
)
from jdist.layout.specs import (
    LayoutError,
    RuleValue,
    SpecLike,
    Tactic,
    check_spec,
    is_train_state,
    itemsize,
    path_str,
    shard_bytes,
    shard_shape,
    spec_axis_names,
)

__all__ = [
    "WEIGHT_UPDATE_MIN_BYTES",
    "Layout",
    "LayoutError",
    "LayoutLike",
    "Placement",
    "Rule",
    "RuleValue",
    "ShardingCache",
    "SpecLike",
    "Tactic",
    "abstract_tree",
    "as_layout",
    "check_spec",
    "describe",
    "fsdp",
    "is_placement",
    "is_train_state",
    "itemsize",
    "nearest_paths",
    "path_str",
    "replicated_shardings",
    "shard_bytes",
    "shard_optimizer_state",
    "shard_shape",
    "spec_axis_names",
    "split_over_data",
    "split_shardings_over_data",
    "tree_signature",
    "weight_update_shardings",
]

# For readers of the module's namespace (type checkers); the property below serves every read and write.
WEIGHT_UPDATE_MIN_BYTES: int = _data_axis.WEIGHT_UPDATE_MIN_BYTES


class _LayoutModule(types.ModuleType):
    """`jdist.layout.WEIGHT_UPDATE_MIN_BYTES` is the setting itself: reading or assigning it here reads or
    assigns the one in `jdist.layout.data_axis`, where the refinements and the sharding cache read it."""

    @property
    def WEIGHT_UPDATE_MIN_BYTES(self) -> int:  # noqa: N802  (a module constant's name)
        return _data_axis.WEIGHT_UPDATE_MIN_BYTES

    @WEIGHT_UPDATE_MIN_BYTES.setter
    def WEIGHT_UPDATE_MIN_BYTES(self, value: int) -> None:  # noqa: N802
        _data_axis.WEIGHT_UPDATE_MIN_BYTES = value


sys.modules[__name__].__class__ = _LayoutModule
