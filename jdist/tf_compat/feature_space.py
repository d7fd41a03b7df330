"""`tf.keras.utils.FeatureSpace` on jdist's `tf.data`: adapt, call (also in a `Dataset.map`), inputs, save/load.

Keras 3's FeatureSpace runs its lookups, hashing and concatenation as TensorFlow ops and adapts through
`tf.data` itself, so without TensorFlow it raises "This requires the tensorflow module". TF's structured-data
tutorial adapts it on a dataset of feature dicts, maps it over a labelled dataset, and trains a model on
`get_encoded_features()`. This class keeps Keras's FeatureSpace (its feature types, config, `.keras` saving)
and runs the work on the host, where jdist's `tf.data` maps run: jdist's `StringLookup`, `IntegerLookup`,
`Hashing` and `HashedCrossing`, Keras's `Normalization` and `Discretization` (adapted batch by batch).
Observed in TF 2.21 with Keras 3.15 and held by tests/test_tf_parity_tutorials_structured.py: the features
are encoded in sorted name order, then the crosses in sorted name order; one-hot features become multi-hot
columns of the layer's cardinality; the concat output is float32 (a scalar feature dict gives a vector);
`get_inputs()` are `(None, 1)` Inputs of dtype float32, int32 or string; `get_encoded_features()` is a
`(None, width)` float32 Keras tensor that a training model takes as its input.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from jdist.tfdata.structure import HostTensor


def _cardinality(layer: Any) -> int | None:
    for attribute in ("vocabulary_size",):
        if hasattr(layer, attribute):
            return int(getattr(layer, attribute)())
    if hasattr(layer, "num_tokens"):
        return int(layer.num_tokens)
    if getattr(layer, "bin_boundaries", None) is not None and type(layer).__name__ == "Discretization":
        return len(layer.bin_boundaries) + 1
    return int(layer.num_bins) if getattr(layer, "num_bins", None) is not None else None


def _column(value: Any) -> np.ndarray:
    array = np.asarray(value)
    return array.reshape(1, 1) if array.ndim == 0 else array[:, None] if array.ndim == 1 else array


@functools.cache
def feature_space_class() -> type:
    import keras
    from keras.src.layers.preprocessing.feature_space import Feature, FeatureSpace as KerasFeatureSpace
    from keras.src.utils.naming import auto_name

    from jdist.tf_compat.hashed_crossing import hashed_crossing_class
    from jdist.tf_compat.integer_lookup import integer_lookup_class
    from jdist.tf_compat.keras_extras import string_lookup_class
    from jdist.tf_compat.keras_hashing import hashing_class

    class _Encoded(keras.layers.Layer):
        """The FeatureSpace's encoding as a symbolic Keras step (shape and dtype only)."""

        def __init__(self, space: Any, **kwargs: Any):
            super().__init__(**kwargs)
            # the space's methods, not the space: the FeatureSpace is no sublayer of this step
            self._widths, self._is_float, self._mode = space._widths, space._is_float, space.output_mode

        def build(self, input_shape: Any) -> None:
            self.built = True

        def compute_output_spec(self, inputs: Any) -> Any:
            widths = self._widths()
            if self._mode == "concat":
                return keras.KerasTensor((None, sum(widths.values())), "float32")
            return {n: keras.KerasTensor((None, w), "float32" if w > 1 or self._is_float(n) else "int64")
                    for n, w in widths.items()}

        def call(self, inputs: Any) -> Any:
            raise TypeError("A FeatureSpace encodes on the host (its string lookups have no JAX tensors): map "
                            "it over the tf.data dataset (`ds.map(lambda x, y: (feature_space(x), y))`) and "
                            "give the model `feature_space.get_encoded_features()` as its input.")

    @keras.saving.register_keras_serializable(package="jdist")
    class FeatureSpace(KerasFeatureSpace):
        """`tf.keras.utils.FeatureSpace` run on the host (see the module docstring)."""

        @classmethod
        def integer_categorical(cls, max_tokens: int | None = None, num_oov_indices: int = 1,
                                output_mode: str = "one_hot", name: str | None = None) -> Any:
            name = name or auto_name("integer_categorical")
            layer = integer_lookup_class()(name=f"{name}_preprocessor", max_tokens=max_tokens,
                                           num_oov_indices=num_oov_indices)
            return Feature(dtype="int32", preprocessor=layer, output_mode=output_mode)

        @classmethod
        def string_categorical(cls, max_tokens: int | None = None, num_oov_indices: int = 1,
                               output_mode: str = "one_hot", name: str | None = None) -> Any:
            name = name or auto_name("string_categorical")
            layer = string_lookup_class()(name=f"{name}_preprocessor", max_tokens=max_tokens,
                                          num_oov_indices=num_oov_indices)
            return Feature(dtype="string", preprocessor=layer, output_mode=output_mode)

        @classmethod
        def string_hashed(cls, num_bins: int, output_mode: str = "one_hot", name: str | None = None) -> Any:
            name = name or auto_name("string_hashed")
            layer = hashing_class()(name=f"{name}_preprocessor", num_bins=num_bins)
            return Feature(dtype="string", preprocessor=layer, output_mode=output_mode)

        @classmethod
        def integer_hashed(cls, num_bins: int, output_mode: str = "one_hot", name: str | None = None) -> Any:
            name = name or auto_name("integer_hashed")
            layer = hashing_class()(name=f"{name}_preprocessor", num_bins=num_bins)
            return Feature(dtype="int32", preprocessor=layer, output_mode=output_mode)

        def _cross_to_crosser(self, cross: Any) -> Any:
            return hashed_crossing_class()(cross.crossing_dim, name=cross.name)

        def adapt(self, dataset: Any) -> None:
            """Each adaptable preprocessor on its feature of `dataset` (a tf.data.Dataset of feature dicts,
            or a dict of arrays), as Keras's: unbatched scalars batched by 32, rank-1 batches made columns."""
            from jdist.tf_compat.keras_adapt import is_dataset
            from jdist.tfdata.dataset import Dataset

            if not is_dataset(dataset):
                if not isinstance(dataset, dict):
                    raise ValueError("`adapt()` can only be called on a tf.data.Dataset or a dict of "
                                     f"arrays/lists. Received instead: {dataset} (of type {type(dataset)})")
                dataset = Dataset.from_tensor_slices(dataset)
            for name in self._list_adaptable_preprocessors():
                feature_dataset = dataset.map(lambda x, name=name: x[name])
                first = np.asarray(next(iter(feature_dataset)))
                if first.ndim == 0:
                    feature_dataset = feature_dataset.batch(32)
                if first.ndim in (0, 1):
                    feature_dataset = feature_dataset.map(lambda x: np.expand_dims(np.asarray(x), -1))
                self.preprocessors[name].adapt(feature_dataset)
            self._is_adapted = True
            self.get_encoded_features()
            self.built = True
            self._sublayers_built = True

        def _is_float(self, name: str) -> bool:
            spec = self.features.get(name) or self.crosses_by_name[name]
            return spec.output_mode == "float"

        def _widths(self) -> dict[str, int]:
            """Each encoded column block's width, in the order of the concat output."""
            names = sorted(self.features) + sorted(self.crosses_by_name)
            widths = {}
            for name in names:
                spec = self.features.get(name) or self.crosses_by_name[name]
                layer = self.preprocessors.get(name) or self.crossers[name]
                widths[name] = _cardinality(layer) if spec.output_mode == "one_hot" else 1
                if self.output_mode == "concat" and spec.output_mode == "int":
                    raise ValueError(f"Cannot concatenate features because feature '{name}' has not been "
                                     "encoded (it has dtype int64). Consider using `output_mode='dict'`.")
            return widths

        def get_encoded_features(self) -> Any:
            self._check_if_adapted()
            if self.encoded_features is None:
                self._widths()  # Keras's errors for features it cannot concatenate, at adapt time
                self.encoded_features = _Encoded(self, name=f"{self.name}_encoded")(self.inputs)
            return self.encoded_features

        def __call__(self, data: Any) -> Any:
            self._check_if_built()
            if not isinstance(data, dict):
                raise ValueError("A FeatureSpace can only be called with a dict. "
                                 f"Received: data={data} (of type {type(data)}")
            rebatched = any(np.ndim(v) == 0 for v in data.values())
            columns = {k: _column(v) for k, v in data.items()}
            pre = {k: np.asarray(self.preprocessors[k](columns[k])) for k in columns}
            crossed = {c.name: np.asarray(self.crossers[c.name]([pre[n] for n in c.feature_names]))
                       for c in self.crosses}
            widths = self._widths()
            encoded = {}
            for name, width in widths.items():
                value = pre[name] if name in pre else crossed[name]
                spec = self.features.get(name) or self.crosses_by_name[name]
                if spec.output_mode == "one_hot":  # Keras's CategoryEncoding(multi_hot) of the indices
                    hot = np.zeros((value.shape[0], width), np.float32)
                    rows = np.repeat(np.arange(value.shape[0]), value.reshape(value.shape[0], -1).shape[1])
                    hot[rows, value.reshape(-1).astype(np.int64)] = 1.0
                    value = hot
                encoded[name] = value
            if self.output_mode == "concat":
                out: Any = np.concatenate([v.astype(np.float32) for v in encoded.values()], axis=-1)
                out = out[0] if rebatched else out
                return HostTensor.of(out)
            return {k: HostTensor.of(v[0] if rebatched and v.shape[0] == 1 else v) for k, v in encoded.items()}

    return FeatureSpace
