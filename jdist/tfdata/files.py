"""`tf.data.Dataset.list_files`: the file names matching glob patterns, as a dataset of strings; and
`Dataset.cache(filename)`, the elements kept in files.

As TF 2.21 (observed): the matches of every pattern, sorted together (a name matched twice is listed twice);
shuffled unless `shuffle=False` (reshuffled each pass, reproducible with `seed`); cardinality the number of
files; InvalidArgumentError when made, if nothing matches.
"""
from __future__ import annotations

import glob
import os
import pickle
from typing import Any, Iterator

import numpy as np

from jdist.errors import InvalidArgumentError, NotFoundError
from jdist.tfdata._iterators import Generated
from jdist.tfdata.combinators import dataset_class


def matching_paths(pattern: str) -> list[str]:
    """The paths `pattern` matches, named as TF names them: a pattern with a wildcard and no folder before it
    is read in "./" (TF 2.21, observed: `*.txt` matches `./a.txt`, `a.txt` is `a.txt`)."""
    wildcard = next((i for i, c in enumerate(pattern) if c in "*?[\\"), None)
    if wildcard is not None and "/" not in pattern[:wildcard]:
        pattern = "./" + pattern
    return glob.glob(pattern)


def list_files(file_pattern: Any, shuffle: bool | None = None, seed: int | None = None,
               name: str | None = None) -> Any:
    """The names of the files matching `file_pattern` (a pattern, or a list of them), shuffled by default."""
    patterns = [p.decode() if isinstance(p, bytes) else str(p)
                for p in np.asarray(file_pattern, dtype=object).reshape(-1)]
    names = sorted(match for pattern in patterns for match in matching_paths(pattern))
    if not names:
        shown = patterns[0] if len(patterns) == 1 else ", ".join(patterns)
        raise InvalidArgumentError(None, None, "Expected 'tf.Tensor(False, shape=(), dtype=bool)' to be true. "
                                               f"Summarized data: b'No files matched pattern: {shown}'")
    dataset = dataset_class().from_tensor_slices(np.array([n.encode() for n in names], dtype=object))
    return dataset if shuffle is False else dataset.shuffle(len(names), seed=seed)


def file_cache(dataset: Any, filename: str) -> Any:
    """`dataset.cache(filename)`, as TF 2.21 (observed): the first complete pass writes `filename.index` and
    `filename.data-00000-of-00001`; once they exist, every pass (of this dataset or of any other, in this run or a
    later one) reads the elements from them; a pass left unfinished writes nothing; NotFoundError when the folder is
    missing. The files are jdist's own (pickled numpy elements), not TF's format."""
    index, data = f"{filename}.index", f"{filename}.data-00000-of-00001"

    def elements(key: tuple) -> Iterator:
        if os.path.exists(index):
            with open(data, "rb") as f:
                yield from pickle.load(f)
            return
        if not os.path.isdir(os.path.dirname(filename) or "."):
            raise NotFoundError(None, None, f"{filename}_0.lockfile; No such file or directory")
        filled = []
        for element in dataset._elements(key):
            filled.append(element)
            yield element
        if not os.path.exists(index):
            with open(data, "wb") as f:
                pickle.dump(filled, f)
            open(index, "wb").close()  # written last: the cache is complete
    return dataset._derive(lambda key: Generated(lambda: elements(key)), dataset._cardinality,
                           lambda: dataset.element_spec, "CacheDataset")
