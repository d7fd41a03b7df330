"""`tf.saved_model.save` for Keras models: the inference step as a `jax.export` program plus the weights.

The directory (see `format.py`) holds `saved_model.json` (the signatures: input names and specs, output
names), `variables/variables.npz`, one serialized program per signature under `functions/`, and
`model.keras` when Keras can write the archive. Observed in TF 2.21 with its Keras 3 (`tf.saved_model.save`
of a Sequential): one signature, `serving_default`, called with the keyword `inputs`, returning
`{"output_0": ...}` with the batch dimension free; jdist writes the same signature.
"""
from __future__ import annotations

import json
import os
import shutil
from typing import Any

import jax
import numpy as np

from jdist.saved_model import format as fmt
from jdist.saved_model.options import SaveOptions

DEFAULT_SERVING_SIGNATURE_DEF_KEY = "serving_default"
_ALTERNATIVE = ("jdist's tf.saved_model.save takes a Keras 3 model (a built Sequential, functional or subclassed "
                "model) or, through jdist.tf_compat, a tf.Module; save other objects' variables with "
                "tf.train.Checkpoint and rebuild the object in code, or serialize a JAX function yourself with "
                "jax.export")


def contains_saved_model(export_dir: Any) -> bool:
    """Whether `export_dir` holds a SavedModel jdist wrote (TF's `tf.saved_model.contains_saved_model`)."""
    return os.path.isfile(os.path.join(os.fspath(export_dir), fmt.DESCRIPTION))


def input_spec(model: Any) -> tuple[tuple, str] | None:
    """The model's one input as (shape with None for the batch, dtype), or None when Keras has not seen it."""
    try:
        inputs = model.inputs  # Sequential and functional models that know their Input
    except AttributeError:  # a subclassed model, or a Sequential not built yet
        inputs = None
    if inputs is not None:
        flat = jax.tree.leaves(inputs)
        if len(flat) != 1:
            raise ValueError(f"tf.saved_model.save: {type(model).__name__} takes {len(flat)} inputs; jdist's "
                             "SavedModel signature takes one input tensor. Save the model with "
                             "model.save('model.keras') and load it with keras.models.load_model.")
        return tuple(flat[0].shape), str(flat[0].dtype)
    shapes = getattr(model, "_build_shapes_dict", None)  # a subclassed model called once (by fit, predict, ...)
    if not getattr(model, "built", False) or not shapes:
        return None
    if len(shapes) != 1:
        raise ValueError(f"tf.saved_model.save: {type(model).__name__} was built from {sorted(shapes)}; jdist's "
                         "SavedModel signature takes one input tensor. Save the model with model.save('model.keras').")
    (shape,) = shapes.values()
    if not isinstance(shape, (tuple, list)) or any(isinstance(d, (tuple, list, dict)) for d in shape):
        return None
    dtype = getattr(model, "input_dtype", None) or "float32"
    return (None, *tuple(shape)[1:]), str(dtype)  # the batch dimension is free, as in TF's signature


def _output_names(outputs: Any) -> list[str]:
    if isinstance(outputs, dict):
        return [str(k) for k in outputs]
    return [f"output_{i}" for i in range(len(jax.tree.leaves(outputs)))]


def _export(model: Any, shape: tuple, dtype: str) -> tuple[bytes, list[str], list[tuple]]:
    """The serving program, its output names and the outputs' (shape, dtype)."""
    from jax import export

    flags = {"training": False} if getattr(model, "_call_has_training_arg", True) else {}

    def serve(trainable, non_trainable, x):
        outputs, _ = model.stateless_call(trainable, non_trainable, x, **flags)
        return list(outputs.values()) if isinstance(outputs, dict) else jax.tree.leaves(outputs)

    names = [f"b{i}" if d is None else str(d) for i, d in enumerate(shape)]
    x_spec = jax.ShapeDtypeStruct(export.symbolic_shape(", ".join(names)), np.dtype(dtype))
    weights = [[jax.ShapeDtypeStruct(tuple(v.shape), np.dtype(v.dtype)) for v in variables]
               for variables in (model.trainable_variables, model.non_trainable_variables)]
    try:
        outputs = jax.eval_shape(lambda t, n, x: model.stateless_call(t, n, x, **flags)[0], *weights,
                                 x_spec)
        exported = export.export(jax.jit(serve))(*weights, x_spec)
    except Exception as error:
        raise ValueError(f"tf.saved_model.save: {type(model).__name__}'s call on inputs of shape {shape} could not "
                         f"be exported as a JAX program ({type(error).__name__}: {error}). Save the model with "
                         "model.save('model.keras') instead.") from error
    specs = [(tuple(None if not isinstance(d, int) else d for d in o.shape), str(o.dtype))
             for o in exported.out_avals]
    return bytes(exported.serialize()), _output_names(outputs), specs


