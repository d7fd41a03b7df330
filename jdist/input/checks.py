"""Input validation at jdist's host boundary: bad batches, labels and arguments fail
here with an `InputError` naming the leaf, what was expected, what was found and the
fix, instead of a raw JAX / flax error deep in a trace, a NaN loss or a silently
wrong result.

Cheap by construction: structure checks (dtype, rank, empty, None) run once per
batch signature (tree structure, shapes, dtypes), label checks are a host min/max
over the labels, and nothing reads a device array. `enable_check_numerics()` adds
a scan of every batch for NaN and infinity (opt-in, as TF's
`tf.debugging.enable_check_numerics`).
"""
from __future__ import annotations

import contextlib
import numbers
from typing import Any, Callable, Iterator

import jax
import numpy as np

from jdist.errors import InputError, InputTypeError, NonFiniteInputError
from jdist.strategy.leaf_checks import check_leaf, check_leaves, leaf_dtype as _dtype, named_leaves as _leaves
from jdist.typing import PyTree

__all__ = ["InputError", "enable_check_numerics", "disable_check_numerics", "check_numerics_enabled"]

_NUMERICS = [False]
_SHAPES_ONLY = [False]


@contextlib.contextmanager
def shapes_only() -> Iterator[None]:
    """Marks a model call that only evaluates shapes (see `evaluating_shapes`)."""
    _SHAPES_ONLY[0] = True
    try:
        yield
    finally:
        _SHAPES_ONLY[0] = False


def evaluating_shapes() -> bool:
    """True while the Trainer's checks evaluate the model on shapes only (to learn its output
    width): code that records what the training step traced can leave these calls out."""
    return _SHAPES_ONLY[0]


def enable_check_numerics() -> None:
    """Checks every batch that reaches a jdist step (`Trainer`, `make_train_step`, distributed
    datasets) for NaN and infinity, raising `NonFiniteInputError` naming the first non-finite
    leaf, its index and the step. As `tf.debugging.enable_check_numerics`: for debugging, it
    costs a pass over every batch (and a device read for batches already on the devices)."""
    _NUMERICS[0] = True


def disable_check_numerics() -> None:
    """Turns `enable_check_numerics()` off again."""
    _NUMERICS[0] = False


def check_numerics_enabled() -> bool:
    return _NUMERICS[0]


