"""`tf.debugging` and `tf.summary` in jdist.tf_compat, against TF 2.21 (tensorflow-cpu 2.21.0) observed with
/work/tfvenv/bin/python: the errors and messages of the assertions, and the events TF writes for the same
summary calls (read back with TensorBoard's event_file_loader: tag, step, plugin, dtype, value)."""
import glob
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402
from jdist.callbacks.event_file import read_tensors  # noqa: E402
from jdist.strategy import dispatch  # noqa: E402

InvalidArgument = tf.errors.InvalidArgumentError


# ------------------------------------------------------------------------------------------- assertions
@pytest.mark.parametrize("assertion, x, y, first_line", [
    # TF 2.21's messages: "Condition x == y did not hold." / "Condition x > y did not hold." / "... x < y ..."
    (tf.debugging.assert_equal, [1, 2], [1, 3], "Condition x == y did not hold."),
    (tf.debugging.assert_greater, [2, 3], [1, 3], "Condition x > y did not hold."),
    (tf.debugging.assert_less, [2, 3], [1, 3], "Condition x < y did not hold."),
    (tf.debugging.assert_greater_equal, [0, 3], [1, 3], "Condition x >= y did not hold."),
    (tf.debugging.assert_less_equal, [2, 3], [1, 3], "Condition x <= y did not hold."),
    (tf.debugging.assert_not_equal, [2, 3], [1, 3], "Condition x != y did not hold."),
])
def test_comparisons_raise_tfs_error_eagerly_and_when_compiled_code_runs(assertion, x, y, first_line,
                                                                        clears_failed_effects):
    x, y = tf.constant(x), tf.constant(y)
    with pytest.raises(InvalidArgument) as info:
        assertion(x, y)
    assert str(info.value).startswith(first_line)
    with pytest.raises(InvalidArgument, match="my msg\nCondition"):  # TF 2.21: the message on its own line first
        assertion(x, y, message="my msg")
    holding = {tf.debugging.assert_greater: x - 1, tf.debugging.assert_less: x + 1,
               tf.debugging.assert_not_equal: x + 5}.get(assertion, x)
    assert assertion(x, holding) is None  # TF 2.21 returns None

    def compiled(a, b):
        assertion(a, b)
        return a + b

    with pytest.raises(Exception, match=first_line.replace(".", r"\.")):
        jax.block_until_ready(jax.jit(compiled)(jnp.asarray(x), jnp.asarray(y)))


def test_assert_equal_details_and_broadcasting_as_tf():
    # TF 2.21: indices [[1]], x values [2], y values [3]; assert_equal([1, 1], 1) passes (broadcast);
    # shapes [2] vs [3] -> InvalidArgumentError "Incompatible shapes: [2] vs. [3]".
    with pytest.raises(InvalidArgument) as info:
        tf.debugging.assert_equal(tf.constant([1, 2]), tf.constant([1, 3]))
    text = str(info.value)
    assert "Indices of first 1 different values:\n[[1]]" in text and "Corresponding x values:\n[2]" in text
    assert "Corresponding y values:\n[3]" in text and "First 2 elements of x:\n[1 2]" in text
    assert tf.debugging.assert_equal(tf.constant([1, 1]), 1) is None
    with pytest.raises(InvalidArgument, match=r"Incompatible shapes: \[2\] vs. \[3\]"):
        tf.debugging.assert_equal(tf.constant([1, 1]), tf.constant([1, 1, 1]))


def test_assert_near_uses_tfs_default_tolerance():
    # TF 2.21: default rtol = atol = 1.1920929e-06 for float32 (10 * eps); 2.0 vs 2.000001 passes, 2.0 vs 2.1
    # fails with "x and y not equal to tolerance rtol = ..., atol = ..."; atol=0.2 passes.
    assert tf.debugging.assert_near(tf.constant([1.0, 2.0]), tf.constant([1.0, 2.000001])) is None
    with pytest.raises(InvalidArgument, match="x and y not equal to tolerance rtol = 1.1920929e-06, "
                                              "atol = 1.1920929e-06"):
        tf.debugging.assert_near(tf.constant([1.0, 2.0]), tf.constant([1.0, 2.1]))
    assert tf.debugging.assert_near(tf.constant([1.0, 2.0]), tf.constant([1.0, 2.1]), atol=0.2) is None
    with pytest.raises(Exception, match="not equal to tolerance"):
        jax.block_until_ready(jax.jit(lambda a: (tf.debugging.assert_near(a, a + 1.0), a)[1])(jnp.ones(2)))


