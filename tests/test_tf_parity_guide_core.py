"""TF's Core API guides (`guide/core/quickstart_core`, `logistic_regression_core`, `optimizers_core`) under
`import jdist.tf_compat as tf`, on small fixed data in place of the downloads, and the rules behind them.

Every expected value was observed in TF 2.21 (tensorflow-cpu 2.21.0, Keras 3.15): a `tf.Module` exported with
`tf.function(input_signature=[tf.TensorSpec([None, None])])` whose body meets a known size (`x - mean` with a
[9] mean) saves, loads and predicts as the module does; `tf.math.confusion_matrix` of eager casts infers its
size; the guides' training loops (variables made in a `tf.function` on the first call, `GradientTape`,
`assign_sub`) give the same losses and variables.
"""
import os
import tempfile

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402
from jdist.tf_compat import signature_dims  # noqa: E402

X = np.array([[1., 2., 1.], [3., 5., 2.], [4., 1., 3.], [2., 2., 1.]], np.float32)


def _onehot_origin(x):
    origin = tf.cast(x[:, -1], tf.int32)
    origin_oh = tf.one_hot(origin - 1, 3)
    return tf.concat([x[:, :-1], origin_oh], axis=1)


class _Normalize(tf.Module):
    def __init__(self, x, variables):
        mean, std = tf.math.reduce_mean(x, axis=0), tf.math.reduce_std(x, axis=0)
        self.mean, self.std = (tf.Variable(mean), tf.Variable(std)) if variables else (mean, std)

    def norm(self, x):
        return (x - self.mean) / self.std


class _Export(tf.Module):
    def __init__(self, norm, w, features):
        self.norm_x, self.w, self.features = norm, tf.Variable(w), features

    @tf.function(input_signature=[tf.TensorSpec(shape=[None, None], dtype=tf.float32)])
    def __call__(self, x):
        x = self.norm_x.norm(self.features(x))
        return tf.squeeze(tf.matmul(x, self.w), axis=1)


# observed in TF 2.21: the loaded module's predictions (rounded to 5 places), equal to the module's own
_SAVED = {
    False: [-0.23748, 0.25534, 0.21962, -0.23748],  # quickstart: one-hot origin, tensor mean/std, 5 columns
    True: [-0.21424, 0.22697, 0.20151, -0.21424],  # logistic regression: variable mean/std, 3 columns
}


@pytest.mark.parametrize("variables", [False, True])
def test_export_with_free_sizes_meeting_known_ones_saves_and_loads(variables):
    features = _onehot_origin if not variables else (lambda t: t)
    x = tf.constant(X)
    ncols = 5 if not variables else 3
    module = _Export(_Normalize(features(x), variables), np.arange(ncols, dtype=np.float32).reshape(ncols, 1) / 10,
                     features)
    path = os.path.join(tempfile.mkdtemp(), "export")
    tf.saved_model.save(module, path)  # was: ValueError "Incompatible shapes for broadcasting" (a1 + 2 vs 9)
    loaded = tf.saved_model.load(path)
    out = loaded(x)
    np.testing.assert_allclose(out.numpy(), _SAVED[variables], atol=1e-5)
    assert out.dtype == tf.float32 and out.shape == (4,)
    assert float(tf.reduce_max(tf.abs(out - module(x)))) == 0.0  # observed 0.0
    np.testing.assert_allclose(loaded(x[:2]).numpy(), _SAVED[variables][:2], atol=1e-5)  # free rows stay free
    signature = loaded.signatures["serving_default"]
    # observed: ((), {'x': TensorSpec(shape=(None, None), dtype=tf.float32, name='x')}): the declared shape kept
    assert str(signature.structured_input_signature) == \
        "((), {'x': TensorSpec(shape=(None, None), dtype=tf.float32, name='x')})"
    np.testing.assert_allclose(signature(x=x)["output_0"].numpy(), _SAVED[variables], atol=1e-5)
    with pytest.raises(tf.errors.InvalidArgumentError):  # observed: InvalidArgumentError (Incompatible shapes)
        loaded(tf.ones([2, 4]))


