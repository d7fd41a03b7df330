"""jdist.tf_compat's control flow, gradient clipping and tensor predicates, against TF 2.21 (tensorflow-cpu 2.21.0,
Keras 3.15.1) observed with /work/tfvenv/bin/python, e.g.
`python -c "import tensorflow as tf; print(tf.while_loop(lambda i: i < 5, lambda i: (i + 1,), (0,)))"`.
Each op runs eagerly, inside `jax.jit` (traced values) and inside `strategy.run` on 8 replicas."""
import logging
import os
import subprocess
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

EAGER, JIT = "eager", "jit"


def run(mode, fn, *args):
    """fn(*args) on values, or compiled with the args traced."""
    if mode == EAGER:
        return fn(*args)
    return jax.jit(fn)(*args)


# ------------------------------------------------------------------------------------------------- tf.cond
@pytest.mark.parametrize("mode", [EAGER, JIT])
def test_cond_picks_the_branch_and_keeps_its_structure(mode):
    # TF 2.21: cond(False-tensor, 1, 2) -> 2; a tuple (1, 2.) branch gives a tuple; [x] a one-element list.
    out = run(mode, lambda x: tf.cond(x > 0, lambda: (x + 1, x * 2.0), lambda: (x - 1, x / 2.0)), jnp.float32(3.0))
    assert isinstance(out, tuple) and [float(v) for v in out] == [4.0, 6.0]
    out = run(mode, lambda x: tf.cond(x > 0, lambda: [x], lambda: [x + 1]), jnp.int32(-1))
    assert isinstance(out, list) and int(out[0]) == 0
    assert run(mode, lambda x: tf.cond(x > 0, lambda: None, lambda: None), jnp.int32(1)) is None


def test_cond_on_a_python_bool_runs_only_that_branch():
    # TF 2.21: tf.cond(True, lambda: 1, lambda: 2) returns the Python 1; eagerly the other branch never runs,
    # so branches may even differ in structure (tf.cond(True, lambda: (1, 2), lambda: 3) -> (1, 2)).
    assert tf.cond(True, lambda: 1, lambda: 2) == 1
    assert tf.cond(np.bool_(True), lambda: (1, 2), lambda: 3) == (1, 2)
    assert tf.cond(tf.constant(False), lambda: 1 / 0, lambda: "no division") == "no division"


def test_cond_errors_name_the_problem():
    with pytest.raises(TypeError, match="'true_fn' must be callable"):  # TF 2.21's message
        tf.cond(True, 1, lambda: 2)
    # TF 2.21 in a tf.function: "true_fn and false_fn arguments to tf.cond must have the same number, type, and
    # overall structure of return values." XLA also needs equal shapes (TF allows zeros(2) vs zeros(3)).
    with pytest.raises(TypeError, match="same number, type, and overall structure"):
        jax.jit(lambda x: tf.cond(x > 0, lambda: (x, x), lambda: x))(1.0)
    with pytest.raises(TypeError, match="equal shapes and dtypes"):
        jax.jit(lambda x: tf.cond(x > 0, lambda: jnp.zeros(2), lambda: jnp.zeros(3)))(1.0)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"scalar, but it has shape \[2\]"):
        tf.cond(np.array([True, False]), lambda: 1, lambda: 2)


# ------------------------------------------------------------------------------------------------- tf.case
@pytest.mark.parametrize("mode", [EAGER, JIT])
@pytest.mark.parametrize("x, expected", [(3, 1), (1, 2), (-1, 3)])
def test_case_takes_the_first_true_predicate_or_the_default(mode, x, expected):
    # TF 2.21: case([(x > 2, 1), (x > 0, 2)], default=3) at x=1 -> 2 (eager and in a tf.function).
    fn = lambda v: tf.case([(v > 2, lambda: jnp.int32(1)), (v > 0, lambda: jnp.int32(2))],  # noqa: E731
                           default=lambda: jnp.int32(3))
    assert int(run(mode, fn, jnp.int32(x))) == expected


