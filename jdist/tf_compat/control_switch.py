"""`tf.switch_case` (a branch chosen by an integer) and `tf.vectorized_map` (a function over a batch), on JAX.

As `control_flow`'s `tf.case`: a known index runs one branch in Python, a traced one is `lax.switch`.
Observed in TF 2.21: an index outside [0, n) runs `default`, or the last branch without one (also a negative
index, also inside a `tf.function`); a dict's keys (or the pairs' ints) must be 0..n-1; a float index is a
TypeError. `vectorized_map` is `jax.vmap`; on host values, a function vmap cannot batch (Python control flow on
values) runs element by element when `fallback_to_while_loop` is set, as TF's falls back to a while loop.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jdist.tf_compat.control_flow import _branches_differ, _check_callable, _is_traced, _leading_size


def _ordered_branches(branch_fns: Any) -> list[Callable[[], Any]]:
    """The branches in index order, from callables, (int, callable) pairs or an {int: callable} dict."""
    if isinstance(branch_fns, Mapping):
        pairs = list(branch_fns.items())
    else:
        entries = list(branch_fns)
        if entries and all(callable(f) for f in entries):
            return entries
        pairs = []
        for entry in entries:
            if not isinstance(entry, (tuple, list)) or len(entry) != 2:
                raise TypeError(f"Each entry in 'branch_fns' must be a 2-tuple. Received {entry!r}.")
            pairs.append(tuple(entry))
    if not pairs:
        raise ValueError("Must provide at least one item in 'branch_fns'")
    for key, fn in pairs:
        if not isinstance(key, (int, np.integer)) or isinstance(key, bool):
            raise TypeError(f"key must be a Python `int`, got {type(key)}")
        _check_callable(fn, "branch_fns")
    keys = sorted(int(k) for k, _ in pairs)
    if keys != list(range(len(pairs))):
        raise ValueError(f"branch indices (keys) must form contiguous range of [0 to {len(pairs)}) but found "
                         f"{{{','.join(str(k) for k in keys)}}}")
    return [fn for _, fn in sorted(pairs, key=lambda pair: int(pair[0]))]


def switch_case(branch_index: Any, branch_fns: Sequence[Any] | Mapping[int, Callable[[], Any]],
                default: Callable[[], Any] | None = None, name: str = "switch_case") -> Any:
    """`branch_fns[branch_index]()`; `default()` (else the last branch) for an index outside [0, n)."""
    branches = _ordered_branches(branch_fns)
    if not branches:
        raise ValueError("Must provide at least one item in 'branch_fns'")
    if default is not None:
        _check_callable(default, "default")
    dtype = np.dtype(getattr(branch_index, "dtype", None) or np.asarray(branch_index).dtype)
    if dtype.kind not in "iu":
        raise TypeError(f"'branch_index' must be an integer Tensor, got {dtype.name}")
    if np.ndim(branch_index) != 0:
        raise ValueError(f"tf.switch_case: 'branch_index' must be a scalar, got shape {list(np.shape(branch_index))}")
    fallback = default if default is not None else branches[-1]
    if not _is_traced(branch_index):
        index = int(np.asarray(branch_index))
        return (branches[index] if 0 <= index < len(branches) else fallback)()
    everything = [*branches, fallback]
    index = jnp.asarray(branch_index, jnp.int32)
    index = jnp.where((index < 0) | (index >= len(branches)), len(branches), index)
    try:
        return jax.lax.switch(index, [lambda f=f: f() for f in everything])
    except TypeError as error:
        raise _branches_differ(error, "tf.switch_case") from error


def vectorized_map(fn: Callable[[Any], Any], elems: Any, fallback_to_while_loop: bool = True,
                   warn: bool = True) -> Any:
    """`fn` over the first dimension of `elems` (a tensor or a nest of them), batched with `jax.vmap`."""
    _check_callable(fn, "fn")
    size = _leading_size(elems, "tf.vectorized_map")
    try:
        return jax.vmap(fn)(jax.tree.map(jnp.asarray, elems))
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
            jax.errors.TracerIntegerConversionError) as error:
        if not fallback_to_while_loop or _is_traced(elems):
            raise ValueError(f"tf.vectorized_map: fn cannot be batched (JAX: {error}); write it with array ops "
                             "(tf.where instead of Python's if), or call it on host values with "
                             "fallback_to_while_loop=True to run it element by element") from error
    rows = [fn(jax.tree.map(lambda e, i=i: np.asarray(e)[i], elems)) for i in range(size)]
    return jax.tree.map(lambda *leaves: np.stack([np.asarray(v) for v in leaves]), *rows)
