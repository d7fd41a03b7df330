"""jdist.tf_compat's tf.random.Generator and stateless seed ops against TF 2.21 (tensorflow-cpu 2.21.0): TF's
numbers cannot be reproduced bit for bit, so what is checked is what TF 2.21 showed (observed with
`/work/tfvenv/bin/python`, e.g. `g = tf.random.Generator.from_seed(1); g.uniform([5], 0, 10, dtype=tf.int32)`):
shapes, dtypes, ranges, errors, determinism by seed, and independence of split generators and seeds."""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

# (case, draw from a generator, TF 2.21's dtype, TF 2.21's shape, range check). Observed: normal / uniform /
# truncated_normal are float32 by default; uniform with an int dtype is in [minval, maxval); uniform_full_int is
# uint64 by default; make_seeds is int64 [2, count]; binomial int32.
DRAWS = [
    ("normal", lambda g: g.normal([3, 4]), "float32", (3, 4), lambda v: np.all(np.isfinite(v))),
    ("normal float64", lambda g: g.normal([5], mean=2.0, stddev=0.5, dtype=tf.float64), "float64", (5,),
     lambda v: np.all(np.abs(v - 2) < 4)),
    ("uniform", lambda g: g.uniform([1000]), "float32", (1000,), lambda v: v.min() >= 0 and v.max() < 1),
    ("uniform bounds float64", lambda g: g.uniform([1000], 2, 4, dtype=tf.float64), "float64", (1000,),
     lambda v: v.min() >= 2 and v.max() < 4),
    ("uniform int32", lambda g: g.uniform([1000], minval=0, maxval=10, dtype=tf.int32), "int32", (1000,),
     lambda v: set(v.tolist()) == set(range(10))),
    ("uniform int64", lambda g: g.uniform([1000], minval=-3, maxval=3, dtype=tf.int64), "int64", (1000,),
     lambda v: set(v.tolist()) == set(range(-3, 3))),
    ("truncated_normal", lambda g: g.truncated_normal([2000]), "float32", (2000,),
     lambda v: np.abs(v).max() <= 2 and abs(np.std(v) - 0.88) < 0.05),
    ("uniform_full_int", lambda g: g.uniform_full_int([4]), "uint64", (4,), lambda v: True),
    ("uniform_full_int int64", lambda g: g.uniform_full_int([500], tf.int64), "int64", (500,),
     lambda v: v.min() < -2**60 and v.max() > 2**60),
    ("binomial", lambda g: g.binomial([500], counts=10.0, probs=0.5), "int32", (500,),
     lambda v: v.min() >= 0 and v.max() <= 10 and abs(v.mean() - 5) < 0.4),
    ("make_seeds", lambda g: g.make_seeds(), "int64", (2, 1), lambda v: True),
    ("make_seeds 3", lambda g: g.make_seeds(3), "int64", (2, 3), lambda v: len(set(v[0].tolist())) == 3),
]


@pytest.mark.parametrize("draw,dtype,shape,check", [c[1:] for c in DRAWS], ids=[c[0] for c in DRAWS])
def test_draws_have_tfs_dtype_shape_and_range_and_repeat_by_seed(draw, dtype, shape, check):
    g = tf.random.Generator.from_seed(1)
    first, second = draw(g), draw(g)
    assert isinstance(first, np.ndarray) and first.dtype == np.dtype(dtype) and first.shape == shape
    assert check(first.numpy())  # a TF script's numpy methods are on .numpy() (observed, TF 2.21)
    assert not np.array_equal(first, second)  # the state moved on (TF 2.21: state [1, 0, 0] -> [1537, 0, 0])
    again = tf.random.Generator.from_seed(1)  # TF 2.21: two generators from seed 1 draw the same numbers
    np.testing.assert_array_equal(draw(again), first)
    np.testing.assert_array_equal(draw(again), second)
    assert not np.array_equal(draw(tf.random.Generator.from_seed(2)), first)


def test_normal_and_uniform_have_the_right_moments():
    g = tf.random.Generator.from_seed(7)
    n = g.normal([20000], mean=1.0, stddev=2.0)
    assert abs(n.numpy().mean() - 1.0) < 0.05 and abs(n.numpy().std() - 2.0) < 0.05
    u = g.uniform([20000], 2.0, 4.0)
    assert abs(u.numpy().mean() - 3.0) < 0.02