def test_case_with_known_predicates_raises_tfs_errors():
    t, f = tf.constant(True), tf.constant(False)
    assert tf.case([(t, lambda: 1), (t, lambda: 2)], default=lambda: 3) == 1  # TF 2.21: first true wins
    # TF 2.21: InvalidArgumentError "... Input error: exclusive=True: more than 1 conditions (?, ?) evaluated as
    # True:" and "Input error: None of conditions evaluated as True:" with no default.
    with pytest.raises(tf.errors.InvalidArgumentError, match="more than 1 conditions evaluated as True"):
        tf.case([(t, lambda: 1), (t, lambda: 2)], default=lambda: 3, exclusive=True)
    with pytest.raises(tf.errors.InvalidArgumentError, match="None of conditions evaluated as True"):
        tf.case([(f, lambda: 1)])
    assert tf.case([(t, lambda: 1)]) == 1


def test_case_errors_are_raised_when_a_compiled_program_runs():
    fn = jax.jit(lambda v: tf.case([(v > 0, lambda: v), (v > 1, lambda: -v)], default=lambda: v * 0,
                                   exclusive=True))
    assert float(fn(jnp.float32(0.5))) == 0.5
    with pytest.raises(Exception, match="more than 1 conditions evaluated as True"):
        jax.block_until_ready(fn(jnp.float32(5.0)))
    # TF 2.21 in a tf.function, no default and no predicate true: "assertion failed: [Input error: None of
    # conditions evaluated as True:]" when the function runs.
    no_default = jax.jit(lambda v: tf.case([(v > 2, lambda: v), (v > 0, lambda: -v)]))
    assert float(no_default(jnp.float32(1.0))) == -1.0
    with pytest.raises(Exception, match="None of conditions evaluated as True"):
        jax.block_until_ready(no_default(jnp.float32(-1.0)))


# ------------------------------------------------------------------------------------------- tf.while_loop
@pytest.mark.parametrize("mode", [EAGER, JIT])
def test_while_loop_returns_loop_vars_container(mode):
    # TF 2.21: (0,) -> (5,), [0] -> [5], (0, 0) -> (5, 10), [0, 0.] -> [5, 10.0] (int32 and float32),
    # maximum_iterations=3 -> (3,); a body returning a bare value for one loop var ([x]) -> [5] in a tf.function.
    start = jnp.int32(0)
    out = run(mode, lambda i: tf.while_loop(lambda i: i < 5, lambda i: (i + 1,), (i,)), start)
    assert type(out) is tuple and [int(v) for v in out] == [5]
    out = run(mode, lambda i: tf.while_loop(lambda i: i < 5, lambda i: i + 1, [i]), start)
    assert type(out) is list and [int(v) for v in out] == [5]
    out = run(mode, lambda i: tf.while_loop(lambda i, s: i < 5, lambda i, s: [i + 1, s + i], [i, 0.0]), start)
    assert type(out) is list and int(out[0]) == 5 and float(out[1]) == 10.0
    out = run(mode, lambda i: tf.while_loop(lambda i: i < 100, lambda i: (i + 1,), (i,), maximum_iterations=3),
              start)
    assert [int(v) for v in out] == [3]
    out = run(mode, lambda i: tf.while_loop(lambda d: d["a"] < 3, lambda d: ({"a": d["a"] + 1},), ({"a": i},)),
              start)
    assert int(out[0]["a"]) == 3


def test_while_loop_on_python_values_runs_in_python():
    assert tf.while_loop(lambda i: i < 5, lambda i: (i + 1,), (0,)) == (5,)
    calls = []
    tf.while_loop(lambda i: i < 3, lambda i: (calls.append(i) or i + 1,), (0,))
    assert calls == [0, 1, 2]


