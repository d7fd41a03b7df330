"""TensorFlow names jdist does not implement, each with the way forward, instead of a bare "not provided"."""
from __future__ import annotations

from typing import Any

DOCS = "docs/tf_mapping.md"


def not_provided(path: str) -> AttributeError:
    """The error for a TensorFlow name outside jdist's surface (with its way forward where `_NAMES` has one)."""
    if path in _NAMES:
        return AttributeError(_NAMES[path].format(name=path))
    return AttributeError(f"jdist does not provide `{path}`; {DOCS} lists the TensorFlow names it implements")


# top-level TF1 names TF's guide/migrate/validate_correctness uses, each with its TF2 way (AttributeError on access)
_NAMES = {
    "tf.Graph": (
        "jdist does not provide `{name}`: TF1 graphs have no JAX counterpart. Run TF2 code eagerly or compile it "
        "with tf.function; to compare a TF1 model with its TF2 port, run the TF1 side under TensorFlow and save "
        f"its outputs (np.save) for the TF2 side to compare with. See {DOCS}."),
    "tf.variable_creator_scope": (
        "jdist does not provide `{name}`: a variable is a Keras variable a layer makes in build(). To check that "
        "later calls create no variables, compare [v.path for v in layer.variables] before and after the call. "
        f"See {DOCS}."),
}

_SAVED_MODEL = (
    "jdist does not provide `{name}`: its tf.saved_model saves and loads Keras models (save, load, SaveOptions, "
    "LoadOptions, contains_saved_model: the model's call as a JAX program), not TensorFlow graphs. "
    "Save a Keras model with tf.saved_model.save(model, path) or model.save('model.keras'); "
    "for training state (weights, optimizer, step) use jdist.train.Checkpoint or the orbax-based "
    "jdist.checkpoint.CheckpointManager (docs/checkpointing.md). " + f"See {DOCS}."
)

_DTENSOR = (
    "jdist does not provide `{name}`. Of DTensor (tf.experimental.dtensor) it has Mesh, Layout, create_mesh, "
    "create_distributed_mesh, copy_to_mesh, relayout, pack, unpack, fetch_layout, call_with_layout and "
    "DVariable, on jax.sharding; tf.train.Checkpoint saves DVariables (DTensorCheckpoint), and a dataset's "
    "batches are placed with dtensor.pack or copy_to_mesh (DTensorDataset). " + f"See {DOCS}."
)

_KERAS_DTENSOR = (
    "jdist does not provide `{name}`: TF 2.21's tf.keras (Keras 3) has no tf.keras.dtensor either. Lay out a "
    "Keras model's weights with a jdist.Layout rule ([(regex over parameter paths, PartitionSpec), ...]) or a "
    "keras.distribution.LayoutMap under a jdist strategy (docs/layouts.md); DTensor's own API is "
    "tf.experimental.dtensor. With TF_USE_LEGACY_KERAS=1 set before tf.keras is first used, tf.keras serves "
    "tf_keras's tf.keras.dtensor, as TF does. " + f"See {DOCS}."
)

