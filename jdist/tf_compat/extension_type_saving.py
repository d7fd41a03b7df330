"""`tf.saved_model.save` of a `tf.Module` whose `tf.function`s take extension types: refused, with the way out.

TF 2.21 saves and loads such functions (its extension type guide, observed: `imported_model.grow(mt)` gives the
MaskedTensor back). jdist's saved programs (`module_saving`, `jax.export`) take and return dense arrays only, so a
function traced with an ExtensionType argument (or whose `input_signature` or a `get_concrete_function` call
holds a `Spec`, the guide's `module.grow.get_concrete_function(MaskedTensor.Spec(...))`) is refused before
anything is written, naming the function and the type; a function that takes plain tensors and builds extension
values inside (the guide's `var_weighted_mean_wrapper`) saves as any other.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import jax

from jdist.tf_compat import module_saving
from jdist.tf_compat.extension_type import ExtensionType
from jdist.tf_compat.extension_type_spec import ExtensionTypeSpec


def _extension_types(value: Any) -> list[str]:
    """The names of the extension types (values or specs) in a signature."""
    leaves = jax.tree.leaves(value, is_leaf=lambda x: isinstance(x, (ExtensionType, ExtensionTypeSpec)))
    return sorted({(x.value_type if isinstance(x, ExtensionTypeSpec) else type(x)).__name__
                   for x in leaves if isinstance(x, (ExtensionType, ExtensionTypeSpec))})


def check_module(module: Any) -> None:
    """NotImplementedError if one of `module`'s tf.functions takes an extension type (module docstring)."""
    if not hasattr(module, "variables"):
        return
    try:
        functions = module_saving._functions(module)
    except Exception:  # noqa: BLE001 - not a tf.Module: the saving code reports it
        return
    for name, function in functions.items():
        signatures = ([function.options.get("input_signature")] + list(getattr(function, "_signatures", {}).values())
                      + list(getattr(function, "_requested", [])))  # get_concrete_function(MaskedTensor.Spec(...))
        found = _extension_types(signatures)
        if found:
            raise NotImplementedError(
                f"tf.saved_model.save: {type(module).__name__}.{name} takes {', '.join(found)}, a "
                "tf.experimental.ExtensionType; jdist's saved programs take and return dense arrays only (TF saves "
                "extension types in a SavedModel). Save a function that takes the extension value's tensors as "
                "separate arguments and builds the value inside it (as TF's guide's var_weighted_mean_wrapper "
                "does), and rebuild the value from the loaded function's results.")


def refusing_extension_types(save: Callable[..., Any]) -> Callable[..., Any]:
    """`save`, checking the object first (`check_module`)."""
    @functools.wraps(save)
    def wrapped(obj: Any, *args: Any, **kwargs: Any) -> Any:
        check_module(obj)
        return save(obj, *args, **kwargs)
    return wrapped
