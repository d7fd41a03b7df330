"""Keras's `fit` iterates its data as TF's does: an epoch ends at `steps_per_epoch`, whatever
`steps_per_execution` is, and a dataset's order is taken silently.

Keras 3's `EpochIterator` cuts an epoch into whole executions of `steps_per_execution` steps: with
`steps_per_epoch=7` and `steps_per_execution=50` (TF's TPU guide: "anything between 2 and
`steps_per_epoch`", on a dataset of 7 batches) each epoch trains 50 steps on its repeated dataset, and the
progress bar reads "50/7". TF 2.21 with tf_keras (observed, MirroredStrategy on 8 CPUs) trains 7 steps
an epoch there: its data handler shortens the last execution of an epoch to the steps the epoch has left
(TF's Keras 3 stops in that execution with "You must feed a value for placeholder tensor"). Here the last
execution of an epoch is shortened the same way. Keras's JAX trainer runs an execution's steps one by one,
each `next` of the iterator the epoch gives it, until `steps_per_execution` or the iterator's end: a short
execution gets an iterator that ends after its steps (`itertools.islice`, which takes no batch beyond them),
so it needs no new compilation.

`tf.data` datasets (jdist.tfdata) reach `fit` as grain datasets, for which Keras warns at every `fit` that its
default `shuffle=True` is ignored; TF 2.21 with tf_keras takes a `tf.data` dataset's order as it is, without a
word (its Keras 3 warns likewise, observed). And Keras's grain adapter knows no dataset's length, so the first
epoch's progress bar read "1/Unknown" and every `fit` and `evaluate` ended with "Your input ran out of data";
TF's fit, with either Keras, counts the batches of a dataset of known cardinality ("8/8" from the first epoch,
observed): here the adapter reports a `tf.data` dataset's cardinality when it is known.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import itertools
import warnings
from typing import Any, Iterator

# sha256 (first 16 hex digits) of the source of the two methods replaced here, as Keras 3.15 has them: a Keras
# that changed them keeps its own (with a warning), rather than losing its change to this copy.
_KERAS_SOURCES = {"_enumerate_iterator": "376e3e16a928107a", "__next__": "8b12aa117bb200a4"}


def written_for(iterator_class: type) -> bool:
    """Whether `iterator_class`'s methods are those this module's replacements were written from."""
    for name, digest in _KERAS_SOURCES.items():
        try:
            source = inspect.getsource(getattr(iterator_class, name))
        except (OSError, TypeError, AttributeError):
            return False
        if hashlib.sha256(source.encode()).hexdigest()[:16] != digest:
            return False
    return True


def install() -> None:
    """Replaces `EpochIterator`'s epoch enumeration and batch buffering, once per process."""
    import keras
    from keras.src.trainers.data_adapters.grain_dataset_adapter import GrainDatasetAdapter
    from keras.src.trainers.epoch_iterator import EpochIterator

    if getattr(EpochIterator._enumerate_iterator, "_jdist", False) or getattr(EpochIterator, "_jdist_kept", False):
        return
    if not written_for(EpochIterator):
        EpochIterator._jdist_kept = True  # pyright: ignore[reportAttributeAccessIssue]
        warnings.warn(f"Keras {keras.__version__} changed EpochIterator, which jdist adjusts for Keras 3.15 to end "
                      "an epoch at steps_per_epoch whatever steps_per_execution is (as TF's fit does); fit keeps "
                      "Keras's own epochs, so a steps_per_execution above an epoch's steps trains past the epoch.",
                      stacklevel=2)
        return
    GrainDatasetAdapter.num_batches = property(_num_batches)  # pyright: ignore[reportAttributeAccessIssue]
    EpochIterator._enumerate_iterator = _enumerate_iterator  # pyright: ignore[reportAttributeAccessIssue]
    EpochIterator.__init__ = _without_the_grain_shuffle_warning(EpochIterator.__init__)
    EpochIterator.__next__ = _next  # pyright: ignore[reportAttributeAccessIssue]


def _num_batches(self: Any) -> int | None:
    """The batches of a `tf.data` dataset (jdist.tfdata) of known, finite cardinality; None otherwise (Keras's)."""
    cardinality = getattr(self._dataset, "cardinality", None)
    if cardinality is None or not hasattr(self._dataset, "element_spec"):
        return None
    count = int(cardinality())
    return count if count >= 0 else None


_GRAIN_SHUFFLE = r"`shuffle=True` was passed, but will be ignored since the data `x` was provided as a grain dataset"


def _without_the_grain_shuffle_warning(init: Any) -> Any:
    """`EpochIterator.__init__`, where Keras picks the data adapter, without its grain `shuffle` warning."""

    @functools.wraps(init)
    def wrapped(self: Any, *args: Any, **kwargs: Any) -> None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_GRAIN_SHUFFLE)
            init(self, *args, **kwargs)

    return wrapped


def _enumerate_iterator(self: Any) -> Iterator[tuple[int, int, Any]]:
    """Keras 3.15's enumeration, with an epoch's last execution cut to the steps the epoch has left."""
    self.data_adapter.on_epoch_begin()
    steps_per_epoch = self.steps_per_epoch or self._num_batches or -1
    if steps_per_epoch > 0:
        if self._current_iterator is None or self.steps_per_epoch is None:
            self._current_iterator = iter(self._get_iterator())
            self._steps_seen = 0
        for step in range(0, steps_per_epoch, self.steps_per_execution):
            if self._num_batches and self._steps_seen >= self._num_batches:
                if self.steps_per_epoch:
                    self._interrupted_warning()
                break
            steps = min(self.steps_per_execution, steps_per_epoch - step)
            self._jdist_execution_steps = steps
            self._steps_seen += steps
            iterator = self._current_iterator
            yield step, step + steps - 1, iterator if steps == self.steps_per_execution else itertools.islice(
                iterator, steps)
        if self._num_batches and self._steps_seen >= self._num_batches:
            self._current_iterator = iter(self._get_iterator())
            self._steps_seen = 0
    else:
        self._jdist_execution_steps = self.steps_per_execution
        iterator = iter(self._get_iterator())
        step = -self.steps_per_execution
        while True:
            step += self.steps_per_execution
            self._steps_seen = step + self.steps_per_execution
            yield step, step + self.steps_per_execution - 1, iterator
    self.data_adapter.on_epoch_end()


_enumerate_iterator._jdist = True  # pyright: ignore[reportFunctionMemberAccess]


def _next(self: Any) -> tuple[int, int, list]:
    """One execution's batches: as many as `_enumerate_iterator` gave this execution (the backends whose
    trainer takes a list of batches; JAX's takes the iterator)."""
    buffer: list = []
    begin_step, end_step, iterator = next(self._epoch_iterator)
    with self.catch_stop_iteration():
        for _ in range(getattr(self, "_jdist_execution_steps", self.steps_per_execution)):
            buffer.append(next(iterator))
        return begin_step, end_step, buffer
    if buffer:
        return begin_step, end_step, buffer
    raise StopIteration
