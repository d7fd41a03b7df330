"""`jdist.data` (tf.data on grain) against what TensorFlow 2.21's `tf.data` was observed to do.

Every TF_* constant below was printed by tensorflow-cpu 2.21.0 (its Keras 3) running the
expression in its comment; jdist must give the same values. Shuffled orders come from a
different generator, so they are held to TF's rules (a permutation per pass, each output
drawn from the buffer window, reproducible by seed) instead of TF's exact order.
"""
from __future__ import annotations

import itertools
import os

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported

import numpy as np
import optax
import pytest
from test_checkpoint import (
    FEATURES,
    TRAIN_X,
    TRAIN_Y,
    Crash,
    CrashAtStep,
    assert_same_values,
    mlp_apply,
    mlp_params,
    two_device_mirrored,
)

import jdist
from jdist import data as tfd
from jdist.tfdata import HostTensor, TensorSpec

D = tfd.Dataset


def values(ds):
    return [jdist_to_list(e) for e in ds.as_numpy_iterator()]


def jdist_to_list(element):
    if isinstance(element, tuple):
        return tuple(jdist_to_list(e) for e in element)
    if isinstance(element, dict):
        return {k: jdist_to_list(v) for k, v in element.items()}
    return element.tolist() if hasattr(element, "tolist") else element


# ------------------------------------------------------------------ element structure
def test_strings_lists_tuples_and_dicts_as_tf_reads_them():
    # TF: list(from_tensor_slices(["a","c","e"]).as_numpy_iterator()) -> [b'a', b'c', b'e']
    assert values(D.from_tensor_slices(["a", "c", "e"])) == [b"a", b"c", b"e"]
    # TF: ...batch(2) -> [array([b'a', b'c'], dtype=object), array([b'e'], dtype=object)]
    batches = list(D.from_tensor_slices(["a", "c", "e"]).batch(2).as_numpy_iterator())
    assert [b.dtype for b in batches] == [np.dtype(object)] * 2 and [b.tolist() for b in batches] == [
        [b"a", b"c"], [b"e"]]
    # TF: a Python list is one tensor; ints int32, floats float32, numpy keeps float64.
    assert values(D.from_tensor_slices([1, 2, 3])) == [1, 2, 3]
    assert D.from_tensor_slices([1, 2, 3]).element_spec == TensorSpec((), np.int32)
    assert D.from_tensor_slices([1.0, 2.0]).element_spec == TensorSpec((), np.float32)
    assert D.from_tensor_slices(np.array([1.0, 2.0])).element_spec == TensorSpec((), np.float64)
    # TF: a tuple element is a tuple of (np.int64 scalar, ndarray); a dict element keeps its keys.
    first = next(D.from_tensor_slices((np.arange(3), np.ones((3, 2)))).as_numpy_iterator())
    assert type(first) is tuple and type(first[0]) is np.int64 and first[1].shape == (2,)
    assert next(D.from_tensor_slices({"b": np.arange(3), "a": np.ones(3)}).as_numpy_iterator()) == {"b": 0, "a": 1.0}
    # TF: from_tensors([1, 2]) -> [[1, 2]], TensorSpec(shape=(2,), dtype=tf.int32)
    assert values(D.from_tensors([1, 2])) == [[1, 2]]
    assert D.from_tensors([1, 2]).element_spec == TensorSpec((2,), np.int32)
    assert repr(D.from_tensors([1, 2]).element_spec) == "TensorSpec(shape=(2,), dtype=tf.int32, name=None)"


def test_from_generator_casts_to_its_types_as_tf():
    # TF: from_generator(..., output_types=(tf.float32), output_shapes=tf.TensorShape([4])) on float64 arrays
    #   -> TensorSpec(shape=(4,), dtype=tf.float32, name=None), elements float32
    ds = D.from_generator(lambda: iter([np.arange(4.0), np.ones(4)]), output_types=np.float32, output_shapes=[4])
    assert repr(ds.element_spec) == "TensorSpec(shape=(4,), dtype=tf.float32, name=None)"
    assert [x.dtype for x in ds.as_numpy_iterator()] == [np.float32] * 2
    # TF: output_types=(tf.int64, tf.float32) alone -> shapes <unknown>; [(np.int64(1), array([1.5, 2.5], float32))]
    pair = D.from_generator(lambda: iter([(1, [1.5, 2.5])]), output_types=(np.int64, np.float32))
    assert repr(pair.element_spec[0]) == "TensorSpec(shape=<unknown>, dtype=tf.int64, name=None)"
    (first, second), = pair.as_numpy_iterator()
    assert type(first) is np.int64 and second.dtype == np.float32 and second.tolist() == [1.5, 2.5]
    # TF: TensorSpec([2, None]) -> TensorSpec(shape=(2, None), dtype=tf.float32, name=None)
    assert repr(TensorSpec([2, None])) == "TensorSpec(shape=(2, None), dtype=tf.float32, name=None)"
    # A generator re-runs for each pass (TF calls it again per iteration).
    assert values(ds) == values(ds)


