"""`tf.saved_model.save` / `load` for a `tf.Module`: its variables, and its `tf.function`s as JAX programs.

TF's SavedModel guide saves a `tf.Module` whose `@tf.function` methods compute from its variables and
assign them, and loads it without its class: the loaded object has the module's variables under the same
attribute names and its functions for each input signature they were traced with (or their
`input_signature`). jdist does the same with `jax.export`: each (function, signature) becomes one program
that takes the variables' values and the array arguments and returns the outputs and the variables' new
values, which the loaded function assigns. Observed in TF 2.21: a call that matches no saved signature is a
ValueError ("Could not find matching concrete function ..."), one against an `input_signature` a TypeError;
`signatures` is {} unless exactly one function with an `input_signature` returns tensors (then it is
`serving_default`) or `signatures=` names them; the loaded object has no `variables` attribute. Also as TF 2.21
(observed): a signature given only to `get_concrete_function` (unknown dimensions or rank) is saved, and a function
never traced is kept (its call is TF's ValueError); a signature jdist cannot export is refused naming the function.
Programs are serialized with their VJP, so a tape differentiates a loaded function (the guide trains one).
A Keras model is saved by `jdist.saved_model`, with its `@tf.function` methods and any `signatures=` saved as
a module's under `methods/` (`save_keras`).
"""
from __future__ import annotations

import json
import os
import shutil
from typing import Any

import jax
import numpy as np

from jdist.interop.keras_objects import holds_variables
from jdist.interop.tf_function import Function
from jdist.saved_model import format as fmt
from jdist.tf_compat import signature_dims, traced_random

KIND = "tf.Module"
METHODS = "methods"  # in a Keras model's directory: its @tf.function methods, saved as a tf.Module's
_SERVING = "serving_default"
_MAX_RANK = 4  # an argument of unknown rank (TensorSpec(None)) is exported for each rank up to this


def _variable_paths(module: Any) -> dict[int, str]:
    """Each variable's attribute path from `module` (`v`, `sub.w`, `layers.0.kernel`), first path found."""
    import keras

    from jdist.tf_compat.module import Module

    paths: dict[int, str] = {}

    def walk(value: Any, path: str, seen: set[int]) -> None:
        if id(value) in seen:
            return
        seen.add(id(value))
        if isinstance(value, keras.Variable):
            paths.setdefault(id(value), path)
        elif holds_variables(value):  # a tf.random.Generator: its state
            for i, variable in enumerate(value.variables):
                paths.setdefault(id(variable), f"{path}._variables.{i}")
        elif isinstance(value, Module):
            for key, item in sorted(vars(value).items()):
                if not key.startswith("_"):
                    walk(item, f"{path}.{key}" if path else key, seen)
        elif isinstance(value, dict):
            for key in sorted(value, key=str):
                walk(value[key], f"{path}.{key}", seen)
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(item, f"{path}.{i}", seen)

    walk(module, "", set())
    return paths


def _functions(module: Any) -> dict[str, Function]:
    """The module's `@tf.function` methods, bound to it (TF saves those found as attributes)."""
    return {name: getattr(module, name) for name in sorted(dir(type(module)))
            if isinstance(getattr(type(module), name, None), Function)}


def _spec_of(value: Any) -> dict:
    """A JSON description of one argument leaf: an array spec (None for a free dimension) or a Python value."""
    from jdist.input.tensor_spec import TensorSpec

    if hasattr(value, "ragged_rank"):  # a RaggedTensorSpec (or RaggedTensor): not one dense array
        raise ValueError(f"a signature takes {value!r}. jdist's saved programs take dense "
                         "arrays, and its ragged tensors are host values that a compiled program cannot take; "
                         "give the function dense inputs instead: rt.to_tensor() (padded) with the row lengths, or "
                         "rt.flat_values with rt.value_rowids() and tf.math.segment_sum-style ops.")
    if isinstance(value, TensorSpec):
        if value.shape is None:  # unknown rank: exported for ranks 0 to _MAX_RANK (`_ranked`)
            return {"array": None, "dtype": str(np.dtype(value.dtype))}
        return {"array": list(value.shape), "dtype": str(np.dtype(value.dtype))}
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return {"array": list(value.shape), "dtype": str(np.dtype(value.dtype))}
    if isinstance(value, (bool, int, float, str, type(None))):
        return {"value": value}
    raise ValueError(f"a traced call passed a {type(value).__name__}; jdist saves calls "
                     "whose arguments are arrays and Python numbers or strings.")


