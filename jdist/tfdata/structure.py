"""Elements as `tf.data` sees them: nested tuples and dicts of numpy arrays, lists read as tensors.

TF's `tf.data` treats a tuple or a dict as structure and a Python list as one tensor
(`from_tensor_slices([1, 2, 3])` is three int32 scalars, not a tuple of three datasets);
Python ints become int32 and Python floats float32, while numpy arrays keep their dtype;
strings become bytes (observed in TF 2.21: `[b'a', b'c', b'e']`). These helpers convert
once, at the edge, so every transformation works on numpy leaves.
"""
from __future__ import annotations

import collections
import contextlib
import sys
from typing import Any, Callable

import numpy as np

from jdist.errors import InvalidArgumentError
from jdist.input.calling_code import library_code
from jdist.input.tensor_spec import TensorShape, TensorSpec
from jdist.tfdata import composites, host_device, operands, tensor_index, tensor_methods, tensor_numpy, tensor_text


def to_leaf(value: Any) -> np.ndarray | np.generic:
    """One tensor: numpy keeps its dtype; Python numbers take TF's default dtypes; text becomes bytes."""
    if composites.is_composite(value):  # a ragged or sparse tensor stays whole (`composite_batch`)
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        if value.dtype.kind == "U":
            if not value.ndim:
                return np.bytes_(str(value).encode())
            return np.char.encode(np.asarray(value, dtype=str), "utf-8").astype(object)
        return value
    if hasattr(value, "__array__") and not isinstance(value, (list, str, bytes)):
        return np.asarray(value)
    if isinstance(value, str):
        return np.bytes_(value.encode("utf-8"))
    if isinstance(value, bytes):
        return np.bytes_(value)
    try:
        array = np.asarray(value)
    except ValueError:  # TF 2.21's text (observed) for `[[1, 2], [3]]`
        raise ValueError("Can't convert non-rectangular Python sequence to Tensor.") from None
    if array.dtype.kind == "U":
        return np.char.encode(array, "utf-8").astype(object)
    if array.dtype.kind == "S":
        return array.astype(object)
    if array.dtype == np.float64 and _python_numbers(value, (int, float)):  # TF: [1.0, 2] is float32 too
        return array.astype(np.float32)
    if array.dtype == np.int64 and _python_numbers(value, int):
        return array.astype(np.int32)
    if array.dtype == object:
        raise TypeError(f"tf.data: cannot convert {type(value).__name__} {value!r:.80} to a tensor: its items have "
                        "different shapes or types. Give a numpy array, or a tuple/dict of arrays for several "
                        "components.")
    return array


def _python_numbers(value: Any, kind: type | tuple[type, ...]) -> bool:
    """Whether `value` is built from Python numbers (not numpy ones), which TF converts with its own defaults."""
    if isinstance(value, (list, tuple)):
        return all(_python_numbers(v, kind) for v in value)
    return isinstance(value, kind) and not isinstance(value, bool)


def read_only(array: Any) -> np.ndarray:
    """A view of `array` that refuses writes (strings as bytes objects, as TF batches them): a dataset's
    source rows can then never be changed in place by a map function."""
    view = (array.astype(object) if array.dtype.kind == "S" else array).view()
    view.flags.writeable = False
    return view


def normalize(element: Any) -> Any:
    """The element with every tensor converted by `to_leaf`; tuples, dicts and namedtuples kept."""
    if type(element) is np.ndarray and element.dtype.kind != "U":  # the common case, first
        return element
    return map_leaves(to_leaf, element)


def map_leaves(fn: Callable[[Any], Any], element: Any) -> Any:
    """`fn` over the tensors of `element`, keeping its structure."""
    if isinstance(element, dict):
        return _dict_like(element, {k: map_leaves(fn, v) for k, v in element.items()})
    if isinstance(element, tuple):
        items = [map_leaves(fn, v) for v in element]
        return type(element)(*items) if hasattr(element, "_fields") else tuple(items)
    return fn(element)


def _dict_like(original: dict, items: dict) -> dict:
    """`items` as an OrderedDict where `original` is one (TF 2.21 keeps an OrderedDict element's type through
    its specs, map and batch, observed: `make_csv_dataset` gives OrderedDicts), else as a dict."""
    return collections.OrderedDict(items) if isinstance(original, collections.OrderedDict) else items


