"""`Trainer`: Keras's `compile` / `fit` / `evaluate` / `predict` under any jdist strategy.

`trainer` is the face; the other modules are its parts: `_input` (what `fit` is given, as blocks of placed
batches), `_batching` (fixed-shape host batches with a mask), `checks` (the per-batch input checks), `_steps`
(the compiled steps around the step core), `_model_fn` (how a model is called), `_remote` (steps scheduled on
parameter-server workers). Weights and state on disk are `jdist.checkpoint.model_io`.
"""
from jdist.trainer.trainer import Trainer

__all__ = ["Trainer"]
