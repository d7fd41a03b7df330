"""`tf.saved_model.save` / `load` of a `tf.Module` (TF's SavedModel guide), each against TF 2.21's observed run.

Observed (TF 2.21, tensorflow-cpu): the module below, `__call__` traced on a scalar and a shape-(3,) input and
`scaled` on ((2,), 3.0), saved and loaded: imported(3.) 3.0, imported([1, 2, 3]) [1, 2, 3]; after
imported.mutate(2.) imported(3.) 6.0 and imported.v 2.0 while the original module's v stays 1.0;
imported.affine([[1, 1], [0, 2], [1, 0]]) {'y': [7, 8, 4], 'n': 3}; imported.scaled([1, 2], 3.0) [3, 6];
imported([[1.]]) and imported.scaled([1, 2], 4.0) raise ValueError "Could not find matching concrete function
to call loaded from the SavedModel."; imported.affine([1, 2]) a TypeError "Binding inputs to tf.function
failed"; v trainable, w not; no `variables` attribute; `signatures` ['serving_default'], the only function with
an input_signature that returns tensors (affine: `mutate` returns None). Saved with
signatures=__call__.get_concrete_function(tf.TensorSpec(None, tf.float32)): serving_default(x=[1, 2]) is
{'output_0': [1, 2]}, its input signature {'x': TensorSpec(shape=<unknown>, float32)}.
"""
from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402


class CustomModule(tf.Module):
    def __init__(self):
        super().__init__()
        self.v = tf.Variable(1.0)
        self.w = tf.Variable([2.0, 3.0], trainable=False)

    @tf.function
    def __call__(self, x):
        return x * self.v

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
    def mutate(self, new_v):
        self.v.assign(new_v)

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    def affine(self, x):
        return {"y": tf.reduce_sum(x * self.w, axis=1) + self.v, "n": tf.shape(x)[0]}

    @tf.function
    def scaled(self, x, factor):
        return x * factor


def _traced_module():
    module = CustomModule()
    module(tf.constant(0.0))
    module(tf.constant([0.0, 0.0, 0.0]))
    module.scaled(tf.constant([1.0, 2.0]), 3.0)
    return module


def test_a_saved_module_loads_with_its_functions_and_variables_as_tf(tmp_path):
    module = _traced_module()
    tf.saved_model.save(module, str(tmp_path))
    imported = tf.saved_model.load(str(tmp_path))
    assert float(imported(tf.constant(3.0))) == 3.0
    np.testing.assert_array_equal(imported(tf.constant([1.0, 2.0, 3.0])), [1.0, 2.0, 3.0])
    imported.mutate(tf.constant(2.0))
    assert float(imported(tf.constant(3.0))) == 6.0
    assert float(imported.v.numpy()) == 2.0 and float(module.v.numpy()) == 1.0
    out = imported.affine(tf.constant([[1.0, 1.0], [0.0, 2.0], [1.0, 0.0]]))
    assert list(out) == ["y", "n"]
    assert np.asarray(out["y"]).tolist() == [7.0, 8.0, 4.0] and int(out["n"]) == 3
    np.testing.assert_array_equal(imported.scaled(tf.constant([1.0, 2.0]), 3.0), [3.0, 6.0])
    assert (imported.v.trainable, imported.w.trainable) == (True, False)
    assert np.asarray(imported.w.numpy()).tolist() == [2.0, 3.0]
    assert not hasattr(imported, "variables")
    assert list(imported.signatures) == ["serving_default"]
    served = imported.signatures["serving_default"](x=tf.constant([[1.0, 0.0]]))
    assert np.asarray(served["y"]).tolist() == [4.0]


