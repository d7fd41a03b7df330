"""The Trainer's per-batch input checks: structure once per batch signature, the loss's label
check every batch, and the model's output shape from `jax.eval_shape`, so a batch the model
cannot take fails with an `InputError` naming the input (the generic checks are `jdist.input.checks`)."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

import jax
import numpy as np

from jdist.errors import InputError
from jdist.input import checks as input_checks
from jdist.input.label_checks import label_check_for
from jdist.strategy.batch import Batch
from jdist.strategy.leaf_checks import check_leaves, leaf_dtype as _dtype, named_leaves as _leaves


class TrainerChecks:
    """The Trainer's per-batch checks: structure once per batch signature, the loss's label
    check (`jdist.input.label_checks`) every batch, numerics when enabled.

    The model's output shape for a batch signature comes from `jax.eval_shape` (no compute),
    which also turns a model that cannot take the input (wrong rank or feature size) into an
    error naming the input leaves instead of flax's raw shape error."""

    def __init__(self, loss: Any, model: Any, state: Callable[[], Any]):
        """`model`: the Trainer's `TrainerModel`; `state()`: its current state (shapes are read)."""
        self._model = model
        self._state = state
        self._label_check = label_check_for(loss)
        self._outputs: dict[tuple, Any] = {}  # batch signature -> model output (ShapeDtypeStruct) or None
        self._reference: dict[Any, tuple] = {}  # x treedef -> shapes of the first batch seen

    def batches(self, batches: Iterable, first_step: int | None) -> Iterator:
        """`batches` checked one by one before they are grouped and placed; `first_step`: the
        training step of the first (None outside training).

        Batches that are the rows of one stacked block (`Batch.row_of`, arrays cut k batches
        at a time) share their signature: the first row is checked as any batch, and the label
        check runs once over the whole block; the other rows are checked one by one only when
        that finds a problem, so the error names the same batch, raised at the same point."""
        block_checked = None
        for i, batch in enumerate(batches):
            if not batch.on_host:
                yield batch  # a distributed dataset's batch: checked where it left the host
                continue
            where = f"batch {i} of this pass" + ("" if first_step is None else f", training step {first_step + i}")
            row_of = getattr(batch, "row_of", None)
            if row_of is not None and row_of[1] > 0 and row_of[0] is block_checked:
                if input_checks.check_numerics_enabled():
                    self._check_numerics(batch, where)
                yield batch
                continue
            output = self.check(batch, where)
            block_checked = None
            block = row_of[0] if row_of is not None and row_of[1] == 0 and len(row_of[0].mask) > 1 else None
            if block is not None and self._labels_fit(block, output):
                block_checked = block
            yield batch

    def check(self, batch: Any, where: str) -> Any:
        """Checks one batch; returns the model's (abstract) output for it, or None."""
        x_leaves, x_def = jax.tree.flatten(batch.x, is_leaf=lambda v: v is None)
        y_leaves, y_def = jax.tree.flatten(batch.y, is_leaf=lambda v: v is None)
        key = (x_def, input_checks.signature(x_leaves), y_def, input_checks.signature(y_leaves))
        if key not in self._outputs:
            self._outputs[key] = self._first_of_signature(batch, x_def, x_leaves)
        output = self._outputs[key]
        if self._label_check is not None and output is not None and isinstance(batch.y, np.ndarray):
            self._label_check(batch.y, batch.y.shape[:1] + output.shape[1:], f"labels y ({where})")
        if input_checks.check_numerics_enabled():
            self._check_numerics(batch, where)
        return output

    def _labels_fit(self, block: Any, output: Any) -> bool:
        """Whether the label check passes on every row of a stacked `(k, batch, ...)` block at once."""
        if self._label_check is None or output is None or not isinstance(block.y, np.ndarray):
            return True  # nothing is checked per row either
        rows = block.y.reshape((-1,) + block.y.shape[2:])
        try:
            self._label_check(rows, rows.shape[:1] + output.shape[1:], "labels y")
        except InputError:
            return False
        return True

    @staticmethod
    def _check_numerics(batch: Any, where: str) -> None:
        input_checks.check_finite(batch.x, "x", where)
        input_checks.check_finite(batch.y, "y", where)

    def build_from(self, batch: Batch, build: Callable[[Batch], None]) -> None:
        """Makes the variables from the first batch of a pass (`build(batch)`, once, before the
        loop), after the checks of its arrays, so a batch the model cannot take is named."""
        self._check_arrays(batch)
        try:
            build(batch)
        except (InputError, NotImplementedError):  # jdist's own verdicts on the batch or the model
            raise
        except Exception as error:  # flax's shape errors are not ValueErrors
            raise InputError(f"The model could not be built from the first batch, x with shapes "
                             f"{_describe(batch.x)}: {error} Fix: give x the shape the model expects.") from error

    @staticmethod
    def _check_arrays(batch: Batch) -> None:
        check_leaves(batch.x, "x")
        if batch.y is not None:
            check_leaves(batch.y, "y")
        if batch.weight is not None:
            check_leaves(batch.weight, "sample_weight")

    def _first_of_signature(self, batch: Batch, x_def: Any, x_leaves: list) -> Any:
        self._check_arrays(batch)
        shapes = tuple(np.shape(leaf) for leaf in x_leaves)
        reference = self._reference.setdefault(x_def, shapes)
        paths = [p for p, _ in _leaves(batch.x, "x")]
        for path, shape, ref in zip(paths, shapes, reference):
            if len(shape) != len(ref):
                raise input_checks.rank_error(path, shape, ref, "the first batch this Trainer saw")
        return _output_of(self._model, self._state(), batch, reference)


def _describe(tree: Any) -> str:
    return str(jax.tree.map(lambda a: tuple(np.shape(a)), tree))


def _output_of(model: Any, state: Any, batch: Batch, reference: tuple) -> Any:
    """The model's output for `batch` (abstract), or None when it cannot be known
    here (parameters on servers, several outputs)."""
    if not hasattr(state, "model_state"):  # not the Trainer's own state: e.g. parameters on servers
        return None
    x = jax.tree.map(lambda a: jax.ShapeDtypeStruct(np.shape(a), _dtype(a)), batch.x)

    def forward(params, model_state, x):
        return model.apply(params, model_state, x, train=False, mask=None, rng=None)[0]

    try:
        # Shapes only: where the parameters live (host memory, other meshes) does not matter here.
        params, model_state = jax.tree.map(lambda a: jax.ShapeDtypeStruct(np.shape(a), _dtype(a)),
                                           (state.params, state.model_state))
        with input_checks.shapes_only():
            out = jax.eval_shape(forward, params, model_state, x)
    except NotImplementedError:  # a model jdist cannot train yet: not the batch's fault
        raise
    except Exception as error:  # only the model's shapes are evaluated here: the input does not fit it
        raise InputError(f"The model cannot take this batch: x has shapes {_describe(batch.x)} (the first batch "
                         f"had {list(reference)}). The model said: {error} Fix: give x the per-example shape the "
                         "model was built for.") from error
    return out if isinstance(out, jax.ShapeDtypeStruct) else None