def _signatures_of(function: Function) -> list[tuple[Any, list[dict]]]:
    """(argument tree, leaf specs) for each signature the function was traced with, or its input_signature;
    then those given to `get_concrete_function` that no call traced (unknown dimensions or rank, observed in
    TF 2.21: each is saved and the loaded function runs for any size it allows)."""
    from jdist.interop import function_signature

    signature = function.options.get("input_signature")
    if signature is not None:
        leaves, tree = jax.tree.flatten((tuple(signature), {}), is_leaf=lambda x: x is None)
        return [(tree, [_spec_of(leaf) for leaf in leaves])]
    found = [(tree, [_spec_of(leaf) for leaf in leaves]) for tree, leaves in function.traced_arguments()]
    for args, kwargs in getattr(function, "_requested", []):
        args, kwargs = function_signature.canonical(function.python_function, args, kwargs)
        leaves, tree = jax.tree.flatten((tuple(args), dict(kwargs)), is_leaf=lambda x: x is None)
        entry = (tree, [_spec_of(leaf) for leaf in leaves])
        if entry not in found:
            found.append(entry)
    return found


def _encode(tree: Any) -> Any:
    """An output structure as JSON: null, "leaf", {"dict": ...}, {"list": ...} or {"tuple": ...}."""
    if tree is None:
        return None
    if isinstance(tree, dict):  # in the dict's own order, as TF returns it (`_flat` follows it)
        return {"dict": {str(k): _encode(v) for k, v in tree.items()}}
    if isinstance(tree, (list, tuple)):
        return {type(tree).__name__: [_encode(v) for v in tree]}
    return "leaf"


def _flat(tree: Any) -> list:
    """The leaves of an output structure in `_encode`'s order."""
    if tree is None:
        return []
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in _flat(value)]
    if isinstance(tree, (list, tuple)):
        return [leaf for value in tree for leaf in _flat(value)]
    return [tree]


def decode(structure: Any, leaves: list) -> Any:
    """The outputs rebuilt from `_encode`'s structure and the program's flat outputs (consumed in order)."""
    if structure is None:
        return None
    if structure == "leaf":
        return leaves.pop(0)
    if "dict" in structure:
        return {k: decode(v, leaves) for k, v in structure["dict"].items()}
    items = [decode(v, leaves) for v in structure.get("list", structure.get("tuple", []))]
    return tuple(items) if "tuple" in structure else items


def _export(function: Function, variables: list, tree: Any, specs: list[dict]) -> tuple[bytes, Any]:
    """(program, (output structure, indices of the variables it assigns)): `_export_with` each free
    dimension its own size, or, when the function needs some to agree (`x - y`
    of two [None, 1] arguments), one size per axis position across the arguments."""
    try:
        return _export_with(function, variables, tree, specs, by_axis=False)
    except Exception:
        pass
    try:
        return _export_with(function, variables, tree, specs, by_axis=True)
    except Exception as error:  # a free size meets a known one (`x - mean`): pin it as TF's run time needs
        pinned = signature_dims.pin(specs, error)
        while pinned is not None:
            try:
                return _export_with(function, variables, tree, pinned, by_axis=True)
            except Exception as again:
                more = signature_dims.pin(pinned, again)
                pinned = None if more == pinned else more
        raise


def _export_with(function: Function, variables: list, tree: Any, specs: list[dict],
                 by_axis: bool) -> tuple[bytes, tuple[Any, list[int]]]:
    """One program: (variable values, array arguments) -> (flat outputs, new variable values)."""
    import keras
    from jax import export

    scope = export.SymbolicScope()
    free = iter(range(10_000))

    def abstract(spec: dict) -> jax.ShapeDtypeStruct:
        dims = ", ".join((f"a{axis}" if by_axis else f"d{next(free)}") if d is None else str(d)
                         for axis, d in enumerate(spec["array"]))
        shape = export.symbolic_shape(f"({dims})" if dims else "()", scope=scope) if dims else ()
        return jax.ShapeDtypeStruct(shape, np.dtype(spec["dtype"]))

    arrays = [abstract(spec) for spec in specs if "array" in spec]
    structure: list = []
    written: list = []

    def program(values: list, array_args: list) -> tuple[list, list]:
        it = iter(array_args)
        leaves = [next(it) if "array" in spec else spec["value"] for spec in specs]
        args, kwargs = jax.tree.unflatten(tree, leaves)
        with keras.StatelessScope(state_mapping=list(zip(variables, values))) as stateless:
            outputs = function.python_function(*args, **kwargs)
            new_values = [stateless.get_current_value(v) for v in variables]
        structure.append(_encode(outputs))
        written.append([i for i, n in enumerate(new_values) if n is not None])
        flat = [jax.numpy.asarray(leaf) for leaf in _flat(outputs)]
        return flat, [v if n is None else n for v, n in zip(values, new_values)]

    weights = [jax.ShapeDtypeStruct(tuple(v.shape), np.dtype(v.dtype)) for v in variables]
    # saved in a strategy's scope: the program is still one device's, as TF's; no host-drawn tf.random op
    with jax.set_mesh(None), traced_random.exporting():
        exported = export.export(jax.jit(program))(weights, arrays)
    try:  # vjp_order=1: a loaded function differentiates (TF's guide trains a loaded module's variable with a tape)
        serialized = exported.serialize(vjp_order=1)
    except Exception:  # a program JAX cannot differentiate (a host callback, say) is saved for calls only
        serialized = exported.serialize()
    return bytes(serialized), (structure[0], written[0])


