"""`tf.Variable`: a Keras 3 variable with TF's constructor and extras (`read_value`, TF's repr).

Being a `keras.Variable` is what makes it work everywhere TF scripts use variables: created in
`strategy.scope()` it is placed by the strategy (replicated: mirrored), `strategy.run` hands it to the
compiled replica function and writes back what the function assigned (as for Keras models' weights,
`jdist.interop.keras_run`), `tf.train.Checkpoint(epoch=v)` saves and restores it; arithmetic operators and
`trainable` are Keras's. `assign` / `assign_add` / `assign_sub` are TF's: `read_value=False`, TF's shape and
dtype errors (`assign_checks`), an eager one returns TF's `UnreadVariable` (`unread_variable`), `v[1:3].assign`
writes a slice (`sliced_assign`), and in the replicas of `strategy.run` a variable made outside the scope is
updated by every replica in turn (`replica_updates`). TF's: `name` ('w:0', 'blk/w:0' in `tf.name_scope("blk")`),
`shape` (a `TensorShape`; `shape=[None]` keeps unknown dimensions), `constraint`, `initial_value` (eagerly TF's
RuntimeError), `ref()`, truth and iteration over rows (a JAX array's
indexing never ends a Python iteration), Python floats given an integer dtype refused; `numpy()` is
TF's (a numpy scalar of the declared dtype for a 0-d variable, `numpy.int64` for TF's int64 counters, which
JAX holds in 32 bits unless `jax_enable_x64`: an initial value that does not fit is an error). `dtype` is
TF's `tf.DType` and `value()` TF's method for a script's code (`variable_reads`). Needs Keras on JAX
(`KERAS_BACKEND=jax`), as `tf.keras` does.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import sys
import warnings
import weakref
from typing import Any, Iterator

import jax
import numpy as np
from jax.core import Tracer

from jdist.input.calling_code import library_code
from jdist.input.tensor_spec import TensorShape
from jdist.strategy import context, function_trace
from jdist.strategy.aggregation import VariableAggregation, VariableSynchronization
from jdist.strategy.devices import tf_device_name
from jdist.tf_compat import (
    assign_checks,
    distributed_variables,
    keras_tf_variables,
    replica_updates,
    scatter_ops,
    sliced_assign,
    unread_variable,
    variable_items,
    variable_reads,
)
from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.keras_namespace import keras_module
from jdist.tf_compat.name_scopes import get_current_name_scope
from jdist.tf_compat.ops import check_python_value, convert_to_tensor
from jdist.tf_compat.variable_handles import Reference, ResourceHandle
from jdist.tfdata import operands, tensor_numpy
from jdist.tfdata.structure import HostTensor
from jdist.train import checkpoint as checkpoint_lib


@functools.cache
def variable_class() -> type:
    """The `keras.Variable` subclass behind `tf.Variable` (made on first use: Keras is imported then)."""
    keras = keras_module()

    class TFVariable(keras.Variable):  # type: ignore[misc, valid-type]
        def read_value(self) -> Any:
            return self.value

        @property
        def value(self) -> Any:
            """Keras's property for library code; TF's method `v.value()` for a script's (`variable_reads`)."""
            if library_code(sys._getframe(1)):
                return keras.Variable.value.fget(self)
            return variable_reads.value_method(self)

        @property
        def dtype(self) -> Any:
            """Keras's name ("float32") for library code; TF's `tf.DType` for a script's (`variable_reads`)."""
            name = keras.Variable.dtype.fget(self)
            return name if library_code(sys._getframe(1)) else variable_reads.tf_dtype(name)

        @property
        def name(self) -> str:
            """TF's: the name with its output index (`tf.Variable(1., name="w").name` is 'w:0')."""
            return f"{self._jdist_scope}{self._name}:0"

        _jdist_scope = ""  # the `tf.name_scope` it was made in ("blk/"), as TF's names show it
        _jdist_declared_shape: Any = None  # `shape=` with unknown dimensions, `validate_shape=False`
        constraint: Any = None  # TF's `constraint=`: Keras's optimizers apply it after each update, as TF's

        @property
        def initial_value(self) -> Any:
            """TF 2.21's (observed): eagerly RuntimeError; None inside a `tf.function` (for a variable made
            outside it)."""
            if not (function_trace.active() or context.in_replica_context()):
                raise RuntimeError("This property is not supported when eager execution is enabled.")
            return None

        @property
        def shape(self) -> TensorShape:
            """TF's `TensorShape` (`as_list()`, `rank`), a tuple as Keras's."""
            return self._jdist_shape(library_code(sys._getframe(1)))

        def get_shape(self) -> TensorShape:
            return self._jdist_shape(library_code(sys._getframe(1)))

        def _jdist_shape(self, library: bool) -> TensorShape:
            declared = self._jdist_declared_shape  # Keras's code gets the current shape of an unknown rank one
            if declared is None or (declared.rank is None and library):
                return TensorShape(self._shape)
            return declared

        def ref(self) -> Reference:
            """TF's hashable reference (variables are unhashable): `{v.ref(): ...}`, `ref.deref()`."""
            return Reference(self)

        experimental_ref = ref

        def __bool__(self) -> bool:
            return bool(np.asarray(self.value))

        def __getitem__(self, index: Any) -> Any:
            """Keras's indexing; a slice read outside a traced function takes TF's `v[1:3].assign(...)`."""
            out = keras.Variable.__getitem__(self, index)
            return variable_items.item_of(self, index, out, not library_code(sys._getframe(1)))

        def __iter__(self) -> Iterator[Any]:
            """TF's: the rows of the value (a 0-d variable is TF's TypeError)."""
            if not self._shape:
                raise TypeError("Cannot iterate over a scalar tensor.")
            return iter(self.value)

        def assign(self, value: Any, use_locking: Any = None, name: Any = None, read_value: bool = True) -> Any:
            check_python_value(value, numpy_dtype(self.dtype))
            user = not library_code(sys._getframe(1))
            assign_checks.check(self, value, "assign", user)
            out = self._jdist_assign(value, user)
            return unread_variable.returned(self, out) if read_value else None

        def _jdist_assign(self, value: Any, user: bool = False) -> Any:
            check = getattr(self, "_jdist_check_assign", None)  # a DVariable's: its layout is fixed, as TF's
            if check is not None:
                check(value)
            if self._jdist_declared_shape is not None:  # TF's `shape=[None]`: any such shape may be assigned
                self._shape = tuple(np.shape(value))
            distribution = self._jdist_replication
            if distribution is not None:
                if distribution.on_read and not distribution.in_replica():
                    distribution.cross_replica_assign(value)
                    return self._jdist_write_read_value()
                distribution.refuse_same_sum(value)
                value = distribution.combined(value)  # a MirroredVariable's aggregation, in a replica
            elif user and (ctx := replica_updates.shared_replicas()) is not None:
                value = replica_updates.last_replicas(ctx, convert_to_tensor(value))  # one variable, replicas in turn
            with _quiet_narrowing(self.dtype):
                return super().assign(value)

        def _jdist_assign_traced_slice(self, whole: Any, read_value: bool) -> Any:
            """A traced `v[i].assign(x)` (`sliced_assign`), `whole` the variable's new value: in a replica a
            MirroredVariable's copy takes it unaggregated (TF's); elsewhere it is the script's `assign`."""
            distribution = self._jdist_replication
            if distribution is not None and not distribution.on_read and distribution.in_replica():
                self._jdist_sliced_copies = True  # its replicas' copies may now differ (`_jdist_drifts`)
                with _quiet_narrowing(self.dtype):
                    out = keras.Variable.assign(self, whole)
            else:
                assign_checks.check(self, whole, "assign", True)
                out = self._jdist_assign(whole, user=True)
            return unread_variable.returned(self, out) if read_value else None

        def assign_add(self, value: Any, use_locking: Any = None, name: Any = None, read_value: bool = True) -> Any:
            check_python_value(value, numpy_dtype(self.dtype))
            user = not library_code(sys._getframe(1))
            assign_checks.check(self, value, "assign_add", user)
            if self._jdist_replication is not None:
                self._jdist_replication.refuse_same_sum(value)
            out = self._jdist_assign_add(value, user)
            return unread_variable.returned(self, out) if read_value else None

        def _jdist_assign_add(self, value: Any, user: bool = False) -> Any:
            distribution = self._jdist_replication
            if distribution is not None:
                if distribution.on_read and not distribution.in_replica():
                    distribution.cross_replica_add(value)
                    return self._jdist_write_read_value()
                with _quiet_narrowing(self.dtype):
                    return super().assign(self.value + convert_to_tensor(distribution.combined(value)))  # a list too
            if user and (ctx := replica_updates.shared_replicas()) is not None:  # every replica's delta adds up
                with _quiet_narrowing(self.dtype):
                    return super().assign(self.value + replica_updates.every_replicas(ctx, convert_to_tensor(value)))
            with _quiet_narrowing(self.dtype):
                return super().assign_add(value)

        def assign_sub(self, value: Any, use_locking: Any = None, name: Any = None, read_value: bool = True) -> Any:
            check_python_value(value, numpy_dtype(self.dtype))
            user = not library_code(sys._getframe(1))
            assign_checks.check(self, value, "assign_sub", user)
            if self._jdist_replication is not None:
                self._jdist_replication.refuse_same_sum(value)
            if self._jdist_replication is not None or (user and replica_updates.shared_replicas() is not None):
                out = self._jdist_assign_add(-convert_to_tensor(value), user)
            else:
                with _quiet_narrowing(self.dtype):
                    out = super().assign_sub(value)
            return unread_variable.returned(self, out) if read_value else None

        def scatter_nd_update(self, indices: Any, updates: Any, use_locking: Any = None, name: Any = None) -> Any:
            """TF's: the elements at `indices` (rows of coordinates) take `updates`."""
            return self.assign(scatter_ops.tensor_scatter_nd_update(self.value, indices, updates))

        def scatter_nd_add(self, indices: Any, updates: Any, use_locking: Any = None, name: Any = None) -> Any:
            return self.assign(scatter_ops.tensor_scatter_nd_add(self.value, indices, updates))

        def scatter_nd_sub(self, indices: Any, updates: Any, use_locking: Any = None, name: Any = None) -> Any:
            return self.assign(scatter_ops.tensor_scatter_nd_add(self.value, indices, -convert_to_tensor(updates)))

        def scatter_update(self, sparse_delta: Any, use_locking: Any = None, name: Any = None) -> Any:
            """TF's: the rows `sparse_delta.indices` (a `tf.IndexedSlices`) take `sparse_delta.values`."""
            rows = np.asarray(sparse_delta.indices).reshape(-1, 1)
            return self.scatter_nd_update(rows, sparse_delta.values)

        def scatter_add(self, sparse_delta: Any, use_locking: Any = None, name: Any = None) -> Any:
            rows = np.asarray(sparse_delta.indices).reshape(-1, 1)
            return self.scatter_nd_add(rows, sparse_delta.values)

        def scatter_sub(self, sparse_delta: Any, use_locking: Any = None, name: Any = None) -> Any:
            rows = np.asarray(sparse_delta.indices).reshape(-1, 1)
            return self.scatter_nd_sub(rows, sparse_delta.values)

        _jdist_replication: Any = None  # a MirroredVariable's or SyncOnReadVariable's (distributed_variables)

        def _jdist_write_read_value(self) -> Any:
            """An ON_READ variable's value outside `run` is its copies combined: kept as the Keras value."""
            with _quiet_narrowing(self.dtype):
                keras.Variable.assign(self, self._jdist_replication.read())
            return self

        def _jdist_run_value(self, strategy: Any) -> Any:
            return distributed_variables.run_value(self, strategy)

        def _jdist_receive(self, new: Any) -> bool:
            return distributed_variables.receive(self, new)

        @property
        def _jdist_drifts(self) -> bool:
            """A MirroredVariable with aggregation NONE (or any, once sliced in a replica): replicas that assign it
            different values keep their own copies (TF's), taken by `_jdist_receive`."""
            distribution = self._jdist_replication
            return distribution is not None and not distribution.on_read \
                and (distribution.aggregation is VariableAggregation.NONE or self._jdist_sliced_copies)

        _jdist_sliced_copies = False  # a traced `v[i].assign` in a replica wrote its copies unaggregated

        def _jdist_hold(self, value: Any) -> None:
            """Sets the value without an assignment's rules (the first replica's copy of a drifted variable)."""
            with _quiet_narrowing(self.dtype):
                keras.Variable.assign(self, value)

        @property
        def _jdist_on_read(self) -> bool:
            return self._jdist_replication is not None and self._jdist_replication.on_read

        def _jdist_local_results(self) -> tuple | None:
            """`strategy.experimental_local_results(v)`: the replicas' values of a distributed variable."""
            distribution = self._jdist_replication
            return None if distribution is None else distribution.components(self)

        @property
        def values(self) -> tuple:
            """A distributed variable's replicas' values (TF's `MirroredVariable.values`)."""
            components = self._jdist_local_results()
            if components is None:
                raise AttributeError("'Variable' object has no attribute 'values': only a variable made in a "
                                     "mirroring strategy's scope has per-replica values")
            return components

        @property
        def synchronization(self) -> Any:
            """TF's `tf.VariableSynchronization` (AUTO outside a strategy; ON_WRITE or ON_READ in one)."""
            distribution = self._jdist_replication
            return self._jdist_synchronization if distribution is None else distribution.synchronization

        @property
        def aggregation(self) -> Any:
            """TF's `tf.VariableAggregation`."""
            return self._jdist_aggregation

        _jdist_synchronization = VariableSynchronization.AUTO
        _jdist_aggregation = VariableAggregation.NONE

        def numpy(self) -> Any:
            """TF's: a numpy scalar for a 0-d variable (`numpy.int64` for an int64 one), else an array, of the
            declared dtype (JAX holds 64-bit values in 32 bits unless `jax_enable_x64`)."""
            if self._jdist_on_read:
                self._jdist_replication.read()  # TF's error for an ON_READ variable with aggregation NONE
            value = np.asarray(self.value).astype(self.dtype, copy=False)
            return value[()] if value.ndim == 0 else value

        @property
        def device(self) -> str:
            """TF's name of the (first) device holding the value: '/job:localhost/replica:0/task:0/device:CPU:0'."""
            return tf_device_name(min(self.value.sharding.device_set, key=lambda d: d.id))

        @property
        def handle(self) -> ResourceHandle:
            """TF's resource handle, for showing (`print(v.handle)`): jdist has no resource tensors."""
            return ResourceHandle(self)

        @property
        def variables(self) -> list:
            """`[self]`: what `tf.train.Checkpoint` and `strategy.run` collect from trackable objects."""
            return [self]

        def __repr__(self) -> str:
            """TF's (observed, TF 2.21): `<tf.Variable 'Variable:0' shape=() dtype=float32, numpy=1.0>`; a
            distributed one lists its replicas' (`MirroredVariable:{...}`)."""
            if self._jdist_replication is not None:
                return distributed_variables.show(self, self._jdist_replication, self._show)
            return self._show(self.name, np.asarray(self.numpy()))

        def _show(self, name: str, value: np.ndarray, suffix: str = ":0") -> str:
            name = name[:-2] if name.endswith(":0") else name
            shown = repr(value.item()) if value.ndim == 0 else repr(value)
            shown = "\n" + shown if "\n" in shown else shown  # TF's: a value of several lines starts on its own
            declared = self._jdist_declared_shape
            shape = declared if declared is not None and declared.rank is None else tuple(self.shape)  # `<unknown>`
            return f"<tf.Variable '{name}{suffix}' shape={shape} dtype={self.dtype}, numpy={shown}>"

        __str__ = __repr__

    for op in _CHECKED_OPERATORS:  # TF's operand rule before Keras's operator (jdist.tfdata.operands)
        for dunder in (f"__{op}__", f"__r{op}__"):
            if hasattr(keras.Variable, dunder):
                setattr(TFVariable, dunder, _checked(op, getattr(keras.Variable, dunder), dunder.startswith("__r")))
    TFVariable.__name__ = TFVariable.__qualname__ = "Variable"
    sliced_assign.install()
    keras_tf_variables.register(TFVariable)  # a layer's attribute: not trained by fit, as TF's Keras 3
    keras_tf_variables.install()
    return TFVariable


