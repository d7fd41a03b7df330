"""`jdist.GradientTape`: TF's `tf.GradientTape`, inside `strategy.run` and outside it.

    with jdist.GradientTape() as tape:
        predictions = model(images, training=True)
        loss = compute_loss(labels, predictions, model.losses)
    gradients = tape.gradient(loss, model.trainable_variables)

JAX differentiates functions, not recorded operations. So `tape.gradient(target,
sources)` differentiates the replica function itself: it runs the function again (in
the same trace) from its inputs up to this `gradient` call, with the sources' values,
as they were when the tape was entered, as the variables of differentiation, and takes
the gradient of `sum(target)` (TF's gradient of a non-scalar target). XLA computes the
repeated forward pass once. Python side effects before the `gradient` call (prints,
appends) therefore happen twice while the step is traced, never when it runs again.

That is how it works inside `strategy.run` on a function that uses Keras objects (see
`jdist.interop.keras_run`), and in a `tf.function` whose body records the tape, called
outside any strategy (`jdist.interop.tf_function`: TF's default strategy). Anywhere else
the tape is eager, as TF's outside `tf.function`: `gradient` replays the `with` block's
statements from its source (`jdist.interop.eager_tape`).
"""
from __future__ import annotations

import logging
import sys
from typing import Any

import jax
import jax.numpy as jnp

from jdist.interop import eager_tape, keras_run, tape_pause, unconnected
from jdist.typing import ArrayLike, PyTree

# The number of the replayed tape's `gradient` call each replay runs to, innermost last: a persistent tape's
# second call replays the function up to that second call, not its first.
_TARGET_CALLS: list[int] = []


def replaying() -> bool:
    """Whether a tape's `gradient` is running code again that already ran (the replica function up to the
    call, or an eager block): its `tf.print` calls printed (or were compiled) the first time."""
    frame = keras_run.current_frame()
    return (frame is not None and frame.replaying is not None) or eager_tape.replaying()


def _is_variable(x: Any) -> bool:
    return hasattr(x, "path") and hasattr(x, "assign")


