"""The `tf.keras` names TF's distribute tutorials use that Keras 3 runs only with TensorFlow installed.

- `tf.keras.callbacks.TensorBoard`: Keras 3's writes through `tf.summary`; this one writes the same
  summaries in the same layout (`jdist.callbacks.tensorboard.SummaryLog`: `train/`, `validation/`,
  `epoch_<metric>`, `epoch_learning_rate`, `batch_<metric>`, `evaluation_<metric>_vs_iterations`, weight
  histograms every `histogram_freq` epochs, the model's config for the graph tab) with jdist's own event-file
  writer. Weight images, embeddings and profiles are not written (an error says so).
- `tf.keras.layers.StringLookup`: Keras 3's is a TensorFlow op; this one looks strings up in numpy on
  the host, where `tf.data` map functions run, with TF 2.21's indices (observed: the mask token if any,
  then the OOV token, then the vocabulary; `adapt` ranks tokens by count, ties in descending order).
Both classes are made on first use, so importing `jdist.tf_compat` does not import Keras.
"""
from __future__ import annotations

import collections
import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from jdist.callbacks.tensorboard import SummaryLog, is_chief
from jdist.strategy.process_local import to_host
from jdist.tf_compat.farmhash import fingerprint64
from jdist.tfdata.structure import HostTensor
from jdist.tfdata.tensor_text import token_text

if TYPE_CHECKING:
    from jdist.tf_compat.namespace import Namespace


@functools.cache
def tensorboard_class() -> type:
    import keras

    class TensorBoard(keras.callbacks.Callback):
        """`tf.keras.callbacks.TensorBoard` without TensorFlow (process 0 writes)."""

        def __init__(self, log_dir: str = "logs", histogram_freq: int = 0, write_graph: bool = True,
                     write_images: bool = False, write_steps_per_second: bool = False,
                     update_freq: str | int = "epoch", profile_batch: Any = 0, embeddings_freq: int = 0,
                     embeddings_metadata: Any = None):
            super().__init__()
            unsupported = {"write_steps_per_second": write_steps_per_second, "embeddings_freq": embeddings_freq,
                           "profile_batch": profile_batch}
            asked = [k for k, v in unsupported.items() if v not in (0, False, None, (0, 0))]
            if asked:
                raise ValueError(f"tf.keras.callbacks.TensorBoard under jdist writes scalars, weight histograms and "
                                 f"images, and the model graph; {asked} need TensorFlow's summary ops. Leave them at "
                                 "their defaults (jdist.profile() records profiles).")
            if isinstance(histogram_freq, bool) or not isinstance(histogram_freq, int) or histogram_freq < 0:
                raise ValueError(f"histogram_freq must be a non-negative int (epochs between weight histograms; "
                                 f"0: none), got {histogram_freq!r}")
            self.histogram_freq, self.write_graph = histogram_freq, bool(write_graph)
            self.write_images = bool(write_images)  # with histogram_freq: the weights as images, as Keras 3
            if update_freq not in ("epoch", "batch") and not (isinstance(update_freq, int) and update_freq > 0):
                raise ValueError(f"update_freq must be 'epoch', 'batch' or a positive int, got {update_freq!r}")
            self.log_dir = str(log_dir)
            self.update_freq = 1 if update_freq == "batch" else update_freq
            self._log = SummaryLog(self.log_dir, tf_form=True)
            self._train_batches = 0

        def set_model(self, model: Any) -> None:
            super().set_model(model)
            # Keras 3 writes the config of a Sequential or functional model only (observed, TF 2.21: tag `keras`).
            if self.write_graph and type(model).__name__ in ("Sequential", "Functional") and is_chief():
                self._log.keras_model(model.to_json())

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            self._train_batches += 1
            if self.update_freq == "epoch" or not logs or not is_chief():
                return
            if self._train_batches % int(self.update_freq) == 0:
                self._log.batch(self._train_batches, {k: float(v) for k, v in logs.items()})

        def on_test_end(self, logs: dict | None = None) -> None:
            optimizer = getattr(self.model, "optimizer", None)
            if logs and optimizer is not None and is_chief():
                self._log.evaluation(int(np.asarray(optimizer.iterations)), {k: float(v) for k, v in logs.items()})

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            # the epoch's scalars first, then the weights' histograms (Keras 3's order, observed in TF 2.21)
            if is_chief():
                logs = {k: float(v) for k, v in (logs or {}).items() if k != "learning_rate"}
                rate = getattr(getattr(self.model, "optimizer", None), "learning_rate", None)
                self._log.epoch(epoch, logs, None if rate is None else float(np.asarray(rate)))
            if self.histogram_freq and epoch % self.histogram_freq == 0:
                # every process reads the weights (one may hold a piece another needs); the chief writes
                weights = [(w.path, w.value) for layer in getattr(self.model, "layers", []) for w in layer.weights]
                values = to_host([value for _, value in weights])
                if is_chief():
                    self._log.histograms(epoch, [(path, v) for (path, _), v in zip(weights, values)])
                    if self.write_images:
                        self._log.values(epoch, _weight_images(weights, values))

        def on_train_end(self, logs: dict | None = None) -> None:
            self._log.close()

    return TensorBoard


