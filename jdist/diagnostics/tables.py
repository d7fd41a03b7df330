"""Plain-text tables and human-readable sizes for the reports jdist prints."""
from __future__ import annotations

from typing import Sequence


def format_bytes(n: float | None, digits: int = 1) -> str:
    """1536 -> '1.5 KiB' (`digits` decimals above bytes); None -> 'n/a'."""
    if n is None:
        return "n/a"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.{digits}f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def format_seconds(t: float | None) -> str:
    """Seconds as ms / us with three significant digits; None -> 'n/a'."""
    if t is None:
        return "n/a"
    if t >= 1:
        return f"{t:.3g} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3g} ms"
    return f"{t * 1e6:.3g} us"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A left-aligned first column and right-aligned others, separated by two spaces."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        parts = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule] + [line(r) for r in cells[1:]])