@functools.cache
def _distributed_class(name: str) -> type:
    """`MirroredVariable` / `SyncOnReadVariable`: TF's type names for a variable made in a mirroring scope."""
    return type(name, (variable_class(),), {"__module__": __name__})


_CHECKED_OPERATORS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "lt", "le", "gt", "ge")


def _on_one_cpu(array: jax.Array) -> bool:
    devices = array.sharding.device_set
    return len(devices) == 1 and next(iter(devices)).platform == "cpu"


def _checked(op: str, keras_operator: Any, reflected: bool) -> Any:
    """`keras_operator` after TF's check of the operands (TF 2.21: `tf.Variable(1) * 2.5` is TypeError "Cannot
    convert 2.5 to EagerTensor of dtype int32"; `tf.constant(1) + tf.Variable(1.)` InvalidArgumentError)."""
    def method(self: Any, other: Any) -> Any:
        script = not library_code(sys._getframe(1))
        if script and (operands.is_tensor(other) or operands.convertible(other)):
            operands.check_pair(op, other, self) if reflected else operands.check_pair(op, self, other)
            if op == "matmul" and not tensor_numpy.NUMPY_BEHAVIOR["on"]:  # `v @ m` (jdist.tfdata.tensor_numpy)
                tensor_numpy.check_matmul(other, self) if reflected else tensor_numpy.check_matmul(self, other)
        result = keras_operator(self, other)
        if script and isinstance(result, jax.Array) and not isinstance(result, Tracer) and _on_one_cpu(result):
            # eager, a script's `x - v` is a tensor as `tf.subtract(x, v)` gives it: its dtype a tf.DType (TF
            # 2.21: EagerTensor, dtype tf.float32); a JAX array's is numpy's, without `is_floating`. A result
            # laid out over several devices (a DTensor's, a mirrored variable's) or on an accelerator stays there.
            value, own = np.asarray(result), np.dtype(self.dtype)
            if value.dtype.kind == own.kind and value.dtype.itemsize < own.itemsize:
                value = value.astype(own)  # a 64-bit variable's arithmetic (JAX's is 32 bits) keeps its dtype
            return value.view(HostTensor)
        return result

    method.__name__ = keras_operator.__name__
    return method


