"""A `tf.data` function called as TF 2.21 calls it: traced once, when the dataset is made.

Observed in TF 2.21: `range(3).map(f)` with a Python `print` in `f` prints once, at `map`, and never when the
dataset is iterated, however many passes; a `tf.print` in `f` prints per element, when iterated, and so does a
`tf.py_function`'s Python function. The same for `filter`, `take_while`, `flat_map`, `interleave`, `scan`,
`reduce`, `group_by_window` and `bucket_by_sequence_length`. TF also checks what the function does then: a
predicate that does not return a `tf.bool` scalar, a `flat_map` function that does not return a dataset, a `map`
function that returns None, an op on two dtypes (TypeError "Input 'y' of 'AddV2' Op has type int32 that does not
match type int64 of argument 'x'.") raise at creation.

jdist's trace is one call when the dataset is made where it can be (`single_trace`: by JAX, with strict dtype
promotion, so that an op on two dtypes fails as TF's trace does; TF 2.21, observed, calls a `map`, `filter`,
`reduce` or `scan` function once, a counter in it reading 1 after two passes); else, as before, a call on
placeholder values of the input's spec (exact dtypes: its errors) and one on abstract JAX values
(`shape_inference.trace`, whose inputs print as TF's `Tensor("args_0:0", ...)`) where those can be traced (not
text, not host-only ops); its Python prints go out once, and what TF only runs per element (`tf.print`,
`tf.py_function`) is dropped; Keras variables are not assigned (a `StatelessScope`). The calls per element
(`quiet`) then hold the function's Python prints back, while `tf.print` and `tf.py_function` still print. What a
function does besides printing (a counter it increments) happens at creation, and per element only where
the map cannot run compiled (`jdist.tfdata.compiled`); a function that raises on any values (the JAX trace and
the call on placeholders raise alike) raises at creation, as TF's (`staging`).
"""
from __future__ import annotations

import contextlib
import functools
import io
import re
import sys
import threading
from typing import Any, Callable

import numpy as np

from jdist import thread_stdout
from jdist.tfdata import graph_dtypes, seeding, shape_inference, staging, structure, traced_draws

_STATE = threading.local()


def tracing() -> bool:
    """Whether this thread is making a trace call: `tf.py_function` and `tf.numpy_function` then return
    placeholders of their `Tout` without calling their Python function (TF's trace does not run it: observed,
    TF 2.21, a `py_function` counting its calls counts none when the dataset is made). Every such call asks:
    counted (`_host_calls`), since a function that calls one cannot run compiled."""
    _STATE.host_calls = getattr(_STATE, "host_calls", 0) + 1
    return getattr(_STATE, "depth", 0) > 0


def in_trace() -> bool:
    """Whether this thread is tracing a `tf.data` function (TF's graph mode: its ops' trace-time errors)."""
    return getattr(_STATE, "depth", 0) > 0


def _traced(fn: Callable[..., Any], input_spec: Any, strict: bool = False) -> Any:
    """`shape_inference.trace(fn, input_spec)`, its `Trace` marked where `fn` called a `tf.py_function` or
    `tf.numpy_function` (TF runs those per element: the trace is then not run compiled)."""
    before = getattr(_STATE, "host_calls", 0)
    out = shape_inference.trace(fn, input_spec, strict)
    out.host_calls = getattr(_STATE, "host_calls", 0) != before
    return out


def note_host_output(values: list) -> None:
    """`tf.py_function` / `tf.numpy_function` outputs made while tracing (their shapes are unknown to TF)."""
    made = getattr(_STATE, "host_outputs", None)
    if made is not None:
        made.extend(values)


@contextlib.contextmanager
def _tracing() -> Any:
    _STATE.depth = getattr(_STATE, "depth", 0) + 1
    try:
        yield
    finally:
        _STATE.depth -= 1


class Call:
    """The outcome of a trace call: `ok` and the function's `output`, or the `error` it raised."""

    def __init__(self, ok: bool, output: Any = None, error: BaseException | None = None):
        self.ok, self.output, self.error = ok, output, error
        self.host: list[bool] = []  # per output: a `tf.py_function`'s (set by `trace_map`)
        self.trace_error: BaseException | None = None  # the JAX trace's error, where it raised (`trace_map`)


_MISMATCH = re.compile(r"cannot compute (\w+) as input #1\(zero-based\) was expected to be a (\w+) tensor but is "
                       r"a (\w+) tensor")
_GRAPH_NAMES = {"float": "float32", "double": "float64", "half": "float16"}  # eager error names -> graph ones


