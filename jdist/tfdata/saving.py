"""`tf.data.Dataset.save` / `Dataset.load` (and `tf.data.experimental.save` / `load`): a dataset's elements
written to a directory and read back as a dataset, so an expensive pipeline runs once.

TF 2.21 (observed): `save` returns None and overwrites what the path held; `load` gives the elements in order,
with the saved element spec (or the one given) and the saved count as its cardinality, printed as
`<_LoadDataset element_spec=...>`; `compression="GZIP"` on both; a path with nothing saved raises NotFoundError
"tf.data snapshot element_spec file not found: <path>/dataset_spec.pb.". The files are jdist's own (a spec file
and a pickled stream of numpy elements), not TF's snapshot format: TF cannot read them, nor jdist TF's.
"""
from __future__ import annotations

import gzip
import os
import pickle
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator

if TYPE_CHECKING:
    from jdist.tfdata.dataset import Dataset

_SPEC = "dataset_spec.pb"  # TF's name, so that its error text names the same file
_ELEMENTS = "elements.pickle"


def _open(path: str, mode: str, compression: str | None) -> IO[bytes]:
    if compression in (None, ""):
        return open(path, mode)  # noqa: SIM115 (returned to a with-block)
    if str(compression).upper() == "GZIP":
        return gzip.open(path, mode)  # type: ignore[return-value]
    raise ValueError(f"Dataset.save/load: compression must be None or 'GZIP', got {compression!r}")


def save(self: Dataset, path: str, compression: str | None = None, shard_func: Callable[..., Any] | None = None,
         checkpoint_args: Any = None) -> None:
    """Writes one pass of this dataset's elements under the directory `path` (replacing what it held)."""
    from jdist.tfdata.options import INFINITE

    if self._cardinality == INFINITE:
        raise ValueError("Dataset.save: the dataset is infinite; take a finite part first (dataset.take(n))")
    path = os.fspath(path)
    os.makedirs(path, exist_ok=True)
    count = 0
    with _open(os.path.join(path, _ELEMENTS), "wb", compression) as out:
        for element in self.begin_pass()[1]:
            pickle.dump(element, out, protocol=pickle.HIGHEST_PROTOCOL)
            count += 1
    with open(os.path.join(path, _SPEC), "wb") as out:
        pickle.dump({"element_spec": self.element_spec, "cardinality": count}, out)


def load(path: str, element_spec: Any = None, compression: str | None = None,
         reader_func: Callable[..., Any] | None = None) -> Dataset:
    """The dataset `save` wrote under `path` (TF's NotFoundError where nothing was saved there)."""
    import grain

    from jdist.errors import NotFoundError
    from jdist.tfdata._iterators import Generated
    from jdist.tfdata.combinators import dataset_class

    path = os.fspath(path)
    spec_file = os.path.join(path, _SPEC)
    if not os.path.exists(spec_file):
        raise NotFoundError(None, None, f"tf.data snapshot element_spec file not found: {spec_file}.")
    with open(spec_file, "rb") as f:
        meta = pickle.load(f)  # noqa: S301 (jdist's own file)
    spec = meta["element_spec"] if element_spec is None else element_spec

    def elements() -> Iterator:
        with _open(os.path.join(path, _ELEMENTS), "rb", compression) as f:
            while True:
                try:
                    yield pickle.load(f)  # noqa: S301
                except EOFError:
                    return

    def make(key: tuple) -> grain.IterDataset:
        return Generated(elements)
    return dataset_class()(make, int(meta["cardinality"]), lambda: spec, kind="LoadDataset", static=True)
