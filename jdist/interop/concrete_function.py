"""`f.get_concrete_function(...)`: one input signature of a `tf.function`, and how TF describes signatures.

Its Python arguments (numbers, strings, objects) are fixed when it is made: a call passes only the tensors, by
position or name, and giving a fixed argument another value is TF's TypeError "Can not cast 3 to Literal[2]". A
tensor of another dtype than its spec is TF's InvalidArgumentError "... was expected to be a float tensor but is
a int32 tensor"; another shape is accepted, as TF 2.21 accepts it (observed). Made from specs without unknown
dimensions, it is traced then (TF traces at `get_concrete_function`).

The text forms (`pretty_printed_concrete_signatures()`, `function_type`, `print(concrete)`) are TF 2.21's
(observed): `Input Parameters:` with each parameter's kind and `TensorSpec` / `Literal[2]` /
`List[Literal[1], ...]` / `VariableSpec(...)`, `Output Type:`, and `Captures:` (the variables a traced program
reads, by id, as TF's resource handles). `structured_input_signature`, `structured_outputs`, `inputs`, `outputs`
(`concrete_structure`), `variables`, `captured_inputs`, `inference_fn`, `name` and `pretty_printed_signature()` are
TF's too; `graph` lists the traced JAX program's operations (`concrete_graph`), not TF's.
"""
from __future__ import annotations

import inspect
import itertools
from typing import Any

import jax
import numpy as np

from jdist.errors import dtype_mismatch
from jdist.input.tensor_spec import TensorSpec
from jdist.interop import concrete_graph, concrete_structure

_OP_NUMBERS = itertools.count(1)


