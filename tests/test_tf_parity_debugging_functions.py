"""tf.debugging checks inside tf.function whose results are unused, and the `debug_stripper` optimizer option.

Observed in TF 2.21 (tensorflow-cpu, Keras 3.15), for `x = tf.constant([1.0, nan])`:
- `@tf.function def f(x): tf.debugging.check_numerics(x, 'bad'); return x` raises InvalidArgumentError
  "... bad : Tensor had NaN values [[{{node CheckNumerics}}]]"; `assert_all_finite(x, 'bad2')` likewise
  ("bad2 : Tensor had NaN values"); `assert_equal(x, x + 1.0)` and `assert_greater(x, 5.0)` with unused results
  raise InvalidArgumentError ("Condition x == y did not hold element-wise", "Condition x > y ...").
- With `tf.config.optimizer.set_experimental_options({'debug_stripper': True})` all four return [1, nan], and
  so does `return tf.debugging.check_numerics(x, 'bad')` (the used check is stripped too).
- Eager checks raise InvalidArgumentError whatever the option.
"""
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import pytest

import jdist.tf_compat as tf

BAD = np.array([1.0, np.nan], np.float32)
GOOD = np.array([1.0, 2.0], np.float32)


def _check_numerics_unused(x):
    tf.debugging.check_numerics(x, "bad")
    return x


def _assert_all_finite_unused(x):
    tf.debugging.assert_all_finite(x, "bad2")
    return x


def _assert_equal_unused(x):
    tf.debugging.assert_equal(x, x + 1.0, message="eq")
    return x


def _assert_greater_unused(x):
    tf.debugging.assert_greater(x, 5.0)
    return x


def _check_numerics_used(x):
    return tf.debugging.check_numerics(x, "bad")


CASES: list[tuple[Callable[..., Any], str]] = [(_check_numerics_unused, "bad : Tensor had NaN values"),
         (_assert_all_finite_unused, "bad2 : Tensor had NaN values"),
         (_assert_equal_unused, "Condition x == y did not hold"),
         (_assert_greater_unused, "Condition x > y did not hold"),
         (_check_numerics_used, "bad : Tensor had NaN values")]


@pytest.fixture
def stripper():
    tf.config.optimizer.set_experimental_options({"debug_stripper": True})
    yield
    tf.config.optimizer.set_experimental_options({"debug_stripper": None})


@pytest.mark.parametrize("fn,text", CASES, ids=[c[0].__name__ for c in CASES])
def test_traced_check_with_unused_result_fails_the_call(fn: Callable[..., Any], text: str):
    f = tf.function(fn)
    with pytest.raises(Exception, match=text):
        np.asarray(f(tf.constant(BAD)))
    jax.effects_barrier()


@pytest.mark.parametrize("fn", [c[0] for c in CASES], ids=[c[0].__name__ for c in CASES])
def test_debug_stripper_drops_traced_checks(stripper, fn: Callable[..., Any]):
    out = np.asarray(tf.function(fn)(tf.constant(BAD)))
    np.testing.assert_array_equal(out, BAD)


def test_check_numerics_passes_finite_values_inside_function():
    out = np.asarray(tf.function(_check_numerics_unused)(tf.constant(GOOD)))
    np.testing.assert_array_equal(out, GOOD)


@pytest.mark.parametrize("fn,text", CASES[2:4], ids=["assert_equal", "assert_greater"])
def test_later_effects_barrier_does_not_raise_again_after_a_failed_check(fn: Callable[..., Any], text: str):
    with pytest.raises(Exception, match=text):
        np.asarray(tf.function(fn)(tf.constant(BAD)))
    jax.effects_barrier()  # the unordered check leaves no error behind (a raise here fails the test)
    np.testing.assert_array_equal(np.asarray(tf.function(_check_numerics_unused)(tf.constant(GOOD))), GOOD)


def test_eager_checks_still_raise_with_debug_stripper(stripper):
    with pytest.raises(tf.errors.InvalidArgumentError, match="bad : Tensor had NaN values"):
        tf.debugging.check_numerics(tf.constant(BAD), "bad")
    with pytest.raises(tf.errors.InvalidArgumentError, match="Condition x > y did not hold"):
        tf.debugging.assert_greater(tf.constant(BAD), 5.0)