def _weight_images(weights: list, values: list) -> list[bytes]:
    """Keras 3's `<weight path>/image` summaries (`write_images`; observed in TF 2.21: a conv kernel's first
    three output channels, a dense kernel with its longer side across, a bias as a column)."""
    import keras

    from jdist.tf_compat.summary_images import image_value, weight_image

    channels_last = keras.config.image_data_format() == "channels_last"
    images = [(path.replace(":", "_"), weight_image(v, channels_last)) for (path, _), v in zip(weights, values)]
    return [image_value(f"{path}/image", image) for path, image in images if image is not None]


@functools.cache
def string_lookup_class() -> type:
    import keras

    @keras.saving.register_keras_serializable(package="jdist")
    class StringLookup(keras.layers.Layer):
        """`tf.keras.layers.StringLookup` on the host: strings (bytes or str, numpy or lists) to int64 indices."""

        def __init__(self, max_tokens: int | None = None, num_oov_indices: int = 1, mask_token: str | None = None,
                     oov_token: str = "[UNK]", vocabulary: Any = None, invert: bool = False,
                     output_mode: str = "int", **kwargs: Any):
            super().__init__(**kwargs)
            if output_mode not in ("int", "one_hot", "multi_hot", "count"):
                raise ValueError(f"StringLookup: output_mode {output_mode!r} is not provided by jdist; it has "
                                 "'int', 'one_hot', 'multi_hot' and 'count'")
            self.max_tokens, self.num_oov_indices, self.mask_token = max_tokens, int(num_oov_indices), mask_token
            self.oov_token, self.invert, self.output_mode = oov_token, invert, output_mode
            self._tokens: list[str] = []
            if vocabulary is not None:
                self.set_vocabulary(vocabulary)

        def set_vocabulary(self, vocabulary: Any) -> None:
            self._tokens = [token_text(t) for t in np.asarray(vocabulary, dtype=object).ravel()]

        def adapt(self, data: Any, steps: int | None = None) -> None:
            """The vocabulary from `data`: most frequent first, ties in descending order (as TF 2.21)."""
            from jdist.tf_compat.keras_adapt import is_dataset, numpy_batches

            if is_dataset(data):  # TF's adapt reads a tf.data.Dataset batch by batch
                data = np.concatenate([_strings(b).ravel() for b in numpy_batches(data, steps)] or [[]])
            counts = collections.Counter(token_text(t) for t in _strings(data).ravel())
            if self.mask_token is not None:
                counts.pop(self.mask_token, None)
            ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
            limit = None if self.max_tokens is None else self.max_tokens - self.num_oov_indices - (
                self.mask_token is not None)
            self._tokens = [t for t, _ in ranked[:limit]]

        def get_vocabulary(self) -> list[str]:
            """Mask token (if any), the OOV token once per OOV index, then the vocabulary: TF 2.21's order
            (observed: `['[UNK]', '[UNK]', 'a', 'b']` for two OOV indices)."""
            head = [] if self.mask_token is None else [self.mask_token]
            return head + [self.oov_token] * self.num_oov_indices + list(self._tokens)

        def vocabulary_size(self) -> int:
            return len(self.get_vocabulary())

        def call(self, inputs: Any) -> Any:
            if self.invert:
                table = np.asarray([t.encode() for t in self.get_vocabulary()], dtype=object)
                return table[np.asarray(inputs)]
            strings = _strings(inputs)
            offset = (self.mask_token is not None) + self.num_oov_indices
            index = {t: i + offset for i, t in enumerate(self._tokens)}
            if self.mask_token is not None:
                index[self.mask_token] = 0
            oov = offset - self.num_oov_indices
            flat = [index.get(token_text(t)) for t in strings.ravel()]
            if self.num_oov_indices == 0 and any(i is None for i in flat):
                raise ValueError("StringLookup: a token is not in the vocabulary and num_oov_indices=0")
            # An unknown string takes OOV index fingerprint % num_oov_indices (TF's to_hash_bucket_fast, observed).
            ids = np.asarray([(oov if self.num_oov_indices < 2 else oov + fingerprint64(token_text(t).encode())
                               % self.num_oov_indices) if i is None else i
                              for i, t in zip(flat, strings.ravel())], np.int64).reshape(strings.shape)
            if self.output_mode == "int":
                return ids
            depth = self.vocabulary_size()
            hot = np.eye(depth, dtype=np.int64)[ids]
            if self.output_mode == "one_hot":
                return hot
            summed = hot.sum(axis=-2) if ids.ndim else hot
            return summed if self.output_mode == "count" else np.minimum(summed, 1)

        def __call__(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            from jdist.tf_compat import keras_strings

            symbolic = keras_strings.host_output(self, inputs, self._output_shape, "string" if self.invert else "int64")
            if symbolic is not None:  # on a tf.keras.Input(dtype=tf.string): recorded for a host model
                return symbolic
            # host strings: no Keras tensor conversion (Keras has no string dtype on JAX); a tensor, as TF's
            return HostTensor.of(self.call(inputs))

        def _output_shape(self, shape: tuple) -> tuple:
            if self.output_mode == "int":
                return shape
            depth = self.vocabulary_size()
            return (*shape, depth) if self.output_mode == "one_hot" else (*shape[:-1], depth)

        def get_config(self) -> dict:
            # the adapted tokens travel in the config, so a saved model (or FeatureSpace) reloads them
            config = super().get_config()
            config.update(max_tokens=self.max_tokens, num_oov_indices=self.num_oov_indices,
                          mask_token=self.mask_token, oov_token=self.oov_token, invert=self.invert,
                          output_mode=self.output_mode, vocabulary=list(self._tokens) or None)
            return config

    return StringLookup


def prepare_worker() -> None:
    """A process that rebuilds `tf.keras` models made elsewhere (a parameter-server worker given a step or a
    preprocessing model): jdist's Keras layers registered with Keras, Keras patched as `tf.keras` patches it."""
    from jdist.tf_compat import sigmoid_logits
    from jdist.tf_compat.integer_lookup import integer_lookup_class
    from jdist.tf_compat.text_vectorization import text_vectorization_class

    string_lookup_class()
    text_vectorization_class()
    integer_lookup_class()
    add_reset_states()
    sigmoid_logits.install()


def _strings(data: Any) -> np.ndarray:
    array = np.asarray(data, dtype=object)
    if array.dtype != object or any(not isinstance(t, (str, bytes)) for t in array.ravel()):
        raise TypeError("StringLookup takes strings (str or bytes, in numpy arrays or lists); inside compiled "
                        "code (strategy.run, tf.function) strings cannot exist: look them up in the tf.data map")
    return array


_LEGACY_OPTIMIZERS = ("SGD", "RMSprop", "Adam", "Adagrad", "Adadelta", "Adamax", "Nadam", "Ftrl")


@functools.cache
def legacy_optimizers() -> Namespace:
    """`tf.keras.optimizers.legacy`: TF 2.21's tf_keras optimizers (TF_USE_LEGACY_KERAS=1) exist in Keras 3 only
    as an ImportError. jdist serves Keras 3's optimizer of the same name where its update rule and defaults match
    (SGD lr 0.01; Adam lr 0.001, betas 0.9/0.999, epsilon 1e-7), and tf_keras's rule where they differ
    (`legacy_optimizers.RMSprop`: epsilon added after the square root; `legacy_optimizers.Nadam`: tf_keras's
    momentum schedule). Keras 2's `decay=` (inverse-time decay
    per step) has no Keras 3 argument: it is refused unless 0."""
    import keras

    from jdist.tf_compat import legacy_optimizers as own
    from jdist.tf_compat.namespace import Namespace

    def legacy(cls: type) -> Any:
        def make(*args: Any, decay: float = 0.0, **kwargs: Any) -> Any:
            if decay:
                raise ValueError(f"tf.keras.optimizers.legacy.{cls.__name__}(decay={decay!r}): Keras 3 has no "
                                 "decay argument; pass learning_rate=keras.optimizers.schedules.InverseTimeDecay("
                                 f"initial_learning_rate, decay_steps=1, decay_rate={decay!r}).")
            return cls(*args, **kwargs)

        make.__name__ = make.__qualname__ = cls.__name__
        make.__doc__ = f"`{cls.__module__}.{cls.__name__}` (tf_keras's legacy optimizer of that name)."
        return make

    return Namespace("tf.keras.optimizers.legacy",
                     **{name: legacy(getattr(own, name, None) or getattr(keras.optimizers, name))
                        for name in _LEGACY_OPTIMIZERS},
                     Optimizer=keras.optimizers.Optimizer)


def add_reset_states() -> None:
    """tf_keras's `Metric.reset_states()` (Keras 3 kept only `reset_state()`): the same call, for TF scripts."""
    import keras

    if not hasattr(keras.metrics.Metric, "reset_states"):
        keras.metrics.Metric.reset_states = lambda self: self.reset_state()  # pyright: ignore[reportAttributeAccessIssue]


@functools.cache
def model_checkpoint_class() -> type:
    """`tf.keras.callbacks.ModelCheckpoint` that also takes tf_keras's extension-less path. tf_keras writes a
    SavedModel directory there (observed: TF 2.21 with TF_USE_LEGACY_KERAS=1); a SavedModel is a TF graph, so
    jdist writes the Keras 3 format inside that directory instead (`<path>/model.keras`); `filepath` stays the
    path given, as tf_keras's (observed), so a script listing it lists the directory. With
    save_weights_only=True tf_keras writes TF-format weights at the prefix and names them in the directory's
    `checkpoint` file (observed: `checkpoint`, `ckpt-1.data-00000-of-00001`, `ckpt-1.index` for `ckpt-{epoch}`),
    and so does jdist (`model.save_weights(prefix)`: `ckpt-1.npz` and `checkpoint`), which
    `tf.train.latest_checkpoint` and `SidecarEvaluator` read. Paths ending in .keras / .weights.h5 are Keras 3's."""
    import os

    import keras

    suffix = ".weights.h5"

    class ModelCheckpoint(keras.callbacks.ModelCheckpoint):
        def __init__(self, filepath: Any, *args: Any, save_weights_only: bool = False, **kwargs: Any):
            path = os.fspath(filepath)
            self._jdist_prefix = not path.endswith((".keras", ".h5")) and save_weights_only
            self._jdist_directory = not path.endswith((".keras", ".h5")) and not save_weights_only
            if self._jdist_prefix:
                path += suffix  # Keras 3 checks the name; the prefix is what is saved (_get_file_path)
            elif self._jdist_directory:
                path = os.path.join(path, "model.keras")
            super().__init__(path, *args, save_weights_only=save_weights_only, **kwargs)
            self.filepath = os.fspath(filepath)  # the path as given (tf_keras's `filepath`, observed)

        def _get_file_path(self, epoch: Any, batch: Any, logs: Any) -> str:
            path = super()._get_file_path(epoch, batch, logs)
            return os.path.join(path, "model.keras") if self._jdist_directory else path

        def _checkpoint_exists(self, filepath: str) -> bool:
            return os.path.exists(filepath + ".npz") if self._jdist_prefix else super()._checkpoint_exists(filepath)

    return ModelCheckpoint