_CREATED = itertools.count()


class _VariableType(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, variable_class())

    def __call__(cls, initial_value: Any = None, trainable: bool | None = None, name: str | None = None,
                 dtype: Any = None, shape: Any = None, synchronization: Any = None, aggregation: Any = None,
                 constraint: Any = None, **ignored: Any) -> Any:
        if initial_value is None:
            raise ValueError("The `initial_value` arg to `tf.Variable` must be specified except when you are not "
                             "providing a `variable_def`. You provided neither.")  # TF 2.21's text (observed)
        synchronization, aggregation = distributed_variables.parse(synchronization, aggregation)
        if callable(initial_value):
            initial_value = initial_value()
        check_python_value(initial_value, numpy_dtype(dtype))
        value = convert_to_tensor(initial_value, dtype=numpy_dtype(dtype))
        _check_fits(value)
        strategy = distributed_variables.mirroring_strategy()
        if strategy is not None:
            distributed_variables.check(synchronization, aggregation, value.dtype)
        if trainable is None:  # TF: an ON_READ variable is not trainable unless asked
            trainable = synchronization is not VariableSynchronization.ON_READ

        # TF's: name="scoped/c" names 'scoped/c:0' (observed, TF 2.21); Keras names take no "/", so the part
        # before the last "/" joins the name scope
        name_scope, _, leaf = str(name or "Variable").rpartition("/")

        def make() -> Any:
            with _quiet_narrowing(value.dtype):
                return variable_class()(initializer=value, dtype=str(np.dtype(value.dtype)), trainable=trainable,
                                        name=leaf or "Variable")

        # made in a traced tf.function: TF's rule for which trace may make one (jdist.strategy.function_trace)
        variable = function_trace.variable_created(make, value) if function_trace.active() else make()
        variable._jdist_created = next(_CREATED)  # TF lists a tape's watched variables in the order they were made
        variable._jdist_synchronization, variable._jdist_aggregation = synchronization, aggregation
        variable.constraint = constraint
        variable._jdist_scope = get_current_name_scope() + "/" if get_current_name_scope() else ""
        variable._jdist_scope += name_scope + "/" if name_scope else ""
        variable._jdist_declared_shape = _unknown_shape(shape)
        # `extended.variable_created_in_scope`; a reference only, so checkpoints never walk into the strategy
        variable._jdist_strategy = weakref.ref(context.get_strategy())
        if strategy is not None:
            distribution = distributed_variables.Distribution(strategy, synchronization, aggregation)
            variable._jdist_replication = distribution
            variable.__class__ = _distributed_class(distribution.class_name)
            if distribution.on_read:
                distribution.start(value)
                if aggregation is not VariableAggregation.NONE:  # NONE has no read outside run (TF's error)
                    variable._jdist_write_read_value()
        return variable


