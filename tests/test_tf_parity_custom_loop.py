"""Custom training loops as TF users write them, through `jdist.tf_compat`, against TF 2.21.

TF observations (TF 2.21, tensorflow-cpu 2.21.0 with Keras 3; MirroredStrategy over 4 logical CPUs), each run as
its own process, where jdist differed:
- Gradients at kinks: `tf.abs` at 0 has slope 0 (jdist 1); a tie of `tf.maximum(x, y)` / `tf.minimum(x, y)`
  sends the whole gradient to x (jdist 0.5 to each); `relu` at 0 and `relu6` at 0 and 6 have slope 0 (jdist
  0.5); `clip_by_value` passes the gradient at both bounds (jdist 0.5); `elu` at 0 has slope 1, `selu` the
  scale (jdist 0.5 and 0.879); `sqrt(maximum(v, 0))` at v = -1 is 0 (jdist NaN); `sign` has a zero gradient,
  not None.
- `tape.stop_recording()` existed in jdist on no tape (AttributeError).
- A persistent tape's second `gradient` call inside `tf.function` / `strategy.run` gave the first call's
  gradient again.
- A tape entered again after its `gradient` records anew (jdist: "can only be used to compute one set").
- `tf.function` keys Python numbers by value: `f(x, 1)`, `f(x, 1.0)`, `f(x, True)` trace once and return the
  first trace's int32 1 (jdist traced each); `g(x)`, `g(x, 3)`, `g(x, k=3)`, `g(x=x)` of `def g(x, k=3)` trace
  once (jdist 4 times); a returned Python string is a string tensor.
- `tf.nn.compute_average_loss`: a rank-0 loss is a ValueError, `global_batch_size` may be an integer tensor (a
  float is a TypeError); without `global_batch_size`, and `scale_regularization_loss` always, refuse the
  cross-replica context with TF's RuntimeError.
- `tf.print` in compiled code: a Python bool prints True (jdist 1); a `tf.Variable` prints (jdist crashed);
  prints keep their program order; a line of constants prints once per replica and per call in
  `strategy.run` (jdist once per trace); a print inside a tape's block prints once per call (jdist twice).
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

FOUR = [f"/cpu:{i}" for i in range(4)]

# ---------------------------------------------------------------------------------------------- kinks
KINKS = {
    "abs": (lambda v: tf.abs(v), [0.0, 1.0, -1.0, 1.0]),
    "maximum": (lambda v: tf.maximum(v, 0.0), [1.0, 1.0, 0.0, 1.0]),
    "maximum_reversed": (lambda v: tf.maximum(0.0, v), [0.0, 1.0, 0.0, 1.0]),
    "minimum": (lambda v: tf.minimum(v, 6.0), [1.0, 1.0, 1.0, 1.0]),
    "minimum_reversed": (lambda v: tf.minimum(6.0, v), [1.0, 0.0, 1.0, 1.0]),
    "math_maximum_tie": (lambda v: tf.math.maximum(v, 2.0), [0.0, 1.0, 0.0, 1.0]),
    "relu": (lambda v: tf.nn.relu(v), [0.0, 1.0, 0.0, 1.0]),
    "relu6": (lambda v: tf.nn.relu6(v), [0.0, 0.0, 0.0, 1.0]),
    "leaky_relu": (lambda v: tf.nn.leaky_relu(v, 0.2), [0.2, 1.0, 0.2, 1.0]),
    "elu": (lambda v: tf.nn.elu(v), [1.0, 1.0, 0.367879, 1.0]),
    "selu": (lambda v: tf.nn.selu(v), [1.050701, 1.050701, 0.646769, 1.050701]),
    "clip_by_value": (lambda v: tf.clip_by_value(v, 0.0, 6.0), [1.0, 1.0, 0.0, 1.0]),
    "clip_by_value_tensor_bounds": (lambda v: tf.clip_by_value(v, tf.constant([0.0, 6.0, -1.0, 2.0]), 6.0),
                                    [1.0, 1.0, 1.0, 1.0]),
    "sqrt_of_maximum": (lambda v: tf.sqrt(tf.maximum(v, 0.0)), [np.inf, 0.204124, 0.0, 0.353553]),
    "sign": (lambda v: tf.sign(v), [0.0, 0.0, 0.0, 0.0]),
}


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf_function"])
@pytest.mark.parametrize("name", sorted(KINKS))
def test_gradients_at_kinks_are_tfs(name, compiled):
    op, expected = KINKS[name]
    v = tf.Variable([0.0, 6.0, -1.0, 2.0])

    def gradient():
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(op(v))
        return tape.gradient(y, v)

    g = tf.function(gradient)() if compiled else gradient()
    # observed, TF 2.21 (Keras 3): the same in eager and in tf.function
    np.testing.assert_allclose(np.asarray(g), expected, rtol=1e-5)


def test_mean_absolute_error_at_an_exact_fit_does_not_move():
    """An L1 loss whose prediction equals its target: TF's gradient is 0, so SGD leaves the weight alone."""
    w = tf.Variable([[1.0], [2.0]])
    x, y = tf.constant([[1.0, 1.0]]), tf.constant([[3.0]])
    opt = tf.keras.optimizers.SGD(0.5)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.abs(tf.subtract(tf.matmul(x, w), y)))
        opt.apply_gradients([(tape.gradient(loss, w), w)])
        return loss

    assert float(step()) == 0.0
    np.testing.assert_array_equal(w.numpy(), [[1.0], [2.0]])  # observed, TF 2.21 (Keras 3)