def test_while_loop_errors_name_the_fix():
    # TF 2.21: a bare 0 -> ValueError "'loop_vars' must be provided."; a body of the wrong arity -> ValueError
    # "The two structures don't have the same nested structure."; a dtype change in a tf.function -> TypeError
    # "Loop var ... enters the loop with type <dtype: 'int32'> but has type <dtype: 'float32'> after 1 iteration".
    with pytest.raises(ValueError, match="'loop_vars' must be provided"):
        tf.while_loop(lambda i: i < 5, lambda i: i + 1, 0)
    with pytest.raises(ValueError, match="structure of loop_vars"):
        tf.while_loop(lambda i, s: i < 5, lambda i, s: (i + 1,), (0, 0))
    with pytest.raises(TypeError, match=r"enters the loop with type int32\[\] but has type float32\[\]"):
        jax.jit(lambda i: tf.while_loop(lambda i: i < 5, lambda i: (i.astype(jnp.float32) + 1,), (i,)))(0)


# ------------------------------------------------------------------------------- map_fn, scan, foldl, foldr
@pytest.mark.parametrize("mode", [EAGER, JIT])
def test_map_fn_scan_and_folds_equal_tf(mode):
    ints = jnp.array([1, 2, 3, 4], jnp.int32)
    # TF 2.21: map_fn(x*2, [1,2,3]) -> [2,4,6]; scan(+, [1,2,3,4]) -> [1,3,6,10]; with initializer 10 ->
    # [11,13,16,20]; reverse -> [10,9,7,4]; foldl(-, [1,2,3]) -> -4, initializer 10 -> 4; foldr(-, [1,2,3]) -> 0,
    # initializer 10 -> 4; scan over a tuple of elems with a tuple accumulator -> ([1,3],[3,7]).
    np.testing.assert_array_equal(run(mode, lambda e: tf.map_fn(lambda x: x * 2, e), ints[:3]), [2, 4, 6])
    np.testing.assert_array_equal(run(mode, lambda e: tf.scan(lambda a, x: a + x, e), ints), [1, 3, 6, 10])
    np.testing.assert_array_equal(run(mode, lambda e: tf.scan(lambda a, x: a + x, e, initializer=jnp.int32(10)),
                                      ints), [11, 13, 16, 20])
    np.testing.assert_array_equal(run(mode, lambda e: tf.scan(lambda a, x: a + x, e, reverse=True), ints),
                                  [10, 9, 7, 4])
    assert int(run(mode, lambda e: tf.foldl(lambda a, x: a - x, e), ints[:3])) == -4
    assert int(run(mode, lambda e: tf.foldl(lambda a, x: a - x, e, initializer=jnp.int32(10)), ints[:3])) == 4
    assert int(run(mode, lambda e: tf.foldr(lambda a, x: a - x, e), ints[:3])) == 0
    assert int(run(mode, lambda e: tf.foldr(lambda a, x: a - x, e, initializer=jnp.int32(10)), ints[:3])) == 4
    pair = (ints[:2], ints[2:])
    out = run(mode, lambda p: tf.scan(lambda a, x: (a[0] + x[0], a[1] + x[1]), p), pair)
    np.testing.assert_array_equal(out[0], [1, 3])
    np.testing.assert_array_equal(out[1], [3, 7])
    # TF 2.21: scan((a0+x, a1*x), [1,2,3,4], initializer=(0, 1)) -> ([1,3,6,10], [1,2,6,24]).
    out = run(mode, lambda e: tf.scan(lambda a, x: (a[0] + x, a[1] * x), e, initializer=(jnp.int32(0), jnp.int32(1))),
              ints)
    np.testing.assert_array_equal(out[0], [1, 3, 6, 10])
    np.testing.assert_array_equal(out[1], [1, 2, 6, 24])