def test_state_copy_reset_and_skip():
    g = tf.random.Generator.from_seed(3)
    assert g.state.dtype == np.int64 and g.state.shape == (3,)  # TF 2.21: int64 [3] (Philox)
    assert g.algorithm == 1  # TF 2.21: from_seed's algorithm is 1 (philox)
    first = g.normal([4])
    copy = tf.random.Generator(copy_from=g)  # TF 2.21: a copy draws what the original draws next
    np.testing.assert_array_equal(copy.normal([2]), g.normal([2]))
    g.reset_from_seed(3)  # TF 2.21: reset_from_seed(3) then draws as from_seed(3)
    np.testing.assert_array_equal(g.normal([4]), first)
    state = np.array(g.state)
    ahead = g.normal([4])
    g.reset(state)
    np.testing.assert_array_equal(g.normal([4]), ahead)
    g.reset(state)
    g.skip(10)
    assert not np.array_equal(g.normal([4]), ahead)
    restored = tf.random.Generator.from_state(state, alg="philox")
    np.testing.assert_array_equal(restored.normal([4]), ahead)


def test_split_generators_are_repeatable_and_independent():
    # TF 2.21: from_seed(3).split(2) gives two generators drawing different numbers, the same in every run.
    children = tf.random.Generator.from_seed(3).split(2)
    assert isinstance(children, list) and len(children) == 2
    assert all(isinstance(c, tf.random.Generator) for c in children)
    again = tf.random.Generator.from_seed(3).split(2)
    draws = [c.normal([5000]) for c in children]
    for child, draw in zip(again, draws):
        np.testing.assert_array_equal(child.normal([5000]), draw)
    assert abs(np.corrcoef(draws[0], draws[1])[0, 1]) < 0.05
    assert len(tf.random.Generator.from_seed(3).split()) == 1
    parent = tf.random.Generator.from_seed(3)
    parent.split(2)
    assert abs(np.corrcoef(parent.normal([5000]), draws[0])[0, 1]) < 0.05


def test_global_generator_and_non_deterministic_state():
    # TF 2.21: get_global_generator() draws different numbers in each run, even after tf.random.set_seed(5).
    g = tf.random.get_global_generator()
    assert g is tf.random.get_global_generator() and g is tf.random.experimental.get_global_generator()
    a, b = tf.random.Generator.from_non_deterministic_state(), tf.random.Generator.from_non_deterministic_state()
    assert not np.array_equal(a.normal([4]), b.normal([4]))
    mine = tf.random.Generator.from_seed(9)
    tf.random.set_global_generator(mine)
    try:
        assert tf.random.get_global_generator() is mine
    finally:
        tf.random.set_global_generator(g)


# TF 2.21's errors for the same calls (type: message start).
ERRORS = [
    # ValueError: For integer dtype <dtype: 'int32'>, minval and maxval must be both `None` or both non-`None`
    ("int without maxval", lambda g: g.uniform([2], dtype=tf.int32), ValueError, "both `None` or both non-`None`"),
    # TypeError: Cannot convert 0.5 to EagerTensor of dtype int32
    ("int with float bounds", lambda g: g.uniform([2], minval=0.5, maxval=3, dtype=tf.int32), TypeError, "0.5"),
    # TypeError: Cannot convert 0.0 to EagerTensor of dtype int32
    ("normal of ints", lambda g: g.normal([2], dtype=tf.int32), TypeError, "Cannot convert 0.0"),
    # ValueError: Argument `alg` got unsupported value bad. Supported values are philox ...
    ("unknown alg", lambda g: tf.random.Generator.from_seed(1, alg="bad"), ValueError, "unsupported value bad"),
    # InvalidArgumentError: seed must have shape [2], not [3]
    ("split seed of 3", lambda g: tf.random.experimental.stateless_split([1, 2, 3]), ValueError, r"shape \[2\]"),
    # jdist's own limit: a host draw inside compiled code would be frozen into the program
    ("normal compiled", lambda g: jax.jit(lambda x: x + g.normal([2]))(jnp.zeros(2)), RuntimeError, "make_seeds"),
]


