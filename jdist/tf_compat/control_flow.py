"""TF's control flow (`tf.cond`, `tf.case`, `tf.while_loop`, `tf.map_fn`, `tf.scan`, `tf.foldl`/`foldr`,
`tf.no_op`, `tf.group`, `tf.identity_n`) over JAX's `lax` primitives.

A predicate with a value (a Python bool, numpy, a concrete JAX array) runs one branch in Python, as TF's eager
mode does; inside compiled code (`strategy.run`, `jax.jit`: a traced value) `tf.cond` is `lax.cond` and
`tf.while_loop` is `lax.while_loop`, so both branches must give the same structure, dtypes and shapes (TF
allows shapes to differ; XLA does not). A branch of a traced `tf.cond` may assign Keras variables (`tf.Variable`,
a model's or metric's) inside `strategy.run` or a compiled `tf.function`, as TF's may; other control flow
(`while_loop`, `case`) may only return values. Observed in TF 2.21: `while_loop` returns the container its
`loop_vars` came in (`(x,)` gives a 1-tuple, `[x]` a 1-list), and a body may return a bare value for one loop
variable; `map_fn` refuses scalars; `case` with no predicate true and no default is an InvalidArgumentError.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.ops import convert_to_tensor
from jdist.tf_compat.predicates import tracing


def _is_traced(*values: Any) -> bool:
    return any(isinstance(v, Tracer) for v in jax.tree.leaves(values))


def _concrete_pred(pred: Any, what: str) -> bool | None:
    """The predicate's value, or None when it is traced (its value is known only when the program runs)."""
    if _is_traced(pred):
        if np.ndim(pred) != 0:
            raise ValueError(f"{what}: the predicate must be a scalar, but it has shape {tuple(np.shape(pred))}.")
        return None
    value = np.asarray(pred)
    if value.ndim != 0:
        raise InvalidArgumentError(message=f"{what}: the predicate must be a scalar, but it has shape "
                                           f"{list(value.shape)}")
    return bool(value)


def _check_callable(fn: Any, name: str) -> None:
    if not callable(fn):
        raise TypeError(f"'{name}' must be callable.")


def _branches_differ(error: Exception, what: str) -> TypeError:
    return TypeError(
        f"true_fn and false_fn arguments to {what} must have the same number, type, and overall structure of return "
        f"values (inside compiled code both branches are compiled, and XLA also needs equal shapes and dtypes: cast "
        f"or pad one branch's result). JAX: {error}")


def cond(pred: Any, true_fn: Callable[[], Any] | None = None, false_fn: Callable[[], Any] | None = None,
         name: str | None = None) -> Any:
    """`tf.cond`: one branch run in Python for a known predicate, `lax.cond` for a traced one."""
    _check_callable(true_fn, "true_fn")
    _check_callable(false_fn, "false_fn")
    assert true_fn is not None and false_fn is not None
    value = _concrete_pred(pred, "tf.cond")
    if value is not None:
        return true_fn() if value else false_fn()
    try:
        return _assigning_cond(jnp.asarray(pred, bool), true_fn, false_fn)
    except TypeError as error:
        raise _branches_differ(error, "tf.cond") from error