class GradientTape:
    """Records nothing; `gradient` replays the replica function or the eager block (see the module docstring)."""

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True):
        self.persistent = persistent
        self._frame: keras_run.Frame | None = None
        self._index = -1
        self._entry: dict[int, Any] = {}
        self._used = False
        self._calls = 0  # `gradient` calls so far (compiled tapes)
        self._block: eager_tape.Block | None = None
        self._watch = eager_tape.Watch([], watch_accessed_variables)

    def __enter__(self) -> "GradientTape":
        self._used, self._calls = False, 0  # a tape entered again records anew (TF allows it after its gradient)
        frame = keras_run.current_frame()
        if frame is None and keras_run.building_models():
            return self  # run's eager call that builds the models: nothing is differentiated there
        if frame is None:  # eager, as TF's tape outside tf.function: replayed from its block (eager_tape)
            self._block = eager_tape.enter(sys._getframe(1))
            return self
        self._frame, self._index = frame, frame.tapes_entered
        frame.tapes_entered += 1
        if frame.replaying == self._index:  # the replayed tape: its sources become the differentiated inputs
            from keras.src.backend import get_stateless_scope

            scope = get_stateless_scope()
            assert scope is not None, "run replays the tape inside a Keras StatelessScope"
            for variable in frame.variables:
                if id(variable) in frame.overrides:
                    scope.add_update((variable, frame.overrides[id(variable)]))
        self._entry = {id(v): v.value for v in frame.variables}
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def watch(self, tensor: object) -> None:
        """Marks `tensor` (a tensor, a variable, or a structure of them) as TF's tape does: an eager tape gives its
        gradient; inside compiled code the sources given to `gradient` are what is differentiated."""
        for leaf in jax.tree.leaves(tensor, is_leaf=_is_variable):
            dtype = None if getattr(leaf, "dtype", None) is None else jnp.dtype(str(leaf.dtype))
            if dtype is not None and not jnp.issubdtype(dtype, jnp.inexact):
                logging.getLogger("tensorflow").warning(  # TF 2.21's warning (observed)
                    "The dtype of the watched tensor must be floating (e.g. tf.float32), got tf.%s", dtype)
            self._watch.watched.append(leaf)

    def stop_recording(self) -> Any:
        """TF's pause of the tape: what runs inside is not differentiated (`jdist.interop.tape_pause`)."""
        if self._frame is not None and self._frame.replaying == self._index:
            return tape_pause.Paused(None)  # the replay of the replica function: its locals
        return tape_pause.Idle()  # the run itself (the eager block's replay pauses on its own)

    def watched_variables(self) -> tuple:
        """The variables the tape records, as TF's: trainable ones the block read (with
        `watch_accessed_variables`) and watched ones, in the order they were made (eager tapes)."""
        if self._block is None:
            raise RuntimeError("watched_variables() is answered for an eager tape (outside strategy.run and "
                               "tf.function), after its `with` block; inside compiled code, name the sources.")
        read = eager_tape.variables_read(self._block)
        found = [v for v in read if self._watch.records(v)]
        found += [v for v in self._watch.watched if _is_variable(v) and all(v is not f for f in found)]
        return tuple(sorted(found, key=lambda v: getattr(v, "_jdist_created", float("inf"))))

    def gradient(self, target: PyTree, sources: PyTree, output_gradients: ArrayLike | None = None,
                 unconnected_gradients: object = None) -> PyTree:
        frame = self._frame
        if self._block is not None:
            return self._eager_gradient(sources, output_gradients, unconnected_gradients, sys._getframe(1))
        if frame is None and keras_run.building_models():
            raise keras_run.ModelsBuilt  # the models called so far are built; the call ends here
        if frame is None:
            raise RuntimeError(
                "tape.gradient() needs the tape to have been entered (`with jdist.GradientTape() as tape:`).")
        if frame.replaying == self._index and self._calls == _TARGET_CALLS[-1]:
            raise keras_run.ReachedTarget(target)
        leaves, treedef = self._sources(sources)
        call, self._calls = self._calls, self._calls + 1
        unknown = [getattr(v, "path", type(v).__name__) for v in leaves if id(v) not in self._entry]
        if unknown:
            raise ValueError(
                f"tape.gradient: sources {unknown} are not variables of the Keras objects this replica function "
                "uses; pass Keras variables such as model.trainable_variables.")
        primal = [self._entry[id(v)] for v in leaves]
        ids = [id(v) for v in leaves]

        def replayed(values):
            _TARGET_CALLS.append(call)
            try:
                reached = keras_run.replay(frame, self._index, dict(zip(ids, values)))
            finally:
                _TARGET_CALLS.pop()
            return unconnected.total(reached, output_gradients)

        return jax.tree.unflatten(treedef, unconnected.gradients(replayed, primal, unconnected_gradients))

    def _sources(self, sources: PyTree) -> tuple[list, Any]:
        """Marks the tape used (once, unless persistent) and flattens `sources` down to the variables."""
        if self._used and not self.persistent:
            raise RuntimeError("A non-persistent GradientTape can only be used to compute one set of gradients "
                               "(create it with persistent=True to call gradient() more than once).")
        self._used = True
        return jax.tree.flatten(sources, is_leaf=_is_variable)

    def _eager_gradient(self, sources: PyTree, output_gradients: ArrayLike | None, unconnected_gradients: Any,
                        caller: Any) -> PyTree:
        assert self._block is not None
        leaves, treedef = self._sources(sources)
        target = eager_tape.target_expression(self._block, caller)
        grads = eager_tape.gradient(self._block, target, leaves, output_gradients, unconnected_gradients,
                                    self._watch, {**caller.f_globals, **caller.f_locals})
        return jax.tree.unflatten(treedef, grads)
