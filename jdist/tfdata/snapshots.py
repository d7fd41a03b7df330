"""`tf.data.Dataset.snapshot` and `tf.data.experimental.snapshot`: a dataset whose first complete pass is
written under a directory and whose later passes read the written elements back, so an expensive (or random)
pipeline runs once.

TF 2.21 (observed, tests/test_tf_parity_tutorials_load_data.py): nothing is written until the dataset is
iterated; a complete pass writes one sub-directory of `path` (named by a number); later passes give the same
elements (a shuffle before `snapshot` is frozen); a pass left unfinished gives its elements and leaves the next
pass complete; another dataset snapshotted to the same `path` gives its own elements, not the first one's;
the element spec and the cardinality (-1 infinite, -2 unknown) are the input's; it prints as `<_MapDataset ...>`;
`compression` "GZIP" compresses and other values are accepted; `reader_func` / `shard_func` do not change
the elements.

jdist keys a snapshot by the dataset object (TF by a fingerprint of its graph), so an identical pipeline built
again, or run in a later process, writes a new snapshot instead of reading the earlier one. The files are
jdist's own (pickled numpy elements), not TF's snapshot format.
"""
from __future__ import annotations

import gzip
import os
import pickle
import secrets
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator

if TYPE_CHECKING:
    from jdist.tfdata.dataset import Dataset

_DONE = "snapshot.metadata"  # written last: the snapshot is complete
_ELEMENTS = "00000000.shard"


def _open(path: str, mode: str, compression: Any) -> IO[bytes]:
    if str(compression or "").upper() == "GZIP":
        return gzip.open(path, mode)  # type: ignore[return-value]
    return open(path, mode)  # noqa: SIM115 (returned to a with-block)


def snapshot(self: Dataset, path: str, compression: str | None = "AUTO",
             reader_func: Callable[..., Any] | None = None, shard_func: Callable[..., Any] | None = None,
             name: str | None = None) -> Dataset:
    """`dataset.snapshot(path, ...)`: the first complete pass is written under `path`; later passes read it."""
    from jdist.tfdata._iterators import Generated

    for label, fn in (("reader_func", reader_func), ("shard_func", shard_func)):
        if fn is not None and not callable(fn):
            raise TypeError(f"Dataset.snapshot: `{label}` must be a function, got {type(fn).__name__}")
    folder = os.path.join(os.fspath(path), str(secrets.randbits(63)))
    done, data = os.path.join(folder, _DONE), os.path.join(folder, _ELEMENTS)

    def read() -> Iterator:
        with _open(data, "rb", compression) as f:
            while True:
                try:
                    yield pickle.load(f)  # noqa: S301 (jdist's own file)
                except EOFError:
                    return

    def elements(key: tuple) -> Iterator:
        if os.path.exists(done):
            yield from read()
            return
        os.makedirs(folder, exist_ok=True)
        part = f"{data}.{secrets.token_hex(4)}.tmp"  # a pass left unfinished leaves no snapshot
        try:
            with _open(part, "wb", compression) as out:
                for element in self._elements(key):
                    pickle.dump(element, out, protocol=pickle.HIGHEST_PROTOCOL)
                    yield element
            if not os.path.exists(done):
                os.replace(part, data)
                open(done, "wb").close()
        finally:
            if os.path.exists(part):
                os.remove(part)

    return self._derive(lambda key: Generated(lambda: elements(key)), self._cardinality,
                        lambda: self.element_spec, "MapDataset")


def snapshot_transformation(path: str, compression: str | None = "AUTO",
                            reader_func: Callable[..., Any] | None = None,
                            shard_func: Callable[..., Any] | None = None) -> Callable[[Dataset], Dataset]:
    """`tf.data.experimental.snapshot(path, ...)`: `dataset.apply(...)` form of `Dataset.snapshot`."""
    return lambda dataset: snapshot(dataset, path, compression, reader_func, shard_func)
