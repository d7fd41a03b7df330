"""How TF's eager ops give several inputs one dtype: `tf.concat`, `tf.stack`, `tf.add_n`.

jdist's host tensors are numpy arrays, whose own promotion would make `tf.stack([float32 tensor, 2])` float64.
TF 2.21 (observed) takes the dtype of the first input that is already a tensor and converts the others to it: a
numpy value is cast (`concat([float32 tensor, np.array([2.5])])` is float32; `concat([np int64, np float64])`
int64 `[2, 2]`), a Python value must fit ("Cannot convert [2.5] to EagerTensor of dtype int32"); with no tensor,
the first input's own dtype (`concat([[1], [2.0]])` is that TypeError, `concat([[1.0], [2]])` float32). Two
tensors of different dtypes are TF's InvalidArgumentError (`jdist.tfdata.operands.check_pair`). `tf.add_n`
converts each input alone (`add_n([float32 tensor, 2])`: "cannot compute AddN as input #1(zero-based) was
expected to be a float tensor but is a int32 tensor"; int32 and uint8 too). One dtype is
`jdist.tfdata.operands.same_dtype`, as for the operators; `tf.math.divide` is `jdist.tf_compat.division`.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from jdist.errors import dtype_mismatch
from jdist.tfdata import operands
from jdist.tfdata.tensor_text import as_tf_numpy

Convert = Callable[..., Any]  # `tf.convert_to_tensor(value, dtype=None)`


def matching(op: str, values: Sequence[Any], to_tensor: Convert, name: str = "") -> list[Any]:
    """`values` as TF's eager op `op` (its graph name, e.g. "ConcatV2") takes a list of one dtype (`name`: the
    op's, which TF's error text ends with: "[Op:ConcatV2] name: concat")."""
    tensors = [v for v in values if operands.is_tensor(v)]
    for other in tensors[1:]:
        if not operands.same_dtype(tensors[0].dtype, other.dtype, tensors[0], other):
            index = next(i for i, v in enumerate(values) if v is other)  # TF names the input's position
            error = dtype_mismatch(op, index, np.dtype(tensors[0].dtype).name, np.dtype(other.dtype).name)
            raise type(error)(None, None, error.message + name)  # TF's text ends "name: concat"
    dtype = np.dtype(tensors[0].dtype) if tensors else None
    out = []
    for value in values:
        if operands.is_tensor(value):
            out.append(to_tensor(value))
        elif dtype is None:
            first = to_tensor(value)
            dtype = np.dtype(first.dtype)
            out.append(first)
        elif isinstance(value, (np.ndarray, np.generic)):
            out.append(as_tf_numpy(np.asarray(value).astype(dtype)))  # text as TF holds it (bytes), observed
        else:
            out.append(to_tensor(value, dtype))
    return out


def separately(op: str, values: Sequence[Any], to_tensor: Convert) -> list[Any]:
    """`values` each converted alone, then required to share the first one's dtype (TF's `add_n`)."""
    out = [to_tensor(v) for v in values]
    first = np.dtype(out[0].dtype)
    for index, other in enumerate(out[1:], start=1):
        if not operands.same_dtype(first, other.dtype, out[0], other):
            raise dtype_mismatch(op, index, first.name, np.dtype(other.dtype).name)
    return out
