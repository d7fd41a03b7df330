"""Pipeline parallelism: a model's repeated blocks split over a `stage` mesh axis.

A model whose blocks are one stack of identical layers keeps them as *stacked*
parameters (every leaf under the stack's name has a leading layer dimension, e.g.
`params/blocks/attn/query/kernel` of shape `(num_layers, d_model, heads, head_dim)`)
and applies them with `apply_blocks(block_fn, stacked, x)`:

    strategy = jdist.Strategy(mesh_shape={"data": 2, "stage": 4},
                              pipeline=jdist.Pipeline(num_microbatches=8))

Under such a strategy the stack's leading dimension is split over `stage` (the
layout's own rule for a block parameter still splits its other dimensions, so
Megatron rules over `model` apply inside each stage), and `apply_blocks` runs as
one `jax.shard_map` over `stage`: the batch is cut into micro-batches that move
from stage to stage with `ppermute`, one tick at a time, inside one compiled
program. Differentiating it gives the backward pass as the same loop in reverse
(GPipe: all forwards, then all backwards); each stage's forward is recomputed in
the backward pass (`jax.checkpoint`), so a stage keeps only its inputs per
micro-batch. The micro-batch loop is the gradient accumulation: the loss is the
mean over the whole batch, exactly as without a pipeline.

Schedules (`jdist.pipeline.schedules`): "gpipe" gives stage `s` the layers
`[s*L/S, (s+1)*L/S)`; "circular" cuts the stack into `S*V` chunks and gives stage
`s` the chunks `s, s+S, ...`, so each micro-batch goes round the ring `V` times
and the idle fraction drops from `(S-1)/(M+S-1)` to `(S-1)/(V*M+S-1)`.

Embedding, head and loss run outside the pipeline, where the layout puts them.
Outside a pipeline strategy (or while a model is being initialised) `apply_blocks`
is a plain `lax.scan` over the layers.
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import TYPE_CHECKING, Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from jdist.layout import Layout, LayoutError, Placement, is_placement, path_str
from jdist.strategy import context
from jdist.typing import PyTree

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy

__all__ = ["Pipeline", "PipelineLayout", "apply_blocks", "stage_axis_of"]

SCHEDULES = ("gpipe", "circular")


@dataclasses.dataclass(frozen=True)
class Pipeline:
    """How a strategy pipelines a model's stacked blocks over its `stage` axis.

    `num_microbatches` (M) micro-batches per replica batch move through the stages;
    `schedule` is "gpipe" or "circular" (`chunks_per_stage` layer chunks per stage,
    visited round the ring; default 2). `blocks` names the parameter subtree that
    holds the stacked layers (a path component, regex allowed); `stage_axis` the
    mesh axis. `remat=False` keeps every stage's activations instead of recomputing.
    """

    num_microbatches: int
    schedule: str = "gpipe"
    chunks_per_stage: int | None = None
    blocks: str = "blocks"
    stage_axis: str = "stage"
    remat: bool = True
    _regex: re.Pattern[str] = dataclasses.field(init=False, repr=False, compare=False)  # from `blocks`

    def __post_init__(self):
        m = self.num_microbatches
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise ValueError(f"num_microbatches must be a positive integer, got {m!r}.")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"Unknown pipeline schedule {self.schedule!r}; choose one of {SCHEDULES}.")
        v = self.chunks_per_stage
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ValueError(f"chunks_per_stage must be a positive integer, got {v!r}.")
        if self.schedule == "gpipe" and v not in (None, 1):
            raise ValueError(f"The gpipe schedule has one chunk per stage (chunks_per_stage={v}); "
                             "use schedule='circular' for several.")
        object.__setattr__(self, "_regex", re.compile(rf"(?:.*/)?(?:{self.blocks})(?:/.*)?"))

    @property
    def chunks(self) -> int:
        """V: layer chunks per stage (1 for GPipe)."""
        if self.schedule == "gpipe":
            return 1
        return 2 if self.chunks_per_stage is None else self.chunks_per_stage

    def is_stacked(self, path: str) -> bool:
        """Whether the parameter at `path` belongs to the stacked blocks."""
        return bool(self._regex.fullmatch(path))

    def ticks(self, stages: int) -> int:
        """Loop iterations of one forward pass: `V*M + S - 1`."""
        return self.chunks * self.num_microbatches + stages - 1

    def bubble(self, stages: int) -> float:
        """The idle fraction of the schedule: `(S-1) / (V*M + S-1)`."""
        return (stages - 1) / self.ticks(stages)

    def check_mesh(self, mesh: Mesh) -> None:
        axis = self.stage_axis
        if axis not in mesh.shape:
            raise ValueError(f"A pipeline needs a {axis!r} mesh axis; mesh_shape has {dict(mesh.shape)}. "
                             f"Add e.g. {{{axis!r}: 4}} to mesh_shape.")
        s = int(mesh.shape[axis])
        if self.schedule == "circular" and self.num_microbatches < s:
            raise ValueError(f"The circular schedule needs at least as many micro-batches as stages "
                             f"(num_microbatches={self.num_microbatches}, {axis}={s}); use num_microbatches>={s}.")

    def check_layers(self, num_layers: int, stages: int, where: str = "") -> None:
        """The error for a stack that does not split evenly into the stages' chunks."""
        parts = stages * self.chunks
        if num_layers % parts:
            fix = f"a layer count that is a multiple of {parts}"
            chunk = "" if self.chunks == 1 else f" x {self.chunks} chunks per stage"
            raise ValueError(
                f"{where}{num_layers} layers do not split over {stages} pipeline stages{chunk} "
                f"({num_layers} % {parts} = {num_layers % parts}). Use {fix}, or a stage count "
                f"that divides {num_layers}.")

    def stage_layers(self, num_layers: int, stages: int) -> list[list[int]]:
        """The layer indices each stage holds, in the order it applies them."""
        self.check_layers(num_layers, stages)
        v = self.chunks
        c = num_layers // (stages * v)
        return [[(j * stages + s) * c + i for j in range(v) for i in range(c)] for s in range(stages)]

    def layout(self, base: Layout | None) -> "PipelineLayout":
        return PipelineLayout(self, base)

    def summary(self, layout: Layout, mesh: Mesh, tree: PyTree = None) -> str:
        """The lines `strategy.summary()` adds: the schedule, each stage's layers and bytes per device."""
        return stage_summary(self, layout, mesh, tree)


