"""Keras optimizers, schedules, clipping and loss scaling in TF-style training loops, against TF 2.21.

TF observations (TF 2.21, tensorflow-cpu 2.21.0 with Keras 3; MirroredStrategy over N logical CPUs), each run as
its own process, where jdist differed:
- `clipnorm`, `clipvalue` and `global_clipnorm` clip each replica's gradients, then the replicas' gradients are
  summed (Keras 3's TF backend all-reduces in `_backend_update_step`, after `_clip_gradients`): SGD(1.0,
  clipvalue=0.05) on 4 replicas moves a bias by up to 4 * 0.05. jdist summed first and clipped the sum, as one
  device does. The same in a custom `train_step` run by `fit`.
- `LossScaleOptimizer.apply_gradients` (mixed_float16, `scale_loss`) failed in jdist with a leaked tracer, eagerly,
  in a `tf.function` and in `strategy.run` (Keras's stateful `apply` assigns inside `cond` branches).
Not differences (same as one device, to float tolerance): SGD with momentum / nesterov, Adam (amsgrad), AdamW,
RMSprop (momentum, centered), Adagrad, Adamax, Nadam, Ftrl, Lion, Adadelta, weight decay, and the learning-rate
schedules, read in the replica function.
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402


def _strategy(replicas):
    if replicas == 1:
        return tf.distribute.OneDeviceStrategy("/cpu:0")
    return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])


def _train(strategy, make_optimizer, seed, rows, batch, epochs=1, bias=0.0):
    """A Dense(2) regression trained by `optimizer.apply_gradients` in `strategy.run`, as TF tutorials write it."""
    rs = np.random.RandomState(seed)
    x = rs.randn(rows, 3).astype("float32")
    y = rs.randn(rows, 2).astype("float32")
    kernel = rs.randn(3, 2).astype("float32")
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
        model.set_weights([kernel, np.full(2, bias, "float32")])
        optimizer = make_optimizer()
        optimizer.build(model.trainable_variables)
    dataset = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).batch(batch))

    @tf.function
    def step(batch_):
        def replica_step(xb, yb):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(tf.reduce_sum((model(xb) - yb) ** 2, axis=1),
                                                  global_batch_size=batch)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return strategy.reduce("SUM", strategy.run(replica_step, args=batch_), axis=None)

    losses = [float(step(b)) for _ in range(epochs) for b in dataset]
    return losses, model.get_weights(), optimizer


# observed, TF 2.21 (Keras 3): SGD(1.0, **clip) after one step on a batch of 8, kernel then bias
CLIPPED = {
    "clipnorm": ({"clipnorm": 0.1}, {
        4: [-0.8803205, -1.3884213, -1.5577124, 1.8233464, -0.4428418, -0.4709875, 0.2531118, 0.0927222],
        1: [-0.9702426, -1.4183078, -1.6518999, 1.9235203, -0.4973132, -0.4417271, 0.0996202, 0.0087074]}),
    "clipvalue": ({"clipvalue": 0.05}, {
        4: [-0.848553, -1.520018, -1.5835782, 1.7507753, -0.4096522, -0.3709402, 0.1987116, 0.0],
        1: [-0.998553, -1.370018, -1.6562703, 1.9007754, -0.4596522, -0.4880743, 0.05, 0.05]}),
    "global_clipnorm": ({"global_clipnorm": 0.1}, {
        4: [-0.9097459, -1.4048295, -1.575519, 1.8402293, -0.4553352, -0.4817044, 0.1314881, 0.0207093],
        1: [-0.9795672, -1.4185114, -1.658374, 1.9267656, -0.4987825, -0.4412922, 0.0471453, 0.0041208]}),
    "none": ({}, {
        4: [5.2292376, -1.2829224, 2.6523547, -0.2341449, 0.4795082, -0.7309064, 4.290285, 0.3749968],
        1: [5.229238, -1.2829224, 2.6523547, -0.2341452, 0.4795083, -0.7309065, 4.290285, 0.3749968]}),
}


@pytest.mark.parametrize("replicas", [4, 1])
@pytest.mark.parametrize("name", sorted(CLIPPED))
def test_gradients_are_clipped_per_replica_before_the_sum(name, replicas):
    clip, expected = CLIPPED[name]
    losses, weights, _ = _train(_strategy(replicas), lambda: tf.keras.optimizers.SGD(1.0, **clip), 0, 8, 8)
    np.testing.assert_allclose(losses, [12.11142349243164], rtol=1e-6)
    got = np.concatenate([w.ravel() for w in weights])
    np.testing.assert_allclose(got, expected[replicas][:6] + expected[replicas][6:], rtol=2e-6, atol=1e-6)


def test_a_custom_train_step_in_fit_clips_per_replica():
    """TF's `fit` runs a model's own `train_step` in each replica: `apply_gradients` clips there, then sums."""
    rs = np.random.RandomState(0)
    x, y = rs.randn(8, 3).astype("float32"), rs.randn(8, 2).astype("float32")
    kernel = rs.randn(3, 2).astype("float32")

    class Model(tf.keras.Model):
        def train_step(self, data):
            xb, yb = data
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.reduce_sum((self(xb, training=True) - yb) ** 2, axis=1))
                loss = loss / tf.distribute.get_strategy().num_replicas_in_sync
            grads = tape.gradient(loss, self.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
            return {"loss": loss}

    strategy = _strategy(4)
    with strategy.scope():
        inputs = tf.keras.Input((3,))
        model = Model(inputs, tf.keras.layers.Dense(2)(inputs))
        model.set_weights([kernel, np.zeros(2, "float32")])
        model.compile(tf.keras.optimizers.SGD(1.0, clipvalue=0.05))
    model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    # observed, TF 2.21 (Keras 3)
    np.testing.assert_allclose(model.get_weights()[0].ravel(),
                               [-0.648553, -1.4750915, -1.4632566, 1.5507753, -0.3096522, -0.3137114], atol=1e-6)
    np.testing.assert_allclose(model.get_weights()[1], [0.3317948, 0.1], atol=1e-6)


OPTIMIZERS = {  # observed, TF 2.21 (Keras 3), 3 replicas, 4 steps of 6 rows: (last loss, kernel, bias)
    "adamw": (lambda o: o.AdamW(0.1, weight_decay=0.1), 5.85049,
              [-0.2972831, -0.142099, -0.4000431, -1.2675353, 0.1484811, -0.0362332], [0.3644947, 0.6646718]),
    "rmsprop_centered": (lambda o: o.RMSprop(0.1, momentum=0.5, centered=True), 3.216,
                         [-0.2530552, -0.0801053, 0.0383845, -0.3624786, 0.1612579, 0.6888539], [0.047698, 0.6857617]),
    "nadam": (lambda o: o.Nadam(0.1), 6.37304,
              [-0.4277435, -0.248905, -0.5139925, -1.4026865, 0.1884306, -0.0855157], [0.3974957, 0.5941992]),
    "ftrl": (lambda o: o.Ftrl(0.1, l1_regularization_strength=0.01), 4.79744,
             [-0.3637382, -0.237077, -0.3979333, -1.3075817, 0.1441012, 0.00382], [-0.0242391, 0.5244188]),
    "lion": (lambda o: o.Lion(0.1), 5.75376,
             [-0.2724604, -0.3595532, -0.4131462, -1.3262825, 0.1774261, -0.0017809], [0.3, 0.5]),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizers_in_a_custom_loop_on_three_replicas(name):
    make, loss, kernel, bias = OPTIMIZERS[name]
    losses, weights, optimizer = _train(_strategy(3), lambda: make(tf.keras.optimizers), 0, 12, 6, epochs=2,
                                        bias=0.5)
    assert round(losses[-1], 5) == pytest.approx(loss, abs=1e-5)
    np.testing.assert_allclose(weights[0].ravel(), kernel, atol=2e-6)
    np.testing.assert_allclose(weights[1], bias, atol=2e-6)
    assert int(optimizer.iterations.numpy()) == 4


# observed, TF 2.21 (Keras 3), 2 replicas: (learning rate read before apply_gradients, iterations before,
# iterations after) in each of 4 steps
SCHEDULES = {
    "piecewise": (lambda s: s.PiecewiseConstantDecay([1, 3], [0.5, 0.1, 0.01]), [0.5, 0.5, 0.1, 0.1], 0.01),
    "cosine_warmup": (lambda s: s.CosineDecay(0.0, decay_steps=4, warmup_target=0.5, warmup_steps=2),
                      [0.0, 0.25, 0.5, 0.426777], 0.25),
    "cosine_restarts": (lambda s: s.CosineDecayRestarts(0.5, 2), [0.5, 0.25, 0.5, 0.426777], 0.25),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedules_read_in_the_replica_function(name):
    make, rates, after = SCHEDULES[name]
    strategy = _strategy(2)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
        optimizer = tf.keras.optimizers.SGD(make(tf.keras.optimizers.schedules))
        optimizer.build(model.trainable_variables)
    x = np.random.RandomState(3).randn(2, 3).astype("float32")

    @tf.function
    def step():
        def replica_step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(x) ** 2)
            rate, before = tf.identity(optimizer.learning_rate), tf.identity(optimizer.iterations)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return rate, before, tf.identity(optimizer.iterations)

        return [strategy.experimental_local_results(v)[0] for v in strategy.run(replica_step)]

    seen = [tuple(float(v) for v in step()) for _ in range(4)]
    np.testing.assert_allclose([s[0] for s in seen], rates, atol=1e-6)
    assert [(int(s[1]), int(s[2])) for s in seen] == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert float(optimizer.learning_rate) == pytest.approx(after, abs=1e-6)


# observed, TF 2.21 (Keras 3): mixed_float16, LossScaleOptimizer(SGD(0.1, clipnorm=0.5), initial_scale=1024,
# dynamic_growth_steps=1), two steps of 4 rows: per step (loss, scaled loss, scale after, iterations, bias)
LOSS_SCALED = {
    2: ([(3.942389965057373, 4037.00732421875, 2048.0, 1, [0.5328776, 0.4526502]),
         (4.2165679931640625, 8635.53125, 4096.0, 2, [0.5395158, 0.4486392])],
        [-1.0818553, 0.5097221, -1.3328185, -0.0198221, -0.2229292, 0.7611315]),
    1: ([(3.942389965057373, 4037.00732421875, 2048.0, 1, [0.5471175, 0.4832686]),
         (4.21761417388916, 8637.673828125, 4096.0, 2, [0.5426244, 0.4334709])],
        [-1.1091139, 0.5026863, -1.3311574, -0.007634, -0.2185053, 0.7837993]),
}


@pytest.fixture
def mixed_float16():
    tf.keras.mixed_precision.set_global_policy("mixed_float16")
    yield
    tf.keras.mixed_precision.set_global_policy("float32")


def _mixed_model(seed=4):
    rs = np.random.RandomState(seed)
    x, y = rs.randn(8, 3).astype("float32"), rs.randn(8, 2).astype("float32")
    model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2),
                                 tf.keras.layers.Activation("linear", dtype="float32")])
    model.set_weights([rs.randn(3, 2).astype("float32"), np.full(2, 0.5, "float32")])
    return model, x, y


@pytest.mark.parametrize("replicas", [2, 1])
def test_loss_scale_optimizer_in_a_custom_loop(mixed_float16, replicas):
    strategy = _strategy(replicas)
    with strategy.scope():
        model, x, y = _mixed_model()
        optimizer = tf.keras.mixed_precision.LossScaleOptimizer(
            tf.keras.optimizers.SGD(0.1, clipnorm=0.5), initial_scale=1024.0, dynamic_growth_steps=1)
        optimizer.build(model.trainable_variables)
    dense = model.layers[0]
    assert (dense.compute_dtype, dense.variable_dtype, dense.kernel.dtype) == ("float16", "float32", "float32")
    dataset = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).batch(4))

    @tf.function
    def step(batch):
        def replica_step(xb, yb):
            with tf.GradientTape() as tape:
                hidden = dense(xb)
                loss = tf.nn.compute_average_loss(tf.reduce_sum((model(xb) - yb) ** 2, axis=1), global_batch_size=4)
                scaled = optimizer.scale_loss(loss)
            grads = tape.gradient(scaled, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss, scaled, hidden.dtype == tf.float16, grads[0].dtype == tf.float32

        loss, scaled, half, full = strategy.run(replica_step, args=batch)
        return (strategy.reduce("SUM", loss, axis=None), strategy.reduce("SUM", scaled, axis=None),
                strategy.experimental_local_results(half)[0], strategy.experimental_local_results(full)[0])

    steps, kernel = LOSS_SCALED[replicas]
    for batch, (loss, scaled, scale, iterations, bias) in zip(dataset, steps):
        got = step(batch)
        assert bool(got[2]) and bool(got[3])  # float16 activations, float32 gradients
        np.testing.assert_allclose([float(got[0]), float(got[1])], [loss, scaled], rtol=1e-4)
        assert float(np.asarray(optimizer.dynamic_scale)) == scale
        assert int(np.asarray(optimizer.iterations)) == iterations
        np.testing.assert_allclose(model.get_weights()[1], bias, atol=5e-4)  # float16 rounding
    np.testing.assert_allclose(model.get_weights()[0].ravel(), kernel, atol=5e-4)


@pytest.mark.parametrize("compiled, initial_scale", [(False, 1024.0), (True, 2.0 ** 24)])
def test_loss_scale_optimizer_without_a_strategy(mixed_float16, compiled, initial_scale):
    """Eagerly and in a `tf.function`; 2**24 overflows float16: each step is skipped and halves the scale."""
    model, x, y = _mixed_model()
    optimizer = tf.keras.mixed_precision.LossScaleOptimizer(
        tf.keras.optimizers.SGD(0.1, clipnorm=0.5), initial_scale=initial_scale, dynamic_growth_steps=1)

    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.reduce_sum((model(xb) - yb) ** 2, axis=1))
            scaled = optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    step = tf.function(step) if compiled else step
    seen = []
    for i in range(2):
        loss = step(x[4 * i:4 * i + 4], y[4 * i:4 * i + 4])
        seen.append((float(loss), float(np.asarray(optimizer.dynamic_scale)), int(np.asarray(optimizer.iterations)),
                     model.get_weights()[1]))
    # observed, TF 2.21 (Keras 3)
    expected = {1024.0: [(3.942389965057373, 2048.0, 1, [0.5471175, 0.4832686]),
                         (4.21761417388916, 4096.0, 2, [0.5426244, 0.4334709])],
                2.0 ** 24: [(3.942389965057373, 8388608.0, 0, [0.5, 0.5]),
                            (4.345456123352051, 4194304.0, 0, [0.5, 0.5])]}[initial_scale]
    for got, want in zip(seen, expected):
        assert got[0] == pytest.approx(want[0], rel=1e-5)
        assert got[1:3] == want[1:3]
        np.testing.assert_allclose(got[3], want[3], atol=5e-4)


# observed, TF 2.21 (Keras 3) on one device, 4 steps of 4 rows: (last loss, kernel, bias, iterations). With 2
# replicas TF's Keras 3 raises RuntimeError for gradient accumulation and for `ema_overwrite_frequency` ("avoid
# ... control flow statements that may potentially cross a synchronization boundary"); EMA alone gives these.
ACCUMULATED = {
    "accumulate": (lambda o: o.SGD(0.1, gradient_accumulation_steps=2), 2.11121,
                   [-0.1690669, -0.1847318, 0.1047509, 0.3688421, 0.1379926, 0.2322544], [0.3703497, 0.3631822], 2),
    "accumulate_clipped": (lambda o: o.Adam(0.1, gradient_accumulation_steps=2, global_clipnorm=0.5), 2.04288,
                           [-0.2897712, -0.078073, -0.0130039, 0.2627816, 0.2837222, 0.3189882],
                           [0.3082763, 0.3127072], 2),
    "ema": (lambda o: o.SGD(0.1, use_ema=True, ema_momentum=0.5), 1.92664,
            [-0.111107, -0.1803094, 0.0310179, 0.3439377, 0.0673647, 0.2987154], [0.2710552, 0.247186], 4),
    "ema_overwrite": (lambda o: o.SGD(0.1, use_ema=True, ema_momentum=0.5, ema_overwrite_frequency=3), 2.0259,
                      [-0.1223127, -0.1854224, 0.0328061, 0.3210045, 0.0723329, 0.280569], [0.259806, 0.2864468], 4),
}


@pytest.mark.parametrize("name", sorted(ACCUMULATED))
def test_accumulation_and_moving_averages_on_two_replicas_train_as_one_device(name):
    make, loss, kernel, bias, iterations = ACCUMULATED[name]
    losses, weights, optimizer = _train(_strategy(2), lambda: make(tf.keras.optimizers), 1, 16, 4, bias=0.5)
    assert losses[-1] == pytest.approx(loss, abs=1e-5)
    np.testing.assert_allclose(weights[0].ravel(), kernel, atol=2e-6)
    np.testing.assert_allclose(weights[1], bias, atol=2e-6)
    assert int(optimizer.iterations.numpy()) == iterations
    if name == "ema":  # observed, TF 2.21 (Keras 3), 2 replicas: the averages
        averages = [np.asarray(v.numpy()).ravel() for v in optimizer.variables if v.path.endswith("_average")]
        np.testing.assert_allclose(np.concatenate(averages), [-0.1908382, -0.159512, 0.094943, 0.336658, 0.1740533,
                                                              0.2679485, 0.3355041, 0.3378662], atol=2e-6)


def test_a_variable_without_a_gradient_is_skipped_with_a_warning():
    strategy = _strategy(2)
    rs = np.random.RandomState(2)
    x, y = rs.randn(8, 3).astype("float32"), rs.randn(8, 2).astype("float32")
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
        model.set_weights([rs.randn(3, 2).astype("float32"), np.full(2, 0.5, "float32")])
        unused = tf.Variable(1.0)
        optimizer = tf.keras.optimizers.SGD(0.1)
    dataset = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).batch(8))

    @tf.function
    def step(batch):
        def replica_step(xb, yb):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(tf.reduce_sum((model(xb) - yb) ** 2, axis=1), global_batch_size=8)
            variables = model.trainable_variables + [unused]
            optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return loss

        return strategy.reduce("SUM", strategy.run(replica_step, args=batch), axis=None)

    with pytest.warns(UserWarning, match="Gradients do not exist for variables"):
        loss = step(next(iter(dataset)))
    # observed, TF 2.21 (Keras 3): the same warning; the unused variable keeps its value, one SGD slot-free update
    assert float(loss) == pytest.approx(10.60882, abs=1e-5)
    np.testing.assert_allclose(model.get_weights()[0].ravel(),
                               [-0.4027071, 0.7332217, -1.5437059, 1.6933666, 1.0913118, -0.0560114], atol=2e-6)
    np.testing.assert_allclose(model.get_weights()[1], [0.1993404, 0.5898646], atol=2e-6)
    assert float(unused.numpy()) == 1.0 and int(optimizer.iterations.numpy()) == 1


def test_clip_by_global_norm_and_regularization_in_the_replica_function():
    """`tf.clip_by_global_norm` in the replica function clips each replica's gradients by their own norm."""
    rs = np.random.RandomState(0)
    x, y = rs.randn(8, 3).astype("float32"), rs.randn(8, 2).astype("float32")
    strategy = _strategy(4)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((3,)),
                                     tf.keras.layers.Dense(2, kernel_regularizer=tf.keras.regularizers.l2(0.1))])
        model.set_weights([rs.randn(3, 2).astype("float32"), np.zeros(2, "float32")])
        optimizer = tf.keras.optimizers.Adam(0.1)
        optimizer.build(model.trainable_variables)
    dataset = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).batch(8))

    @tf.function
    def step(batch):
        def replica_step(xb, yb):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(tf.reduce_sum((model(xb) - yb) ** 2, axis=1), global_batch_size=8)
                loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
            grads, norm = tf.clip_by_global_norm(tape.gradient(loss, model.trainable_variables), 0.5)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss, norm

        loss, norm = strategy.run(replica_step, args=batch)
        return strategy.reduce("SUM", loss, axis=None), [float(n) for n in strategy.experimental_local_results(norm)]

    seen = [step(b) for _ in range(2) for b in dataset]
    # observed, TF 2.21 (Keras 3), 4 replicas
    np.testing.assert_allclose([float(s[0]) for s in seen], [13.139869689941406, 11.261856079101562], rtol=1e-6)
    np.testing.assert_allclose([s[1] for s in seen], [[6.60844, 2.00588, 1.85021, 1.6682],
                                                      [6.11317, 1.84438, 1.75727, 1.33216]], atol=1e-5)
    np.testing.assert_allclose(model.get_weights()[0].ravel(),
                               [-0.8486146, -1.2232912, -1.5062873, 1.7506422, -0.3099692, -0.6354482], atol=2e-6)
    np.testing.assert_allclose(model.get_weights()[1], [0.1998375, 0.189706], atol=2e-6)
