"""What an eager `tf.GradientTape` records, against TF 2.21 (tensorflow-cpu 2.21.0), observed: the autodiff guide's
cases (`guide/autodiff.ipynb`) and variations of them. Each expected value below is what TF printed."""
import linecache
import logging
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402


def _floats(grads):
    return [None if g is None else float(g) for g in grads]


def test_trainable_variables_and_watched_tensors_are_recorded_nothing_else():
    x0 = tf.Variable(3.0, name="x0")
    x1 = tf.Variable(3.0, name="x1", trainable=False)
    x2 = tf.Variable(2.0, name="x2") + 1.0  # a tensor
    x3 = tf.constant(3.0, name="x3")
    with tf.GradientTape() as tape:
        y = (x0**2) + (x1**2) + (x2**2)
    assert _floats(tape.gradient(y, [x0, x1, x2, x3])) == [6.0, None, None, None]
    assert [v.name for v in tape.watched_variables()] == ["x0:0"]  # observed, TF 2.21

    a, b, c = tf.Variable(1.0, name="a"), tf.Variable(2.0, name="b"), tf.Variable(3.0, name="c")
    n, k = tf.Variable(4.0, name="n", trainable=False), tf.constant(5.0)
    with tf.GradientTape() as tape:
        tape.watch(n)
        tape.watch(k)
        y = c * a + n * k
    assert [v.name for v in tape.watched_variables()] == ["a:0", "c:0", "n:0"]  # the order they were made, not read
    assert _floats(tape.gradient(y, [a, c, n, k])) == [3.0, 1.0, 5.0, 4.0]
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(a)
        y = c * a + b
    assert [v.name for v in tape.watched_variables()] == ["a:0"]
    assert _floats(tape.gradient(y, [a, c])) == [3.0, None]


def test_structured_targets_intermediates_and_what_the_tape_does_not_record(caplog):
    x = tf.Variable(2.0)
    with tf.GradientTape(persistent=True) as tape:
        y0 = x**2
        y1 = 1 / x
    assert float(tape.gradient({"y0": y0, "y1": y1}, x)) == 3.75
    assert float(tape.gradient([y0, y1], x)) == 3.75
    assert float(tape.gradient([y0, y1], x, output_gradients=[tf.constant(2.0), tf.constant(3.0)])) == 7.25

    c = tf.constant(3.0)
    with tf.GradientTape() as tape:
        tape.watch(c)
        y = c * c
        z = y * y
    assert float(tape.gradient(z, y)) == 18.0  # dz/dy = 2y, y = 9: an intermediate of the block
    with tf.GradientTape() as tape:
        tape.watch(c)
        y = c * c
        y = y * 2.0  # the name's last value is the source
        z = y * y
    assert float(tape.gradient(z, y)) == 36.0

    v0, v1, w = tf.Variable(2.0), tf.Variable(2.0), tf.Variable(3.0)
    with tf.GradientTape() as tape:
        result = v0  # the target is the variable itself
    assert _floats(tape.gradient(result, [v0, v1])) == [1.0, None]
    with tf.GradientTape() as tape:
        w.assign_add(v0)  # TF does not record through an assignment
        y = w**2
    assert tape.gradient(y, v0) is None

    i = tf.constant(10)
    with caplog.at_level(logging.WARNING, logger="tensorflow"), tf.GradientTape() as g:
        g.watch(i)
        y = i * i
    assert g.gradient(y, i) is None
    assert "The dtype of the watched tensor must be floating (e.g. tf.float32), got tf.int32" in caplog.text

    v = tf.Variable(2.0)
    seen = []
    for _ in range(2):
        with tf.GradientTape() as tape:
            y = v + 1
        seen.append(tape.gradient(y, v))
        v = v + 1  # the guide's mistake: now a tensor, which the tape does not watch
    assert _floats(seen) == [1.0, None]


def _cell(source: str, number: int, namespace: dict) -> None:
    """Runs `source` as a notebook runs a cell: top-level code, its source kept in linecache under its own name."""
    filename = f"/tmp/ipykernel_0/cell{number}.py"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)


def test_a_notebook_calls_gradient_in_the_cell_after_the_tapes():
    """The autodiff guide, as a notebook runs it: the tape's block in one cell, `tape.gradient` in the next."""
    namespace = {"tf": tf, "np": np}
    _cell("x = tf.Variable(3.0)\n\nwith tf.GradientTape() as tape:\n  y = x**2\n", 9, namespace)
    _cell("dy_dx = tape.gradient(y, x)\nvalue = dy_dx.numpy()\n", 11, namespace)
    assert namespace["value"] == 6.0
    _cell("x0 = tf.Variable(3.0)\nx1 = tf.Variable(0.5)\n\nwith tf.GradientTape(persistent=True) as tape:\n"
          "  y0 = tf.math.sin(x0)\n  y1 = tf.nn.softplus(x1)\n  y = y0 + y1\n  ys = tf.reduce_sum(y)\n", 31, namespace)
    _cell("grad = tape.gradient(ys, {'x0': x0, 'x1': x1})\n", 33, namespace)
    np.testing.assert_allclose([float(namespace["grad"]["x0"]), float(namespace["grad"]["x1"])],
                               [np.cos(3.0), 1 / (1 + np.exp(-0.5))], rtol=1e-6)

    def elsewhere():
        return namespace["tape"].gradient(namespace["ys"], namespace["x0"])

    with pytest.raises(RuntimeError, match="must be called in the function .* whose `with` block recorded"):
        elsewhere()


def test_apply_gradients_in_a_tf_function_builds_the_optimizer_for_lone_variables():
    """TF's tf.function guide: two modules, each with its own Adam, step one `tf.Variable`; TF 2.21 builds each
    optimizer on its first `apply_gradients` and, after three steps of each, w is 1.9670032262802124."""
    class TrainStep(tf.Module):
        def __init__(self, optimizer):
            self.optimizer = optimizer

        @tf.function
        def __call__(self, w, x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.square(w * x - y))
            gradients = tape.gradient(loss, [w])
            self.optimizer.apply_gradients(zip(gradients, [w]))

    opt1, opt2 = tf.keras.optimizers.Adam(learning_rate=1e-2), tf.keras.optimizers.Adam(learning_rate=1e-3)
    w, x, y = tf.Variable(2.0), tf.constant([-1.0]), tf.constant([2.0])
    first, second = TrainStep(opt1), TrainStep(opt2)
    for _ in range(3):
        first(w, x, y)
        second(w, x, y)
    assert float(w.numpy()) == pytest.approx(1.9670032262802124, abs=1e-7)
    assert int(opt1.iterations.numpy()) == int(opt2.iterations.numpy()) == 3
