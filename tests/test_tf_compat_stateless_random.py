"""The stateless ops give TF 2.21's numbers (tensorflow-cpu 2.21.0 on this machine, printed for the same calls):
TF's Philox words for the seed and its conversions to floats and integers (jdist/tf_compat/philox.py)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jdist.tf_compat as tf

# (op, arguments, TF's first three values, the float64 sum of TF's 1001 values)
TF_DRAWS = [
    ("normal", {"shape": [1001], "seed": [1, 2]}, [0.544110119342804, 0.20738030970096588, 0.0735643208026886],
     0.45625199005007744),
    ("normal", {"shape": [1001], "seed": [-5, 1234567], "mean": 2.0, "stddev": 0.5},
     [2.194793462753296, 1.7802690267562866, 1.9697240591049194], 1998.6930037736893),
    ("normal", {"shape": [1001], "seed": [7, 3], "dtype": "float64"},
     [-0.5516548281202598, 0.10186830828675075, 1.2145361516561692], 10.277197125094743),
    ("normal", {"shape": [1001], "seed": [7, 3], "dtype": "float16"},
     [0.11676025390625, -0.1519775390625, -0.79931640625], -5.827934265136719),
    ("uniform", {"shape": [1001], "seed": [1, 2]}, [0.8440604209899902, 0.19204533100128174, 0.9962232112884521],
     505.3044811487198),
    ("uniform", {"shape": [1001], "seed": [0, 0], "minval": -3.0, "maxval": 5.0},
     [-1.3118762969970703, 2.6480798721313477, 3.4005069732666016], 932.1119680404663),
    ("uniform", {"shape": [1001], "seed": [7, -3], "dtype": "float64"},
     [0.47713778180121613, 0.9809041063278245, 0.7182915943104444], 490.1500511002293),
    ("uniform", {"shape": [1001], "seed": [1, 2], "dtype": "float16"}, [0.54296875, 0.2353515625, 0.060546875],
     504.3095703125),
    ("uniform", {"shape": [1001], "seed": [5, 6], "minval": 2, "maxval": 4, "dtype": "bfloat16"}, [3.671875, 2.171875, 3.0],
     2990.296875),
    ("uniform", {"shape": [1001], "seed": [1, 2], "minval": 0, "maxval": 10, "dtype": "int32"}, [0, 9, 4], 4489.0),
    ("uniform", {"shape": [1001], "seed": [1, 2], "minval": -7, "maxval": 100000, "dtype": "int64"},
     [27238, 96155, 63536], 48817856.0),
    ("uniform", {"shape": [1001], "seed": [1, 2], "minval": None, "maxval": None, "dtype": "int64"},
     [7464880146280614444, 1591045637757961278, -1057468755545501549], 2.5976854003487687e+20),
]


def _draw(op, kwargs):
    fn = tf.random.stateless_normal if op == "normal" else tf.random.stateless_uniform
    return np.asarray(fn(**kwargs))


@pytest.mark.parametrize("op,kwargs,first,total", TF_DRAWS, ids=[f"{c[0]}-{i}" for i, c in enumerate(TF_DRAWS)])
def test_stateless_draws_are_tfs_bit_for_bit(op, kwargs, first, total):
    values = _draw(op, kwargs)
    assert values.dtype == tf.as_dtype(kwargs.get("dtype", "float32")) and values.shape == (1001,)
    wide = values.astype(np.float32).astype(np.float64) if values.dtype.itemsize == 2 else values  # bfloat16 too
    assert wide[:3].tolist() == first
    assert float(np.sum(wide.astype(np.float64))) == total


def test_tfs_documented_seeds_and_draws():
    """TF 2.21's split / fold_in examples (its docstrings, printed by TF on this machine too)."""
    seeds = tf.random.split([1, 2], num=3)
    assert seeds.numpy().tolist() == [[1105988140, 1738052849], [-335576002, 370444179], [10670227, -246211131]]
    assert tf.random.stateless_normal([3], seed=seeds[0, :]).numpy().tolist() == [
        -0.5983521342277527, -0.9578608274459839, 0.9002807140350342]
    replica = tf.random.experimental.stateless_fold_in([1, 2], 3)
    assert replica.numpy().tolist() == [1105988140, 3]
    assert tf.random.stateless_normal([3], seed=replica).numpy().tolist() == [
        0.031971946358680725, 0.8979765176773071, 0.13253039121627808]


def test_compiled_code_draws_the_same_words():
    """Inside compiled code, with the seed a traced value: the same words, so integers and uniforms are equal
    and normals within an ulp (XLA's log, sin and cos instead of the C library's)."""
    seed = jnp.asarray([3, -9], jnp.int32)

    @jax.jit
    def draws(s):
        return (tf.random.stateless_uniform([513], s), tf.random.stateless_normal([513], s),
                tf.random.stateless_uniform([513], s, minval=5, maxval=17, dtype=tf.int32),
                tf.random.split(s, 4))

    compiled = [np.asarray(x) for x in draws(seed)]
    host = [np.asarray(x) for x in (tf.random.stateless_uniform([513], [3, -9]), tf.random.stateless_normal(
        [513], [3, -9]), tf.random.stateless_uniform([513], [3, -9], minval=5, maxval=17, dtype=tf.int32),
        tf.random.split([3, -9], 4))]
    np.testing.assert_array_equal(compiled[0], host[0])
    np.testing.assert_allclose(compiled[1], host[1], rtol=0, atol=5e-7)  # a few ulps at most (measured 2.4e-7)
    np.testing.assert_array_equal(compiled[2], host[2])
    np.testing.assert_array_equal(compiled[3], host[3])