@pytest.mark.parametrize("call,error,message", [
    (lambda m: m(tf.constant([[1.0]])), ValueError, "Could not find matching concrete function"),
    (lambda m: m.scaled(tf.constant([1.0, 2.0]), 4.0), ValueError, "Could not find matching concrete function"),
    (lambda m: m.affine(tf.constant([1.0, 2.0])), TypeError, "Binding inputs to tf.function failed"),
], ids=["untraced_shape", "other_python_value", "against_input_signature"])
def test_a_call_no_saved_signature_matches_raises_tfs_error(tmp_path, call, error, message):
    tf.saved_model.save(_traced_module(), str(tmp_path))
    with pytest.raises(error, match=message):
        call(tf.saved_model.load(str(tmp_path)))


def test_a_signature_of_unknown_rank_serves_every_rank(tmp_path):
    module = _traced_module()
    tf.saved_model.save(module, str(tmp_path),
                        signatures=module.__call__.get_concrete_function(tf.TensorSpec(None, tf.float32)))
    serving = tf.saved_model.load(str(tmp_path)).signatures["serving_default"]
    assert np.asarray(serving(x=tf.constant([1.0, 2.0]))["output_0"]).tolist() == [1.0, 2.0]
    assert np.asarray(serving(x=tf.constant([[3.0]]))["output_0"]).tolist() == [[3.0]]
    (args, kwargs), outputs = serving.structured_input_signature, serving.structured_outputs
    assert args == () and list(kwargs) == ["x"] and kwargs["x"].shape.rank is None
    assert list(outputs) == ["output_0"] and outputs["output_0"].dtype == np.float32


def test_a_trained_module_with_a_submodule_goes_on_from_its_saved_values(tmp_path):
    class Dense(tf.Module):
        def __init__(self):
            super().__init__()
            self.kernel = tf.Variable([[0.5], [-0.25]])

    class Regression(tf.Module):
        def __init__(self):
            super().__init__()
            self.dense = Dense()
            self.bias = tf.Variable([0.0])

        @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32), tf.TensorSpec([None, 1], tf.float32)])
        def train_step(self, x, y):  # one SGD step on the mean squared error, by hand (no tape)
            error = tf.matmul(x, self.dense.kernel) + self.bias - y
            self.dense.kernel.assign_sub(0.1 * tf.matmul(tf.transpose(x), error) * 2 / 4)
            self.bias.assign_sub(0.1 * tf.reduce_sum(error, axis=0) * 2 / 4)
            return tf.reduce_mean(error ** 2)

    x = np.array([[1, 0], [0, 1], [1, 1], [2, 1]], np.float32)
    y = np.array([[1], [2], [3], [4]], np.float32)
    module, twin = Regression(), Regression()
    module.train_step(x, y)
    tf.saved_model.save(module, str(tmp_path))
    imported = tf.saved_model.load(str(tmp_path))
    np.testing.assert_allclose(imported.dense.kernel.numpy(), module.dense.kernel.numpy())
    losses = [float(imported.train_step(x, y)) for _ in range(3)]
    expected = [float(twin.train_step(x, y)) for _ in range(4)][1:]  # the same steps on the module itself
    np.testing.assert_allclose(losses, expected, rtol=1e-6)
    np.testing.assert_allclose(imported.dense.kernel.numpy(), twin.dense.kernel.numpy(), rtol=1e-6)
    np.testing.assert_allclose(imported.bias.numpy(), twin.bias.numpy(), rtol=1e-6)


def test_a_reduce_retracing_signature_saves_its_relaxed_sizes(tmp_path):
    """A `reduce_retracing` function called with lengths 2, 3, 4 traced for (2,) and then (None,): the saved
    function serves a length it was never called with (TF 2.21 relaxes the same way: two traces)."""
    class Scaled(tf.Module):
        def __init__(self):
            self.v = tf.Variable(2.0)

        @tf.function(reduce_retracing=True)
        def f(self, x):
            return x * self.v

    module = Scaled()
    for n in (2, 3, 4):
        np.testing.assert_array_equal(module.f(tf.ones([n])).numpy(), np.full(n, 2.0))
    assert module.f.experimental_get_tracing_count() == 2
    tf.saved_model.save(module, str(tmp_path / "saved"))
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    np.testing.assert_array_equal(np.asarray(loaded.f(tf.ones([5]))), np.full(5, 2.0))
