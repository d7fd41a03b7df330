"""Tensors, `tf.Variable` and `tf.GradientTape` as TF scripts use them, through `jdist.tf_compat`, against TF 2.21.

TF observations (TF 2.21, tensorflow-cpu 2.21.0 with Keras 3; MirroredStrategy over 2 and 4 logical CPUs), each
run as its own process, where jdist differed:
- `tape.jacobian` and `tape.batch_jacobian` were missing (AttributeError), eagerly and in compiled code.
- Nested tapes (a gradient penalty: the outer tape differentiates the inner tape's input gradient) gave the
  outer gradient None eagerly; in `tf.function` and `strategy.run` a watched input tensor was refused as a
  source, so the input gradient, and the penalty on it, could not be computed.
- In compiled code, a non-trainable variable not watched, a variable under `watch_accessed_variables=False` and
  an unwatched input got a gradient (TF: None).
- `tf.custom_gradient` whose grad_fn takes `variables=` failed (a JAX tracer error eagerly, NotImplementedError).
- `tape.gradient(y, None)` returned None (TF: TypeError).
- Python numbers a dtype cannot hold were cast silently: `tf.constant(1.5, dtype=tf.int32)` gave 1,
  `tf.Variable(1).assign(1.5)` left 1 (TF: TypeError "Cannot convert 1.5 to EagerTensor of dtype int32");
  `tf.constant(-1, dtype=tf.uint8)` was an OverflowError (TF wraps: 255).
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

_RS = np.random.RandomState(1)
X4 = _RS.randn(4, 3).astype("float32")
W32 = _RS.randn(3, 2).astype("float32")


def _jacobians(w, x):
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y = tf.tanh(tf.matmul(x, w))
    return t.jacobian(y, w), t.batch_jacobian(y, x), t.jacobian(y, x)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf_function"])
def test_jacobian_and_batch_jacobian(compiled):
    w = tf.Variable(W32)
    by_w, batch, by_x = (np.asarray(a) for a in
                         (tf.function(_jacobians) if compiled else _jacobians)(w, tf.constant(X4)))
    assert (by_w.shape, batch.shape, by_x.shape) == ((4, 2, 3, 2), (4, 2, 3), (4, 2, 4, 3))  # observed, TF 2.21
    np.testing.assert_allclose(batch[1], [[-0.03854, 0.13551, -0.02061], [-0.07187, -0.20583, -0.16428]],
                               atol=1e-5)  # observed, TF 2.21 (Keras 3)
    expected = jax.jacobian(lambda x, w: jax.numpy.tanh(x @ w), argnums=(0, 1))(X4, W32)
    np.testing.assert_allclose(by_x, expected[0], atol=1e-6)
    np.testing.assert_allclose(by_w, expected[1], atol=1e-6)
    np.testing.assert_allclose(batch, np.stack([by_x[b, :, b, :] for b in range(4)]), atol=1e-6)


def test_eager_jacobians_of_constants_and_unconnected_sources():
    x = tf.constant([1.0, 2.0, 3.0])
    with tf.GradientTape() as t:
        t.watch(x)
        y = x ** 2
    assert np.asarray(t.jacobian(y, x)).tolist() == [[2.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 6.0]]  # observed
    v, z = tf.Variable(2.0), tf.Variable(1.0)
    with tf.GradientTape(persistent=True) as t:
        y = v * v
    plain = t.jacobian(y, [v, z])
    zeros = t.jacobian(y, [v, z], unconnected_gradients=tf.UnconnectedGradients.ZERO)
    assert (float(plain[0]), plain[1]) == (4.0, None)  # observed, TF 2.21 (Keras 3)
    assert [float(g) for g in zeros] == [4.0, 0.0]  # observed, TF 2.21 (Keras 3)
    with pytest.raises(ValueError, match="first dimension"):  # TF 2.21: IndexError for a scalar
        t.batch_jacobian(y, v)
    x = tf.ones([3, 2])
    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.multiply(tf.ones([4, 2]), tf.reduce_sum(x))
    with pytest.raises(ValueError, match=r"^Need first dimension of target shape \(\(4, 2\)\) and source shape "
                                         r"\(\(3, 2\)\) to match.$"):  # observed, TF 2.21 (Keras 3)
        t.batch_jacobian(y, x)


# ------------------------------------------------------------------------------------------- gradient penalty
_RS8 = np.random.RandomState(0)
X8, Y8, W0 = _RS8.randn(8, 3).astype("float32"), _RS8.randn(8, 1).astype("float32"), _RS8.randn(3, 1).astype("float32")
# observed, TF 2.21 (Keras 3), eagerly, in tf.function, and summed over MirroredStrategy's 2 and 4 replicas
PENALTY_TF = {"gw": [-21.52304, -20.13874, -4.76689], "gz": [0.0],
              "gm": [[-0.16036, -0.16036, -0.12138, -0.12138, -0.05765, -0.05765], [-0.06198, -0.06198],
                     [0.93562, 0.93562], [1.0]]}


def _objects():
    w, b = tf.Variable(W0, name="w"), tf.Variable([0.5], name="b")
    s = tf.Variable(2.0, trainable=False, name="s")
    model = tf.keras.Sequential([
        tf.keras.Input((3,)),
        tf.keras.layers.Dense(2, activation="tanh", kernel_initializer=tf.keras.initializers.Constant(0.3)),
        tf.keras.layers.Dense(1, kernel_initializer=tf.keras.initializers.Constant(-0.2))])
    return w, b, s, model


def _penalty_step(objects, x, y):
    w, b, s, model = objects
    with tf.GradientTape(persistent=True) as tape:
        loss = tf.divide(tf.reduce_sum(tf.square(tf.matmul(x, w) * s - y)), 8.0)
    gw, gb, gs = tape.gradient(loss, [w, b, s])
    gz = tape.gradient(loss, [w, b], unconnected_gradients=tf.UnconnectedGradients.ZERO)[1]
    del tape
    with tf.GradientTape() as t2:
        with tf.GradientTape() as t1:
            t1.watch(x)
            out = model(x)
        gx = t1.gradient(out, x)
        total = tf.divide(tf.reduce_sum(tf.square(tf.subtract(tf.norm(gx, axis=1), 1.0))) + tf.reduce_sum(out), 8.0)
    gm = t2.gradient(total, model.trainable_variables)
    return [gw, gz, *gm], (gb is None, gs is None)


@pytest.mark.parametrize("where", ["eager", "tf_function", "mirrored_2", "mirrored_4"])
def test_gradient_penalty_with_nested_tapes(where):
    if where.startswith("mirrored"):
        strategy = tf.distribute.MirroredStrategy(devices=[f"/cpu:{i}" for i in range(int(where[-1]))])
        with strategy.scope():
            objects = _objects()
        data = tf.data.Dataset.from_tensor_slices((X8, Y8)).batch(8)
        x, y = next(iter(strategy.experimental_distribute_dataset(data)))

        @tf.function
        def run(x, y):
            grads, nones = strategy.run(lambda a, b: _penalty_step(objects, a, b), args=(x, y))
            return [strategy.reduce("SUM", g, axis=None) for g in grads], nones

        grads, nones = run(x, y)
    else:
        objects = _objects()
        step = tf.function(_penalty_step) if where == "tf_function" else _penalty_step
        grads, nones = step(objects, tf.constant(X8), tf.constant(Y8))
    assert [bool(n) for n in nones] == [True, True]  # observed, TF 2.21: b unconnected, s non-trainable
    gw, gz, *gm = (np.asarray(g).ravel() for g in grads)
    np.testing.assert_allclose(gw, PENALTY_TF["gw"], atol=2e-4)
    np.testing.assert_allclose(gz, PENALTY_TF["gz"])
    for got, want in zip(gm, PENALTY_TF["gm"]):
        np.testing.assert_allclose(got, want, atol=1e-4)


# ------------------------------------------------------------------------------- what a compiled tape records
def _records(w, v, x):
    with tf.GradientTape(watch_accessed_variables=False) as t:
        t.watch(v)
        loss = tf.reduce_sum(tf.matmul(x, w)) * v
    no_access = t.gradient(loss, [w, v])
    with tf.GradientTape() as t:
        loss = tf.reduce_sum(tf.square(tf.matmul(x, w)))
    unwatched = t.gradient(loss, x)
    with tf.GradientTape() as t:
        t.watch(x)
        loss = tf.reduce_sum(tf.square(tf.matmul(x, w)))
    return no_access, unwatched, t.gradient(loss, x)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf_function"])
def test_what_a_tape_records(compiled):
    w, v = tf.Variable(W32), tf.Variable(2.0)
    (g_w, g_v), unwatched, g_x = (tf.function(_records) if compiled else _records)(w, v, tf.constant(X4))
    assert g_w is None and unwatched is None  # observed, TF 2.21 (Keras 3)
    np.testing.assert_allclose(float(g_v), 3.38698, atol=1e-5)  # observed, TF 2.21 (Keras 3)
    np.testing.assert_allclose(g_x, 2 * (X4 @ W32) @ W32.T, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(g_x)[1], [-2.24897, 0.65206, -3.19412], atol=1e-4)  # observed, TF 2.21


def test_compiled_tape_names_the_fix_for_an_unwatched_intermediate():
    w = tf.Variable(W32)

    @tf.function
    def step(x):
        with tf.GradientTape() as t:
            h = tf.matmul(x, w)
            loss = tf.reduce_sum(tf.square(h))
        return t.gradient(loss, h)

    with pytest.raises(ValueError, match=r"tape.watch\(h\)"):
        step(tf.constant(X4))


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf_function"])
def test_gradient_with_none_sources_is_a_type_error(compiled):
    v = tf.Variable(3.0)

    def step():
        with tf.GradientTape() as t:
            y = v * 2
        return t.gradient(y, None)

    with pytest.raises(TypeError, match="source is None"):  # observed, TF 2.21: TypeError
        tf.function(step)() if compiled else step()


# ------------------------------------------------------------------------------------------- custom gradients
_CV = {}


def _custom_with_variables(kind):
    v = _CV.setdefault("v", tf.Variable(2.0))

    @tf.custom_gradient
    def scaled(x):
        def grad(dy, variables=None):
            return (dy * 10.0, [dy * 100.0]) if kind == "good" else (dy, [dy, dy])
        return x * v, grad

    @tf.custom_gradient
    def without(x):
        return x * v, lambda dy: dy

    def step(x):
        with tf.GradientTape() as t:
            t.watch(x)
            y = scaled(x) if kind != "missing" else without(x)
        return t.gradient(y, [x, v])
    return step


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf_function"])
@pytest.mark.parametrize("kind, expected", [
    ("good", [10.0, 100.0]),  # observed, TF 2.21 (Keras 3)
    ("missing", (TypeError, "grad_fn must accept keyword argument 'variables'")),  # observed, TF 2.21
    ("miscounted", (ValueError, "Must return gradient for each variable")),  # observed, TF 2.21
])
def test_custom_gradient_with_variables(kind, expected, compiled):
    step = _custom_with_variables(kind)
    step = tf.function(step) if compiled else step
    if isinstance(expected, tuple):
        with pytest.raises(expected[0], match=expected[1]):
            step(tf.constant(3.0))
        return
    assert [float(g) for g in step(tf.constant(3.0))] == expected


# ----------------------------------------------------------------------------------- Python numbers and dtypes
@pytest.mark.parametrize("make, text", [
    (lambda: tf.constant(2.0, dtype=tf.int32), "Cannot convert 2.0 to EagerTensor of dtype int32"),
    (lambda: tf.constant(1.5, dtype=tf.int32), "Cannot convert 1.5 to EagerTensor of dtype int32"),
    (lambda: tf.constant([1, 2.5], dtype=tf.int64), r"Cannot convert \[1, 2.5\] to EagerTensor of dtype int64"),
    (lambda: tf.convert_to_tensor(1.5, dtype=tf.int32), "Cannot convert 1.5 to EagerTensor of dtype int32"),
    (lambda: tf.constant(1, dtype=tf.bool), "Cannot convert 1 to EagerTensor of dtype bool"),
    (lambda: tf.constant(1.5, dtype=tf.bool), "Cannot convert 1.5 to EagerTensor of dtype bool"),
    (lambda: tf.Variable(1).assign(2.0), "Cannot convert 2.0 to EagerTensor of dtype int32"),
    (lambda: tf.Variable(1).assign_add(0.5), "Cannot convert 0.5 to EagerTensor of dtype int32"),
    (lambda: tf.Variable(1).assign_sub(0.5), "Cannot convert 0.5 to EagerTensor of dtype int32"),
])
def test_python_numbers_a_dtype_cannot_hold_are_tfs_type_error(make, text):
    with pytest.raises(TypeError, match=text):  # observed, TF 2.21 (each message starts so)
        make()


@pytest.mark.parametrize("make, expected, dtype", [
    (lambda: tf.constant(np.array([1.5]), dtype=tf.int32), [1], "int32"),  # numpy values are cast
    (lambda: tf.convert_to_tensor(np.float32(1.5), dtype=tf.int32), 1, "int32"),
    (lambda: tf.constant(-1, dtype=tf.uint8), 255, "uint8"),  # a Python int out of range wraps
    (lambda: tf.constant(300, dtype=tf.int8), 44, "int8"),
    (lambda: tf.constant(True, dtype=tf.int32), 1, "int32"),
    (lambda: tf.constant(1e40, dtype=tf.float32), np.inf, "float32"),
])
def test_numbers_tf_converts(make, expected, dtype):
    got = np.asarray(make())  # observed, TF 2.21 (Keras 3)
    assert (got.tolist(), str(got.dtype)) == (expected, dtype)


def _reset_step(x, y, w):
    with tf.GradientTape(persistent=True) as t:
        t.watch(w)
        y_sq = y * y
        w_x = w * x
        t.reset()
        t.watch(w)
        z = x * x + y_sq + w_x + w * 3.0
    g = t.gradient(z, {"x": x, "y": y, "w": w})
    return [g[k] for k in "xyw"]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf_function"])
def test_reset_forgets_what_the_tape_recorded(compiled):
    step = tf.function(_reset_step) if compiled else _reset_step
    got = step(tf.Variable(2.0), tf.Variable(3.0), tf.constant(5.0))
    assert [None if g is None else float(g) for g in got] == [4.0, None, 3.0]  # observed, TF 2.21 (Keras 3)


def _twice(v):
    with tf.GradientTape() as t:
        y = v * 2.0
    return t.gradient(y, [v, v])


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf_function"])
def test_a_source_named_twice_gets_its_gradient_twice(compiled):
    got = (tf.function(_twice) if compiled else _twice)(tf.Variable(1.0))
    assert [float(g) for g in got] == [2.0, 2.0]  # observed, TF 2.21 (Keras 3)


def test_custom_gradient_with_variables_per_replica():
    strategy = tf.distribute.MirroredStrategy(devices=["/cpu:0", "/cpu:1"])
    with strategy.scope():
        v = tf.Variable(2.0)

    @tf.custom_gradient
    def scaled(x):
        def grad(dy, variables=None):
            return tf.multiply(dy, 10.0), [tf.multiply(tf.reduce_sum(tf.multiply(dy, x)), 100.0)]
        return tf.multiply(x, v), grad

    def step(x):
        with tf.GradientTape() as t:
            t.watch(x)
            y = tf.reduce_sum(scaled(x))
        return t.gradient(y, [x, v])

    data = tf.data.Dataset.from_tensor_slices(np.arange(4, dtype="float32")).batch(4)
    x = next(iter(strategy.experimental_distribute_dataset(data)))
    gx, gv = tf.function(lambda x: strategy.run(step, args=(x,)))(x)
    assert [np.asarray(g).tolist() for g in strategy.experimental_local_results(gx)] == [[10.0, 10.0]] * 2
    assert [float(g) for g in strategy.experimental_local_results(gv)] == [100.0, 500.0]  # observed, TF 2.21