def save(obj: Any, export_dir: Any, signatures: Any = None, options: SaveOptions | None = None) -> None:
    """Writes `obj` (a Keras model) to `export_dir` as jdist's SavedModel: TF's `tf.saved_model.save`."""
    import keras

    if not isinstance(obj, keras.Model):
        raise TypeError(f"tf.saved_model.save got a {type(obj).__name__}. {_ALTERNATIVE}.")
    if signatures is not None:
        raise ValueError("jdist.saved_model.save(signatures=...): this writes the model's call as "
                         f"'{DEFAULT_SERVING_SIGNATURE_DEF_KEY}' and takes no other signatures; leave signatures out, "
                         "or save through jdist.tf_compat (tf.saved_model.save / model.save(path, signatures=...)), "
                         "which saves tf.function signatures.")
    if options is not None and not isinstance(options, SaveOptions):
        raise TypeError(f"options must be a tf.saved_model.SaveOptions, got {type(options).__name__}")
    write(obj, export_dir)


def write(obj: Any, export_dir: Any, input_name: str = "inputs", keys: tuple[str, ...] = (
        DEFAULT_SERVING_SIGNATURE_DEF_KEY,), endpoints: tuple[str, ...] = (), spec: Any = None) -> None:
    """The directory for a built Keras model: its call under each signature key (input keyword `input_name`),
    `endpoints` the loaded object's methods calling it (`model.export`'s `serve`), `spec` (shape, dtype) the
    input's when given, else the model's."""
    import keras

    directory = os.fspath(export_dir)
    os.makedirs(directory, exist_ok=True)
    for stale in (fmt.DESCRIPTION, fmt.ARCHIVE):
        if os.path.exists(os.path.join(directory, stale)):
            os.remove(os.path.join(directory, stale))
    shutil.rmtree(os.path.join(directory, fmt.FUNCTIONS), ignore_errors=True)
    description: dict[str, Any] = {"format": fmt.FORMAT, "version": fmt.VERSION, "signatures": {}, "archive": None,
                                   "model": type(obj).__name__, "endpoints": list(endpoints)}
    spec = input_spec(obj) if spec is None else spec
    if spec is not None:
        program, outputs, output_specs = _export(obj, *spec)
        os.makedirs(os.path.join(directory, fmt.FUNCTIONS), exist_ok=True)
        for key in keys:
            with open(os.path.join(directory, fmt.FUNCTIONS, key), "wb") as f:
                f.write(program)
            description["signatures"][key] = {
                "inputs": {input_name: {"shape": list(spec[0]), "dtype": spec[1]}},
                "outputs": {name: {"shape": list(s), "dtype": d} for name, (s, d) in zip(outputs, output_specs)}}
    fmt.write_variables(directory, obj)
    description["variable_names"] = {group: [fmt.tf_keras_name(v) for v in getattr(obj, f"{group}_variables")]
                                     for group in ("trainable", "non_trainable")}
    try:
        keras.saving.save_model(obj, os.path.join(directory, fmt.ARCHIVE))
        description["archive"] = fmt.ARCHIVE
    except Exception as error:  # the signature still serves; load_model will say why there is no archive
        description["archive_error"] = f"{type(error).__name__}: {error}"
    with open(os.path.join(directory, fmt.DESCRIPTION), "w") as f:
        json.dump(description, f, indent=1)
