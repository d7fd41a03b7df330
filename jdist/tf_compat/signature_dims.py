"""Sizes that a saved `input_signature` with `None` dimensions must have, read from JAX's shape error.

TF traces `tf.function(input_signature=[tf.TensorSpec([None, None])])` with unknown sizes and lets an unknown
size meet a known one (`x - mean` of a [None, None] argument and a [9] variable traces and saves; observed in
TF 2.21, the TF Core quickstart's export). `jax.export` keeps a free size symbolic and refuses to broadcast
`a1` against `9`, as it cannot prove them equal. The only size that works at run time is the one the known
dimension names, so `tf.saved_model.save` pins it: it solves `expression == size` for the one free size in the
expression (`a1 + 2 == 9` gives 7) and exports again. The saved program then takes those sizes only, which is
what TF's graph accepts at run time anyway (other sizes fail there with an incompatible-shapes error).
"""
from __future__ import annotations

import re
from typing import Any

_TENSOR_SHAPE = re.compile(r"TensorShape\(\[([^\]]*)\]\)")
_SEARCH = 1 << 16  # the largest size tried for a size that is not linear
_FREE = re.compile(r"^a(\d+)$")
_NAMES = {"floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b, "max": max, "min": min}


def _split(body: str) -> list[str]:
    """`body` split at its top-level commas."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    return [p.strip() for p in parts if p.strip()]


def _shapes(text: str) -> list[list[str]]:
    """The shapes in JAX's message: `TensorShape([9])`, and tuples `(a0, min(a1, 2) + a1)` (a parenthesis
    that follows a name is a call, part of a size, not a shape)."""
    found = [_split(m.group(1)) for m in _TENSOR_SHAPE.finditer(text)]
    text = _TENSOR_SHAPE.sub("", text)
    i = 0
    while i < len(text):
        if text[i] == "(" and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            depth = 0
            for j in range(i, len(text)):
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                if depth == 0:
                    found.append(_split(text[i + 1:j]))
                    i = j
                    break
        i += 1
    return found


def _value(expression: str, name: str, size: int) -> int | None:
    try:
        result = eval(expression, {"__builtins__": {}, **_NAMES}, {name: size})  # noqa: S307 (JAX's own text)
    except Exception:
        return None
    return result if isinstance(result, int) else None


def _solve(expression: str, size: int) -> tuple[int, int] | None:
    """(axis, n) with `expression` at a{axis}=n equal to `size`, for an expression of one free size."""
    names = set(re.findall(r"\b[a-z_]\w*\b", expression)) - set(_NAMES)
    if len(names) != 1:
        return None
    name = names.pop()
    match = _FREE.match(name)
    if match is None:
        return None
    at0, at1 = _value(expression, name, 0), _value(expression, name, 1)
    guesses = []
    if at0 is not None and at1 is not None and at1 != at0 and (size - at0) % (at1 - at0) == 0:
        guesses.append((size - at0) // (at1 - at0))  # a linear size (`a1 + 2`) at once
    for n in [*guesses, *range(min(size, _SEARCH) + 1)]:  # else the first that fits (`min(a1, 2) + a1`)
        if n >= 0 and _value(expression, name, n) == size:
            break
    else:
        return None
    return int(match.group(1)), n


def pinned_sizes(error: BaseException) -> dict[int, int]:
    """{axis: size} for the free sizes (named `a<axis>`) that JAX's shape `error` shows meeting a known size."""
    shapes = _shapes(str(error))
    pins: dict[int, int] = {}
    for i, first in enumerate(shapes):
        for second in shapes[i + 1:]:
            for a, b in zip(reversed(first), reversed(second)):
                for expression, known in ((a, b), (b, a)):
                    if known.isdigit() and int(known) != 1 and not expression.isdigit():
                        solved = _solve(expression, int(known))
                        if solved is not None and solved[0] not in pins:
                            pins[solved[0]] = solved[1]
    return pins


def pin(specs: list[dict[str, Any]], error: BaseException) -> list[dict[str, Any]] | None:
    """`specs` with the free sizes `error` determines made known (by axis position, as the export names
    them), or None when the error determines none."""
    pins = pinned_sizes(error)
    changed = False
    out = []
    for spec in specs:
        dims = spec.get("array")
        if dims is not None:
            new = [pins.get(axis, d) if d is None else d for axis, d in enumerate(dims)]
            changed = changed or new != list(dims)
            spec = dict(spec, array=new)
        out.append(spec)
    return out if changed else None
