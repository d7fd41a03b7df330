"""Keras 3's `model.export(path)` (format "tf_saved_model") as jdist's SavedModel.

Keras 3 exports through TensorFlow (`jax2tf` on the JAX backend) and raises ImportError without it. TF's
guides serve a Keras model so (`model.export('keras-export')`, then `tf.saved_model.load`). Observed in TF 2.21,
Keras 3.15: the loaded object has the signatures `serve` and `serving_default`, both taking the input by the
`keras.Input`'s name (`keras_tensor` for the first one made) and returning `{'output_0': ...}`, and a method
`serve(x)` that returns the output tensor; `keras.models.load_model` refuses the directory ("File format not
supported", naming `keras.layers.TFSMLayer`). jdist writes its SavedModel with those signatures and endpoint;
the other formats (onnx, openvino, litert, torch) stay Keras's own.
"""
from __future__ import annotations

import functools
from typing import Any

_ENDPOINT = "serve"


def _spec(model: Any, input_signature: Any) -> tuple[tuple[tuple, str] | None, str | None]:
    """((shape, dtype), input name or None) from `input_signature` (one spec) or the model's input."""
    import jax

    from jdist.saved_model.save import input_spec

    if input_signature is None:
        try:
            inputs = model.inputs  # a Sequential or functional model's Input
        except (AttributeError, ValueError):  # a subclassed model: TF names its input args_0
            inputs = None
        flat = jax.tree.leaves(inputs) if inputs else []
        name = getattr(flat[0], "name", None) if len(flat) == 1 else None
        return input_spec(model), name
    flat = jax.tree.leaves(input_signature, is_leaf=lambda x: hasattr(x, "shape") and hasattr(x, "dtype"))
    if len(flat) != 1:
        raise ValueError(f"model.export(input_signature=...): jdist exports a model of one input; got {len(flat)} "
                         "specs. Save the model with model.save('model.keras') instead.")
    spec = flat[0]
    shape = tuple(None if d is None else int(d) for d in spec.shape)
    dtype = getattr(spec.dtype, "name", None) or str(spec.dtype)
    return (shape, dtype), getattr(spec, "name", None)


def export(model: Any, filepath: Any, format: str = "tf_saved_model", verbose: Any = None,
           input_signature: Any = None, **kwargs: Any) -> None:
    """`model.export(filepath)`: jdist's SavedModel with TF's `serve` / `serving_default` (module docstring)."""
    from jdist.saved_model.save import DEFAULT_SERVING_SIGNATURE_DEF_KEY, write

    spec, name = _spec(model, input_signature)
    if spec is None:
        raise ValueError(f"model.export: {type(model).__name__} has not seen an input yet, so its input shape is "
                         "unknown; call the model on a batch (or fit it) first, or pass input_signature=[...].")
    write(model, filepath, input_name=name or "args_0", keys=(_ENDPOINT, DEFAULT_SERVING_SIGNATURE_DEF_KEY),
          endpoints=(_ENDPOINT,), spec=spec)
    if verbose is None or verbose:  # Keras's message (its Captures list omitted)
        shape, dtype = spec
        print(f"Saved artifact at '{filepath}'. The following endpoints are available:\n\n"
              f"* Endpoint '{_ENDPOINT}'\n  args_0 (POSITIONAL_ONLY): TensorSpec(shape={shape}, "
              f"dtype=tf.{dtype}, name={name if name is None else repr(name)})")


def install() -> None:
    """Routes `keras.Model.export(format="tf_saved_model")` here (once); other formats stay Keras's."""
    import keras

    keras_export = keras.Model.export
    if getattr(keras_export, "_jdist_saved_model", False):
        return

    @functools.wraps(keras_export)
    def model_export(self: Any, filepath: Any, format: str = "tf_saved_model", verbose: Any = None,
                     input_signature: Any = None, **kwargs: Any) -> Any:
        if format != "tf_saved_model":
            return keras_export(self, filepath, format=format, verbose=verbose, input_signature=input_signature,
                                **kwargs)
        return export(self, filepath, format=format, verbose=verbose, input_signature=input_signature, **kwargs)

    setattr(model_export, "_jdist_saved_model", True)  # noqa: B010 (a marker on the wrapper)
    keras.Model.export = model_export
