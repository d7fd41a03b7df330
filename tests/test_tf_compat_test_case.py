"""`tf.test.TestCase` as TF 2.21's (observed with tensorflow-cpu 2.21.0: each case below ran on TF's own
TestCase; the outcome and the message's key phrase are recorded here)."""
from __future__ import annotations

import os
import random
import unittest

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402


class _Case(tf.test.TestCase):
    def runTest(self) -> None:  # one instance serves every check
        pass


@pytest.fixture
def case():
    instance = _Case()
    instance.setUp()
    return instance


# (name, check, None when TF passed it, else a phrase of TF's AssertionError)
OBSERVED = [
    ("close within 1e-6", lambda t: t.assertAllClose([1.0], [1.0 + 1e-6]), None),
    ("close 2e-6 (atol + rtol)", lambda t: t.assertAllClose([1.0], [1.0 + 2e-6]), None),
    ("close 1e-5 off", lambda t: t.assertAllClose([1.0], [1.0 + 1e-5]), "Not equal to tolerance rtol=1e-06, atol=1e-06"),
    ("float32 gets no looser tolerance", lambda t: t.assertAllClose(np.float32([1.0]), np.float32([1.00001])),
     "Not equal to tolerance rtol=1e-06"),
    ("shapes are not broadcast", lambda t: t.assertAllClose([1.0, 2.0], [[1.0, 2.0]]),
     "Shape mismatch: expected (2,), got (1, 2)"),
    ("dicts leaf by leaf", lambda t: t.assertAllClose({"a": [1.0], "b": 2.0}, {"a": [1.0], "b": 2.0}), None),
    ("dict keys must match", lambda t: t.assertAllClose({"a": [1.0]}, {"b": [1.0]}), "mismatched keys"),
    ("nested lists of arrays", lambda t: t.assertAllClose([np.ones(2), (3.0, {"k": 1})], [np.ones(2), (3.0, {"k": 1})]),
     None),
    ("nan equals nan", lambda t: t.assertAllClose([np.nan], [np.nan]), None),
    ("rtol keyword", lambda t: t.assertAllClose([1.0], [1.1], rtol=0.2), None),
    ("msg is shown", lambda t: t.assertAllClose([1.0], [2.0], msg="MYMSG"), "MYMSG"),
    ("a tensor against a list", lambda t: t.assertAllClose(tf.constant([1.0]), [1.0]), None),
    ("equal finds the element", lambda t: t.assertAllEqual([1, 2], [1, 3]), "Arrays are not equal"),
    ("equal needs the shape", lambda t: t.assertAllEqual([1, 2], [[1, 2]]), "Shape mismatch: expected (2,), got (1, 2)"),
    ("equal of bytes", lambda t: t.assertAllEqual([b"a"], [b"a"]), None),
    ("equal of a tensor and a list", lambda t: t.assertAllEqual(tf.constant([[1, 2]]), [[1, 2]]), None),
    ("not close of equal values", lambda t: t.assertNotAllClose([1.0], [1.0]), "The two values are close at all elements"),
    ("in a closed range", lambda t: t.assertAllInRange([1.0, 2.0], 1.0, 2.0), None),
    ("outside an open lower bound", lambda t: t.assertAllInRange([1.0, 2.0], 1.0, 2.0, open_lower_bound=True),
     "1 of the 2 element(s) are outside the range (1.0, 2.0]"),
    ("greater is strict", lambda t: t.assertAllGreater([1.0, 2.0], 1.0), "not greater than 1.0"),
    ("less or equal", lambda t: t.assertAllLessEqual([1.0, 2.0], 2.0), None),
    ("near", lambda t: t.assertNear(1.0, 1.05, 0.1), None),
    ("array near", lambda t: t.assertArrayNear([1.0, 2.0], [1.0, 2.05], 0.1), None),
    ("dtype", lambda t: t.assertDTypeEqual(np.float32([1]), np.float32), None),
    ("shape of an array and a tensor", lambda t: t.assertShapeEqual(np.zeros((2, 3)), tf.zeros((2, 3))), None),
    ("in a set", lambda t: t.assertAllInSet([1, 2], [1, 2, 3]), None),
]


@pytest.mark.parametrize("name,check,failure", OBSERVED, ids=[o[0] for o in OBSERVED])
def test_assertions_pass_and_fail_as_tfs(case, name, check, failure):
    if failure is None:
        check(case)
    else:
        with pytest.raises(AssertionError) as raised:
            check(case)
        assert failure in str(raised.value), str(raised.value)


def test_set_up_seeds_as_tf_does(case):
    # TF 2.21: np.random.rand() right after setUp gave 0.18463433217903202 (np.random.seed(87654321))
    assert np.random.rand() == 0.18463433217903202
    first = (random.random(), tf.random.uniform([]).numpy())
    case.setUp()
    np.random.rand()
    assert (random.random(), tf.random.uniform([]).numpy()) == first


def test_evaluate_gives_numpy_and_refuses_python_numbers(case):
    out = case.evaluate({"a": tf.constant([1.0]), "b": (tf.constant(2), None)})
    assert isinstance(out["a"], np.ndarray) and out["a"].tolist() == [1.0]
    assert out["b"][0] == 2 and isinstance(out["b"][0], np.generic) and out["b"][1] is None
    with pytest.raises(ValueError, match="Unsupported type 'int'"):  # TF 2.21's error for evaluate({..., 3})
        case.evaluate((tf.constant(2), 3))
    with case.cached_session() as session:
        assert session.run(tf.constant(3.0)) == 3.0


def test_a_tf_test_module_runs_under_unittest():
    class Squares(tf.test.TestCase):
        def test_square(self):
            self.assertAllEqual(tf.square([1, 2]), [1, 4])

        def test_wrong(self):
            self.assertAllClose(tf.square([1.0]), [2.0])

    result = unittest.TextTestRunner(stream=open(os.devnull, "w")).run(
        unittest.defaultTestLoader.loadTestsFromTestCase(Squares))
    assert result.testsRun == 2 and len(result.failures) == 1 and not result.errors
    assert "test_wrong" in str(result.failures[0][0])
    assert not tf.test.is_gpu_available() and tf.test.gpu_device_name() == ""  # this machine has no GPU
