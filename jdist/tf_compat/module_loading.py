"""`tf.saved_model.load` of a saved `tf.Module`: an object with its variables and its functions, without its class.

Each function keeps the programs `module_saving` exported, one per signature; a call picks the one its
arguments match (arrays by dtype and by every fixed dimension, Python values by equality), runs it on the
variables' current values and assigns what it returns for them, as TF's loaded functions assign.
"""
from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np
from jax.core import Tracer

from jdist.saved_model import format as fmt
from jdist.tf_compat import host_tensors
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.module_saving import METHODS, decode

_NO_MATCH = "Could not find matching concrete function to call loaded from the SavedModel."  # TF 2.21's words


class _Program:
    """One exported (function, signature) and how to bind a call's arguments to it."""

    def __init__(self, directory: str, entry: dict):
        from jax import export

        with open(os.path.join(directory, fmt.FUNCTIONS, entry["file"]), "rb") as f:
            self.exported = export.deserialize(bytearray(f.read()))
        self.specs: list[dict] = entry["specs"]
        self.tree = entry["tree"]
        self.outputs = entry["outputs"]
        self.parameters: list[str] = entry["parameters"]
        self.input_signature: bool = entry["input_signature"]
        self.writes: list[int] | None = entry.get("writes")  # the variables the function assigns (None: all)
        self.skipped: list[str] = entry.get("skipped", [])  # ranks of an unknown-rank argument not saved
        self.unknown_rank: bool = entry.get("unknown_rank", False)  # one rank of a TensorSpec(None) argument

    def leaves(self, args: tuple, kwargs: dict) -> list | None:
        """The call's argument leaves in the saved order, or None when its structure differs."""
        if len(args) > len(self.parameters):
            return None
        bound = dict(zip(self.parameters, args))
        if set(bound) & set(kwargs):
            return None
        bound.update(kwargs)
        saved_args = self.tree["args"]["tuple"] if self.tree["args"] else []
        saved_kwargs = (self.tree["kwargs"] or {}).get("dict", {})
        names = self.parameters[:len(saved_args)] + sorted(saved_kwargs)  # jax.tree's order of the kwargs
        if set(bound) != set(names):
            return None
        nodes = dict(zip(self.parameters, saved_args)) | saved_kwargs
        # a list where the saved call had one tensor is that tensor (TF 2.21: f([5., 6.]) runs f's (2,) program)
        return [leaf for name in names
                for leaf in ([bound[name]] if nodes.get(name) == "leaf" else jax.tree.leaves(bound[name]))]

    def matches(self, leaves: list) -> bool:
        if len(leaves) != len(self.specs):
            return False
        for leaf, spec in zip(leaves, self.specs):
            if "array" in spec:
                shape = np.shape(leaf)
                dtype = np.dtype(getattr(leaf, "dtype", None) or np.asarray(leaf).dtype)
                if isinstance(leaf, (list, tuple, float)) and not isinstance(leaf, np.generic) and dtype == np.float64:
                    dtype = np.dtype(np.float32)  # TF reads Python floats as float32
                if _python_fits(leaf, np.dtype(spec["dtype"])):
                    dtype = np.dtype(spec["dtype"])  # TF 2.21: l.f(5) runs f's float32 program; l.g(5.) no int one
                if self.input_signature and not hasattr(leaf, "numpy") and not isinstance(leaf, jax.Array):
                    dtype = np.dtype(spec["dtype"])  # numpy and Python values are converted to the input_signature's
                    # dtype (observed, TF 2.21: a float32 array passed for a uint8 TensorSpec runs), tensors are not
                if (len(shape) != len(spec["array"]) or dtype != np.dtype(spec["dtype"])
                        or any(d is not None and d != s for d, s in zip(spec["array"], shape))):
                    return False
            elif spec["value"] != leaf or type(spec["value"]) is not type(leaf):
                return False
        return True

    def __call__(self, variables: list, leaves: list) -> Any:
        arrays = [_array(leaf, spec["dtype"]) for leaf, spec in zip(leaves, self.specs) if "array" in spec]
        try:
            outputs, new_values = self.exported.call([v.value for v in variables], arrays)
        except ValueError as error:  # sizes the program cannot take (TF 2.21: the op's InvalidArgumentError):
            # free dimensions an op constrains, or a size saved as known (jdist.tf_compat.signature_dims)
            if not any(text in str(error) for text in ("refining shapes", "shape constraint", "Shape mismatch")):
                raise
            shapes = ", ".join(str(tuple(np.shape(a))) for a in arrays)
            raise InvalidArgumentError(None, None, f"The saved function cannot run on inputs of shapes {shapes}: an op "
                                       "in it (a reshape to [-1, n], say) needs sizes these do not have.") from None
        writes = range(len(variables)) if self.writes is None else self.writes
        for i in writes:
            variables[i].assign(new_values[i])
        traced = any(isinstance(o, Tracer) for o in outputs)  # under a tape's replay or jax.jit
        if not traced and not any(isinstance(leaf, jax.Array) for leaf in leaves):  # host inputs: host tensors
            outputs = [np.asarray(leaf) for leaf in outputs]  # out, as a tf.function's (`.numpy()`, TF's repr)
        return host_tensors.function_outputs(decode(self.outputs, list(outputs)))


