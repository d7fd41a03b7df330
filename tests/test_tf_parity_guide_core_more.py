"""TF's Core API guides `guide/core/mlp_core` and `guide/core/matrix_core` under `import jdist.tf_compat as tf`,
and the rules behind them.

Every expected value was observed in TF 2.21 (tensorflow-cpu 2.21.0, Keras 3.15) running the guides' code on
the same in-memory data (numpy RandomState(0) images in place of MNIST and the downloaded photo; weights
injected from RandomState(22) in place of `tf.random.uniform(seed=22)`): the MLP's training losses, the
saved `ExportModule` (an `input_signature` of four free dimensions, `tf.reshape(x, [-1, 784])` inside, a nested
`tf.function`), the SVD's values and sizes, and `tf.map_fn`'s results.
"""
# pyright: reportOperatorIssue=false
# (the guides' tensor arithmetic, `1 - beta ** t`, `tf.argmin(x) + 1`, which tf_compat's stubs type as arrays)
import os
import tempfile

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

_RS = np.random.RandomState(0)
X_TRAIN = _RS.randint(0, 256, size=(256, 28, 28, 1)).astype(np.uint8)
Y_TRAIN = _RS.randint(0, 10, size=(256,)).astype(np.int64)


class DenseLayer(tf.Module):
    def __init__(self, out_dim, init, activation=tf.identity):
        self.out_dim, self.init, self.activation, self.built = out_dim, init, activation, False

    def __call__(self, x):
        if not self.built:
            self.w = tf.Variable(self.init((x.shape[1], self.out_dim)))
            self.b = tf.Variable(tf.zeros(shape=(self.out_dim,)))
            self.built = True
        return self.activation(tf.add(tf.matmul(x, self.w), self.b))


class MLP(tf.Module):
    def __init__(self, layers):
        self.layers = layers

    @tf.function
    def __call__(self, x, preds=False):
        for layer in self.layers:
            x = layer(x)
        return x


class Adam:  # the guide's own optimizer
    def __init__(self, lr=1e-3, b1=0.9, b2=0.999, ep=1e-7):
        self.b1, self.b2, self.lr, self.ep, self.t, self.v, self.s, self.built = b1, b2, lr, ep, 1., [], [], False

    def apply_gradients(self, grads, variables):
        if not self.built:
            for var in variables:
                self.v.append(tf.Variable(tf.zeros(shape=var.shape)))
                self.s.append(tf.Variable(tf.zeros(shape=var.shape)))
            self.built = True
        for i, (d, var) in enumerate(zip(grads, variables)):
            self.v[i].assign(self.b1 * self.v[i] + (1 - self.b1) * d)
            self.s[i].assign(self.b2 * self.s[i] + (1 - self.b2) * tf.square(d))
            vb = self.v[i] / (1 - (self.b1 ** self.t))
            sb = self.s[i] / (1 - (self.b2 ** self.t))
            var.assign_sub(self.lr * (vb / (tf.sqrt(sb) + self.ep)))
        self.t += 1.


class ExportModule(tf.Module):
    def __init__(self, model):
        self.model = model

    @tf.function(input_signature=[tf.TensorSpec(shape=[None, None, None, None], dtype=tf.uint8)])
    def __call__(self, x):
        x = tf.reshape(x, shape=[-1, 784]) / 255
        return tf.argmax(tf.nn.softmax(self.model(x)), axis=1)


@pytest.fixture(scope="module")
def trained():
    """The guide's MLP (hidden sizes 32 and 16 here) trained 2 epochs of 2 batches with its Adam."""
    weights = np.random.RandomState(22)

    def init(shape):
        lim = np.sqrt(6.) / np.sqrt(sum(shape))
        return tf.constant(weights.uniform(-lim, lim, size=shape).astype(np.float32))

    ds = tf.data.Dataset.from_tensor_slices((X_TRAIN, Y_TRAIN)).batch(128)
    ds = ds.map(lambda a, b: (tf.reshape(a, [-1, 784]) / 255, b))
    model = MLP([DenseLayer(32, init, tf.nn.relu), DenseLayer(16, init, tf.nn.relu), DenseLayer(10, init)])
    opt, losses = Adam(), []
    for _ in range(2):
        for xb, yb in ds:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=yb, logits=model(xb)))
            opt.apply_gradients(tape.gradient(loss, model.variables), model.variables)
            losses.append(float(loss))
    return model, ds, losses