def _assigning_cond(pred: Any, true_fn: Callable[[], Any], false_fn: Callable[[], Any]) -> Any:
    """`lax.cond` whose branches may assign Keras variables (`lambda: v.assign_add(1.0)`), as TF's may.

    Inside `strategy.run` and a compiled `tf.function` the variables live in a Keras `StatelessScope`. Each
    branch runs in a scope of its own that starts from it; the variables either branch assigns (found by
    tracing both once, abstractly) are carried out of `lax.cond` as outputs and assigned in the step's scope."""
    from keras.src.backend.common.stateless_scope import get_stateless_scope

    outer = get_stateless_scope()
    if outer is None:
        return jax.lax.cond(pred, lambda: true_fn(), lambda: false_fn())
    assigned: dict[int, Any] = {}
    for fn in (true_fn, false_fn):
        jax.eval_shape(lambda fn=fn: _run_recording(fn, outer, {}, assigned)[0])
    if not assigned:
        return jax.lax.cond(pred, lambda: true_fn(), lambda: false_fn())
    variables = list(assigned.values())
    current = [_current(v, outer) for v in variables]

    def branch(fn: Callable[[], Any]) -> Callable[[list], tuple[Any, list]]:
        def run(values: list) -> tuple[Any, list]:
            out, scope = _run_recording(fn, outer, dict(zip(map(id, variables), values)), {})
            return out, [_current(v, scope) for v in variables]
        return run

    out, new_values = jax.lax.cond(pred, branch(true_fn), branch(false_fn), current)
    for variable, new in zip(variables, new_values):
        outer.add_update((variable, new))
    return out


def _current(variable: Any, scope: Any) -> Any:
    value = scope.get_current_value(variable)
    return variable.value if value is None else value


def _run_recording(fn: Callable[[], Any], outer: Any, values: dict[int, Any], assigned: dict[int, Any]) -> Any:
    """`fn()` in a StatelessScope that starts from `outer`'s values (and `values`); records what it assigns."""
    import keras

    class Recording(keras.StatelessScope):
        def add_update(self, update: tuple) -> None:
            assigned[id(update[0])] = update[0]
            super().add_update(update)

    scope = Recording()
    scope.state_mapping = {**outer.state_mapping, **values}
    with scope:
        out = fn()
    return out, scope


def _case_error(text: str, flags: Sequence[bool]) -> InvalidArgumentError:
    return InvalidArgumentError(message=f"Input error: {text}: {', '.join(str(bool(f)) for f in flags)}")


def case(pred_fn_pairs: Sequence[tuple[Any, Callable[[], Any]]] | Mapping[Any, Callable[[], Any]],
         default: Callable[[], Any] | None = None, exclusive: bool = False, strict: bool = False,
         name: str = "case") -> Any:
    """`tf.case`: the first pair whose predicate holds, else `default`.

    With known predicates it raises TF's errors (none true and no default; more than one true with
    `exclusive=True`). With traced ones it is `lax.switch`, and both errors are raised from the host when the
    program runs (TF asserts at run time too)."""
    pairs = list(pred_fn_pairs.items()) if isinstance(pred_fn_pairs, Mapping) else list(pred_fn_pairs)
    if not pairs:
        raise ValueError("tf.case needs at least one (predicate, callable) pair.")
    for pair in pairs:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"Each entry in pred_fn_pairs must be a 2-tuple (predicate, callable), got {pair!r}.")
        _check_callable(pair[1], "fn")
    if default is not None:
        _check_callable(default, "default")
    preds = [p for p, _ in pairs]
    fns = [f for _, f in pairs]
    if not _is_traced(preds):
        flags = [bool(_concrete_pred(p, "tf.case")) for p in preds]
        if exclusive and sum(flags) > 1:
            raise _case_error("exclusive=True: more than 1 conditions evaluated as True", flags)
        for flag, fn in zip(flags, fns):
            if flag:
                return fn()
        if default is None:
            raise _case_error("None of conditions evaluated as True", flags)
        return default()
    stacked = jnp.stack([jnp.asarray(p, bool).reshape(()) for p in preds])
    if exclusive or default is None:
        def check(flags: np.ndarray) -> None:
            if exclusive and int(np.sum(flags)) > 1:
                raise _case_error("exclusive=True: more than 1 conditions evaluated as True", list(flags))
            if default is None and not flags.any():
                raise _case_error("None of conditions evaluated as True", list(flags))
        jax.debug.callback(check, stacked)
    branches = [*fns, default] if default is not None else fns
    index = jnp.where(jnp.any(stacked), jnp.argmax(stacked), len(branches) - 1)
    try:
        return jax.lax.switch(index, [lambda f=f: f() for f in branches])
    except TypeError as error:
        raise _branches_differ(error, "tf.case") from error


