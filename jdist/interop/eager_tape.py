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
updates, BatchNormalization's statistics) is assigned once, by the eager run, not again. The
block must be the `with` statement's own body in a source file (not typed at a prompt). A `print`
written in the block is silent in the replay, so it prints once, as TF's; other Python side effects
(an append, a print in a function the block calls) happen again.
"""
from __future__ import annotations

import ast
import functools
import linecache
import traceback
import types
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from jdist.interop import unconnected


class _Reached(Exception):
    def __init__(self, target: Any):
        super().__init__("the replay reached tape.gradient")
        self.target = target


class _Replaying:
    """The tape as the replay sees it: `gradient` (called inside the block, as TF allows) ends the replay
    with its target; `watch` marks nothing (the sources given to `gradient` are differentiated)."""

    def watch(self, tensor: Any) -> None:
        return None

    def gradient(self, target: Any, *args: Any, **kwargs: Any) -> Any:
        raise _Reached(target)


@dataclass
class Block:
    """A `with GradientTape() as tape:` block as entered: its statements and the names it could read."""

    code: types.CodeType
    filename: str
    statements: list[ast.stmt]
    namespace: dict[str, Any]


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
    return Block(frame.f_code, filename, block.body, namespace)


def target_expression(block: Block, frame: types.FrameType) -> ast.expr:
    """The first argument of the `tape.gradient(...)` call running at `frame`'s current line."""
    if frame.f_code is not block.code:
        raise RuntimeError(
            "GradientTape outside strategy.run: tape.gradient must be called in the function (or module) "
            "whose `with` block recorded the tape; it replays the block and reads the target there.")
    calls = [c for c in _enclosing(_tree(block.filename), frame.f_lineno, (ast.Call,))
             if isinstance(c.func, ast.Attribute) and c.func.attr == "gradient" and c.args]
    if not calls:
        raise RuntimeError(f"GradientTape: no `tape.gradient(target, sources)` call found at "
                           f"{block.filename}:{frame.f_lineno}.")
    # Several calls on one line (`print(t.gradient(z, c), t.gradient(w, c))`): the running instruction's
    # source position is the call's own.
    position = list(frame.f_code.co_positions())[frame.f_lasti // 2]
    running = [c for c in calls if (c.lineno, c.end_lineno, c.col_offset, c.end_col_offset) == position]
    return (running or [max(calls, key=lambda c: (c.lineno, c.col_offset))])[0].args[0]


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


def gradient(block: Block, target: ast.expr, sources: list, output_gradients: Any,
             unconnected_gradients: Any = None) -> list:
    """d sum(target [* output_gradients]) / d source, for each source, by replaying `block` (None for a source
    the target does not depend on, as TF's, see `jdist.interop.unconnected`)."""
    import keras

    variables = [s for s in sources if isinstance(s, keras.Variable)]
    arrays = [s for s in sources if not isinstance(s, keras.Variable)]
    names: dict[int, list[str]] = {}
    for name, value in block.namespace.items():
        names.setdefault(id(value), []).append(name)
    unbound = [type(a).__name__ for a in arrays if id(a) not in names]
    if unbound:
        raise ValueError(
            f"tape.gradient: sources of types {unbound} are neither variables nor values bound to a name the "
            "tape's block reads; pass Keras variables (model.trainable_variables, tf.Variable) or the array a "
            "name in the block holds (as `tape.watch(x)` watches it).")
    statements = compile(ast.Module(body=block.statements, type_ignores=[]), block.filename, "exec")
    expression = compile(ast.Expression(body=target), block.filename, "eval")

    def replayed(values: list) -> Any:
        namespace = dict(block.namespace)
        namespace["print"] = _silent  # the eager run printed already
        for array, value in zip(arrays, values[len(variables):]):
            for name in names[id(array)]:
                namespace[name] = value
        with keras.StatelessScope(state_mapping=list(zip(variables, values[:len(variables)]))):
            try:
                exec(statements, namespace)
                result = jnp.asarray(eval(expression, namespace))
            except _Reached as reached:  # `gradient` called inside the block: the statements up to it
                result = jnp.asarray(reached.target)
            except jax.errors.ConcretizationTypeError as err:
                raise _host_read(block, err) from err
        if output_gradients is not None:
            result = result * jnp.asarray(output_gradients)
        return jnp.sum(result)

    primal = [jnp.asarray(v.value) for v in variables] + [jnp.asarray(a) for a in arrays]
    grads = iter(unconnected.gradients(replayed, primal, unconnected_gradients))
    by_id = {id(s): next(grads) for s in variables + arrays}
    return [by_id[id(s)] for s in sources]
