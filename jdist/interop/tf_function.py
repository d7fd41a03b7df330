"""`jdist.function`: TF's `@tf.function`, traced as TF traces it.

TF traces a function once per input signature (shapes and dtypes of arrays, values of Python scalars,
identity of other objects) and reuses the graph. Here each signature's Python body is traced once into
one compiled program (`jdist.interop.graph_trace`), and later calls run the program: `print` runs at trace
time, `tf.print` on every call, as in TF. `experimental_get_tracing_count()` counts the traces as TF's
does (observed in TF 2.21: f(x, 2) with x float32 scalars twice, then with 3, then a shape (1,) x, then
an int32 x: 4; a first call that makes variables traces twice). A signature whose body cannot be compiled
(see `graph_trace`) runs its Python body on every call instead, and so does every call while a strategy
or another trace compiles around it: there `strategy.run` compiles its replica function once, even when
the body defines that function anew on each call (TF's multi-worker tutorial does), because the call
runs under a `jdist.strategy.traced_functions.Site` kept for the function.

The body is converted by AutoGraph first (`jdist.interop.autograph`; `autograph=False` keeps it as written, and
`tf.config.run_functions_eagerly(True)` runs it unconverted, as TF does): an `if`/`while`/`for` on a tensor is
traced as compiled control flow, both branches and a loop's body once, and TF's errors for branches or loop
variables that disagree are raised, not hidden by running the body as Python. Neither is an unconverted `if` on a
tensor (`autograph=False`: TF's OperatorNotAllowedInGraphError) nor a body that recurses on a tensor condition
(RecursionError, as TF's trace fails). An argument with `__tf_tracing_type__` is keyed by its
`tf.types.experimental.TraceType` (`trace_type`).
"""
from __future__ import annotations

import collections
import contextlib
import functools
import inspect
from typing import Any, Callable, overload

import jax
import numpy as np

from jdist import thread_stdout
from jdist.input.tensor_spec import TensorSpec
from jdist.interop import (
    autograph,
    concrete_function,
    function_signature,
    graph_errors,
    graph_trace,
    keras_objects,
    keras_run,
    symbolic_text,
    trace_type,
    traced_shapes,
)
from jdist.interop.trace_state import under_any_trace
from jdist.strategy import context, function_trace, python_control_flow, traced_functions
from jdist.typing import PyTree

_MAX_SIGNATURES = 32
_EAGER = object()  # a signature whose trace stopped: its calls run the Python body
_RUN_EAGERLY = [False]  # `tf.config.run_functions_eagerly`
# TF's ValueError for a variable made in a later trace of a function whose first call made none (observed, TF
# 2.21); where the first call made variables, a later trace that makes more is TF's "singleton" ValueError
_NON_FIRST = "Creating variables on a non-first call to a function decorated with tf.function."
# How a function's results are returned: `jdist.tf_compat` installs TF's rule (a Python number or bool returned
# becomes a tensor, as a graph's outputs are); jdist's own `function` returns what the body returns.
_OUTPUTS: list[Callable[[Any], Any]] = []


def run_eagerly(enabled: bool) -> None:
    """`tf.config.run_functions_eagerly`: every call runs the Python body (TF's debugging switch)."""
    _RUN_EAGERLY[0] = bool(enabled)


def _spec_or_value(leaf: Any) -> Any:
    """What a signature keeps of an argument: arrays as shape and dtype, other values as they are."""
    if not isinstance(leaf, TensorSpec) and concrete_function.is_tensor_like(leaf):
        return TensorSpec(tuple(leaf.shape), np.dtype(leaf.dtype))
    return leaf


def _specs(out: Any) -> Any:
    return jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(np.shape(leaf), np.dtype(leaf.dtype))
                        if hasattr(leaf, "dtype") and hasattr(leaf, "shape") else leaf, out)


def convert_outputs(convert: Callable[[Any], Any]) -> None:
    _OUTPUTS[:] = [convert]