_MESSAGES = {
    "tf.saved_model": _SAVED_MODEL,
    "tf.estimator": (
        "jdist does not provide `{name}`: TensorFlow 2.21 has no tf.estimator either. Port the model_fn to a "
        "Keras model trained with model.fit under a jdist strategy, or with jdist.Trainer (docs/trainer.md). "
        f"See {DOCS}."),
    "tf.keras.estimator": (
        "jdist does not provide `{name}`: TensorFlow 2.21 has no Estimators either; train the Keras model "
        f"with model.fit or jdist.Trainer. See {DOCS}."),
    "tf.hub": (
        "jdist does not provide `{name}`: TF Hub modules are SavedModels (TensorFlow graphs). Load Keras 3 "
        "models from KerasHub / keras.saving.load_model, or the weights into a Keras model. " + f"See {DOCS}."),
    "tf.compat": (
        "jdist does not provide `{name}`: TF1 graphs, sessions and placeholders have no JAX counterpart; port the "
        f"code to TF2 style (eager functions, Keras) first. See {DOCS}."),
    "tf.io": (
        "jdist does not provide `{name}`: of tf.io it provides gfile (local files), read_file, write_file, "
        "decode_raw, TFRecordWriter / TFRecordOptions (read with tf.data.TFRecordDataset), parse_example, "
        "parse_single_example and their FixedLenFeature / VarLenFeature / FixedLenSequenceFeature / "
        "RaggedFeature / SparseFeature, serialize_tensor / parse_tensor, encode_base64 / decode_base64 and "
        "decode_compressed. Decode images with Pillow or keras.utils.load_img; for other files use Python's own "
        f"(open, os, shutil, pathlib; fsspec for cloud buckets). See {DOCS}."),
    "tf.summary": (
        "jdist does not provide `{name}`: of tf.summary it has create_file_writer, create_noop_writer, scalar, "
        "histogram, text, image, audio, write, flush, record_if, should_record_summaries, trace_on / trace_off / "
        "trace_export (which write nothing: profile with jax.profiler) and experimental.set_step / get_step. "
        f"See {DOCS}."),
    "tf.lite": f"jdist does not provide `{{name}}`: convert from a Keras model with TensorFlow installed. See {DOCS}.",
    "tf.image": (
        "jdist does not provide `{name}`: of tf.image it has resize, resize_with_pad, the flips, crops, rot90, "
        "transpose, convert_image_dtype, per_image_standardization, brightness, contrast, saturation, hue, gamma "
        "and grayscale ops and their random_* / stateless_random_* forms, the HSV / YIQ / YUV conversions, psnr, "
        "ssim, ssim_multiscale, sobel_edges, image_gradients, total_variation, extract_patches, crop_and_resize and "
        "non_max_suppression (with_scores, padded), and on the host (Pillow) the JPEG, PNG, GIF and BMP codecs "
        "(decode_*, encode_png, encode_jpeg); augment with keras.layers preprocessing. "
        f"See {DOCS}."),
    "tf.experimental.dtensor": _DTENSOR,
    "tf.keras.dtensor": _KERAS_DTENSOR,
    "tf.experimental": (
        "jdist does not provide `{name}`: of tf.experimental it has dtensor (meshes and layouts on jax.sharding), "
        "numpy (`tnp`, jdist.tf_compat.tf_numpy), ExtensionType / BatchableExtensionType with the dispatch "
        "decorators, and Optional; `dir(tf.experimental)` lists them. "
        f"See {DOCS}."),
    "tf.config.experimental_connect_to_cluster": (
        "jdist's `{name}` takes a TPUClusterResolver of this host's TPUs only (nothing to connect): "
        "multi-process JAX connects through jax.distributed.initialize (jdist.launch does it). "
        f"See {DOCS}."),
    "tf.tpu": (
        "jdist does not provide `{name}`: of tf.tpu it has tf.tpu.experimental.initialize_tpu_system (and "
        f"shutdown_tpu_system); jdist.TPUStrategy() starts on JAX's TPU devices directly. See {DOCS}."),
    "tf.tpu.experimental.embedding": (
        "jdist does not provide `{name}`: TPU embedding tables are keras.layers.Embedding, sharded over the "
        "strategy's model axis by a jdist.Layout rule (docs/layouts.md), or placed on parameter servers by "
        f"ParameterServerStrategy's variable_partitioner. See {DOCS}."),
    "tf.compat.v1.estimator": (
        "jdist does not provide `{name}`: TensorFlow 2.21 has no tf.estimator either. Port the model_fn to a "
        "Keras model trained with model.fit under a jdist strategy, or with jdist.Trainer (docs/trainer.md). "
        f"See {DOCS}."),
    # the TF1 names TF's migration guides replace (guide/migrate: fault_tolerance, checkpoint_saver,
    # early_stopping), each with the replacement those guides teach
    "tf.compat.v1.train": (
        "jdist does not provide `{name}`: TF1 graphs, sessions and placeholders have no JAX counterpart. TF2's "
        "replacements: a SessionRunHook -> a tf.keras.callbacks.Callback (or code in a custom training loop), "
        "tf1.train.*Optimizer -> tf.keras.optimizers, Saver / checkpoint hooks -> tf.train.Checkpoint with "
        "tf.train.CheckpointManager or tf.keras.callbacks.ModelCheckpoint / BackupAndRestore, "
        "MonitoredTrainingSession -> model.fit or a tf.GradientTape loop; Saver(var_list={{'a': a}}) -> "
        "tf.train.Checkpoint(var_list={{'a': a}}), init_from_checkpoint -> "
        "v.assign(tf.train.load_checkpoint(path).get_tensor(key)). jdist reads its own checkpoints only: read a "
        f"TensorFlow checkpoint under TensorFlow (tf.train.load_checkpoint) and assign its values. See {DOCS}."),
    "tf.compat.v1.feature_column": (
        "jdist does not provide `{name}`: feature columns feed TF1 graphs and Estimators. Use Keras "
        "preprocessing layers instead, either directly or via the `tf.keras.utils.FeatureSpace` utility "
        f"(TF 2.21's own deprecation advice). See {DOCS}."),
    "tf.compat.v1.layers": (
        "jdist does not provide `{name}`: tf1.layers build TF1 graphs (TF 2.21 with Keras 3 refuses them too). "
        f"Use the same layer from tf.keras.layers (Flatten, Dense, ...). See {DOCS}."),
    # guide/migrate: metrics_optimizers, logging_stop_hook, sessionrunhook_callback, validate_correctness
    "tf.compat.v1.metrics": (
        "jdist does not provide `{name}`: tf1.metrics return graph update ops. Use tf.keras.metrics (e.g. "
        "tf1.metrics.accuracy -> tf.keras.metrics.Accuracy(): update_state(y_true, y_pred), result(), "
        "reset_state()); an Estimator's eval_metric_ops or tf.estimator.add_metrics -> "
        f"model.compile(metrics=[...]). See {DOCS}."),
    "tf.compat.v1.Session": (
        "jdist does not provide `{name}`: TF1 graphs and sessions have no JAX counterpart. TF2 code runs eagerly: "
        f"sess.run(x) is x.numpy(); compile with tf.function. See {DOCS}."),
    "tf.compat.v1.keras": (
        "jdist does not provide `{name}`: TF 2.21's tf.compat.v1.keras is Keras 3, which has no TF1 shims "
        "(DeterministicRandomTestTool, track_tf1_style_variables) either; use tf.keras, with "
        f"tf.keras.utils.set_random_seed / tf.random.set_seed for reproducible random numbers. See {DOCS}."),
    "tf.compat.v1.losses": (
        "jdist does not provide `{name}`: tf1.losses build TF1 graphs. Use tf.keras.losses (for "
        "sparse_softmax_cross_entropy: tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)). "
        f"See {DOCS}."),
}

