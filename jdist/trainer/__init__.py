"""`Trainer`: Keras's `compile` / `fit` / `evaluate` / `predict` under any jdist strategy.

`trainer` is the face and its one loop; the other modules are its parts: `_input` (what `fit` is given, as
blocks of placed batches), `_batching` (fixed-shape `Batch`es with a mask), `checks` (the per-batch input
checks), `_steps` (the compiled steps around the step core), `_runners` (what runs a pass's blocks on this
process), `_model_fn` (how a model is called), `_remote` (steps scheduled on parameter-server workers). None
of the parts reads a Trainer attribute. Weights and state on disk are `jdist.checkpoint.model_io`.
"""
from jdist.trainer.trainer import Trainer

__all__ = ["Trainer"]