def _write(function: Function, variables: list, tree: Any, specs: list[dict], functions_dir: str,
           file: str, input_signature: bool) -> list[dict]:
    """Exports one signature (one program per rank 0-4 for an argument of unknown rank, those that trace)."""
    entries, skipped = [], []
    for i, concrete in enumerate(_ranked(specs)):
        try:
            program, (outputs, writes) = _export(function, variables, tree, concrete)
        except Exception as error:
            if concrete is specs:  # no unknown rank: the error is the user's to see
                raise
            skipped.append(f"rank {i}: {type(error).__name__}: {str(error).splitlines()[0][:200]}")
            continue  # a rank the body cannot take: not saved; a call of it names why (`module_loading`)
        with open(os.path.join(functions_dir, f"{file}.{i}"), "wb") as f:
            f.write(program)
        entries.append({"file": f"{file}.{i}", "specs": concrete, "tree": _tree_json(tree), "outputs": outputs,
                        "input_signature": input_signature, "parameters": _parameters(function), "writes": writes,
                        "skipped": skipped, "unknown_rank": concrete is not specs})
    if not entries:
        raise ValueError(f"tf.saved_model.save: {function.python_function.__name__} could not be exported for any "
                         "rank of its TensorSpec(None) arguments; give their shapes.")
    return entries


def _ranked(specs: list[dict]) -> list[list[dict]]:
    """`specs` itself, or one copy per rank 0-4 (every dimension free) of each argument of unknown rank."""
    unknown = [i for i, spec in enumerate(specs) if spec.get("array", ()) is None]
    if not unknown:
        return [specs]
    copies = []
    for rank in range(_MAX_RANK + 1):
        copy = [dict(spec, array=[None] * rank) if i in unknown else spec for i, spec in enumerate(specs)]
        copies.append(copy)
    return copies


def save(module: Any, directory: str, signatures: Any = None) -> None:
    """Writes `module`'s variables and traced functions to `directory` (see the module docstring)."""
    variables = list(module.variables)
    paths = _variable_paths(module)
    functions_dir = os.path.join(directory, fmt.FUNCTIONS)
    os.makedirs(functions_dir, exist_ok=True)
    description: dict[str, Any] = {"format": fmt.FORMAT, "version": fmt.VERSION, "kind": KIND,
                                   "variables": [{"path": paths.get(id(v), f"variables.{i}"),
                                                  "trainable": bool(v.trainable)} for i, v in enumerate(variables)],
                                   "functions": {}, "signatures": {}}
    candidates = []
    for name, function in _functions(module).items():
        entries = []
        has_signature = function.options.get("input_signature") is not None
        try:
            signatures_of = _signatures_of(function)
        except ValueError as error:  # an argument a saved program cannot take: name the function
            if str(error).startswith("tf.saved_model.save"):
                raise
            raise ValueError(f"tf.saved_model.save: {type(module).__name__}.{name}: {error}") from None
        for i, (tree, specs) in enumerate(signatures_of):
            try:
                entries += _write(function, variables, tree, specs, functions_dir, f"{name}.{i}", has_signature)
            except Exception as error:
                free = [s for s in specs if "array" in s and (s["array"] is None or None in s["array"])]
                text = [s for s in specs if "array" in s and np.dtype(s["dtype"]).kind in "OSU"]
                if not (free or text) or str(error).startswith("tf.saved_model.save"):
                    raise
                fix = ("jdist's saved programs are compiled JAX programs, which take no string tensors; save a "
                       "function of numeric tensors (encode the strings before the call)" if text else
                       "jdist traces unknown sizes symbolically and this body needs them known; give the sizes in "
                       "get_concrete_function's (or the input_signature's) TensorSpecs, or call the function once "
                       "with real tensors before saving")
                raise ValueError(  # never saved silently without it (TF 2.21 saves it, observed)
                    f"tf.saved_model.save: {type(module).__name__}.{name} could not be saved for its signature "
                    f"({', '.join(_describe(s) for s in specs)}): {type(error).__name__}: "
                    f"{str(error).splitlines()[0]}. {fix}.") from error
        # never traced: TF 2.21 keeps it, and a call is its ValueError (observed; `module_loading`)
        description["functions"][name] = entries
        if has_signature and entries and entries[0]["outputs"] is not None:
            candidates.append((name, entries))
    if signatures is None:  # TF's choice: the one function with an input_signature that returns tensors
        chosen = dict([(_SERVING, candidates[0])]) if len(candidates) == 1 else {}
    else:
        chosen = _given_signatures(signatures, variables, functions_dir)
    description["signatures"] = {key: {"function": name, "entries": entries}
                                 for key, (name, entries) in chosen.items()}
    arrays = {f"v{i}": np.asarray(v.value) for i, v in enumerate(variables)}
    os.makedirs(os.path.join(directory, "variables"), exist_ok=True)
    np.savez(os.path.join(directory, fmt.VARIABLES), **arrays)  # pyright: ignore[reportArgumentType]
    with open(os.path.join(directory, fmt.DESCRIPTION), "w") as f:
        json.dump(description, f, indent=1)


