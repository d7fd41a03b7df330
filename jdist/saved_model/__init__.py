"""`jdist.saved_model`: TF's `tf.saved_model.save` / `load` for Keras models, as JAX programs.

    jdist.saved_model.save(model, "/tmp/served")              # a built Keras 3 model
    loaded = jdist.saved_model.load("/tmp/served")            # no Keras, no Python model code needed
    outputs = loaded.signatures["serving_default"](inputs=x)  # {"output_0": ...}, TF's signature

A TensorFlow SavedModel is a TF graph; jdist's is the model's inference step serialized with
`jax.export` (StableHLO, the batch dimension symbolic), its weights, a description of the signatures, and
the Keras archive (`model.keras`) when Keras can write one, so `keras.models.load_model` reads the same
directory. The loaded signature runs with or without a strategy, and inside `strategy.run`.
"""
from jdist.saved_model.loaded import ConcreteFunction, Loaded, load
from jdist.saved_model.options import LoadOptions, SaveOptions
from jdist.saved_model.save import DEFAULT_SERVING_SIGNATURE_DEF_KEY, contains_saved_model, save

__all__ = ["DEFAULT_SERVING_SIGNATURE_DEF_KEY", "ConcreteFunction", "LoadOptions", "Loaded", "SaveOptions",
           "contains_saved_model", "load", "save"]