# ------------------------------------------------------------------- layout
class PipelineLayout(Layout):
    """The user's layout, with the stacked blocks' leading (layer) dimension split over `stage`.

    A stacked leaf is resolved by the base rules as one layer (its shape without the
    leading dimension), so rules written for an unstacked block apply unchanged.
    """

    def __init__(self, pipeline: Pipeline, base: Layout | None):
        base = base if base is not None else Layout(default=P())
        super().__init__([(r.pattern, r.value) for r in base.rules],
                         default=None if base.warns_unmatched else base.default)
        self.base = base
        self.pipeline = pipeline

    def __repr__(self) -> str:
        return f"PipelineLayout({self.pipeline.blocks!r} over {self.pipeline.stage_axis!r}, {self.base!r})"

    def mesh_axes(self) -> set[str]:
        return super().mesh_axes() | {self.pipeline.stage_axis}

    def _resolve_params(self, tree: Any, mesh: Mesh, *, parameters: bool = False) -> Any:
        pipe, axis = self.pipeline, self.pipeline.stage_axis
        leaves, treedef = jax.tree_util.tree_flatten_with_path(tree)
        stacked = [pipe.is_stacked(path_str(kp)) and bool(np.shape(leaf)) for kp, leaf in leaves]
        if not any(stacked):
            if not leaves or not parameters and not _looks_like_params(tree):
                return super()._resolve_params(tree, mesh, parameters=parameters)
            paths = [path_str(kp) for kp, _ in leaves[:4]]
            raise LayoutError(
                f"The pipeline splits stacked blocks named {pipe.blocks!r} over {axis!r}, but no parameter is "
                f"under that name (paths like {paths}). Build the model with its repeated layers stacked "
                "(e.g. models.transformer.StackedTransformerLM, whose blocks are 'blocks') and apply them with "
                "jdist.pipeline.apply_blocks, or pass Pipeline(blocks=<name of the stacked subtree>).")
        layers = {np.shape(leaf)[0] for (kp, leaf), s in zip(leaves, stacked) if s}
        if len(layers) > 1:
            raise LayoutError(f"The stacked blocks {pipe.blocks!r} disagree on the layer count (leading "
                              f"dimensions {sorted(layers)}); every stacked leaf needs the same one.")
        pipe.check_layers(layers.pop(), int(mesh.shape[axis]), "The model's stacked blocks: ")
        one_layer = [jax.ShapeDtypeStruct(np.shape(leaf)[1:], _dtype(leaf)) if s else leaf
                     for (_, leaf), s in zip(leaves, stacked)]
        inner = super()._resolve_params(jax.tree.unflatten(treedef, one_layer), mesh, parameters=parameters)
        placements = []
        for p, (_, leaf), s in zip(jax.tree.leaves(inner, is_leaf=is_placement), leaves, stacked):
            if s:
                if axis in {a for e in p.spec for a in ((e,) if isinstance(e, str) else (e or ()))}:
                    raise LayoutError(f"Rule for {p.path!r} ({p.source}) uses the pipeline axis {axis!r}; "
                                      "the pipeline places the stacked blocks on it, leave it out of the rule.")
                spec = P(axis, *p.spec)
                p = Placement(p.path, tuple(np.shape(leaf)), p.dtype, spec, f"{p.source}; layers over {axis!r}")
            placements.append(p)
        return jax.tree.unflatten(treedef, placements)


