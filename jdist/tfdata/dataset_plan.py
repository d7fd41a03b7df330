"""A `flat_map` / `interleave` function traced once, when the dataset is made, as TF 2.21 traces it.

TF 2.21 (observed): `range(3).flat_map(f)`, with a counter in `f`, counts 1 after two passes; so does
`interleave`; the inner dataset's spec is the trace's (`flat_map(lambda x: from_tensors(tf.range(x)))` is
`TensorSpec(shape=(None,))`, so `batch` of its rows fails and `ragged_batch` gives RaggedTensors).

Here the function is called once, by JAX on abstract inputs (`user_functions.single_trace`), while the
`Dataset` it builds is recorded instead of made (`Plan`): its source (`from_tensors`, `from_tensor_slices`,
`range`, `zip`, which hand their calls to the recorder while the trace runs: `dataset_sources.recording`)
with the traced values it was given, then the transformations called on it. Per element, the traced values
are computed from the element (`compiled.compile_map`) and the recorded calls are made again on them: no
Python code of the function runs. Where the function cannot be recorded so (a transformation taking a
function, reading a value, `tf.random`, an unknown input dimension) the caller calls it per element, as before.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

import jax
import numpy as np
from jax.core import Tracer

from jdist.tfdata import compiled, dataset_sources, seeding, shape_inference, structure, traced_draws, user_functions
from jdist.tfdata.streaming import dataset_class

# transformations recorded: none takes a user function or draws random numbers
_METHODS = frozenset({"repeat", "take", "skip", "batch", "padded_batch", "unbatch", "concatenate", "enumerate",
                      "prefetch", "shard", "cache", "ragged_batch", "with_options", "map", "filter"})
_LOCAL = threading.local()


class _Refused(TypeError):
    """The function did what a recording cannot replay: it is called per element instead."""


class Plan:
    """A recorded `Dataset`: a call (a source's, or a transformation's on `parent`), its arguments' traced
    values standing as indices into the trace's outputs."""

    def __init__(self, name: str, parent: Plan | None, args: tuple, kwargs: dict, tracers: list):
        self.name, self.parent = name, parent
        self.args = _recorded((args, kwargs), tracers)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name not in _METHODS:
            raise _Refused(f"Dataset.{name} cannot be recorded")

        def call(*args: Any, **kwargs: Any) -> Plan:
            return Plan(name, self, args, kwargs, _LOCAL.tracers)
        return call

    def calls_functions(self) -> bool:
        """Whether a recorded call takes a function (an inner `map` or `filter`)."""
        return self.name in ("map", "filter") or any(isinstance(leaf, Plan) and leaf.calls_functions()
                                                     for leaf in self.args[1]) or \
            (self.parent is not None and self.parent.calls_functions())

    def build(self, values: list) -> Any:
        """The dataset, made of `values` (the traced values, computed for one element)."""
        args, kwargs = _replayed(self.args, values)
        if self.parent is None:
            return getattr(_dataset_class(), self.name)(*args, **kwargs)
        return getattr(self.parent.build(values), self.name)(*args, **kwargs)


class _Traced:
    def __init__(self, index: int):
        self.index = index


def _recorded(value: Any, tracers: list) -> Any:
    leaves, tree = jax.tree_util.tree_flatten(value, is_leaf=lambda v: isinstance(v, Plan))
    out = []
    for leaf in leaves:
        if isinstance(leaf, Tracer):
            tracers.append(leaf)
            out.append(_Traced(len(tracers) - 1))
        elif callable(leaf) and not isinstance(leaf, type) and not _free_of_tracers(leaf):
            raise _Refused("a function using the traced element cannot be recorded")
        elif callable(leaf) and not isinstance(leaf, (type, _dataset_class())):
            out.append(leaf)  # a `map` / `filter` function of the inner dataset, traced where that is made
        elif isinstance(leaf, (Plan, int, float, bool, str, bytes, np.ndarray, np.generic, np.dtype, type)) \
                or leaf is None or isinstance(leaf, _dataset_class()):
            out.append(leaf)
        elif hasattr(leaf, "as_numpy_dtype"):  # a tf.DType
            out.append(leaf)
        else:
            raise _Refused(f"a {type(leaf).__name__} argument cannot be recorded")
    return tree, out