def _unknown_shape(shape: Any) -> TensorShape | None:
    """`shape=tf.TensorShape([None])` (unknown dimensions): later assignments may change those dimensions, and
    `shape` keeps showing the declared one, `TensorShape([None])`, as TF 2.21's (observed, with or without
    `validate_shape=False`; `TensorShape(None)`, unknown rank, takes values of any rank and shows
    `shape=<unknown>`). None for a known shape."""
    if shape is None:
        return None
    declared = TensorShape(shape)
    if declared.rank is not None and all(d is not None for d in declared):
        return None
    return declared


def _narrowed(dtype: Any) -> bool:
    """Whether JAX holds values of this 64-bit dtype in 32 bits (without `jax_enable_x64`)."""
    import jax

    dtype = np.dtype(dtype)
    return dtype.itemsize == 8 and dtype.kind in "iuf" and not jax.config.read("jax_enable_x64")


@contextlib.contextmanager
def _quiet_narrowing(dtype: Any) -> Iterator[None]:
    """Silences JAX's per-call "int64 ... truncated to int32" warning for a variable that declared 64 bits:
    the variable keeps its declared dtype (`numpy()` gives it back) and `_check_fits` guards its initial value.
    Keras's own conversions of such a variable's value (a step compiled over replicas reads it) are silenced for
    good. Other variables enter no `catch_warnings`: each entry resets Python's once-only warning registry."""
    if not _narrowed(dtype):
        yield
        return
    _quiet_keras_narrowing()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Explicitly requested dtype", category=UserWarning)
        yield


