"""`Dataset.from_generator`'s signature: the specs it names, and each yielded element checked against them.

TF converts a generator's output to the signature's dtypes and refuses a structure, dtype or shape it does not
allow with an InvalidArgumentError whose text names the expected and the yielded element (observed, TF 2.21).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jdist.errors import InvalidArgumentError
from jdist.input.tensor_spec import TensorSpec
from jdist.tfdata import composite_batch, composites, structure, tensor_text


def signature_from(output_signature: Any, output_types: Any, output_shapes: Any) -> Any:
    """`from_generator`'s structure of TensorSpecs, from `output_signature` or TF's older types/shapes pair
    (`output_shapes` follows `output_types`' structure; each shape a list, tuple or TensorShape)."""
    if output_signature is not None:
        return structure.map_leaves(lambda s: s if composites.kind_of_spec(s) is not None else structure.as_spec(s),
                                    output_signature)

    def pair(types: Any, shapes: Any) -> Any:
        if isinstance(types, dict):
            return {k: pair(v, None if shapes is None else shapes[k]) for k, v in types.items()}
        if isinstance(types, tuple):
            return tuple(pair(v, None if shapes is None else shapes[i]) for i, v in enumerate(types))
        return TensorSpec(shapes, types)

    return pair(output_types, output_shapes)


def conform(element: Any, signature: Any) -> Any:
    """`element` with each tensor cast to its spec's dtype (as TF converts generator output), or TF 2.21's
    InvalidArgumentError (observed texts) for a structure, dtype or shape the signature does not allow. The
    signature's structure leads: where it has one spec, the element's part is one tensor (TF 2.21, observed: a
    generator yielding `(i,)` for `TensorSpec((1,), tf.int64)` gives `[i]`)."""
    def mismatch() -> Exception:
        return _generator_error(f"`generator` yielded an element that did not match the expected structure. The "
                                f"expected structure was {_dtype_structure(signature)}, but the yielded element was "
                                f"{element}.")

    def walk(spec: Any, value: Any) -> Any:
        if isinstance(spec, dict):
            if not isinstance(value, dict) or set(value) != set(spec):
                raise mismatch()
            return {k: walk(spec[k], value[k]) for k in spec}
        if isinstance(spec, tuple):
            if not isinstance(value, tuple) or len(value) != len(spec):
                raise mismatch()
            items = [walk(s, v) for s, v in zip(spec, value)]
            return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
        if composites.kind_of_spec(spec) is not None:  # a ragged or sparse spec: `composite_batch.conform`
            return composite_batch.conform(spec, value, mismatch, _generator_error)
        return _conformed(spec, value)
    return walk(signature, element)


def _conformed(spec: Any, value: Any) -> Any:
    dtype = np.dtype(spec.dtype)
    try:
        array = np.asarray(value) if dtype.kind == "O" else np.asarray(value, dtype=dtype)
    except (TypeError, ValueError):
        raise _generator_error(f"`generator` yielded an element that could not be converted to the expected "
                               f"type. The expected type was {tensor_text.dtype_name(dtype)}, but the yielded "
                               f"element was {tensor_text.token_text(value)}.") from None
    if not spec.is_compatible_with(np.empty(array.shape, dtype)):
        shape = tuple(None if d is None else int(d) for d in spec.shape) if spec.shape is not None else None
        raise _generator_error(f"`generator` yielded an element of shape {array.shape} where an element of "
                               f"shape {shape} was expected.")
    if dtype.kind == "O":
        return structure.to_leaf(value)
    return array[()] if array.ndim == 0 else array  # scalars as numpy scalars, as slicing gives them


def _dtype_structure(signature: Any) -> str:
    """A signature as TF's generator errors name it: `(tf.int32, tf.int32)`."""
    if isinstance(signature, dict):
        return "{" + ", ".join(f"{k!r}: {_dtype_structure(v)}" for k, v in signature.items()) + "}"
    if isinstance(signature, tuple):
        inner = ", ".join(_dtype_structure(v) for v in signature)
        return f"({inner},)" if len(signature) == 1 else f"({inner})"
    return repr(signature) if composites.kind_of_spec(signature) else f"tf.{tensor_text.dtype_name(signature.dtype)}"


def _generator_error(message: str) -> Exception:
    return InvalidArgumentError(None, None, f"TypeError: {message}")
