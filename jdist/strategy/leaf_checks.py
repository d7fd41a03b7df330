"""The rules every jdist entry point that takes a batch applies to its arrays (the `Trainer`,
`make_train_step` / `make_eval_step` steps, `strategy.distribute_batch`, `strategy.run`,
distributed datasets), with one set of messages: a None, a non-numeric dtype, a missing batch
dimension, an empty batch, and a model that cannot take the batch's shapes. Only metadata is read.
"""
from __future__ import annotations

import re
from typing import Any

import jax
import numpy as np

from jdist.errors import InputError
from jdist.typing import PyTree


def named_leaves(tree: PyTree, name: str) -> list[tuple[str, Any]]:
    """`(path, leaf)` pairs, None leaves included, paths like `x['image']` or `batch[1]`."""
    pairs, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=lambda v: v is None)
    return [(name + jax.tree_util.keystr(path), leaf) for path, leaf in pairs]


def leaf_dtype(leaf: Any) -> np.dtype:
    dtype = getattr(leaf, "dtype", None)
    return np.asarray(leaf).dtype if dtype is None else dtype


def check_leaf(path: str, leaf: Any, *, batched: bool = True) -> None:
    """One array of a batch: not None, numeric, with a non-empty leading batch dimension."""
    if leaf is None:
        raise InputError(f"{path} is None; expected an array with one row per example. Fix: drop the entry "
                         "from the batch, or fill it with an array.")
    dtype = leaf_dtype(leaf)
    kind = getattr(dtype, "kind", "")
    if kind in "OUSV" or not kind:
        what = {"O": "objects", "U": "strings", "S": "bytes", "V": "raw records"}.get(kind, "values")
        raise InputError(f"{path} has dtype {dtype} ({what}); expected numbers (float, int or bool). Fix: convert "
                         "it to numbers before the step (e.g. strings to integer ids with a vocabulary, objects "
                         "with np.asarray(x, np.float32)).")
    shape = np.shape(leaf)
    if batched and not shape:
        raise InputError(f"{path} is a scalar; expected an array with a leading batch dimension. Fix: pass one "
                         "row per example (x[None] for a single example).")
    if batched and shape[0] == 0:
        raise InputError(f"{path} has shape {tuple(shape)}: 0 examples; expected at least one. Fix: drop empty "
                         "batches (or arrays) from the input, or check that a filter keeps some examples.")


def check_leaves(tree: PyTree, name: str, *, batched: bool = True) -> None:
    for path, leaf in named_leaves(tree, name):
        check_leaf(path, leaf, batched=batched)


def check_array_args(tree: PyTree, name: str) -> None:
    """Arguments that are not batches (e.g. what `run` broadcasts): only their dtype, where they
    are arrays, since JAX takes numbers only."""
    for path, leaf in named_leaves(tree, name):
        if isinstance(leaf, (np.ndarray, np.generic)) and getattr(leaf.dtype, "kind", "") in "OUSV":
            check_leaf(path, leaf, batched=False)


_SHAPE_WORDS = re.compile(r"shape|rank|dimension|dtype|data type", re.IGNORECASE)


def is_shape_mismatch(error: BaseException) -> bool:
    """Whether tracing a model on a batch failed because the batch's shapes or dtypes do not fit
    it (flax's parameter shape check, JAX's shape and dtype rules for dot products, broadcasting, ...)."""
    if type(error).__name__ == "ScopeParamShapeError":
        return True
    return isinstance(error, (TypeError, ValueError)) and not isinstance(error, InputError) and bool(
        _SHAPE_WORDS.search(str(error)))


def model_mismatch_error(batch: PyTree, name: str, error: BaseException) -> InputError:
    """The Trainer's message for a model that cannot take a batch, for any entry point."""
    shapes = jax.tree.map(lambda a: tuple(np.shape(a)), batch)
    return InputError(f"The model cannot take this batch: {name} has shapes {shapes}. The model said: {error} "
                      "Fix: give each input the per-example shape and dtype the model was built for (check the "
                      "rank, the feature sizes and the dtype).")