def test_iteration_gives_tensors_with_numpy():
    x, y = next(iter(D.from_tensor_slices((np.arange(3.0), np.arange(3)))))
    assert isinstance(x, HostTensor) and x.numpy() == 0.0 and type(y.numpy()) is np.int64
    assert int(D.range(7).cardinality().numpy()) == 7


def test_bad_sources_name_the_problem():
    with pytest.raises(ValueError, match="same size in dimension 0"):
        D.from_tensor_slices((np.zeros(3), np.zeros(4)))
    with pytest.raises(ValueError, match="from_tensors"):
        D.from_tensor_slices(np.float32(1.0))
    with pytest.raises(TypeError, match="output_signature"):
        D.from_generator(lambda: iter([1]))
    with pytest.raises(ValueError, match=r"where an element of shape \(3,\) was expected"):  # TF's InvalidArgumentError
        list(D.from_generator(lambda: iter([np.zeros(2)]), output_signature=TensorSpec((3,), np.float64)))
    # observed, TF 2.21: InvalidArgumentError "Cannot batch tensors with different shapes in component 0. First
    # element had shape [2] and element 1 had shape [3]."
    with pytest.raises(ValueError, match=r"Cannot batch tensors with different shapes in component 0\. First "
                                         r"element had shape \[2\] and element 1 had shape \[3\]"):
        list(D.from_generator(lambda: iter([np.zeros(2), np.zeros(3)]),
                              output_signature=TensorSpec((None,), np.float64)).batch(2))
    with pytest.raises(ValueError, match="must return a `tf.bool` scalar tensor"):
        list(D.range(3).filter(lambda x: np.array([True, False])))


# ------------------------------------------------------------------ transformations
TF_TRANSFORMS = {
    "range(5)": [0, 1, 2, 3, 4],
    "range(2,10,3)": [2, 5, 8],
    "range(10).batch(4)": [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]],
    "range(10).batch(4, drop_remainder=True)": [[0, 1, 2, 3], [4, 5, 6, 7]],
    "range(10).shard(3,0)": [0, 3, 6, 9],
    "range(10).shard(3,2)": [2, 5, 8],
    "range(10).batch(3).shard(2,1)": [[3, 4, 5], [9]],
    "range(5).repeat(2).batch(3)": [[0, 1, 2], [3, 4, 0], [1, 2, 3], [4]],
    "range(5).batch(3).repeat(2)": [[0, 1, 2], [3, 4], [0, 1, 2], [3, 4]],
    "range(5).take(-1)": [0, 1, 2, 3, 4],
    "range(5).skip(-1)": [],
    "range(5).skip(2).take(2)": [2, 3],
    "range(3).enumerate(5)": [(5, 0), (6, 1), (7, 2)],
    "zip(range(3), range(5,10))": [(0, 5), (1, 6), (2, 7)],
    "from_tensor_slices(arange(6).reshape(3,2)).unbatch()": [0, 1, 2, 3, 4, 5],
    "from_tensor_slices((arange(3), arange(3))).map(lambda x,y: x+y)": [0, 2, 4],
    "range(10).filter(lambda x: x%3==0)": [0, 3, 6, 9],
    "range(10).repeat().take(5)": [0, 1, 2, 3, 4],
    "from_generator(lambda: iter([1,2,3]), output_signature=int32 scalar)": [1, 2, 3],
    "range(4).filter(lambda x: x>0).repeat(2)": [1, 2, 3, 1, 2, 3],
}
# TF: int(ds.cardinality()) for each dataset of TF_CARDINALITY's keys.
TF_CARDINALITY = {
    "range(10)": 10, "range(10).batch(4)": 3, "range(10).batch(4,True)": 2, "range(10).repeat()": -1,
    "range(10).filter(lambda x: x>2)": -2, "range(10).repeat(3).batch(4)": 8, "range(10).shard(3,1)": 3,
    "range(10).take(3)": 3, "range(10).skip(20)": 0, "range(10).batch(3).unbatch()": -2,
    "range(10).repeat().take(5)": 5,
}


