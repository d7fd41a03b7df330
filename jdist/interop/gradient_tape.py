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
A tensor given to `tape.watch` is a source too: in the replay, the names the calling
function binds to it are rebound to it plus the differentiated value's tangent, so an
input gradient (and an outer tape's gradient of a penalty on it) is TF's. `jacobian` and
`batch_jacobian` differentiate the target unsummed (`unconnected.jacobians`).

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
import numpy as np

from jdist.interop import eager_tape, keras_run, tape_attributes, tape_pause, unconnected
from jdist.typing import ArrayLike, PyTree, TensorLike

# The number of the replayed tape's `gradient` call each replay runs to, innermost last: a persistent tape's
# second call replays the function up to that second call, not its first.
_TARGET_CALLS: list[int] = []
# The replays running now, innermost last: the replayed tape's number (in the order the function enters its
# tapes), its variables' differentiated values (by id) and its watched tensors' (by the number of the `watch`
# call). A replay inside another's (a gradient penalty: the outer tape differentiates the inner one's gradient)
# runs the function from its start again, where the enclosing replays' tapes take their values too.
_REPLAYS: list[tuple[int, dict[int, Any], dict[int, Any]]] = []
_RESTORES: list[list[Any]] = []  # per running replay: what gives watched attributes their own values back
_ENTERED: list["GradientTape"] = []  # compiled tapes whose `with` block runs now (nested tapes share watches)


def replaying() -> bool:
    """Whether a tape's `gradient` is running code again that already ran (the replica function up to the
    call, or an eager block): its `tf.print` calls printed (or were compiled) the first time."""
    frame = keras_run.current_frame()
    return (frame is not None and frame.replaying is not None) or eager_tape.replaying()


def _is_variable(x: Any) -> bool:
    return hasattr(x, "path") and hasattr(x, "assign")


def _unique(sources: list) -> list:
    """The sources without repeats (a source named twice is one variable of differentiation)."""
    return [s for i, s in enumerate(sources) if all(s is not t for t in sources[:i])]


def _repeated(sources: list, unique: list, grads: list) -> list:
    """Each source's gradient, a repeated source's for each time it is named (TF: `gradient(y, [v, v])`)."""
    return [grads[next(i for i, u in enumerate(unique) if u is s)] for s in sources]


class _NotRecording:
    """`stop_recording()` of a tape outside its `with` block: entering it raises TF's error (observed, TF 2.21:
    a tape never entered raises RuntimeError, one whose block has ended raises ValueError)."""

    def __init__(self, never_entered: bool):
        self._never_entered = never_entered

    def __enter__(self) -> None:
        if self._never_entered:
            raise RuntimeError("Trying to stop recording a tape which is not recording. Call stop_recording() "
                               "inside the tape's `with` block.")
        raise ValueError("Tape is not recording. Call stop_recording() inside the tape's `with` block.")

    def __exit__(self, *exc: Any) -> None:
        return None


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
        self._watched: dict[int, int] = {}  # compiled tapes: id of a watched tensor -> the number of its watch
        self._watches = 0
        self._recording: bool | None = None  # None: never entered; then whether its `with` block runs

    def __enter__(self) -> "GradientTape":
        self._recording = True
        self._used, self._calls = False, 0  # a tape entered again records anew (TF allows it after its gradient)
        self._watched, self._watches = {}, 0
        frame = keras_run.current_frame()
        if frame is None and keras_run.building_models():
            return self  # run's eager call that builds the models: nothing is differentiated there
        if frame is None:  # eager, as TF's tape outside tf.function: replayed from its block (eager_tape)
            self._block = eager_tape.enter(sys._getframe(1))
            return self
        self._frame, self._index = frame, frame.tapes_entered
        frame.tapes_entered += 1
        overrides = [variables for index, variables, _ in _REPLAYS if index == self._index]
        if frame.replaying is not None and overrides:  # a replayed tape: its sources become the differentiated inputs
            from keras.src.backend import get_stateless_scope

            scope = get_stateless_scope()
            assert scope is not None, "run replays the tape inside a Keras StatelessScope"
            for variable in frame.variables:
                for values in overrides:
                    if id(variable) in values:
                        scope.add_update((variable, values[id(variable)]))
        self._entry = {id(v): v.value for v in frame.variables}
        _ENTERED.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._recording = False
        if any(t is self for t in _ENTERED):
            _ENTERED.remove(self)

    def watch(self, tensor: object) -> None:
        """Marks `tensor` (a tensor, a variable, or a structure of them) as TF's tape does: an eager tape gives its
        gradient; inside compiled code the sources given to `gradient` are what is differentiated."""
        for leaf in jax.tree.leaves(tensor, is_leaf=lambda x: x is None or _is_variable(x)):
            if leaf is None or isinstance(leaf, (bool, int, float, complex, str, bytes, np.generic)) or (
                    type(leaf) is np.ndarray):
                raise ValueError(  # TF 2.21's error and text (observed: watch(3.0), watch(None), np arrays)
                    f"Passed in object {leaf} of type {type(leaf).__name__!r}, not tf.Tensor or tf.Variable or "
                    "ExtensionType. Convert it first (x = tf.constant(...)) and watch that tensor.")
            dtype = None if getattr(leaf, "dtype", None) is None else jnp.dtype(str(leaf.dtype))
            if dtype is not None and not jnp.issubdtype(dtype, jnp.inexact):
                logging.getLogger("tensorflow").warning(  # TF 2.21's warning (observed)
                    "The dtype of the watched tensor must be floating (e.g. tf.float32), got tf.%s", dtype)
            self._watch.watched.append(leaf)
            if self._frame is not None and not _is_variable(leaf):
                self._watch_compiled(leaf, sys._getframe(1))

    def _watch_compiled(self, tensor: Any, caller: Any) -> None:
        """Inside compiled code: the tensor becomes a source `gradient` can name. In the replay for this tape's
        gradient, the caller's names bound to the recomputed tensor are rebound to it plus the differentiated
        value's tangent (the same value; the paths through the tensor's own inputs are kept)."""
        number, self._watches = self._watches, self._watches + 1
        frame = self._frame
        assert frame is not None
        self._watched.setdefault(id(tensor), number)
        found = [watched[number] for index, _, watched in _REPLAYS if index == self._index and number in watched]
        if frame.replaying is None or not found:
            return
        value = found[-1]
        replacement = tensor + (value - jax.lax.stop_gradient(value))
        self._watched[id(replacement)] = number  # a later gradient call of this tape in the replay names it
        for other in _ENTERED:  # an inner tape that watched the tensor before this watch names the replacement
            if other is not self and id(tensor) in other._watched:
                other._watched[id(replacement)] = other._watched[id(tensor)]
        names = {name: replacement for name, bound in caller.f_locals.items() if bound is tensor}
        held_by = tape_attributes.find(caller.f_locals, [tensor]) if not names else {}
        if held_by:  # `tape.watch(model.weights)`: the attribute holds the replacement for the rest of the replay
            _RESTORES[-1].append(tape_attributes.rebind(held_by, {id(tensor): replacement}))
        elif not names:
            raise ValueError(
                "tape.watch inside compiled code (tf.function, strategy.run) differentiates a tensor held by a "
                "local name of the function that calls watch; bind the watched tensor to a name there "
                "(`h = ...; tape.watch(h)`).")
        tape_pause.write_locals(caller, names)

    def reset(self) -> None:
        """TF's `tape.reset()`: what the tape recorded so far is forgotten, watches included; it records on."""
        self._watch.watched.clear()
        self._watched.clear()
        frame = self._frame
        if frame is not None and frame.replaying is not None and any(i == self._index for i, _, _ in _REPLAYS):
            caller = sys._getframe(1)  # the replay: the function's values so far become constants
            tape_pause.write_locals(caller, tape_pause.forgotten(caller.f_locals))

    def stop_recording(self) -> Any:
        """TF's pause of the tape: what runs inside is not differentiated (`jdist.interop.tape_pause`).
        Outside the tape's `with` block, entering the pause raises TF's error."""
        if not self._recording:
            return _NotRecording(self._recording is None)
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
        if target is None:
            raise TypeError(  # TF 2.21's error and text (observed: tape.gradient(None, x))
                "Argument `target` should be a list or nested structure of Tensors, Variables or CompositeTensors "
                "to be differentiated, but received None.")
        return self._differentiate(target, sources, output_gradients, unconnected_gradients, None,
                                   sys._getframe(1))

    def jacobian(self, target: TensorLike, sources: PyTree, unconnected_gradients: object = None,
                 parallel_iterations: int | None = None, experimental_use_pfor: bool = True) -> PyTree:
        """TF's `tape.jacobian`: for each source, d target / d source shaped `target.shape + source.shape`."""
        return self._differentiate(target, sources, None, unconnected_gradients, jnp.asarray, sys._getframe(1))

    def batch_jacobian(self, target: TensorLike, source: TensorLike, unconnected_gradients: object = None,
                       parallel_iterations: int | None = None, experimental_use_pfor: bool = True) -> Any:
        """TF's `tape.batch_jacobian`: d target[b] / d source[b] for each row b of the batch, shaped
        `target.shape + source.shape[1:]`; the rows of the target depend only on their own source row, as TF
        assumes, so it is the Jacobian of the target summed over its rows."""
        target_shape, source_shape = np.shape(target), np.shape(source)
        if not target_shape or not source_shape or target_shape[0] != source_shape[0]:
            raise ValueError(  # TF 2.21's message
                f"Need first dimension of target shape ({target_shape}) and source shape ({source_shape}) to "
                "match.")
        (rows,) = self._differentiate(target, [source], None, unconnected_gradients,
                                      lambda t: jnp.sum(jnp.asarray(t), axis=0), sys._getframe(1))
        if rows is None:
            return None
        inner = len(target_shape) - 1  # rows: target.shape[1:] + source.shape; the batch axis first
        return jnp.moveaxis(rows, inner, 0)

    def _differentiate(self, target: PyTree, sources: PyTree, output_gradients: ArrayLike | None,
                       unconnected_gradients: object, jacobian: Any, caller: Any) -> PyTree:
        frame = self._frame
        if self._block is not None:
            return self._eager_gradient(sources, output_gradients, unconnected_gradients, caller, jacobian)
        if frame is None and keras_run.building_models():
            raise keras_run.ModelsBuilt  # the models called so far are built; the call ends here
        if frame is None:
            raise RuntimeError(
                "tape.gradient() needs the tape to have been entered (`with jdist.GradientTape() as tape:`).")
        if frame.replaying == self._index and self._calls == _TARGET_CALLS[-1]:
            raise keras_run.ReachedTarget(target)
        every, treedef = self._sources(sources)
        leaves = _unique(every)
        call, self._calls = self._calls, self._calls + 1
        inputs = {id(leaf) for leaf in jax.tree.leaves((frame.args, frame.kwargs))}
        unknown = [getattr(v, "path", type(v).__name__) for v in leaves
                   if id(v) not in self._entry and id(v) not in self._watched and id(v) not in inputs]
        if unknown:
            raise ValueError(
                f"tape.gradient: sources {unknown} are neither variables of the Keras objects this replica "
                "function uses nor tensors this tape watched. Inside compiled code (tf.function, strategy.run) "
                "a tensor computed in the tape's block is a source only once watched: call tape.watch(h) after "
                "computing it; pass Keras variables such as model.trainable_variables.")
        # A watched tensor's value only carries this tape's tangent (its replacement in the replay is the recomputed
        # tensor plus it): an enclosing tape's tangent comes through the recomputed tensor, not a second time here.
        primal = [self._entry[id(v)] if id(v) in self._entry else
                  jax.lax.stop_gradient(v) if id(v) in self._watched else v for v in leaves]
        ids = [id(v) for v in leaves]

        def replayed(values):
            variables = {i: value for i, value in zip(ids, values) if i in self._entry}
            _TARGET_CALLS.append(call)
            _REPLAYS.append((self._index, variables,
                             {self._watched[i]: value for i, value in zip(ids, values) if i in self._watched}))
            _RESTORES.append([])
            try:
                reached = keras_run.replay(frame, self._index, variables)
            finally:
                _TARGET_CALLS.pop()
                _REPLAYS.pop()
                for restore in reversed(_RESTORES.pop()):
                    restore()
            return unconnected.total(reached, output_gradients) if jacobian is None else jacobian(reached)

        differentiate = unconnected.gradients if jacobian is None else unconnected.jacobians
        grads = differentiate(replayed, primal, unconnected_gradients)
        # As TF's tape: a variable is recorded if watched, or if trainable and read with watch_accessed_variables.
        zeros = unconnected.requested(unconnected_gradients) is unconnected.UnconnectedGradients.ZERO
        # An input of the function the tape did not watch is a constant to it (TF: None).
        grads = [g if id(v) in self._watched or (_is_variable(v) and self._watch.records(v)) or g is None
                 else jnp.zeros_like(g) if zeros else None for v, g in zip(leaves, grads)]
        return jax.tree.unflatten(treedef, _repeated(every, leaves, grads))

    def _sources(self, sources: PyTree) -> tuple[list, Any]:
        """Marks the tape used (once, unless persistent) and flattens `sources` down to the variables."""
        if self._used and not self.persistent:
            raise RuntimeError("A non-persistent GradientTape can only be used to compute one set of gradients "
                               "(or jacobians; create it with persistent=True to call gradient() more than once).")
        if any(leaf is None for leaf in jax.tree.leaves(sources, is_leaf=lambda x: x is None or _is_variable(x))):
            raise TypeError(  # TF 2.21 raises TypeError (observed: "Cannot convert ... None to a TensorFlow DType")
                "tape.gradient: a source is None; pass the variables or watched tensors to differentiate "
                "(a model's trainable_variables are empty until the model is built).")
        self._used = True
        return jax.tree.flatten(sources, is_leaf=_is_variable)

    def _eager_gradient(self, sources: PyTree, output_gradients: ArrayLike | None, unconnected_gradients: Any,
                        caller: Any, jacobian: Any = None) -> PyTree:
        assert self._block is not None
        every, treedef = self._sources(sources)
        leaves = _unique(every)
        target = eager_tape.target_expression(self._block, caller)
        grads = eager_tape.gradient(self._block, target, leaves, output_gradients, unconnected_gradients,
                                    self._watch, {**caller.f_globals, **caller.f_locals}, jacobian)
        return jax.tree.unflatten(treedef, _repeated(every, leaves, grads))