# ------------------------------------------------------------------------------------ persistent tapes
def _three_gradients(w, x):
    with tf.GradientTape(persistent=True) as tape:
        a = tf.reduce_sum(w * x)
        l1 = tf.reduce_sum(tf.abs(w)) * tf.reduce_sum(x)
        c = tf.reduce_sum(tf.maximum(w, 1.0))
    g1 = tape.gradient(a, w)
    g2 = tape.gradient(l1, w)
    g3 = tape.gradient(c, w)
    return tf.concat([g1, g2, g3], axis=1)


@pytest.mark.parametrize("where", ["eager", "tf_function", "mirrored"])
def test_each_gradient_of_a_persistent_tape_is_its_own(where):
    if where == "mirrored":
        strategy = tf.distribute.MirroredStrategy(devices=FOUR)
        with strategy.scope():
            w = tf.Variable([[1.0], [-2.0]])
        data = tf.data.Dataset.from_tensor_slices(np.arange(8, dtype="float32").reshape(8, 1)).batch(8)
        batch = next(iter(strategy.experimental_distribute_dataset(data)))
        run = tf.function(lambda b: strategy.run(lambda x: _three_gradients(w, x), args=(b,)))
        got = [t.numpy().tolist() for t in strategy.experimental_local_results(run(batch))]
        assert got == [  # observed, TF 2.21 (Keras 3)
            [[0.0, 1.0, 1.0], [1.0, -1.0, 0.0]], [[2.0, 5.0, 1.0], [3.0, -5.0, 0.0]],
            [[4.0, 9.0, 1.0], [5.0, -9.0, 0.0]], [[6.0, 13.0, 1.0], [7.0, -13.0, 0.0]]]
        return
    w = tf.Variable([[1.0], [-2.0]])

    def step():
        return _three_gradients(w, tf.constant([[2.0]]))

    got = np.asarray(tf.function(step)() if where == "tf_function" else step()).tolist()
    assert got == [[2.0, 2.0, 1.0], [2.0, -2.0, 0.0]]  # observed, TF 2.21 (Keras 3)


def test_a_tape_entered_again_records_anew():
    v = tf.Variable(2.0)
    tape = tf.GradientTape()
    with tape:
        y = v * 2.0
    assert float(tape.gradient(y, v)) == 2.0
    with tape:
        y = v * 3.0
    assert float(tape.gradient(y, v)) == 3.0  # observed, TF 2.21 (Keras 3)
    with pytest.raises(RuntimeError, match="non-persistent"):
        tape.gradient(y, v)


# ------------------------------------------------------------------------------------ stop_recording
def test_stop_recording_eagerly():
    v, w, u = tf.Variable(2.0), tf.Variable(3.0, trainable=False), tf.Variable([1.0, 2.0])
    x = tf.constant(4.0)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = v * x * x
        z = y + w
        with tape.stop_recording():
            q = v * 10.0
        r = q * v
    gv, gx = tape.gradient(y, [v, x])
    assert (float(gv), float(gx)) == (16.0, 16.0)  # observed, TF 2.21 (Keras 3)
    assert tape.gradient(z, w) is None
    assert float(tape.gradient(r, v)) == 20.0  # only `r = q * v` is recorded
    assert tape.gradient(y, u) is None
    zeros = tape.gradient(y, u, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    np.testing.assert_array_equal(zeros, [0.0, 0.0])


def _model(strategy):
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2, activation="tanh"),
                                     tf.keras.layers.Dense(1)])
        model.set_weights([np.linspace(-0.5, 0.5, w.size).reshape(w.shape).astype("float32")
                           for w in model.get_weights()])
        scale = tf.Variable(2.0)
    return model, tf.keras.optimizers.SGD(0.1), scale


