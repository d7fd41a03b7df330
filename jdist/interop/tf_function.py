"""`jdist.function`: TF's `@tf.function`, with TF's tracing as far as it concerns compilation.

TF traces a function once per input signature (shapes and dtypes of arrays, values of Python
scalars, identity of other objects) and reuses the graph. Here the Python body runs on every call
(so side effects such as `print` happen every call, unlike TF), but what it compiles is made once
per signature: `strategy.run` compiles its replica function once, even when the body defines that
function anew on each call (TF's multi-worker tutorial does), because the call runs under a
`jdist.strategy.traced_functions.Site` kept for the function. `experimental_get_tracing_count()`
counts the signatures seen (one when an `input_signature` is given), as TF's does (observed in TF 2.21:
f(x, 2) with x float32 scalars twice, then with 3, then a shape (1,) x, then an int32 x: 4). Code
outside `strategy.run` that should be compiled uses `jax.jit`.
"""
from __future__ import annotations

import collections
import functools
from typing import Any, Callable

import jax
import numpy as np

from jdist.interop import keras_objects, keras_run
from jdist.strategy import context, traced_functions
from jdist.typing import PyTree

_MAX_SIGNATURES = 32
# How a function's results are returned: `jdist.tf_compat` installs TF's rule (a Python number or bool returned
# becomes a tensor, as a graph's outputs are); jdist's own `function` returns what the body returns.
_OUTPUTS: list[Callable[[Any], Any]] = []


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
            keys.append(("array", tuple(leaf.shape), str(leaf.dtype)))
        elif isinstance(leaf, (int, float, bool, str, bytes, type(None), np.generic)):
            keys.append(("value", type(leaf), leaf))
        elif hasattr(leaf, "__next__"):  # an iterator: TF traces by its element spec, not the object
            keys.append(("iterator", type(leaf)))
        else:
            keys.append(("object", _Identity(leaf)))
    return treedef, tuple(keys)


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
        self._site = traced_functions.Site()
        self._signatures: collections.OrderedDict[Any, None] = collections.OrderedDict()
        self._tracing_count = 0
        # A body that records a GradientTape itself (not through a function it passes to strategy.run) runs,
        # outside any strategy, through the default strategy as one compiled program (keras_run).
        code = getattr(getattr(func, "__func__", func), "__code__", None)
        self._records_tape = code is not None and "GradientTape" in code.co_names
        functools.update_wrapper(self, func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # An input_signature is one trace in TF whatever the inputs (they must match it).
        key = "input_signature" if self.options.get("input_signature") is not None else _signature((args, kwargs))
        if key in self._signatures:
            self._signatures.move_to_end(key)
        else:
            self._signatures[key] = None
            self._tracing_count += 1
            while len(self._signatures) > _MAX_SIGNATURES:
                self._signatures.popitem(last=False)
        with traced_functions.active(self._site):
            if self._records_tape and not context.has_strategy() and not context.in_replica_context():
                out = _run_outside_strategies(self.python_function, args, kwargs)
            else:
                out = self.python_function(*args, **kwargs)
        return _OUTPUTS[0](out) if _OUTPUTS else out

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        """A method decorated with `@tf.function`: one `Function` per instance, as TF binds them."""
        if instance is None:
            return self
        bound = instance.__dict__.get(f"_jdist_function_{id(self)}")
        if bound is None:
            bound = Function(self.python_function.__get__(instance, owner), self.options)
            instance.__dict__[f"_jdist_function_{id(self)}"] = bound
        return bound

    def get_concrete_function(self, *args: Any, **kwargs: Any) -> "ConcreteFunction":
        """TF's: this function for one input signature (TensorSpecs or example arrays; its `input_signature`
        when none is given). `tf.saved_model.save(signatures=...)` exports it."""
        if not args and not kwargs and self.options.get("input_signature") is not None:
            args = tuple(self.options["input_signature"])
        return ConcreteFunction(self, args, kwargs)

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
                    leaves.append(jax.ShapeDtypeStruct(leaf_key[1], np.dtype(leaf_key[2])))
                elif leaf_key[0] == "value":
                    leaves.append(leaf_key[2])
                else:
                    raise ValueError(f"{self.python_function.__name__} was called with an argument of kind "
                                     f"{leaf_key[0]!r}; only calls with arrays and Python numbers or strings can be "
                                     "saved.")
            traced.append((treedef, leaves))
        return traced

    def experimental_get_tracing_count(self) -> int:
        """How many input signatures this function has been called with (TF's count of traces)."""
        return self._tracing_count


class ConcreteFunction:
    """`f.get_concrete_function(...)`: `f` for one input signature (`args`, `kwargs`: TensorSpecs or arrays)."""

    def __init__(self, function: Function, args: tuple, kwargs: dict):
        self.function, self.args, self.kwargs = function, args, kwargs

    @property
    def structured_input_signature(self) -> tuple[tuple, dict]:
        return self.args, self.kwargs

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)


def _run_outside_strategies(fn: Callable, args: tuple, kwargs: dict) -> Any:
    """A `tf.function` whose own body records a `GradientTape`, called outside any strategy: TF's default
    strategy runs it, here as one compiled program that reads and assigns the Keras objects' variables,
    so the tape, `apply_gradients` and metric updates work as in TF (`strategy.run` does the same per
    replica)."""
    from jdist.strategy.default import default_strategy

    objects = keras_objects.keras_objects(functools.partial(fn, *args, **kwargs))  # its own, and those passed to it
    return keras_run.run(default_strategy(), fn, args, kwargs, objects, compiled=True)


def function(func: Callable | None = None, *, input_signature: PyTree = None, autograph: bool = True,
             jit_compile: bool | None = None, reduce_retracing: bool = False,
             experimental_compile: bool | None = None,
             **ignored: Any) -> Function | Callable[[Callable], Any]:  # ignored: TF's other options
    """`@jdist.function` or `@jdist.function(...)`: a `Function` over `func` (see the module docstring)."""
    options = dict(input_signature=input_signature, autograph=autograph, jit_compile=jit_compile,
                   reduce_retracing=reduce_retracing)
    if func is None:
        return functools.partial(function, **options)
    return Function(func, options)
