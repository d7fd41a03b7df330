"""tf_keras's SavedModel idioms on Keras 3 models, installed when a script first uses `tf.keras`.

Observed in TF 2.21: with tf_keras (TF_USE_LEGACY_KERAS=1) `model.save(path)` without an extension writes a
SavedModel directory that both `tf.keras.models.load_model(path, options=...)` and `tf.saved_model.load`
read; TF's default Keras 3 refuses such a path ("Invalid filepath extension for saving"). jdist's `tf.keras`
takes tf_keras's form and writes jdist's SavedModel (`jdist.saved_model`: the serving program plus
`model.keras`). A model that has never seen an input is refused with tf_keras's ValueError, and
`model.save_spec()` is tf_keras's (None until the model is built or called, then `([TensorSpec], {})`).
`model.save_weights(prefix)` / `load_weights(prefix)` without `.weights.h5` (the checkpoint guide's
'easy_checkpoint'; Keras 3 refuses it: "The filename must end in `.weights.h5`", TF 2.21 observed) write and
read tf_keras's object checkpoint rooted at the model (`jdist.train`, keys `l1/kernel/...`).
Paths ending in `.keras` or `.h5` stay Keras 3's.
"""
from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from keras import Model

    from jdist.input.tensor_spec import TensorSpec
    from jdist.saved_model.options import LoadOptions

# tf_keras's message for an unbuilt model (TF 2.21, TF_USE_LEGACY_KERAS=1, the tutorial's SubclassedModel).
_UNBUILT = ("Model {model} cannot be saved either because the input shape is not available or because the "
            "forward pass of the model is not defined.To define a forward pass, please override `Model.call()`. "
            "To specify an input shape, either call `build(input_shape)` directly, or call the model on actual "
            "data using `Model()`, `Model.fit()`, or `Model.predict()`. If you have a custom training step, please "
            "make sure to invoke the forward pass in train step through `Model.__call__`, i.e. `model(inputs)`, "
            "as opposed to `model.call()`.")


def _is_keras_path(path: str) -> bool:
    return path.endswith((".keras", ".h5"))


def save_spec(self: Model, dynamic_batch: bool = True) -> tuple[list[TensorSpec], dict[str, TensorSpec]] | None:
    """tf_keras's `Model.save_spec()`: None before Keras knows the input, else `([TensorSpec], {})`."""
    from jdist.input.tensor_spec import TensorSpec
    from jdist.saved_model.save import input_spec

    spec = input_spec(self)
    if spec is None:
        return None
    shape, dtype = spec
    return [TensorSpec(shape, dtype, name="inputs")], {}


def install() -> None:
    """Adds the extension-less `Model.save`, `save_weights`, `load_weights` and `Model.save_spec` (once)."""
    import keras

    if getattr(keras.Model.save, "_jdist_saved_model", False):
        return
    from jdist.saved_model import keras_export

    keras_export.install()  # model.export(path): jdist's SavedModel with Keras's `serve` endpoint
    keras_save = keras.Model.save

    @functools.wraps(keras_save)
    def save(self: Any, filepath: Any, overwrite: bool = True, zipped: Any = None, **kwargs: Any) -> None:
        path = os.fspath(filepath) if isinstance(filepath, (str, os.PathLike)) else None
        if path is None or _is_keras_path(path) or zipped is not None:
            return keras_save(self, filepath, overwrite=overwrite, zipped=zipped, **kwargs)
        from jdist.saved_model.save import input_spec, save as save_model

        if input_spec(self) is None:
            raise ValueError(_UNBUILT.format(model=self))
        unknown = set(kwargs) - {"options", "save_format", "include_optimizer", "signatures"}
        if unknown:
            raise TypeError(f"Model.save got unexpected keyword arguments {sorted(unknown)}")
        if kwargs.get("signatures") is not None:  # tf_keras's (observed): the model, serving those signatures
            from jdist.tf_compat.module_saving import save_keras

            return save_keras(self, path, signatures=kwargs["signatures"], options=kwargs.get("options"))
        save_model(self, path, signatures=kwargs.get("signatures"), options=kwargs.get("options"))

    save._jdist_saved_model = True  # pyright: ignore[reportAttributeAccessIssue]
    keras.Model.save = save
    keras_save_weights, keras_load_weights = keras.Model.save_weights, keras.Model.load_weights

    @functools.wraps(keras_save_weights)
    def save_weights(self: Any, filepath: Any, *args: Any, **kwargs: Any) -> Any:
        path = os.fspath(filepath)
        if path.endswith(".h5"):
            return keras_save_weights(self, filepath, *args, **kwargs)
        from jdist.train.checkpoint import write_index, write_object

        write_object(self, path)  # tf_keras's TF-format weights: a checkpoint rooted at the model
        # ... named in the directory's `checkpoint` file, alone (tf_keras's, observed), for latest_checkpoint
        write_index(os.path.dirname(path) or ".", path, [path], [])

    @functools.wraps(keras_load_weights)
    def load_weights(self: Any, filepath: Any, *args: Any, **kwargs: Any) -> Any:
        path = os.fspath(filepath)
        if path.endswith((".h5", ".keras")):
            return keras_load_weights(self, filepath, *args, **kwargs)
        from jdist.train.checkpoint import restore_object

        return restore_object(self, path)

    keras.Model.save_weights = save_weights
    keras.Model.load_weights = load_weights
    if not hasattr(keras.Model, "save_spec"):
        keras.Model.save_spec = save_spec  # pyright: ignore[reportAttributeAccessIssue]


def load_model(filepath: str | os.PathLike[str], custom_objects: dict[str, object] | None = None, compile: bool = True,
               safe_mode: bool = True, options: LoadOptions | None = None) -> Any:
    """`tf.keras.models.load_model`: a `.keras` / `.h5` file, or a SavedModel directory written by `model.save(path)`
    or `tf.saved_model.save` (its `model.keras`); `options` is a `tf.saved_model.LoadOptions`."""
    import keras

    from jdist.saved_model.loaded import read_description
    from jdist.saved_model.options import LoadOptions

    if options is not None and not isinstance(options, LoadOptions):
        raise TypeError(f"options must be a tf.saved_model.LoadOptions, got {type(options).__name__}")
    path = os.fspath(filepath)
    if os.path.isdir(path):
        description = read_description(path)
        if description.get("archive") is None:
            raise ValueError(f"the SavedModel at {path!r} has no Keras archive ({description.get('archive_error')}); "
                             "tf.saved_model.load(path) still serves its signatures")
        path = os.path.join(path, description["archive"])
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path} is missing from the SavedModel directory")
    return keras.saving.load_model(path, custom_objects=custom_objects, compile=compile, safe_mode=safe_mode)
