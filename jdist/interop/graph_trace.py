"""A `tf.function`'s body traced once per input signature into one compiled program, as TF traces it into a graph.

The Python body runs once, under JAX's tracer: its Python side effects (`print`, appending to a list) happen
then, as in TF's tracing, and later calls with the same signature run only the compiled program (`tf.print`
and `tf.py_function` still run on every call, as callbacks inside it). Arrays among the arguments are the
program's inputs; Python values and other objects are fixed at trace time, as TF fixes them (a global read in
the body keeps its traced value). Variables, the ones passed in and the ones the body reads from outside, are
read and assigned through a Keras `StatelessScope`: the program takes their values as inputs and returns
what the body assigned, which is written back after each call, so a later call sees them as TF's variables.

A variable the body reads from outside is first a constant of the trace: the program takes it as an input,
found among the trace's constants by the identity of its value; where it is not found (an autocast or numpy
copy of it), the trace runs again with it as an input, and that retrace prints nothing. A variable the body
makes is allowed in the function's first trace only, and that trace runs twice, as TF's does (observed,
TF 2.21: a body that makes a variable on first call prints twice and counts two traces). An op that cannot be
compiled stops the trace (`jdist.strategy.function_trace`); so does any error: the caller then runs the body
eagerly for that signature.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import sys
from typing import Any, Callable

import jax
import numpy as np

from jdist import thread_stdout
from jdist.interop import output_order, traced_shapes
from jdist.strategy import function_trace, host_checks

_MAX_RETRACES = 4


def _jaxpr_as_fun(closed: Any) -> Callable:
    try:
        from jax.extend.core import jaxpr_as_fun
    except ImportError:  # an older JAX
        from jax.core import jaxpr_as_fun  # type: ignore[no-redef]
    return jaxpr_as_fun(closed)


def _initialize_made_variables(trace: function_trace.Trace) -> None:
    """Gives the Keras variables a trace made (a layer built by the body) their initial values, outside JAX's
    tracer (their initializers must run eagerly, not into the program), then runs what the trace left for
    after it (a checkpoint's values restored into a layer built in it: `function_trace.after_trace`)."""
    from keras.src.backend.common.variables import initialize_all_variables

    initialize_all_variables()
    for action in trace.after:
        action()


@functools.cache  # asked per argument leaf on every call of a compiled function
def _keras_variable_type() -> type:
    import keras

    return keras.Variable


def _is_array(leaf: Any) -> bool:
    """An argument that becomes a program input: an array or tensor (not a variable). A string tensor cannot
    be one (JAX holds numbers only): `trace` refuses it, since a value fixed at trace time would be stale."""
    return (isinstance(leaf, jax.Array) or hasattr(leaf, "shape") and getattr(leaf, "dtype", None) is not None
            and not isinstance(leaf, _keras_variable_type()))


def _scope_type() -> type:
    import keras

    class RecordingScope(keras.StatelessScope):  # type: ignore[misc, valid-type]
        """A `StatelessScope` that notes the variables read outside its mapping and the ones assigned."""

        def __init__(self, mapping: list):
            super().__init__(mapping, initialize_variables=False)  # made variables start after the trace
            self.missing: dict[int, Any] = {}
            self.assigned: dict[int, Any] = {}
            self.made: list = []  # Keras variables made in this scope (a layer built by the body)

        def get_current_value(self, variable: Any) -> Any:
            value = super().get_current_value(variable)
            if value is None:
                self.missing[id(variable)] = variable
                if getattr(variable, "_value", 0) is None and all(v is not variable for v in self.made):
                    self.made.append(variable)
            return value

        def add_update(self, update: Any) -> None:
            super().add_update(update)
            self.assigned[id(update[0])] = update[0]

    return RecordingScope


class Program:
    """One input signature's compiled program and how to feed it and read it back (see the module docstring)."""

    def __init__(self, run: Callable, leaves: list, treedef: Any, inputs: list[int], variables: list[int],
                 captured: list, updated: list, out_treedef: Any, out_static: list, out_avals: list, traces: int,
                 key_orders: Any = None):
        self._run: Callable = jax.jit(run)
        self._leaves, self._treedef = leaves, treedef
        self._inputs, self._variables, self.captured = inputs, variables, captured
        self._updated, self._out_treedef, self._out_static = updated, out_treedef, out_static
        self.traces, self._key_orders = traces, key_orders
        self.jaxpr: Any = None
        avals = iter(out_avals)
        self.output_structure = output_order.reordered(jax.tree.unflatten(out_treedef, [  # TF's "Output Type"
            _shape_of(next(avals)) if static is _DYNAMIC else static for static in out_static]), key_orders)

    def __call__(self, args: tuple, kwargs: dict) -> Any:
        leaves = jax.tree.leaves((args, kwargs), is_leaf=_is_variable)
        arg_variables = [leaves[i] for i in self._variables]
        values = ([leaves[i] for i in self._inputs] + [v.value for v in arg_variables]
                  + [v.value for v in self.captured])
        flat = self._run(*values)
        n_out = len(flat) - len(self._updated)
        variables = arg_variables + self.captured
        for index, value in zip(self._updated, flat[n_out:]):
            variables[index].assign(value)
        outputs = flat[:n_out]
        if not any(isinstance(leaves[i], jax.Array) for i in self._inputs):
            outputs = [np.asarray(x) for x in outputs]  # host tensors in, host tensors out, as eager ops give
        elif any(_spans_devices(v) for v in values):  # several devices: keep XLA:CPU's collectives from piling up
            jax.block_until_ready(flat)
        it = iter(outputs)
        out = [next(it) if static is _DYNAMIC else static for static in self._out_static]
        return output_order.reordered(jax.tree.unflatten(self._out_treedef, out), self._key_orders)


_DYNAMIC = object()


def _is_variable(leaf: Any) -> bool:
    return isinstance(leaf, _keras_variable_type())


def _shape_of(aval: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype)


def _spans_devices(value: Any) -> bool:
    sharding = getattr(value, "sharding", None)
    return sharding is not None and len(sharding.device_set) > 1


def trace(fn: Callable, args: tuple, kwargs: dict, first: bool, shown: list | None = None) -> Program:
    """`fn(*args, **kwargs)` traced into a `Program` (see the module docstring); `first`: the function's first
    trace, the one that may make variables; `shown`: per flattened argument, the shape a printed input shows
    (TF's, with None for a relaxed dimension), or None. Raises what stopped the trace; its prints are then
    dropped."""
    since = host_checks.placed()  # a program with tf.debugging checks raises their errors at the call
    leaves, treedef = jax.tree.flatten((args, kwargs), is_leaf=_is_variable)
    inputs = [i for i, leaf in enumerate(leaves) if _is_array(leaf)]
    if any(np.dtype(leaves[i].dtype).kind in "OSU" for i in inputs):
        raise function_trace.NotTraceable("a string tensor among the arguments")
    variables = [i for i, leaf in enumerate(leaves) if _is_variable(leaf)]
    arg_variables = [leaves[i] for i in variables]
    captured: list = []
    traces, may_create = 0, first
    for _ in range(_MAX_RETRACES):
        record = _TraceRecord()
        body = _body(fn, leaves, treedef, inputs, arg_variables, captured, record, shown)
        values = ([jax.numpy.asarray(leaves[i]) for i in inputs] + [v.value for v in arg_variables]
                  + [v.value for v in captured])
        with thread_stdout.captured() as printed, function_trace.tracing(function_trace.Trace(may_create)) as t, \
                _symbolic_printing(fn, args, kwargs, record):
            try:
                closed = jax.make_jaxpr(body)(*values)
            finally:
                _initialize_made_variables(t)
        known = {id(v) for v in arg_variables + captured}
        new = [v for v in record.missing_read + record.assigned_missing + t.created if id(v) not in known]
        new = list({id(v): v for v in new}.values())
        if record.made and not may_create:
            raise ValueError(function_trace.SINGLETON)
        made = t.created or record.made
        if made:  # TF traces a function that made variables once more, showing both traces
            sys.stdout.write(printed.getvalue())
            traces += 1
        run = _jaxpr_as_fun(closed)
        # variables read from outside: their values are the trace's constants, made the program's inputs
        lifted = _lifted(closed, record.missing_read, len(values)) if new and not made else None
        if lifted is not None:
            run, new = lifted, []
            captured += list({id(v): v for v in record.missing_read + record.assigned_missing}.values())
        if new:
            captured += new
            may_create = False
            continue
        sys.stdout.write(printed.getvalue())
        known = arg_variables + captured
        updated = record.updated + [_index_of(v, known) for v in record.assigned_missing]
        program = Program(run, leaves, treedef, inputs, variables, captured, updated, record.out_treedef,
                          record.out_static, closed.out_avals[:len(closed.out_avals) - len(updated)], traces + 1,
                          record.key_orders)
        program._run = host_checks.checked(program._run, since)
        program.jaxpr = closed  # its operations, for `ConcreteFunction.graph` (`concrete_graph`)
        return program
    raise function_trace.NotTraceable("a body that reads new variables on every trace")


@dataclasses.dataclass
class _TraceRecord:
    """What one trace of the body found out, for the program built from it and for printing during it."""

    missing_read: list = dataclasses.field(default_factory=list)  # variables read from outside, not given
    assigned_missing: list = dataclasses.field(default_factory=list)  # variables assigned, not given
    made: list = dataclasses.field(default_factory=list)  # Keras variables the body made (a layer it built)
    updated: list = dataclasses.field(default_factory=list)  # indices of the given variables it assigned
    out_treedef: Any = None
    out_static: list = dataclasses.field(default_factory=list)  # output leaves, `_DYNAMIC` where traced
    names: dict = dataclasses.field(default_factory=dict)  # id of a traced input -> its printed name
    shapes: dict = dataclasses.field(default_factory=dict)  # id of a traced input -> its printed shape
    signature: inspect.Signature | None = None
    key_orders: Any = None  # the body's dict key orders (output_order)


def _index_of(variable: Any, variables: list) -> int:
    return next(i for i, v in enumerate(variables) if v is variable)


def _lifted(closed: Any, read: list, n_values: int) -> Callable | None:
    """The program with the variables read from outside as inputs (after the `n_values` it takes): each one's
    value is found among the trace's constants by identity. None where one is not found (an autocast or numpy
    copy of it, say): the caller then traces again with them as inputs."""
    from jax.extend.core import ClosedJaxpr

    positions = []
    for variable in read:
        found = [i for i, const in enumerate(closed.consts) if const is getattr(variable, "_value", None)]
        if len(found) != 1:
            return None
        positions.append(found[0])
    fixed = list(closed.consts)

    def run(*values: Any) -> list:
        consts = list(fixed)
        for position, value in zip(positions, values[n_values:]):
            consts[position] = value
        return _jaxpr_as_fun(ClosedJaxpr(closed.jaxpr, consts))(*values[:n_values])

    return run


@contextlib.contextmanager
def _symbolic_printing(fn: Callable, args: tuple, kwargs: dict, record: "_TraceRecord") -> Any:
    """While tracing, `print(x)` of a traced tensor shows TF's symbolic tensor, `Tensor("a:0", shape=(),
    dtype=int32)`, named after its parameter for an input (TF names others by their op; here "traced")."""
    try:
        from jax._src.interpreters import partial_eval
    except ImportError:  # a JAX that moved its tracer: traced values print as JAX's
        yield
        return

    names = record.names
    try:
        record.signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a callable without a signature: its inputs print as "traced"
        pass

    shapes = record.shapes

    def text(tracer: Any) -> str:
        dims = shapes.get(id(tracer), tracer.shape)
        shape = (traced_shapes.UNKNOWN_RANK if dims is traced_shapes.UNKNOWN_RANK else
                 "(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "") + ")")
        return f'Tensor("{names.get(id(tracer), "traced")}:0", shape={shape}, dtype={np.dtype(tracer.dtype).name})'

    tracer_type = partial_eval.DynamicJaxprTracer
    tracer_type.__str__ = text  # type: ignore[method-assign]
    try:
        with traced_shapes.shown_as(shapes):  # `print(x.shape)` too: `(None, 3)`
            yield
    finally:
        del tracer_type.__str__


def _body(fn: Callable, leaves: list, treedef: Any, inputs: list[int], arg_variables: list, captured: list,
          record: "_TraceRecord", shown: list | None) -> Callable:
    """The function JAX traces: flat input values in; the body's array outputs and assigned values out."""
    n_inputs, known = len(inputs), arg_variables + captured

    def body(*values: Any) -> list:
        full = list(leaves)
        for i, value in zip(inputs, values[:n_inputs]):
            full[i] = value
            if shown is not None and shown[i] is not None:  # TF's shape of this input: None where relaxed
                record.shapes[id(value)] = shown[i]
        args, kwargs = jax.tree.unflatten(treedef, full)
        _name_inputs(args, kwargs, record)
        with _scope_type()(list(zip(known, values[n_inputs:]))) as scope:
            given = dict(scope.state_mapping)
            out = fn(*args, **kwargs)
            record.key_orders = output_order.key_orders(out)
            out = jax.tree.map(lambda leaf: leaf.value if _is_variable(leaf) else leaf, out, is_leaf=_is_variable)
        out_leaves, record.out_treedef = jax.tree.flatten(out)
        record.out_static = [_DYNAMIC if isinstance(leaf, jax.Array) else leaf for leaf in out_leaves]
        record.missing_read = [v for key, v in scope.missing.items() if key not in given]
        record.assigned_missing = [v for key, v in scope.assigned.items() if key not in given]
        record.made = scope.made
        changed = [(i, v) for i, v in enumerate(known) if scope.state_mapping.get(id(v)) is not given[id(v)]]
        record.updated = [i for i, _ in changed]
        return ([leaf for leaf in out_leaves if isinstance(leaf, jax.Array)]
                + [scope.state_mapping[id(v)] for _, v in changed]
                + [scope.state_mapping[id(v)] for v in record.assigned_missing])

    return body


def _name_inputs(args: tuple, kwargs: dict, record: "_TraceRecord") -> None:
    """Each traced input's name for printing: its parameter's, numbered after the first within a structure."""
    names, signature = record.names, record.signature
    if signature is None:
        return
    try:
        arguments = signature.bind(*args, **kwargs).arguments
    except TypeError:
        return
    for name, value in arguments.items():
        for i, leaf in enumerate(jax.tree.leaves(value)):
            names[id(leaf)] = name if i == 0 else f"{name}_{i}"
