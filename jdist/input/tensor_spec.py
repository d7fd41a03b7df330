"""What TF scripts read off datasets and iterators: `TensorSpec`, `PerReplicaSpec`, `Optional`.

`DistributedDataset.element_spec` is the dataset's element spec seen by one replica: the
batch dimension is None (a replica's share of the last batch may be shorter), and with
several replicas each component is a `PerReplicaSpec` of one spec per replica, as TF 2.21
prints it. `DistributedIterator.get_next_as_optional()` returns an `Optional`.
"""
from __future__ import annotations

import dataclasses
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jdist.errors import InvalidArgumentError
from jdist.input import calling_code
from jdist.input.calling_code import library_code
from jdist.input.tensor_shape import TensorShape as TensorShape  # `tf.TensorShape`, read from here too


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """`tf.TensorSpec`: a component's shape (None for a dimension that varies) and dtype."""

    shape: Any
    dtype: Any = np.float32
    name: str | None = None

    def __post_init__(self):
        # TF's forms: a list, a TensorShape (`as_list()`), None for an unknown rank (kept as None); TF's dtypes.
        shape = self.shape
        if getattr(shape, "rank", 0) is None:  # TensorShape(None): kept as None
            shape = None
        if isinstance(shape, int):  # TF's: `tf.TensorSpec(2)` has shape (2,) (observed, TF 2.21)
            shape = TensorShape([shape])
        if shape is not None:
            dims = shape.as_list() if hasattr(shape, "as_list") else shape
            # TF's `spec.shape`: a TensorShape; a symbolic dimension (jax.export's, in a saved function) is None
            shape = TensorShape(None if d is None or jax.export.is_symbolic_dim(d) else int(d) for d in dims)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", np.dtype(getattr(self.dtype, "as_numpy_dtype", self.dtype)))

    def __repr__(self) -> str:
        dtype = np.dtype(self.dtype)
        kind = "string" if dtype.kind in "OSU" else dtype.name
        shape = "<unknown>" if self.shape is None else self.shape
        return f"TensorSpec(shape={shape}, dtype=tf.{kind}, name={self.name!r})"

    def is_compatible_with(self, value: Any) -> bool:
        """Whether `value` (an array) has this spec's dtype and a shape this spec allows."""
        shape = np.shape(value)
        fits = self.shape is None or len(shape) == len(self.shape) and all(
            a is None or a == b for a, b in zip(self.shape, shape))
        return fits and np.dtype(getattr(value, "dtype", type(value))) == self.dtype


def _spec_shape(spec: TensorSpec) -> Any:
    """`spec.shape`: TF's `TensorShape(None)` (observed, TF 2.21: `tf.TensorSpec(shape=None).shape`, rank None,
    printed `<unknown>`) for a script's code where the rank is unknown; jdist's own code reads None there."""
    shape = spec.__dict__["shape"]
    if shape is None and not library_code(sys._getframe(1)):
        return TensorShape(None)
    return shape


def _set_spec_shape(spec: TensorSpec, shape: Any) -> None:
    spec.__dict__["shape"] = shape


def _spec_dtype(spec: TensorSpec) -> Any:
    """`spec.dtype`: TF's `tf.DType` for a script's code (observed, TF 2.21: `print(spec.dtype)` is
    `<dtype: 'float32'>`); numpy's dtype for jdist's own."""
    return calling_code.dtype_for(spec.__dict__["dtype"], sys._getframe(1))


def _set_spec_dtype(spec: TensorSpec, dtype: Any) -> None:
    spec.__dict__["dtype"] = dtype


TensorSpec.shape = property(_spec_shape, _set_spec_shape)  # pyright: ignore[reportAttributeAccessIssue]
TensorSpec.dtype = property(_spec_dtype, _set_spec_dtype)  # pyright: ignore[reportAttributeAccessIssue]



@dataclasses.dataclass(frozen=True)
class PerReplicaSpec:
    """One component's spec on each replica (TF's `PerReplicaSpec`)."""

    specs: tuple

    def __repr__(self) -> str:
        return f"PerReplicaSpec({', '.join(map(repr, self.specs))})"


def per_replica_spec(spec: Any, num_replicas: int, split: bool = True) -> Any:
    """`spec` (a tree of TensorSpecs of global batches when `split`, else of each replica's own batches) as each
    replica sees it. TF 2.21 (observed, 2 replicas): a static global batch of 4 (`drop_remainder=True`) gives each
    replica `(2,)`; one of 5 or 3, or an unknown one, `(None,)`; a per-replica dataset's static `(2,)` stays."""
    def rows(dim: Any) -> Any:
        if dim is None or not split:
            return dim
        return dim // num_replicas if dim % num_replicas == 0 else None

    def one(s: TensorSpec) -> Any:
        local = TensorSpec(None if s.shape is None else (rows(s.shape[0]) if len(s.shape) else None, *s.shape[1:]),
                           s.dtype)
        return local if num_replicas == 1 else PerReplicaSpec((local,) * num_replicas)
    return jax.tree.map(one, spec, is_leaf=lambda x: isinstance(x, TensorSpec))


def spec_of_batch(leaves: list, treedef: Any) -> Any:
    """TensorSpecs of one host batch's leaves, batch dimension unknown."""
    return jax.tree.unflatten(treedef, [TensorSpec((None, *np.shape(x)[1:]), np.asarray(x).dtype) for x in leaves])


class Optional:
    """`tf.experimental.Optional`: a value, or none at the end of the data (TF 2.21's, observed: `has_value()`
    prints `tf.Tensor(True, shape=(), dtype=bool)`; `get_value()` without a value is InvalidArgumentError)."""

    def __init__(self, value: Any = None, has_value: bool = False, element_spec: Any = None):
        self._value, self._has_value, self._element_spec = value, has_value, element_spec

    def has_value(self, name: str | None = None) -> Any:
        """A boolean scalar tensor (`if opt.has_value():` reads it as a bool)."""
        return jnp.asarray(bool(self._has_value))

    def get_value(self, name: str | None = None) -> Any:
        if not self._has_value:
            raise InvalidArgumentError(None, None, "The given optional does not have a value.")
        return self._value

    @property
    def element_spec(self) -> Any:
        """The spec of the value it holds or would hold (the distributed dataset's)."""
        return self._element_spec

    def __repr__(self) -> str:
        return f"Optional(has_value={self._has_value})"