def graph_error(error: BaseException) -> Exception | None:
    """TF's error, when it traces a function, for an op on two dtypes (TF 2.21, observed at `range(3).map(lambda
    x: x + tf.constant(1))`: TypeError "Input 'y' of 'AddV2' Op has type int32 that does not match type int64 of
    argument 'x'."), where eagerly (what jdist ran) it is InvalidArgumentError; a `graph_dtypes.TraceError`
    itself; None for any other error."""
    if isinstance(error, graph_dtypes.TraceError):
        return error
    found = _MISMATCH.search(str(error)) if type(error).__name__ == "InvalidArgumentError" else None
    if found is None:
        return None
    op, expected, got = found.groups()
    return TypeError(f"Input 'y' of '{op}' Op has type {_GRAPH_NAMES.get(got, got)} that does not match type "
                     f"{_GRAPH_NAMES.get(expected, expected)} of argument 'x'.")


def _call_split(call: Callable[[], Any], host_calls: bool = False, graph_errors: bool = True,
                stderr: bool = True) -> tuple[Call, str]:
    """`call()` with every print held back: its Python prints returned as text, what TF runs per element only
    (`tf.print` and `tf.py_function` print through `thread_stdout.shown`, to stdout or stderr) dropped.
    `host_calls`: `tf.py_function`s may call their function (on zeros, to learn their outputs' shapes).
    `graph_errors`: an op on two dtypes raises TF's trace-time TypeError (`graph_error`) at once. `stderr`:
    the streams replaced too (not in a JAX trace: a `tf.print` there keeps the stream it prints to per element;
    this thread's Python prints are held back all the same)."""
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink) if stderr else contextlib.nullcontext(), \
            contextlib.redirect_stderr(sink) if stderr else contextlib.nullcontext(), \
            thread_stdout.captured() as printed, \
            (contextlib.nullcontext() if host_calls else _tracing()), _stateless(), \
            seeding.drawing(seeding.PassRandom()):  # a trace's draws move no sequence on (TF's do not)
        try:
            outcome = Call(True, output=call())
        except Exception as error:  # noqa: BLE001 (the caller decides what a failed trace means)
            outcome = Call(False, error=error)
    converted = graph_error(outcome.error) if graph_errors and outcome.error is not None else None
    if isinstance(converted, graph_dtypes.TraceError):  # TF's text: "in user code: ..." (`staging`)
        raise staging.staged(converted) from converted
    if converted is not None:
        raise converted from outcome.error
    return outcome, printed.getvalue()


def _stateless() -> Any:
    """A Keras `StatelessScope` where Keras is in use: a trace must not assign Keras variables (a random layer's
    seed state would keep a JAX tracer, and the trace moves no random sequence on, as TF's does not)."""
    keras = sys.modules.get("keras")
    scope = getattr(keras, "StatelessScope", None)
    return scope() if scope is not None else contextlib.nullcontext()


@contextlib.contextmanager
def silenced() -> Any:
    """Everything this thread prints, held back: while an element spec is computed (TF computes it without
    running anything, so neither a Python `print` nor a `tf.print` shows)."""
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), thread_stdout.captured():
        yield


def _show(text: str) -> None:
    if text:  # to this thread's stdout now: held back in turn where an outer function's call is being made
        sys.stdout.write(text)


def trace_call(call: Callable[[], Any]) -> Call:
    """`call()` once as TF's trace runs the function: its Python prints shown, `tf.print` output dropped."""
    outcome, printed = _call_split(call)
    _show(printed)
    return outcome


def on_placeholder(fn: Callable[..., Any], input_spec: Any) -> Call:
    """`fn` traced as TF traces it, on placeholder values of `input_spec` (a tuple spread into arguments)."""
    try:
        element = structure.placeholder(input_spec)
    except (ValueError, TypeError, AttributeError) as error:  # a component of unknown rank: no call
        return Call(False, error=error)
    return trace_call(lambda: structure.call(fn, element))


def single_trace(fn: Callable[..., Any], input_spec: Any) -> shape_inference.Trace | None:
    """`fn` called once, as TF 2.21 calls it once (observed: a counter in a `map` or `filter` function reads 1 after
    two passes): traced by JAX with strict dtype promotion, so that an op on two dtypes, which TF's trace refuses
    (`graph_error`), fails here too. Its Python prints shown; its output, as the call on placeholders gives it,
    in `Trace.output` and which outputs a `tf.py_function` gave in `Trace.host`. None where it does not trace so
    (text, host-only code, an op on two dtypes, an error): the caller then makes the calls it made before, on
    placeholders (TF's dtype errors, its output) and by JAX (the function then runs more than once)."""
    if input_spec is None:
        return None
    outer, made = getattr(_STATE, "host_outputs", None), []
    _STATE.host_outputs = made
    try:
        with traced_draws.drawing():  # `tf.random` ops: drawn per element when the trace runs (TF's)
            outcome, printed = _call_split(lambda: _traced(fn, input_spec, strict=True), False, False,
                                           stderr=False)
    finally:
        _STATE.host_outputs = outer
    if not outcome.ok:
        return None
    trace = outcome.output
    host = {id(v) for v in made}
    trace.host = [i in host for i in trace.leaf_ids]
    _show(printed)
    return trace