def test_static_shape_assertions_as_tf():
    # TF 2.21 (ValueError): "Tensor  must have rank 2.  Received rank 1, shape (2,)", with a message
    # "msg.  Tensor  must have rank 2. ..."; assert_shapes: "Specified by tensor shape=(1, 2) dtype=int32
    # dimension 0.  Tensor shape=(2,) dtype=int32 dimension 0 must have size 1.  Received size 2, shape (2,)",
    # "Specified explicitly.  Tensor shape=(1, 2) dtype=int32 dimension 1 must have size 3.  Received size 2,
    # shape (1, 2)" and "Tensor  must have rank in (0, 1).  Received rank 2, shape (1, 2)".
    v = tf.constant([2, 3])
    assert tf.debugging.assert_rank(v, 1) is None
    with pytest.raises(ValueError, match=r"^Tensor  must have rank 2\.  Received rank 1, shape \(2,\)$"):
        tf.debugging.assert_rank(v, 2)
    with pytest.raises(ValueError, match=r"^msg\.  Tensor  must have rank 2\."):
        tf.debugging.assert_rank(v, 2, message="msg")
    m = tf.constant([[1, 2]])
    assert tf.debugging.assert_shapes([(m, ("N", "D")), (tf.constant([1]), ("N",))]) is None
    cases = [
        ([(m, ("N", "D")), (v, ("N",))], "Specified by tensor shape=(1, 2) dtype=int32 dimension 0.  Tensor "
         "shape=(2,) dtype=int32 dimension 0 must have size 1.  Received size 2, shape (2,)"),
        ([(m, (1, 3))], "Specified explicitly.  Tensor shape=(1, 2) dtype=int32 dimension 1 must have size 3.  "
         "Received size 2, shape (1, 2)"),
        ([(m, ("N",))], "Tensor  must have rank in (0, 1).  Received rank 2, shape (1, 2)"),
    ]
    for shapes, message in cases:
        with pytest.raises(ValueError) as info:
            tf.debugging.assert_shapes(shapes)
        assert str(info.value) == message
    with pytest.raises(ValueError, match="must have rank 2"):  # static: raised while tracing
        jax.jit(lambda a: tf.debugging.assert_rank(a, 2) or a)(jnp.ones(3))


@pytest.mark.parametrize("values, problem", [([1.0, np.nan], "NaN"), ([1.0, np.inf], "Inf"),
                                             ([np.inf, np.nan], "Inf and NaN")])
def test_check_numerics_as_tf(values, problem):
    # TF 2.21: InvalidArgumentError "my message : Tensor had NaN values" (Inf, "Inf and NaN"); the tensor back
    # when finite; int32 refused; in a tf.function the same text when the function runs.
    with pytest.raises(InvalidArgument, match=f"^my message : Tensor had {problem} values$"):
        tf.debugging.check_numerics(tf.constant(values), "my message")
    good = tf.debugging.check_numerics(tf.constant([1.0, 2.0]), "ok")
    np.testing.assert_array_equal(good, [1.0, 2.0])
    compiled = jax.jit(lambda a: tf.debugging.check_numerics(a * 2, "in fn"))
    np.testing.assert_array_equal(compiled(jnp.array([1.0, 2.0])), [2.0, 4.0])
    with pytest.raises(Exception, match=f"in fn : Tensor had {problem} values"):
        jax.block_until_ready(compiled(jnp.array(values, jnp.float32)))
    with pytest.raises(InvalidArgument, match="floating-point"):
        tf.debugging.check_numerics(tf.constant([1, 2]), "m")


def test_enable_check_numerics_maps_to_jax_debug_nans():
    try:
        tf.debugging.enable_check_numerics()
        assert jax.config.jax_debug_nans and jax.config.jax_debug_infs
        with pytest.raises(FloatingPointError):
            jax.jit(lambda a: jnp.log(a))(jnp.float32(-1.0))
    finally:
        tf.debugging.disable_check_numerics()
    assert not jax.config.jax_debug_nans and not jax.config.jax_debug_infs
    assert tf.debugging.set_log_device_placement(True) is None  # TF 2.21 returns None; a no-op here


# ---------------------------------------------------------------------------------------------- summary
# TF 2.21, the calls of test_summary_events_equal_tfs (read back from TF's file with TensorBoard 2.x's
# event_file_loader): (step, tag, plugin, value). The call with no step raised ValueError "No step set. ...",
# the one inside record_if(False) and the one with no default writer returned False and wrote nothing.
TF_SCALARS = [(3, "loss", 0.5), (4, "int", 7.0), (5, "loss", 0.25), (10, "loss", 0.125), (12, "kept", 2.0),
              (15, "desc", 1.5), (17, "f64", 0.3333333432674408), (-1, "neg", 1.0)]
TF_TEXT = (14, "t", b"hello")
# TF 2.21: histogram("h", [1., 2., 2., 3.], step=13): float64 (30, 3); buckets of width 1/15 from 1 to 3, counts 1
# in bucket 0, 2 in bucket 15, 1 in bucket 29; first row [1.0, 1.0666666666666667, 1.0].
TF_HISTOGRAM_FIRST_ROW = [1.0, 1.0666666666666667, 1.0]
TF_HISTOGRAM_COUNTS = {0: 1.0, 15: 2.0, 29: 1.0}


