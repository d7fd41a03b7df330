"""`GradientTape` outside `strategy.run` and `tf.function`: TF's eager tape, by replaying its block.

    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.abs(net(x) - y))
    grads = tape.gradient(loss, net.trainable_variables)

JAX differentiates functions, not recorded operations, and an eager block is not a function. So
the tape keeps the block's source and the names it could read when it was entered; `gradient`
runs the block's statements again under `jax.grad`, with the sources' values (Keras variables, or
arrays bound to a name the block reads, as `tape.watch(x)` marks them) as the variables of
differentiation, and evaluates the `gradient` call's target expression (`loss`) in what the replay
bound (or, for a `gradient` call inside the block, the block's statements up to it and that call's
target). Keras variables are read through a `StatelessScope`, so what the block assigned (metric
updates, BatchNormalization's statistics) is assigned once, by the eager run, not again (and, as in TF,
not differentiated through). What is differentiated is what TF's tape records (`Watch`). The block must
be the `with` statement's own body in a source file or a notebook cell (linecache holds a cell's source;
a later cell may call `gradient`), not typed at a plain prompt. A `print`
written in the block is silent in the replay, so it prints once, as TF's; other Python side effects
(an append, a print in a function the block calls) happen again.
"""
from __future__ import annotations

import ast
import contextlib
import functools
import linecache
import traceback
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import jax
import jax.numpy as jnp

from jdist.interop import tape_attributes, tape_pause, unconnected

_REPLAYS = [0]  # replays of blocks running now (nested when a replayed block computes another gradient)


def replaying() -> bool:
    """Whether a block's statements are running again for its gradient (their `tf.print` printed already)."""
    return _REPLAYS[0] > 0


@contextlib.contextmanager
def _replay() -> Iterator[None]:
    _REPLAYS[0] += 1
    try:
        yield
    finally:
        _REPLAYS[0] -= 1


class _Reached(Exception):
    def __init__(self, target: Any):
        super().__init__("the replay reached tape.gradient")
        self.target = target


class _Replaying:
    """The tape as the replay sees it: `gradient` (called inside the block, as TF allows) ends the replay
    with its target; `watch` marks nothing (the sources given to `gradient` are differentiated);
    `stop_recording` pauses the differentiation of the replay in `namespace` (`tape_pause`)."""

    def __init__(self, namespace: dict[str, Any] | None = None, inputs: frozenset[str] = frozenset()):
        self._namespace, self._inputs = namespace, inputs

    def watch(self, tensor: Any) -> None:
        return None

    def reset(self) -> None:
        """What the block computed so far becomes constant; the differentiated inputs' names stay (a watch after
        the reset records them again; the real tape forgot the watches before it)."""
        if self._namespace is not None:
            self._namespace.update(tape_pause.forgotten(self._namespace, self._inputs))

    def stop_recording(self) -> Any:
        return tape_pause.Idle() if self._namespace is None else tape_pause.Paused(self._namespace)

    def gradient(self, target: Any, *args: Any, **kwargs: Any) -> Any:
        raise _Reached(target)

    jacobian = batch_jacobian = jvp = gradient


@dataclass
class Block:
    """A `with GradientTape() as tape:` block as entered: its statements and the names it could read."""

    code: types.CodeType
    filename: str
    statements: list[ast.stmt]
    namespace: dict[str, Any]
    module_globals: dict[str, Any] | None  # the module's globals when the block is at its top level (a cell)


def _tree(filename: str) -> ast.Module:
    source = "".join(linecache.getlines(filename))
    if not source:
        raise RuntimeError(
            f"GradientTape outside strategy.run replays its block from the source file, and {filename!r} has "
            "none (code typed at an interactive prompt or built with exec). Put the step in a function in a "
            "file, or compute the gradients with jax.grad over model.stateless_call.")
    return _parsed(filename, source)


@functools.lru_cache(maxsize=16)
def _parsed(filename: str, source: str) -> ast.Module:
    """A training loop enters a tape and calls `gradient` every step: its file is parsed once (per content)."""
    return ast.parse(source, filename)


def _enclosing(node: ast.AST, line: int, kinds: tuple[type, ...]) -> list[Any]:
    found: list[Any] = [n for n in ast.walk(node) if isinstance(n, kinds)]
    return [n for n in found if n.lineno <= line <= (n.end_lineno or n.lineno)]