def test_mlp_training_losses_and_variables(trained):
    model, ds, losses = trained
    # observed in TF 2.21, Keras 3.15: the same data, weights and steps
    np.testing.assert_allclose(losses, [2.38143, 2.36129, 2.30888, 2.30468], atol=2e-5)
    assert repr(ds.element_spec) == ("(TensorSpec(shape=(None, 784), dtype=tf.float32, name=None), "
                                     "TensorSpec(shape=(None,), dtype=tf.int64, name=None))")
    assert [tuple(v.shape) for v in model.variables] == [(32,), (784, 32), (16,), (32, 16), (10,), (16, 10)]


def test_saved_export_module_with_free_dimensions(trained):
    """An input_signature of four None dimensions, `tf.reshape(x, [-1, 784])` and the model's own tf.function
    inside: TF 2.21 saves and loads it, and the loaded function gives the module's classes."""
    model = trained[0]
    export = ExportModule(model)
    path = os.path.join(tempfile.mkdtemp(), "mlp_model_export")
    assert tf.saved_model.save(export, path) is None
    loaded = tf.saved_model.load(path)
    x = X_TRAIN[:40]
    classes = loaded(x)
    np.testing.assert_array_equal(classes.numpy(), np.asarray(export(x)))
    assert classes.shape == (40,) and str(classes.dtype).startswith("<dtype: '")  # a tensor, TF's dtype repr
    # observed: other batch shapes fit the free dimensions ((1, 56, 28, 1) has 2 rows of 784)
    assert loaded(X_TRAIN[:2].reshape(1, 56, 28, 1)).shape == (2,)
    assert list(loaded.signatures) == ["serving_default"]


def test_loaded_reshape_weights_and_bad_sizes():
    class M(tf.Module):
        def __init__(self):
            self.w = tf.Variable(tf.ones([784, 3]) / 784.)

        @tf.function(input_signature=[tf.TensorSpec(shape=[None, None, None, None], dtype=tf.uint8)])
        def __call__(self, x):
            return tf.matmul(tf.reshape(x, shape=[-1, 784]) / 255, self.w)

    path = tempfile.mkdtemp()
    tf.saved_model.save(M(), path)
    loaded = tf.saved_model.load(path)
    x = (np.arange(2 * 28 * 28).reshape(2, 28, 28, 1) % 251).astype(np.uint8)
    out = loaded(x)
    # observed in TF 2.21: [[0.47314] * 3, [0.47795] * 3], float32
    assert out.dtype == tf.float32
    np.testing.assert_allclose(out.numpy(), [[0.47314] * 3, [0.47795] * 3], atol=1e-5)
    # observed: sizes the reshape cannot take are InvalidArgumentError ("Input to reshape is a tensor with 1512
    # values, but the requested shape requires a multiple of 784")
    with pytest.raises(tf.errors.InvalidArgumentError, match="reshape"):
        loaded(np.zeros((2, 28, 27, 1), np.uint8))
    # observed: a numpy array of another dtype is converted to the input_signature's; a tensor is a TypeError
    np.testing.assert_allclose(loaded(x.astype(np.float32)).numpy(), out.numpy())
    with pytest.raises(TypeError, match="Binding inputs to tf.function failed"):
        loaded(tf.constant(x.astype(np.int32)))


