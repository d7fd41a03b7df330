"""Keras 3 objects used statefully inside `strategy.run`, as TF's custom-training loops use them.

    with strategy.scope():
        model = create_model()                      # built: keras.Input(...) or model.build(...)
        optimizer = keras.optimizers.Adam()
        optimizer.build(model.trainable_variables)
        train_accuracy = keras.metrics.SparseCategoricalAccuracy()

    def train_step(inputs):
        images, labels = inputs
        with jdist.GradientTape() as tape:
            predictions = model(images, training=True)
            loss = compute_loss(labels, predictions, model.losses)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        train_accuracy.update_state(labels, predictions)
        return loss

    per_replica_losses = strategy.run(train_step, args=(batch,))

JAX arrays are immutable, so `run` does what TF's variables do for you: the Keras
models, optimizers and metrics the function refers to (by name, through its globals
and closures, the functions it calls, and for a method the attributes of its instance,
`self.model`) have their variables handed to the compiled
replica function as inputs, read there through a Keras `StatelessScope`, and the
values assigned there are written back into the variables afterwards. Across replicas
the variables behave as TF's mirrored ones:

* `optimizer.apply_gradients` sums the gradients over the replicas first (TF's
  `apply_gradients` in a replica context does the same), so the weights stay identical;
* metric variables (Keras's `aggregation="sum"`) add up every replica's update, as
  TF's sync-on-read metric variables do, and a metric's `update_state` inside `run` is
  given the replica's example mask as `sample_weight`, so the padding rows of a short
  last batch never count (TF splits such a batch unevenly instead; same numbers);
* `aggregation="mean"` variables are averaged over the replicas;
* any other variable assigned different values on different replicas is an error (TF 2.21
  lets their copies drift apart silently and reads the first replica's: observed with
  BatchNormalization's moving statistics in `training=True`).

A model not built yet (a `Sequential` without `keras.Input`) is built from the first replica's inputs of
its first `run`, and an optimizer not built yet for the trainable variables of the models the function
uses, as TF builds both in its first trace. (TF 2.21 with Keras 3 fails that way with Adam under
`MirroredStrategy` with two or more replicas: "You must feed a value for placeholder tensor"; with
tf_keras, and with plain SGD, it runs.)
"""
from __future__ import annotations

import contextlib
import inspect
import sys
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import jax

from jdist.interop import signature_jit
from jdist.interop.keras_objects import jax_keras as _keras, keras_objects
from jdist.strategy import context, dispatch, extensions
from jdist.strategy.aggregation import mark_per_replica
from jdist.strategy.distributed_batch import place_host_batches, unwrap_batches
from jdist.strategy.values import PerReplica, split_mark

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy

_FRAMES: list["Frame"] = []


class Frame:
    """One traced execution of the user's replica function (or a replay of it for a tape)."""

    def __init__(self, fn: Callable, args: tuple, kwargs: dict, variables: list, values: list,
                 replaying: int | None = None, overrides: Mapping[int, Any] | None = None):
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.variables, self.values = variables, values
        self.replaying, self.overrides = replaying, dict(overrides or {})
        self.tapes_entered = 0
        self.deferred: list[tuple[Callable[[list], None], list]] = []  # (receiver, traced values): keras_deferred


def current_frame() -> Frame | None:
    return _FRAMES[-1] if _FRAMES else None


class ModelsBuilt(Exception):
    """Ends the building call of `_build_models` once every unbuilt model has been called."""


_BUILDING = [False]


def building_models() -> bool:
    """True during `run`'s eager call that builds the models (`_build_models`)."""
    return _BUILDING[0]