def _dtype(leaf: Any) -> Any:
    return getattr(leaf, "dtype", None) or np.asarray(leaf).dtype


def _looks_like_params(tree: Any) -> bool:
    return isinstance(tree, dict) and "params" in tree


def stage_axis_of(strategy: Strategy) -> tuple[Pipeline, str, int] | None:
    """`(pipeline, axis, stages)` of a pipeline strategy, else None."""
    pipe = getattr(strategy, "pipeline", None)
    if pipe is None:
        return None
    return pipe, pipe.stage_axis, int(strategy.mesh.shape[pipe.stage_axis])


# ------------------------------------------------------------------ running
def sequential(block_fn: Callable[[PyTree, PyTree], PyTree], stacked: PyTree, x: PyTree) -> PyTree:
    """The blocks one after another: `x = block_fn(params[i], x)` for every layer i."""
    return jax.lax.scan(lambda h, p: (block_fn(p, h), None), x, stacked)[0]


def apply_blocks(block_fn: Callable[[PyTree, PyTree], PyTree], stacked: PyTree, x: PyTree) -> PyTree:
    """Applies `block_fn(layer_params, x) -> x` for each layer of the stacked `stacked`, in order.

    Under a strategy with a `Pipeline` (traced inside its steps, or in its scope) the
    layers run pipelined over the `stage` axis (see the module docs); otherwise
    as a `lax.scan`. `x` has the batch on dimension 0 and keeps its shape.
    """
    strategy = context.get_strategy() if context.has_strategy() else None
    found = None if strategy is None else stage_axis_of(strategy)
    if strategy is None or found is None:
        return sequential(block_fn, stacked, x)
    pipe, axis, stages = found
    if context.in_replica_context():
        raise NotImplementedError(
            "A pipeline runs in global-view steps (jdist.make_train_step, make_eval_step, Trainer), not inside "
            "strategy.run: there each replica already holds its own slice of the stages. Call the model from a "
            "global-view step, or use a strategy without a pipeline for strategy.run.")
    return _pipelined(block_fn, stacked, x, pipe, strategy.mesh, strategy.data_axis, axis, stages)