# ------------------------------------------------------------------ arguments
def check_count(name: str, value: object, *, minimum: int, allow_none: bool = True) -> None:
    """`value` must be an int >= `minimum` (or None when allowed)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        arg = name.split(" ")[-1]
        fix = f"{arg}={int(value)}" if isinstance(value, float) and value.is_integer() else f"an integer {arg}"
        raise InputTypeError(f"{name} must be an integer >= {minimum}, got {value!r} ({type(value).__name__}). "
                             f"Fix: pass {fix}.")
    if value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}, got {value}. Fix: pass "
                         f"{name.split(' ')[-1]}={minimum} or more" + (" (or leave it out)." if allow_none else "."))


def check_arguments(method: str, **arguments: Any) -> None:
    """Keras's numeric `fit` / `evaluate` / `predict` arguments: batch sizes and step counts
    positive integers, epochs non-negative, `initial_epoch` not past `epochs`."""
    for name in ("batch_size", "steps", "steps_per_epoch", "validation_steps", "validation_batch_size"):
        if name in arguments:
            check_count(f"{method}(): {name}", arguments[name], minimum=1)
    for name in ("epochs", "initial_epoch"):
        if name in arguments:
            check_count(f"{method}(): {name}", arguments[name], minimum=0, allow_none=False)
    if arguments.get("initial_epoch", 0) > arguments.get("epochs", arguments.get("initial_epoch", 0)):
        raise InputError(f"{method}(): initial_epoch={arguments['initial_epoch']} is past epochs="
                         f"{arguments['epochs']}: nothing would train. Fix: epochs is the last epoch's number, "
                         "not a count of further epochs; pass epochs > initial_epoch.")
    split = arguments.get("validation_split", 0.0)
    if not isinstance(split, numbers.Real) or isinstance(split, bool):
        raise InputTypeError(f"{method}(): validation_split must be a float in [0, 1), got {split!r}.")


# --------------------------------------------------------------------- leaves
def check_arrays(**trees: PyTree) -> None:
    """Whole input arrays given to `fit` / `evaluate` / `predict` (`x=`, `y=`, ...)."""
    for name, tree in trees.items():
        if tree is not None:
            check_leaves(tree, name)


def check_finite(tree: PyTree, name: str, where: str) -> None:
    """Raises `NonFiniteInputError` at the first leaf holding NaN or infinity."""
    for path, leaf in _leaves(tree, name):
        if leaf is None or getattr(_dtype(leaf), "kind", "") not in "fc":
            continue
        finite = np.isfinite(np.asarray(leaf))
        if not finite.all():
            index = tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(~finite)[0]), finite.shape))
            value = np.asarray(leaf)[index]
            raise NonFiniteInputError(
                f"check_numerics: {path} holds {value} at index {index} (row {index[0]} of {where}). "
                "Fix: clean the input (np.nan_to_num, or drop the example); jdist.disable_check_numerics() "
                "turns this check off.")


def signature(leaves: list) -> tuple:
    """Shapes and dtypes (hashable, no string formatting: this runs every batch)."""
    out = []
    for leaf in leaves:
        dtype = getattr(leaf, "dtype", None)
        out.append(None if leaf is None else (getattr(leaf, "shape", None), type(leaf) if dtype is None else dtype))
    return tuple(out)


def rank_error(path: str, shape: tuple, reference: tuple, what: str) -> InputError:
    fix = ("add the missing axis (e.g. x[..., None])" if len(shape) < len(reference)
           else "drop the extra axis (e.g. x.squeeze(-1) or a reshape)")
    return InputError(f"{path} has shape {tuple(shape)} (rank {len(shape)}), but {what} had shape {tuple(reference)} "
                      f"(rank {len(reference)}). Fix: {fix} so every batch has the same rank.")


# ------------------------------------------------------- make_train_step steps
class StepChecks:
    """Checks for batches given to a `make_train_step` / `make_eval_step` step: structure once
    per batch signature (host or device arrays: only metadata is read), ranks against the
    step's first batch, numerics when enabled."""

    def __init__(self):
        self._known: set = set()
        self._reference: dict[Any, tuple] = {}
        self.calls = 0

    def __call__(self, batch: Any, step_of: Callable[[], Any] | None = None) -> None:
        self.calls += 1
        leaves, treedef = jax.tree.flatten(batch, is_leaf=lambda v: v is None)
        key = (treedef, signature(leaves))
        if key not in self._known:
            # Arrays (host or device) and None; other leaves are jdist values resolved later
            # (e.g. a parameter-server worker's per-worker batch).
            named = [(p, leaf) for p, leaf in _leaves(batch, "batch") if leaf is None or hasattr(leaf, "dtype")]
            for path, leaf in named:
                check_leaf(path, leaf)
            shapes = tuple(getattr(leaf, "shape", None) for leaf in leaves)
            reference = self._reference.setdefault(treedef, shapes)
            for (path, _), shape, ref in zip(_leaves(batch, "batch"), shapes, reference):
                if shape is not None and ref is not None and len(shape) != len(ref):
                    raise rank_error(path, shape, ref, "the first batch this step ran on")
            self._known.add(key)
        if _NUMERICS[0]:
            host = jax.tree.map(lambda a: np.asarray(jax.device_get(a)) if hasattr(a, "dtype") else None, batch)
            step = step_of() if step_of is not None else None
            where = f"call {self.calls} of this step" + (f", state.step {step}" if step is not None else "")
            check_finite(host, "batch", where)


def check_call(method: str, x: Any, y: Any, sample_weight: Any, **arguments: Any) -> None:
    """Everything `fit` / `evaluate` / `predict` can check before the first batch: the numeric
    arguments, and input arrays (not iterables of batches, checked batch by batch)."""
    check_arguments(method, **arguments)
    if isinstance(x, (np.ndarray, jax.Array)) or isinstance(x, dict):
        check_arrays(x=x, y=y, sample_weight=sample_weight)


def check_dataset_element(element: PyTree, arrays: list) -> None:
    """A distributed dataset's batch as it is read on the host: no None (as every batch), and
    numerics when enabled."""
    if any(leaf is None for leaf in jax.tree.leaves(element, is_leaf=lambda v: v is None)):
        check_leaves(element, "dataset element")
    if _NUMERICS[0]:
        check_finite(element, "dataset element", "a batch of a distributed dataset")


def check_device_leaves(leaves: list, treedef: Any) -> None:
    """A distributed dataset's batch about to move to the devices: numeric leaves only (strings
    may stay on the host, with `InputOptions(experimental_fetch_to_device=False)`)."""
    if any(a.dtype.kind in "OUSV" for a in leaves):
        check_leaves(jax.tree.unflatten(treedef, leaves), "dataset element", batched=False)
