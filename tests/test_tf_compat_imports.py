"""`from jdist.tf_compat.keras.layers import Dense`: TF's submodule paths import as TF 2.21's do.

Observed in TF 2.21.0 (tensorflow-cpu, Keras 3.15), each `tensorflow.` path below imports; a path to a
function (`import tensorflow.reduce_sum`) or to nothing (`tensorflow.nosuch`) raises ModuleNotFoundError.
TF itself refuses `from tensorflow.distribute import MirroredStrategy` and `tensorflow.distribute.coordinator`
(its lazy loader does not list them); jdist imports them, since `tf.distribute.MirroredStrategy` is the same name.
"""
from __future__ import annotations

import importlib
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported

import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

# (module path under tf, a name imported from it): each imported in TF 2.21.
TF_IMPORTS = [
    ("keras.layers", "Dense"), ("keras", "Model"), ("keras", "layers"), ("keras.losses", "Reduction"),
    ("keras.optimizers.legacy", "SGD"), ("keras.callbacks", "TensorBoard"), ("config", "list_physical_devices"),
    ("data", "Dataset"), ("nn", "relu"), ("compat.v1", "ConfigProto"), ("math", "reduce_sum"),
    ("io.gfile", "exists"), ("dtypes", "float32"), ("errors", "NotFoundError"), ("nest", "flatten"),
    ("train", "Checkpoint"), ("saved_model", "save"), ("tpu.experimental", "initialize_tpu_system"),
    ("distribute", "MirroredStrategy"), ("distribute.cluster_resolver", "TFConfigClusterResolver"),
]


def _attribute(path: str, name: str):
    value = tf
    for part in [*path.split("."), name]:
        value = getattr(value, part) if part else value
    return value


@pytest.mark.parametrize("path,name", TF_IMPORTS, ids=[f"{p}.{n}" for p, n in TF_IMPORTS])
def test_a_submodule_path_imports_the_attributes_object(path, name):
    module = importlib.import_module(f"jdist.tf_compat.{path}")
    assert getattr(module, name) is _attribute(path, name)
    namespace: dict = {}
    exec(f"from jdist.tf_compat.{path} import {name}", namespace)
    assert namespace[name] is _attribute(path, name)


def test_tfs_quickstart_imports_run_and_give_keras_classes():
    import keras

    namespace: dict = {}
    exec("import jdist.tf_compat as tf\n"
         "from jdist.tf_compat.keras.layers import Dense, Flatten, Conv2D\n"
         "from jdist.tf_compat.keras import Model\n", namespace)
    assert namespace["Dense"] is keras.layers.Dense and namespace["Conv2D"] is keras.layers.Conv2D
    assert namespace["Model"] is keras.Model
    # The finder binds the objects `tf.` reaches; it never loads Keras's files a second time under a jdist name,
    # and Keras's modules keep their own spec.
    loaded = {name: module for name, module in sys.modules.items()
              if name == "jdist.tf_compat.keras" or name.startswith("jdist.tf_compat.keras.")}
    assert set(loaded) >= {"jdist.tf_compat.keras", "jdist.tf_compat.keras.layers"}
    for name, module in loaded.items():
        assert module is _attribute(*name[len("jdist.tf_compat."):].rpartition(".")[::2]) if "." in name[16:] \
            else module is tf.keras, name
    assert keras.layers.__spec__.name == "keras.layers" and tf.keras.activations.__spec__.name.startswith("keras.")


def test_import_as_binds_the_same_namespace_as_the_attribute():
    import jdist.tf_compat.compat.v1 as tf1
    import jdist.tf_compat.keras.layers as layers

    assert tf1 is tf.compat.v1 and layers is tf.keras.layers
    assert tf.keras.__name__ == "keras._tf_keras.keras"  # TF 2.21's, unchanged by the import
    assert "__spec__" not in dir(tf.compat.v1)


def test_a_path_that_is_not_a_module_names_the_fix():
    with pytest.raises(ModuleNotFoundError, match=r"tf\.reduce_sum is a function, not a module; import it with "
                                                  r"`from jdist\.tf_compat import reduce_sum`"):
        importlib.import_module("jdist.tf_compat.reduce_sum")
    with pytest.raises(ModuleNotFoundError, match=r"jdist\.tf_compat\.nosuch.*docs/tf_mapping\.md"):
        importlib.import_module("jdist.tf_compat.nosuch")
    with pytest.raises(ModuleNotFoundError, match=r"jdist\.tf_compat\.keras\.nosuch"):
        importlib.import_module("jdist.tf_compat.keras.nosuch")


def test_the_packages_own_modules_still_import_as_files():
    from jdist.tf_compat import ops

    assert ops.__file__.endswith("tf_compat/ops.py")
    assert importlib.import_module("jdist.tf_compat.ops") is ops


# `from <tf path> import <name>` where jdist has no <name>: the error is jdist's way forward, never Python's
# "No module named 'tf'" (what the namespaces' own name, `tf.math`, sent Python's import machinery looking for).
# TF 2.21 imports every one of these (`from tensorflow.experimental import dtensor`, how its DTensor tutorials
# begin, imports jdist's DTensor: tests/test_tf_compat_dtensor.py).
MISSING_FROM = [("experimental", "async_scope",
                 r"`tf\.experimental\.async_scope`: of tf\.experimental it has dtensor .* numpy .*ExtensionType"),
                ("experimental.dtensor", "DTensorDataset", r"`tf\.experimental\.dtensor\.DTensorDataset`.*pack"),
                ("math", "nosuch", r"`tf\.math\.nosuch`.*docs/tf_mapping\.md"),
                ("estimator", "Estimator", r"`tf\.estimator\.Estimator`: TensorFlow 2\.21 has no tf\.estimator"),
                ("io", "decode_proto", r"`tf\.io\.decode_proto`")]


@pytest.mark.parametrize("path,name,message", MISSING_FROM, ids=[f"{p}.{n}" for p, n, _ in MISSING_FROM])
def test_from_a_namespace_import_a_missing_name_gives_its_way_forward(path, name, message):
    with pytest.raises(ImportError, match=message):
        exec(f"from jdist.tf_compat.{path} import {name}", {})
    assert repr(_attribute(path, "")).startswith("<jdist.tf_compat")  # still shown by TF's path once imported
    assert f"tf.{path}" in repr(_attribute(path, ""))
