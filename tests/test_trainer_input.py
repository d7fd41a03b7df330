"""The Trainer's host input path: arrays cut into blocks of `steps_per_execution` batches.

Full batches are taken k at a time as one stacked block (one gather, one transfer), so the
batches, their masks and weights must be exactly those of cutting the arrays batch by batch,
the block must be a copy of its own (on CPU `device_put` may alias an aligned host array),
and a bad label inside a block must be reported for the same batch as before.
"""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jdist
from jdist.errors import InputError
from jdist.models import MLP
from jdist.trainer import _batching as batching


def _batch_by_batch(x, y, weight, batch_size, padded, order, steps):
    """The reference: each batch gathered alone and padded by repeating its last example."""
    order = np.arange(len(x)) if order is None else order
    out = []
    for step in range(steps):
        idx = order[step * batch_size:(step + 1) * batch_size]
        rows = np.minimum(np.arange(padded), len(idx) - 1)
        mask = (np.arange(padded) < len(idx)).astype(np.float32)
        out.append((x[idx][rows], y[idx][rows], mask, None if weight is None else weight[idx][rows]))
    return out


@pytest.mark.parametrize("n, batch_size, padded, k, shuffle, weighted, steps", [
    (64, 8, 8, 4, False, False, None),   # whole blocks
    (70, 8, 8, 4, True, True, None),     # a short last batch, shuffled, float64 weights
    (64, 6, 8, 3, False, False, None),   # every batch padded up to the replicas
    (64, 8, 8, 3, True, False, 5),       # steps_per_epoch ending inside a block
    (64, 8, 8, 1, False, True, None),    # steps_per_execution=1
])
def test_array_blocks_equal_batch_by_batch(n, batch_size, padded, k, shuffle, weighted, steps):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 3)).astype(np.float32)
    y = rng.integers(0, 5, n).astype(np.int32)
    weight = rng.uniform(size=n) if weighted else None
    order = rng.permutation(n) if shuffle else None
    got = list(batching.array_batches(x, y, batch_size, padded, order=order, max_steps=steps, weight=weight,
                                      steps_per_block=k))
    want = _batch_by_batch(x, y, None if weight is None else weight.astype(np.float32), batch_size, padded,
                           order, steps or -(-n // batch_size))
    assert len(got) == len(want)
    for batch, expected in zip(got, want):
        for leaf, ref in zip(batch.arrays(), expected):
            if ref is None:
                assert leaf is None
            else:
                assert leaf.dtype == ref.dtype and leaf.shape == ref.shape
                np.testing.assert_array_equal(leaf, ref)
    # Blocks as the Trainer groups them: stacked exactly as np.stack of the batches would be.
    for group in batching.group(iter(got), k):
        block = batching.stack_block(group, k)
        filler = [dict(zip("xymw", group[-1].arrays()), m=np.zeros(padded, np.float32))] * (k - len(group))
        rows = [dict(zip("xymw", b.arrays())) for b in group] + filler
        for i, name in enumerate("xymw"):
            leaf = block.arrays()[i]
            if leaf is None:
                assert rows[0][name] is None
            else:
                np.testing.assert_array_equal(leaf, np.stack([r[name] for r in rows]))
                assert not np.shares_memory(leaf, x) and not np.shares_memory(leaf, y)


def test_a_whole_block_is_handed_over_without_another_copy():
    x = np.arange(64 * 2, dtype=np.float32).reshape(64, 2)
    y = np.arange(64, dtype=np.int32)
    batches = list(batching.array_batches(x, y, 8, 8, steps_per_block=4))
    first, second = batching.stack_block(batches[:4], 4), batching.stack_block(batches[4:], 4)
    assert first is batches[0].row_of[0] and second is batches[4].row_of[0]
    # Rows of different blocks, or a block cut short, are stacked anew.
    mixed = batching.stack_block(batches[2:6], 4)
    assert mixed is not batches[2].row_of[0] and mixed is not batches[4].row_of[0]
    np.testing.assert_array_equal(mixed.x, x[16:48].reshape(4, 8, 2))


@pytest.mark.parametrize("bad_batch,k", [(0, 4), (2, 4), (2, 1), (6, 1)])
def test_a_bad_label_inside_a_block_names_its_batch(bad_batch, k):
    """Arrays are cut several batches at a time (k at a time, or a run of batches at k=1) and the labels
    checked once per run; a bad one still names its batch, and the steps before it are the ones that ran."""
    model = MLP(features=(8,), num_classes=4)
    params = model.init(jax.random.key(0), jnp.zeros((1, 6)))["params"]
    trainer = jdist.Trainer(model, optax.sgd(0.1), loss="sparse_categorical_crossentropy", params=params,
                            strategy=jdist.OneDeviceStrategy(jax.devices()[0]), steps_per_execution=k)
    x = np.zeros((64, 6), np.float32)
    y = np.zeros(64, np.int32)
    y[bad_batch * 8 + 5] = 7
    with pytest.raises(InputError, match=rf"batch {bad_batch} of this pass, training step {bad_batch}\): received "
                                         r"a label value of 7 at row 5 .*\[0, 4\)"):
        trainer.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    assert trainer.step == (0 if k > 1 else bad_batch)  # the block holding it never ran
