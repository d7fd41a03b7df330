"""What numpy gives a TF script for a host tensor: numpy's ufuncs, a numpy scalar operand, `dtype`, op errors.

A host tensor (`jdist.tfdata.structure.HostTensor`) is an `np.ndarray`, so numpy, JAX and jdist compute on it
as on any array. A TF script's own code sees TF's `EagerTensor` instead (observed, TF 2.21):

* a numpy function of tensors gives numpy's result: `np.add(t, 1)` and `np.sqrt(t)` are `np.ndarray`s,
  `np.sum(t)` a numpy scalar;
* a numpy scalar on the left of an operator follows TF's operand rule, as a Python number does:
  `np.float64(2) * t` is a float32 tensor for a float32 `t`, `np.int64(1) + t` an int32 one;
* `t.dtype` is a `tf.DType` (`print` shows `<dtype: 'float32'>`);
* an operator on shapes that do not broadcast is `InvalidArgumentError` ending in TF's op name
  (`Incompatible shapes: [2] vs. [3] [Op:AddV2]`).

The library packages (`jdist.input.calling_code.library_code`) keep numpy's forms; the calling frame says which.
"""
from __future__ import annotations

import dis
import re
import sys
from typing import Any, Callable

import numpy as np

from jdist.errors import InvalidArgumentError
from jdist.input import calling_code
from jdist.input.calling_code import library_code

# TF's op for each of the host tensor's operators (observed, TF 2.21: `[Op:AddV2]`, `[Op:RealDiv]`, ...).
OP_NAMES = {"add": "AddV2", "sub": "Sub", "mul": "Mul", "truediv": "RealDiv", "floordiv": "FloorDiv",
            "mod": "FloorMod", "pow": "Pow", "matmul": "MatMul", "lt": "Less", "gt": "Greater",
            "le": "LessEqual", "ge": "GreaterEqual", "and": "BitwiseAnd", "or": "BitwiseOr", "xor": "BitwiseXor",
            # `tf.add`, `tf.maximum`, ... by their numpy names (jdist.tf_compat.ops)
            "subtract": "Sub", "multiply": "Mul", "maximum": "Maximum", "minimum": "Minimum", "power": "Pow",
            "equal": "Equal", "not_equal": "NotEqual", "greater": "Greater", "greater_equal": "GreaterEqual",
            "less": "Less", "less_equal": "LessEqual", "logical_and": "LogicalAnd", "logical_or": "LogicalOr"}
_LOGICAL = {"and": "LogicalAnd", "or": "LogicalOr", "xor": "LogicalXor"}

# The operators' `apply` (TF's operand rule) by the ufunc numpy calls for them; `structure` fills it.
BY_UFUNC: dict[Any, Callable[[Any, Any], Any]] = {}
# numpy's "operands could not be broadcast together with shapes (2,) (3,)", JAX's "add got incompatible shapes
# for broadcasting: (2,), (3,)."
_SHAPES = re.compile(r"(?:broadcast together with shapes|incompatible shapes for broadcasting:) ?\(([^)]*)\),? ?"
                     r"\(([^)]*)\)")

_NUMPY_DTYPE = np.ndarray.dtype.__get__  # numpy's own `array.dtype`, past a subclass's property


def dtype_for(array: np.ndarray, frame: Any) -> Any:
    """`array.dtype` as the code in `frame` reads it: numpy's in library code, TF's `DType` in a script's."""
    return calling_code.dtype_for(_NUMPY_DTYPE(array), frame)


def op_error(op: str, x: Any, y: Any, error: Exception) -> Exception:
    """TF's InvalidArgumentError for operands whose shapes do not broadcast (other errors as they are)."""
    found = _SHAPES.search(str(error))
    if found is None:
        return error
    boolean = np.result_type(np.dtype(getattr(x, "dtype", None) or np.asarray(x).dtype),
                             np.dtype(getattr(y, "dtype", None) or np.asarray(y).dtype)) == np.bool_
    name = (_LOGICAL.get(op) if boolean else None) or OP_NAMES.get(op, op)
    shapes = ["[" + ",".join(d.strip() for d in part.split(",") if d.strip()) + "]" for part in found.groups()]
    return InvalidArgumentError(None, None, f"Incompatible shapes: {shapes[0]} vs. {shapes[1]} [Op:{name}]")


def _plain(value: Any, tensor_type: type) -> Any:
    if isinstance(value, tensor_type):
        return value.view(np.ndarray)
    if isinstance(value, tuple):
        return tuple(_plain(v, tensor_type) for v in value)
    return value