def test_summary_events_equal_tfs(tmp_path):
    assert not bool(tf.summary.scalar("a", 1.0, step=0))  # TF 2.21: False with no default writer
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default():
        with pytest.raises(ValueError, match="No step set. Please specify one either through the `step` argument"):
            tf.summary.scalar("nostep", 1.0)
        assert bool(tf.summary.scalar("loss", 0.5, step=3))
        tf.summary.scalar("int", 7, step=4)
        tf.summary.scalar("loss", tf.constant(0.25), step=tf.constant(5, tf.int64))
        tf.summary.experimental.set_step(10)
        try:
            assert tf.summary.experimental.get_step() == 10
            tf.summary.scalar("loss", 0.125)
        finally:
            tf.summary.experimental.set_step(None)
        with pytest.raises(ValueError, match=r"Expected scalar shape, saw shape: \(2,\)\."):
            tf.summary.scalar("vec", [1.0, 2.0], step=1)
        with tf.summary.record_if(False):
            assert not bool(tf.summary.scalar("skipped", 1.0, step=11))
        with tf.summary.record_if(lambda: True):
            tf.summary.scalar("kept", 2.0, step=12)
        assert bool(tf.summary.histogram("h", [1.0, 2.0, 2.0, 3.0], step=13))
        assert bool(tf.summary.text("t", "hello", step=14))
        tf.summary.scalar("desc", 1.5, step=15, description="about")
        tf.summary.scalar("f64", np.float64(1.0 / 3.0), step=17)
        tf.summary.scalar("neg", 1.0, step=-1)
    writer.flush()
    writer.close()
    assert not bool(tf.summary.scalar("after", 1.0, step=1))  # TF 2.21: False once the writer is closed
    with pytest.raises(RuntimeError, match="is already closed"):
        with writer.as_default():
            pass

    (path,) = glob.glob(str(tmp_path / "events.out.tfevents.*.v2"))
    events = read_tensors(path)
    scalars = [(step, tag, float(value)) for step, tag, plugin, value in events if plugin == "scalars"]
    assert scalars == TF_SCALARS
    assert all(value.dtype == np.float32 and value.shape == () for *_, plugin, value in events if plugin == "scalars")
    (text,) = [(step, tag, value[()]) for step, tag, plugin, value in events if plugin == "text"]
    assert text == TF_TEXT
    ((step, tag, histogram),) = [(s, t, v) for s, t, p, v in events if p == "histograms"]
    assert (step, tag, histogram.dtype, histogram.shape) == (13, "h", np.float64, (30, 3))
    assert histogram[0].tolist() == TF_HISTOGRAM_FIRST_ROW
    assert {i: c for i, c in enumerate(histogram[:, 2]) if c} == TF_HISTOGRAM_COUNTS
    np.testing.assert_allclose(histogram[:, 0], np.linspace(1, 3, 31)[:-1])


# TF 2.21, MirroredStrategy on 2 logical CPUs, scalar("replica_loss", replica_id + 1., step=7) in strategy.run (in a
# tf.function and eagerly): one event per call, replica 0's value 1.0.
TF_RUN_EVENTS = [(7, "replica_loss", 1.0)]


def test_summary_inside_strategy_run_writes_replica_zeros_value(tmp_path):
    strategy = tf.distribute.MirroredStrategy()
    writer = tf.summary.create_file_writer(str(tmp_path))

    def step(x):
        loss = tf.reduce_mean(x)
        tf.summary.scalar("replica_loss", loss, step=7)
        return loss

    values = strategy.experimental_distribute_values_from_function(
        lambda ctx: np.full((2,), float(ctx.replica_id_in_sync_group) + 1.0, np.float32))
    with writer.as_default():
        out = strategy.run(step, args=(values,))
        jax.block_until_ready(strategy.experimental_local_results(out))
    writer.close()
    (path,) = glob.glob(str(tmp_path / "events.out.tfevents.*"))
    assert [(s, t, float(v)) for s, t, _, v in read_tensors(path)] == TF_RUN_EVENTS


def test_unprovided_summary_names_say_what_there_is():
    with pytest.raises(AttributeError, match="of tf.summary it has create_file_writer, create_noop_writer, scalar, "
                                             "histogram, text, image, audio"):
        tf.summary.experimental.write_raw_pb  # noqa: B018


def test_check_numerics_inside_strategy_run_raises_when_the_step_runs():
    strategy = tf.distribute.MirroredStrategy()

    def step(x):
        return tf.debugging.check_numerics(tf.math.log(x), "log of the batch")

    good = strategy.experimental_distribute_values_from_function(lambda ctx: np.ones(2, np.float32))
    np.testing.assert_array_equal(strategy.experimental_local_results(strategy.run(step, args=(good,)))[0], [0, 0])
    bad = strategy.experimental_distribute_values_from_function(
        lambda ctx: np.full(2, -1.0 if ctx.replica_id_in_sync_group == 3 else 1.0, np.float32))
    with pytest.raises(Exception, match="log of the batch : Tensor had NaN values"):
        jax.block_until_ready(strategy.experimental_local_results(strategy.run(step, args=(bad,))))
    # jdist's bound on programs in flight (jdist.strategy.dispatch) waits for the failed step too; the error is
    # the caller's, raised where it reads the outputs above, not again by the next call that waits.
    dispatch.wait()
    jax.effects_barrier()  # nothing left behind for the next tf.print (see check_numerics)
