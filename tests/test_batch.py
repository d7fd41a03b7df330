"""`jdist.strategy.batch`: the one batch shape and the rules about its rows (leading size, placement on the
data axis, the per-replica view), and the strategy's one data sharding."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jdist
from jdist.strategy.batch import Batch, as_batch, leading_size, per_replica, place_rows


def test_leading_size_names_the_leaves_that_disagree():
    assert leading_size({"x": np.zeros((6, 2)), "y": np.zeros(6)}, "batch") == 6
    with pytest.raises(ValueError, match=r"disagree on the batch size.*batch\['x'\]: 6, batch\['y'\]: 5"):
        leading_size({"x": np.zeros((6, 2)), "y": np.zeros(5)}, "batch")
    with pytest.raises(ValueError, match=r"leading batch dimension.*batch\[1\] is a scalar"):
        leading_size((np.zeros(3), np.float32(1.0)), "batch")
    with pytest.raises(ValueError, match="is empty"):
        leading_size({}, "batch")


def test_a_batch_is_a_pytree_of_its_examples_mask_and_weights():
    x, y = np.arange(8.0).reshape(4, 2), np.arange(4)
    mask, weight = np.array([1, 1, 1, 0], np.float32), np.ones(4, np.float32)
    batch = Batch((x, y), mask, weight, row_of=("block", 0))
    leaves, treedef = jax.tree.flatten(batch)
    assert [leaf is ref for leaf, ref in zip(leaves, (x, y, mask, weight))] == [True] * 4
    rebuilt = jax.tree.unflatten(treedef, leaves)
    assert isinstance(rebuilt, Batch) and rebuilt.x is x and rebuilt.y is y and rebuilt.row_of is None
    assert batch.on_host and batch.arrays() == (x, y, mask, weight)
    with pytest.raises(TypeError, match="not an \\(x, y\\) pair"):
        _ = Batch({"image": x}).x


def test_as_batch_reads_every_way_a_step_is_given_a_batch():
    plain = (np.zeros(4), np.ones(4))
    assert as_batch(plain).examples is plain and as_batch(plain).mask is None
    with_mask = {"x": np.zeros(4), "mask": np.ones(4)}
    read = as_batch(with_mask)
    assert read.examples is with_mask and read.mask is with_mask["mask"]
    batch = Batch(plain, np.ones(4))
    assert as_batch(batch) is batch


def test_place_rows_and_the_per_replica_view_match_the_host_rows():
    strategy = jdist.MirroredStrategy()
    n = strategy.num_replicas_in_sync
    sharding = strategy.data_sharding()
    assert strategy.data_sharding() is sharding  # made once per strategy
    assert strategy.data_sharding(stacked=True).spec == jax.sharding.PartitionSpec(None, strategy.data_axis)
    x = np.arange(n * 2 * 3, dtype=np.float32).reshape(n * 2, 3)
    placed = place_rows(Batch((x, None), np.ones(n * 2, np.float32)), sharding)
    assert isinstance(placed, Batch) and placed.x.sharding == sharding and not placed.on_host
    np.testing.assert_array_equal(np.asarray(placed.x), x)
    view = jax.jit(lambda a: per_replica(a, n, sharding))(placed.x)
    np.testing.assert_array_equal(np.asarray(view), x.reshape(n, 2, 3))  # replica i holds rows 2i, 2i + 1
    for shard in view.addressable_shards:
        i = shard.index[0].start or 0
        np.testing.assert_array_equal(np.asarray(shard.data)[0], x[2 * i:2 * i + 2])
    assert float(jnp.sum(view)) == float(x.sum())