# The calling instruction of an operator (`np.float32(2) * t`, `s < t`), not of a call (`np.multiply(s, t)`).
_OPERATOR_CODES = frozenset(code for name, code in dis.opmap.items()
                            if name.startswith(("BINARY_", "INPLACE_")) or name == "COMPARE_OP")


def _operator_call(frame: Any) -> bool:
    """Whether `frame` is running an operator (numpy calls a ufunc for a numpy scalar's `*`), not a function."""
    try:
        return frame.f_code.co_code[frame.f_lasti] in _OPERATOR_CODES
    except (AttributeError, IndexError):
        return False


_NUMPY_MODULES: dict[Any, bool] = {}


def _numpy_module(name: Any) -> bool:
    """Whether a frame's module name is numpy's own (cached per name, as `calling_code` caches its decision)."""
    known = _NUMPY_MODULES.get(name)
    if known is None:
        known = isinstance(name, str) and name.split(".")[0] == "numpy"
        if len(_NUMPY_MODULES) < 4096:
            _NUMPY_MODULES[name] = known
    return known


def array_ufunc(self: np.ndarray, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """`HostTensor.__array_ufunc__`: numpy's result for a script's code (a numpy scalar on an operator's left
    under TF's operand rule); a host tensor, as before, for library code."""
    tensor_type = type(self)
    frame, inner = sys._getframe(1), ""
    while frame is not None and _numpy_module(frame.f_globals.get("__name__")):
        inner = frame.f_globals["__name__"]  # `np.sum(t)` runs numpy's code first: its caller decides
        frame = frame.f_back
    user = frame is not None and not calling_code.module_is_library(frame.f_globals.get("__name__", ""))
    if user:  # a numpy function (`np.add(t, 1)`, `np.sum(t)`) gives numpy's value; a method (`t.sum()`,
        # `t.mean()`: numpy's `_methods`) a tensor, as TF's tensors under numpy behavior
        user = method == "__call__" if not inner else not inner.endswith("._methods")
    if (user and method == "__call__" and not kwargs and len(inputs) == 2 and ufunc in BY_UFUNC
            and isinstance(inputs[0], np.generic) and inputs[1] is self and not inner and _operator_call(frame)):
        # `np.float32(2) * t`: TF's operator (observed, TF 2.21: an int32 tensor's dtype); a call
        # `np.multiply(np.float32(2), t)` is numpy's (a float64 np.ndarray)
        return BY_UFUNC[ufunc](inputs[0], self)
    if (user and ufunc is np.matmul and method == "__call__" and not NUMPY_BEHAVIOR["on"] and not inner
            and _operator_call(frame)):
        check_matmul(*inputs)  # `np_v @ t` (TF 2.21: the tensor's `__rmatmul__`, InvalidArgumentError)
    if "out" in kwargs:
        kwargs["out"] = _plain(kwargs["out"], tensor_type)
    plain = [v.view(np.ndarray) if isinstance(v, tensor_type) else _plain(v, tensor_type) for v in inputs]
    result = ufunc(*plain, **kwargs) if method == "__call__" else getattr(ufunc, method)(*plain, **kwargs)
    if user or result is NotImplemented:
        return result

    def wrap(value: Any) -> Any:
        if isinstance(value, (np.ndarray, np.generic)):
            return np.asarray(value).view(tensor_type)
        return value
    return tuple(wrap(v) for v in result) if isinstance(result, tuple) else wrap(result)


# `tnp.experimental_enable_numpy_behavior()` (jdist.tf_compat.tf_numpy): operators follow NumPy's promotion.
NUMPY_BEHAVIOR: dict[str, Any] = {"on": False, "prefer_float32": False, "mode": "legacy"}
# dtype_conversion_mode "all"/"safe": TF's own lattice, set with the mode by the one who sets it (`tf_numpy`,
# with `weak_promotion.operator`: that module builds on this one's tensors)
LATTICE_OPERATOR: list[Callable[..., Any]] = []


def numpy_operator(ufunc: Any, x: Any, y: Any) -> Any:
    """An operator under NumPy behavior: numpy's own promotion (observed, TF 2.21: int32 + float32 tensors give
    float64, `int32 tensor + 1.5` float64, `float32 tensor * 2.5` float32), Python numbers weak as in numpy."""
    if NUMPY_BEHAVIOR.get("mode") in ("all", "safe"):  # TF's own lattice and weak tensors
        return LATTICE_OPERATOR[0](ufunc, x, y, NUMPY_BEHAVIOR["mode"])
    tensors = [v for v in (x, y) if isinstance(v, np.ndarray) and type(v) is not np.ndarray]  # a tensor's type
    tensor_type = type(tensors[0]) if tensors else np.ndarray
    a, b = (_plain(v, tensor_type) if isinstance(v, np.ndarray) else v for v in (x, y))
    if NUMPY_BEHAVIOR["prefer_float32"]:
        a, b = (np.float32(v) if type(v) is float else v for v in (a, b))
    ints = [v.dtype for v in (a, b) if isinstance(v, np.ndarray) and v.dtype.kind in "iu"]
    if ints:  # a Python int wraps into an integer tensor's dtype (observed, TF 2.21: int8 tensor + 300 is 45)
        a, b = (np.asarray(v % (1 << 64), np.uint64).astype(ints[0]) if type(v) is int else v for v in (a, b))
    return np.asarray(ufunc(a, b)).view(tensor_type)


def refuse_item_assignment(frame: Any) -> None:
    """TF's TypeError for `t[i] = v` in a script's code (observed, TF 2.21: "'...EagerTensor' object does not
    support item assignment"); library code writes host arrays as numpy does."""
    if not library_code(frame):
        raise TypeError("'tensorflow.python.framework.ops.EagerTensor' object does not support item assignment: "
                        "tensors are immutable; use tf.tensor_scatter_nd_update(t, indices, updates) or a "
                        "tf.Variable")


def check_matmul(x: Any, y: Any, name: str | None = None) -> None:
    """TF's InvalidArgumentError for a matrix product with an operand of rank 0 or 1 (observed, TF 2.21, `v @ m`
    and `tf.matmul(v, m)`: "In[0] and In[1] has different ndims: [2] vs. [2,2] [Op:MatMul] name: "; `v @ v`:
    "In[0] and In[1] ndims must be == 2: 1 [Op:MatMul] name: "). Ranks 2 and more (batches) pass."""
    a, b = (tuple(v.shape) if hasattr(v, "shape") else np.shape(v) for v in (x, y))
    if len(a) >= 2 and len(b) >= 2:
        return

    def text(shape: tuple[int, ...]) -> str:
        return "[" + ",".join(str(d) for d in shape) + "]"
    problem = (f"In[0] and In[1] has different ndims: {text(a)} vs. {text(b)}" if len(a) != len(b)
               else f"In[0] and In[1] ndims must be == 2: {len(a)}")
    raise InvalidArgumentError(None, None, f"{problem} [Op:MatMul] name: {name or ''}\nBoth operands' ndims must "
                                           "be >= 2 (matrices, or batches of them): a vector's product is "
                                           "tf.linalg.matvec(m, v) or tf.tensordot(v, m, 1), or give the vector "
                                           "rank 2 (tf.reshape(v, [1, -1])).")


def check_concat(shapes: list[tuple[int, ...]], axis: int, name: str | None) -> None:
    """TF's InvalidArgumentError for `tf.concat` inputs of other ranks or other sizes off `axis` (observed, TF
    2.21: "ConcatOp : Dimension 1 in both shapes must be equal: shape[0] = [2,3] vs. shape[1] = [2,2]
    [Op:ConcatV2] name: concat")."""
    if not shapes:
        return
    first = shapes[0]

    def text(shape: tuple[int, ...]) -> str:
        return "[" + ",".join(str(d) for d in shape) + "]"
    for i, shape in enumerate(shapes[1:], 1):
        if len(shape) != len(first):
            problem = "Ranks of all input tensors should match"
        else:
            cut = axis % len(first) if first else 0
            dims = [d for d in range(len(first)) if d != cut and first[d] != shape[d]]
            if not dims:
                continue
            problem = f"Dimension {dims[0]} in both shapes must be equal"
        raise InvalidArgumentError(None, None, f"ConcatOp : {problem}: shape[0] = {text(first)} vs. shape[{i}] = "
                                               f"{text(shape)} [Op:ConcatV2] name: {name or 'concat'}")


def unary(ufunc: Any) -> Callable[[np.ndarray], Any]:
    """A host tensor's unary operator (`-t`, `abs(t)`, `~t`): a tensor, as TF's (`np.negative(t)` is numpy's)."""
    def operator(self: np.ndarray) -> Any:
        return np.asarray(ufunc(self.view(np.ndarray))).view(type(self))
    return operator
