"""TF's guides `advanced_autodiff`, `intro_to_graphs` and `variable`, run through `jdist.tf_compat`, against TF 2.21.

Each guide was run cell by cell under TF 2.21 (tensorflow-cpu 2.21.0, Keras 3.15) and under jdist with only the
import changed. Where jdist differed (observed in TF 2.21, Keras 3.15):
- `tf.autodiff.ForwardAccumulator` was missing (AttributeError); TF gives the Jacobian-vector product, None for a
  target that does not depend on the primals (0.0 with unconnected_gradients='zero'), and a Hessian-vector
  product for `acc.jvp(tape.gradient(...))` computed in the accumulator's block.
- `tape.stop_recording()` outside the tape's block was silent (TF: RuntimeError "Trying to stop recording a tape
  which is not recording." for a tape never entered; ValueError "Tape is not recording." after the block).
- `tape.watch(3.0)` (or None, a NumPy array) was accepted (TF: ValueError "Passed in object 3.0 of type 'float',
  not tf.Tensor or tf.Variable or ExtensionType.").
- `tape.gradient(None, x)` returned None (TF: TypeError "Argument `target` should be a list or nested structure
  of Tensors, Variables or CompositeTensors to be differentiated, but received None.").
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402


def test_guide_stop_recording_reset_and_stop_gradient():
    # advanced_autodiff cells 9, 11, 13 (observed in TF 2.21, Keras 3.15: dz/dx 4.0, dz/dy None each time)
    x, y = tf.Variable(2.0), tf.Variable(3.0)
    with tf.GradientTape() as t:
        x_sq = x * x
        with t.stop_recording():
            y_sq = y * y
        z = x_sq + y_sq
    paused = t.gradient(z, {"x": x, "y": y})
    with tf.GradientTape() as t:
        y_sq = y * y
        t.reset()
        z = x * x + y_sq
    reset = t.gradient(z, {"x": x, "y": y})
    with tf.GradientTape() as t:
        z = x ** 2 + tf.stop_gradient(y ** 2)
    stopped = t.gradient(z, {"x": x, "y": y})
    for grads in (paused, reset, stopped):
        assert float(grads["x"]) == 4.0 and grads["y"] is None


def test_guide_custom_gradient_clips():
    # advanced_autodiff cell 16 (observed in TF 2.21: 2.0); a vector (observed: [1.4142135, 2.1213202])
    @tf.custom_gradient
    def clip_gradients(y):
        def backward(dy):
            return tf.clip_by_norm(dy, 0.5)
        return y, backward

    v = tf.Variable(2.0)
    with tf.GradientTape() as t:
        output = clip_gradients(v * v)
    assert float(t.gradient(output, v)) == 2.0
    w = tf.Variable([2.0, 3.0])
    with tf.GradientTape() as t:
        output = clip_gradients(w * w)
    np.testing.assert_allclose(t.gradient(output, w), [1.4142135, 2.1213202], rtol=1e-5)


def test_stop_recording_outside_the_block_is_tfs_error():
    never = tf.GradientTape()
    with pytest.raises(RuntimeError, match="Trying to stop recording a tape which is not recording"):
        with never.stop_recording():
            pass
    with tf.GradientTape() as ended:
        pass
    with pytest.raises(ValueError, match="Tape is not recording"):
        with ended.stop_recording():
            pass


@pytest.mark.parametrize("value, kind", [(3.0, "float"), (None, "NoneType"), (np.array(3.0), "ndarray"),
                                         ("a", "str")])
def test_watch_of_a_non_tensor_is_tfs_value_error(value, kind):
    x = tf.constant(2.0)
    with tf.GradientTape() as refused:
        with pytest.raises(ValueError, match=f"Passed in object .* of type '{kind}', not tf.Tensor or tf.Variable"):
            refused.watch([x, value])
    with tf.GradientTape() as t:
        t.watch(x)  # a tensor is watched
        y = x * x
    assert float(t.gradient(y, x)) == 4.0


def test_gradient_of_none_is_tfs_type_error():
    x = tf.Variable(1.0)
    with tf.GradientTape() as t:
        _ = x * 2
    with pytest.raises(TypeError, match="Argument `target` should be a list or nested structure of Tensors"):
        t.gradient(None, x)


def test_forward_accumulator_jvps():
    v = tf.Variable([1.0, 2.0])
    with tf.autodiff.ForwardAccumulator(v, tf.constant([1.0, 0.0])) as acc:
        y = tf.reduce_sum(v ** 3.0)
    assert float(acc.jvp(y)) == 3.0  # observed in TF 2.21, Keras 3.15: 3.0

    x = tf.constant(2.0)
    with tf.autodiff.ForwardAccumulator(primals=x, tangents=tf.constant(1.0)) as acc:
        y = x * x * x
    assert float(acc.jvp(y)) == 12.0  # observed: 12.0, None, 0.0
    assert acc.jvp(tf.constant(3.0)) is None
    zero = acc.jvp(tf.constant(3.0), unconnected_gradients="zero")
    assert zero is not None and float(zero) == 0.0

    with tf.autodiff.ForwardAccumulator([v, x], [tf.constant([1.0, 0.0]), tf.constant(2.0)]) as acc:
        y = tf.reduce_sum(v ** 2.0) * x
        z = v * x
    y_dot, z_dot = acc.jvp([y, z])
    assert float(y_dot) == 14.0  # observed: 14.0 and [4., 4.]
    np.testing.assert_allclose(z_dot, [4.0, 4.0])


def test_forward_over_back_is_a_hessian_vector_product():
    x = tf.constant([1.0, 2.0])
    with tf.autodiff.ForwardAccumulator(x, tf.constant([1.0, 0.0])) as acc:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(x ** 3.0)
        g = tape.gradient(y, x)
    np.testing.assert_allclose(acc.jvp(g), [6.0, 0.0])  # observed in TF 2.21, Keras 3.15: [6., 0.]


def test_forward_accumulator_bad_tangents():
    v = tf.Variable([1.0, 2.0])
    # observed in TF 2.21: ValueError "Tensor conversion requested dtype float32 for Tensor with dtype int32"
    with pytest.raises(ValueError, match="requested dtype float32 for Tensor with dtype int32"):
        tf.autodiff.ForwardAccumulator(v, tf.constant([1, 0]))
    # TF 2.21 accepts a tangent of another shape at construction (observed); jdist names the mismatch there.
    with pytest.raises(ValueError, match=r"tangent of shape \(3,\) for a primal of shape \(2,\)"):
        tf.autodiff.ForwardAccumulator(v, tf.constant([1.0, 0.0, 3.0]))


@tf.function
def _hessian_inner_watch_first(x):
    with tf.GradientTape() as t2:
        with tf.GradientTape() as t1:
            t1.watch(x)
            t2.watch(x)
            y = x ** 3
        d = t1.gradient(y, x)
    return t2.gradient(d, x)


@tf.function
def _hessian_outer_watch_first(x):
    with tf.GradientTape() as t2:
        with tf.GradientTape() as t1:
            t2.watch(x)
            t1.watch(x)
            y = x ** 3
        d = t1.gradient(y, x)
    return t2.gradient(d, x)


@tf.function
def _hessian_jacobian(x):
    with tf.GradientTape() as t2:
        t2.watch(x)
        with tf.GradientTape() as t1:
            t1.watch(x)
            y = tf.reduce_sum(x ** 3)
        d = t1.gradient(y, x)
    return t2.jacobian(d, x)


def test_hessians_of_watched_tensors_by_nested_tapes_in_tf_function():
    # observed in TF 2.21, Keras 3.15: 12.0 in either watch order, and the Jacobian [[6, 0], [0, 12]]
    # (jdist gave a ValueError naming the source for the first order and 24.0 for the second)
    assert float(_hessian_inner_watch_first(tf.constant(2.0))) == 12.0
    assert float(_hessian_outer_watch_first(tf.constant(2.0))) == 12.0
    np.testing.assert_allclose(_hessian_jacobian(tf.constant([1.0, 2.0])), [[6.0, 0.0], [0.0, 12.0]])


_FRESH = """
import jdist.tf_compat as tf

@tf.function
def h(x):
    with tf.GradientTape() as t:
        t.watch(x)
        y = x ** 3
    return t.gradient(y, x)

print(float(h(tf.constant(2.0))))
"""


def test_tape_over_tensors_in_tf_function_before_any_keras_object(tmp_path):
    # A process that made no variable or Keras object yet (jdist: an AssertionError); observed in TF 2.21: 12.0.
    import subprocess
    import sys

    script = tmp_path / "fresh.py"
    script.write_text(_FRESH)
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "12.0"


def _jvp_in_a_function(x, k):
    with tf.autodiff.ForwardAccumulator(k, tf.ones_like(k) * 0.5) as acc:
        y = tf.matmul(x, k)
        z = tf.reduce_sum(y ** 2)
    return acc.jvp(y), acc.jvp(z)


def test_forward_accumulator_in_a_function_over_a_variable():
    # observed in TF 2.21, Keras 3.15: [[3., 3.]] and 72.0
    y_dot, z_dot = _jvp_in_a_function(tf.constant([[1.0, 2.0, 3.0]]), tf.Variable(tf.ones([3, 2])))
    np.testing.assert_allclose(y_dot, [[3.0, 3.0]])
    assert float(z_dot) == 72.0