def _as_loop_vars(values: Any, like: list | tuple, what: str) -> list:
    if len(like) == 1 and not isinstance(values, (list, tuple)):
        values = [values]  # TF packs a bare value for one loop variable (observed inside tf.function)
    if not isinstance(values, (list, tuple)) or len(values) != len(like):
        raise ValueError(f"tf.while_loop: {what} returned {values!r}, which does not have the structure of "
                         f"loop_vars ({len(like)} values in a {type(like).__name__}).")
    if jax.tree.structure(list(values)) != jax.tree.structure(list(like)):
        raise ValueError(f"tf.while_loop: {what} returned a value whose nested structure differs from loop_vars: "
                         f"{jax.tree.structure(list(values))} vs {jax.tree.structure(list(like))}.")
    return list(values)


def while_loop(cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Sequence[Any],
               shape_invariants: Any = None, parallel_iterations: int = 10, back_prop: bool = True,
               swap_memory: bool = False, maximum_iterations: Any = None, name: str | None = None) -> Any:
    """`tf.while_loop`: a Python loop on values, `lax.while_loop` inside compiled code (while JAX traces).

    The result has `loop_vars`' container type; in compiled code each loop variable keeps its dtype and shape
    (`shape_invariants` cannot relax that: XLA's loops have fixed shapes)."""
    _check_callable(cond, "cond")
    _check_callable(body, "body")
    if not isinstance(loop_vars, (list, tuple)) or not loop_vars:
        raise ValueError("'loop_vars' must be provided as a non-empty tuple or list, e.g. loop_vars=(i,) for one "
                         f"loop variable; got {loop_vars!r}.")
    container = type(loop_vars) if type(loop_vars) in (list, tuple) else tuple
    values = list(loop_vars)
    if not tracing() and not _is_traced(values, maximum_iterations):
        limit = None if maximum_iterations is None else int(np.asarray(maximum_iterations))
        count = 0
        while (limit is None or count < limit) and bool(np.asarray(cond(*values))):
            values = _as_loop_vars(body(*values), values, "body")
            count += 1
        return container(values)

    values = jax.tree.map(jnp.asarray, values)
    limit = None if maximum_iterations is None else jnp.asarray(maximum_iterations)

    def keep_going(state: tuple[Any, list]) -> Any:
        count, current = state
        go = jnp.asarray(cond(*current), bool).reshape(())
        return go if limit is None else jnp.logical_and(count < limit, go)

    def step(state: tuple[Any, list]) -> tuple[Any, list]:
        count, current = state
        new = _as_loop_vars(body(*current), current, "body")
        new = jax.tree.map(jnp.asarray, new)
        for i, (before, after) in enumerate(zip(jax.tree.leaves(current), jax.tree.leaves(new))):
            if before.dtype != after.dtype or before.shape != after.shape:
                raise TypeError(
                    f"Loop var {i} enters the loop with type {before.dtype}{list(before.shape)} but has type "
                    f"{after.dtype}{list(after.shape)} after 1 iteration. Its dtype and shape should remain "
                    "constant: cast the body's result (tf.cast) or start the loop with the final dtype.")
        return count + 1, new

    _, values = jax.lax.while_loop(keep_going, step, (jnp.int32(0), values))
    return container(values)


def _signature_dtypes(signature: Any) -> Any:
    """A structure of numpy dtypes from `fn_output_signature` (DTypes or TensorSpecs)."""
    return jax.tree.map(lambda s: numpy_dtype(getattr(s, "dtype", s)), signature,
                        is_leaf=lambda s: s is not None and not isinstance(s, (list, tuple, dict)))