def _microbatches(x: Any, m: int, mesh: Mesh, data_axis: str) -> Any:
    """`(M, B/M, ...)`: micro-batch j takes the j-th chunk of every replica's rows (no data movement)."""
    n = int(mesh.shape[data_axis])
    b = x.shape[0]
    if b % n or (b // n) % m:
        per = b // n if b % n == 0 else b / n
        raise ValueError(
            f"The pipeline's {m} micro-batches do not divide the per-replica batch of {per} examples "
            f"(global batch {b} over {n} replicas). Use a global batch that is a multiple of "
            f"replicas x num_microbatches = {n * m}, or a num_microbatches that divides {per}.")
    per = b // (n * m)
    y = x.reshape((n, m, per) + x.shape[1:]).swapaxes(0, 1).reshape((m, n * per) + x.shape[1:])
    return jax.lax.with_sharding_constraint(y, NamedSharding(mesh, P(None, data_axis)))


def _unmicrobatch(y: Any, n: int) -> Any:
    m, rows = y.shape[:2]
    per = rows // n
    return y.reshape((m, n, per) + y.shape[2:]).swapaxes(0, 1).reshape((m * rows,) + y.shape[2:])


def _by_stage(stacked: Any, stages: int, chunks: int, mesh: Mesh, axis: str) -> Any:
    """Stacked `(L, ...)` leaves as `(S, V, c, ...)`: `[s, v]` is stage s's v-th chunk, layers
    `(v*S + s)*c ...`. For GPipe (V=1) this is a reshape of the stored split (no data movement);
    the circular schedule regroups the layers (one all-to-all of the blocks per step)."""

    def regroup(leaf):
        layers = leaf.shape[0]
        c = layers // (stages * chunks)
        y = leaf.reshape((chunks, stages, c) + leaf.shape[1:]).swapaxes(0, 1)
        if chunks > 1:
            y = jax.lax.with_sharding_constraint(y, NamedSharding(mesh, P(axis)))
        return y

    return jax.tree.map(regroup, stacked)


def _pipelined(block_fn, stacked, x, pipe: Pipeline, mesh: Mesh, data_axis: str, axis: str, stages: int,
               ticks: int | None = None):
    """The pipelined stack; `ticks` (default `V*M + S - 1`) may be cut to `V*M` by benchmarks,
    which time the loop without its fill and drain (the results are then incomplete)."""
    layers = {leaf.shape[0] for leaf in jax.tree.leaves(stacked)}
    if len(layers) != 1:
        raise ValueError(f"apply_blocks: the stacked parameters disagree on the layer count {sorted(layers)}.")
    pipe.check_layers(layers.pop(), stages, "apply_blocks: ")
    m, v = pipe.num_microbatches, pipe.chunks
    xs = _microbatches(x, m, mesh, data_axis)
    by_stage = _by_stage(stacked, stages, v, mesh, axis)
    ticks = pipe.ticks(stages) if ticks is None else ticks

    def chunk_fn(p, h):
        return sequential(block_fn, p, h)

    if pipe.remat:
        chunk_fn = jax.checkpoint(chunk_fn)

    def body(local, xs):
        local = jax.tree.map(lambda a: a[0], local)  # (V, c, ...) of this stage
        s = jax.lax.axis_index(axis)
        vary = lambda a: jax.lax.pcast(a, axis, to="varying")  # noqa: E731
        zero = vary(jnp.zeros_like(xs[0]))
        buf = vary(jnp.zeros_like(xs)) if v > 1 else None  # stage 0's inputs for the next round
        outs = vary(jnp.zeros_like(xs))
        ring = [(i, (i + 1) % stages) for i in range(stages)] if v > 1 else [(i, i + 1) for i in range(stages - 1)]

        def tick(carry, t):
            incoming, buf, outs = carry
            if v > 1:  # stage 0 keeps what stage S-1 sent last tick until its next round starts
                back = t - stages
                keep = (s == 0) & (back >= 0) & (back < m * (v - 1))
                slot = jnp.clip(back, 0, None) % m
                old = jax.lax.dynamic_index_in_dim(buf, slot, 0, keepdims=False)
                buf = jax.lax.dynamic_update_index_in_dim(buf, jnp.where(keep, incoming, old), slot, 0)
            k = t - s  # this stage's work item: round k // M of micro-batch k % M
            valid = (k >= 0) & (k < m * v)
            kc = jnp.clip(k, 0, m * v - 1)
            rnd, mb = kc // m, kc % m
            first = jax.lax.dynamic_index_in_dim(xs, mb, 0, keepdims=False)
            if v > 1:
                again = jax.lax.dynamic_index_in_dim(buf, mb, 0, keepdims=False)
                first = jnp.where(rnd == 0, first, again)
            h = jnp.where(s == 0, first, incoming)
            h = jnp.where(valid, h, zero)
            p = jax.tree.map(lambda a: jax.lax.dynamic_index_in_dim(a, rnd, 0, keepdims=False), local)
            out = chunk_fn(p, h)
            done = valid & (s == stages - 1) & (rnd == v - 1)
            old = jax.lax.dynamic_index_in_dim(outs, mb, 0, keepdims=False)
            outs = jax.lax.dynamic_update_index_in_dim(outs, jnp.where(done, out, old), mb, 0)
            incoming = jax.lax.ppermute(out, axis, ring)
            return (incoming, buf, outs), None

        (_, _, outs), _ = jax.lax.scan(tick, (zero, buf, outs), jnp.arange(ticks))
        # Only the last stage holds the results: summing over stages hands them to every stage.
        return jax.lax.psum(jnp.where(s == stages - 1, outs, jnp.zeros_like(outs)), axis)

    run = jax.shard_map(body, mesh=mesh, in_specs=(P(axis), P()), out_specs=P(), axis_names={axis})
    ys = run(by_stage, xs)
    return _unmicrobatch(ys, int(mesh.shape[data_axis]))


# ------------------------------------------------------------------ summary
def stage_summary(pipe: Pipeline, layout: Layout, mesh: Mesh, tree: PyTree) -> str:
    """The lines `strategy.summary()` adds for a pipeline: the schedule and, per stage, its
    layers and the bytes of stacked parameters (and their optimizer state) each of its devices holds."""
    axis = pipe.stage_axis
    stages = int(mesh.shape[axis])
    head = (f"Pipeline: {pipe.schedule} schedule over {axis!r} ({stages} stages, {pipe.chunks} chunk(s) per stage), "
            f"{pipe.num_microbatches} micro-batches per replica batch; bubble (S-1)/(V*M+S-1) = "
            f"{pipe.bubble(stages):.1%}")
    if tree is None:
        return head
    from jdist.diagnostics.summary import format_bytes

    placements = jax.tree.leaves(layout.resolve(tree, mesh), is_leaf=is_placement)
    stacked = [p for p in placements if p.shape and pipe.is_stacked(p.path) and p.spec[:1] == (axis,)]
    params = [p for p in stacked if not p.path.startswith("opt_state")]
    state = [p for p in stacked if p.path.startswith("opt_state")]
    if not params:
        return head
    mine = sum(p.bytes_per_device(mesh) for p in params)
    whole = sum(math.prod(p.shape) * np.dtype(p.dtype).itemsize for p in params)
    extra = f", their optimizer state {format_bytes(sum(p.bytes_per_device(mesh) for p in state))}" if state else ""
    lines = [head]
    for s, held in enumerate(pipe.stage_layers(params[0].shape[0], stages)):
        lines.append(f"  stage {s}: layers {_ranges(held)}; block parameters {format_bytes(mine)} per device{extra}")
    lines.append(f"Block parameters: {format_bytes(whole)} in all, {format_bytes(mine)} per device "
                 f"({mine / whole:.1%}; the stages split them 1/{stages})")
    return "\n".join(lines)


def _ranges(indices: list[int]) -> str:
    parts, start = [], indices[0]
    for prev, cur in zip(indices, indices[1:] + [None]):
        if cur != prev + 1:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = cur
    return ", ".join(parts)