def _free_of_tracers(fn: Any) -> bool:
    """Whether `fn`'s closure and defaults hold no traced value (one would leak out of the trace)."""
    held = [cell.cell_contents for cell in getattr(fn, "__closure__", None) or () if _filled(cell)]
    held += list(getattr(fn, "__defaults__", None) or ())
    return not any(isinstance(leaf, Tracer) for leaf in jax.tree_util.tree_leaves(held))


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 (an empty cell raises)
    except ValueError:
        return False
    return True


def _replayed(recorded: Any, values: list) -> Any:
    tree, leaves = recorded
    return jax.tree_util.tree_unflatten(tree, [values[leaf.index] if isinstance(leaf, _Traced) else
                                               leaf.build(values) if isinstance(leaf, Plan) else leaf
                                               for leaf in leaves])


def _dataset_class() -> type:
    return dataset_class()


def _record(name: str, args: tuple, kwargs: dict) -> Plan:
    """A source's call (`dataset_sources.recording`), recorded while this thread records."""
    return Plan(name, None, args, kwargs, _LOCAL.tracers)


class Traced:
    """`map_func` traced once: `dataset(element)` its dataset for an element, `spec()` its datasets' spec."""

    def __init__(self, plan: Any, trace: shape_inference.Trace, run: Callable[[Any, Any], Any] | None):
        self._plan, self._trace, self._run = plan, trace, run

    def dataset(self, element: Any, table: seeding.PassRandom | None = None) -> Any:
        """The dataset for `element`, its `tf.random` ops drawing from `table` (the pass's)."""
        if not isinstance(self._plan, Plan):
            return self._plan  # a dataset made without the element: the same one each time
        values = list(self._run(element, table or seeding.PassRandom())) if self._run is not None else []
        return user_functions.quiet(self._plan.build)(values)  # an inner `map` function's prints: at the trace

    def spec(self) -> Any:
        """The inner datasets' spec: built on ones with each unknown dimension 1, then 2 (a dimension that
        differs is None, as in TF's trace)."""
        if not isinstance(self._plan, Plan):
            return self._plan.element_spec
        with user_functions.silenced():
            return shape_inference.merged_spec([self.on_ones(size).element_spec for size in (1, 2)])

    def on_ones(self, size: int) -> Any:
        """The dataset built on ones, each unknown dimension `size`."""
        return self._plan.build([np.ones(tuple(d if isinstance(d, int) else size for d in s.shape), np.dtype(s.dtype))
                                 for s in self._trace.shapes])


def trace(dataset: Any, map_func: Callable[..., Any]) -> Traced | None:
    """`map_func` (a `flat_map` or `interleave` function) traced once, or None where it cannot be recorded and
    run from its trace (the caller then calls it per element)."""
    spec = user_functions.input_spec_of(dataset)
    if spec is None or any(not isinstance(s, structure.TensorSpec) or s.shape is None or None in s.shape
                           for s in structure.leaves(spec)):
        return None
    made: list = []

    def recording(*args: Any) -> tuple:
        outer = getattr(_LOCAL, "tracers", None)
        _LOCAL.tracers = tracers = []
        try:
            with dataset_sources.recording(_record):
                out = map_func(*args)
        finally:
            _LOCAL.tracers = outer
        if not isinstance(out, (Plan, _dataset_class())):
            raise _Refused("no dataset returned")
        made[:] = [out]
        return tuple(tracers)

    found = user_functions.single_trace(recording, spec)
    if found is None or not made:
        return None
    if found.host_random or found.host_calls:
        return None
    run: Callable[[Any, Any], Any] | None = None
    if found.shapes:
        fast = compiled.compile_map(found, spec, found.output)
        run = (lambda element, table: fast(element)) if fast is not None else \
            traced_draws.compile_drawing(found, spec, found.output)
        if run is None:
            return None
    traced = Traced(made[0], found, run)
    if isinstance(made[0], Plan) and made[0].calls_functions():
        try:  # its inner `map` / `filter` functions traced now, their Python prints shown once (TF's)
            traced.on_ones(1)
        except Exception:  # noqa: BLE001 (ones it cannot take: they are traced per element, quietly)
            pass
    return traced
