"""`tf.Variable` under `import jdist.tf_compat as tf`, held to TF 2.21's observed behaviour.

Observed in TF 2.21 (tensorflow-cpu 2.21.0, Keras 3.15), MirroredStrategy on 2 logical CPUs, each replica
function run in a `tf.function` (eager `strategy.run` gave the same numbers). `_rid()` is the replica id as a
float (0.0, 1.0).
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from tf_parity_common import local_lists, replica_id  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

A, S = tf.VariableAggregation, tf.VariableSynchronization


@pytest.fixture(scope="module")
def two():
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


_rid, _locals = replica_id, local_lists


# --- a variable made OUTSIDE the strategy's scope: one variable, every replica updates it in turn ---

def test_outside_variable_adds_every_replicas_delta(two):
    v = tf.Variable(0.0)
    step = tf.function(lambda: two.run(lambda: v.assign_add(1.0)))
    step()
    assert float(v.numpy()) == 2.0  # TF 2.21: 2.0 after one step (jdist was 1.0)
    step()
    assert float(v.numpy()) == 4.0  # TF 2.21: 4.0 after two


def test_outside_variable_per_replica_deltas_and_what_each_replica_reads(two):
    v = tf.Variable(0.0)
    step = tf.function(lambda: two.run(lambda: v.assign_add(_rid() + 1.0)))
    step()
    assert float(v.numpy()) == 3.0  # TF 2.21: 0 + 1 + 2 (jdist raised "no longer mirrored")
    assert _locals(two, step()) == [6.0, 6.0]  # TF 2.21: both replicas' assign_add returned the final 6.0


def test_outside_variable_assign_keeps_the_last_replicas_and_assign_sub_subtracts_all(two):
    v = tf.Variable(5.0)
    tf.function(lambda: two.run(lambda: v.assign(_rid() + 10.0)))()
    assert float(v.numpy()) == 11.0  # TF 2.21: replica 1's 11.0 (jdist raised)
    w = tf.Variable(5.0)
    tf.function(lambda: two.run(lambda: w.assign_sub(1.0)))()
    assert float(w.numpy()) == 3.0  # TF 2.21: 5 - 1 - 1 (jdist 4.0)
    n = tf.Variable(0)
    two.run(lambda: n.assign_add(tf.distribute.get_replica_context().replica_id_in_sync_group + 1))
    assert n.numpy() == 3  # TF 2.21, an int32 variable, eager run: 0 + 1 + 2


# --- variables made INSIDE the scope ---

@pytest.mark.parametrize("op", ["assign", "assign_add", "assign_sub"])
def test_sum_aggregation_refuses_one_python_number_for_every_replica(two, op):
    with two.scope():
        w = tf.Variable(5.0, aggregation=A.SUM)
    # TF 2.21: ValueError for each op (jdist summed it: assign 2.0, assign_add 7.0, assign_sub 3.0)
    with pytest.raises(ValueError, match=r"^A non-DistributedValues value 1\.0 cannot be reduced with the given "
                                         r"reduce op ReduceOp\.SUM\."):
        tf.function(lambda: two.run(lambda: getattr(w, op)(1.0)))()


def test_sum_aggregation_sums_a_numpy_value_and_refuses_a_python_list(two):
    with two.scope():
        w = tf.Variable(5.0, aggregation=A.SUM)
        u = tf.Variable([5.0, 5.0], aggregation=A.SUM)
    tf.function(lambda: two.run(lambda: w.assign_add(np.float32(1.0))))()
    assert float(w.numpy()) == 7.0  # TF 2.21: a numpy value is summed, 5 + 1 + 1
    with pytest.raises(ValueError, match=r"^A non-DistributedValues value 1\.0 cannot"):  # TF 2.21: the first number
        tf.function(lambda: two.run(lambda: u.assign([1.0, 2.0])))()


@pytest.mark.parametrize("op, copies", [("assign", [1.0, 2.0]), ("assign_add", [6.0, 7.0]),
                                        ("assign_sub", [4.0, 3.0])])
def test_mirrored_variable_without_aggregation_drifts_apart_as_tfs(two, op, copies):
    with two.scope():
        w = tf.Variable(5.0)
    returned = tf.function(lambda: two.run(lambda: getattr(w, op)(_rid() + 1.0)))()
    # TF 2.21: each replica keeps (and returned) its own value, a read outside gives replica 0's (jdist raised)
    assert _locals(two, returned) == copies and _locals(two, w) == copies
    assert float(w.numpy()) == copies[0]


def test_drifted_copies_are_read_per_replica_shown_and_joined_by_an_outside_assign(two):
    with two.scope():
        w = tf.Variable(5.0)
    tf.function(lambda: two.run(lambda: w.assign(_rid() + 1.0)))()
    # TF 2.21's text lists both copies
    assert repr(w) == ("MirroredVariable:{\n  0: <tf.Variable 'Variable:0' shape=() dtype=float32, numpy=1.0>,\n"
                       "  1: <tf.Variable 'Variable/replica_1:0' shape=() dtype=float32, numpy=2.0>\n}")
    assert _locals(two, tf.function(lambda: two.run(lambda: w.read_value() * 10.0))()) == [10.0, 20.0]  # TF 2.21
    tf.function(lambda: two.run(lambda: w.assign_add(1.0)))()
    assert _locals(two, w) == [2.0, 3.0]  # TF 2.21
    w.assign(7.0)
    assert _locals(two, w) == [7.0, 7.0]  # TF 2.21: one value again


def test_sync_on_read_copies_and_reads(two):
    # TF 2.21 (ON_READ, replica r assigns r + 1.0 from 5.0): copies [1, 2]; read SUM 3.0, MEAN 1.5, FIRST 1.0
    for aggregation, read in [(A.SUM, 3.0), (A.MEAN, 1.5), (A.ONLY_FIRST_REPLICA, 1.0)]:
        with two.scope():
            w = tf.Variable(5.0, synchronization=S.ON_READ, aggregation=aggregation)
        tf.function(lambda: two.run(lambda: w.assign(_rid() + 1.0)))()  # noqa: B023 (called at once)
        assert _locals(two, w) == [1.0, 2.0] and float(w.numpy()) == read


# --- what assignments return, and the variable's own attributes ---

def test_assignments_return_an_unread_variable_that_chains():
    v = tf.Variable([1.0, 2.0, 3.0])
    out = v.assign([4.0, 5.0, 6.0])
    # TF 2.21: `<tf.Variable 'UnreadVariable' ...>` (jdist returned the tensor)
    assert repr(out) == "<tf.Variable 'UnreadVariable' shape=(3,) dtype=float32, numpy=array([4., 5., 6.], " \
                        "dtype=float32)>"
    assert isinstance(out, tf.Variable)
    assert v.assign([1.0, 2.0, 3.0]).assign_add([1.0, 1.0, 1.0]).numpy().tolist() == [2.0, 3.0, 4.0]  # TF 2.21
    assert v.numpy().tolist() == [2.0, 3.0, 4.0]
    assert v.assign_sub([1.0, 1.0, 1.0]).numpy().tolist() == [1.0, 2.0, 3.0]
    assert v.assign([1.0, 2.0, 3.0], read_value=False) is None  # TF 2.21
    out = v.scatter_add(tf.IndexedSlices(tf.constant([1.0, 1.0]), tf.constant([0, 1])))
    assert repr(out) == "<tf.Variable 'UnreadVariable' shape=(3,) dtype=float32, numpy=array([2., 3., 3.], " \
                        "dtype=float32)>"  # TF 2.21
    out = v.scatter_update(tf.IndexedSlices(tf.constant([9.0]), tf.constant([2])))
    assert out.numpy().tolist() == [2.0, 3.0, 9.0]
    assert (out + 1.0).numpy().tolist() == [3.0, 4.0, 10.0]
    assert repr(tf.Variable(3, dtype=tf.int64).assign_add(2)) == \
        "<tf.Variable 'UnreadVariable' shape=() dtype=int64, numpy=5>"  # TF 2.21 (jdist showed an int32 tensor)
    assert repr(tf.Variable(True).assign(False)) == "<tf.Variable 'UnreadVariable' shape=() dtype=bool, numpy=False>"


def test_a_mirrored_variables_assignment_outside_run_returns_the_replicas_values(two):
    with two.scope():
        mv = tf.Variable(1.0)
    assert repr(mv.assign(2.0)) == ("Mirrored:{\n  0: <tf.Tensor: shape=(), dtype=float32, numpy=2.0>,\n"
                                    "  1: <tf.Tensor: shape=(), dtype=float32, numpy=2.0>\n}")  # TF 2.21
    assert float(mv.assign_add(2.0).numpy()) == 4.0


def test_names_in_a_name_scope_initial_value_constraint_and_unknown_dimensions():
    with tf.name_scope("blk"):
        a, b, c = tf.Variable(1.0, name="w"), tf.Variable(1.0, name="w"), tf.Variable(1.0)
    assert (a.name, b.name, c.name) == ("blk/w:0", "blk/w:0", "blk/Variable:0")  # TF 2.21 eager (jdist: 'w:0')
    with pytest.raises(RuntimeError, match="^This property is not supported when eager execution is enabled.$"):
        _ = a.initial_value  # TF 2.21 eager (jdist: AttributeError)
    nonneg = tf.keras.constraints.NonNeg()
    k = tf.Variable(1.0, constraint=nonneg)
    assert k.constraint is nonneg and tf.Variable(1.0).constraint is None  # TF 2.21 (jdist dropped it)
    assert float(k.assign(-1.0).numpy()) == -1.0  # TF 2.21: an assignment does not apply the constraint
    u = tf.Variable([1.0, 2.0], shape=tf.TensorShape([None]), validate_shape=False)
    u.assign([1.0, 2.0, 3.0])
    assert u.shape.as_list() == [None] and u.numpy().tolist() == [1.0, 2.0, 3.0]  # TF 2.21: TensorShape([None])
    assert repr(u) == "<tf.Variable 'Variable:0' shape=(None,) dtype=float32, numpy=array([1., 2., 3.], " \
                      "dtype=float32)>"  # TF 2.21


def test_sliced_assignment_writes_into_the_variable():
    v = tf.Variable([1.0, 2.0, 3.0])
    v[1].assign(5.0)
    assert v.numpy().tolist() == [1.0, 5.0, 3.0]  # TF 2.21 (jdist: AttributeError, no `assign`)
    out = v[1:3].assign([7.0, 8.0])
    assert v.numpy().tolist() == [1.0, 7.0, 8.0]  # TF 2.21
    assert repr(out) == "<tf.Variable 'UnreadVariable' shape=(3,) dtype=float32, numpy=array([1., 7., 8.], " \
                        "dtype=float32)>"  # TF 2.21: the whole variable
    g = tf.function(lambda x: (v[0].assign(x), v.read_value())[1])
    assert g(tf.constant(9.0)).numpy().tolist() == [9.0, 7.0, 8.0]  # TF 2.21, in a tf.function too
    # TF 2.21: other tensors have no `assign` ("'EagerTensor' object has no attribute 'assign'")
    assert not hasattr(tf.constant([1.0]), "assign") and not hasattr(v + 1.0, "assign")
    with pytest.raises(AttributeError, match="has no attribute 'assign'"):
        tf.constant([1.0]).assign(2.0)


def test_assignments_of_another_shape_or_tensor_dtype_are_tfs_errors():
    v = tf.Variable([1.0, 2.0, 3.0], name="w")
    # TF 2.21's texts (jdist: Keras's text; assign_add broadcast the scalar; int and float64 tensors were cast)
    with pytest.raises(ValueError, match=r"^Cannot assign value to variable ' w:0': Shape mismatch\.The variable "
                                         r"shape \(3,\), and the assigned value shape \(2,\) are incompatible\.$"):
        v.assign([1.0, 2.0])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"Cannot update variable with shape \[3\] using a Tensor "
                                                             r"with shape \[\], shapes must be equal\. "
                                                             r"\[Op:AssignAddVariableOp\]"):
        v.assign_add(1.0)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"\[Op:AssignSubVariableOp\]"):
        v.assign_sub([1.0, 2.0])
    with pytest.raises(ValueError, match=r"^Tensor conversion requested dtype float32 for Tensor with dtype int32: "
                                         r"<tf.Tensor: shape=\(3,\), dtype=int32"):
        v.assign(tf.constant([1, 2, 3]))
    with pytest.raises(ValueError, match="requested dtype int64 for Tensor with dtype int32"):
        tf.Variable(3, dtype=tf.int64).assign(tf.constant(1))
    assert v.assign(np.array([1, 2, 3])).numpy().tolist() == [1.0, 2.0, 3.0]  # TF 2.21: numpy values convert
    assert v.assign_add(np.array([1, 2, 3])).numpy().tolist() == [2.0, 4.0, 6.0]
    n = tf.Variable(3, dtype=tf.int64)
    assert n.assign(n + 1).numpy() == 4  # an int64 variable's own arithmetic (JAX: 32 bits) is its dtype


def test_a_variable_without_an_initial_value_is_tfs_value_error():
    # observed, TF 2.21: tf.Variable() and tf.Variable(None) raise this ValueError
    for call in (lambda: tf.Variable(), lambda: tf.Variable(None)):
        with pytest.raises(ValueError, match=r"^The `initial_value` arg to `tf.Variable` must be specified except "
                                             r"when you are not providing a `variable_def`. You provided neither.$"):
            call()