def trace_map(map_func: Callable[..., Any], input_spec: Any) -> tuple[shape_inference.Trace | None, Call]:
    """`map`'s trace: once by JAX (`single_trace`) where it can; else the function on placeholders (its output,
    TF's dtype errors: `Call`), then by JAX where it traces (the `Trace` kept for the element spec); the
    function's Python prints shown once, from the JAX trace where there is one, else from the call on
    placeholders."""
    once = single_trace(map_func, input_spec)
    if once is not None:
        called = Call(True, output=once.output)
        called.host = once.host
        return once, called
    try:
        element = structure.placeholder(input_spec)
    except (ValueError, TypeError, AttributeError) as error:
        called, printed = Call(False, error=error), ""
    else:
        outer, made = getattr(_STATE, "host_outputs", None), []
        _STATE.host_outputs = made
        try:
            called, printed = _call_split(lambda: structure.call(map_func, element))
        finally:
            _STATE.host_outputs = outer
        host = {id(v) for v in made}
        if called.ok:  # which outputs a tf.py_function gave: TF's spec has their shapes unknown
            out = called.output
            called.host = [id(leaf) in host for leaf in structure.leaves(tuple(out) if type(out) is list else out)]
    for host_calls in (False, True):  # a py_function's output as a scalar first; else its shape from a call
        outcome, traced_printed = _call_split(lambda: _traced(map_func, input_spec), host_calls, False,
                                              stderr=False)
        if outcome.ok:
            _show(traced_printed)
            return outcome.output, called
        if not host_calls:
            called.trace_error = outcome.error
    _show(printed)
    return None, called


def unknown_host_shapes(spec: Any, host: list[bool]) -> Any:
    """`spec` with the shapes of the outputs a `tf.py_function` gave unknown, as TF's (observed, TF 2.21: a text
    map's `py_function` output is `TensorSpec(shape=<unknown>, dtype=tf.string)`)."""
    flags = iter(host)
    if len(host) != len(structure.leaves(spec)) or not any(host):
        return spec
    return structure.map_leaves(lambda s: structure.TensorSpec(None, s.dtype) if next(flags) else s, spec)


def trace_mapped(dataset: Any, map_func: Callable[..., Any]) -> tuple[shape_inference.Trace | None, Any, list]:
    """`map`'s trace when the dataset is made (`trace_map`): the `Trace` (or None), the output on placeholders
    as `map` gives it (or None), and which outputs a `tf.py_function` gave (for the spec where there is no
    trace); TF 2.21's InvalidArgumentError (observed text) for a function returning None."""
    input_spec = input_spec_of(dataset)
    if input_spec is None:
        return None, None, []
    trace, outcome = trace_map(map_func, input_spec)
    if outcome.ok and outcome.output is None:
        from jdist.errors import InvalidArgumentError

        raise InvalidArgumentError(None, None, "Length for attr 'output_types' of 0 must be at least minimum 1 (the "
                                               "`map` function returned None: return the element's new value)")
    if not outcome.ok:
        error, abstract = outcome.error, outcome.trace_error
        if trace is None and error is not None and abstract is not None and type(abstract) is type(error) \
                and str(abstract) == str(error):
            raise staging.staged(error) from error  # raised on any values, as TF's trace: at creation
        return trace, None, []
    out = outcome.output
    try:
        return trace, structure.normalize(tuple(out) if type(out) is list else out), outcome.host
    except (TypeError, ValueError):
        return trace, None, []