class LoadedFunction:
    """A saved `tf.function`: calls the program its arguments match."""

    def __init__(self, name: str, programs: list[_Program], variables: list):
        self.__name__ = name
        self._programs, self.variables = programs, variables

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self._programs:  # saved never traced (TF 2.21's ValueError, observed)
            raise ValueError(f"Found zero restored functions for caller function. (No signature of "
                             f"{self.__name__} was saved: it was not called, nor given to get_concrete_function, "
                             "before tf.saved_model.save; a call only inside another tf.function is not saved "
                             "either. Call it or give it an input_signature before saving.)")
        for program in self._programs:
            leaves = program.leaves(args, kwargs)
            if leaves is not None and program.matches(leaves):
                return program(self.variables, leaves)
        got = ", ".join([_describe(a) for a in args] + [f"{k}={_describe(v)}" for k, v in kwargs.items()])
        saved = "; ".join(", ".join(_describe_spec(s) for s in p.specs) for p in self._programs)
        if self._programs and self._programs[0].input_signature:
            raise TypeError(f"Binding inputs to tf.function failed: {self.__name__}({got}) does not match its "
                            f"input_signature ({saved}).")
        skipped = sorted({note for p in self._programs for note in p.skipped})
        ranked = any(p.unknown_rank for p in self._programs)
        unsaved = (" An argument of unknown rank (TensorSpec(None)) is saved for ranks 0-4 (those that trace); "
                   "give its rank in the TensorSpec for another." if ranked else "")
        unsaved += f" Not saved: {'; '.join(skipped)}." if skipped else ""
        raise ValueError(f"{_NO_MATCH} Got: {self.__name__}({got}); saved signatures: {saved}. jdist saves the "
                         "signatures a function was called with before tf.saved_model.save (or its input_signature, "
                         f"or given to get_concrete_function).{unsaved}")


class _Signature:
    """`loaded.signatures[key]`: called with keyword arguments, returns a dict (`output_0`, ... unless the
    function returns a dict), as TF's signatures; `structured_input_signature` and `structured_outputs` as TF's
    (a dimension free in every saved program is None; an argument of unknown rank has shape None)."""

    def __init__(self, name: str, programs: list[_Program], variables: list):
        self._function = LoadedFunction(name, programs, variables)
        self._programs = programs

    def __call__(self, *args: Any, **kwargs: Any) -> dict:
        names = self._programs[0].parameters[:len(self._programs[0].specs)]
        if args and (len(names) != 1 or len(args) > 1 or kwargs):  # TF 2.21: only a one-input signature
            raise TypeError(  # takes its input positionally; others are called with keywords
                f"Binding inputs to tf.function failed due to `too many positional arguments`. Received "
                f"{len(args)} positional argument(s) for signature (*, {', '.join(names)}); call it with keywords: "
                f"{', '.join(f'{n}=...' for n in names)}.")
        if args:
            kwargs = {names[0]: args[0]}
        self._check_dtypes(names, kwargs)
        return self._named(self._function(**kwargs))

    def _check_dtypes(self, names: list[str], kwargs: dict) -> None:
        """A tensor of another dtype than its spec: TF 2.21's InvalidArgumentError (observed: "cannot compute
        __inference_signature_wrapper_124 as input #0(zero-based) was expected to be a float tensor but is a
        int32 tensor"); numpy and Python values are converted, as TF converts them (observed)."""
        from jdist.errors import dtype_mismatch

        specs = self._programs[0].specs
        for index, name in enumerate(names):
            value: Any = kwargs.get(name)
            spec = specs[index] if index < len(specs) else {}
            if "array" not in spec or not (hasattr(value, "numpy") or isinstance(value, jax.Array)):
                continue
            got, expected = np.dtype(value.dtype), np.dtype(spec["dtype"])
            if got != expected:
                raise dtype_mismatch("__inference_signature_wrapper", index, expected.name, got.name)

    @staticmethod
    def _named(outputs: Any) -> dict:
        if isinstance(outputs, dict):
            return outputs
        return {f"output_{i}": leaf for i, leaf in enumerate(jax.tree.leaves(outputs))}

    @property
    def structured_input_signature(self) -> tuple[tuple, dict]:
        from jdist.input.tensor_spec import TensorSpec

        first = self._programs[0]
        names = first.parameters[:len(first.specs)]
        ranks = {len(p.specs[0]["array"]) for p in self._programs if "array" in p.specs[0]}
        specs = {}
        for i, name in enumerate(names):
            spec = first.specs[i]
            shape = None if len(ranks) > 1 else [d for d in spec.get("array", [])]
            specs[name] = TensorSpec(shape, spec.get("dtype", "float32"), name=name)
        return (), specs

    @property
    def structured_outputs(self) -> dict:
        from jdist.input.tensor_spec import TensorSpec

        first = self._programs[0]
        # The program returns its flat outputs, then the variables' new values.
        avals = first.exported.out_avals[:len(first.exported.out_avals) - len(self._function.variables)]
        leaves = [TensorSpec(None if len(self._programs) > 1 else [d if isinstance(d, int) else None
                                                                     for d in a.shape], a.dtype) for a in avals]
        named = self._named(decode(first.outputs, leaves))
        return {k: TensorSpec(v.shape, v.dtype, name=k) for k, v in named.items()}


