"""`tf.data.Dataset`'s static sources over tensors and Python: `from_tensor_slices`, `from_tensors`, `range`,
`from_generator`, `zip` (the `Dataset` class takes them as static methods), and the hook through which a
`flat_map` / `interleave` function's trace records them instead of making datasets (`recording`).

While a thread records (`dataset_plan` traces a function once, as TF 2.21 does), `from_tensors`,
`from_tensor_slices`, `range` and `zip` hand their arguments to the recorder and return what it returns (a
recorded call); otherwise they make the dataset. Nothing patches `Dataset` for it.
"""
from __future__ import annotations

import builtins
import threading
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Callable

import grain
import numpy as np

import jdist.tfdata.composite_batch as composite_batch
import jdist.tfdata.generator_signature as generator_signature
import jdist.tfdata.graph_dtypes as graph_dtypes
from jdist.tfdata import structure
from jdist.tfdata._iterators import Generated, Slices, as_iter
from jdist.tfdata.options import INFINITE, UNKNOWN
from jdist.tfdata.streaming import dataset_class
from jdist.thread_locals import setting

if TYPE_CHECKING:
    from jdist.tfdata.dataset import Dataset

Key = tuple
# A recorder: (source name, args, kwargs) -> what the source returns while recording.
Recorder = Callable[[str, tuple, dict], Any]
_LOCAL = threading.local()


def recording(recorder: Recorder) -> AbstractContextManager[Any]:
    """While the block runs, this thread's recordable sources return `recorder(name, args, kwargs)`."""
    return setting(_LOCAL, "recorder", recorder)


def _recorded(name: str, args: tuple, kwargs: dict) -> Any:
    """The recorder's value for this call, or None when this thread does not record."""
    recorder = getattr(_LOCAL, "recorder", None)
    return None if recorder is None else recorder(name, args, kwargs)


def check_count(name: str, value: Any) -> int:
    """`value` as an int (a Python or numpy integer, or a scalar integer tensor, as TF takes), else TypeError."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu":  # a tensor, as TF takes
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"Dataset.{name}: expected an int, got {type(value).__name__} {value!r}")
    return int(value)


def from_tensor_slices(tensors: Any, name: str | None = None) -> Dataset:
    """One element per row of `tensors` (a tensor, or a tuple/dict of tensors sharing dim 0)."""
    planned = _recorded("from_tensor_slices", (tensors,), {"name": name})
    if planned is not None:
        return planned
    components = structure.normalize(tensors)
    if composite_batch.has_composite(components):  # ragged or sparse components: rows by their kind
        rows, n, row_spec = composite_batch.slices(components)
        return dataset_class()(lambda key: Slices(rows, n), n, lambda: row_spec, kind="TensorSliceDataset",
                               static=True)
    parts = structure.leaves(components)
    if not parts:
        raise ValueError("from_tensor_slices: `tensors` holds no tensor")
    if any(np.ndim(p) == 0 for p in parts):
        raise ValueError("from_tensor_slices: every component needs at least one dimension to slice (got a "
                         "scalar); use Dataset.from_tensors for a single element")
    sizes = [int(np.shape(p)[0]) for p in parts]
    if len(set(sizes)) != 1:
        raise ValueError(f"from_tensor_slices: every component must have the same size in dimension 0; got "
                         f"{sizes}")
    components = structure.map_leaves(structure.read_only, components)
    n = sizes[0]
    source = Slices(components, n)
    return dataset_class()(lambda key: source, n, lambda: structure.spec_of(source[0]) if n else
                           structure.map_leaves(lambda a: structure.TensorSpec(a.shape[1:], a.dtype), components),
                           kind="TensorSliceDataset", static=True)


def from_tensors(tensors: Any, name: str | None = None) -> Dataset:
    """One element: `tensors` itself."""
    planned = _recorded("from_tensors", (tensors,), {"name": name})
    if planned is not None:
        return planned
    element = structure.normalize(tensors)
    source = grain.MapDataset.source([element])
    return dataset_class()(lambda key: source, 1, lambda: structure.spec_of(element), kind="TensorDataset",
                           static=True)


def range(*args: int, output_type: Any = np.int64, name: str | None = None) -> Dataset:  # noqa: A001 (TF's name)
    """`range(stop)`, `range(start, stop[, step])`: int64 scalars, as TF's."""
    graph_dtypes.check_range_bounds(args)  # TF's int64 bounds (TF 2.21, observed), also while recording
    planned = _recorded("range", args, {"output_type": output_type, "name": name})
    if planned is not None:
        return planned
    bounds = builtins.range(*(check_count("range", a) for a in args))
    dtype = np.dtype(getattr(output_type, "as_numpy_dtype", output_type))
    source = Slices(np.arange(bounds.start, bounds.stop, bounds.step, dtype=dtype), len(bounds))
    return dataset_class()(lambda key: source, len(bounds), lambda: structure.TensorSpec((), dtype),
                           kind="RangeDataset", static=True)