def test_map_fn_signature_casts_and_scalars_are_refused():
    # TF 2.21: map_fn(cast(x, float32) / 2, [1, 2], fn_output_signature=tf.float32) -> [0.5, 1.0] float32;
    # (int32, float32) signature for a pair of results; a scalar elems -> ValueError "Elements in elems must be
    # 1+ dimensional Tensors, not scalars".
    out = tf.map_fn(lambda x: x / 2, tf.constant([1, 2]), fn_output_signature=tf.float32)
    assert out.dtype == np.float32 and out.numpy().tolist() == [0.5, 1.0]
    out = tf.map_fn(lambda x: x / 2, tf.constant([1, 2]), fn_output_signature=tf.TensorSpec([], tf.float32))
    assert out.dtype == np.float32
    a, b = tf.map_fn(lambda x: (x, tf.cast(x, tf.float32) * 1.5), tf.constant([1, 2]),
                     fn_output_signature=(tf.int32, tf.float32))
    assert a.dtype == np.int32 and b.dtype == np.float32 and b.numpy().tolist() == [1.5, 3.0]
    # TF 2.21 runs fn eagerly on each element (an EagerTensor): `x * 1.5` of an int32 element is its TypeError
    with pytest.raises(TypeError, match="Cannot convert 1.5 to EagerTensor of dtype int32"):
        tf.map_fn(lambda x: (x, x * 1.5), tf.constant([1, 2]), fn_output_signature=(tf.int32, tf.float32))
    with pytest.raises(ValueError, match="1\\+ dimensional Tensors, not scalars"):
        tf.map_fn(lambda x: x, tf.constant(1))
    # Python numbers take the elements' dtypes (TF 2.21: float32 [1.5, 1.5]; int32 [1, 1]; the pair float32
    # [1., 1.] and int32 [2, 2]; a float written for int32 elements InvalidArgumentError "TensorArray dtype is
    # int32 but Op is trying to write dtype float32")
    out = tf.map_fn(lambda x: 1.5, tf.constant([1., 2.]))
    assert out.dtype == np.float32 and out.numpy().tolist() == [1.5, 1.5]
    assert tf.map_fn(lambda x: 1, tf.constant([1, 2])).dtype == np.int32
    a, b = tf.map_fn(lambda x: (1, 2), (tf.constant([1., 2.]), tf.constant([1, 2])))
    assert (a.dtype, b.dtype) == (np.float32, np.int32)
    assert a.numpy().tolist() == [1., 1.] and b.numpy().tolist() == [2, 2]
    with pytest.raises(tf.errors.InvalidArgumentError, match="TensorArray dtype is int32 but Op is trying to write "
                                                             "dtype float32"):
        tf.map_fn(lambda x: 1.5, tf.constant([1, 2]))
    with pytest.raises(ValueError, match="same first dimension"):
        tf.map_fn(lambda p: p[0], (tf.constant([1, 2]), tf.constant([1, 2, 3])))


def test_no_op_group_identity_n():
    # TF 2.21: no_op() and group(...) return None eagerly; identity_n of a tuple is a list; of one tensor a TypeError.
    assert tf.no_op() is None and tf.group(tf.constant(1), tf.constant(2)) is None
    out = tf.identity_n((tf.constant(1), tf.constant(2.0)))
    assert isinstance(out, list) and out[0].dtype == np.int32 and out[1].dtype == np.float32
    with pytest.raises(TypeError, match="list of tensors"):
        tf.identity_n(tf.constant(1))


def test_control_flow_inside_strategy_run_equals_one_device():
    strategy = tf.distribute.MirroredStrategy()
    x = np.arange(16, dtype=np.float32).reshape(16, 1) - 5.0

    def body(batch):
        total = tf.while_loop(lambda i, acc: i < 3, lambda i, acc: (i + 1, acc + tf.reduce_sum(batch)),
                              (jnp.int32(0), jnp.float32(0.0)))[1]
        signed = tf.cond(total > 0, lambda: total, lambda: -total)
        mapped = tf.reduce_sum(tf.map_fn(lambda row: row * 2.0, batch))
        folded = tf.foldl(lambda a, row: a + row[0], batch, initializer=jnp.float32(0.0))
        return signed + mapped + folded

    per_replica = strategy.run(body, args=(strategy.experimental_distribute_values_from_function(
        lambda ctx: x[2 * ctx.replica_id_in_sync_group:2 * ctx.replica_id_in_sync_group + 2]),))
    got = [float(v) for v in strategy.experimental_local_results(per_replica)]
    expected = [float(body(x[2 * r:2 * r + 2])) for r in range(8)]
    assert strategy.num_replicas_in_sync == 8 and got == pytest.approx(expected)