class ConcreteFunction:
    """`function` for the arguments `args`, `kwargs` (TensorSpecs, tensors, Python values): see the module."""

    def __init__(self, function: Any, args: tuple, kwargs: dict):
        self.function, self.args, self.kwargs = function, args, kwargs
        self._signature = inspect.signature(function.python_function)
        self._template = self._signature.bind_partial(*args, **kwargs).arguments
        self._tensors = [name for name, value in self._template.items() if is_tensor_like(value)]
        self._op = f"__inference_{getattr(function.python_function, '__name__', 'f')}_{next(_OP_NUMBERS)}"
        examples = {name: _example(value) for name, value in self._template.items()}
        if all(value is not None for value in examples.values()):
            call_args, call_kwargs = self._bind_names(examples)
            function.trace_only(*call_args, **call_kwargs)

    @property
    def structured_input_signature(self) -> tuple[tuple, dict]:
        """TF's: every parameter bound (defaults too), a tensor as a TensorSpec named by its parameter."""
        return concrete_structure.input_signature(self._signature, self.args, self.kwargs)

    @property
    def structured_outputs(self) -> Any:
        """TF's output structure, a TensorSpec (shape and dtype) per tensor (`concrete_structure`)."""
        return concrete_structure.output_specs(getattr(self.function, "_body", self.function.python_function),
                                               self._signature, self._template)

    @property
    def outputs(self) -> list:
        """TF's flat list of the output tensors (as TensorSpecs)."""
        return [leaf for leaf in jax.tree.leaves(self.structured_outputs) if isinstance(leaf, TensorSpec)]

    @property
    def inputs(self) -> list:
        """TF's flat list of the input tensors (as TensorSpecs named by parameter); TF also lists a resource
        handle per captured variable, which a JAX program does not have (see `variables`)."""
        return [leaf for leaf in jax.tree.leaves(self.structured_input_signature) if isinstance(leaf, TensorSpec)]

    @property
    def variables(self) -> tuple:
        """TF's: the variables the traced program reads (known once traced)."""
        program = self.function._programs.get(self._key())
        return tuple(getattr(program, "captured", ()))

    @property
    def trainable_variables(self) -> tuple:
        return tuple(v for v in self.variables if getattr(v, "trainable", True))

    @property
    def name(self) -> bytes:
        """TF's name of the function's op, e.g. b'__inference_f_125'."""
        return self._op.encode()

    def pretty_printed_signature(self, verbose: bool = True) -> str:
        """TF's text of this signature (as `pretty_printed_concrete_signatures()` gives each)."""
        del verbose
        self._fill_output_type()
        args, kwargs = self._bind_names(self._examples())
        return self.function.describe(*args, **kwargs)

    def _fill_output_type(self) -> None:
        """A signature never traced (unknown dimensions) takes its output type from `structured_outputs`."""
        key = self._key()
        if key not in self.function._outputs:
            try:
                self.function._outputs[key] = _value_text(self.structured_outputs)
            except Exception:  # noqa: BLE001 - a body whose shapes cannot be traced keeps TF's "Unknown"
                pass

    def _key(self) -> Any:
        args, kwargs = self._bind_names(self._examples())
        return self.function.signature_key(args, kwargs)

    @property
    def function_type(self) -> str:
        """TF's one-line form, e.g. `(a: TensorSpec(shape=(), dtype=tf.string, name=None)) -> TensorSpec(...)`."""
        params = ", ".join(f"{name}: {_value_text(value)}" for name, value in self._template.items())
        self._fill_output_type()
        args, kwargs = self._bind_names(self._examples())
        return f"({params}) -> {self.function.output_text(*args, **kwargs)}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) > len(self._tensors):
            raise self._binding_error("too many positional arguments", args, kwargs)
        values = dict(self._template)
        given = dict(zip(self._tensors, args))
        for name, value in kwargs.items():
            if name in given or name not in values:
                raise self._binding_error(f"got an unexpected keyword argument '{name}'", args, kwargs)
            if name not in self._tensors and not _same(value, values[name]):
                raise self._binding_error(f"Can not cast {value!r} to {_value_text(values[name])}", args, kwargs)
            given[name] = value
        missing = [name for name in self._tensors if name not in given]
        if missing:
            raise self._binding_error(f"missing a required argument: '{missing[0]}'", args, kwargs)
        for index, name in enumerate(self._tensors):
            self._check_dtype(index, given[name], values[name])
        values.update(given)
        call_args, call_kwargs = self._bind_names(values)
        return self.function(*call_args, **call_kwargs)

    def _bind_names(self, values: dict) -> tuple[tuple, dict]:
        bound = self._signature.bind_partial()
        bound.arguments.update(values)
        return bound.args, bound.kwargs

    def _check_dtype(self, index: int, value: Any, template: Any) -> None:
        expected = _dtype_of(template)
        got = _np_dtype(value.dtype) if hasattr(value, "dtype") else np.asarray(value).dtype  # no array of a ragged one
        if isinstance(value, (list, tuple, int, float)) and not isinstance(value, bool):
            return  # a Python value is converted to the spec's dtype
        if expected is not None and _kind(got) != _kind(expected):
            if hasattr(template, "ragged_rank"):  # TF binds a ragged argument by its parts: a TypeError (observed)
                raise self._binding_error(f"Can not cast {_flat_spec(value, got)} to "
                                          f"{_flat_spec(template, expected)}", (value,), {})
            raise dtype_mismatch(self._op, index, _kind(expected), _kind(got))

    def _binding_error(self, reason: str, args: tuple, kwargs: dict) -> TypeError:
        from jdist.interop.function_signature import argument_text

        return TypeError(f"Binding inputs to tf.function failed due to `{reason}`. Received args: "
                         f"{argument_text(args)} and kwargs: {argument_text(kwargs)} for signature: "
                         f"{self.function_type}.")

    def __str__(self) -> str:
        self._fill_output_type()
        args, kwargs = self._bind_names(self._examples())
        return "ConcreteFunction " + self.function.describe(*args, **kwargs)

    def _examples(self) -> dict:
        """The template with a spec as an array of its shape (what the function's signature records)."""
        return {name: _example(value) if _example(value) is not None else value
                for name, value in self._template.items()}

    def __repr__(self) -> str:
        return f"<ConcreteFunction {self.function_type} at 0x{id(self):X}>"

    @property
    def graph(self) -> concrete_graph.Graph:
        """The traced program's operations as a graph (`concrete_graph`: JAX's operations, not TF's)."""
        program = self.function._programs.get(self._key())
        jaxpr = getattr(program, "jaxpr", None)
        if jaxpr is None:
            raise AttributeError(f"{self.function_type} has no traced program to show as a graph: this signature "
                                 "runs its Python body on each call (string tensors, or a body jdist cannot "
                                 "compile), so there are no operations to list.")
        names = [name for name in self._template if name in self._tensors]
        return concrete_graph.Graph(jaxpr, names)

    @property
    def captured_inputs(self) -> list:
        """TF's captured inputs: one per variable the traced program reads (observed, TF 2.21: one for a function
        reading one `tf.Variable`; TF lists its resource handle, jdist the variable itself)."""
        return list(self.variables)

    @property
    def inference_fn(self) -> "AtomicFunction":
        """TF's `AtomicFunction` of this signature: called with the input tensors, by position."""
        return AtomicFunction(self)