def _build(expr: str):
    """The dataset an expression of TF_TRANSFORMS / TF_CARDINALITY names, with tf.data's names bound to jdist's."""
    names = {"range": D.range, "zip": D.zip, "from_tensor_slices": D.from_tensor_slices,
             "from_generator": D.from_generator, "arange": np.arange, "np": np, "TensorSpec": TensorSpec}
    expr = expr.replace("output_signature=int32 scalar", "output_signature=TensorSpec((), np.int32)")
    return eval(expr, {"__builtins__": {"iter": iter}}, names)  # noqa: S307 (the keys above, nothing else)


@pytest.mark.parametrize("expr", sorted(TF_TRANSFORMS))
def test_transformations_match_tf(expr):
    assert values(_build(expr)) == TF_TRANSFORMS[expr]


@pytest.mark.parametrize("expr", sorted(TF_CARDINALITY))
def test_cardinality_matches_tf(expr):
    ds = _build(expr)
    assert int(ds.cardinality()) == TF_CARDINALITY[expr]
    if TF_CARDINALITY[expr] >= 0:
        assert len(ds) == TF_CARDINALITY[expr]


def test_len_errors_and_specs_match_tf():
    # TF: len(range(3).repeat()) -> TypeError "The dataset is infinite."; filter -> "... length is unknown."
    with pytest.raises(TypeError, match="The dataset is infinite."):
        len(D.range(3).repeat())
    with pytest.raises(TypeError, match="The dataset length is unknown."):
        len(D.range(3).filter(lambda x: True))
    # TF: (TensorSpec(shape=(None, 28, 28), float32), TensorSpec(shape=(None,), int64)) after batch(2)
    spec = D.from_tensor_slices((np.zeros((4, 28, 28), np.float32), np.zeros(4, np.int64))).batch(2).element_spec
    assert spec == (TensorSpec((None, 28, 28), np.float32), TensorSpec((None,), np.int64))
    assert D.range(10).batch(4, drop_remainder=True).element_spec == TensorSpec((4,), np.int64)
    mapped = D.range(10).batch(4).map(lambda x: (x * 2, np.float32(1.0)))
    assert mapped.element_spec == (TensorSpec((None,), np.int64), TensorSpec((), np.float32))
    # TF: tf.data.AUTOTUNE, INFINITE_CARDINALITY, UNKNOWN_CARDINALITY -> -1 -1 -2
    assert (tfd.AUTOTUNE, tfd.INFINITE_CARDINALITY, tfd.UNKNOWN_CARDINALITY) == (-1, -1, -2)
    assert repr(D.range(3)) == "<_RangeDataset element_spec=TensorSpec(shape=(), dtype=tf.int64, name=None)>"


def test_map_with_numpy_ops_and_parallel_calls_keeps_order():
    ds = D.from_tensor_slices((np.arange(20, dtype=np.uint8), np.arange(20))).map(
        lambda x, y: (x.astype(np.float32) / 255.0, y), num_parallel_calls=tfd.AUTOTUNE).batch(8)
    got = list(ds.as_numpy_iterator())
    np.testing.assert_array_equal(np.concatenate([b[1] for b in got]), np.arange(20))
    assert got[0][0].dtype == np.float32 and [len(b[1]) for b in got] == [8, 8, 4]


def test_map_functions_cannot_change_the_source_rows():
    """TF tensors are immutable: the Keras tutorial's `image /= 255` makes a new tensor in TF. On numpy rows it
    would divide the dataset's own array again every epoch; here it is out of place, and item assignment fails."""
    images = np.arange(6, dtype=np.float32).reshape(3, 2)

    def scale(image, label):
        image /= 2
        return image, label

    ds = D.from_tensor_slices((images, np.arange(3))).map(scale)
    first, second = values(ds), values(ds)
    assert first == second and first[0] == ([0.0, 0.5], 0)
    np.testing.assert_array_equal(images, np.arange(6, dtype=np.float32).reshape(3, 2))
    assert images.flags.writeable  # the caller's array is left as it was

    def assign(image, label):
        image[0] = 7.0
        return image, label

    # TF 2.21 (observed): TypeError "'SymbolicTensor' object does not support item assignment"
    with pytest.raises(TypeError, match="does not support item assignment"):
        values(D.from_tensor_slices((images, np.arange(3))).map(assign))