# guide/migrate: migrating_checkpoints, model_mapping: the TF1 variable and Saver names, each with its TF2 way
_MESSAGES.update({
    "tf.compat.v1.variable_scope": (
        "jdist does not provide `{name}`: TF1 variable scopes name graph variables. In TF2 a Keras layer names its "
        "own weights (TF 2.21 with Keras 3 leaves them unscoped inside a variable_scope, observed), so drop the "
        f"scope, or use tf.name_scope for tf.Variable names. See {DOCS}."),
    "tf.compat.v1.get_variable": (
        "jdist does not provide `{name}`: make the variable once, as tf.Variable(initial_value, name=...) or "
        "self.add_weight(...) in a Keras layer's build(); tf1.layers.* -> tf.keras.layers.*. " + f"See {DOCS}."),
    "tf.compat.v1.make_template": (
        "jdist does not provide `{name}`: a template shares the variables it made on first call; make them once "
        f"in a tf.keras.layers.Layer (build) or a tf.Module (__init__) and call that object. See {DOCS}."),
    "tf.compat.v1.global_variables": (
        "jdist does not provide `{name}`: there are no graph collections; use model.variables / "
        "module.variables, and tf.train.Checkpoint(var_list={{name: variable}}) to save them by name. "
        f"See {DOCS}."),
})
for _init in ("initializers", "zeros_initializer", "ones_initializer", "constant_initializer",
              "glorot_normal_initializer", "glorot_uniform_initializer", "random_normal_initializer"):
    _MESSAGES[f"tf.compat.v1.{_init}"] = (
        "jdist does not provide `{name}`: TF1 initializers feed tf1.get_variable. Use tf.keras.initializers "
        "(Zeros, Ones, Constant, GlorotNormal, GlorotUniform, RandomNormal) or an initial value for tf.Variable. "
        f"See {DOCS}.")