def quiet(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` as called per element: its Python prints held back (TF printed them once, at the trace), `tf.print`
    and `tf.py_function` still shown."""
    @functools.wraps(fn)
    def called(*args: Any, **kwargs: Any) -> Any:
        with thread_stdout.captured():
            return fn(*args, **kwargs)
    return called


def input_spec_of(dataset: Any) -> Any:
    """The dataset's element spec, or None where it cannot be had without iterating an empty dataset."""
    try:
        return dataset.element_spec
    except Exception:  # noqa: BLE001 (an empty mapped dataset: no trace, as before)
        return None


def check_predicate(predicate: Callable[..., Any], input_spec: Any, after: str,
                    trace: shape_inference.Trace | None = None) -> Callable[..., Any]:
    """`filter`'s and `take_while`'s check when the dataset is made (TF 2.21, observed): a predicate that does
    not return a `tf.bool` scalar raises ValueError ("... but its return type is TensorSpec(shape=(),
    dtype=tf.int64, name=None).", `after` the text following "scalar tensor"), one that returns a tuple
    AttributeError ("'tuple' object has no attribute 'is_compatible_with'"). Returns the predicate as called per
    element (`quiet`). `trace`: the predicate's `single_trace`, whose output is checked (no call then)."""
    outcome = Call(True, output=trace.output) if trace is not None else \
        on_placeholder(predicate, input_spec) if input_spec is not None else Call(False)
    if not outcome.ok:
        return quiet(predicate)  # it needs real values (or raised on the placeholders): checked per element
    out = outcome.output
    if isinstance(out, (tuple, list, dict)):
        raise AttributeError(f"'{type(out).__name__}' object has no attribute 'is_compatible_with' (`predicate` "
                             "must return one `tf.bool` scalar tensor, not a structure)")
    if out is None:
        raise ValueError("Invalid `predicate`. `predicate` must return a `tf.bool` scalar tensor"
                         + after.format(spec="NoneTensorSpec()"))
    spec = structure.spec_of(structure.to_leaf(out))
    if spec.shape != () or np.dtype(spec.dtype).kind != "b":
        if spec.shape and structure.leading_unknown(input_spec) and spec.shape[0] == 1:
            spec = structure.TensorSpec((None, *spec.shape[1:]), spec.dtype)
        raise ValueError("Invalid `predicate`. `predicate` must return a `tf.bool` scalar tensor"
                         + after.format(spec=spec))
    return quiet(predicate)


def fold_trace(fn: Callable[[Any, Any], Any], state: Any, input_spec: Any) -> shape_inference.Trace | None:
    """`scan`'s and `reduce`'s trace, the function called once (`single_trace`, on the specs of `state` and of
    the input); else as `trace_fold` calls it (None returned)."""
    once = None if input_spec is None else single_trace(fn, (structure.spec_of(state), input_spec))
    if once is None:
        trace_fold(fn, state, input_spec)
    return once


def trace_fold(fn: Callable[[Any, Any], Any], state: Any, input_spec: Any) -> None:
    """`scan`'s and `reduce`'s trace: `fn(state, element)` once on the initial `state` (a structure of host
    tensors) and a placeholder element, its Python prints shown (TF 2.21 traces it once, observed)."""
    if input_spec is None:
        return
    try:
        element = structure.map_leaves(structure.HostTensor.of, structure.placeholder(input_spec))
    except ValueError:  # a component of unknown rank: no trace
        return
    trace_call(lambda: fn(state, element))


class NotADatasetError(TypeError, AttributeError):
    """A `flat_map` / `interleave` function that returned no dataset: TF 2.21 raises AttributeError ("'Tensor'
    object has no attribute '_name'", observed) when the dataset is made; a TypeError too, as it is one."""


def not_a_dataset(what: str, out: Any) -> Exception:
    return NotADatasetError(f"Dataset.{what}: `map_func` must return a Dataset, got {type(out).__name__} (wrap "
                            "a tensor with tf.data.Dataset.from_tensors or from_tensor_slices)")


def trace_dataset_function(dataset: Any, map_func: Callable[..., Any], what: str) -> Callable[..., Any]:
    """`flat_map`'s and `interleave`'s `map_func` traced now, as TF traces it when the dataset is made (its Python
    prints once, a result that is no dataset raising), and as it is then called per element (`quiet`)."""
    spec = input_spec_of(dataset)
    if spec is not None:
        outcome = on_placeholder(map_func, spec)
        if outcome.ok and not hasattr(outcome.output, "element_spec"):
            raise not_a_dataset(what, outcome.output)
    return quiet(map_func)


def trace_abstract(fn: Callable[..., Any], input_spec: Any) -> shape_inference.Trace | None:
    """`fn` traced by JAX on `input_spec` (None where it cannot be), its prints held back: a second trace call,
    after the one on placeholders showed them (`jdist.tfdata.compiled.compile_predicate`)."""
    if input_spec is None:
        return None
    outcome, _ = _call_split(lambda: _traced(fn, input_spec), False, False, stderr=False)
    return outcome.output if outcome.ok else None


def drawn_predicate(trace: shape_inference.Trace | None, input_spec: Any) -> Callable[[Any], bool] | None:
    """`filter`'s predicate run from its one trace where that holds `tf.random` draws (`traced_draws`)."""
    return traced_draws.compile_predicate(trace, input_spec)
