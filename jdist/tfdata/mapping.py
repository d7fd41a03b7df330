"""`Dataset.map`: the function traced once when the dataset is made, then run per element as TF runs it.

TF 2.21 (observed) traces a map function once, at `map`: its Python prints and other Python side effects
happen then, and each element runs the traced graph (`compiled`: compiled once per dataset where the trace is
a pure computation; else the Python function per element, its prints held back, its `tf.random` ops drawing
from a generator made per pass, `seeding.PerPass`, as TF's op state is made per iterator).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import grain

from jdist.tfdata import compiled, seeding, shape_inference, structure, traced_draws, user_functions
from jdist.tfdata.options import AUTOTUNE

if TYPE_CHECKING:
    from jdist.tfdata.dataset import Dataset


def map_dataset(self: Dataset, map_func: Callable[..., Any], num_parallel_calls: int | None = None,
                deterministic: bool | None = None, name: str | None = None) -> Dataset:
    """`map_func` on each element (a tuple is spread into arguments), as TF: traced once, when the dataset is
    made (its Python side effects then), and run per element (compiled where it can be: `compiled`)."""
    passes = seeding.PerPass()
    if isinstance(map_func, grain.transforms.Map):  # grain's own loaders (Keras's adapter) map this way
        transform = map_func

        def apply(element: Any, table: seeding.PassRandom | None = None) -> Any:
            return transform.map(element)
    elif callable(map_func):
        called = user_functions.quiet(map_func)  # its Python prints: once, at the trace below (TF's)

        def apply(element: Any, table: seeding.PassRandom | None = None) -> Any:
            with seeding.drawing(table or seeding.PassRandom()):
                out = structure.call(called, element)
            # TF 2.21 (observed): a list returned by the function is a tuple of components (one inside a
            # tuple stays one tensor)
            return structure.normalize(tuple(out) if type(out) is list else out)
    else:
        raise TypeError(f"Dataset.map: `map_func` must be callable, got {type(map_func).__name__}")
    threads = self._threads
    if num_parallel_calls is not None and num_parallel_calls != 1:
        threads = max(threads, 4 if num_parallel_calls == AUTOTUNE else int(num_parallel_calls))

    # TF traces the function now, once (observed): jdist.tfdata.user_functions
    trace, traced_output, host = (None, None, []) if isinstance(map_func, grain.transforms.Map) else \
        user_functions.trace_mapped(self, map_func)
    fast = None if traced_output is None else compiled.compile_map(trace, user_functions.input_spec_of(self),
                                                                  traced_output)
    drawn = None if fast is not None or traced_output is None else \
        traced_draws.compile_drawing(trace, user_functions.input_spec_of(self), traced_output)  # tf.random ops

    def spec() -> Any:
        with user_functions.silenced():  # TF's spec runs nothing: no print shows
            out = shape_inference.mapped_spec(apply, trace, self.element_spec, self._spec_elements(),
                                              lambda: traced_output)
        return out if trace is not None else user_functions.unknown_host_shapes(out, host)

    def make(key: tuple) -> Any:
        if fast is not None:
            return self._build(key).map(fast)
        table = passes.of(key)
        if drawn is not None:
            run = drawn
            return self._build(key).map(lambda element: run(element, table))
        return self._build(key).map(lambda element: apply(element, table))

    kind = "MapDataset" if num_parallel_calls is None else "ParallelMapDataset"  # TF's class names
    return self._derive(make, self._cardinality, spec, kind, threads, static=False)