def leaves(element: Any) -> list:
    """The tensors of `element` in order (dict entries in insertion order)."""
    if isinstance(element, dict):
        return [x for v in element.values() for x in leaves(v)]
    if isinstance(element, tuple):
        return [x for v in element for x in leaves(v)]
    return [element]


def as_tensor(leaf: Any) -> Any:
    """A component as a TF script sees it: a `HostTensor`, a string too (a 0-d bytes tensor, so that
    `s == "a"` and `s + "!"` compare and join as TF's, and `s.numpy()` is its bytes)."""
    if isinstance(leaf, (bytes, str)):
        return np.asarray(leaf.encode() if isinstance(leaf, str) else bytes(leaf), dtype=object).view(HostTensor)
    return HostTensor.of(leaf)


def call(fn: Callable, element: Any) -> Any:
    """Calls a user function on an element as TF does: a tuple is spread into arguments, and each tensor
    is a `HostTensor` (immutable to augmented assignment, as TF's tensors)."""
    element = map_leaves(as_tensor, element)
    if isinstance(element, tuple) and not hasattr(element, "_fields"):
        return fn(*element)
    return fn(element)


def verdict(predicate: Callable, element: Any, after: str) -> bool:
    """`predicate(element)` as a Python bool; not a boolean scalar: TF 2.21's ValueError, its text's ending
    after "scalar tensor" given (`filter`'s and `take_while`'s differ, observed)."""
    out = np.asarray(call(predicate, element))
    if out.shape != () or out.dtype != np.bool_:
        raise ValueError("Invalid `predicate`. `predicate` must return a `tf.bool` scalar tensor"
                         + after.format(spec=spec_of(out)))
    return bool(out)


def stack(elements: list) -> Any:
    """A batch of same-structured elements: each tensor stacked along a new leading axis."""
    first = elements[0]
    if isinstance(first, dict):
        return _dict_like(first, {k: stack([e[k] for e in elements]) for k in first})
    if isinstance(first, tuple):
        items = [stack([e[i] for e in elements]) for i in range(len(first))]
        return type(first)(*items) if hasattr(first, "_fields") else tuple(items)
    try:
        # a bytes scalar goes in as an object: a numpy "S" array would drop its trailing NUL bytes
        out = np.stack([np.asarray(e, dtype=object) if isinstance(e, bytes) else np.asarray(e) for e in elements])
        return out.astype(object) if out.dtype.kind == "S" else out  # TF batches strings as bytes objects
    except ValueError:
        first = tuple(np.shape(elements[0]))
        other = next(tuple(np.shape(e)) for e in elements if tuple(np.shape(e)) != first)
        raise InvalidArgumentError(  # TF 2.21's text (observed), and the fix
            None, None, f"Cannot add tensor to the batch: number of elements does not match. Shapes are: [tensor]: "
                        f"{list(other)}, [batch]: {list(first)} (pad them with padded_batch, or resize them in a "
                        "map first)") from None


def unstack(batch: Any) -> list:
    """The rows of a batched element (the inverse of `stack`)."""
    parts = leaves(batch)
    if not parts:
        return []
    sizes = {int(np.shape(p)[0]) if np.ndim(p) else -1 for p in parts}
    if -1 in sizes or len(sizes) != 1:
        raise ValueError(f"unbatch: every component needs the same leading dimension; got {sorted(sizes)} (-1: a "
                         "scalar)")
    (n,) = sizes
    return [map_leaves(lambda x, i=i: x[i], batch) for i in range(n)]


def spec_of(element: Any) -> Any:
    """The `TensorSpec` structure of one element."""
    return map_leaves(lambda x: composites.spec_of(x) or TensorSpec(tuple(np.shape(x)),
                                                                     _spec_dtype(np.asarray(x).dtype)), element)


def _spec_dtype(dtype: np.dtype) -> np.dtype:
    """One dtype for TF's `tf.string`, however the text is held (bytes objects, or numpy's fixed-width bytes)."""
    return np.dtype(object) if dtype.kind in "SU" else dtype