_NARROWING_MESSAGE, _KERAS_MODULES = "Explicitly requested dtype .*64", r"keras\."


def _quiet_keras_narrowing() -> None:
    """Installs the filter once (again after a `catch_warnings` block that held it ends)."""
    for action, message, _, module, _ in warnings.filters:
        if action == "ignore" and getattr(message, "pattern", None) == _NARROWING_MESSAGE \
                and getattr(module, "pattern", None) == _KERAS_MODULES:
            return
    warnings.filterwarnings("ignore", message=_NARROWING_MESSAGE, category=UserWarning, module=_KERAS_MODULES)


def _check_fits(value: Any) -> None:
    """A 64-bit integer initial value that JAX's 32 bits cannot hold is an error, not a wrapped counter."""
    dtype = np.dtype(value.dtype)
    if not _narrowed(dtype) or dtype.kind not in "iu" or not np.size(value):
        return
    narrow = np.iinfo(np.dtype(f"{dtype.kind}4"))
    if not narrow.min <= np.min(value) <= np.max(value) <= narrow.max:
        raise ValueError(f"tf.Variable of dtype {dtype}: its initial value does not fit in {narrow.dtype}, the width "
                         "JAX holds it in; set jax_enable_x64 (JAX_ENABLE_X64=1) before JAX starts for 64-bit values.")


class Variable(metaclass=_VariableType):
    """`tf.Variable(initial_value, trainable=True, name=None, dtype=None)`: see the module docstring."""


checkpoint_lib.use_variable_class(Variable)  # `Checkpoint.save_counter` is a tf.Variable, as TF's
