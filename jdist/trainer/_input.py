"""The Trainer's input: one object turns what `fit` / `evaluate` / `predict` are given into
blocks ready for the compiled step, once per pass.

Arrays (shuffled per epoch), iterables of `(x, y[, sample_weight])` batches and a strategy's
distributed datasets all become fixed-size global batches with a mask of their real rows
(`jdist.trainer._batching`), are checked (`jdist.input.checks`), grouped into blocks of
`steps_per_execution` batches and placed on the devices here: one stacked `(k, batch, ...)`
transfer per execution, or one batch per execution where the strategy runs a step as several
programs (central storage). Strategies that schedule steps on remote workers get the host
batches, which travel with the scheduled function.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

import jax
import numpy as np

from jdist.input.dataset import DistributedDataset, DistributedIterator
from jdist.input.sources import PassSource
from jdist.strategy.batch import Batch, leading_size, place_rows
from jdist.trainer import _batching as batching

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy

TRAIN, EVAL, PREDICT = "train", "eval", "predict"


@dataclasses.dataclass
class Block:
    """Up to `steps_per_execution` consecutive batches and what runs them.

    `batches`: the padded batches (host, or already on the devices for a distributed dataset),
    for predict's masks and remote scheduling.
    `executions`: `(args, steps)` per compiled call: its device arguments and how many steps it
    runs (empty where steps are scheduled on remote workers)."""

    batches: list[Batch]
    executions: list[tuple[tuple, int]]


class Pass:
    """One pass over the input: `steps` (None if unknown) before it starts, then `blocks()`."""

    def __init__(self, feed: TrainerInput, kind: str, batches: Iterable, steps: int | None):
        self._feed = feed
        self._kind = kind
        self._batches = batches
        self._peeked: Batch | None = None
        self.steps = steps

    def peek(self) -> Batch | None:
        """The first padded batch (unchecked, not placed; None if there is none), left in the pass:
        to make the variables from before the loop, as Keras's fit peeks at its data."""
        if self._peeked is None:
            rest = iter(self._batches)
            try:
                self._peeked = next(rest)
            except StopIteration:
                return None
            self._batches = itertools.chain([self._peeked], rest)
        return self._peeked

    def blocks(self, *, skip: int = 0, first_step: int | None = None) -> Iterator[Block]:
        """Checked, grouped and placed blocks; `skip` batches already done are left out, and
        `first_step` (training) names the step of each batch in check errors."""
        batches = itertools.islice(self._batches, skip, None) if skip else self._batches
        checked = self._feed.check(batches, first_step)
        for group in batching.group(checked, self._feed.steps_per_execution):
            yield Block(group, self._feed.executions(self._kind, group))