def _leading_size(elems: Any, what: str) -> int:
    leaves = [jnp.asarray(e) if _is_traced(e) else np.asarray(e) for e in jax.tree.leaves(elems)]
    if not leaves:
        raise ValueError(f"{what}: elems must contain at least one tensor.")
    if any(leaf.ndim == 0 for leaf in leaves):
        raise ValueError("Elements in elems must be 1+ dimensional Tensors, not scalars")
    sizes = {leaf.shape[0] for leaf in leaves}
    if len(sizes) != 1:
        raise ValueError(f"{what}: all elems must have the same first dimension, got sizes {sorted(sizes)}.")
    return sizes.pop()


def map_fn(fn: Callable[[Any], Any], elems: Any, dtype: Any = None, parallel_iterations: int | None = None,
           back_prop: bool = True, swap_memory: bool = False, infer_shape: bool = True, name: str | None = None,
           fn_output_signature: Any = None) -> Any:
    """`tf.map_fn`: `fn` over the first dimension of `elems` (a tensor or a nest of them), as `lax.map`.

    `fn_output_signature` (or TF1's `dtype`) casts the results to its dtypes; without it the results keep the
    dtypes `fn` gives (TF 2.21 refuses a dtype change without a signature)."""
    _check_callable(fn, "fn")
    size = _leading_size(elems, "tf.map_fn")
    signature = fn_output_signature if fn_output_signature is not None else dtype
    out = _host_map(fn, elems, size, numbers_as_elems=signature is None)
    if out is None:
        out = jax.lax.map(fn, jax.tree.map(jnp.asarray, elems))
    if signature is None:
        return out
    dtypes = _signature_dtypes(signature)
    if jax.tree.structure(dtypes) != jax.tree.structure(out):
        raise ValueError(f"tf.map_fn: fn's results {jax.tree.structure(out)} do not have the structure of "
                         f"fn_output_signature {jax.tree.structure(dtypes)}.")
    return jax.tree.map(lambda x, d: x.astype(d), out, dtypes)


def _host_map(fn: Callable[[Any], Any], elems: Any, size: int, numbers_as_elems: bool) -> Any:
    """`fn` over host (numpy) `elems` one element at a time, as TF's eager map_fn runs it, stacked: results keep
    TF's dtypes (observed, TF 2.21: argmin over a map_fn result is int64, float32 results print
    `<dtype: 'float32'>`), which a compiled `lax.map` would narrow (int64 to int32) and leave on the device.
    None where an element is a JAX value: `lax.map` then.

    Python numbers `fn` returns take the dtype of the matching element without a signature (TF's default
    signature is the elements', observed: `map_fn(lambda x: 1.5, float32 elems)` float32, `lambda x: 1` over
    int32 int32), else TF's default dtypes."""
    leaves = jax.tree.leaves(elems)
    if size == 0 or any(isinstance(leaf, jax.Array) or not isinstance(leaf, np.ndarray) for leaf in leaves):
        return None  # no element to learn the results' structure from, or device values
    results = [_numbers_as_tensors(fn(jax.tree.map(lambda e, i=i: e[i], elems)), elems, numbers_as_elems)
               for i in range(size)]
    return jax.tree.map(lambda *parts: (jnp if any(isinstance(p, jax.Array) for p in parts) else np).stack(parts),
                        *results)


def _numbers_as_tensors(result: Any, elems: Any, numbers_as_elems: bool) -> Any:
    """`result`'s Python numbers as tensors: of the matching element's dtype where `result` has the elements'
    structure and `numbers_as_elems`, else of TF's default dtypes (int32, float32)."""
    def number(x: Any) -> bool:
        return isinstance(x, (bool, int, float))
    if not any(number(x) for x in jax.tree.leaves(result)):
        return result
    if numbers_as_elems and jax.tree.structure(result) == jax.tree.structure(elems):
        return jax.tree.map(lambda x, e: _number_as(x, e.dtype) if number(x) else x, result, elems)
    return jax.tree.map(lambda x: convert_to_tensor(x) if number(x) else x, result)


