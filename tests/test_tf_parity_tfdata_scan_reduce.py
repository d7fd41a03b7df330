"""`tf.random` ops in `Dataset.scan` and `Dataset.reduce` functions: the function traced once, its draws made per
element, as TF 2.21 makes them; and the static sources recording a `flat_map` function's dataset without `Dataset`
being patched.

Every expected value below was observed in TF 2.21 (tensorflow-cpu, Keras 3.15) with the same script under TF
(counters in the functions, two passes or two `reduce` calls).
The numbers are numpy's, not TF's: the tests compare which draws repeat, not their values.
"""
import numpy as np
import pytest
from tf_parity_common import counted, no_global_seed  # noqa: F401  (a fixture)

import jdist.tf_compat as tf
from jdist.tfdata import dataset_sources

D = tf.data.Dataset
pytestmark = pytest.mark.usefixtures("no_global_seed")


def _passes(ds, n=2):
    return [[tf.nest.map_structure(lambda a: np.asarray(a).tolist(), v) for v in ds.as_numpy_iterator()]
            for _ in range(n)]


def _uniform_scan(seed):
    return counted(lambda s, x: (s + tf.random.uniform([], seed=seed), s))


def test_scan_with_unseeded_draws_runs_once_and_draws_anew_each_pass():
    # observed in TF 2.21: counter 1 after making the dataset and after two passes; outputs [0, r1, r1+r2, ...],
    # new numbers each pass (jdist before: counter 9, a call per element and pass)
    f, calls = _uniform_scan(None)
    ds = D.range(4).scan(np.float32(0), f)
    assert calls[0] == 1
    first, second = _passes(ds)
    assert calls[0] == 1
    assert first[0] == second[0] == 0.0 and len(set(np.diff(first))) == 3
    assert first != second


def test_scan_with_seeded_draws_repeats_each_pass():
    # observed in TF 2.21: with seed=3 both passes give [0.0, 0.386929, 1.050274, 1.246025] (a different number
    # per element, the same ones every pass); counter 1 (jdist before: 9)
    f, calls = _uniform_scan(3)
    first, second = _passes(D.range(4).scan(np.float32(0), f))
    assert calls[0] == 1
    assert first == second and len(set(np.round(np.diff(first), 6))) == 3


def test_scan_outputs_of_int_and_normal_draws():
    # observed in TF 2.21: `(uniform([2], maxval=100, dtype=int64, seed=3), normal([], seed=3))` as the output:
    # int64 pairs in [0, 100) and float32 normals, the same in both passes when seeded, new ones unseeded
    for seed in (3, None):
        f, calls = counted(lambda s, x, seed=seed: (s + 1, (tf.random.uniform([2], maxval=100, dtype=tf.int64,
                                                                                seed=seed),
                                                             tf.random.normal([], seed=seed))))
        ds = D.range(3).scan(np.int64(0), f)
        # reading the spec takes no draw of a pass (jdist before: the first pass continued the spec's draws)
        assert ds.element_spec[0].dtype == tf.int64 and ds.element_spec[1].dtype == tf.float32
        first, second = _passes(ds)
        assert calls[0] == 1
        assert all(0 <= v < 100 for ints, _ in first for v in ints)
        assert (first == second) == (seed is not None)


def test_reduce_runs_once_per_call_and_seeded_draws_repeat_per_call():
    # observed in TF 2.21: a counter reads 2 after two `reduce` calls; with seed=3 both give 2.188195, unseeded
    # two different sums (jdist before: counter 10, and seeded sums that differed between calls)
    for seed in (3, None):
        g, calls = counted(lambda s, x, seed=seed: s + tf.random.uniform([], seed=seed))
        ds = D.range(4)
        sums = [float(ds.reduce(np.float32(0), g)) for _ in range(2)]
        assert calls[0] == 2
        assert (sums[0] == sums[1]) == (seed is not None)
        assert 0 < sums[0] < 4


def test_reduce_draws_per_element():
    # observed in TF 2.21: a state of the last 4 draws (`concat([s[1:], [uniform([], seed=3)]], 0)`) holds four
    # different numbers, the same four in a second `reduce`
    def last_draws(s, x):
        return tf.concat([s[1:], [tf.random.uniform([], seed=3)]], 0)
    got = [D.range(4).reduce(tf.zeros([4]), last_draws).numpy().tolist() for _ in range(2)]
    assert got[0] == got[1] and len(set(got[0])) == 4 and 0.0 not in got[0]


def test_global_seed_repeats_unseeded_draws():
    # observed in TF 2.21: after `tf.random.set_seed(5)` an unseeded scan repeats in both passes and two
    # `reduce` calls give the same sum (jdist before: reduce gave two different sums)
    tf.random.set_seed(5)
    try:
        first, second = _passes(D.range(4).scan(np.float32(0), lambda s, x: (s + tf.random.uniform([]), s)))
        sums = [float(D.range(4).reduce(np.float32(0), lambda s, x: s + tf.random.uniform([]))) for _ in range(2)]
    finally:
        tf.random.set_seed(None)
    assert first == second and len(set(np.diff(first))) == 3
    assert sums[0] == sums[1]


def test_sources_record_a_flat_map_function_without_patching_dataset():
    # observed in TF 2.21: a counter in a flat_map function reads 1 after two passes (the function recorded once);
    # here the sources consult `dataset_sources.recording`, and `Dataset` keeps its own static methods
    before = {name: D.__dict__[name] for name in ("from_tensors", "from_tensor_slices", "range", "zip")}
    f, calls = counted(lambda x: D.zip(D.range(2), D.from_tensors(x).repeat(2)))
    ds = D.range(3).flat_map(f)
    assert _passes(ds) == [[(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]] * 2
    assert calls[0] == 1
    assert {name: D.__dict__[name] for name in before} == before
    assert D.range.__func__ is dataset_sources.range if hasattr(D.range, "__func__") else \
        D.range is dataset_sources.range
    assert isinstance(D.range(3), D)  # the recorder is gone once the trace ends
    seen = []
    with dataset_sources.recording(lambda name, args, kwargs: seen.append((name, args)) or "planned"):
        assert D.range(2, 5) == "planned" and D.from_tensors(1) == "planned"
    assert seen == [("range", (2, 5)), ("from_tensors", (1,))]
    assert list(D.range(2, 5).as_numpy_iterator()) == [2, 3, 4]


def test_reading_a_scan_spec_takes_no_draw_of_its_input_pass():
    # observed in TF 2.21: `range(3).map(lambda x: uniform([], seed=1)).scan(0., add)` gives the same two passes
    # whether `element_spec` is read first or not (jdist before: reading it first took pass 0's draws, so the
    # first pass differed from the second)
    def made():
        return D.range(3).map(lambda x: tf.random.uniform([], seed=1)).scan(np.float32(0),
                                                                             lambda s, x: (s + x, s + x))
    read = made()
    assert read.element_spec.dtype == tf.float32
    first, second = _passes(read)
    assert first == second == _passes(made(), 1)[0]
