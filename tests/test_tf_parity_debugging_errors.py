"""Failed `tf.debugging` checks in compiled code raise TF's InvalidArgumentError from the call, with TF's message.

Observed in TF 2.21 (tensorflow-cpu, Keras 3.15), CPU split into 4 logical devices, MirroredStrategy over
"/cpu:0".."/cpu:3", x = tf.constant([1.0, 2.0]):
- `@tf.function`: `assert_equal(x, zeros_like(x), message="user eq msg")`, `check_numerics(x / 0 * 0, "user num
  msg")`, `tf.Assert(reduce_all(x < 0), [x])` and `assert_positive(x - 5, message="user pos msg")` each raise
  `tf.errors.InvalidArgumentError` from the call ("Graph execution error: ... assertion failed: [user eq msg]
  [Condition x == y did not hold element-wise:] ...", "... user num msg : Tensor had NaN values ...",
  "... assertion failed: [1 2] ...", "... [user pos msg.  ] [Condition x > 0 did not hold element-wise:] ...").
- `strategy.run` (eager): assert_equal -> "user eq msg\nCondition x == y did not hold.\n..."; check_numerics used
  or UNUSED -> "... user num msg : Tensor had NaN values [Op:CheckNumerics]"; tf.Assert -> "Expected
  'tf.Tensor(False, shape=(), dtype=bool)' to be true. Summarized data: 1.0"; unused `assert_less(v, 0.0,
  message="unused less msg")` -> "unused less msg\nCondition x < y did not hold.\n...". All InvalidArgumentError.
  Inside a tf.function the unused check_numerics raises InvalidArgumentError too.
- `Dataset.map`: assert_equal, check_numerics and tf.Assert failing on an element raise InvalidArgumentError
  when the element is read ("Error in user-defined function passed to MapDataset... map num msg : Tensor had NaN
  values").
- `tf.debugging.set_log_device_placement(True)` prints the placer's lines on stdout ("MatMul: (MatMul):
  /job:localhost/replica:0/task:0/device:CPU:0") and logs "Executing op MatMul in device ..." on stderr; jdist
  prints none (XLA places whole programs) and warns once instead.
"""
import importlib
import warnings
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import pytest

import jdist.tf_compat as tf
from jdist.strategy import host_checks

X = np.array([1.0, 2.0], np.float32)
ERR = tf.errors.InvalidArgumentError


def _eq(x):
    tf.debugging.assert_equal(x, tf.zeros_like(x), message="user eq msg")
    return x + 1


def _num_used(x):
    return tf.debugging.check_numerics(x / 0.0 * 0.0, "user num msg")


def _num_unused(x):
    tf.debugging.check_numerics(x / 0.0 * 0.0, "unused num msg")
    return x + 1


def _assert(x):
    tf.Assert(tf.reduce_all(x < 0), [x])
    return x


def _positive(x):
    tf.debugging.assert_positive(x - 5.0, message="user pos msg")
    return x


def _less_unused(x):
    tf.debugging.assert_less(x, 0.0, message="unused less msg")
    return x


CASES: list[tuple[Callable[..., Any], str]] = [
         (_eq, r"user eq msg\s*\nCondition x == y did not hold"), (_num_used, "user num msg : Tensor had NaN values"),
         (_num_unused, "unused num msg : Tensor had NaN values"), (_assert, "to be true. Summarized data: 1"),
         (_positive, r"user pos msg\.  \s*\nCondition x > 0 did not hold element-wise"),
         (_less_unused, r"unused less msg\nCondition x < y did not hold")]
IDS = [c[0].__name__ for c in CASES]


@pytest.fixture(scope="module")
def strategy():
    return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(4)])


@pytest.mark.parametrize("fn,text", CASES, ids=IDS)
def test_failed_check_in_tf_function_raises_invalid_argument(fn: Callable[..., Any], text: str):
    text = r"assertion failed: \[1 2\]" if fn is _assert else text  # tf.Assert's graph text (observed)
    with pytest.raises(ERR, match=text) as caught:
        tf.function(fn)(tf.constant(X))
    assert not isinstance(caught.value, jax.errors.JaxRuntimeError)
    jax.effects_barrier()  # the failure is not held for later barriers (a raise here fails the test)


@pytest.mark.parametrize("fn,text", CASES, ids=IDS)
def test_failed_check_in_strategy_run_raises_invalid_argument(strategy, fn, text):
    v = tf.constant(np.ones((1,), np.float32))
    with pytest.raises(ERR, match=text):  # used or not, from the call itself, as TF's eager strategy.run
        strategy.run(fn, args=(v,))
    jax.effects_barrier()