class TrainerInput:
    """Makes each pass's blocks for a Trainer under `strategy`.

    `check(batches, first_step) -> batches` is the Trainer's per-batch check (label checks,
    variables made on the first batch)."""

    def __init__(self, strategy: Strategy, *, steps_per_execution: int, accumulation_steps: int, seed: int,
                 check: Callable[[Iterable, int | None], Iterator]):
        self.strategy = strategy
        self.steps_per_execution = steps_per_execution
        self.accumulation_steps = accumulation_steps
        self.seed = seed
        self.check = check
        self._constants: dict = {}  # device arrays every pass reuses: step flags, masks without padding

    def steps_per_call(self, kind: str) -> int:
        """Steps one compiled call runs: `steps_per_execution`, or 1 for training under a
        strategy whose step is several programs (a block's steps then run one by one)."""
        if kind == TRAIN and not self.strategy.single_program_step:
            return 1
        return self.steps_per_execution

    def scheduled_remotely(self, kind: str) -> bool:
        return kind == TRAIN and self.strategy.should_use_with_coordinator

    # ------------------------------------------------------------------ a pass
    def pass_over(self, x: Any, y: Any = None, *, kind: str, batch_size: int | None = None,
                  steps: int | None = None, shuffle: bool = False, epoch: int = 0,
                  persistent: dict | None = None, sample_weight: Any = None, class_weight: Any = None) -> Pass:
        """One pass over `x` (arrays, an iterable of batches or a distributed dataset of this
        strategy). `persistent`: one dict per `fit` call, so a one-shot iterator continues across
        epochs."""
        need_y = kind != PREDICT
        if is_arrays(x):
            batches, known = self._array_batches(x, y, batch_size, steps, shuffle=shuffle, epoch=epoch,
                                                 need_y=need_y, sample_weight=sample_weight)
        elif sample_weight is not None:
            raise ValueError("sample_weight goes with arrays; an iterable of batches carries its weights itself: "
                             "yield (x, y, sample_weight) batches.")
        elif isinstance(x, (DistributedDataset, DistributedIterator)):
            if class_weight is not None:
                raise ValueError("class_weight is not supported with a distributed dataset: make the weights "
                                 "part of its elements, (x, y, sample_weight).")
            batches, known = self._distributed_batches(x, y, batch_size, steps, kind=kind, persistent=persistent)
        else:
            batches, known = self._iterable_batches(x, y, batch_size, steps, need_y=need_y, epoch=epoch,
                                                    persistent=persistent, class_weight=class_weight)
        return Pass(self, kind, batches, known)

    def padded_size(self, batch_size: int) -> int:
        return batching.round_up(batch_size, self.strategy.num_replicas_in_sync * self.accumulation_steps)

    def _array_batches(self, x: Any, y: Any, batch_size: int | None, steps: int | None, *, shuffle: bool,
                       epoch: int, need_y: bool, sample_weight: Any) -> tuple[Iterator, int]:
        if need_y and y is None:
            raise ValueError("fit() and evaluate() on arrays need targets: pass y=.")
        n = leading_size(x, "x")
        for name, value in (("y", y), ("sample_weight", sample_weight)):
            if value is not None and leading_size(value, name) != n:
                raise ValueError(f"x has {n} examples but {name} has {leading_size(value, name)}; "
                                 "they must match.")
        batch_size = 32 if batch_size is None else batch_size
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
        available = math.ceil(n / batch_size)
        if steps is not None and steps > available:
            raise ValueError(f"steps={steps} but the arrays hold only {available} batches of {batch_size}.")
        order = np.random.default_rng((self.seed, epoch)).permutation(n) if shuffle else None
        padded = self.padded_size(batch_size)
        k = self.steps_per_execution
        per_gather = k if k > 1 else batching.batches_per_gather((x, y, sample_weight), batch_size)
        return (batching.array_batches(x, y, batch_size, padded, order=order, max_steps=steps,
                                       weight=sample_weight, steps_per_block=per_gather),
                steps or available)

    def _iterable_batches(self, x: Any, y: Any, batch_size: int | None, steps: int | None, *, need_y: bool,
                          epoch: int, persistent: dict | None, class_weight: Any) -> tuple[Iterator, int | None]:
        if y is not None:
            raise ValueError("y must be None when x is an iterable of (x, y) batches.")
        if isinstance(x, PassSource):  # tf.data: epoch e reads its own order, also after a restart
            one_shot, (_, source) = False, x.begin_pass(epoch)
        elif not isinstance(x, Iterable):
            raise TypeError(f"x must be arrays (numpy / jax, or a pytree of them) or an iterable of batches, "
                            f"got {x!r}.")
        else:
            one_shot = iter(x) is x
            source = persistent.setdefault("iterator", x) if persistent is not None and one_shot else iter(x)
        source = iter(source)
        try:
            first = next(source)
        except StopIteration:
            raise ValueError(
                "The input ran out of data. Pass a re-iterable (a list, or an object whose __iter__ starts "
                "over) for several epochs, or an endless iterator with steps_per_epoch."
            ) from None
        padded = self.padded_size(batch_size or batching.first_batch_size(first))
        stream: Iterator = itertools.chain([first], source)
        if class_weight is not None:
            stream = batching.with_class_weights(stream, class_weight)
        if steps is not None:
            stream = itertools.islice(stream, steps)
        known = steps if steps is not None else _length(x) if not one_shot else None
        return batching.iterable_batches(stream, padded, need_y=need_y), known

    def _distributed_batches(self, dataset: Any, y: Any, batch_size: int | None, steps: int | None, *,
                             kind: str, persistent: dict | None) -> tuple[Iterator, int | None]:
        """Batches of `strategy.experimental_distribute_dataset(...)`: already padded, masked and placed."""
        owner = dataset._dataset._strategy if isinstance(dataset, DistributedIterator) else dataset._strategy
        if owner is not self.strategy:
            raise ValueError(f"This distributed dataset was made by {owner!r}, but the Trainer trains under "
                             f"{self.strategy!r}: distribute it with the Trainer's strategy.")
        if self.strategy.should_use_with_coordinator:
            raise ValueError(f"Under {self.strategy!r}, fit() takes arrays or an iterable of (x, y) batches: "
                             "the coordinator sends each batch to the worker that runs its step.")
        if y is not None or batch_size is not None:
            raise ValueError("A distributed dataset yields (x, y) batches of its own size: leave y and batch_size "
                             "out.")
        if isinstance(dataset, DistributedIterator) and persistent is not None:
            dataset = persistent.setdefault("iterator", dataset)  # one-shot: continues across epochs
        source = iter(dataset)
        sharding = self.strategy.data_sharding()
        need_y = kind != PREDICT

        def batches() -> Iterator[Batch]:
            for i, element in enumerate(source):
                if steps is not None and i >= steps:
                    return
                batch = batching.from_distributed(element, sharding)
                if need_y and batch.y is None:
                    raise ValueError("fit() and evaluate() need (x, y) elements; got an element without targets.")
                yield batch

        known = steps
        if known is None and isinstance(dataset, DistributedDataset):
            known = dataset.known_length()  # None for a stream of unknown length
        return batches(), known

    # -------------------------------------------------------------- placement
    def executions(self, kind: str, block: list) -> list[tuple[tuple, int]]:
        """The compiled calls that run `block`: their device arguments and step counts."""
        if self.scheduled_remotely(kind):
            return []
        k = self.steps_per_execution
        if self.steps_per_call(kind) == 1:
            return [((self._to_device(batch, stacked=False),), 1) for batch in block]
        stacked = self._stacked(block, k)
        if kind == PREDICT:
            return [((stacked,), len(block))]
        return [((stacked, self._active(k, len(block))), len(block))]

    def _active(self, k: int, steps: int) -> jax.Array:
        """The replicated flags of which of a block's k steps hold data (made once per count)."""
        key = ("active", k, steps)
        if key not in self._constants:
            self._constants[key] = jax.device_put(np.arange(k) < steps, self.strategy.replicated_sharding())
        return self._constants[key]

    def _to_device(self, batch: Batch, stacked: bool) -> Batch:
        """`batch` on the devices, split over the data axis (dim 1 when `stacked`). A mask without
        padding is the same every block: it is placed once and reused (the steps never donate
        their batch)."""
        if not batch.on_host:
            return batch
        sharding = self.strategy.data_sharding(stacked)
        mask = batch.mask
        if not (mask == 1).all():
            return place_rows(batch, sharding)
        key = ("mask", mask.shape, mask.dtype, sharding)
        if key not in self._constants:
            self._constants[key] = place_rows(np.ones(mask.shape, mask.dtype), sharding)
        return place_rows(batch.replace(mask=None), sharding).replace(mask=self._constants[key])

    def _stacked(self, block: list[Batch], k: int) -> Batch:
        """A `(k, batch, ...)` block on the devices (in one transfer from the host); missing steps
        repeat the last batch, fully masked."""
        if not block[0].on_host:
            return batching.stack_device_block(block, k, self.strategy.data_sharding(stacked=True))
        return self._to_device(batching.stack_block(block, k), stacked=True)


# ------------------------------------------------------------------ helpers
def is_arrays(x: Any) -> bool:
    """Arrays, or a dict / tuple pytree of arrays (not a generic iterable of batches)."""
    if isinstance(x, (np.ndarray, jax.Array)):
        return True
    if isinstance(x, Mapping):
        return all(isinstance(v, (np.ndarray, jax.Array)) for v in jax.tree.leaves(x)) and bool(x)
    return False


def _length(x: Any) -> int | None:
    try:
        return len(x)
    except TypeError:
        return None
