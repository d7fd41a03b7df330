"""TF's refusals of a `tf.Variable` assignment whose value has another shape or (for a tensor) another dtype.

Observed in TF 2.21 on `v = tf.Variable([1., 2., 3.], name="w")`:

* `v.assign([1., 2.])`: ValueError "Cannot assign value to variable ' w:0': Shape mismatch.The variable shape
  (3,), and the assigned value shape (2,) are incompatible." (a scalar too: no broadcasting).
* `v.assign_add(1.)` / `v.assign_sub(1.)`: InvalidArgumentError "... Cannot update variable with shape [3]
  using a Tensor with shape [], shapes must be equal. [Op:AssignAddVariableOp] name: " (AssignSubVariableOp).
* `v.assign(tf.constant([1, 2, 3]))`, `assign_add` likewise: ValueError "Tensor conversion requested dtype
  float32 for Tensor with dtype int32: <tf.Tensor: ...>"; Python numbers and numpy values are converted.

A 64-bit variable's values are held in 32 bits by JAX without `jax_enable_x64` (jdist.tf_compat.variables), so
a device array of the 32-bit counterpart (`v + 1` of an int64 `v`) is taken as the variable's dtype.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jdist.errors import InvalidArgumentError
from jdist.tfdata import operands, tensor_numpy, tensor_text, weak_promotion

_OPS = {"assign_add": "AssignAddVariableOp", "assign_sub": "AssignSubVariableOp"}


def _shape_fits(declared: tuple, got: tuple) -> bool:
    return len(declared) == len(got) and all(d is None or d == g for d, g in zip(declared, got))


def _dims(shape: tuple) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def check(variable: Any, value: Any, op: str, user: bool) -> None:
    """Raises TF's error where `variable.<op>(value)` is refused (see the module docstring). `user`: the call
    came from a script (Keras's and jdist's own assignments are checked for shape by `assign` only)."""
    shape = getattr(variable, "_jdist_declared_shape", None)  # TensorShape(None) is false: compare with None
    shape = variable.shape if shape is None else shape
    declared = tuple(shape) if shape.rank is not None else None  # `shape=tf.TensorShape(None)`: any shape fits
    got = tuple(np.shape(value))
    if declared is not None and not _shape_fits(declared, got) and (user or op == "assign"):
        if op == "assign":
            raise ValueError(f"Cannot assign value to variable ' {variable.name}': Shape mismatch.The variable shape "
                             f"{declared}, and the assigned value shape {got} are incompatible.")
        raise InvalidArgumentError(None, None, f"Cannot update variable with shape {_dims(declared)} using a Tensor "
                                               f"with shape {_dims(got)}, shapes must be equal. [Op:{_OPS[op]}] name: ")
    if not user or not operands.is_tensor(value) or not hasattr(value, "dtype"):
        return
    want, have = np.dtype(variable.dtype), np.dtype(value.dtype)
    if want == have or (operands.is_device_array(value) and want.itemsize == 8 and want.kind in "iuf"
                        and have == np.dtype(f"{want.kind}4")):
        return
    if _concrete(value) and weak_promotion.assignable(want, value, op, tensor_numpy.NUMPY_BEHAVIOR["mode"]):
        return  # dtype_conversion_mode "all"/"safe": TF's lattice decides
    shown = tensor_text.tensor_repr(np.asarray(value)) if _concrete(value) else repr(value)
    raise ValueError(f"Tensor conversion requested dtype {want.name} for Tensor with dtype {have.name}: {shown}")


def _concrete(value: Any) -> bool:
    try:
        np.asarray(value)
    except Exception:  # a traced value has no contents to show
        return False
    return True
