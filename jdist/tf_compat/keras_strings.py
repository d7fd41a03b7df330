"""`tf.keras.Input(dtype=tf.string)` and the preprocessing models built on it, run on the host.

TF's parameter-server tutorial builds its feature preprocessing as a functional Keras model: a string
`Input`, a `StringLookup` applied to it, `tf.keras.Model({"features": raw_input}, ids)`, then calls that
model inside a `tf.data` map. Keras 3 on JAX has no string tensors, and jdist's `StringLookup` looks
strings up in numpy where `tf.data` maps run. So a string `Input` is a `HostInput` (a symbolic host
value), a host layer applied to it records a `HostTensor`, and `tf.keras.Model` over such inputs is a
`HostModel`: calling it runs the recorded layers on numpy. Anything else applied to a string tensor
(a Dense layer, a jitted op) is refused with an error naming the fix.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from keras import Layer


class HostTensor:
    """A symbolic value of a host preprocessing model: an input, or a host layer applied to another."""

    def __init__(self, shape: tuple, dtype: str, name: str | None = None, layer: Any = None,
                 parent: "HostTensor | None" = None):
        self.shape, self.dtype, self.name, self.layer, self.parent = shape, dtype, name, layer, parent

    def __repr__(self) -> str:
        return f"<HostTensor shape={self.shape} dtype={self.dtype} name={self.name}>"

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"{self!r} is a string input of a host preprocessing model: only host layers (StringLookup) can "
            "take it. Build the string lookup as its own tf.keras.Model and call it in the tf.data map; feed "
            "the numeric ids to the trained model through a numeric tf.keras.Input.")

    __array__ = __jax_array__ = __add__ = __mul__ = __getitem__ = _refuse


def string_input(shape: Sequence[int | None] | None = None, batch_size: int | None = None, name: str | None = None,
                 **_: object) -> HostTensor:
    """`tf.keras.Input(shape, dtype=tf.string)`: a symbolic host value (leading batch dimension None)."""
    return HostTensor((batch_size, *tuple(shape or ())), "string", name)


def apply(layer: Layer, inputs: HostTensor, output_shape: tuple, dtype: str) -> HostTensor:
    """A host layer called on a symbolic host value: recorded, run when the model is called."""
    return HostTensor(output_shape, dtype, getattr(layer, "name", None), layer, inputs)


def is_host(tree: object) -> bool:
    return any(isinstance(v, HostTensor) for v in _flat(tree))


def _flat(tree: Any) -> list:
    if isinstance(tree, dict):
        return [x for v in tree.values() for x in _flat(v)]
    if isinstance(tree, (list, tuple)):
        return [x for v in tree for x in _flat(v)]
    return [tree]


class HostModel:
    """`tf.keras.Model(inputs, outputs)` over string inputs: the recorded host layers, run on numpy."""

    def __init__(self, inputs: Any, outputs: Any, name: str | None = None, **_: Any):
        self.inputs, self.outputs, self.name = inputs, outputs, name or "model"
        flat_inputs = _flat(inputs)
        if not all((isinstance(v, HostTensor) and v.layer is None) or _is_keras_input(v) for v in flat_inputs):
            raise TypeError("A tf.keras.Model over string inputs takes only tf.keras.Input values as inputs "
                            "(the ids it produces feed a separate numeric model).")
        self._input_ids = [id(v) for v in flat_inputs]
        # TF's preprocessing model mixes string and numeric inputs (observed, TF 2.21 with Keras 3.15: a dict
        # of int64, string and float32 Inputs through CategoryEncoding, StringLookup and Normalization): the
        # numeric outputs run as a Keras model over the numeric inputs, the string ones on the host.
        self._numeric_inputs = [v for v in flat_inputs if not isinstance(v, HostTensor)]
        self._numeric_outputs = _numeric_needed(outputs, set(self._input_ids))
        self._numeric_model: Any = None

    @property
    def input(self) -> Any:
        """The model's symbolic inputs (`model.input`, as Keras's)."""
        return self.inputs

    @property
    def output(self) -> Any:
        return self.outputs

    def __call__(self, data: Any, training: bool | None = None) -> Any:
        if _flat(data) and all(isinstance(v, HostTensor) or _is_keras_input(v) for v in _flat(data)):
            if [id(v) for v in _flat(data)] == self._input_ids:
                return self.outputs  # called on its own symbolic inputs (`model(model.input)`)
        values = self._bind(data)
        if self._numeric_outputs:
            values.update(self._run_numeric(values))
        return _map(self.outputs, lambda t: self._evaluate(t, values))

    def _run_numeric(self, values: dict[int, Any]) -> dict[int, Any]:
        """The numeric outputs: Keras's functional model over the numeric inputs, called on their values."""
        if self._numeric_model is None:
            from keras.src.models.functional import Functional
            self._numeric_model = Functional(self._numeric_inputs, self._numeric_outputs)
        results = self._numeric_model([values[id(v)] for v in self._numeric_inputs])
        results = results if isinstance(results, (list, tuple)) else [results]
        return {id(t): r for t, r in zip(self._numeric_outputs, results)}

    predict_on_batch = __call__

    def _bind(self, data: Any) -> dict[int, Any]:
        if isinstance(self.inputs, dict) and isinstance(data, dict):
            missing = sorted(set(self.inputs) - set(data))
            if missing:
                raise KeyError(f"{self.name}: the inputs {missing} are missing from the call's dict")
            return {id(t): _conform(t, data[k]) for k, t in self.inputs.items()}
        flat = _flat(self.inputs)
        given = [data] if isinstance(data, np.ndarray) or not isinstance(data, (list, tuple, dict)) or (
            len(flat) == 1 and not isinstance(data, dict)) else _flat(data)
        if len(given) != len(flat):
            raise ValueError(f"{self.name} takes {len(flat)} input(s), got {len(given)}")
        return {id(t): _conform(t, v) for t, v in zip(flat, given)}

    def _evaluate(self, tensor: Any, values: dict[int, Any]) -> Any:
        if id(tensor) in values:
            return values[id(tensor)]
        if not isinstance(tensor, HostTensor) or tensor.layer is None or tensor.parent is None:
            raise ValueError(f"{self.name}: the output depends on {tensor!r}, which is not among its inputs")
        values[id(tensor)] = out = tensor.layer(_map(tensor.parent, lambda t: self._evaluate(t, values)))
        return out

    def predict(self, x: Any, batch_size: int | None = None, verbose: Any = "auto", **_: Any) -> Any:
        """`model.predict`: the model over each batch of a dataset (its features when it yields (x, y)), the
        results joined along the batch as numpy, as Keras's; arrays are taken in `batch_size` (32) rows."""
        if hasattr(x, "__iter__") and not isinstance(x, (dict, list, tuple, np.ndarray)):
            batches = [b[0] if isinstance(b, tuple) and not isinstance(self.inputs, tuple) else b for b in x]
        else:
            rows = len(_flat(x)[0])
            size = batch_size or 32
            batches = [_map(x, lambda v, i=i: np.asarray(v)[i:i + size]) for i in range(0, rows, size)]
        results = [self(b) for b in batches]
        return _map_many(results, lambda parts: np.concatenate([np.asarray(p) for p in parts]))

    def save(self, filepath: Any, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            f"{self.name} runs string preprocessing on the host and cannot be saved as a .keras file in jdist. "
            "Save the numeric model with model.save and rebuild the string lookups (their vocabularies) when "
            "loading.")

    def get_config(self) -> dict:
        return {"name": self.name}