def test_svd_rank_r_approximation():
    A = tf.constant(np.random.RandomState(0).uniform(size=(40, 30)).astype(np.float32))
    s, U, V = tf.linalg.svd(A)
    # observed in TF 2.21: shapes, dtype and the leading singular values
    assert (s.shape, U.shape, V.shape, s.dtype) == ((30,), (40, 30), (30, 30), tf.float32)
    np.testing.assert_allclose(s[:4].numpy(), [17.4183, 3.1094, 2.9948, 2.9011], atol=2e-4)
    A_svd = tf.einsum('s,us,vs -> uv', s, U, V)
    assert float(tf.reduce_max(tf.abs(A_svd - A))) < 1e-4
    assert float(tf.reduce_max(tf.abs(U @ tf.linalg.diag(s) @ tf.transpose(V) - A))) < 1e-4

    def rank_r_approx(s, U, V, r):
        s_r, U_r, V_r = s[..., :r], U[..., :, :r], V[..., :, :r]
        return (tf.einsum('...s,...us,...vs->...uv', s_r, U_r, V_r),
                tf.size(U_r) + tf.size(s_r) + tf.size(V_r))

    A_15, size_15 = rank_r_approx(s, U, V, 15)
    # observed: "Original Size of A: 1200", "Approximation Size: 1065" / 213 (rank 3)
    assert f"{tf.size(A)} {size_15} {rank_r_approx(s, U, V, 3)[1]}" == "1200 1065 213"
    A_10 = rank_r_approx(s, U, V, 10)[0]
    # observed: both print 32.673
    assert f"{tf.norm(A - A_10) ** 2:.3f} {tf.reduce_sum(s[10:] ** 2):.3f}" == "32.673 32.673"
    assert tf.linalg.svd(A, full_matrices=True)[1].shape == (40, 40)


def test_image_compression_batched_svd_and_map_fn():
    image = (np.random.RandomState(1).uniform(size=(48, 64, 3)) * 255).astype(np.uint8)
    scaled = tf.convert_to_tensor(image) / 255
    s, U, V = tf.linalg.svd(tf.transpose(scaled, [2, 0, 1]))
    # observed in TF 2.21: uint8 / 255 is float32; batched shapes
    assert (scaled.dtype, s.shape, U.shape, V.shape) == (tf.float32, (3, 48), (3, 48, 48), (3, 64, 48))
    r_size = tf.size(U[..., :, :10]) + tf.size(s[..., :10]) + tf.size(V[..., :, :10])
    prop = r_size / tf.size(image)
    # observed: "Compressed image size: 3390", "Proportion of original size: 0.368", prop float64
    assert (f"{r_size} {prop:.3f}", prop.dtype) == ("3390 0.368", tf.float64)
    props = tf.map_fn(lambda x: tf.cumsum(x) / tf.reduce_sum(x), s)
    assert (props.shape, repr(props.dtype)) == ((3, 48), "tf.float32")
    mean = tf.reduce_mean(props, axis=0)
    r = tf.argmin(tf.abs(mean - 0.75)) + 1
    assert r.dtype == tf.int64  # observed: int64, so `props_rgb_mean[r]` and f"{r}" are TF's
    assert 1 <= int(r) <= 48 and abs(float(mean[r]) - 0.75) < 0.05


def test_map_fn_keeps_tf_dtypes_eagerly():
    # observed in TF 2.21: int64 elements give int64 results, a tensor (`.numpy()`), TF's dtype repr
    y = tf.map_fn(lambda v: v * 2, tf.constant([1, 2], tf.int64))
    assert (y.dtype, y.numpy().tolist()) == (tf.int64, [2, 4])
    z = tf.map_fn(lambda v: tf.cumsum(v) / tf.reduce_sum(v), tf.constant([[1., 2., 3.], [4., 5., 6.]]))
    assert str(z.dtype) == "<dtype: 'float32'>"
    np.testing.assert_allclose(z.numpy(), [[1 / 6, 0.5, 1.], [4 / 15, 0.6, 1.]], rtol=1e-6)
    assert repr(tf.argmin(z[0]) + 1) == "<tf.Tensor: shape=(), dtype=int64, numpy=1>"
    # a structure of elements, as TF's
    a, b = tf.map_fn(lambda t: (t[0] + 1, t[1] * 2), (tf.constant([1, 2]), tf.constant([1., 2.])))
    assert (a.numpy().tolist(), b.numpy().tolist(), a.dtype, b.dtype) == ([2, 3], [2., 4.], tf.int32, tf.float32)
