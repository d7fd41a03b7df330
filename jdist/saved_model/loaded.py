"""`tf.saved_model.load`: the object TF returns, with `signatures` that run the saved program.

Observed in TF 2.21 with its Keras 3: `loaded.signatures` maps `serving_default` to a function called with
the keyword `inputs` (or the tensor alone) that returns `{"output_0": ...}`; `structured_input_signature` is
`((), {"inputs": TensorSpec(...)})`; an unknown keyword is a TypeError. There the loaded object is not callable;
with tf_keras it is (`loaded(x)` is the model's output), and jdist's is, returning the model's output.
The program runs wherever it is called: eagerly, under `jax.jit`, or per replica inside `strategy.run`.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Iterator

import numpy as np

from jdist.input.tensor_spec import TensorSpec
from jdist.saved_model import format as fmt
from jdist.saved_model.options import LoadOptions


def _spec(name: str, entry: dict) -> TensorSpec:
    return TensorSpec(entry["shape"], np.dtype(entry["dtype"]), name=name)


class ConcreteFunction:
    """One signature of a loaded SavedModel: TF's `ConcreteFunction`, returning a dict of named outputs."""

    def __init__(self, name: str, program: bytes, description: dict, weights: tuple[list, list]):
        from jax import export

        self.name = name
        self._exported = export.deserialize(bytearray(program))
        self._inputs = {k: _spec(k, v) for k, v in description["inputs"].items()}
        self._outputs = {k: _spec(k, v) for k, v in description["outputs"].items()}
        self._weights = weights

    @property
    def structured_input_signature(self) -> tuple[tuple, dict[str, TensorSpec]]:
        return (), dict(self._inputs)

    @property
    def structured_outputs(self) -> dict[str, TensorSpec]:
        return dict(self._outputs)

    def _bind(self, args: tuple, kwargs: dict) -> list:
        names = list(self._inputs)
        if len(args) > len(names):
            raise TypeError(f"{self.name} takes {len(names)} input(s) ({', '.join(names)}); got {len(args)} "
                            "positional arguments")
        bound = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in self._inputs or key in bound:
                raise TypeError(f"{self.name} got an unexpected keyword argument {key!r}; its inputs are "
                                f"{names} (see .structured_input_signature)")
            bound[key] = value
        missing = [n for n in names if n not in bound]
        if missing:
            raise TypeError(f"{self.name} is missing the input(s) {missing}; call it as {self.name}({names[0]}=x)")
        values = []
        for name in names:
            value, spec = bound[name], self._inputs[name]
            if not hasattr(value, "dtype"):
                value = np.asarray(value)
            shape, dtype = tuple(value.shape), np.dtype(value.dtype)
            fits = len(shape) == len(spec.shape) and all(d is None or d == s for d, s in zip(spec.shape, shape))
            if not fits or dtype != spec.dtype:
                raise ValueError(f"{self.name}: input {name!r} must match {spec!r}, got shape {shape} and dtype "
                                 f"{dtype.name}; cast or reshape it (the model was saved for that spec)")
            values.append(value)
        return values

    def __call__(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        (x,) = self._bind(args, kwargs)
        trainable, non_trainable = self._weights
        outputs = self._exported.call(trainable, non_trainable, x)
        return dict(zip(self._outputs, outputs))

    def __repr__(self) -> str:
        inputs = ", ".join(f"{k}: {v!r}" for k, v in self._inputs.items())
        outputs = ", ".join(f"[{k!r}, {v!r}]" for k, v in self._outputs.items())
        return f"<ConcreteFunction (*, {inputs}) -> Dict[{outputs}]>"


class _Endpoint:
    """A method of the loaded object (`model.export`'s `serve`): the input positionally, the model's output
    (one tensor, or the list of them); observed in TF 2.21, Keras 3.15: `loaded.serve(x)` is a tf.Tensor."""

    def __init__(self, function: ConcreteFunction):
        self._function = function

    def __call__(self, x: Any) -> Any:
        outputs = list(self._function(x).values())
        return outputs[0] if len(outputs) == 1 else outputs


class _SignatureMap(Mapping):
    """`loaded.signatures`: signature key -> `ConcreteFunction`."""

    def __init__(self, functions: dict[str, ConcreteFunction]):
        self._functions = functions

    def __getitem__(self, key: str) -> ConcreteFunction:
        if key not in self._functions:
            raise KeyError(f"no signature {key!r} in this SavedModel; it has {sorted(self._functions)}"
                           + ("" if self._functions else " (the model was saved before Keras knew its input shape: "
                              "call or fit it once, then save)"))
        return self._functions[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)

    def __repr__(self) -> str:
        return f"_SignatureMap({self._functions!r})"


class Loaded:
    """What `tf.saved_model.load` returns: `signatures`, the weights, and a call of the saved model."""

    def __init__(self, directory: str, description: dict):
        self._directory = directory
        trainable, non_trainable = fmt.read_variables(directory)
        names = description.get("variable_names", {})
        self.trainable_variables = tuple(fmt.SavedArray.of(a, n, True) for a, n in zip(
            trainable, names.get("trainable", [f"variable_{i}:0" for i in range(len(trainable))])))
        self.non_trainable_variables = tuple(fmt.SavedArray.of(a, n, False) for a, n in zip(
            non_trainable, names.get("non_trainable", [f"non_trainable_{i}:0" for i in range(len(non_trainable))])))
        self.variables = self.trainable_variables + self.non_trainable_variables
        functions = {}
        for name, entry in description["signatures"].items():
            with open(os.path.join(directory, fmt.FUNCTIONS, name), "rb") as f:
                functions[name] = ConcreteFunction(name, f.read(), entry, (trainable, non_trainable))
        self.signatures = _SignatureMap(functions)
        for name in description.get("endpoints", []):  # `model.export`'s `serve`: the output, not a dict
            setattr(self, name, _Endpoint(functions[name]))

    def __call__(self, inputs: Any, training: Any = False, mask: Any = None) -> Any:
        """The saved model's output for `inputs` (tf_keras's loaded model is callable so; training=True is not
        served: the program is the inference call)."""
        if training:
            raise ValueError("the loaded SavedModel holds the model's inference call only; to train, load the "
                             "Keras model with tf.keras.models.load_model(path)")
        from jdist.saved_model.save import DEFAULT_SERVING_SIGNATURE_DEF_KEY

        outputs = self.signatures[DEFAULT_SERVING_SIGNATURE_DEF_KEY](inputs)
        return next(iter(outputs.values())) if len(outputs) == 1 else outputs


def read_description(directory: str) -> dict:
    path = os.path.join(directory, fmt.DESCRIPTION)
    if not os.path.isfile(path):
        if os.path.isfile(os.path.join(directory, "saved_model.pb")):
            raise ValueError(f"{directory!r} holds a TensorFlow SavedModel (saved_model.pb, a TF graph), which jdist "
                             "does not run; load it with TensorFlow, or save the model again under jdist "
                             "(tf.saved_model.save or model.save(path)).")
        raise FileNotFoundError(f"no SavedModel at {directory!r} (expected {fmt.DESCRIPTION}, which "
                                "tf.saved_model.save and model.save(path) write there)")
    with open(path) as f:
        description = json.load(f)
    if description.get("format") != fmt.FORMAT or description.get("version", 0) > fmt.VERSION:
        raise ValueError(f"{path} is not a jdist SavedModel of version <= {fmt.VERSION}")
    return description


def load(export_dir: Any, tags: Any = None, options: LoadOptions | None = None) -> Loaded:
    """TF's `tf.saved_model.load`: the saved signatures, runnable with or without a strategy."""
    if options is not None and not isinstance(options, LoadOptions):
        raise TypeError(f"options must be a tf.saved_model.LoadOptions, got {type(options).__name__}")
    directory = os.fspath(export_dir)
    return Loaded(directory, read_description(directory))