def test_unused_check_numerics_in_strategy_run_inside_tf_function_raises(strategy):
    v = tf.constant(np.ones((1,), np.float32))
    def outer():
        return strategy.run(_num_unused, args=(v,))

    with pytest.raises(ERR, match="unused num msg : Tensor had NaN values"):
        tf.function(outer)()
    jax.effects_barrier()


def test_passing_checks_in_strategy_run_return_the_values(strategy):
    def step(x):
        tf.debugging.check_numerics(x, "fine")
        tf.debugging.assert_less(x, 10.0)
        return tf.debugging.check_numerics(x * 2.0, "fine") + 1.0

    out = strategy.run(step, args=(tf.constant(X),))
    for replica in strategy.experimental_local_results(out):
        np.testing.assert_array_equal(np.asarray(replica), X * 2 + 1)  # the single-device computation


@pytest.mark.parametrize("fn,text", [(lambda e: _eq(e) - 1, "user eq msg"),
                                     (_num_used, "user num msg : Tensor had NaN values"),
                                     (_assert, "1")], ids=["assert_equal", "numerics",
                                                                                         "Assert"])
def test_failed_check_in_dataset_map_raises_invalid_argument(fn, text):
    # TF's text for tf.Assert here is "... assertion failed: [1] ..."; jdist's names the value 1 too
    ds = tf.data.Dataset.from_tensor_slices(X).map(fn)
    with pytest.raises(ERR, match=text):
        list(ds)


def test_failed_check_then_later_program_runs(strategy):
    with pytest.raises(ERR):
        tf.function(_num_unused)(tf.constant(X))
    np.testing.assert_array_equal(np.asarray(tf.function(lambda x: x * 3.0)(tf.constant(X))), X * 3)
    jax.effects_barrier()


def test_program_without_checks_is_not_wrapped():
    def program(x):
        return x

    assert host_checks.checked(program, host_checks.placed()) is program  # no wait added when no check traced


def test_log_device_placement_warns_once_and_keeps_the_setting(monkeypatch):
    debugging = importlib.import_module("jdist.tf_compat.debugging")  # the module, not the tf.debugging namespace
    monkeypatch.setattr(debugging, "_PLACEMENT_WARNED", [False])
    with pytest.warns(UserWarning, match="prints no placement lines"):
        tf.debugging.set_log_device_placement(True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tf.debugging.set_log_device_placement(True)  # once only
        assert tf.debugging.get_log_device_placement() is True
        tf.debugging.set_log_device_placement(False)
    assert tf.debugging.get_log_device_placement() is False


def test_scalar_assert_equal_lists_no_indices():
    # observed in TF 2.21: assert_equal(1.0, 0.0, message="m") -> "m\nCondition x == y did not hold.\nFirst 1
    # elements of x:\n[1.]\nFirst 1 elements of y:\n[0.]" (no "Indices of ..." for scalars)
    want = "m\nCondition x == y did not hold.\nFirst 1 elements of x:\n[1.]\nFirst 1 elements of y:\n[0.]"
    with pytest.raises(ERR) as caught:
        tf.debugging.assert_equal(tf.constant(1.0), tf.constant(0.0), message="m")
    assert caught.value.message == want
    ds = tf.data.Dataset.from_tensor_slices(X[:1]).map(lambda e: _eq(e) - 1)  # the same check on a map's scalar
    with pytest.raises(ERR) as caught:
        list(ds)
    assert "Indices" not in caught.value.message and "user eq msg\nCondition x == y did not hold." in \
        caught.value.message


@pytest.mark.parametrize("data,text", [
    ((1.5,), "[1.5]"), ((np.arange(1.0, 6.0, dtype=np.float32),), "[1 2 3...]"),
    ((np.array([[1, 2], [3, 4]], np.int32),), "[[1 2][3...]...]"),
    (("some text", np.array([0.1, 1e-10], np.float32)), "[some text] [0.1 1e-10]"),
    ((np.array([True, False]),), "[1 0]")], ids=["scalar", "vector", "matrix", "text", "bool"])
def test_assert_in_tf_function_has_tf_graph_text(data, text):
    # observed in TF 2.21: @tf.function f(c, *data): tf.Assert(c < 0, list(data)), called with c = 1.0
    @tf.function
    def f(c, *items):
        tf.Assert(c < 0, list(items))
        return c

    args = [tf.constant(d) if isinstance(d, (np.ndarray, float)) else d for d in data]
    with pytest.raises(ERR) as caught:
        f(tf.constant(1.0), *args)
    assert caught.value.message == f"assertion failed: {text}"