def _number_as(value: bool | int | float, dtype: np.dtype) -> Any:
    """`value` as a tensor of the elements' `dtype`, or TF's error for a number of another kind (observed, TF
    2.21: `map_fn(lambda x: 1.5, int32 elems)` InvalidArgumentError "TensorArray dtype is int32 but Op is trying
    to write dtype float32")."""
    try:
        return convert_to_tensor(value, dtype=dtype)
    except TypeError:
        written = np.dtype(convert_to_tensor(value).dtype).name
        raise InvalidArgumentError(None, None, f"TensorArray dtype is {np.dtype(dtype).name} but Op is trying to "
                                               f"write dtype {written}: tf.map_fn's results take the elements' "
                                               "dtypes unless fn_output_signature names others") from None


def _scan(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any, reverse: bool, what: str) -> tuple[Any, Any]:
    """(final accumulator, stacked accumulators) of `fn` over `elems`, TF's first element when no initializer."""
    _check_callable(fn, "fn")
    _leading_size(elems, what)
    elems = jax.tree.map(jnp.asarray, elems)
    if initializer is None:
        first = jax.tree.map(lambda e: e[-1] if reverse else e[0], elems)
        rest = jax.tree.map(lambda e: e[:-1] if reverse else e[1:], elems)
        carry = first
    else:
        rest, carry = elems, jax.tree.map(jnp.asarray, initializer)

    def step(acc: Any, x: Any) -> tuple[Any, Any]:
        new = fn(acc, x)
        if jax.tree.structure(new) != jax.tree.structure(acc):
            raise ValueError(f"{what}: fn returned {jax.tree.structure(new)}, which does not have the structure of "
                             f"the accumulator {jax.tree.structure(acc)}.")
        new = jax.tree.map(lambda n, a: jnp.asarray(n).astype(a.dtype), new, acc)
        return new, new

    final, stacked = jax.lax.scan(step, carry, rest, reverse=reverse)
    if initializer is None:
        if reverse:
            stacked = jax.tree.map(lambda s, f: jnp.concatenate([s, f[None]]), stacked, first)
        else:
            stacked = jax.tree.map(lambda f, s: jnp.concatenate([f[None], s]), first, stacked)
    return final, stacked


def scan(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any = None, parallel_iterations: int = 10,
         back_prop: bool = True, swap_memory: bool = False, infer_shape: bool = True, reverse: bool = False,
         name: str | None = None) -> Any:
    """`tf.scan`: every accumulator of `fn(acc, x)` over `elems`' first dimension (`lax.scan`)."""
    return _scan(fn, elems, initializer, reverse, "tf.scan")[1]


def foldl(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any = None, parallel_iterations: int = 10,
          back_prop: bool = True, swap_memory: bool = False, name: str | None = None) -> Any:
    """`tf.foldl`: the last accumulator of `fn(acc, x)` from the first element to the last."""
    return _scan(fn, elems, initializer, False, "tf.foldl")[0]


def foldr(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any = None, parallel_iterations: int = 10,
          back_prop: bool = True, swap_memory: bool = False, name: str | None = None) -> Any:
    """`tf.foldr`: the last accumulator of `fn(acc, x)` from the last element to the first."""
    return _scan(fn, elems, initializer, True, "tf.foldr")[0]


def no_op(name: str | None = None) -> None:
    """`tf.no_op`: nothing (TF 2.21 returns None eagerly); JAX orders effects by data, not control edges."""
    return None


def group(*inputs: Any, name: str | None = None) -> None:
    """`tf.group`: None, as TF's eager result; the inputs are computed already (JAX has no control edges)."""
    return None


def identity_n(input: Sequence[Any], name: str | None = None) -> list[Any]:  # noqa: A002 (TF's name)
    """`tf.identity_n`: the tensors as a list, each converted."""
    if not isinstance(input, (list, tuple)):
        raise TypeError(f"tf.identity_n takes a list of tensors, got {type(input).__name__}: wrap one in a list.")
    return [convert_to_tensor(x) for x in input]