def test_export_pins_a_size_that_is_not_linear():
    class Widen(tf.Module):
        def __init__(self):
            self.mean = tf.constant([1., 2., 3., 4.])
            self.w = tf.Variable(tf.ones([4, 1]))

        @tf.function(input_signature=[tf.TensorSpec(shape=[None, None], dtype=tf.float32)])
        def __call__(self, x):
            x = tf.concat([x, x[:, :2]], axis=1)  # JAX's size: min(a1, 2) + a1
            return tf.squeeze(tf.matmul(x - self.mean, self.w), axis=1)

    path = os.path.join(tempfile.mkdtemp(), "widen")
    tf.saved_model.save(Widen(), path)
    loaded = tf.saved_model.load(path)
    x = tf.reshape(tf.range(10, dtype=tf.float32), [5, 2])
    # observed in TF 2.21: [-8. 0. 8. 16. 24.] and [-8. 0. 8.]; a [2, 3] input is InvalidArgumentError
    assert loaded(x).numpy().tolist() == [-8., 0., 8., 16., 24.]
    assert loaded(x[:3]).numpy().tolist() == [-8., 0., 8.]
    with pytest.raises(tf.errors.InvalidArgumentError):
        loaded(tf.ones([2, 3]))


def test_pinned_sizes_read_from_jax_messages():
    error = ValueError("Incompatible shapes for broadcasting: shapes=[(a0, a1 + 2), TensorShape([9])]")
    assert signature_dims.pinned_sizes(error) == {1: 7}
    error = ValueError("Incompatible shapes for broadcasting: shapes=[(a0, min(a1, 2) + a1), TensorShape([4])]")
    assert signature_dims.pinned_sizes(error) == {1: 2}
    assert signature_dims.pinned_sizes(ValueError("shapes=[(a0, a1), (a0, b)]")) == {}  # nothing known to meet
    specs = [{"array": [None, None], "dtype": "float32"}, {"value": 1}]
    assert signature_dims.pin(specs, ValueError("shapes=[(a0, a1), TensorShape([30])]")) == \
        [{"array": [None, 30], "dtype": "float32"}, {"value": 1}]
    assert signature_dims.pin(specs, ValueError("no shapes")) is None


def test_confusion_matrix_of_eager_casts_infers_its_size():
    y = tf.constant([0., 1., 1., 0., 1.])
    v = tf.Variable([0.2, 0.7, 0.4, 0.9, 0.8])
    pred = tf.cast(v > 0.5, tf.float32)  # a JAX array, eager: its values are known
    cm = tf.math.confusion_matrix(tf.cast(y, tf.int32), tf.cast(pred, tf.int32))
    # observed in TF 2.21: [[1, 1], [1, 2]] int32 (was: ValueError "inside compiled code needs num_classes")
    assert cm.numpy().tolist() == [[1, 1], [1, 2]] and cm.dtype == tf.int32

    @tf.function
    def traced(a, b):
        return tf.math.confusion_matrix(a, b, num_classes=3)

    assert traced(tf.constant([0, 2]), tf.constant([2, 2])).numpy().tolist() == [[0, 0, 1], [0, 0, 0], [0, 0, 1]]


class _LinearRegression(tf.Module):
    def __init__(self):
        self.built = False

    @tf.function
    def __call__(self, x):
        if not self.built:
            self.w = tf.Variable(tf.fill([x.shape[-1], 1], 0.5))
            self.b = tf.Variable(tf.constant(0.1))
            self.built = True
        return tf.squeeze(tf.add(tf.matmul(x, self.w), self.b), axis=1)