def test_cache_freezes_the_first_pass():
    ds = D.range(20).shuffle(20, seed=3).cache()
    first, second = values(ds), values(ds)
    assert first == second and sorted(first) == list(range(20))


def test_options_are_tfs():
    options = tfd.Options()
    options.experimental_distribute.auto_shard_policy = tfd.experimental.AutoShardPolicy.OFF
    ds = D.range(3).with_options(options)
    # TF: ds.with_options(opts).options().experimental_distribute.auto_shard_policy -> -1 (OFF)
    assert int(ds.options().experimental_distribute.auto_shard_policy) == -1
    assert values(ds) == [0, 1, 2]
    with pytest.raises(AttributeError, match="Cannot set the property"):
        options.no_such_option = 1


# ------------------------------------------------------------------ shuffle
def test_shuffle_is_tfs_window_and_reshuffles_per_pass():
    n, buffer = 40, 5
    ds = D.range(n).shuffle(buffer, seed=7)
    passes = [values(ds) for _ in range(3)]
    for order in passes:
        assert sorted(order) == list(range(n))
        # TF's buffer: output k is one of the first k + buffer inputs, and the buffer holds the rest.
        assert all(value < k + buffer for k, value in enumerate(order))
    assert passes[0] != passes[1] != passes[2]
    assert values(D.range(n).shuffle(buffer, seed=7)) == passes[0]  # reproducible by seed
    # A stream (no random access after filter) is shuffled by the same buffer, element by element.
    assert values(D.range(n).filter(lambda x: x >= 0).shuffle(buffer, seed=7)) == passes[0]
    fixed = D.range(n).shuffle(buffer, seed=7, reshuffle_each_iteration=False)
    assert values(fixed) == values(fixed)
    # repeat after shuffle reshuffles each repetition (TF: [0, 3, 2, 1, 1, 2, 3, 0] for range(4), seed 2)
    twice = values(D.range(4).shuffle(4, seed=2).repeat(2))
    assert sorted(twice[:4]) == sorted(twice[4:]) == [0, 1, 2, 3]


def test_full_buffer_shuffle_of_a_small_repeated_dataset():
    """A buffer holding every element is a uniform permutation per pass; `repeat()` draws a new one each
    repetition (TF's guide multi_worker_cpu_gpu_training: 3 rows, `.shuffle(10).repeat().batch(64)`)."""
    def first_batches():
        ds = D.range(3).shuffle(10, seed=5).repeat().batch(64)
        return [b.tolist() for b in itertools.islice(ds.as_numpy_iterator(), 4)]

    batches = first_batches()
    rows = [v for b in batches for v in b]
    assert [len(b) for b in batches] == [64] * 4
    passes = [tuple(rows[i:i + 3]) for i in range(0, 255, 3)]
    assert all(sorted(p) == [0, 1, 2] for p in passes)
    assert len(set(passes)) == 6  # every order of 3 appears among 85 passes
    assert first_batches() == batches  # reproducible by seed
    counts = np.zeros(4, int)
    for seed in range(400):
        counts[next(D.range(4).shuffle(4, seed=seed).as_numpy_iterator())] += 1
    assert np.all(np.abs(counts - 100) < 35), counts


def test_shuffle_window_statistics():
    """With buffer b, the first output is uniform over the first b inputs (TF's algorithm)."""
    counts = np.zeros(10, int)
    for seed in range(600):
        counts[next(D.range(10).shuffle(3, seed=seed).as_numpy_iterator())] += 1
    assert counts[3:].sum() == 0
    assert np.all(np.abs(counts[:3] - 200) < 60), counts


# ------------------------------------------------------------------ distributed
# TF: local results per element of experimental_distribute_dataset(
#   Dataset.range(10).map(lambda x: (tf.cast(x, tf.float32) * 2.0, x % 3)).batch(4)) on N logical CPUs
TF_DISTRIBUTED = {
    2: [[[[0.0, 2.0], [4.0, 6.0]], [[0, 1], [2, 0]]], [[[8.0, 10.0], [12.0, 14.0]], [[1, 2], [0, 1]]],
        [[[16.0], [18.0]], [[2], [0]]]],
    8: [[[[0.0], [2.0], [4.0], [6.0], [], [], [], []], [[0], [1], [2], [0], [], [], [], []]],
        [[[8.0], [10.0], [12.0], [14.0], [], [], [], []], [[1], [2], [0], [1], [], [], [], []]],
        [[[16.0], [18.0], [], [], [], [], [], []], [[2], [0], [], [], [], [], [], []]]],
}


