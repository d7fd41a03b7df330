"""`strategy.extended` (TF's `StrategyExtended`): device names, writer roles, `reduce_to`, `batch_reduce_to`,
`broadcast_to`, `update` in and out of `run` and `merge_call`.

TF observations (TF 2.21, tensorflow-cpu 2.21.0 with Keras 3; `MirroredStrategy(["/cpu:0", "/cpu:1"])` on two
logical CPUs made by `tf.config.set_logical_device_configuration`):
- `worker_devices`, `parameter_devices` and `non_slot_devices([v])`: ('/job:localhost/replica:0/task:0/device:CPU:0',
  '/job:localhost/replica:0/task:0/device:CPU:1'); `worker_devices_by_replica` one list per device.
- `should_checkpoint`, `should_save_summary`, `experimental_should_init` True; `experimental_between_graph`
  False; `experimental_require_static_shapes` False; `_in_multi_worker_mode()` False.
- `variable_created_in_scope`: True for a variable made in the scope (also after it closes), False for one made
  before. `value_container(v) is v`.
- `update(v, lambda var, x: var.assign_add(x), args=(2.,))` from 1.0: every copy 3.0; `kwargs` are passed; a
  function returning None gives None; `group=False` a tuple of two results.
- With a run result `PerReplica(1., 2.)`: `reduce_to(SUM, pr, v)` 3.0 (also with the op "SUM"), MEAN 1.5;
  `batch_reduce_to(SUM, [(pr, v), (pr, v)])` two 3.0s. A plain tensor 3.0: MEAN 3.0, SUM ValueError
  "A non-DistributedValues value tf.Tensor(3.0, shape=(), dtype=float32) cannot be reduced with the given
  reduce op ReduceOp.SUM."; a mirrored value or a variable with SUM: AssertionError (jdist: the same ValueError).
  OneDeviceStrategy and the default strategy: SUM of a plain 3.0 is 3.0.
- In `run`: `reduce_to` raises RuntimeError "Method requires being in cross-replica context, use
  get_replica_context().merge_call()"; `update(acc, lambda var: var.assign_add(1.))` adds 1 once (3.0 -> 4.0),
  and with a tensor argument 1.0 on each replica also once (7.0 -> 8.0).
- `merge_call(merge_fn)` whose `merge_fn` does `reduce_to(SUM, x, acc)` of the replica ids + 1 and
  `update(acc, assign_add, args=(reduced,))`: acc 0.0 -> 3.0.
- `update(acc, assign_add, args=(PerReplica(1., 2.),))` outside `run`: TF's copies become 5.0 and 6.0 and `acc`
  reads 5.0 (device 0's). jdist keeps one copy and refuses that argument (ValueError naming `reduce_to`).
- CentralStorageStrategy over two CPUs: `parameter_devices` ('/device:CPU:0',), `experimental_between_graph`
  True. MultiWorkerMirroredStrategy (one process): `experimental_between_graph` True, `_in_multi_worker_mode()`
  False. Default strategy: `worker_devices` RuntimeError "worker_devices() method unsupported by default
  tf.distribute.Strategy.".
- ParameterServerStrategy (2 in-process workers, 2 servers): `experimental_between_graph` True,
  `_in_multi_worker_mode()` False; its `parameter_devices` were ('/job:chief/replica:0/task:0/device:CPU:0',),
  which is not where its variables live; jdist names the servers ('/job:ps/replica:0/task:{i}/device:CPU:0').
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

CPU = "/job:localhost/replica:0/task:0/device:CPU:{}"


@pytest.fixture(scope="module")
def two():
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def _ids_plus_one(strategy):
    return strategy.run(lambda: tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group,
                                        tf.float32) + 1.0)


def test_devices_and_roles_are_tfs(two):
    e = two.extended
    assert e.worker_devices == (CPU.format(0), CPU.format(1))
    assert e.parameter_devices == e.worker_devices == e.non_slot_devices([])
    assert e.worker_devices_by_replica == [[CPU.format(0)], [CPU.format(1)]]
    assert (e.should_checkpoint, e.should_save_summary, e.experimental_should_init) == (True, True, True)
    assert (e.experimental_between_graph, e.experimental_require_static_shapes) == (False, False)
    assert e._in_multi_worker_mode() is False
    assert two.extended is e


def test_other_strategies_answer_as_tf():
    css = tf.distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"])
    assert css.extended.parameter_devices == ("/device:CPU:0",)
    assert css.extended.worker_devices == (CPU.format(0), CPU.format(1))
    assert css.extended.experimental_between_graph is True
    mwms = tf.distribute.MultiWorkerMirroredStrategy()
    assert mwms.extended.experimental_between_graph is True and mwms.extended._in_multi_worker_mode() is False
    assert len(mwms.extended.worker_devices) == mwms.num_replicas_in_sync
    one = tf.distribute.OneDeviceStrategy("/cpu:3")
    assert one.extended.worker_devices == (CPU.format(3),)
    assert float(one.extended.reduce_to("SUM", tf.constant(3.0), "/cpu:3")) == 3.0
    tpu = tf.distribute.TPUStrategy(devices=jax.devices("cpu"))
    assert tpu.extended.experimental_require_static_shapes is True
    default = tf.distribute.get_strategy()
    with pytest.raises(RuntimeError, match=r"worker_devices\(\) method unsupported by default"):
        _ = default.extended.worker_devices
    assert float(default.extended.reduce_to("SUM", tf.constant(3.0), "/cpu:0")) == 3.0
    v = tf.Variable(1.0)
    default.extended.update(v, lambda var: var.assign_add(1.0))
    assert v.numpy() == 2.0


def test_variables_made_in_scope_are_known(two):
    before = tf.Variable(5.0)
    with two.scope():
        v = tf.Variable(1.0)
        assert two.extended.variable_created_in_scope(v)
        assert not two.extended.variable_created_in_scope(before)
        with two.extended.colocate_vars_with(v):
            u = tf.Variable(2.0)
    assert two.extended.variable_created_in_scope(v) and two.extended.variable_created_in_scope(u)
    assert two.extended.value_container(v) is v
    assert float(two.extended.read_var(v)) == 1.0
    assert v.device == CPU.format(0)
    with pytest.raises(TypeError, match="read_var"):
        two.extended.read_var(tf.constant(1.0))


def test_reduce_to_matches_one_device_sums(two):
    e = two.extended
    pr = _ids_plus_one(two)
    with two.scope():
        v = tf.Variable(0.0)
    parts = [float(x) for x in two.experimental_local_results(pr)]
    assert float(e.reduce_to(tf.distribute.ReduceOp.SUM, pr, destinations=v)) == sum(parts) == 3.0
    assert float(e.reduce_to("SUM", pr, v)) == 3.0
    assert float(e.reduce_to(tf.distribute.ReduceOp.MEAN, pr, "/cpu:0")) == np.mean(parts) == 1.5
    assert [float(x) for x in e.batch_reduce_to("SUM", [(pr, v), (pr, v)])] == [3.0, 3.0]
    assert float(e.reduce_to("MEAN", tf.constant(3.0), v)) == 3.0
    with pytest.raises(ValueError, match="non-DistributedValues value .* ReduceOp.SUM"):
        e.reduce_to("SUM", tf.constant(3.0), v)
    with pytest.raises(ValueError, match="non-DistributedValues value"):
        e.reduce_to("SUM", e.broadcast_to(tf.constant(2.0), v), v)
    assert float(e.reduce_to("MEAN", e.broadcast_to(tf.constant(2.0), v), v)) == 2.0


def test_update_outside_run(two):
    e = two.extended
    with two.scope():
        v = tf.Variable(1.0)
    assert float(e.update(v, lambda var, x: var.assign_add(x), args=(2.0,))) == 3.0
    assert v.numpy() == 3.0
    e.update(v, lambda var, x=0.0: var.assign(x), kwargs={"x": 7.0})
    assert v.numpy() == 7.0
    assert e.update(v, lambda var: None) is None
    assert len(e.update(v, lambda var: var * 2, group=False)) == 2
    same = two.run(lambda: tf.constant(1.0))  # a PerReplica whose replicas agree
    e.update(v, lambda var, x: var.assign_add(x), args=(same,))
    assert v.numpy() == 8.0
    with pytest.raises(ValueError, match=r"different values \(\[1.0, 2.0\]\).*reduce_to"):
        e.update(v, lambda var, x: var.assign_add(x), args=(_ids_plus_one(two),))
    assert v.numpy() == 8.0  # nothing was applied


def test_update_and_merge_call_inside_run(two):
    with two.scope():
        acc = tf.Variable(0.0)

    def step():
        ctx = tf.distribute.get_replica_context()
        x = tf.cast(ctx.replica_id_in_sync_group, tf.float32) + 1.0

        def merge_fn(strategy, x):
            reduced = strategy.extended.reduce_to(tf.distribute.ReduceOp.SUM, x, destinations=acc)
            return strategy.extended.update(acc, lambda var, y: var.assign_add(y), args=(reduced,))

        return ctx.merge_call(merge_fn, args=(x,))

    two.run(step)
    assert acc.numpy() == 3.0  # 1 + 2, applied once
    two.run(lambda: two.extended.update(acc, lambda var: var.assign_add(1.0)))
    assert acc.numpy() == 4.0
    two.run(lambda: two.extended.update(acc, lambda var, d: var.assign_add(d), args=(tf.constant(1.0),)))
    assert acc.numpy() == 5.0
    with pytest.raises(RuntimeError, match="requires being in cross-replica context"):
        two.run(lambda: two.extended.reduce_to("SUM", tf.constant(1.0), acc))