def test_quickstart_training_loop():
    rs = np.random.RandomState(0)
    xs = rs.normal(size=(12, 3)).astype(np.float32)
    ys = (xs @ np.array([1., -2., 0.5], np.float32) + 0.3).astype(np.float32)
    ds = tf.data.Dataset.from_tensor_slices((xs, ys)).batch(5)
    model = _LinearRegression()
    losses = []
    for _ in range(4):
        batch = []
        for xb, yb in ds:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(xb) - yb))
            grads = tape.gradient(loss, model.variables)
            for g, v in zip(grads, model.variables):
                v.assign_sub(0.1 * g)
            batch.append(loss)
        losses.append(float(tf.reduce_mean(batch)))
    # observed in TF 2.21: losses [4.63811, 1.41429, 0.50373, 0.1968]; variables b (shape []) before w ([3, 1])
    np.testing.assert_allclose(losses, [4.63811, 1.41429, 0.50373, 0.1968], rtol=1e-4)
    assert [tuple(v.shape) for v in model.variables] == [(), (3, 1)]
    np.testing.assert_allclose(model.w.numpy().ravel(), [0.92252, -1.69148, 0.34791], rtol=1e-4)
    np.testing.assert_allclose(float(model.b.numpy()), 0.16744, rtol=1e-4)
    pred = model(xs[:1])
    assert pred.dtype == tf.float32 and pred.shape == (1,) and str(pred.dtype) == "<dtype: 'float32'>"


def test_optimizers_guide_momentum_converges_as_in_tf():
    x_star = tf.Variable(2.)
    change, it = 0., 0
    while it < 200:
        it += 1
        with tf.GradientTape() as tape:
            tape.watch(x_star)
            result = 2 * (x_star ** 4) + 3 * (x_star ** 3) + 2
        grad = tape.gradient(result, x_star)
        old = x_star.numpy()
        step = 0.01 * grad + 0.7 * change
        x_star.assign_sub(step)
        change = step
        if x_star == old:
            break
    # observed in TF 2.21 (optimizers_core, Momentum at learning rate 0.01): "Converged in 80 iterations", -1.1249987
    assert it == 80 and x_star.numpy() == np.float32(-1.1249987)


def test_a_scripts_eager_variable_arithmetic_is_a_tensor_with_a_tf_dtype():
    # logistic_regression_core's `(x - self.mean) / self.std` with variable mean and std; observed in TF 2.21:
    # each result an EagerTensor of dtype tf.float32 (`.dtype.is_floating` True); jdist gave a JAX array whose
    # dtype was numpy's (no `is_floating`)
    x, v = tf.constant([1., 2.]), tf.Variable([1., 3.])
    observed = {"x-v": (x - v, [0.0, -1.0]), "v*2": (v * 2, [2.0, 6.0]), "1-v": (1 - v, [0.0, -2.0]),
                "v/x": (v / x, [1.0, 1.5]), "v>1.5": (v > 1.5, [False, True])}
    for name, (result, value) in observed.items():
        assert result.numpy().tolist() == value, name
        assert repr(result.dtype) == ("tf.bool" if name == "v>1.5" else "tf.float32"), name
        assert result.dtype.is_floating == (name != "v>1.5"), name
    assert repr(x - v) == "<tf.Tensor: shape=(2,), dtype=float32, numpy=array([ 0., -1.], dtype=float32)>"
    assert repr(tf.Variable([[1., 3.]]) @ tf.ones([2, 1])) == \
        "<tf.Tensor: shape=(1, 1), dtype=float32, numpy=array([[4.]], dtype=float32)>"
    # observed: a variable's own dtype, 64-bit ones included (JAX computes them in 32 bits)
    for dtype, value in ((tf.int64, [2, 4]), (tf.float64, [2.0, 4.0]), (tf.complex128, [2 + 0j, 4 + 0j]),
                         (tf.int32, [2, 4]), (tf.float16, [2.0, 4.0])):
        result = tf.Variable(tf.constant([1, 2], dtype)) * 2
        assert result.dtype == dtype and result.numpy().tolist() == value, dtype

    @tf.function
    def traced(a):
        return a * v  # in a trace the product stays the program's value
    assert traced(tf.constant(2.)).numpy().tolist() == [2.0, 6.0]