def _paused_step(model, opt, scale, x, y, factor):
    with tf.GradientTape() as tape:
        p = model(x, training=True)
        with tape.stop_recording():
            t = tf.stop_gradient(p) * 0.5 + y
            s = p * scale
        loss = factor * tf.reduce_mean((p - t) ** 2 + s * 0.1 + scale * p)
    variables = model.trainable_variables + [scale]
    g = tape.gradient(loss, variables)
    opt.apply_gradients(zip(g[:-1], model.trainable_variables))
    return loss, g[-1]


# observed, TF 2.21 (Keras 3): (loss, d loss / d scale) per step and the first kernel after 3 steps
PAUSED = {
    "one": ([(0.053297534584999084, -0.14695730805397034), (-0.8617984652519226, -0.5491139888763428),
             (-1.4790717363357544, -0.8459622263908386)],
            [[-0.5173, -0.33645], [-0.04262, -0.0272], [0.22, 0.67964]]),
    "mirrored": ([(0.21319028735160828, -0.5878291130065918), (-11.12277603149414, -6.28433084487915),
                  (-13.730307579040527, -8.018447875976562)],
                 [[-0.51741, -0.38831], [-0.04922, -0.22016], [0.20524, 0.83309]]),
}


@pytest.mark.parametrize("where", ["eager", "tf_function", "mirrored", "one_device_times_4"])
def test_stop_recording_in_a_training_step(where):
    rs = np.random.RandomState(1)
    x_all, y_all = rs.randn(8, 3).astype("float32"), rs.randn(8, 1).astype("float32")
    if where == "mirrored":
        strategy = tf.distribute.MirroredStrategy(devices=FOUR)
        model, opt, scale = _model(strategy)

        @tf.function
        def train_replicas(x, y):
            loss, gs = strategy.run(lambda a, b: _paused_step(model, opt, scale, a, b, 1.0), args=(x, y))
            return strategy.reduce("SUM", loss, axis=None), strategy.reduce("SUM", gs, axis=None)

        train = train_replicas

        data = tf.data.Dataset.from_tensor_slices((x_all, y_all)).batch(8)
        x, y = next(iter(strategy.experimental_distribute_dataset(data)))
    else:  # one device; with the loss times 4, the mirrored steps' sum over 4 equal shares
        factor = 4.0 if where == "one_device_times_4" else 1.0
        model, opt, scale = _model(tf.distribute.get_strategy())

        def train_one(a, b):
            return _paused_step(model, opt, scale, a, b, factor)

        train = train_one if where == "eager" else tf.function(train_one)
        x, y = tf.constant(x_all), tf.constant(y_all)
    steps, kernel = PAUSED["one" if where in ("eager", "tf_function") else "mirrored"]
    for expected in steps[:1] if where == "eager" else steps:  # eager replays op by op: one step suffices
        np.testing.assert_allclose([float(t) for t in train(x, y)], expected, rtol=2e-5, atol=1e-6)
    if where != "eager":
        np.testing.assert_allclose(model.get_weights()[0], kernel, atol=2e-5)


# ------------------------------------------------------------------------------------ tf.function keys
def test_python_numbers_are_keyed_by_value(capsys):
    @tf.function
    def f(x, k):
        print("trace", repr(k))
        return k

    got = [f(tf.constant(1.0), k) for k in (1, 1.0, True, 2, 2.0, False, 0, 0.0, None, "a", 1.5)]
    # observed, TF 2.21 (Keras 3): each value's first trace answers the equal ones after it
    assert [str(g) for g in got] == (["tf.Tensor(1, shape=(), dtype=int32)"] * 3
                                     + ["tf.Tensor(2, shape=(), dtype=int32)"] * 2
                                     + ["tf.Tensor(False, shape=(), dtype=bool)"] * 3
                                     + ["None", "tf.Tensor(b'a', shape=(), dtype=string)",
                                        "tf.Tensor(1.5, shape=(), dtype=float32)"])
    assert f.experimental_get_tracing_count() == 6
    assert capsys.readouterr().out.split("\n")[:-1] == [
        "trace 1", "trace 2", "trace False", "trace None", "trace 'a'", "trace 1.5"]


def test_arguments_bound_by_name_or_default_trace_once(capsys):
    @tf.function
    def g(x, k=3):
        print("trace g", k)
        return x * k

    x = tf.constant(1.0)
    got = [float(g(x)), float(g(x, 3)), float(g(x, k=3)), float(g(x=x))]
    assert got == [3.0] * 4
    assert g.experimental_get_tracing_count() == 1  # observed, TF 2.21 (Keras 3)
    assert capsys.readouterr().out == "trace g 3\n"


