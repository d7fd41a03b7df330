"""Profiling: `jax.profiler` traces of chosen steps, and a per-step compute / communication breakdown.

    with jdist.profile("/tmp/prof", steps=5) as prof:          # TensorBoard / Perfetto trace
        for batch in batches:
            with prof.step():
                state, sums = step(state, batch)

    print(jdist.step_breakdown(step, state, batch))              # is the all-reduce the bottleneck?

The breakdown reads the compiled program itself: XLA's cost analysis (FLOPs,
bytes accessed), its memory analysis, and every collective in its optimized
HLO with the bytes it moves. Step time is measured. Collective time is an
estimate, labelled as such: the same collectives, with the same buffer sizes
and group sizes, are compiled alone and timed on the same devices.
"""
from __future__ import annotations

import contextlib
import dataclasses
import glob
import os
import statistics
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P

from jdist.diagnostics import hlo
from jdist.diagnostics.tables import format_bytes, format_seconds, format_table
from jdist.strategy import context
from jdist.typing import PyTree

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy
    from jdist.strategy.devices import Device

_TRACE_PATTERNS = ("*.xplane.pb", "*.trace.json.gz", "perfetto_trace.json.gz")


# --------------------------------------------------------------------- traces
class Profile:
    """The handle `profile()` yields: wrap each step in `with prof.step():`."""

    def __init__(self, logdir: str | os.PathLike, steps: int | None, perfetto: bool):
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
            raise ValueError(f"steps must be a positive integer or None, got {steps!r}.")
        self.logdir = os.fspath(logdir)
        self.steps = steps
        self._perfetto = perfetto
        self._before: set[str] = set()
        self._count = 0
        self.active = False
        self.trace_files: list[str] = []

    def start(self) -> None:
        os.makedirs(self.logdir, exist_ok=True)
        self._before = set(_trace_files(self.logdir))
        jax.profiler.start_trace(self.logdir, create_perfetto_trace=self._perfetto)
        self.active = True

    def stop(self) -> None:
        """Waits for queued device work, ends the trace and records the files written."""
        if not self.active:
            return
        _wait_for_devices()
        jax.profiler.stop_trace()
        self.active = False
        self.trace_files = sorted(set(_trace_files(self.logdir)) - self._before)

    @contextlib.contextmanager
    def step(self) -> Iterator[int]:
        """Marks one step in the trace (TensorBoard's step view); stops after `steps` steps."""
        number = self._count
        if not self.active:
            yield number
            return
        with jax.profiler.StepTraceAnnotation("train", step_num=number):
            yield number
        self._count += 1
        if self.steps is not None and self._count >= self.steps:
            self.stop()


@contextlib.contextmanager
def profile(logdir: str | os.PathLike, steps: int | None = None, *, perfetto: bool = False) -> Iterator[Profile]:
    """Captures a `jax.profiler` trace into `logdir` (open with TensorBoard's profile plugin or Perfetto).

    With `steps`, tracing stops after that many `prof.step()` blocks; the rest
    of the `with` body runs untraced. `perfetto=True` also writes
    `perfetto_trace.json.gz`. After the block, `prof.trace_files` lists the
    files written.
    """
    prof = Profile(logdir, steps, perfetto)
    prof.start()
    try:
        yield prof
    finally:
        prof.stop()


def _trace_files(logdir: str) -> list[str]:
    found = []
    for pattern in _TRACE_PATTERNS:
        found += glob.glob(os.path.join(logdir, "**", pattern), recursive=True)
    return found


def _wait_for_devices() -> None:
    for array in jax.live_arrays():
        try:
            array.block_until_ready()
        except Exception:  # deleted while we looked
            pass