class AtomicFunction:
    """`concrete.inference_fn`: the signature's program, called with its input tensors (TF's `AtomicFunction`)."""

    def __init__(self, concrete: ConcreteFunction):
        self._concrete = concrete
        self.name = concrete.name

    def __call__(self, *tensors: Any) -> Any:
        return self._concrete(*tensors)

    def __repr__(self) -> str:
        return f"<AtomicFunction> {self.name.decode()}"


def is_tensor_like(value: Any) -> bool:
    """A tensor or its spec, not a variable (a signature keeps a tensor by its spec, a variable as itself)."""
    if getattr(value, "_jdist_composite_spec", False):  # an ExtensionType's Spec (jdist.tf_compat.extension_type)
        return True
    return isinstance(value, TensorSpec) or (hasattr(value, "shape") and hasattr(value, "dtype")
                                             and not hasattr(value, "assign"))


def _example(value: Any) -> Any:
    """An array to trace with for a spec (None if a dimension is unknown or it is text); other values as they are."""
    if getattr(value, "_jdist_composite_spec", False):  # traced on its first call
        return None
    if isinstance(value, TensorSpec):
        if value.shape is None or None in value.shape or np.dtype(value.dtype).kind in "OSU":
            return None
        return np.zeros(value.shape, value.dtype)
    if is_tensor_like(value) and _np_dtype(value.dtype).kind in "OSU":
        return None
    return value


def _dtype_of(value: Any) -> np.dtype | None:
    return _np_dtype(value.dtype) if hasattr(value, "dtype") else None


def _flat_spec(ragged: Any, dtype: np.dtype) -> TensorSpec:
    """TF's spec of a ragged value's (or spec's) flat values: its ragged dimensions one unknown one."""
    shape = getattr(ragged, "shape", None)
    inner = tuple(shape)[ragged.ragged_rank + 1:] if shape is not None and len(tuple(shape)) else ()
    values = getattr(ragged, "flat_values", None)
    return TensorSpec(tuple(values.shape) if values is not None else (None, *inner), dtype)


def _np_dtype(dtype: Any) -> np.dtype:
    """numpy's dtype of a numpy/JAX dtype or of a TF `DType` (a `RaggedTensorSpec` holds one)."""
    return np.dtype(getattr(dtype, "as_numpy_dtype", dtype))


def _kind(dtype: np.dtype) -> str:
    return "string" if dtype.kind in "OSU" else dtype.name


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - values that do not compare are not the same
        return a is b


def _value_text(value: Any) -> str:
    """TF's text for one argument's trace type: TensorSpec, VariableSpec, Literal[...], List[...], Tuple[...]."""
    if isinstance(value, TensorSpec) or (hasattr(value, "ragged_rank") and not hasattr(value, "flat_values")):
        return repr(value)  # a TensorSpec, or a RaggedTensorSpec as TF shows it
    if hasattr(value, "assign") and hasattr(value, "dtype"):
        return (f"VariableSpec(shape={tuple(value.shape)}, dtype=tf.{np.dtype(value.dtype).name}, "
                f"trainable={bool(getattr(value, 'trainable', True))}, alias_id=0)")
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return repr(TensorSpec(tuple(np.shape(value)), np.dtype(value.dtype)))
    if isinstance(value, (list, tuple)):
        name = "List" if isinstance(value, list) else "Tuple"
        return f"{name}[{', '.join(_value_text(v) for v in value)}]"
    if isinstance(value, dict):
        return "Dict[" + ", ".join(f"[{k!r}, {_value_text(v)}]" for k, v in value.items()) + "]"
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return f"Literal[{value!r}]"
    return f"<{type(value).__name__} object>"


def output_text(out: Any) -> str:
    """TF's text for a function's output type (its leaves are arrays after a call)."""
    if isinstance(out, jax.ShapeDtypeStruct):
        return repr(TensorSpec(tuple(out.shape), np.dtype(out.dtype)))
    return _value_text(out)


def describe(parameters: list[tuple[str, str, Any]], outputs: str, captures: list) -> str:
    """TF's block for one traced signature: its parameters (name, kind, value), output type and captures."""
    lines = ["Input Parameters:"]
    lines += [f"  {name} ({kind}): {_value_text(value)}" for name, kind, value in parameters]
    lines += ["Output Type:", f"  {outputs}", "Captures:"]
    lines += ([f"  {id(v)}: TensorSpec(shape=(), dtype=tf.resource, name=None)" for v in captures]
              if captures else ["  None"])
    return "\n".join(lines)
