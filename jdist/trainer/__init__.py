"""`Trainer`: Keras's `compile` / `fit` / `evaluate` / `predict` under any jdist strategy.

`trainer` is the face; the private modules are its parts: `_input` (what `fit` is given, as blocks of placed
batches), `_batching` (fixed-shape host batches with a mask), `_steps` (the compiled steps around the step core),
`_model_fn` (how a model is called), `_io` (weights and state on disk), `_remote` (steps scheduled on
parameter-server workers).
"""
from typing import TYPE_CHECKING

from jdist._lazy import lazy_getattr

if TYPE_CHECKING:  # what type checkers and editors see; at run time `__getattr__` imports them
    from jdist.trainer.trainer import Trainer

# Imported on first use, so importing one module of this package does not import all of them.
_NAMES = {
    "Trainer": ("jdist.trainer.trainer", "Trainer"),
}
__getattr__ = lazy_getattr(__name__, _NAMES)
__all__ = [  # the keys of _NAMES
    "Trainer",
]