def test_a_variable_assigned_from_a_traced_cond_inside_run():
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        v = tf.Variable(1.0)

    def step(x):  # the documented form: the branches return values, the variable takes the result
        v.assign(tf.cond(tf.reduce_sum(x) > 0, lambda: v + 1.0, lambda: v - 1.0))
        return v.read_value()

    out = strategy.run(step, args=(np.ones(2, np.float32),))
    assert float(v.numpy()) == 2.0 and [float(o) for o in strategy.experimental_local_results(out)] == [2.0] * 8
    strategy.run(step, args=(-np.ones(2, np.float32),))
    assert float(v.numpy()) == 1.0


@pytest.mark.parametrize("make", [lambda: tf.distribute.MirroredStrategy(),
                                  lambda: tf.distribute.OneDeviceStrategy("cpu:0")], ids=["mirrored", "one_device"])
def test_a_traced_conds_branches_assign_variables_inside_run(make):
    # Branches that assign (one variable in one branch, another in the other, one in both), as TF scripts write
    # them; 8 replicas and one device give the same values, each step's new values written once as for
    # `v.assign(...)` in the test above.
    strategy = make()
    with strategy.scope():
        hits, misses, total = tf.Variable(0.0), tf.Variable(0.0), tf.Variable(10.0)

    def hit():
        hits.assign_add(1.0)
        total.assign_add(2.0)
        return total.read_value()

    def miss():
        misses.assign_add(1.0)
        total.assign_sub(1.0)
        return total.read_value()

    def step(x):
        return tf.cond(tf.reduce_sum(x) > 0, hit, miss)

    outs = [strategy.experimental_local_results(strategy.run(step, args=(np.full(2, sign, np.float32),)))
            for sign in (1.0, -1.0, 1.0)]
    # 10 + 2, - 1, + 2
    assert [float(o[0]) for o in outs] == [12.0, 11.0, 13.0] and all(len(set(map(float, o))) == 1 for o in outs)
    assert (float(hits.numpy()), float(misses.numpy()), float(total.numpy())) == (2.0, 1.0, 13.0)


# ---------------------------------------------------------------------------------------------- clipping
def test_clip_by_norm_equals_tf():
    # TF 2.21: clip_by_norm([3,4], 1) -> [0.6, 0.8]; clip 10 unchanged; axes=[1] per row; axes=0 per column;
    # zeros stay zeros; ints -> InvalidArgumentError (Sqrt of int32).
    np.testing.assert_allclose(tf.clip_by_norm(tf.constant([3.0, 4.0]), 1.0), [0.6, 0.8], rtol=1e-6)
    np.testing.assert_array_equal(tf.clip_by_norm(tf.constant([3.0, 4.0]), 10.0), [3.0, 4.0])
    m = tf.constant([[3.0, 4.0], [0.3, 0.4]])
    np.testing.assert_allclose(tf.clip_by_norm(m, 1.0, axes=[1]), [[0.6, 0.8], [0.3, 0.4]], rtol=1e-6)
    np.testing.assert_allclose(tf.clip_by_norm(m, 1.0, axes=0), [[0.9950372, 0.99503714], [0.09950373, 0.09950372]],
                               rtol=1e-6)
    np.testing.assert_array_equal(tf.clip_by_norm(tf.constant([0.0, 0.0]), 1.0), [0.0, 0.0])
    np.testing.assert_allclose(jax.jit(lambda t: tf.clip_by_norm(t, 1.0))(jnp.array([3.0, 4.0])), [0.6, 0.8],
                               rtol=1e-6)
    with pytest.raises(TypeError, match="floating-point"):
        tf.clip_by_norm(tf.constant([3, 4]), 1)