def _numeric_needed(outputs: Any, inputs: set[int]) -> list:
    """The Keras tensors the host outputs depend on (a model's numeric outputs, and the numeric values that a
    Keras model called on host values takes), the inputs excluded."""
    needed: dict[int, Any] = {}
    stack = _flat(outputs)
    while stack:
        t = stack.pop()
        if isinstance(t, HostTensor):
            stack.extend(_flat(t.parent) if t.parent is not None else [])
        elif _is_keras_input(t) and id(t) not in inputs:
            needed.setdefault(id(t), t)
    return list(needed.values())


def _map_many(trees: list, fn: Callable[[list], Any]) -> Any:
    first = trees[0]
    if isinstance(first, dict):
        return {k: _map_many([t[k] for t in trees], fn) for k in first}
    if isinstance(first, (list, tuple)):
        return type(first)(_map_many([t[i] for t in trees], fn) for i in range(len(first)))
    return fn(trees)


def _as_keras(value: Any) -> Any:
    """A host step's numeric numpy result as a JAX array: Keras takes a dict of all tensors or of all arrays."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        import jax.numpy as jnp
        return jnp.asarray(value)
    return value


def _is_keras_input(value: object) -> bool:
    from keras import KerasTensor
    return isinstance(value, KerasTensor)


def _conform(tensor: Any, value: Any) -> Any:
    """tf_keras's rule for a functional model's input: a value one rank short of an input whose last dimension
    is 1 gets that dimension (observed, TF 2.21 with tf_keras: an Input of shape (1,) called on a (1,) string
    gives a (1, 1) result; one of shape (3,) called on a (3,) string gives (3,))."""
    if not isinstance(tensor, HostTensor):
        return value  # a numeric input: Keras conforms it
    array = np.asarray(value, dtype=object)
    if array.ndim == len(tensor.shape) - 1 and tensor.shape[-1] == 1:
        return array[..., None]
    return array


def _map(tree: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(tree, dict):
        return {k: _map(v, fn) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_map(v, fn) for v in tree)
    return fn(tree)


def install_model_dispatch() -> None:
    """`tf.keras.Model(inputs, outputs)` over string inputs builds a `HostModel`; every other call is Keras's."""
    from keras.src.models.model import Model

    new = Model.__new__
    if getattr(new, "_jdist_strings", False):
        return

    def dispatch(cls: type, *args: Any, **kwargs: Any) -> Any:
        if cls is Model:
            inputs = kwargs.get("inputs", args[0] if args else None)
            if inputs is not None and is_host(inputs):
                outputs = kwargs.get("outputs", args[1] if len(args) > 1 else None)
                return HostModel(inputs, outputs, name=kwargs.get("name"))
        return new(cls, *args, **kwargs)

    dispatch._jdist_strings = True  # pyright: ignore[reportFunctionMemberAccess]
    Model.__new__ = staticmethod(dispatch)  # pyright: ignore[reportAttributeAccessIssue]
    call = Model.__call__

    def host_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        """A Keras model called on a host model's symbolic outputs (TF's `training_model(preprocessing_model(
        inputs))`, observed in TF 2.21 with Keras 3.15) is recorded as one more host step."""
        if args and is_host(args[0]):
            return HostTensor((None,), "float32", self.name, lambda value: self(_map(value, _as_keras)), args[0])
        return call(self, *args, **kwargs)

    Model.__call__ = host_call


def keras_input(keras_input_fn: Callable) -> Callable:
    """`tf.keras.Input` / `tf.keras.layers.Input`: string dtypes give a `HostInput`, others Keras's (a tf dtype
    passed by name)."""
    from jdist.tf_compat.dtype_table import DType, string

    def Input(*args: Any, dtype: Any = None, **kwargs: Any) -> Any:  # noqa: N802 (TF's name)
        if dtype is string or (isinstance(dtype, str) and dtype == "string") or dtype in (str, bytes):
            return string_input(*args, **kwargs)
        if isinstance(dtype, DType):
            dtype = dtype.name
        return keras_input_fn(*args, dtype=dtype, **kwargs)

    Input.__doc__ = keras_input_fn.__doc__
    return Input


def host_output(layer: Layer, inputs: object, ids_shape: Callable[[tuple], tuple], dtype: str) -> HostTensor | None:
    """For host layers' `__call__`: a `HostTensor` when called on one, else None (run it on the values)."""
    if isinstance(inputs, HostTensor):
        return apply(layer, inputs, ids_shape(inputs.shape), dtype)
    return None