def from_generator(generator: Callable[..., Any], output_types: Any = None, output_shapes: Any = None,
                   args: tuple | None = None, output_signature: Any = None, name: str | None = None) -> Dataset:
    """Elements from `generator(*args)`, called again for each pass; checked against `output_signature`."""
    if not callable(generator):
        raise TypeError("`generator` must be a Python callable. Pass the generator function, not a generator "
                        "object.")
    if output_signature is None and output_types is None:
        raise TypeError("from_generator: give `output_signature` (a structure of TensorSpecs), as TF requires")
    call_args = tuple(args or ())
    signature = generator_signature.signature_from(output_signature, output_types, output_shapes)

    def make(key: Key) -> grain.IterDataset:
        return Generated(lambda: (generator_signature.conform(element, signature)
                                  for element in generator(*call_args)))

    return dataset_class()(make, UNKNOWN, lambda: signature, kind="FlatMapDataset", static=True)


def zip(*datasets: Any, name: str | None = None) -> Dataset:  # noqa: A001 (TF's name)
    """Elements of several datasets side by side (a tuple, or the structure given), until one ends."""
    planned = _recorded("zip", datasets, {"name": name})
    if planned is not None:
        return planned
    cls = dataset_class()
    nested = datasets[0] if len(datasets) == 1 and not isinstance(datasets[0], cls) else datasets
    parts = structure.leaves(nested)
    if any(isinstance(d, list) for d in (nested, *parts)):
        raise TypeError("Invalid input to `zip`. Inputs are expected to be (nested) structures of "
                        "`tf.data.Dataset` objects. Python `list` is not supported and you should use `tuple` "
                        "instead.")
    if not parts or not all(isinstance(d, cls) for d in parts):
        raise TypeError("Dataset.zip takes Datasets, or one tuple/dict of Datasets")
    cards = [d._cardinality for d in parts]
    finite = [c for c in cards if c >= 0]
    card = min(finite) if finite else (UNKNOWN if UNKNOWN in cards else INFINITE)
    if UNKNOWN in cards and finite:
        card = UNKNOWN

    def rebuild(values: list) -> Any:
        it = iter(values)
        return structure.map_leaves(lambda _: next(it), nested)

    def make(key: Key) -> Any:
        built = [d._build(key) for d in parts]
        if all(isinstance(b, grain.MapDataset) for b in built):
            n = min(len(b) for b in built)
            return grain.experimental.ZipMapDataset([b.slice(slice(0, n)) for b in built]).map(
                lambda values: rebuild(list(values)))
        return Generated(lambda: (rebuild(list(v)) for v in builtins.zip(*(iter(as_iter(b)) for b in built))))

    return cls(make, card, lambda: structure.map_leaves(lambda d: d.element_spec, nested), kind="ZipDataset",
               static=all(d._static for d in parts))
