"""`tf.random.Generator` inside `strategy.run`, checkpoints and saved modules, as TF's guide "Random number
generation" (guide/random_numbers.ipynb) uses it.

TF 2.21 (tensorflow-cpu 2.21.0, 2 and 3 logical CPUs, the guide's cells; its numbers are its own Philox draws):
- a generator made outside the scope, used in `run`: replica 0 printed 0.43842274 and replica 1 1.6272374, the
  first two numbers the same generator gives on the host;
- made in the scope: PerReplica {0: -0.87930447, 1: 0.020661574}, then {0: -1.5822568, 1: 0.77539235};
  made inside the replica function from the same seed: {0: [-0.879, -1.582], 1: [0.0207, 0.775]}, the same
  two streams;
- a checkpoint written after the first draw and restored gives the second and third draws again; restored into a
  3-replica strategy, replicas 0 and 1 go on with their streams and replica 2 gets a new one;
- a saved `tf.Module` whose `tf.function` draws: the loaded module's state goes on from the saved one.
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402


def _values(per_replica):
    return [np.asarray(v) for v in per_replica.values]


@pytest.fixture(scope="module")
def two():
    return tf.distribute.MirroredStrategy(["cpu:0", "cpu:1"])


def test_a_generator_made_outside_the_scope_serves_the_replicas_in_turn(two):
    shared, host = tf.random.Generator.from_seed(7), tf.random.Generator.from_seed(7)
    with two.scope():
        out = two.run(lambda: shared.normal([3]))
    first, second = _values(out)
    np.testing.assert_array_equal(first, host.normal([3]))
    np.testing.assert_array_equal(second, host.normal([3]))
    np.testing.assert_array_equal(shared.state, host.state)  # moved on by the two draws
    np.testing.assert_array_equal(shared.normal([3]), host.normal([3]))  # and the host goes on from there


def test_a_generator_made_in_the_scope_gives_each_replica_its_own_stream(two):
    with two.scope():
        g = tf.random.Generator.from_seed(1)
        a = _values(two.run(lambda: g.normal([])))
        b = _values(two.run(lambda: g.normal([])))

        def made_inside():
            local = tf.random.Generator.from_seed(1)
            return tf.stack([local.normal([]), local.normal([])])

        inside = _values(two.run(made_inside))
    assert a[0] != a[1] and b[0] != b[1] and a[0] != b[0]
    np.testing.assert_array_equal(inside[0], [a[0], b[0]])  # TF: the same two streams
    np.testing.assert_array_equal(inside[1], [a[1], b[1]])
    np.testing.assert_array_equal(g.state, [2, 0, 1])  # one step of the counter per draw


def test_a_checkpoint_restores_the_streams_also_on_more_replicas(two, tmp_path):
    with two.scope():
        g = tf.random.Generator.from_seed(1)
        checkpoint = tf.train.Checkpoint(my_generator=g)
        two.run(lambda: g.normal([]))
        path = checkpoint.write(str(tmp_path / "ckpt"))
        after = [_values(two.run(lambda: g.normal([]))) for _ in range(2)]
        checkpoint.restore(path)
        again = [_values(two.run(lambda: g.normal([]))) for _ in range(2)]
    np.testing.assert_array_equal(again, after)
    three = tf.distribute.MirroredStrategy(["cpu:0", "cpu:1", "cpu:2"])
    with three.scope():
        g3 = tf.random.Generator.from_seed(1)
        tf.train.Checkpoint(my_generator=g3).restore(path)
        wider = [_values(three.run(lambda: g3.normal([]))) for _ in range(2)]
    for step in range(2):
        np.testing.assert_array_equal(wider[step][:2], after[step])
        assert wider[step][2] not in after[step]


def test_a_saved_module_goes_on_with_its_generators_stream(two, tmp_path):
    class Sampler(tf.Module):
        def __init__(self):
            super().__init__()
            self.g = tf.random.Generator.from_seed(0)

        @tf.function
        def __call__(self):
            return self.g.normal([])

        @tf.function
        def state(self):
            return self.g.state

    with two.scope():
        m = Sampler()
        two.run(m)
        m.state()  # traced before saving, as in the guide (TF saves the functions traced by then)
        assert len(m.variables) == 1  # TF: the generator's state variable
        tf.saved_model.save(m, str(tmp_path / "saved"))
    expected = tf.random.Generator.from_seed(0)
    expected.skip(1)
    np.testing.assert_array_equal(m.state(), expected.state)
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    np.testing.assert_array_equal(np.asarray(loaded.state()), [1, 0, 0])
    np.testing.assert_allclose(np.asarray(loaded()), expected.normal([]), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(loaded.state()), [2, 0, 0])


def test_a_generator_inside_a_jit_of_ones_own_names_the_way_forward():
    g = tf.random.Generator.from_seed(3)
    with pytest.raises(RuntimeError, match="make_seeds"):
        jax.jit(lambda x: x + g.normal([]))(1.0)
    seeds = g.make_seeds(2)  # TF's way: seeds drawn outside, the stateless ops inside
    draw = jax.jit(lambda s: tf.random.stateless_normal([2], seed=s))
    np.testing.assert_allclose(np.asarray(draw(seeds[:, 0])),
                               np.asarray(tf.random.stateless_normal([2], seed=seeds[:, 0])), rtol=1e-6)
