"""`strategy.summary()`: where every parameter lives and what each device holds.

Works on real arrays or on abstract ones (`jax.eval_shape(model.init, ...)`),
so a layout can be checked before any memory is allocated.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import jax
from jax.sharding import Mesh, PartitionSpec as P

from jdist.diagnostics import tables
from jdist.layout import Layout, Placement, describe, is_placement, is_train_state, itemsize, spec_axis_names
from jdist.strategy import extensions


def format_bytes(n: int) -> str:
    """Sizes in the parameter table, with two decimals ('1.00 MiB')."""
    return tables.format_bytes(n, digits=2)


def _table(rows: list[list[str]], header: list[str]) -> list[str]:
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return [line(header), line(["-" * w for w in widths])] + [line(r) for r in rows]


def mesh_line(mesh: Mesh, data_axis: str) -> str:
    axes = " x ".join(f"{name}={size}" for name, size in mesh.shape.items())
    kinds = sorted({d.platform for d in mesh.devices.flat})
    return f"Mesh: {axes} ({mesh.devices.size} {'/'.join(kinds)} devices; data axis {data_axis!r})"


def layout_summary(layout: Layout, mesh: Mesh, data_axis: str, tree: Any = None, opt_state: Any = None,
                   opt_state_spec: Callable[[Placement], P] | None = None) -> str:
    """The report behind `Strategy.summary` (see there); `opt_state_spec` gives an optimizer-state
    leaf's stored spec where it differs from its parameter's (ZeRO-1)."""
    unmatched_gets = "replicated, with a warning" if layout.warns_unmatched else describe(layout.default)
    lines = [mesh_line(mesh, data_axis),
             f"Layout: {len(layout.rules)} rule(s); parameters no rule matches: {unmatched_gets}"]
    if tree is None:
        return "\n".join(lines + [f"  {rule}" for rule in layout.rules])
    if is_train_state(tree):
        tree, opt_state = tree.params, tree.opt_state
    params = layout.resolve(tree, mesh)
    param_list: list[Placement] = jax.tree.leaves(params, is_leaf=is_placement)
    state_list: list[Placement] = []
    if opt_state is not None:
        state_list = jax.tree.leaves(layout.follow(opt_state, params), is_leaf=is_placement)
        if opt_state_spec is not None:
            state_list = [dataclasses.replace(s, spec=opt_state_spec(s)) for s in state_list]

    per_param_state: dict[str, int] = {}
    other_state = 0
    for s in state_list:
        if s.source.startswith("follows "):
            key = s.source[len("follows "):]
            per_param_state[key] = per_param_state.get(key, 0) + s.bytes_per_device(mesh)
        else:
            other_state += s.bytes_per_device(mesh)

    header = ["parameter", "shape", "dtype", "spec", "param/device"]
    if opt_state is not None:
        header.append("opt state/device")
    header.append("placed by")
    rows = []
    for p in param_list:
        row = [p.path or "<root>", str(p.shape), str(p.dtype), _spec_str(p), format_bytes(p.bytes_per_device(mesh))]
        if opt_state is not None:
            row.append(format_bytes(per_param_state.get(p.path, 0)))
        row.append(p.source)
        rows.append(row)
    lines += [""] + _table(rows, header) + [""]

    param_bytes = sum(p.bytes_per_device(mesh) for p in param_list)
    full = sum(_full_bytes(p) for p in param_list)
    lines.append(f"Parameters: {len(param_list)} arrays, {sum(_size(p) for p in param_list):,} values, "
                 f"{format_bytes(param_bytes)} per device ({format_bytes(full)} unsharded)")
    total = param_bytes
    if opt_state is not None:
        state_bytes = sum(per_param_state.values()) + other_state
        state_full = sum(_full_bytes(s) for s in state_list)
        lines.append(f"Optimizer state: {len(state_list)} arrays, {format_bytes(state_bytes)} per device "
                     f"({format_bytes(state_full)} unsharded; {format_bytes(other_state)} not tied to a parameter)")
        total += state_bytes
        full += state_full
    lines.append(f"Total per device: {format_bytes(total)} = {total:,} bytes "
                 f"({total / full:.1%} of the unsharded {format_bytes(full)})" if full else
                 f"Total per device: {format_bytes(total)}")
    unmatched = [p.path for p in param_list if p.source == "unmatched"]
    if unmatched:
        lines.append(f"Unmatched (replicated): {len(unmatched)}: {', '.join(unmatched)}")
    return "\n".join(lines)



def _spec_str(p: Placement) -> str:
    if not spec_axis_names(p.spec):
        return "replicated"
    return "P(" + ", ".join(repr(e) if e is not None else "None" for e in p.spec) + ")"


def _size(p: Placement) -> int:
    return math.prod(p.shape)


def _full_bytes(p: Placement) -> int:
    return _size(p) * itemsize(p.dtype)


extensions.register_method("layout_summary", layout_summary)