def enter(frame: types.FrameType) -> Block:
    """The block of the `with` statement at `frame`'s current line (`frame` runs the `with`); its `as`
    name is bound, in the replay, to a stand-in whose `gradient` ends the replay."""
    filename = frame.f_code.co_filename
    withs = [w for w in _enclosing(_tree(filename), frame.f_lineno, (ast.With,))
             if any(w.lineno <= frame.f_lineno <= (item.context_expr.end_lineno or w.lineno) for item in w.items)]
    if not withs:
        raise RuntimeError(f"GradientTape: no `with` statement found at {filename}:{frame.f_lineno}.")
    block = max(withs, key=lambda w: w.lineno)  # the innermost
    namespace = {**frame.f_globals, **frame.f_locals}
    for item in block.items:
        if isinstance(item.optional_vars, ast.Name):
            namespace[item.optional_vars.id] = _Replaying()
    top_level = frame.f_code.co_name == "<module>"
    return Block(frame.f_code, filename, block.body, namespace, frame.f_globals if top_level else None)


def target_expression(block: Block, frame: types.FrameType) -> ast.expr:
    """The first argument of the `tape.gradient(...)` call running at `frame`'s current line: in the block's own
    function, or at the top level of the block's module (a notebook's next cell, as TF's guides call it)."""
    next_cell = block.module_globals is not None and frame.f_globals is block.module_globals and (
        frame.f_code.co_name == "<module>")
    if frame.f_code is not block.code and not next_cell:
        raise RuntimeError(
            "GradientTape outside strategy.run: tape.gradient must be called in the function (or module) "
            "whose `with` block recorded the tape; it replays the block and reads the target there.")
    filename = frame.f_code.co_filename
    calls = [c for c in _enclosing(_tree(filename), frame.f_lineno, (ast.Call,))
             if isinstance(c.func, ast.Attribute) and c.func.attr in _METHODS and _target_argument(c) is not None]
    if not calls:
        raise RuntimeError(f"GradientTape: no `tape.gradient(target, sources)` call found at "
                           f"{filename}:{frame.f_lineno}.")
    # Several calls on one line (`print(t.gradient(z, c), t.gradient(w, c))`): the running instruction's
    # source position is the call's own.
    position = list(frame.f_code.co_positions())[frame.f_lasti // 2]
    running = [c for c in calls if (c.lineno, c.end_lineno, c.col_offset, c.end_col_offset) == position]
    found = _target_argument((running or [max(calls, key=lambda c: (c.lineno, c.col_offset))])[0])
    assert found is not None
    return found


# the tape's (and ForwardAccumulator's) methods whose first argument is the target
_METHODS = ("gradient", "jacobian", "batch_jacobian", "jvp")


def _target_argument(call: ast.Call) -> ast.expr | None:
    """A tape method call's target: its first argument, or `target=`."""
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "target"), None)


def _host_read(block: Block, err: BaseException) -> RuntimeError:
    """The error for a block that reads a value on the host, which the replay's abstract values cannot give."""
    lines = [frame.lineno for frame in traceback.extract_tb(err.__traceback__) if frame.filename == block.filename]
    where = f"{block.filename}:{lines[-1]}" if lines else block.filename
    return RuntimeError(
        f"tape.gradient replays the tape's `with` block under jax.grad, where values are abstract, and the block "
        f"reads one on the host at {where} (float(), .numpy(), an `if` on a tensor): move that read after the "
        "block, or run the step in a tf.function (or strategy.run), which compiles it instead of replaying it.")


def _silent(*args: Any, **kwargs: Any) -> None:
    """`print` in the replay of a block."""


@functools.cache
def _assigning_scope() -> type:
    import keras

    class Assigning(keras.StatelessScope):
        """The replay's variables: an assignment in the block holds its value from there on, but as a constant,
        as TF's tape does not record through an assignment (observed, TF 2.21: `x1.assign_add(x0)` then
        `y = x1**2` in the block gives dy/dx0 None)."""

        def add_update(self, update: tuple) -> None:
            variable, value = update
            super().add_update((variable, jax.lax.stop_gradient(value)))

        def get_current_value(self, variable: Any) -> Any:
            """A variable this tape does not differentiate reads the enclosing replay's value: an outer tape
            differentiates through an inner tape's gradient (a gradient penalty, TF's nested tapes)."""
            value = super().get_current_value(variable)
            outer = getattr(self, "original_scope", None)
            return outer.get_current_value(variable) if value is None and outer is not None else value

    return Assigning


def variables_read(block: Block) -> list:
    """The Keras variables the block reads, in the order it first reads them: its statements run once more,
    without assigning anything and without printing (for `watched_variables`)."""
    import keras

    seen: dict[int, Any] = {}

    class Recording(keras.StatelessScope):
        def get_current_value(self, variable: Any) -> Any:
            seen.setdefault(id(variable), variable)
            return super().get_current_value(variable)

    namespace = {**block.namespace, "print": _silent}
    with Recording(), _replay():
        try:
            exec(compile(ast.Module(body=block.statements, type_ignores=[]), block.filename, "exec"), namespace)
        except _Reached:
            pass
    return list(seen.values())


