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

* `optimizer.apply_gradients` and `optimizer.apply` sum the gradients over the replicas
  first (TF's in a replica context do the same), so the weights stay identical;
* metric variables (Keras's `aggregation="sum"`) keep a copy per replica, as TF's
  sync-on-read metric variables do: `result()` inside the function reads the replica's own
  totals, and outside the variables hold the replicas' sum. A metric's `update_state` inside
  `run` (and its inner metrics') is given the replica's example mask as `sample_weight`, so
  the padding rows of a short last batch never count (TF splits such a batch unevenly
  instead; same numbers);
* a Keras loss reduced over the batch is scaled by 1 / replicas and averages a replica's
  real rows only, as TF's Keras 3 computes it on each replica's share;
* `aggregation="mean"` variables are averaged over the replicas;
* a non-trainable variable without aggregation (BatchNormalization's moving statistics in
  `training=True`) assigned different values on different replicas keeps a copy per replica, as
  TF 2.21's do: each replica reads its own, outside the first replica's is read;
* any other variable assigned different values on different replicas is an error.

A model not built yet (a `Sequential` without `keras.Input`) is built from the first replica's inputs of
its first `run`, and an optimizer not built yet for the trainable variables of the models the function
uses, as TF builds both in its first trace. (TF 2.21 with Keras 3 fails that way with Adam under
`MirroredStrategy` with two or more replicas: "You must feed a value for placeholder tensor"; with
tf_keras, and with plain SGD, it runs.)
"""
from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import jax

from jdist.interop import keras_replica_rules as replica_rules, output_order, signature_jit
from jdist.interop.keras_objects import jax_keras as _keras, keras_objects
from jdist.strategy import dispatch, extensions, thread_state
from jdist.strategy.aggregation import mark_per_replica
from jdist.strategy.distributed_batch import place_host_batches, unwrap_batches
from jdist.strategy.run import returned_as_is
from jdist.strategy.values import PerReplica, split_mark

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy

_FRAMES: thread_state.ThreadStack["Frame"] = thread_state.ThreadStack()  # each replica thread's own


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
    # a trainable tf.Variable set as a model's attribute (among its non-trainable variables, no weight of it)
    trainable += [v for m in models if m.built and m.trainable for v in m.non_trainable_variables
                  if v.trainable and hasattr(v, "_jdist_created") and all(v is not t for t in trainable)]
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
        # a layer's non-trainable variables include the tf.Variables set as its attributes (none of its weights)
        held = [*obj.variables, *getattr(obj, "non_trainable_variables", ())] if hasattr(obj, "variables") else [obj]
        for v in held:
            found.setdefault(id(v), v)
    return list(found.values())


def _run_value(strategy: Strategy, variable: Any) -> Any:
    """What the replica function gets for a variable: its value, or each replica's own copy for a variable that
    keeps per-replica copies (a `tf.Variable` with TF's ON_READ synchronization: `_jdist_run_value`)."""
    copies = getattr(variable, "_jdist_run_value", None)
    local = None if copies is None else copies(strategy)
    return variable.value if local is None else local


def _replica_value(strategy: Strategy, variable: Any) -> Any:
    """What the replica function gets for a variable that keeps no summed copies: the replicas' own copies
    where they drifted apart (`_drifts`), else `_run_value`."""
    held = _held_copies(strategy, variable)
    return _run_value(strategy, variable) if held is None else held


def _received(variable: Any, new: Any) -> bool:
    """Whether the variable took its replicas' copies itself (an ON_READ `tf.Variable`: `_jdist_receive`)."""
    receive = getattr(variable, "_jdist_receive", None)
    return receive is not None and receive(new)


def _keeps_copies(strategy: Strategy, variable: Any) -> bool:
    """A Keras variable with `aggregation="sum"` (every metric's) keeps a copy per replica across `run`s, as TF's
    sync-on-read metric variables do: inside the replica function `metric.result()` reads the replica's own
    totals (TF 2.21 observed: a custom `train_step`'s returned `{m.name: m.result()}` averaged over 4 replicas is
    the mean over the whole batch), and outside the variable holds their sum."""
    return (getattr(variable, "aggregation", None) == "sum" and strategy.num_replicas_in_sync > 1
            and strategy.single_program_step)


def _held_copies(strategy: Strategy, variable: Any) -> Any:
    """The replicas' copies the last `run` left in `variable`, while it still holds what that `run` gave it
    (their sum, or replica 0's copy); None once assigned since (`reset_state`, `set_weights`, a restore)."""
    held = getattr(variable, "_jdist_copies", None)
    if held is not None and held[0] is strategy and held[1] is variable.value:
        return held[2]
    return None


def _drifts(variable: Any, new: Any) -> bool:
    """A non-trainable variable without aggregation (BatchNormalization's moving statistics) that the replicas
    assigned different values: each keeps its own copy, as TF's mirrored variable with aggregation NONE does
    in a replica context (TF 2.21, Keras 3.15, 4 logical CPUs: after `model(x, training=True)` each replica
    reads its own moving mean, `training=False` normalizes with it, and outside the first replica's is read,
    by `get_weights` and checkpoints too; `set_weights` makes them equal again)."""
    return (isinstance(new, PerReplica) and new.is_stacked and not getattr(variable, "trainable", True)
            and getattr(variable, "aggregation", "none") in ("none", None))


def _copies(strategy: Strategy, variable: Any) -> Any:
    """The replicas' copies of a `_keeps_copies` variable: the ones the last `run` left while the variable still
    holds their sum; else (first use, or assigned since, e.g. `reset_state`) replica 0 holds the value and the
    others zeros."""
    held = _held_copies(strategy, variable)
    if held is not None:
        return held
    value = variable.value
    zeros = jax.numpy.zeros_like(value)
    return strategy.experimental_distribute_values_from_function(
        lambda ctx: value if ctx.replica_id_in_sync_group == 0 else zeros)


def _aggregate(variable: Any, old: Any, new: Any, copies: bool = False) -> Any:
    if new is None:
        new = old
    if getattr(variable, "_jdist_on_read", False):  # each replica keeps its own copy
        return mark_per_replica(new)
    ctx = replica_rules.replica_context()
    if copies:  # this replica's copy, and the sum every replica holds
        return mark_per_replica(new), ctx.all_reduce("sum", new)
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

    return ThreadedScope(state_mapping=list(zip(variables, values)), collect_losses=True)  # add_loss: model.losses


def guard() -> Any:
    """Around a compiled `run` whose function uses no Keras object `run` found: any Keras variable read
    there (an object reached some other way) is an error naming the fix, not a silent constant."""
    if "keras" not in sys.modules:
        return contextlib.nullcontext()
    keras = _keras()
    if keras is not None:  # a Keras loss called there is scaled as in any replica function
        replica_rules.install_loss_scaling(keras)
    return _threaded_scope([], [])


def _stateful_fn(fn: Callable, objects: list, variables: list, receivers: list, copies: Sequence[bool]) -> Callable:
    """The replica function `run` compiles; `receivers` is set, when it is traced, to what takes the values
    of its `deferred` output (`keras_deferred`)."""
    keras = _keras()

    def replica_fn(values, args, kwargs):
        frame = Frame(fn, args, kwargs, variables, values)
        ctx = replica_rules.replica_context()
        if ctx.axis_name is not None:  # a variable's value read in `run` is each replica's own (shared_results)
            ctx.own_values.extend(jax.tree.leaves(values))
        with _threaded_scope(variables, values) as scope:
            _FRAMES.append(frame)
            try:
                with replica_rules.patched(objects, keras):
                    out = fn(*args, **kwargs)
            finally:
                _FRAMES.pop()
            news = [scope.get_current_value(v) for v in variables]
        receivers[:] = [receiver for receiver, _ in frame.deferred]  # fixed at trace time
        deferred = [traced for _, traced in frame.deferred]
        # A returned variable comes back as itself (observed, TF 2.21: `strategy.run(lambda: v)` is `v`).
        if any(isinstance(x, keras.Variable) for x in jax.tree.leaves(out)):
            out = output_order.reordered(jax.tree.map(
                lambda x: returned_as_is(x) if isinstance(x, keras.Variable) else x, out), output_order.key_orders(out))
        return out, [_aggregate(v, old, new, c) for v, old, new, c in zip(variables, values, news, copies)], deferred

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


def _imported_keras() -> Any:
    import keras  # noqa: F401 - jax_keras answers once Keras is imported

    return _keras()


def run(strategy: Strategy, fn: Callable, args: Sequence[Any], kwargs: Mapping[str, Any] | None,
        objects: list, compiled: bool = False) -> Any:
    """`strategy.run(fn, ...)` where `fn` uses Keras objects statefully (see the module docstring).
    `compiled`: one `jax.jit` program per argument signature (a `tf.function` called outside any
    strategy); `strategy.run` compiles by itself otherwise."""
    variables = _variables(objects)  # a tf.random.Generator makes its state variable (importing Keras) here
    keras = _keras() or _imported_keras()  # a tape over tensors alone may come before any Keras object
    assert keras is not None, "Keras objects were found, so Keras on JAX is imported"
    replica_rules.install_loss_scaling(keras)
    _build_models(strategy, fn, args, kwargs, objects, keras)
    _check_built([o for o in objects if not isinstance(o, keras.optimizers.Optimizer)], keras)
    _build_optimizers(strategy, objects, keras)
    _check_built(objects, keras)
    variables = _variables(objects)
    cache = strategy.__dict__.setdefault("_keras_run_fns", {})
    key = (fn, tuple(id(v) for v in variables))
    if key not in cache:
        receivers: list = []
        copies = [_keeps_copies(strategy, v) for v in variables]
        cache[key] = (_stateful_fn(fn, objects, variables, receivers, copies), receivers, copies)
    replica_fn, receivers, copies = cache[key]
    values = [_copies(strategy, v) if c else _replica_value(strategy, v) for v, c in zip(variables, copies)]
    if compiled:
        out, news, deferred = dispatch.dispatched(signature_jit.call(  # bounded in flight, as strategy.run's
            lambda values, args, kwargs: strategy.run(replica_fn, args=(values, args, kwargs)), replica_fn, values,
            (tuple(args), dict(kwargs or {}))))
    else:
        out, news, deferred = strategy.run(replica_fn, args=(values, tuple(args), dict(kwargs or {})))
    news, locals_ = list(news), {}
    for i, keep in enumerate(copies):
        if keep:  # the replicas' copies are kept; the variable holds their sum
            locals_[i], news[i] = news[i]
    for i, (variable, new, keep) in enumerate(zip(variables, news, copies)):
        if not keep and _drifts(variable, new):  # the replicas' own copies are kept; the variable holds replica 0's
            locals_[i], news[i] = new, jax.device_put(new.stacked[0], variable.value.sharding)
        elif isinstance(new, PerReplica) and not keep and not getattr(variable, "_jdist_on_read", False) \
                and not getattr(variable, "_jdist_drifts", False):  # a NONE MirroredVariable keeps its copies
            raise ValueError(
                f"strategy.run assigned the Keras variable {variable.path!r} different values on different "
                "replicas, so it is no longer mirrored. Update it identically on every replica: apply gradients "
                "with optimizer.apply_gradients (which sums them over the replicas), or all_reduce the value "
                "before assigning it (or give a tf.Variable an aggregation: tf.VariableAggregation.MEAN, SUM or "
                "ONLY_FIRST_REPLICA).")
    for i, (variable, new) in enumerate(zip(variables, news)):
        if i in locals_:
            variable.assign(new)
            variable._jdist_copies = (strategy, variable.value, locals_[i])
        elif not _received(variable, new):
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