# ------------------------------------------------------------------ breakdown
@dataclasses.dataclass(frozen=True)
class StepBreakdown:
    """Where one step's time goes. Fields ending in `_estimate` are estimates, not measurements."""

    strategy: str
    num_devices: int
    platform: str
    step_times: tuple[float, ...]
    flops: float | None
    bytes_accessed: float | None
    memory: dict
    collectives: tuple[hlo.Collective, ...]
    collective_time_estimate: float | None
    has_loops: bool = False

    @property
    def step_time(self) -> float:
        """Median measured wall time of one step (seconds)."""
        return statistics.median(self.step_times)

    @property
    def compute_time_estimate(self) -> float | None:
        """Step time minus the standalone collective time (assumes no overlap)."""
        if self.collective_time_estimate is None:
            return None
        return max(self.step_time - self.collective_time_estimate, 0.0)

    @property
    def collective_bytes(self) -> int:
        """Buffer bytes of all collectives per step (per device)."""
        return sum(c.buffer_bytes * c.count for c in self.collectives)

    @property
    def sent_bytes_per_device(self) -> float:
        """Bytes each device sends per step under the ring model."""
        return sum(c.sent_bytes_per_device * c.count for c in self.collectives)

    def __str__(self) -> str:
        step = self.step_time
        coll = self.collective_time_estimate
        rows = [("step time (measured)", format_seconds(step), f"median of {len(self.step_times)} runs")]
        if not self.collectives:
            rows.append(("collectives", "none", "the compiled step communicates nothing"))
        else:
            rows += [
                ("collectives (estimate)", format_seconds(coll),
                 "the same collectives compiled alone, timed on these devices"),
                ("compute and other (estimate)", format_seconds(self.compute_time_estimate),
                 "step time minus collectives (assumes no overlap)"),
            ]
            if coll is not None and step > 0:
                rows.append(("collective share (estimate)", f"{min(coll / step, 1.0):.0%}", ""))
        loops = " (loop bodies counted once)" if self.has_loops else ""
        rows += [
            ("FLOPs per device (XLA)", _format_count(self.flops), "XLA cost analysis" + loops),
            ("bytes accessed (XLA)", format_bytes(self.bytes_accessed), "XLA cost analysis" + loops),
        ]
        if self.memory:
            rows.append(("peak memory per device (XLA)", format_bytes(self.memory.get("peak")),
                         "arguments + outputs + temporaries - aliased"))
        plural = "s" if self.num_devices != 1 else ""
        head = f"Step breakdown: {self.strategy}, {self.num_devices} device{plural} ({self.platform})"
        summary = format_table(("", "value", "how"), rows)
        by_kind: dict[str, list] = {}
        for c in self.collectives:
            by_kind.setdefault(c.kind, []).append(c)
        table_rows = [
            (kind, sum(c.count for c in cs), max(c.group_size for c in cs),
             format_bytes(sum(c.buffer_bytes * c.count for c in cs)),
             format_bytes(sum(c.sent_bytes_per_device * c.count for c in cs)))
            for kind, cs in by_kind.items()
        ]
        table_rows.append(("total", sum(c.count for c in self.collectives), "",
                           format_bytes(self.collective_bytes), format_bytes(self.sent_bytes_per_device)))
        colls = format_table(("collective", "ops/step", "group", "buffer/step", "sent/device/step (ring)"),
                             table_rows)
        note = ""
        if any(not c.exact for c in self.collectives):
            note = "\n(some collectives sit in loops of unknown trip count: counts are lower bounds)"
        return f"{head}\n{summary}\n\n{colls}{note}"


def _format_count(n: float | None) -> str:
    if n is None:
        return "n/a"
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}FLOP"
    return f"{n:.0f} FLOP"


def step_breakdown(step: Callable[..., PyTree], *args: PyTree, strategy: Strategy | None = None, iterations: int = 10,
                   warmup: int = 2, time_collectives: bool = True) -> StepBreakdown:
    """Compiles `step(*args)`, reads its cost, memory and collectives, and times it.

    `step` is a `make_train_step` step or any `jax.jit` function; `args` are
    left untouched (each timed run gets a fresh copy, so donated steps work).
    """
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}.")
    if not hasattr(step, "lower"):
        raise TypeError("step_breakdown needs a jax.jit function or a jdist step (something with .lower()).")
    if strategy is None:
        strategy = getattr(step, "strategy", None)
    if strategy is None:
        strategy = context.get_strategy()
    devices = list(strategy.worker_devices)
    compiled = step.lower(*args).compile()
    cost = _cost(compiled)
    text = compiled.as_text()
    colls = tuple(hlo.collectives(text, len(devices)))
    times = []
    for i in range(warmup + iterations):
        fresh = _copy(args)
        jax.block_until_ready(fresh)
        start = time.perf_counter()
        jax.block_until_ready(compiled(*fresh))
        if i >= warmup:
            times.append(time.perf_counter() - start)
    coll_time = 0.0 if not colls else None
    if colls and time_collectives:
        coll_time = time_standalone_collectives(colls, devices, iterations=iterations, warmup=warmup)
    return StepBreakdown(
        strategy=repr(strategy), num_devices=len(devices), platform=devices[0].platform,
        step_times=tuple(times), flops=cost.get("flops"), bytes_accessed=cost.get("bytes accessed"),
        memory=_memory(compiled), collectives=colls, collective_time_estimate=coll_time,
        has_loops=" while(" in text,
    )