@pytest.mark.parametrize("replicas", [2, 8])
def test_distributed_elements_match_tf(replicas):
    import jax
    strategy = jdist.MirroredStrategy(jax.devices()[:replicas])
    ds = D.range(10).map(lambda x: (np.float32(x) * np.float32(2.0), x % 3)).batch(4)
    got = []
    for batch in strategy.experimental_distribute_dataset(ds):
        got.append([[np.asarray(t).tolist() for t in strategy.experimental_local_results(c)] for c in batch.value])
    assert got == TF_DISTRIBUTED[replicas]
    unpacked = []  # TF's `for x, y in dist_dataset`, each through run
    for x, y in strategy.experimental_distribute_dataset(ds):
        out = strategy.run(lambda a, b: (a, b), args=(x, y))
        unpacked.append([[np.asarray(t).tolist() for t in strategy.experimental_local_results(c)] for c in out])
    assert unpacked == TF_DISTRIBUTED[replicas]


def test_distributed_dataset_spec_optional_and_datasets_from_function():
    import jax
    strategy = jdist.MirroredStrategy(jax.devices()[:2])
    ds = D.from_tensor_slices((np.arange(10, dtype=np.float32).reshape(10, 1), np.arange(10))).batch(4)
    dist = strategy.experimental_distribute_dataset(ds)
    # TF 2 replicas: (PerReplicaSpec(TensorSpec(shape=(None, 1), dtype=tf.float32, name=None), <same>), ...)
    assert repr(dist.element_spec[0]) == ("PerReplicaSpec(TensorSpec(shape=(None, 1), dtype=tf.float32, name=None), "
                                          "TensorSpec(shape=(None, 1), dtype=tf.float32, name=None))")
    iterator = iter(dist)
    # TF: get_next_as_optional has a value 3 times, then has_value() is False.
    assert [iterator.get_next_as_optional().has_value() for _ in range(4)] == [True, True, True, False]
    one = jdist.MirroredStrategy(jax.devices()[:1])
    assert one.experimental_distribute_dataset(ds).element_spec[1] == TensorSpec((None,), np.int64)

    def dataset_fn(ctx):
        return D.range(12).shard(ctx.num_input_pipelines, ctx.input_pipeline_id).batch(
            ctx.get_per_replica_batch_size(6))
    # TF 2 replicas: [[[0, 1, 2], [3, 4, 5]], [[6, 7, 8], [9, 10, 11]]]
    got = [[np.asarray(t).tolist() for t in strategy.experimental_local_results(b.value)]
           for b in strategy.distribute_datasets_from_function(dataset_fn)]
    assert got == [[[0, 1, 2], [3, 4, 5]], [[6, 7, 8], [9, 10, 11]]]


def test_distributed_dataset_cardinality_reduce_and_next_as_tf():
    """TF 2.21 (observed, MirroredStrategy on 2 logical CPUs): `experimental_distribute_dataset(range(10).batch(4))`
    has `cardinality` 3 (a property) and `reduce(0, lambda s, x: s + strategy.reduce(SUM, x, axis=0))` 45,
    counting gives an int32 3; `distribute_datasets_from_function` of `range(10).batch(2)` has `cardinality` 5 (the
    per-worker dataset's) and its reduce counts 3 global batches; `iterator.next()` is `get_next()`;
    `run(..., options=tf.distribute.RunOptions())` runs as without."""
    import jax
    import jax.numpy as jnp
    strategy = jdist.MirroredStrategy(jax.devices()[:2])
    dist = strategy.experimental_distribute_dataset(D.range(10).batch(4))
    assert dist.cardinality == 3
    total = dist.reduce(np.int64(0), lambda state, x: state + strategy.reduce("sum", x, axis=0))
    assert int(total) == sum(range(10))
    count = dist.reduce(0, lambda state, x: state + 1)
    assert int(count) == 3 and count.dtype == jnp.int32
    assert strategy.experimental_distribute_dataset(D.range(10).batch(4).repeat()).cardinality == -1
    per_worker = strategy.distribute_datasets_from_function(lambda ctx: D.range(10).batch(2))
    assert per_worker.cardinality == 5 and int(per_worker.reduce(0, lambda state, x: state + 1)) == 3
    iterator = iter(dist)
    first = iterator.next()
    assert [np.asarray(t).tolist() for t in strategy.experimental_local_results(first)] == [[0, 1], [2, 3]]
    doubled = strategy.run(lambda x: x * 2, args=(iterator.next(),), options=jdist.RunOptions())
    assert [np.asarray(t).tolist() for t in strategy.experimental_local_results(doubled)] == [[8, 10], [12, 14]]
    with pytest.raises(TypeError, match="RunOptions"):
        strategy.run(lambda: 1.0, options={"experimental_enable_dynamic_batch_size": False})


