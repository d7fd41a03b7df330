"""`RunOptions`: TF's options of `strategy.run`, accepted so TF code runs unchanged.

TF uses them to let a TPU program take batches of varying size (`experimental_enable_dynamic_batch_size`,
`experimental_bucketizing_dynamic_shape`) and to pass XLA options. jdist's `run` always takes any batch: a
short batch is padded to the compiled shape and masked (docs/input.md), so the options change nothing.
"""
from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """TF's `tf.distribute.RunOptions`, with TF 2.21's defaults (observed: `RunOptions(
    experimental_enable_dynamic_batch_size=True, experimental_bucketizing_dynamic_shape=False,
    experimental_xla_options=None)`)."""

    experimental_enable_dynamic_batch_size: bool = True
    experimental_bucketizing_dynamic_shape: bool = False
    experimental_xla_options: Any = None


def check_run_options(options: Any) -> None:
    """A clear error for anything but `RunOptions` (or None) given as `run`'s `options`."""
    if options is not None and not isinstance(options, RunOptions):
        raise TypeError(f"strategy.run(options=...) takes a tf.distribute.RunOptions (jdist.RunOptions) or None, "
                        f"got {type(options).__name__}.")