# TF 2.21: clip_by_global_norm([[3,4], None, 12], 1) -> ([0.23076925, 0.30769232], None, 0.9230769872665405), 13.0
TF_GLOBAL = ([0.23076925, 0.30769232], 0.9230769872665405, 13.0)


@pytest.mark.parametrize("mode", [EAGER, JIT])
def test_clip_by_global_norm_equals_tf(mode):
    def clip(a, b):
        return tf.clip_by_global_norm([a, None, b], 1.0)

    clipped, norm = run(mode, clip, np.array([3.0, 4.0], np.float32), np.float32(12.0))
    assert isinstance(clipped, list) and clipped[1] is None
    np.testing.assert_allclose(clipped[0], TF_GLOBAL[0], rtol=1e-6)
    np.testing.assert_allclose(clipped[2], TF_GLOBAL[1], rtol=1e-6)
    assert float(norm) == TF_GLOBAL[2]


def test_clip_by_global_norm_edge_cases_equal_tf():
    v = tf.constant([3.0, 4.0])
    # TF 2.21: no clipping under the norm; use_norm=10 -> [0.3, 0.4] and norm 10; all None -> ([None], 0.0);
    # an inf or NaN norm -> NaN tensors; float16 stays float16 (norm 5.0 float16); a tensor -> TypeError
    # "`t_list` should be a sequence of tensors."
    clipped, norm = tf.clip_by_global_norm([v, tf.constant(12.0)], 100.0)
    np.testing.assert_array_equal(clipped[0], [3.0, 4.0]) and float(norm) == 13.0
    clipped, norm = tf.clip_by_global_norm([v], 1.0, use_norm=tf.constant(10.0))
    np.testing.assert_allclose(clipped[0], [0.3, 0.4], rtol=1e-6) and float(norm) == 10.0
    clipped, norm = tf.clip_by_global_norm([None], 1.0)
    assert clipped == [None] and float(norm) == 0.0
    for bad in (np.inf, np.nan):
        clipped, _ = tf.clip_by_global_norm([tf.constant([bad, 4.0])], 1.0)
        assert np.isnan(clipped[0]).all()
    clipped, norm = tf.clip_by_global_norm([tf.constant([3.0, 4.0], tf.float16)], 1.0)
    assert clipped[0].dtype == np.float16 and norm.dtype == np.float16 and float(norm) == 5.0
    with pytest.raises(TypeError, match="`t_list` should be a sequence of tensors"):
        tf.clip_by_global_norm(v, 1.0)
    with pytest.raises(ValueError, match="different dtypes"):
        tf.clip_by_global_norm([v, tf.constant([1.0], tf.float16)], 1.0)