def _assigned(statement: ast.stmt) -> set[str]:
    """The names a top-level statement of the block binds (`y = ...`, `a, b = ...`, `y += ...`)."""
    return {n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


@dataclass
class Watch:
    """What TF's tape records: the objects `tape.watch` was given, and whether trainable variables the block
    reads are watched too (`watch_accessed_variables`)."""

    watched: list
    accessed: bool = True

    def records(self, source: Any) -> bool:
        import keras

        if any(source is w for w in self.watched):
            return True
        return self.accessed and isinstance(source, keras.Variable) and bool(source.trainable)


def gradient(block: Block, target: ast.expr, sources: list, output_gradients: Any,
             unconnected_gradients: Any = None, watch: Watch | None = None,
             caller_names: dict[str, Any] | None = None, jacobian: Callable[[Any], Any] | None = None,
             differentiate: Callable[[Callable[[list], Any], list], list] | None = None) -> list:
    """d sum(target [* output_gradients]) / d source, for each source, by replaying `block`; with `jacobian`,
    the Jacobian of `jacobian(target)` (`unconnected.jacobians`); with `differentiate`, what it makes of the
    replay as a function of the sources' values (`ForwardAccumulator.jvp`).

    As TF's tape: a variable counts if trainable (or watched), another tensor if `tape.watch` was given it, or if
    the block computed it (a name a top-level statement bound: the replay holds it at its value from there on);
    any other source, or one the target does not depend on, gets None (see `jdist.interop.unconnected`)."""
    import keras

    watch = watch or Watch([])
    names: dict[int, list[str]] = {}
    for name, value in block.namespace.items():
        names.setdefault(id(value), []).append(name)
    last = {name: index for index, statement in enumerate(block.statements) for name in _assigned(statement)}
    computed: dict[int, tuple[int, list[str]]] = {}  # a value the block computed: (its last statement, its names)
    for name, index in sorted(last.items()):
        value = (caller_names or {}).get(name)
        if value is not None and not isinstance(value, keras.Variable):
            computed.setdefault(id(value), (index, []))[1].append(name)
    variables = [s for s in sources if isinstance(s, keras.Variable) and watch.records(s)]
    inputs = [s for s in sources if not isinstance(s, keras.Variable) and watch.records(s) and id(s) not in computed]
    results = [s for s in sources if not isinstance(s, keras.Variable) and id(s) in computed]
    held_by = tape_attributes.find(block.namespace, [s for s in inputs if id(s) not in names])  # `model.weights`
    unknown = [type(s).__name__ for s in sources if not isinstance(s, keras.Variable) and id(s) not in computed
               and (id(s) not in names and id(s) not in held_by if watch.records(s) else not hasattr(s, "numpy"))]
    if unknown:
        raise ValueError(
            f"tape.gradient: sources of types {unknown} are neither variables nor values bound to a name the "
            "tape's block reads; pass Keras variables (model.trainable_variables, tf.Variable) or the array a "
            "name in the block holds (as `tape.watch(x)` watches it).")
    statements = [compile(ast.Module(body=[s], type_ignores=[]), block.filename, "exec") for s in block.statements]
    expression = compile(ast.Expression(body=target), block.filename, "eval")

    def replayed(values: list) -> Any:
        namespace = dict(block.namespace)
        namespace["print"] = _silent  # the eager run printed already
        kept = frozenset(name for array in inputs for name in names.get(id(array), ()))
        namespace.update({name: _Replaying(namespace, kept) for name, value in block.namespace.items()
                          if isinstance(value, _Replaying)})
        by_id = {id(s): v for s, v in zip(sources, values)}
        for array in inputs:
            for name in names.get(id(array), ()):
                namespace[name] = by_id[id(array)]
        held: dict[int, list[tuple[str, Any]]] = {}
        for s in results:
            index, bound = computed[id(s)]
            held.setdefault(index, []).extend((name, by_id[id(s)]) for name in bound)
        mapping = [(v, by_id[id(v)]) for v in variables]
        with _assigning_scope()(state_mapping=mapping), _replay(), tape_attributes.rebound(held_by, by_id):
            try:
                for index, statement in enumerate(statements):
                    exec(statement, namespace)
                    namespace.update(held.get(index, []))
                result = eval(expression, namespace)
            except _Reached as reached:  # `gradient` called inside the block: the statements up to it
                result = reached.target
            except jax.errors.ConcretizationTypeError as err:
                raise _host_read(block, err) from err
            if jacobian is not None:
                return jacobian(result)
            return unconnected.total(result, output_gradients)  # in the scope: a variable target reads its value

    primal = [jnp.asarray(s.value) if isinstance(s, keras.Variable) else jnp.asarray(s) for s in sources]
    if differentiate is not None:
        return differentiate(replayed, primal)
    if jacobian is not None:
        return unconnected.jacobians(replayed, primal, unconnected_gradients)
    return unconnected.gradients(replayed, primal, unconnected_gradients)  # what is not recorded is not read: None
