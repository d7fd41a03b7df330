"""Collectives in a compiled XLA program, read from its optimized HLO text.

`collectives(compiled.as_text(), num_devices)` lists every all-reduce,
all-gather, reduce-scatter, all-to-all and collective-permute with its buffer
size, group size and how many times one execution of the program runs it
(loop bodies count once per known trip count). Bytes sent per device follow
the ring-algorithm convention of nccl-tests: all-reduce 2(g-1)/g x S,
all-gather / reduce-scatter / all-to-all (g-1)/g x S, collective-permute S.
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Iterable

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
_OPCODES = {k: k for k in KINDS} | {f"{k}-start": k for k in KINDS} | {"ragged-all-to-all": "all-to-all"}
DTYPE_BYTES = {
    "pred": 1, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "s32": 4, "u32": 4, "s64": 8, "u64": 8,
    "f16": 2, "bf16": 2, "f32": 4, "f64": 8, "c64": 8, "c128": 16,
    "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3": 1, "f8e5m2fnuz": 1, "f8e4m3fnuz": 1, "f8e4m3b11fnuz": 1,
}
_ARRAY = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,]*)\]")
_HEADER = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s*\(.*\{\s*$")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_CALLS = re.compile(r"\b(calls|body|to_apply|true_computation|false_computation)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_TRIP = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"(\d+)"')


@dataclasses.dataclass(frozen=True)
class Collective:
    """One collective instruction. `count` is executions per run of the program."""

    kind: str
    name: str
    shapes: tuple[tuple[str, tuple[int, ...]], ...]
    result_bytes: int
    group_size: int
    count: int
    exact: bool = True  # False when inside a loop whose trip count XLA does not know (count is a floor)

    @property
    def buffer_bytes(self) -> int:
        """S in the bandwidth formulas: the full (reduced / gathered / scattered) buffer."""
        return self.result_bytes * self.group_size if self.kind == "reduce-scatter" else self.result_bytes

    @property
    def sent_bytes_per_device(self) -> float:
        """Bytes each device sends per execution under the ring model."""
        g, s = self.group_size, self.buffer_bytes
        if g <= 1:
            return 0.0
        if self.kind == "all-reduce":
            return 2 * (g - 1) / g * s
        if self.kind == "collective-permute":
            return float(s)
        return (g - 1) / g * s


def _split_shape(rest: str) -> tuple[str, str]:
    """Splits 'SHAPE opcode(...)...' where SHAPE may be a parenthesised tuple."""
    rest = rest.strip()
    if rest.startswith("("):
        depth = 0
        for i, ch in enumerate(rest):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                return rest[: i + 1], rest[i + 1:].strip()
    head, _, tail = rest.partition(" ")
    return head, tail.strip()


def _arrays(shape: str) -> list[tuple[str, tuple[int, ...]]]:
    out = []
    for dtype, dims in _ARRAY.findall(re.sub(r"/\*.*?\*/", "", shape)):
        if dtype in DTYPE_BYTES:
            out.append((dtype, tuple(int(d) for d in dims.split(",") if d)))
    return out


def _nbytes(arrays: Iterable[tuple[str, tuple[int, ...]]]) -> int:
    return int(sum(math.prod(dims) * DTYPE_BYTES[dtype] for dtype, dims in arrays))


def group_size(line: str, num_devices: int) -> int:
    """The number of devices in one replica group of a collective instruction."""
    m = re.search(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}", line)
    if m:
        sizes = dict((k.strip("' "), int(v)) for k, v in re.findall(r"'?([\w.\-]+)'?\s*=\s*(\d+)", m.group(1)))
        axes = [a.strip("' ") for a in m.group(2).split(",") if a.strip("' ")]
        return math.prod(sizes[a] for a in axes) if axes else num_devices
    m = re.search(r"replica_groups=\[([\d,]+)\]<=", line)
    if m:
        return int(m.group(1).split(",")[-1])
    m = re.search(r"replica_groups=\{\{([^}]*)\}", line)
    if m:
        return len([x for x in m.group(1).split(",") if x.strip()])
    m = re.search(r"source_target_pairs=\{(.*?)\}\}", line)
    if m:
        return len(set(re.findall(r"\d+", m.group(1)))) or num_devices
    return num_devices


def collectives(hlo_text: str, num_devices: int) -> list[Collective]:
    """Every collective reachable from the entry computation, with executions per run."""
    comps: dict[str, list[str]] = {}
    entry = None
    current = None
    for line in hlo_text.splitlines():
        header = _HEADER.match(line)
        if header and not line.startswith((" ", "\t")):
            current = header.group(1)
            comps[current] = []
            if line.startswith("ENTRY"):
                entry = current
        elif line.strip() == "}":
            current = None
        elif current is not None:
            comps[current].append(line)
    if entry is None:
        return []
    found: list[Collective] = []
    _walk(comps, entry, 1, True, num_devices, found, set())
    return found


def _walk(comps, name, multiplicity, exact, num_devices, found, stack):
    if name not in comps or name in stack:
        return
    stack = stack | {name}
    for line in comps[name]:
        instr = _INSTR.match(line)
        if not instr:
            continue
        shape, rest = _split_shape(instr.group(2))
        opcode = rest.split("(", 1)[0].strip()
        if opcode in _OPCODES:
            kind = _OPCODES[opcode]
            arrays = _arrays(shape)
            if opcode == "all-gather-start" and len(arrays) > 1:
                arrays = arrays[len(arrays) // 2:]  # (operands, outputs): count the gathered outputs
            elif opcode == "collective-permute-start" and arrays:
                arrays = arrays[:1]  # (operand, output, contexts): count the buffer once
            found.append(Collective(kind, instr.group(1), tuple(arrays), _nbytes(arrays),
                                    group_size(line, num_devices), multiplicity, exact))
            continue
        if opcode == "while":
            trip = _TRIP.search(line)
            body = re.search(r"\bbody=%?([\w.\-]+)", line)
            if body:
                _walk(comps, body.group(1), multiplicity * (int(trip.group(1)) if trip else 1),
                      exact and trip is not None, num_devices, found, stack)
            continue
        for key, callee in _CALLS.findall(line):
            if key != "to_apply":  # reduction bodies hold no collectives
                _walk(comps, callee, multiplicity, exact, num_devices, found, stack)
        for group in _BRANCHES.findall(line):
            for callee in re.findall(r"%?([\w.\-]+)", group):
                _walk(comps, callee, multiplicity, exact, num_devices, found, stack)