class LoadedModule:
    """The loaded object (TF's `_UserObject`): the module's variables by attribute path, its functions."""

    def __init__(self) -> None:
        self.signatures: dict[str, _Signature] = {}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        function = self.__dict__.get("__call__")
        if function is None:
            raise TypeError("The saved module had no @tf.function __call__.")
        return function(*args, **kwargs)


def _python_fits(leaf: Any, dtype: np.dtype) -> bool:
    """Whether a Python number (or list of them) converts to `dtype` as TF converts it for a saved signature
    (observed, TF 2.21: 5 and True run a float32 program, 5. does not run an int32 one)."""
    if not isinstance(leaf, (bool, int, float, list, tuple)) or isinstance(leaf, np.generic):  # np.float64 is
        # a float, but TF 2.21 refuses it for a float32 program (a float64 tensor)
        return False
    kind = np.asarray(leaf).dtype.kind
    return dtype.kind in {"b": "biuf", "i": "iufc", "u": "iufc", "f": "fc"}.get(kind, "")


def _array(leaf: Any, dtype: str) -> Any:
    """An argument as the program's input: traced values (a tape's replay, jax.jit) stay traced."""
    if isinstance(leaf, Tracer):
        return jax.numpy.asarray(leaf, dtype=dtype)
    return np.asarray(leaf, dtype=dtype)


def _describe(value: Any) -> str:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"TensorSpec(shape={tuple(value.shape)}, dtype={np.dtype(value.dtype).name})"
    return repr(value)


def _describe_spec(spec: dict) -> str:
    if "array" in spec:
        return f"TensorSpec(shape={tuple(spec['array'])}, dtype={spec['dtype']})"
    return repr(spec["value"])


def _place(root: Any, path: str, value: Any) -> None:
    """Sets `value` at an attribute path (`sub.w`, `layers.0.kernel`) under `root`, making the objects between."""
    parts = path.split(".")
    holder = root
    for part in parts[:-1]:
        child = getattr(holder, part, None)
        if child is None:
            child = LoadedModule()
            setattr(holder, part, child)
        holder = child
    setattr(holder, parts[-1], value)


def load(directory: str, description: dict) -> LoadedModule:
    """The object `module_saving.save` wrote to `directory`."""
    from jdist.tf_compat.variables import Variable

    root = LoadedModule()
    with np.load(os.path.join(directory, fmt.VARIABLES)) as data:
        variables = [Variable(data[f"v{i}"], trainable=saved["trainable"])
                     for i, saved in enumerate(description["variables"])]
    for variable, saved in zip(variables, description["variables"]):
        _place(root, saved["path"], variable)
    for name, entries in description["functions"].items():
        function = LoadedFunction(name, [_Program(directory, entry) for entry in entries], variables)
        if name == "__call__":
            root.__dict__["__call__"] = function
        else:
            setattr(root, name, function)
    root.signatures = {key: _Signature(saved["function"], [_Program(directory, e) for e in saved["entries"]],
                                       variables) for key, saved in description["signatures"].items()}
    return root


def load_any(export_dir: Any, tags: Any = None, options: Any = None) -> Any:
    """`tf.saved_model.load`: a saved `tf.Module` (this module), else a Keras model's (`jdist.saved_model`)."""
    from jdist import saved_model
    from jdist.saved_model.loaded import read_description

    directory = os.fspath(export_dir)
    description = read_description(directory)
    if description.get("kind") == "tf.Module":
        return load(directory, description)
    loaded = saved_model.load(export_dir, tags=tags, options=options)
    methods = os.path.join(directory, METHODS)
    if os.path.isdir(methods):  # a Keras model's @tf.function methods and signatures (`module_saving.save_keras`)
        module = load(methods, read_description(methods))
        for name, value in vars(module).items():
            if isinstance(value, LoadedFunction) and (value._programs or not hasattr(loaded, name)):
                setattr(loaded, name, value)  # one never traced hides none of the loaded model's own
        if module.signatures:  # `model.save(path, signatures=...)`: those, as tf_keras's
            loaded.signatures = module.signatures  # pyright: ignore[reportAttributeAccessIssue]
    return loaded