@pytest.mark.parametrize("call,error,match", [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_bad_input_raises_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call(tf.random.Generator.from_seed(1))


SEEDS = [
    # (case, seed, TF 2.21's dtype of split's seeds): int32 for a Python list or an int32 array, int64 for int64
    ("list", [1, 2], "int32"),
    ("int32", np.array([1, 2], np.int32), "int32"),
    ("int64", np.array([1, 2], np.int64), "int64"),
]


@pytest.mark.parametrize("seed,dtype", [c[1:] for c in SEEDS], ids=[c[0] for c in SEEDS])
def test_stateless_split_and_fold_in(seed, dtype):
    split = tf.random.experimental.stateless_split(seed)
    assert split.shape == (2, 2) and split.dtype == np.dtype(dtype)  # TF 2.21: [2, 2] by default, [3, 2] for num=3
    np.testing.assert_array_equal(split, tf.random.experimental.stateless_split(seed))
    three = tf.random.experimental.stateless_split(seed, num=3)
    assert three.shape == (3, 2) and len({tuple(r) for r in three.numpy().tolist()}) == 3
    folded = tf.random.experimental.stateless_fold_in(seed, 5)
    assert folded.shape == (2,) and folded.dtype == np.int32  # TF 2.21: int32 for int32 and int64 seeds
    np.testing.assert_array_equal(folded, tf.random.experimental.stateless_fold_in(seed, 5))
    assert not np.array_equal(folded, tf.random.experimental.stateless_fold_in(seed, 6))
    # new seeds draw independent numbers from each other and from the seed they came from
    draws = [tf.random.stateless_normal([4000], s) for s in (seed, *split, folded)]
    for i in range(len(draws)):
        for j in range(i):
            assert abs(np.corrcoef(draws[i], draws[j])[0, 1]) < 0.06
    # TF 2.21's own seeds (observed): split of [1, 2] (int32 and int64), fold_in of 5
    assert three.numpy().tolist() == TF_SPLIT_1_2[dtype] and folded.numpy().tolist() == [1105988140, 5]
    # under jax.jit on a JAX seed: the same seeds; an int64 seed is int32 there (JAX holds 32 bits without
    # jax_enable_x64), so its seeds are the int32 seed's
    compiled = jax.jit(lambda s: (tf.random.experimental.stateless_split(s, 3),
                                  tf.random.experimental.stateless_fold_in(s, 5)))(jnp.asarray(seed))
    assert np.asarray(compiled[0]).tolist() == TF_SPLIT_1_2["int32"]
    np.testing.assert_array_equal(np.asarray(compiled[1]), folded)


# TF 2.21, tf.random.split([1, 2], num=3) for an int32 and an int64 seed (observed).
TF_SPLIT_1_2 = {
    "int32": [[1105988140, 1738052849], [-335576002, 370444179], [10670227, -246211131]],
    "int64": [[7464880146280614444, 1591045637757961278], [-1057468755545501549, 2524363516007002203],
              [6884554327646026923, -2336856294065325742]],
}


def test_namespaces_hold_tfs_names():
    # TF 2.21: tf.random.split / fold_in are tf.random.experimental.stateless_split / stateless_fold_in.
    assert tf.random.split is tf.random.experimental.stateless_split
    assert tf.random.fold_in is tf.random.experimental.stateless_fold_in
    assert tf.random.experimental.Generator is tf.random.Generator
    for name in ("get_global_generator", "set_global_generator"):
        assert getattr(tf.random, name) is getattr(tf.random.experimental, name)


def test_generator_in_a_dataset_map_and_seeds_into_strategy_run():
    # A generator draws in a map function, on the host: its own stream, repeatable by seed.
    def augmented(seed):
        g = tf.random.Generator.from_seed(seed)
        ds = tf.data.Dataset.from_tensor_slices(np.zeros((6, 3), np.float32)).map(lambda x: x + g.normal([3]))
        return np.stack(list(ds.as_numpy_iterator()))

    first = augmented(4)
    np.testing.assert_array_equal(first, augmented(4))
    assert len({r.tobytes() for r in first}) == 6
    # TF's pattern for compiled steps: seeds drawn outside, the stateless ops inside; each replica folds in its id
    strategy = tf.distribute.MirroredStrategy()
    seed = tf.random.Generator.from_seed(5).make_seeds(1)[:, 0]

    def step(s):
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        return tf.random.stateless_uniform([4], tf.random.experimental.stateless_fold_in(s, replica))

    values = [np.asarray(v) for v in strategy.experimental_local_results(strategy.run(step, args=(jnp.asarray(seed),)))]
    assert len(values) == 8 and len({v.tobytes() for v in values}) == 8
    for i, v in enumerate(values):
        np.testing.assert_allclose(v, tf.random.stateless_uniform([4], tf.random.experimental.stateless_fold_in(
            np.asarray(seed, np.int32), i)), rtol=1e-6)