def _cost(compiled: Any) -> dict:
    try:
        cost = compiled.cost_analysis()
    except Exception:  # not every backend implements it
        return {}
    if isinstance(cost, (list, tuple)):  # older JAX: one dict per program
        cost = cost[0] if cost else {}
    return dict(cost or {})


def _memory(compiled: Any) -> dict:
    try:
        m = compiled.memory_analysis()
    except Exception:
        return {}
    if m is None:
        return {}
    out = {name: getattr(m, f"{name}_size_in_bytes", 0) for name in ("argument", "output", "temp", "alias")}
    out["peak"] = out["argument"] + out["output"] + out["temp"] - out["alias"]
    return out


def _copy(tree: Any) -> Any:
    def copy(x):
        if isinstance(x, jax.Array):
            return jax.device_put(x, x.sharding, may_alias=False)
        return x

    return jax.tree.map(copy, tree)


_JNP_DTYPES = {"f32": jnp.float32, "f16": jnp.float16, "bf16": jnp.bfloat16,
               "s32": jnp.int32, "u32": jnp.uint32, "s8": jnp.int8, "u8": jnp.uint8}


def time_standalone_collectives(colls: Sequence[hlo.Collective], devices: Sequence[Device], *,
                                iterations: int = 10, warmup: int = 2) -> float | None:
    """Seconds per step of `colls` run alone: one program per (group size, count), on `devices`.

    Each program runs every collective of its group concurrently in all
    groups of that size (devices reshaped to (N / g, g)). Returns None when a
    group size does not divide the device count.
    """
    total = 0.0
    keys = sorted({(c.group_size, c.count) for c in colls})
    for g, count in keys:
        members = [c for c in colls if (c.group_size, c.count) == (g, count)]
        if g <= 1:
            continue
        if len(devices) % g:
            return None
        program, inputs = _collective_program(members, devices, g)
        for _ in range(warmup):
            jax.block_until_ready(program(*inputs))
        samples = []
        for _ in range(iterations):
            start = time.perf_counter()
            jax.block_until_ready(program(*inputs))
            samples.append(time.perf_counter() - start)
        total += statistics.median(samples) * count
    return total


def _collective_program(colls: Sequence[hlo.Collective], devices: Sequence[Device], g: int):
    n = len(devices)
    mesh = Mesh(np.array(devices, dtype=object).reshape(n // g, g), ("rest", "group"),
                axis_types=(AxisType.Auto, AxisType.Auto))
    spec = P(("rest", "group"))
    kinds, inputs = [], []
    for c in colls:
        for dtype_name, dims in c.shapes:
            if dtype_name in _JNP_DTYPES:
                dtype, numel = _JNP_DTYPES[dtype_name], int(np.prod(dims))
            else:  # same bytes as raw uint8 (e.g. f64 without x64, pred, f8)
                dtype, numel = jnp.uint8, int(np.ceil(np.prod(dims) * hlo.DTYPE_BYTES[dtype_name]))
            numel = max(numel, 1)
            if c.kind == "all-gather":
                numel = -(-numel // g)
            elif c.kind == "reduce-scatter":
                numel *= g
            elif c.kind == "all-to-all":
                numel = -(-numel // g) * g
            kinds.append(c.kind)
            inputs.append(jax.device_put(jnp.zeros((n, numel), dtype), NamedSharding(mesh, spec)))

    def body(*xs):
        outs = []
        for kind, x in zip(kinds, xs):
            if kind == "all-reduce":
                outs.append(jax.lax.psum(x, "group"))
            elif kind == "all-gather":
                outs.append(jax.lax.all_gather(x, "group", axis=1, tiled=True))
            elif kind == "reduce-scatter":
                outs.append(jax.lax.psum_scatter(x, "group", scatter_dimension=1, tiled=True))
            elif kind == "all-to-all":
                outs.append(jax.lax.all_to_all(x, "group", 1, 1, tiled=True))
            else:
                outs.append(jax.lax.ppermute(x, "group", perm=[(i, (i + 1) % g) for i in range(g)]))
        return tuple(outs)

    program = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(spec,) * len(inputs),
                                    out_specs=(spec,) * len(inputs), check_vma=False))
    return program, inputs