def _signature(value: Any) -> Any:
    leaves, treedef = jax.tree.flatten(value)
    keys = []
    for leaf in leaves:
        if hasattr(leaf, "shape") and hasattr(leaf, "dtype") and hasattr(leaf, "assign"):
            # a variable: TF traces by its spec, not the object (observed, TF 2.21: f(tf.Variable(1)) then
            # f(tf.Variable(2)) is one trace)
            keys.append(("variable", tuple(leaf.shape), str(leaf.dtype)))
        elif hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            keys.append(("array", None if leaf.shape is None else tuple(leaf.shape), str(leaf.dtype)))
        elif isinstance(leaf, (int, float, bool)) and not isinstance(leaf, np.generic):
            # Python numbers are keyed by value (observed, TF 2.21: f(x, 1), f(x, 1.0), f(x, True) trace once
            # and all return the first trace's int32 1; 0, 0.0, False likewise)
            keys.append(("value", "number", leaf))
        elif isinstance(leaf, (str, bytes, type(None), np.generic)):
            keys.append(("value", type(leaf), leaf))
        elif (typed := trace_type.trace_key(leaf)) is not None:  # an object naming its own `tf.types` TraceType
            keys.append(typed)
        elif hasattr(leaf, "__next__"):  # an iterator: TF traces by its element spec, not the object
            keys.append(("iterator", type(leaf)))
        else:
            keys.append(("object", _Identity(leaf)))
    return treedef, tuple(keys)


def _saved_dtype(name: str, function: Any) -> np.dtype:
    """A saved signature's array dtype; a composite argument (a RaggedTensor, keyed by TF's dtype text) is refused."""
    try:
        return np.dtype(name)
    except TypeError:
        raise ValueError(f"tf.saved_model.save: {getattr(function, '__name__', 'the function')} was traced with a "
                         f"composite tensor argument of dtype {name} (a RaggedTensor); jdist saves signatures of "
                         "dense arrays and Python values only: pass rt.flat_values and rt.row_splits (or "
                         "rt.to_tensor()) as separate arguments") from None


def _relaxed(key: Any, known: list) -> Any:
    """TF's `reduce_retracing`: a signature whose arrays differ from a known one's only in dimension sizes is
    that one with those dimensions unknown (observed, TF 2.21: shapes (3,), (5,), (7,), (9,) trace twice); in
    rank, that one with an unknown shape (observed: (2,), (3,), (2, 2), (3, 3), (4, 5) trace three times, the
    third showing `<unknown>`)."""
    for other in known:
        if not isinstance(other, tuple) or other[0] != key[0] or len(other[1]) != len(key[1]):
            continue
        general = []
        for mine, theirs in zip(key[1], other[1]):
            if mine == theirs:
                general.append(mine)
            elif mine[0] == theirs[0] == "array" and mine[2] == theirs[2]:
                if mine[1] is None or theirs[1] is None or len(mine[1]) != len(theirs[1]):
                    general.append(("array", None, mine[2]))  # another rank: the rank unknown too (observed)
                else:
                    general.append(("array", tuple(a if a == b else None for a, b in zip(mine[1], theirs[1])),
                                    mine[2]))
            else:
                break
        else:
            return other[0], tuple(general)
    return key