# ------------------------------------------------------------------------------ compute_average_loss
def test_compute_average_loss_arguments_as_tfs():
    with pytest.raises(ValueError, match="Expected a tensor with at least rank 1"):
        tf.nn.compute_average_loss(tf.constant(3.0))
    assert float(tf.nn.compute_average_loss(tf.constant([1.0, 2.0]), global_batch_size=tf.constant(4))) == 0.75
    with pytest.raises(TypeError, match="global_batch_size must be an integer"):
        tf.nn.compute_average_loss(tf.constant([1.0, 2.0]), global_batch_size=4.0)
    strategy = tf.distribute.MirroredStrategy(devices=FOUR)
    with strategy.scope():  # cross-replica context, observed, TF 2.21 (Keras 3)
        assert float(tf.nn.compute_average_loss(tf.constant([1.0, 2.0]), global_batch_size=2)) == 1.5
        with pytest.raises(RuntimeError, match="You are calling `compute_average_loss` in cross replica"):
            tf.nn.compute_average_loss(tf.constant([1.0, 2.0]))
        with pytest.raises(RuntimeError, match="You are calling `scale_regularization_loss` in cross replica"):
            tf.nn.scale_regularization_loss(1.0)
    batch = next(iter(strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices(np.arange(8, dtype="float32")).batch(8))))

    def by_tensor(b, replicas):
        return tf.nn.compute_average_loss(b, global_batch_size=tf.size(b) * replicas)

    eager = strategy.run(by_tensor, args=(batch, 4))
    compiled = tf.function(lambda b: strategy.run(by_tensor, args=(b, 2)))(batch)
    # observed, TF 2.21 (Keras 3); the sums of each replica's two rows over 8 and over 4
    assert [float(t) for t in strategy.experimental_local_results(eager)] == [0.125, 0.625, 1.125, 1.625]
    assert [float(t) for t in strategy.experimental_local_results(compiled)] == [0.25, 1.25, 2.25, 3.25]


# -------------------------------------------------------------------------------------------- tf.print
def test_tf_print_in_a_tf_function(capsys):
    v = tf.Variable(2.0)

    @tf.function
    def f(x):
        tf.print("a", True, None is None, 3, 2.5, "s", output_stream=sys.stdout)
        tf.print("x", x, "list", [1, 2], {"k": x}, output_stream=sys.stdout)
        tf.print(x > 0, tf.constant(True), output_stream=sys.stdout)
        tf.print("v", v, summarize=2, output_stream=sys.stdout)
        tf.print(tf.range(10), summarize=3, output_stream=sys.stdout)
        tf.print("sep", x, sep="|", end="!\n", output_stream=sys.stdout)
        return x

    f(tf.constant([1.0, 2.0]))
    f(tf.constant([3.0, 4.0]))
    jax.effects_barrier()
    assert capsys.readouterr().out.split("\n")[:-1] == [  # observed, TF 2.21 (Keras 3)
        "a True True 3 2.5 s", "x [1 2] list [1, 2] {'k': [1 2]}", "[1 1] 1", "v 2", "[0 1 2 ... 7 8 9]",
        "sep|[1 2]!",
        "a True True 3 2.5 s", "x [3 4] list [1, 2] {'k': [3 4]}", "[1 1] 1", "v 2", "[0 1 2 ... 7 8 9]",
        "sep|[3 4]!"]


@pytest.mark.parametrize("replicas", [1, 4])
def test_tf_print_in_a_training_step(capsys, replicas):
    strategy = tf.distribute.MirroredStrategy(devices=FOUR[:replicas])
    with strategy.scope():
        v = tf.Variable(3.0)

    def step(x):
        with tf.GradientTape() as tape:
            y = v * x
            tf.print("in block", y, output_stream=sys.stdout)
            tf.print("constants", output_stream=sys.stdout)
        g = tape.gradient(y, v)
        tf.print("after", g, output_stream=sys.stdout)
        v.assign_sub(0.1 * tf.distribute.get_replica_context().all_reduce("MEAN", g))
        return g

    @tf.function
    def train(x):
        tf.print("start", output_stream=sys.stdout)
        return strategy.run(step, args=(x,))

    train(tf.constant(2.0))
    train(tf.constant(2.0))
    jax.effects_barrier()
    lines = capsys.readouterr().out.split("\n")[:-1]
    # observed, TF 2.21 (Keras 3): each replica prints each line once per call
    first, second = ["in block 6", "constants", "after 2"], ["in block 5.6", "constants", "after 2"]
    if replicas == 1:
        assert lines == ["start"] + first + ["start"] + second
    else:
        assert sorted(lines) == sorted(["start"] + first * 4 + ["start"] + second * 4)