def placeholder(spec: Any) -> Any:
    """An element of `spec` (zeros, empty text; a dimension of unknown size 1): what a map function of an empty
    dataset is called on to learn its element spec. ValueError for a spec of unknown rank."""
    def one(s: Any) -> Any:
        if s.shape is None:
            raise ValueError("placeholder: a component of unknown rank")
        dtype = np.dtype(s.dtype)
        shape = tuple(1 if d is None else int(d) for d in s.shape)
        return np.full(shape, b"", dtype=object) if dtype.kind in "OSU" else np.zeros(shape, dtype)
    return map_leaves(one, spec)


def as_numpy(leaf: Any) -> Any:
    """A component as TF's numpy iterator gives it: a scalar as a numpy scalar (a map function's Python `1`
    too: TF 2.21 gives `np.int32(1)`), text as bytes."""
    if isinstance(leaf, np.bytes_):
        return bytes(leaf)
    if composites.is_composite(leaf):  # TF 2.21 (observed): a ragged tensor's `.numpy()`, a sparse one dense
        return composites.to_numpy(leaf)
    if isinstance(leaf, HostTensor):
        return leaf.numpy()
    return leaf[()] if isinstance(leaf, np.ndarray) and leaf.ndim == 0 else leaf


def as_numpy_read_only(leaf: Any) -> Any:
    """`as_numpy`, an array (not a scalar) as a view that refuses writes: TF 2.21's `as_numpy_iterator()` gives
    read-only arrays (observed: `flags.writeable` False, writing raises ValueError "assignment destination is
    read-only"), while a tensor's `.numpy()` is writable."""
    value = as_numpy(leaf)
    if isinstance(value, np.ndarray) and value.flags.writeable:
        value = value.view()
        value.flags.writeable = False
    return value


def unbatched_cardinality(cardinality: int, spec: Any) -> int:
    """`unbatch`'s count: `cardinality` times the components' one static leading dimension (`from_tensors` of 3
    rows: 3; `batch(4, drop_remainder=True)`: 4 a batch), else unknown (-2)."""
    firsts = {s.shape[0] if s.shape else None for s in leaves(spec)}
    first = firsts.pop() if len(firsts) == 1 else None
    return -2 if first is None else cardinality * int(first)


def batched_spec(spec: Any, size: int | None) -> Any:
    return map_leaves(lambda s: TensorSpec(None if s.shape is None else (size, *s.shape), s.dtype), spec)


def unbatched_spec(spec: Any) -> Any:
    return map_leaves(lambda s: TensorSpec(None if s.shape is None else s.shape[1:], s.dtype), spec)


def leading_unknown(spec: Any) -> bool:
    parts = leaves(spec)
    return bool(parts) and all(s.shape and s.shape[0] is None for s in parts)


def as_spec(value: Any) -> TensorSpec:
    """A TensorSpec from a TensorSpec-like value (jdist's, or anything with `shape` and `dtype`)."""
    return value if isinstance(value, TensorSpec) else TensorSpec(getattr(value, "shape", ()), value.dtype)


def _operator(op: str, ufunc: Any) -> tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]:
    """A host tensor's binary operator and its reflected form, under TF's operand rule."""
    def apply(x: Any, y: Any) -> Any:
        if tensor_numpy.NUMPY_BEHAVIOR["on"] and not any(
                not isinstance(v, HostTensor) and operands.is_tensor(v) for v in (x, y)):
            return tensor_numpy.numpy_operator(ufunc, x, y)  # `tnp.experimental_enable_numpy_behavior()`
        x, y = operands.check_pair(op, x, y)
        if op == "matmul":
            tensor_numpy.check_matmul(x, y)  # `v @ m`: TF's InvalidArgumentError for a vector
        if any(not isinstance(v, HostTensor) and operands.is_tensor(v) for v in (x, y)):
            return NotImplemented  # a device array or variable computes it (JAX's or Keras's reflected operator)
        if op == "truediv":
            wide = operands.true_divide_dtype(np.result_type(x, y))
            if wide is not None:
                x, y = np.asarray(x, dtype=wide), np.asarray(y, dtype=wide)
        a, b = np.asarray(x).view(np.ndarray), np.asarray(y).view(np.ndarray)
        quiet = np.result_type(a, b).kind in "fc"  # TF's float ops give inf and nan without a warning
        with np.errstate(all="ignore") if quiet else contextlib.nullcontext():
            try:
                out = ufunc(a, b)
            except ValueError as error:  # TF's InvalidArgumentError, `[Op:AddV2]` (jdist.tfdata.tensor_numpy)
                raise tensor_numpy.op_error(op, a, b, error) from None
        return np.asarray(out).view(HostTensor)

    def forward(self: Any, other: Any) -> Any:
        if other is None and op in ("eq", "ne"):
            return op == "ne"  # TF 2: `tensor == None` is False
        if self.dtype.kind in "OSU":  # text: numpy's own, with Python text as TF's bytes (`t == "a"`)
            return getattr(np.ndarray, f"__{op}__")(self, tensor_text.as_bytes(other))
        if library_code(sys._getframe(1)) or not (operands.is_tensor(other) or operands.convertible(other)):
            return getattr(np.ndarray, f"__{op}__")(self, other)  # numpy's own
        return apply(self, other)

    tensor_numpy.BY_UFUNC.setdefault(ufunc, apply)  # `np.float32(2) * t` (jdist.tfdata.tensor_numpy)

    def reflected(self: Any, other: Any) -> Any:
        if self.dtype.kind in "OSU":
            return getattr(np.ndarray, f"__r{op}__")(self, tensor_text.as_bytes(other))
        if library_code(sys._getframe(1)) or not operands.convertible(other):
            return getattr(np.ndarray, f"__r{op}__")(self, other)
        return apply(other, self)

    return forward, reflected