class _Identity:
    """An argument compared by identity, kept alive while its signature is (so a new object never takes a
    collected one's id: TF 2.21 traced `f(Generator.from_seed(1))` then `f(Generator.from_seed(2))` twice)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _Identity) and other.value is self.value


class Function:
    """A `@tf.function`: calls `func` under its `Site` (see the module docstring).

    One site per function, not per signature: a replica function is reused across signatures too (the
    strategy compiles per argument shape anyway), so a new iterator each epoch compiles nothing new."""

    def __init__(self, func: Callable, options: dict[str, Any]):
        self.python_function = func
        self.options = options
        # AutoGraph (TF's default): `if`/loops on traced tensors in the body become compiled control flow
        self._body = autograph.convert(func) if options.get("autograph", True) else func
        self._site = traced_functions.Site()
        # TF's signatures, first seen first: each one's arguments (arrays as TensorSpecs), for its texts
        self._signatures: collections.OrderedDict[Any, tuple[Any, Any]] = collections.OrderedDict()
        self._tracing_count = 0
        self._made_variables = False  # whether a trace made variables (TF's text for a later one differs)
        self._recorded = False  # whether a GradientTape-recording body has run (`_run_recording`)
        self._programs: collections.OrderedDict[Any, Any] = collections.OrderedDict()
        self._outputs: dict[Any, str] = {}  # output type text per signature (TF's concrete-function texts)
        self._requested: list[tuple[tuple, dict]] = []  # get_concrete_function's arguments (saved by
        # tf.saved_model.save as TF saves them, traced or not: unknown dimensions are traced at save time)
        # A body that records a GradientTape itself (not through a function it passes to strategy.run) runs,
        # outside any strategy, through the default strategy as one compiled program (keras_run).
        code = getattr(getattr(func, "__func__", func), "__code__", None)
        self._records_tape = code is not None and "GradientTape" in code.co_names
        functools.update_wrapper(self, func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        args, kwargs = self._bound(args, kwargs)
        concrete = _signature((args, kwargs))  # the shapes and dtypes of this call: its program's key
        # an eager call (`tf.config.run_functions_eagerly(True)`) traces nothing: a later graph call of the same
        # signature traces and prints (observed, TF 2.21: tracing count 0 after it, then 1)
        new = not _RUN_EAGERLY[0] and self._note_signature(args, kwargs, concrete)
        count = self._tracing_count
        try:
            out = self._call(args, kwargs, concrete, new)
        except BaseException:
            if new:  # TF keeps no trace that failed: the next call traces (and prints) again, uncounted
                self._signatures.popitem(last=True)
                if self._programs.get(concrete) is _EAGER:
                    del self._programs[concrete]
                self._tracing_count = count
            raise
        out = _OUTPUTS[0](out) if _OUTPUTS else out
        if concrete not in self._outputs:  # a signature's output type, from its first call
            self._outputs[concrete] = concrete_function.output_text(_specs(out))
        return out

    def _call(self, args: tuple, kwargs: dict, concrete: Any, new: bool) -> Any:
        """One call: its compiled program, or the Python body (module docstring). A body that runs as Python
        for a signature TF traced before shows no `print` (TF prints while tracing only; `tf.print` and
        `tf.py_function` still print on every call)."""
        quiet = thread_stdout.captured() if not new and not _RUN_EAGERLY[0] else contextlib.nullcontext()
        body = self.python_function if _RUN_EAGERLY[0] else self._body  # TF converts no eager call
        with traced_functions.active(self._site), python_control_flow.autograph_status(
                self.options.get("autograph", True)):
            if self._compiles():
                program = self._program(args, kwargs, concrete, counted=not new)
                if program is not _EAGER:
                    return program(args, kwargs)
                shown = symbolic_text.arguments_shown_symbolic(self.python_function, args, kwargs) if new else quiet
                with shown:  # the first run stands for TF's trace: its tensor arguments print as TF's
                    return body(*args, **kwargs)
            self._tracing_count += new and not _RUN_EAGERLY[0]  # TF counts no trace of an eager call
            with quiet:
                if self._records_tape and not context.has_strategy() and not context.in_replica_context():
                    return self._run_recording(body, args, kwargs, new)
                return body(*args, **kwargs)

    def _run_recording(self, body: Callable, args: tuple, kwargs: dict, new: bool) -> Any:
        """A body recording a GradientTape (`_run_outside_strategies`). An optimizer that `apply_gradients` would
        build (make its variables) on a later signature is TF's ValueError for variables made in a later trace
        (observed, TF 2.21, function guide: `train_step(w, x, y, opt2)` after `train_step(w, x, y, opt1)` is the
        "singleton" ValueError; the text for a function whose first call made none is `_NON_FIRST`)."""
        objects = keras_objects.keras_objects(functools.partial(body, *args, **kwargs))  # its own, and passed ones
        unbuilt = _unbuilt_optimizers(objects)
        if unbuilt and new and self._recorded and not _RUN_EAGERLY[0]:
            raise ValueError(function_trace.SINGLETON if self._made_variables else _NON_FIRST)
        out = _run_outside_strategies(body, args, kwargs, objects)
        self._recorded = True
        built = any(getattr(o, "built", False) for o in unbuilt)
        self._made_variables |= built
        self._tracing_count += built and new and not _RUN_EAGERLY[0]  # TF traces a call that made variables twice
        return out

    def signature_key(self, args: tuple, kwargs: dict) -> Any:
        """The key of the program a call with these arguments (bound to the parameters) runs."""
        return _signature(self._bound(args, kwargs))

    def _bound(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """The call's arguments as TF binds them: to the input_signature, or by position with defaults."""
        if self.options.get("input_signature") is not None:
            return function_signature.bind(self, args, kwargs)
        return function_signature.canonical(self.python_function, args, kwargs)

    def _note_signature(self, args: tuple, kwargs: dict, concrete: Any) -> bool:
        """Records TF's signature of a call (an input_signature is one, whatever the shapes); True if new.
        `concrete`: the call's own signature (`_signature`)."""
        key = "input_signature" if self.options.get("input_signature") is not None else concrete
        if self.options.get("reduce_retracing") and key not in self._signatures:
            key = _relaxed(key, list(self._signatures))
        if key not in self._signatures:
            self._signatures[key] = ((tuple(self.options["input_signature"]), {}) if key == "input_signature" else
                                     (jax.tree.map(_spec_or_value, args), jax.tree.map(_spec_or_value, kwargs)))
            while len(self._signatures) > _MAX_SIGNATURES:
                self._signatures.popitem(last=False)
            return True
        return False  # kept in the order first seen: TF lists its concrete functions so

    def _compiles(self) -> bool:
        """Whether this call runs a compiled program (module docstring): not when a strategy or a trace around
        it compiles the body itself, nor after `tf.config.run_functions_eagerly(True)`."""
        return not (_RUN_EAGERLY[0] or self._records_tape or context.has_strategy() or context.in_replica_context()
                    or function_trace.active() or under_any_trace())

    def _program(self, args: tuple, kwargs: dict, key: Any, counted: bool) -> Any:
        """The program for these inputs' shapes and dtypes, traced on first use; `_EAGER` for a signature whose
        trace stopped (the Python body runs). `counted`: TF's signature was seen before (an input_signature's
        relaxed shapes), so a trace for new shapes adds no trace to the count and shows no prints. `key`: the
        call's own signature (`_signature`)."""
        program = self._programs.get(key)
        if program is not None:
            self._programs.move_to_end(key)
            return program
        try:
            with thread_stdout.captured() if counted else contextlib.nullcontext():
                program = graph_trace.trace(self._body, args, kwargs, first=not self._programs,
                                            shown=self._shown_shapes(args, kwargs))
            self._tracing_count += 0 if counted else program.traces
            self._made_variables |= program.traces > 1  # a trace that made variables is traced twice
            self._outputs[key] = concrete_function.output_text(program.output_structure)
        except ValueError as error:
            if autograph.is_error(error):  # TF's error for a converted statement (running as Python would hide it)
                raise autograph.plain_error(error) from None
            if str(error).startswith("tf.function only supports singleton"):
                if self._programs and not self._made_variables:
                    raise ValueError(_NON_FIRST) from None
                raise
            program = _EAGER
        except RecursionError:  # a body that calls itself on a tensor condition: TF's trace fails too (observed)
            raise
        except Exception as error:  # noqa: BLE001 - any failed trace: the body runs as Python (module docstring)
            if autograph.is_error(error):
                raise autograph.plain_error(error) from None
            symbolic_bool = graph_errors.symbolic_bool_error(error)
            if symbolic_bool is not None and not self.options.get("autograph", True):
                raise symbolic_bool from None  # unconverted: `if tensor:` is TF's error, not Python control flow
            symbolic = autograph.symbolic_numpy_error(error)  # `.numpy()` in the traced body: TF's error
            if symbolic is not None:
                raise symbolic from None
            program = _EAGER
        if program is _EAGER:
            self._tracing_count += not counted
        self._programs[key] = program
        while len(self._programs) > _MAX_SIGNATURES:
            self._programs.popitem(last=False)
        return program

    def _shown_shapes(self, args: tuple, kwargs: dict) -> list | None:
        """Per flattened argument, the shape TF's trace gives it: the input_signature's or the relaxed
        signature's (None dimensions), for printing traced inputs as TF prints them."""
        specs = self.options.get("input_signature")
        if specs is not None:
            if kwargs or len(args) < len(specs):
                return None
            key = _signature((tuple(specs) + tuple(args[len(specs):]), {}))
        else:
            key = _signature((args, kwargs))
            if self.options.get("reduce_retracing"):
                key = _relaxed(key, list(self._signatures))
        return [(traced_shapes.UNKNOWN_RANK if leaf[1] is None else leaf[1]) if leaf[0] in ("array", "variable")
                else None for leaf in key[1]]

    def trace_only(self, *args: Any, **kwargs: Any) -> None:
        """Traces (compiles) this function for these example arguments without running it, as TF's
        `get_concrete_function` does; nothing happens where calls would run the Python body."""
        args, kwargs = self._bound(args, kwargs)
        concrete = _signature((args, kwargs))
        new = self._note_signature(args, kwargs, concrete)
        if self._compiles():
            with traced_functions.active(self._site):
                self._program(args, kwargs, concrete, counted=not new)

    def output_text(self, *args: Any, **kwargs: Any) -> str:
        """TF's output type of the signature of these arguments (known once traced or called)."""
        return self._outputs.get(_signature(self._bound(args, kwargs)), "Unknown")

    def describe(self, *args: Any, **kwargs: Any) -> str:
        """TF's description of one signature: parameters, output type, captured variables."""
        parameters = inspect.signature(self.python_function)
        bound = parameters.bind_partial(*args, **kwargs)
        bound.apply_defaults()
        variadic = any(p.kind is p.VAR_POSITIONAL for p in parameters.parameters.values())
        rows = []
        for name, value in bound.arguments.items():
            kind = parameters.parameters[name].kind
            if kind in (kind.VAR_POSITIONAL, kind.VAR_KEYWORD):
                continue
            label = "POSITIONAL_ONLY" if variadic and kind is kind.POSITIONAL_OR_KEYWORD else kind.name
            rows.append((name, label, value))
        program = self._programs.get(_signature(self._bound(args, kwargs)))
        captures = program.captured if program is not None and program is not _EAGER else []
        return concrete_function.describe(rows, self.output_text(*args, **kwargs), captures)

    def pretty_printed_concrete_signatures(self) -> str:
        """TF's text for every signature this function was traced for, in the order first seen."""
        return "\n\n".join(self.describe(*args, **kwargs) for args, kwargs in self._signatures.values())

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        """A method decorated with `@tf.function`: one `Function` per instance, as TF binds them."""
        if instance is None:
            return self
        bound = instance.__dict__.get(f"_jdist_function_{id(self)}")
        if bound is None:
            bound = Function(self.python_function.__get__(instance, owner), self.options)
            instance.__dict__[f"_jdist_function_{id(self)}"] = bound
        return bound

    def get_concrete_function(self, *args: Any, **kwargs: Any) -> concrete_function.ConcreteFunction:
        """TF's: this function for one input signature (TensorSpecs or example arrays; its `input_signature`
        when none is given). `tf.saved_model.save(signatures=...)` exports it."""
        if not args and not kwargs and self.options.get("input_signature") is not None:
            args = tuple(self.options["input_signature"])
        self._requested.append((args, kwargs))
        del self._requested[:-_MAX_SIGNATURES]  # bounded, as the traced signatures are
        return concrete_function.ConcreteFunction(self, args, kwargs)

    def traced_arguments(self) -> list[tuple[Any, list]]:
        """The arguments of each signature this function was called with, as (treedef, leaves): arrays as
        `jax.ShapeDtypeStruct`s, Python values as themselves (what `tf.saved_model.save` exports)."""
        traced = []
        for key in self._signatures:
            if key == "input_signature":
                continue
            treedef, leaf_keys = key
            leaves = []
            for leaf_key in leaf_keys:
                if leaf_key[0] == "array":
                    leaves.append(jax.ShapeDtypeStruct(leaf_key[1], _saved_dtype(leaf_key[2], self.python_function)))
                elif leaf_key[0] == "value":
                    leaves.append(leaf_key[2])
                else:
                    raise ValueError(f"{self.python_function.__name__} was called with an argument of kind "
                                     f"{leaf_key[0]!r}; only calls with arrays and Python numbers or strings can be "
                                     "saved.")
            traced.append((treedef, leaves))
        return traced

    @property
    def input_signature(self) -> tuple | None:
        """TF's: the `input_signature` given, as a tuple; None where none was."""
        specs = self.options.get("input_signature")
        return None if specs is None else tuple(specs)

    def experimental_get_tracing_count(self) -> int:
        """How many input signatures this function has been called with (TF's count of traces)."""
        return self._tracing_count