def _replica_example(strategy: Strategy, leaf: Any) -> Any:
    """What one replica's function receives for a `run` argument leaf: its first replica's rows when the
    leaf is split over the replicas, else the leaf itself."""
    if isinstance(leaf, PerReplica):
        return leaf.stacked[0]
    if isinstance(leaf, jax.Array) and split_mark(leaf) is not None and leaf.ndim:
        return leaf[: leaf.shape[0] // strategy.num_replicas_in_sync]
    return leaf


def _build_models(strategy: Strategy, fn: Callable, args: Sequence[Any], kwargs: Mapping[str, Any] | None,
                  objects: Sequence[Any], keras: Any) -> None:
    """Models not built yet are built from the inputs of their first call, as TF builds them in the first trace
    of the replica function: `fn` runs once, eagerly, in the strategy's scope and a Keras `StatelessScope` (so
    no variable it assigns keeps the value), on the first replica's rows, until every such model has been
    called; that call builds it with one replica's input shapes, as in TF."""
    pending = [o for o in objects if isinstance(o, keras.layers.Layer) and not isinstance(o, keras.metrics.Metric)
               and not o.built]
    if not pending:
        return
    placed = place_host_batches(strategy, (tuple(args), dict(kwargs or {})))
    (call_args, call_kwargs), _ = unwrap_batches(placed)
    call_args, call_kwargs = jax.tree.map(lambda leaf: _replica_example(strategy, leaf), (call_args, call_kwargs),
                                          is_leaf=lambda x: isinstance(x, PerReplica))
    waiting = {id(model) for model in pending}

    def calls_then_stops(model: Any) -> Callable:
        call = model.call

        def call_once_built(*a: Any, **k: Any) -> Any:
            out = call(*a, **k)
            if model.built:  # not yet inside a subclassed Model's own build, which calls `call` symbolically
                waiting.discard(id(model))
            if not waiting:
                raise ModelsBuilt
            return out

        return call_once_built

    for model in pending:
        model.call = calls_then_stops(model)
    _BUILDING[0] = True
    try:
        with strategy.scope(), keras.StatelessScope():
            fn(*call_args, **call_kwargs)
    except ModelsBuilt:
        pass
    finally:
        _BUILDING[0] = False
        for model in pending:
            del model.call  # back to the class's method


def _build_optimizers(strategy: Strategy, objects: Sequence[Any], keras: Any) -> None:
    """An optimizer not built yet is built, in the strategy's scope, for the trainable variables of the models
    the replica function uses, and the trainable variables it is given on their own (`tf.Variable`s): what its
    first `apply_gradients` would build in TF. (TF 2.21 does so for plain SGD; with slot variables, such as
    Adam's, it fails under MirroredStrategy with 2+ replicas. Observed, TF 2.21's tf.function guide: Adam built
    by its first `apply_gradients` on a lone `tf.Variable`, outside any strategy.)"""
    pending = [o for o in objects if isinstance(o, keras.optimizers.Optimizer) and not o.built]
    models = [o for o in objects if isinstance(o, keras.layers.Layer) and not isinstance(o, keras.metrics.Metric)]
    loose = [o for o in objects if isinstance(o, keras.Variable) and o.trainable]
    trainable = list({id(v): v for m in models if m.built for v in m.trainable_variables}.values())
    trainable += [v for v in loose if all(v is not t for t in trainable)]
    if pending and trainable:
        with strategy.scope():
            for optimizer in pending:
                optimizer.build(trainable)


def _check_built(objects: Sequence[Any], keras: Any) -> None:
    for obj in objects:
        if isinstance(obj, keras.optimizers.Optimizer) and not obj.built:
            raise ValueError(
                f"strategy.run: optimizer {obj.name!r} has no variables yet, and the replica function uses no "
                "built Keras model to build it for. Build it in the strategy's scope before run: "
                "`optimizer.build(model.trainable_variables)`.")
        if isinstance(obj, keras.layers.Layer) and not isinstance(obj, keras.metrics.Metric) and not obj.built:
            raise ValueError(
                f"strategy.run: Keras model {obj.name!r} is not built, so its variables would be created inside "
                "the compiled replica function. Build it first: start it with `keras.Input(shape)` or call "
                "`model.build((None, ...))` in the strategy's scope.")


def _variables(objects: Sequence[Any]) -> list:
    found: dict[int, Any] = {}
    for obj in objects:
        for v in (obj,) if not hasattr(obj, "variables") else obj.variables:
            found.setdefault(id(v), v)
    return list(found.values())


@contextlib.contextmanager
def _patched(objects: Sequence[Any], keras: Any):
    """Inside the replica function: apply_gradients sums over replicas; metrics honour the example mask."""
    patched = []
    try:
        for obj in objects:
            if isinstance(obj, keras.optimizers.Optimizer):
                patched.append((obj, "apply_gradients", obj.__dict__.get("apply_gradients")))
                obj.apply_gradients = _summing_apply_gradients(obj.apply_gradients)
            elif isinstance(obj, keras.metrics.Metric):
                patched.append((obj, "update_state", obj.__dict__.get("update_state")))
                obj.update_state = _masked_update(obj.update_state)
        yield
    finally:
        for obj, name, before in patched:
            if before is None:
                delattr(obj, name)  # back to the class's method
            else:
                setattr(obj, name, before)  # back to the instance's own (keras_deferred's)


def _summing_apply_gradients(apply_gradients: Callable) -> Callable:
    """TF's `apply_gradients` in a replica context: the gradients are summed over the replicas first.

    Only `apply_gradients`, TF's API, sums: Keras's `apply` and `stateless_apply` (functional
    code that all-reduces itself) are left alone. `skip_gradients_aggregation=True` (Keras 2's
    opt-out, also `experimental_aggregate_gradients=False`) applies each replica's own gradients.
    """
    def apply_summed(grads_and_vars, skip_gradients_aggregation=False, experimental_aggregate_gradients=True,
                     **kwargs):
        grads_and_vars = list(grads_and_vars)
        if not skip_gradients_aggregation and experimental_aggregate_gradients:
            ctx = _replica_context()
            present = [i for i, (g, _) in enumerate(grads_and_vars) if g is not None]
            summed = ctx.all_reduce("sum", [grads_and_vars[i][0] for i in present])
            for i, g in zip(present, summed):
                grads_and_vars[i] = (g, grads_and_vars[i][1])
        return apply_gradients(grads_and_vars, **kwargs)

    return apply_summed


def _masked_update(update_state: Callable) -> Callable:
    """`update_state` with the replica's example mask folded into `sample_weight` (padding rows weigh 0)."""
    signature = inspect.signature(update_state)
    if "sample_weight" not in signature.parameters:
        return update_state

    def update_masked(*args, **kwargs):
        ctx = context.get_replica_context()
        mask = None if ctx is None else ctx.example_mask
        bound = signature.bind(*args, **kwargs)
        first = next(iter(bound.arguments.values()), None)
        shape = getattr(first, "shape", ())
        if mask is None or not shape or shape[0] != mask.shape[0]:
            return update_state(*args, **kwargs)  # not one row per example of the replica's batch
        weight = bound.arguments.get("sample_weight")
        mask = mask.astype("float32")
        if weight is not None:
            weight = jax.numpy.asarray(weight)
            mask = weight * mask.reshape(mask.shape + (1,) * (weight.ndim - 1)) if weight.ndim else weight * mask
        bound.arguments["sample_weight"] = mask
        return update_state(*bound.args, **bound.kwargs)

    return update_masked


def _replica_context() -> Any:
    """The replica context these patched calls run in (they are installed only inside `run`'s replica function)."""
    ctx = context.get_replica_context()
    assert ctx is not None, "called inside strategy.run's replica function, which has a replica context"
    return ctx


def _run_value(strategy: Strategy, variable: Any) -> Any:
    """What the replica function gets for a variable: its value, or each replica's own copy for a variable that
    keeps per-replica copies (a `tf.Variable` with TF's ON_READ synchronization: `_jdist_run_value`)."""
    copies = getattr(variable, "_jdist_run_value", None)
    local = None if copies is None else copies(strategy)
    return variable.value if local is None else local


def _received(variable: Any, new: Any) -> bool:
    """Whether the variable took its replicas' copies itself (an ON_READ `tf.Variable`: `_jdist_receive`)."""
    receive = getattr(variable, "_jdist_receive", None)
    return receive is not None and receive(new)


def _aggregate(variable: Any, old: Any, new: Any) -> Any:
    if new is None:
        return old
    if getattr(variable, "_jdist_on_read", False):  # each replica keeps its own copy
        return mark_per_replica(new)
    ctx = _replica_context()
    aggregation = getattr(variable, "aggregation", "none")
    if aggregation == "sum":  # sync-on-read: every replica's increment counts
        return old + ctx.all_reduce("sum", new - old)
    if aggregation == "mean":
        return ctx.all_reduce("mean", new)
    return new


def _threaded_scope(variables: list, values: list) -> Any:
    """A Keras `StatelessScope` over the threaded variables that refuses any other Keras variable.

    A variable `run` did not find would otherwise be read as its current value, baked into the
    compiled step as a constant (stale on every later call), and an assignment to it dropped."""
    keras = _keras()
    assert keras is not None, "run found Keras objects, so Keras (JAX backend) is loaded"
    known = {id(v) for v in variables}

    def unknown(variable: Any, what: str) -> ValueError:
        return ValueError(
            f"strategy.run's function {what} the Keras variable {getattr(variable, 'path', variable)!r}, which "
            "belongs to no Keras model, optimizer or metric that run found in the function's globals, closures, "
            "the functions it calls or (for a method) its instance's attributes. Its value would be compiled in "
            "as a constant and its updates lost. Refer to the object that owns it directly from the function "
            "(a global, a closure variable or self.<name>), not through another object or container.")

    class ThreadedScope(keras.StatelessScope):
        def get_current_value(self, variable):
            if id(variable) not in known:
                raise unknown(variable, "reads")
            return super().get_current_value(variable)

        def add_update(self, update):
            if id(update[0]) not in known:
                raise unknown(update[0], "assigns")
            return super().add_update(update)

    return ThreadedScope(state_mapping=list(zip(variables, values)))


def guard() -> Any:
    """Around a compiled `run` whose function uses no Keras object `run` found: any Keras variable read
    there (an object reached some other way) is an error naming the fix, not a silent constant."""
    if "keras" not in sys.modules:
        return contextlib.nullcontext()
    return _threaded_scope([], [])


def _stateful_fn(fn: Callable, objects: list, variables: list, receivers: list) -> Callable:
    """The replica function `run` compiles; `receivers` is set, when it is traced, to what takes the values
    of its `deferred` output (`keras_deferred`)."""
    keras = _keras()

    def replica_fn(values, args, kwargs):
        frame = Frame(fn, args, kwargs, variables, values)
        with _threaded_scope(variables, values) as scope:
            _FRAMES.append(frame)
            try:
                with _patched(objects, keras):
                    out = fn(*args, **kwargs)
            finally:
                _FRAMES.pop()
            news = [scope.get_current_value(v) for v in variables]
        receivers[:] = [receiver for receiver, _ in frame.deferred]  # fixed at trace time
        deferred = [traced for _, traced in frame.deferred]
        return out, [_aggregate(v, old, new) for v, old, new in zip(variables, values, news)], deferred

    replica_fn._jdist_stateful = True
    replica_fn.__name__ = getattr(fn, "__name__", "replica_fn")
    return replica_fn


def replay(frame: Frame, tape_index: int, overrides: Mapping[int, Any]) -> Any:
    """Runs the frame's function again up to its `tape_index`-th tape's `gradient` call; returns its target."""
    sub = Frame(frame.fn, frame.args, frame.kwargs, frame.variables, frame.values, tape_index, overrides)
    with _threaded_scope(frame.variables, frame.values):
        _FRAMES.append(sub)
        try:
            frame.fn(*frame.args, **frame.kwargs)
        except ReachedTarget as reached:
            return reached.target
        finally:
            _FRAMES.pop()
    raise RuntimeError("jdist.GradientTape: replaying the replica function did not reach the same "
                       "tape.gradient call; the function must trace the same way each time it runs.")


class ReachedTarget(Exception):
    """Raised inside a replay when the replayed tape's `gradient` is reached, carrying its target."""

    def __init__(self, target: Any):
        super().__init__("replay reached its target")
        self.target = target


def run(strategy: Strategy, fn: Callable, args: Sequence[Any], kwargs: Mapping[str, Any] | None,
        objects: list, compiled: bool = False) -> Any:
    """`strategy.run(fn, ...)` where `fn` uses Keras objects statefully (see the module docstring).
    `compiled`: one `jax.jit` program per argument signature (a `tf.function` called outside any
    strategy); `strategy.run` compiles by itself otherwise."""
    variables = _variables(objects)  # a tf.random.Generator makes its state variable (importing Keras) here
    keras = _keras()
    assert keras is not None, "Keras objects were found, so Keras on JAX is imported"
    _build_models(strategy, fn, args, kwargs, objects, keras)
    _check_built([o for o in objects if not isinstance(o, keras.optimizers.Optimizer)], keras)
    _build_optimizers(strategy, objects, keras)
    _check_built(objects, keras)
    variables = _variables(objects)
    cache = strategy.__dict__.setdefault("_keras_run_fns", {})
    key = (fn, tuple(id(v) for v in variables))
    if key not in cache:
        receivers: list = []
        cache[key] = (_stateful_fn(fn, objects, variables, receivers), receivers)
    replica_fn, receivers = cache[key]
    values = [_run_value(strategy, v) for v in variables]
    if compiled:
        out, news, deferred = dispatch.dispatched(signature_jit.call(  # bounded in flight, as strategy.run's
            lambda values, args, kwargs: strategy.run(replica_fn, args=(values, args, kwargs)), replica_fn, values,
            (tuple(args), dict(kwargs or {}))))
    else:
        out, news, deferred = strategy.run(replica_fn, args=(values, tuple(args), dict(kwargs or {})))
    received = [_received(variable, new) for variable, new in zip(variables, news)]
    for variable, new, done in zip(variables, news, received):
        if isinstance(new, PerReplica) and not done:
            raise ValueError(
                f"strategy.run assigned the Keras variable {variable.path!r} different values on different "
                "replicas, so it is no longer mirrored. Update it identically on every replica: apply gradients "
                "with optimizer.apply_gradients (which sums them over the replicas), or all_reduce the value "
                "before assigning it (or give a tf.Variable an aggregation: tf.VariableAggregation.MEAN, SUM or "
                "ONLY_FIRST_REPLICA). BatchNormalization's moving statistics in training=True are such values: "
                "TF 2.21 lets the replicas' copies drift apart and reads the first replica's; train such models "
                "with jdist.Trainer (statistics of the global batch), or call them through model.stateless_call "
                "and average the returned statistics with strategy.reduce('mean', ...).")
    for variable, new, done in zip(variables, news, received):
        if not done:
            variable.assign(new)
    for receiver, values in zip(receivers, deferred):
        if any(isinstance(v, PerReplica) for v in values):
            raise ValueError(
                "strategy.run: apply_gradients(..., skip_gradients_aggregation=True) gave each replica its own "
                "gradients for an optimizer whose updates are applied on the parameter servers; apply the "
                "gradients summed over the replicas (apply_gradients's default), as one update per step.")
        receiver(values)
    return out


class KerasRun:
    """`strategy.run` for functions that use Keras objects as TF uses variables (`jdist.strategy.extensions`)."""

    def claim(self, fn: Callable) -> list:
        return keras_objects(fn)

    def run(self, strategy: Strategy, fn: Callable, args: Sequence[Any], kwargs: Mapping[str, Any] | None,
            claim: list) -> Any:
        return run(strategy, fn, args, kwargs, claim)

    def guard(self) -> Any:
        return guard()


extensions.register_run(KerasRun())