def test_clip_by_global_norm_in_a_custom_loop_inside_run_equals_one_device():
    keras = tf.keras
    x = np.linspace(-1, 1, 48, dtype=np.float32).reshape(16, 3)
    y = (x @ np.array([[2.0], [-1.0], [0.5]], np.float32)) * 10

    def make():
        return keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, kernel_initializer="zeros")])

    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = make()
        optimizer = keras.optimizers.SGD(0.1)
        optimizer.build(model.trainable_variables)
    norms = []

    @tf.function
    def train(batch_x, batch_y):
        def step(bx, by):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum((model(bx) - by) ** 2) / 16.0
            grads = tape.gradient(loss, model.trainable_variables)
            # TF's pattern for clipping the global gradient: sum over replicas, clip, apply without summing again.
            grads = tf.distribute.get_replica_context().all_reduce("SUM", grads)
            clipped, norm = tf.clip_by_global_norm(grads, 1.0)
            optimizer.apply_gradients(zip(clipped, model.trainable_variables), experimental_aggregate_gradients=False)
            return norm

        return strategy.run(step, args=(batch_x, batch_y))

    dist = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).batch(16))
    for bx, by in dist:
        norms.append(float(strategy.experimental_local_results(train(bx, by))[0]))

    single = make()
    with tf.GradientTape() as tape:  # the same step on one device, with the same clipping by hand
        loss = tf.reduce_sum((single(x) - y) ** 2) / 16.0
    grads = tape.gradient(loss, single.trainable_variables)
    global_norm = float(np.sqrt(sum(np.sum(np.square(g)) for g in grads)))
    assert norms == pytest.approx([global_norm], rel=1e-5) and global_norm > 1.0
    expected = [np.asarray(w) - 0.1 * np.asarray(g) / global_norm for w, g in zip(single.get_weights(), grads)]
    for got, want in zip(model.get_weights(), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# -------------------------------------------------------------------------------------- predicates, types
def test_tensor_isinstance_and_is_tensor():
    # TF 2.21: isinstance(constant, tf.Tensor) True; isinstance(tf.Variable(1.), tf.Tensor) False but
    # tf.is_tensor(variable) True; tf.is_tensor(1.) False. (TF says False for numpy arrays; jdist's host tensors
    # are numpy arrays, so they are tensors here.)
    assert isinstance(tf.constant(1.0), tf.Tensor) and isinstance(jnp.ones(2), tf.Tensor)
    assert isinstance(tf.reduce_sum(tf.constant([1, 2])), tf.Tensor)
    assert jax.jit(lambda x: jnp.asarray(isinstance(x, tf.Tensor)))(1.0)
    v = tf.Variable(1.0)
    assert not isinstance(v, tf.Tensor) and tf.is_tensor(v)
    assert not tf.is_tensor(1.0) and not tf.is_tensor([1.0]) and not isinstance("a", tf.Tensor)
    with pytest.raises(TypeError, match="tf.constant"):
        tf.Tensor([1.0])


def test_executing_eagerly_as_tf():
    # TF 2.21: True outside, False inside a tf.function, which returns it as a tensor (tf.Tensor(False)).
    assert tf.executing_eagerly() is True
    inside = tf.function(lambda: tf.executing_eagerly())()
    assert inside.numpy() is np.False_ and repr(inside) == "<tf.Tensor: shape=(), dtype=bool, numpy=False>"
    assert jax.jit(lambda x: x + (0 if tf.executing_eagerly() else 1))(1) == 2
    strategy = tf.distribute.MirroredStrategy()
    seen = []
    strategy.run(lambda: seen.append(tf.executing_eagerly()) or jnp.zeros(()))
    assert seen and set(seen) == {False}  # jdist compiles run (TF 2.21 says True for an eager MirroredStrategy.run)


def test_executing_eagerly_does_not_start_jax_before_the_cpu_is_split():
    # TF tutorials print tf.executing_eagerly() first; the CPU split that follows must still work.
    script = ("import jax, jdist.tf_compat as tf\n"
              "assert tf.executing_eagerly()\n"
              "cpu = tf.config.list_physical_devices('CPU')[0]\n"
              "tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 3)\n"
              "print(len(jax.devices()))\n")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == "3"


def test_logger_and_autograph_switches():
    # TF 2.21: get_logger() is the logging.Logger "tensorflow"; autograph.set_verbosity(3) -> None;
    # do_not_convert(f) is f-like, do_not_convert() is the decorator.
    assert tf.get_logger() is logging.getLogger("tensorflow")
    assert tf.autograph.set_verbosity(3) is None and tf.autograph.set_verbosity(0, alsologtostdout=True) is None

    @tf.autograph.experimental.do_not_convert
    def f(x):
        return x + 1

    # observed, TF 2.21: do_not_convert always wraps anew (do_not_convert()(f) is not f), the wrapper calls f
    assert f(2) == 3 and tf.autograph.experimental.do_not_convert()(f)(2) == 3