def _run_outside_strategies(fn: Callable, args: tuple, kwargs: dict, objects: list) -> Any:
    """A `tf.function` whose own body records a `GradientTape`, called outside any strategy: TF's default
    strategy runs it, here as one compiled program that reads and assigns the Keras objects' variables
    (`objects`), so the tape, `apply_gradients` and metric updates work as in TF (`strategy.run` does the
    same per replica)."""
    from jdist.strategy.default import default_strategy

    return keras_run.run(default_strategy(), fn, args, kwargs, objects, compiled=True)


def _unbuilt_optimizers(objects: list) -> list:
    keras = keras_objects.jax_keras()
    if keras is None:
        return []
    return [o for o in objects if isinstance(o, keras.optimizers.Optimizer) and not o.built]


@overload
def function(func: Callable, *, input_signature: PyTree = None, autograph: bool = True,
             jit_compile: bool | None = None, reduce_retracing: bool = False,
             experimental_compile: bool | None = None, **ignored: Any) -> Function: ...


@overload
def function(func: None = None, *, input_signature: PyTree = None, autograph: bool = True,
             jit_compile: bool | None = None, reduce_retracing: bool = False,
             experimental_compile: bool | None = None, **ignored: Any) -> Callable[[Callable], Function]: ...


def function(func: Callable | None = None, *, input_signature: PyTree = None, autograph: bool = True,
             jit_compile: bool | None = None, reduce_retracing: bool = False,
             experimental_compile: bool | None = None,
             **ignored: Any) -> Function | Callable[[Callable], Function]:  # ignored: TF's other options
    """`@jdist.function` or `@jdist.function(...)`: a `Function` over `func` (see the module docstring).
    `experimental_relax_shapes`, TF's older name of `reduce_retracing`, still works as it (observed, TF 2.21)."""
    relax = bool(ignored.pop("experimental_relax_shapes", False))
    options = dict(input_signature=input_signature, autograph=autograph, jit_compile=jit_compile,
                   reduce_retracing=reduce_retracing or relax)
    if func is None:
        return functools.partial(function, **options)
    return Function(func, options)
