"""`tf.data.Dataset.list_files`: the file names matching glob patterns, as a dataset of strings.

As TF 2.21 (observed): the matches of every pattern, sorted together (a name matched twice is listed twice);
shuffled unless `shuffle=False` (reshuffled each pass, reproducible with `seed`); cardinality the number of
files; InvalidArgumentError when made, if nothing matches.
"""
from __future__ import annotations

import glob
from typing import Any

import numpy as np

from jdist.errors import InvalidArgumentError
from jdist.tfdata.combinators import dataset_class


def list_files(file_pattern: Any, shuffle: bool | None = None, seed: int | None = None,
               name: str | None = None) -> Any:
    """The names of the files matching `file_pattern` (a pattern, or a list of them), shuffled by default."""
    patterns = [p.decode() if isinstance(p, bytes) else str(p)
                for p in np.asarray(file_pattern, dtype=object).reshape(-1)]
    names = sorted(match for pattern in patterns for match in glob.glob(pattern))
    if not names:
        shown = patterns[0] if len(patterns) == 1 else ", ".join(patterns)
        raise InvalidArgumentError(None, None, "Expected 'tf.Tensor(False, shape=(), dtype=bool)' to be true. "
                                               f"Summarized data: b'No files matched pattern: {shown}'")
    dataset = dataset_class().from_tensor_slices(np.array([n.encode() for n in names], dtype=object))
    return dataset if shuffle is False else dataset.shuffle(len(names), seed=seed)
