"""`tf.TensorArray`: a list of same-dtype tensors that a loop writes one index at a time, then stacks.

TF has two kinds (observed, TF 2.21): made eagerly, `write` changes the array itself and returns it, and
`read` clears the element unless `clear_after_read=False` (a second read is an error); made inside a
`tf.function`, the array is a value: `write` returns a new array (one left unassigned is lost) and reads never
clear. jdist keeps which kind an array is from where it was made (`tf.executing_eagerly()`).

Elements are kept as a Python list, each one numpy on the host or a JAX array in compiled code. An index
that JAX traces (a compiled `tf.while_loop`'s counter) turns the array into one stacked buffer, written with
`.at[i].set`: its size and element shape must be known by then, and an index past the size cannot be checked
while traced (XLA drops such a write), so give `size`. Inside compiled code an array is a pytree of that buffer,
so it can be a loop variable of `tf.while_loop`.
"""
from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from jdist.input.tensor_spec import TensorShape
from jdist.tf_compat import ops, predicates
from jdist.tf_compat.dtype_table import DType, as_dtype
from jdist.tf_compat.error_types import InvalidArgumentError, OutOfRangeError


def _compatible(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def _merged(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return tuple(y if x is None else x for x, y in zip(a, b))


def _invalid(message: str) -> InvalidArgumentError:
    return InvalidArgumentError(None, None, message)


def _traced(index: Any) -> bool:
    return isinstance(index, Tracer)


class TensorArray:
    """`tf.TensorArray(dtype, size, dynamic_size, clear_after_read, ..., infer_shape, element_shape)`."""

    def __init__(self, dtype: Any, size: Any = None, dynamic_size: bool | None = None,
                 clear_after_read: bool | None = None, tensor_array_name: str | None = None, handle: Any = None,
                 flow: Any = None, infer_shape: bool = True, element_shape: Any = None,
                 colocate_with_first_write_call: bool = True, name: str | None = None):
        if handle is not None:
            raise ValueError("TensorArray handles are not supported: make the array with its dtype and size.")
        if size is None:
            raise ValueError("Size must be declared for TensorArrays when eager execution is enabled.")
        if _traced(size):
            raise ValueError("A TensorArray's size must be known when it is made, not computed in compiled code: "
                             "compute it from a shape (`x.shape[0]`), or give an upper bound.")
        self._dtype: DType = as_dtype(dtype)
        self._dynamic_size = bool(dynamic_size)
        self._eager = predicates.executing_eagerly()
        self._clear_after_read = self._eager and (clear_after_read is None or bool(clear_after_read))
        self._infer_shape = infer_shape
        self._shape: Any = None if element_shape is None else tuple(
            None if d is None else int(d) for d in element_shape)
        self._elements: list[Any] | None = [None] * int(np.asarray(size))
        self._dense: Any = None  # [size, *shape], once an index was traced
        self._cleared: set[int] = set()

    # --- TF's properties ---
    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def dynamic_size(self) -> bool:
        return self._dynamic_size

    @property
    def element_shape(self) -> TensorShape | None:
        """TF's element shape (None while its rank is unknown)."""
        return None if self._shape is None else TensorShape(self._shape)

    @property
    def handle(self) -> None:
        return None

    @property
    def flow(self) -> Any:
        return np.int32(0)

    def size(self, name: str | None = None) -> Any:
        return np.int32(len(self._elements)) if self._elements is not None else np.int32(self._dense.shape[0])

    # --- writing ---
    def write(self, index: Any, value: Any, name: str | None = None) -> "TensorArray":
        """Writes `value` at `index`: into this array when made eagerly, into a new one in a `tf.function`."""
        value = self._with_shape(self._converted(value))  # TF's graph array learns the shape also when the new
        target = self if self._eager else self._copy()    # array is dropped (observed: stack gives zeros of it)
        target._store(index, value)
        return target

    def unstack(self, value: Any, name: str | None = None) -> "TensorArray":
        """The rows of `value` become the elements (TF's: the size becomes their number)."""
        rows = list(ops.unstack(self._converted(value)))
        if len(rows) > self._length() and not self._dynamic_size:
            raise ValueError(f"Cannot unstack {len(rows)} tensors into a TensorArray of static size {self._length()}")
        target = self if self._eager else self._copy()
        target._elements, target._dense, target._cleared = rows, None, set()
        return target

    def scatter(self, indices: Any, value: Any, name: str | None = None) -> "TensorArray":
        target = self if self._eager else self._copy()
        for index, row in zip(self._concrete_list(indices), ops.unstack(self._converted(value))):
            target._write(index, row)
        return target

    def split(self, value: Any, lengths: Any, name: str | None = None) -> "TensorArray":
        value, lengths = self._converted(value), np.asarray(lengths)
        if lengths.ndim != 1:
            raise _invalid(f"Expected lengths to be a vector, received shape: {list(lengths.shape)}")
        if np.ndim(value) == 0:
            raise _invalid("Expected value to be at least a vector, but received shape: []")
        if int(lengths.sum()) != value.shape[0]:
            raise _invalid(f"Expected sum of lengths to be equal to values.shape[0], but sum of lengths "
                           f"is {int(lengths.sum())} and value's shape is: {list(value.shape)}")
        if not self._dynamic_size and len(lengths) != self._length():
            raise _invalid(
                f"TensorArray's size is not equal to the size of lengths ({self._length()} vs. {len(lengths)}), and "
                "the TensorArray is not marked as dynamically resizeable.")
        target = self if self._eager else self._copy()
        cuts = np.cumsum(lengths)[:-1].tolist()
        target._elements, target._dense, target._cleared = list(ops.xp(value).split(value, cuts)), None, set()
        return target

    # --- reading ---
    def read(self, index: Any, name: str | None = None) -> Any:
        if _traced(index):
            return self._densified()[index]
        i = self._checked(index, "read from")
        if self._dense is not None:
            return self._dense[i]
        assert self._elements is not None
        if self._elements[i] is None and i in self._cleared:
            raise _invalid(f"Could not read index {i} twice because it was cleared after a previous read "
                           "(perhaps try setting clear_after_read = false?)")
        value = self._zero_filled(i)
        if self._clear_after_read:
            self._elements[i] = None
            self._cleared.add(i)
        return value

    def stack(self, name: str | None = None) -> Any:
        if self._dense is not None:
            return self._dense
        assert self._elements is not None
        if not self._elements:
            shape = (0,) if self._shape is None or None in self._shape else (0, *self._shape)
            return np.zeros(shape, self._dtype.dtype)
        return ops.stack([self._zero_filled(i) for i in range(len(self._elements))])

    def gather(self, indices: Any, name: str | None = None) -> Any:
        if _traced(indices):
            return self._densified()[jnp.asarray(indices)]
        picked = [self._checked(i, "read from") for i in self._concrete_list(indices)]
        if self._dense is not None:
            return self._dense[jnp.asarray(picked, jnp.int32)]
        return ops.stack([self._zero_filled(i) for i in picked])

    def concat(self, name: str | None = None) -> Any:
        parts = list(self.stack()) if self._dense is not None else [
            self._zero_filled(i) for i in range(self._length())]
        for i, part in enumerate(parts):
            if np.ndim(part) == 0:
                raise _invalid(f"Concat saw a scalar shape at index {i} but requires at least vectors.")
        if not parts:
            return np.zeros((0,), self._dtype.dtype)
        return ops.concat(parts, 0)

    def identity(self) -> "TensorArray":
        return self if self._eager else self._copy()

    def close(self, name: str | None = None) -> None:
        self._elements, self._dense, self._cleared = [], None, set()

    # --- helpers ---
    def _length(self) -> int:
        return len(self._elements) if self._elements is not None else int(self._dense.shape[0])

    def _copy(self) -> "TensorArray":
        twin = object.__new__(TensorArray)
        twin.__dict__.update(self.__dict__)
        twin._elements = None if self._elements is None else list(self._elements)
        twin._cleared = set(self._cleared)
        return twin

    def _converted(self, value: Any) -> Any:
        """`value` as this array's dtype: tensors must have it already (TF's InvalidArgumentError), Python values
        are converted to it."""
        target = self._dtype.dtype
        if isinstance(value, (jax.Array, np.ndarray, np.generic)) or hasattr(value, "__jax_array__"):
            have = np.dtype(value.dtype)
            if have != target and have != jax.dtypes.canonicalize_dtype(target):
                raise _invalid(f"TensorArray dtype is {self._dtype.name} but Op is trying to write dtype "
                               f"{as_dtype(have).name}")
            return ops.convert_to_tensor(value)
        return ops.convert_to_tensor(value, target)

    def _with_shape(self, value: Any) -> Any:
        """`value`, checked against the element shape, which learns from it (`infer_shape`)."""
        shape = tuple(np.shape(value))
        if not _compatible(self._shape, shape):
            raise ValueError(f"Incompatible shape for value ({shape}), expected ({self._shape_text()})")
        if self._infer_shape:
            self._shape = _merged(self._shape, shape)
        return value

    def _write(self, index: Any, value: Any) -> None:
        self._store(index, self._with_shape(self._converted(value)))

    def _store(self, index: Any, value: Any) -> None:
        """Puts a value already converted and shape-checked at `index`."""
        if self._dense is not None or _traced(index):
            self._dense = self._densified().at[index].set(value)
            self._elements = None
            return
        i = self._checked(index, "write to")
        assert self._elements is not None
        self._elements[i] = value
        self._cleared.discard(i)

    def _checked(self, index: Any, verb: str) -> int:
        i = int(np.asarray(index))
        if i < 0:
            what = "Writing to" if verb == "write to" else "Reading from"
            raise OutOfRangeError(f"{what} negative indices (index {i}) is not allowed.")
        if i >= self._length():
            if verb == "write to" and self._dynamic_size:
                if self._elements is None:
                    grow = jnp.zeros((i + 1 - self._length(), *self._dense.shape[1:]), self._dense.dtype)
                    self._dense = jnp.concatenate([self._dense, grow])
                else:
                    self._elements.extend([None] * (i + 1 - len(self._elements)))
            elif verb == "write to":
                raise OutOfRangeError(f"Tried to write to index {i} but array is not resizeable and size is: "
                                      f"{self._length()} ")
            else:
                raise OutOfRangeError(f"Tried to read from index {i} but array size is: {self._length()} ")
        return i

    def _concrete_list(self, indices: Any) -> list[int]:
        return [int(i) for i in np.asarray(indices).reshape(-1)]

    def _shape_text(self) -> str:
        return "<unknown>" if self._shape is None else str(tuple(self._shape))

    def _zero_filled(self, i: int) -> Any:
        assert self._elements is not None
        if self._elements[i] is None:
            if self._shape is None or None in self._shape:
                raise ValueError(f"TensorArray index {i} was never written and its element shape "
                                 f"({self._shape_text()}) is not fully known, so it has no zero value: write it first "
                                 "or give `element_shape`.")
            self._elements[i] = np.zeros(self._shape, self._dtype.dtype)
        return self._elements[i]

    def _densified(self) -> Any:
        """The elements as one [size, *shape] JAX array (for traced indices and compiled loops)."""
        if self._dense is None:
            assert self._elements is not None
            if not self._elements:
                raise ValueError("A TensorArray written or read at a traced index (a compiled tf.while_loop's "
                                 "counter) needs its size beforehand: TensorArray(dtype, size=N).")
            self._dense = jnp.stack([jnp.asarray(self._zero_filled(i)) for i in range(len(self._elements))])
            self._elements = None
        return self._dense


class _HostState:
    """A host array's elements, cleared indices and element shape: one opaque pytree leaf, so that the array's
    structure stays the same while an eager `tf.while_loop` writes it."""

    __slots__ = ("elements", "cleared", "shape")

    def __init__(self, elements: list, cleared: set, shape: Any):
        self.elements, self.cleared, self.shape = elements, cleared, shape


def _flatten(array: TensorArray) -> tuple[tuple, tuple]:
    """Compiled code sees an array as its stacked buffer (fixed shape: a loop variable); host code as one leaf."""
    aux = (array._dtype, array._dynamic_size, array._clear_after_read, array._infer_shape, array._eager)
    if array._dense is not None or predicates.tracing():
        if array._dense is None and (array._shape is None or None in array._shape):
            raise ValueError(
                f"A TensorArray in compiled code (a loop variable of tf.while_loop, or passed into or out of a "
                f"compiled function) is one stacked array, so its element shape must be known first; it is "
                f"{array._shape_text()}: give `element_shape=` when making it, or write an element before.")
        return (array._densified(),), ("dense", *aux)
    assert array._elements is not None
    return (_HostState(array._elements, array._cleared, array._shape),), ("host", *aux)


def _unflatten(aux: tuple, children: Sequence[Any]) -> TensorArray:
    array = object.__new__(TensorArray)
    kind, array._dtype, array._dynamic_size, array._clear_after_read, array._infer_shape, array._eager = aux
    (child,) = children
    if kind == "host" and isinstance(child, _HostState):
        array._elements, array._cleared, array._shape, array._dense = child.elements, child.cleared, child.shape, None
    else:
        shape = getattr(child, "shape", None)
        array._elements, array._cleared, array._dense = None, set(), child
        array._shape = None if shape is None else tuple(shape[1:])
    return array


jax.tree_util.register_pytree_node(TensorArray, _flatten, _unflatten)