def test_distributed_iterator_resumes_inside_a_windowed_shuffle():
    import jax
    strategy = jdist.MirroredStrategy(jax.devices()[:2])

    def pipeline():
        return D.range(50).map(lambda x: x * 10).shuffle(7, seed=1).batch(6)

    def read(it, k):
        return [np.asarray(strategy.gather(next(it).value, axis=0)).tolist() for _ in range(k)]

    dist = strategy.experimental_distribute_dataset(pipeline())
    first_epoch = iter(dist)
    head = read(first_epoch, 3)
    state = first_epoch.get_state()
    rest = [np.asarray(strategy.gather(b.value, axis=0)).tolist() for b in first_epoch]
    next_epoch = [np.asarray(strategy.gather(b.value, axis=0)).tolist() for b in dist]
    # As in a new process: a new pipeline, a new distributed dataset, the saved position.
    resumed_dist = strategy.experimental_distribute_dataset(pipeline())
    resumed = iter(resumed_dist)
    resumed.set_state(state)
    assert [np.asarray(strategy.gather(b.value, axis=0)).tolist() for b in resumed] == rest
    assert [np.asarray(strategy.gather(b.value, axis=0)).tolist() for b in resumed_dist] == next_epoch
    assert sorted(sum(head + rest, [])) == list(range(0, 500, 10)) and next_epoch != head + rest


# ------------------------------------------------------------------ training
X, Y = TRAIN_X, TRAIN_Y


def _trainer():
    return jdist.Trainer(mlp_apply, optax.sgd(0.1, momentum=0.9), params=mlp_params(), strategy=two_device_mirrored())


def _pipeline():
    return D.from_tensor_slices((X, Y)).map(lambda x, y: (x * np.float32(2.0), y)).shuffle(16, seed=4).batch(8)


def test_trainer_fit_takes_a_pipeline_and_matches_arrays():
    plain = D.from_tensor_slices((X, Y)).batch(8)
    on_dataset, on_arrays = _trainer(), _trainer()
    on_dataset.fit(plain, epochs=2, verbose=0)
    on_arrays.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    assert_same_values(on_dataset.state.params, on_arrays.state.params)


def test_backup_and_restore_resumes_a_shuffled_pipeline_exactly(tmp_path):
    reference = _trainer()
    reference.fit(_pipeline(), epochs=3, verbose=0)
    backup = tmp_path / "backup"
    with pytest.raises(Crash):
        _trainer().fit(_pipeline(), epochs=3, verbose=0,
                       callbacks=[jdist.callbacks.BackupAndRestore(backup, save_freq=3), CrashAtStep(8)])
    resumed = _trainer()
    resumed.fit(_pipeline(), epochs=3, verbose=0, callbacks=[jdist.callbacks.BackupAndRestore(backup, save_freq=3)])
    assert resumed.step == reference.step == 15
    assert_same_values(resumed.state, reference.state)


def test_keras_fit_evaluate_predict_take_a_dataset():
    import jax
    import keras
    assert keras.backend.backend() == "jax", "the suite runs Keras on JAX (KERAS_BACKEND=jax)"
    strategy = jdist.MirroredStrategy(jax.devices()[:2])

    def compiled():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.layers.Input((FEATURES,)), keras.layers.Dense(8, activation="relu"),
                                  keras.layers.Dense(8)])
        model.compile(optimizer=keras.optimizers.SGD(0.1),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
        return model

    with strategy.scope():
        on_dataset, on_arrays = compiled(), compiled()
        got = on_dataset.fit(D.from_tensor_slices((X, Y)).batch(8), epochs=2, verbose=0).history
        want = on_arrays.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
        np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-6)
        np.testing.assert_allclose(on_dataset.evaluate(D.from_tensor_slices((X, Y)).batch(8), verbose=0),
                                   on_arrays.evaluate(X, Y, batch_size=8, verbose=0), rtol=1e-6)
        np.testing.assert_allclose(on_dataset.predict(D.from_tensor_slices(X).batch(8), verbose=0),
                                   on_arrays.predict(X, batch_size=8, verbose=0), rtol=1e-6)