@operands.register_host_tensor
class HostTensor(np.ndarray):
    """A numpy array with TF's `.numpy()`: what iterating a `tf.data.Dataset` gives a TF script.

    It is an `np.ndarray` (a view, no copy), so numpy, JAX and jdist take it as one.
    """

    @staticmethod
    def of(value: Any) -> Any:
        if isinstance(value, (bytes, str)) or hasattr(value, "element_spec") or composites.is_composite(value):
            return value
        return np.asarray(value).view(HostTensor)

    def numpy(self) -> Any:
        """The value as numpy: a numpy scalar for a scalar, else an array (TF's `EagerTensor.numpy`); text as
        bytes (TF 2.21: `tf.constant("a").numpy()` is `b'a'`)."""
        plain = tensor_text.as_tf_numpy(self.view(np.ndarray))
        return plain[()] if plain.ndim == 0 else plain

    @property
    def shape(self) -> TensorShape:  # pyright: ignore[reportIncompatibleVariableOverride]
        """TF's `TensorShape` (a tuple, with `as_list()` and `rank`)."""
        return TensorShape(np.ndarray.shape.__get__(self))

    @shape.setter
    def shape(self, value: Any) -> None:
        np.ndarray.shape.__set__(self, value)

    def get_shape(self) -> TensorShape:
        return self.shape

    def set_shape(self, shape: Any) -> None:
        """TF's: a host tensor's shape is known, so this only checks that `shape` (None: any size) fits it (TF
        2.21's ValueError and text, observed, where it does not)."""
        dims = None if shape is None else list(shape.as_list() if hasattr(shape, "as_list") else shape)
        actual = tuple(np.ndarray.shape.__get__(self))
        if dims is not None and (len(dims) != len(actual) or any(d is not None and int(d) != a
                                                                 for d, a in zip(dims, actual))):
            shown = "(" + ", ".join("None" if d is None else str(int(d)) for d in dims) + ("," if len(dims) == 1
                                                                                          else "") + ")"
            raise ValueError(f"Tensor's shape {actual} is not compatible with supplied shape {shown}.")

    @property
    def device(self) -> str:  # pyright: ignore[reportIncompatibleMethodOverride]
        """TF's name of the device of the `tf.device` block the tensor was made in, else the host's (observed, TF
        2.21: '/job:localhost/replica:0/task:0/device:CPU:0'; jdist.tfdata.host_device)."""
        return self.__dict__.get("_device") or host_device.DEFAULT

    def __array_finalize__(self, obj: Any) -> None:
        made_in = host_device.current()
        if made_in is not None:
            self._device = made_in

    def __getitem__(self, key: Any) -> Any:
        """An element is a 0-d tensor, as in TF (`t[0].numpy()`), not a numpy scalar; a script's key follows TF's
        rule (jdist.tfdata.tensor_index)."""
        item = super().__getitem__(tensor_index.key_for(key, self, sys._getframe(1)))
        return np.asarray(item).view(HostTensor) if isinstance(item, np.generic) else item

    def __setitem__(self, key: Any, value: Any) -> None:
        tensor_numpy.refuse_item_assignment(sys._getframe(1))  # TF's tensors are immutable (a script's `t[1] = 0`)
        super().__setitem__(key, value)

    __array_ufunc__ = tensor_numpy.array_ufunc  # numpy's result for a script's `np.add(t, 1)`, as TF's
    __array_function__ = tensor_methods.array_function  # numpy's result for a script's `np.unique(t)`, as TF's
    __neg__, __pos__ = tensor_numpy.unary(np.negative), tensor_numpy.unary(np.positive)
    __abs__, __invert__ = tensor_numpy.unary(np.absolute), tensor_numpy.unary(np.invert)

    @property
    def dtype(self) -> Any:  # pyright: ignore[reportIncompatibleVariableOverride]
        """numpy's dtype for library code; TF's `tf.DType` for a script's (jdist.tfdata.tensor_numpy)."""
        return tensor_numpy.dtype_for(self, sys._getframe(1))

    @dtype.setter
    def dtype(self, value: Any) -> None:
        np.ndarray.dtype.__set__(self, value)  # pyright: ignore[reportAttributeAccessIssue]

    def __array_wrap__(self, array: Any, context: Any = None, return_scalar: bool = False) -> Any:
        """numpy's ufuncs on tensors give tensors, also 0-d ones (`(a + b).numpy()` for scalars)."""
        return np.asarray(array).view(HostTensor)

    def __str__(self) -> str:
        """TF's `print(tensor)`: `tf.Tensor([1 2], shape=(2,), dtype=int32)` (jdist.tfdata.tensor_text)."""
        return tensor_text.tensor_str(self.view(np.ndarray))

    def __repr__(self) -> str:
        return tensor_text.tensor_repr(self.view(np.ndarray))

    def __format__(self, format_spec: str) -> str:
        """An f-string formats the values, as TF's (`f"{t}"` is `[1 2]`, a scalar's `format` is numpy's)."""
        return format(self.numpy(), format_spec)

    # Binary operators follow TF's operand rule (jdist.tfdata.operands): one dtype for two tensors, a Python or
    # numpy operand converted to the tensor's dtype, TF's dtypes for integer true division.
    __add__, __radd__ = _operator("add", np.add)
    __sub__, __rsub__ = _operator("sub", np.subtract)
    __mul__, __rmul__ = _operator("mul", np.multiply)
    __truediv__, __rtruediv__ = _operator("truediv", np.true_divide)
    __floordiv__, __rfloordiv__ = _operator("floordiv", np.floor_divide)
    __mod__, __rmod__ = _operator("mod", np.remainder)
    __pow__, __rpow__ = _operator("pow", np.power)  # pyright: ignore[reportAssignmentType]
    __matmul__, __rmatmul__ = _operator("matmul", np.matmul)
    __and__, __rand__ = _operator("and", np.bitwise_and)
    __or__, __ror__ = _operator("or", np.bitwise_or)
    __xor__, __rxor__ = _operator("xor", np.bitwise_xor)
    __lt__, __gt__ = _operator("lt", np.less)[0], _operator("gt", np.greater)[0]
    __le__, __ge__ = _operator("le", np.less_equal)[0], _operator("ge", np.greater_equal)[0]
    __eq__, __ne__ = _operator("eq", np.equal)[0], _operator("ne", np.not_equal)[0]
    __hash__ = None  # type: ignore[assignment]  # as numpy's: elementwise `==` makes a tensor unhashable

    # TF tensors are immutable: `image /= 255` in a map function makes a new tensor. numpy would divide the
    # dataset's own rows in place (every epoch again), so augmented assignment here is out of place.
    def __iadd__(self, other):
        return self + other

    def __isub__(self, other):
        return self - other

    def __imul__(self, other):
        return self * other

    def __itruediv__(self, other):
        return self / other

    def __ifloordiv__(self, other):
        return self // other

    def __imod__(self, other):
        return self % other

    def __ipow__(self, other):
        return self**other

    def __imatmul__(self, other):
        return self @ other

    def __iand__(self, other):
        return self & other

    def __ior__(self, other):
        return self | other

    def __ixor__(self, other):
        return self ^ other

    def __ilshift__(self, other):
        return self << other

    def __irshift__(self, other):
        return self >> other