# TF 2.21's quantized and runtime-handle dtypes: JAX has no such array types.
_QUANTIZED = (
    "jdist does not provide `{name}`: TF's quantized dtypes (qint8, quint8, qint16, quint16, qint32) have no JAX "
    "array type. Hold quantized values as int8 / uint8 / int16 / int32 tensors with their scale and zero point "
    f"beside them, and compute in float. See {DOCS}.")
_HANDLES = (
    "jdist does not provide `{name}`: TF's resource and variant dtypes are handles of TF's graph runtime, with no "
    "JAX counterpart; a variable is a tf.Variable (a Keras variable), a dataset a tf.data.Dataset, a list of "
    f"tensors a Python list or tf.TensorArray. See {DOCS}.")
for _dtype in ("QUANTIZED_DTYPES", "qint8", "quint8", "qint16", "quint16", "qint32"):
    _MESSAGES[f"tf.dtypes.{_dtype}"] = _QUANTIZED
for _dtype in ("resource", "variant"):
    _MESSAGES[f"tf.dtypes.{_dtype}"] = _HANDLES

# TF 2.21's tf.linalg.LinearOperator classes: structured matrices with their own algebra, not ported.
_LINEAR_OPERATOR = (
    "jdist does not provide `{name}`: tf.linalg's LinearOperator classes (structured matrices) are not "
    "ported. Build the matrix densely (tf.linalg.diag(d) for LinearOperatorDiag, tf.eye for "
    "LinearOperatorIdentity, tf.linalg.band_part(m, -1, 0) for LinearOperatorLowerTriangular, the matrix "
    "itself for LinearOperatorFullMatrix) and use tf.linalg's functions (matmul, solve, triangular_solve, "
    "cholesky_solve, logdet), which are jax.numpy / jax.scipy.linalg inside compiled code. " + f"See {DOCS}."
)
for _kind in ("", "Adjoint", "BlockDiag", "BlockLowerTriangular", "Circulant", "Circulant2D", "Circulant3D",
              "Composition", "Diag", "FullMatrix", "Householder", "Identity", "Inversion", "Kronecker",
              "LowRankUpdate", "LowerTriangular", "Permutation", "ScaledIdentity", "Toeplitz", "Tridiag", "Zeros"):
    _MESSAGES[f"tf.linalg.LinearOperator{_kind}"] = _LINEAR_OPERATOR


def alternative(path: str) -> str | None:
    """The error message for `path` (or a prefix of it) with its way forward, None for an unlisted name."""
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        message = _MESSAGES.get(".".join(parts[:end]))
        if message is not None:
            return message.format(name=path)
    return None


class Unsupported:
    """A `tf.` submodule jdist does not implement: any attribute, or a call, raises its way forward."""

    def __init__(self, path: str):
        self.__name__ = self._tf_path = path  # importing it renames __name__ (importer.py); messages keep TF's

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(alternative(f"{self._tf_path}.{name}"))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(alternative(self._tf_path))

    def __repr__(self) -> str:
        return f"<jdist.tf_compat: {self._tf_path} is not provided>"


def module(name: str) -> Unsupported | None:
    """`tf.<name>` as an `Unsupported` namespace when jdist has a message for it, else None."""
    return Unsupported(f"tf.{name}") if f"tf.{name}" in _MESSAGES else None