def _describe(spec: dict) -> str:
    if "array" not in spec:
        return repr(spec["value"])
    shape = "None" if spec["array"] is None else tuple(spec["array"])
    return f"TensorSpec(shape={shape}, dtype={spec['dtype']})"


def _parameters(function: Function) -> list[str]:
    import inspect

    return [p for p in inspect.signature(function.python_function).parameters]


def _tree_json(tree: Any) -> Any:
    """An argument tree ((args...), {kwargs}) as JSON: the positions and keyword names of its leaves."""
    args, kwargs = jax.tree.unflatten(tree, list(range(tree.num_leaves)))
    return {"args": _encode(args), "kwargs": _encode(kwargs)}


def _given_signatures(signatures: Any, variables: list, functions_dir: str) -> dict[str, tuple[str, list]]:
    """`signatures=`: a concrete function (`serving_default`), or a dict of them by signature key."""
    given = signatures if isinstance(signatures, dict) else {_SERVING: signatures}
    chosen = {}
    for key, value in given.items():
        concrete: Any = value
        if isinstance(value, Function) and value.options.get("input_signature") is not None:
            concrete = value.get_concrete_function()  # TF 2.21 takes a tf.function with an input_signature
        function = getattr(concrete, "function", None)
        if not isinstance(function, Function):  # TF 2.21's ValueError and words
            raise ValueError(f"Expected a TensorFlow function for which to generate a signature, but got "
                             f"{concrete!r} (signature {key!r}). Only `tf.functions` with an input signature or "
                             "concrete functions can be used as a signature: pass "
                             "f.get_concrete_function(tf.TensorSpec(...)) of a @tf.function.")
        leaves, tree = jax.tree.flatten((tuple(concrete.args), dict(concrete.kwargs)), is_leaf=lambda x: x is None)
        try:
            specs = [_spec_of(leaf) for leaf in leaves]
        except ValueError as error:
            raise ValueError(f"tf.saved_model.save: signature {key!r} "
                             f"({function.python_function.__name__}): {error}") from None
        chosen[key] = (function.python_function.__name__, _write(function, variables, tree, specs, functions_dir,
                                                 f"signature.{key}", True))
    return chosen


def save_keras(model: Any, export_dir: Any, signatures: Any = None, options: Any = None) -> None:
    """A Keras model's directory (`jdist.saved_model`), with its @tf.function methods (TF 2.21, observed:
    `loaded.serve(x)`) and `signatures=` (tf_keras's `model.save(path, signatures={...})`, observed: the loaded
    signatures are those, and `load_model` reads the model) saved as a tf.Module's under `methods/`."""
    from jdist import saved_model

    saved_model.save(model, export_dir, options=options)
    methods = os.path.join(os.fspath(export_dir), METHODS)
    shutil.rmtree(methods, ignore_errors=True)
    if _functions(model) or signatures is not None:
        try:
            save(model, methods, signatures=signatures if signatures is not None else {})
        except BaseException:  # no half-written methods/: the directory stays the model's alone
            shutil.rmtree(methods, ignore_errors=True)
            raise


def _is_keras_model(obj: Any) -> bool:
    import keras

    return isinstance(obj, keras.Model)


def is_module(obj: Any) -> bool:
    from jdist.tf_compat.module import Module

    return isinstance(obj, Module)


def save_any(obj: Any, export_dir: Any, signatures: Any = None, options: Any = None) -> None:
    """`tf.saved_model.save`: a `tf.Module` (this module), else a Keras model (`jdist.saved_model`)."""
    from jdist import saved_model

    if not is_module(obj) and (signatures is None or not _is_keras_model(obj)):
        if _is_keras_model(obj):
            save_keras(obj, export_dir, options=options)
        else:
            saved_model.save(obj, export_dir, signatures=signatures, options=options)
        return
    directory = os.fspath(export_dir)
    os.makedirs(directory, exist_ok=True)
    save(obj, directory, signatures)
