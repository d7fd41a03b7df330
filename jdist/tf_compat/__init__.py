"""TensorFlow's names for what jdist implements, so a port changes its import, not every `tf.` name.

    import jdist.tf_compat as tf      # was: import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = tf.keras.Sequential([...])        # Keras 3 on the JAX backend

A bounded surface, listed in docs/tf_mapping.md: `tf.distribute` (jdist's strategies), TF's everyday
ops and dtypes (`tf.cast`, `tf.reduce_sum`, `tf.float32`, ...: numpy on the host, `jax.numpy` inside
compiled code, with TF's dtype rules; `jdist.tf_compat.ops`), `tf.nn`, `tf.math`, `tf.random`,
`tf.config`, `tf.Variable`, `tf.function`, `tf.GradientTape`, `tf.data`, `tf.train`, `tf.io` (files, TFRecords,
`tf.train.Example` parsing), control flow (`tf.cond`, `tf.while_loop`, ...), gradient clipping, `tf.debugging`,
`tf.summary`, `tf.lookup`, `tf.signal`, `tf.bitwise`, and `tf.keras` (TF 2.21's `tf.keras` namespace of Keras 3,
on JAX; `tf.metrics`, `tf.losses`, `tf.optimizers`).
A name outside it raises AttributeError naming it, and for the parts of TensorFlow jdist leaves out
on purpose (TF graphs in `tf.saved_model`, `tf.estimator`, `tf.lite`, ...) the error names what to use instead.
"""
from __future__ import annotations

import os
import sys
from typing import Any

if "keras" not in sys.modules:  # a ported script's later `import keras` gets the backend tf.keras needs
    os.environ.setdefault("KERAS_BACKEND", "jax")

import jdist
from jdist import data as _data, layers as _layers, saved_model as _saved_model, train as _train
from jdist.input.tensor_spec import TensorShape, TensorSpec
from jdist.interop import (
    after_import as _after_import,
    autograph as _autograph,
    keras_tf_steps as _keras_tf_steps,
    tf_function as _tf_function,
    trace_type as _trace_type,
    traced_shapes as _traced_shapes,
)
from jdist.interop.forward_accumulator import ForwardAccumulator as _ForwardAccumulator
from jdist.interop.gradient_tape import GradientTape
from jdist.interop.tf_function import function
from jdist.interop.unconnected import UnconnectedGradients
from jdist.strategy.aggregation import VariableAggregation, VariableSynchronization
from jdist.tf_compat import (
    config_switches as _switches,
    dtensor as _dtensor,
    dtensor_keras_names as _dtensor_keras_names,
    dtype_table as _dtypes,
    error_types as _errors,
    gfile as _gfile,
    importer as _importer,
    keras_namespace as _keras_namespace,
    linalg_ops as _linalg_ops,
    linalg_solvers as _linalg_solvers,
    module_loading as _module_loading,
    module_saving as _module_saving,
    nest_ops as _nest,
    nn_ops as _nn_ops,
    ops as _ops,
    ragged_factories as _ragged,
    reductions as _reductions,
    sparse as _sparse,
    strings as _strings,
    unsupported as _unsupported,
)
from jdist.tf_compat.device import device
from jdist.tf_compat.distribute_namespace import distribute
from jdist.tf_compat.dtype_table import (
    DType,
    as_dtype,
    bfloat16,
    bool,
    complex64,
    complex128,
    double,
    float16,
    float32,
    float64,
    half,
    int8,
    int16,
    int32,
    int64,
    string,
    uint8,
    uint16,
    uint32,
    uint64,
)
from jdist.tf_compat.eager import give_arrays_numpy, give_arrays_tf_text, give_split_arrays_values
from jdist.tf_compat.linalg_ops import einsum, eye, matmul, norm, tensordot
from jdist.tf_compat.module import Module
from jdist.tf_compat.namespace import Namespace
from jdist.tf_compat.ops import (  # TF's everyday ops (some shadow builtins, as TF's names do)
    abs,
    add,
    add_n,
    argmax,
    argmin,
    cast,
    clip_by_value,
    concat,
    constant,
    convert_to_tensor,
    divide,
    equal,
    exp,
    expand_dims,
    fill,
    gather,
    greater,
    greater_equal,
    identity,
    less,
    less_equal,
    logical_and,
    logical_not,
    logical_or,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    one_hot,
    ones,
    ones_like,
    pow,
    range,
    rank,
    reshape,
    round,
    shape,
    sign,
    size,
    split,
    sqrt,
    square,
    squeeze,
    stack,
    stop_gradient,
    subtract,
    tanh,
    tile,
    transpose,
    unstack,
    where,
    zeros,
    zeros_like,
)
from jdist.tf_compat.print_op import print  # noqa: A004 - TF's name
from jdist.tf_compat.ragged import RaggedTensor
from jdist.tf_compat.reductions import (
    reduce_all,
    reduce_any,
    reduce_logsumexp,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_prod,
    reduce_sum,
)
from jdist.tf_compat.servers import ConfigProto
from jdist.tf_compat.sparse import SparseTensor
from jdist.tf_compat.tensor_array import TensorArray
from jdist.tf_compat.tpu_setup import experimental_connect_to_cluster, tpu
from jdist.tf_compat.unsupported import not_provided
from jdist.tf_compat.variables import Variable

# ---- TF's everyday math, array and nn ops (math_ops, scans, segment_ops, array_ops, scatter_ops, nn_extra,
# random_ops): imports
# isort: split
from jdist.tf_compat import (
    math_ops as _math_ops,
    nn_extra as _nn_extra,
    random_ops as _random_ops,
    scans as _scans,
    segment_ops as _segment_ops,
)
from jdist.tf_compat.array_ops import (
    argsort,
    broadcast_to,
    linspace,
    meshgrid,
    pad,
    repeat,
    reverse,
    roll,
    searchsorted,
    sequence_mask,
    slice,
    sort,
    strided_slice,
    unique,
)
from jdist.tf_compat.math_ops import (
    acos,
    asin,
    atan,
    atan2,
    cos,
    cosh,
    floor,
    realdiv,
    sin,
    sinh,
    tan,
    truediv,
)
from jdist.tf_compat.nn_ops import sigmoid
from jdist.tf_compat.scans import cumsum
from jdist.tf_compat.scatter_ops import (
    boolean_mask,
    gather_nd,
    scatter_nd,
    tensor_scatter_nd_add,
    tensor_scatter_nd_update,
)

# --- control flow, clipping, predicates, tf.debugging, tf.summary (imports) ---
# isort: split
from jdist.tf_compat import (
    debugging as _debugging,
    summary as _summary,
)
from jdist.tf_compat.clip_ops import clip_by_global_norm, clip_by_norm
from jdist.tf_compat.control_flow import (
    case,
    cond,
    foldl,
    foldr,
    group,
    identity_n,
    map_fn,
    no_op,
    scan,
    while_loop,
)
from jdist.tf_compat.predicates import Tensor, executing_eagerly, get_logger, init_scope, is_tensor

# --- end control flow ... (imports) ---

# --- tf.image, tf.random.Generator, host calls, partitions, tf.io files (imports) ---
# isort: split
from jdist.tf_compat import (
    file_io as _file_io,
    host_tensors as _host_tensors,
    image_ops as _image_ops,
    image_random as _image_random,
    random_generator as _random_generator,
    test_case as _test_case,
)
from jdist.tf_compat.host_calls import numpy_function, py_function, timestamp
from jdist.tf_compat.image_resize import ResizeMethod as _ResizeMethod, resize as _resize
from jdist.tf_compat.math_extra import (
    MATH as _MATH_EXTRA,
    NN as _NN_EXTRA,
    bitcast,
    complex,
    histogram_fixed_width,
)
from jdist.tf_compat.partition_ops import dynamic_partition, ensure_shape

# --- end tf.image ... (imports) ---

_MATH_OPS_MATH = {**_math_ops.ELEMENTWISE, **_scans.SCANS, **_segment_ops.SEGMENTS, **_MATH_EXTRA}
_MATH_OPS_NN = {**_nn_extra.NN_EXTRA, "top_k": _segment_ops.top_k, "in_top_k": _segment_ops.in_top_k, **_NN_EXTRA}
_MATH_OPS_RANDOM = _random_ops.RANDOM_EXTRA
# ---- end of the everyday math, array and nn ops: imports

# TF's version string, marked: scripts that print or compare it see the TF API jdist follows (2.21).
__version__ = f"2.21.0+jdist.{jdist.__version__}"
newaxis = None  # tf.newaxis, as numpy.newaxis: `x[..., tf.newaxis]`
# `from jdist.tf_compat.keras.layers import Dense`, `import jdist.tf_compat.compat.v1 as tf1`: submodule paths
# import as TF's do (jdist.tf_compat.importer).
_importer.install(__path__)
give_arrays_numpy()  # TF scripts call `.numpy()` on what they get back (jdist.tf_compat.eager)
give_arrays_tf_text()  # and print it: a JAX array prints as TF's eager tensor
_traced_shapes.give_tracers_tensor_shape()  # `x.shape.as_list()` inside a trace, as TF's TensorShape
give_split_arrays_values()  # a distributed batch's component has TF's PerReplica `.values`
# A Keras model's TF-style train_step(self, data) runs under Keras's fit as TF's does, also after a plain
# `import keras` (Keras's own guides): added when Keras's JAX trainer is imported (jdist.interop.keras_tf_steps).
_after_import.when_imported("keras.src.backend.jax.trainer", lambda _: _keras_tf_steps.install())
_after_import.when_imported("keras.src.layers.normalization.batch_normalization",  # synchronized=True, as TF's
                            lambda _: _layers.install_keras_synchronized())
_tf_function.convert_outputs(_host_tensors.function_outputs)  # a tf.function returns tensors, as TF's

_OPS = [
    "convert_to_tensor", "constant", "cast", "range", "reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
    "reduce_prod", "reduce_any", "reduce_all", "reduce_logsumexp", "reshape", "zeros", "ones", "fill",
    "zeros_like", "ones_like", "expand_dims", "squeeze", "concat", "stack", "unstack", "split", "transpose",
    "argmax", "argmin", "where", "shape", "rank", "size", "one_hot", "equal", "not_equal", "greater",
    "greater_equal", "less", "less_equal", "logical_and", "logical_or", "logical_not", "add", "subtract",
    "multiply", "divide", "maximum", "minimum", "pow", "matmul", "abs", "exp", "sqrt", "square", "round",
    "sign", "tanh", "negative", "clip_by_value", "gather", "tile", "identity", "stop_gradient", "add_n", "print",
]
_MATH_ONLY = ["log", "floor", "ceil", "is_nan", "is_finite"]

dtypes = Namespace("tf.dtypes", DType=DType, as_dtype=as_dtype, cast=_ops.cast, **_dtypes.ALL)
math = Namespace(
    "tf.math", **{name: getattr(_reductions if name.startswith("reduce_") else _ops, name)
                  for name in _OPS + _MATH_ONLY if name not in ("print", "range", "matmul")}
       | {k: v for k, v in _MATH_OPS_MATH.items() if k != "l2_normalize"},  # linalg's l2_normalize, as TF's
    matmul=matmul, l2_normalize=_linalg_ops.l2_normalize,
    softmax=_nn_ops.softmax, log_softmax=_nn_ops.log_softmax, sigmoid=_nn_ops.sigmoid,
)
nn = Namespace("tf.nn", **_nn_ops.NN, **{k: v for k, v in _MATH_OPS_NN.items() if k != "l2_normalize"},
               l2_normalize=_linalg_ops.l2_normalize)  # tf.nn.l2_normalize is tf.linalg's in TF 2.21
# tf.linalg (jdist.tf_compat.linalg_ops, linalg_solvers); its LinearOperator classes raise unsupported.py's message.
linalg = Namespace("tf.linalg", **_linalg_ops.NAMES, **_linalg_solvers.NAMES)
sparse = Namespace("tf.sparse", **_sparse.NAMES)
autodiff = Namespace("tf.autodiff", ForwardAccumulator=_ForwardAccumulator)  # jdist.interop.forward_accumulator
random = Namespace("tf.random", **_nn_ops.RANDOM, **_MATH_OPS_RANDOM)
# jdist's iterators end as Python's do (OutOfRangeError is StopIteration); tf.io.gfile raises the others.
errors = Namespace("tf.errors", **_errors.ERRORS)
# tf.data: jdist.data's names (a namespace, so `from jdist.tf_compat.data.experimental import AUTOTUNE` imports).
data = Namespace("tf.data", **{name: getattr(_data, name) for name in _data.__all__ if name != "experimental"},
                 experimental=Namespace("tf.data.experimental", **vars(_data.experimental)))
# tf.train: jdist.train's checkpoints and cluster spec, with TF's Example messages and utilities (below).
train = Namespace("tf.train", **{name: getattr(_train, name) for name in _train.__all__})
# tf.io: gfile here; files, TFRecords and parsing below; the rest raise unsupported.py's message.
io = Namespace("tf.io", gfile=Namespace("tf.io.gfile", **_gfile.NAMES))
# TF1's names are not provided (the tf.compat message says why), except the session config a TF2 script
# still builds for its in-process servers (jdist.tf_compat.servers).
compat = Namespace("tf.compat", v1=Namespace("tf.compat.v1", ConfigProto=ConfigProto,
                                             VariableAggregation=VariableAggregation,
                                             VariableSynchronization=VariableSynchronization))
# Keras models saved as jdist's SavedModel: the serving program (jax.export) and model.keras (jdist.saved_model);
# a tf.Module: its variables and its tf.functions' programs (module_saving, module_loading).
saved_model = Namespace(
    "tf.saved_model", save=_module_saving.save_any, load=_module_loading.load_any, SaveOptions=_saved_model.SaveOptions,
    LoadOptions=_saved_model.LoadOptions, contains_saved_model=_saved_model.contains_saved_model,
    DEFAULT_SERVING_SIGNATURE_DEF_KEY=_saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY,
)
nest = Namespace(
    "tf.nest",
    map_structure=_nest.map_structure, flatten=_nest.flatten, pack_sequence_as=_nest.pack_sequence_as,
)
config = _switches.config_namespace(experimental_connect_to_cluster=experimental_connect_to_cluster)

# --- control flow, clipping, predicates, tf.debugging, tf.summary (names) ---
debugging = Namespace("tf.debugging", **_debugging.NAMES)
autograph = Namespace(
    "tf.autograph", set_verbosity=_autograph.set_verbosity, get_verbosity=_autograph.get_verbosity,
    to_graph=_autograph.to_graph,
    to_code=_autograph.to_code,
    experimental=Namespace("tf.autograph.experimental", do_not_convert=_autograph.do_not_convert,
                           set_loop_options=_autograph.set_loop_options),
)
types = Namespace("tf.types", experimental=Namespace("tf.types.experimental", TraceType=_trace_type.TraceType))
summary = Namespace(
    "tf.summary", create_file_writer=_summary.create_file_writer, scalar=_summary.scalar,
    histogram=_summary.histogram, text=_summary.text, record_if=_summary.record_if,
    should_record_summaries=_summary.should_record_summaries, SummaryWriter=_summary.SummaryWriter,
    experimental=Namespace("tf.summary.experimental", set_step=_summary.set_step, get_step=_summary.get_step),
)
# --- end control flow ... (names) ---

# --- tf.image, tf.random.Generator, host calls, partitions, tf.io files (names) ---
image = Namespace("tf.image", resize=_resize, ResizeMethod=_ResizeMethod, **_image_ops.NAMES, **_image_random.NAMES)
random.__dict__.update(_random_generator.RANDOM, experimental=Namespace(
    "tf.random.experimental", **_random_generator.EXPERIMENTAL))
io.__dict__.update(_file_io.NAMES, decode_raw=_strings.decode_raw)
# text on the host (jdist.tf_compat.strings) and rows of different lengths (jdist.tf_compat.ragged)
strings = Namespace("tf.strings", **_strings.NAMES)
ragged = Namespace("tf.ragged", **{k: v for k, v in _ragged.NAMES.items() if k != "RaggedTensor"})
# --- end tf.image ... (names) ---
_keras_namespace.EXTENSIONS.append(_dtensor_keras_names.legacy_keras_names)  # TF_USE_LEGACY_KERAS=1's names
# DTensor's meshes and layouts on jax.sharding (jdist.tf_compat.dtensor); tf.experimental's other names raise
# unsupported.py's message.
experimental = Namespace("tf.experimental", dtensor=Namespace("tf.experimental.dtensor", **_dtensor.NAMES))
test = Namespace("tf.test", **_test_case.TEST)  # a TF project's unit tests (jdist.tf_compat.test_case)

# --- the namespaces' further names: TF's utilities, math, nn, image, io, lookup, ... (namespace_additions) ---
from jdist.tf_compat import namespace_additions as _additions, ragged_ops as _ragged_ops  # noqa: E402

globals().update(_additions.TOP_LEVEL)  # tf.name_scope, tf.custom_gradient, tf.acosh, tf.switch_case, ...
lookup, bitwise, signal, sets, audio = (_additions.NEW[n] for n in ("lookup", "bitwise", "signal", "sets", "audio"))
version = Namespace("tf.version", **_additions.version_names(__version__))
experimental.__dict__.update(Optional=data.experimental.Optional)  # tf.experimental.Optional, as TF's
from jdist.tf_compat import tf_numpy as _tf_numpy  # noqa: E402

experimental.__dict__.update(numpy=_tf_numpy.namespace())  # tf.experimental.numpy (`tnp`), jdist.tf_compat.tf_numpy
from jdist.tf_compat import extension_type_names as _extension_types  # noqa: E402

experimental.__dict__.update(_extension_types.EXPERIMENTAL)  # tf.experimental.ExtensionType, dispatch_for_api, ...
type_spec_from_value = _extension_types.type_spec_from_value
saved_model.__dict__.update(save=_extension_types.refusing_extension_types(saved_model.save))  # extension_type_saving
for _path, _names in _additions.ADDITIONS.items():
    _additions.namespace(globals(), _path).__dict__.update(_names)
for _path in _additions.HOST_OPS:
    _host_tensors.wrap_ops(_additions.namespace(globals(), _path).__dict__)
# TF's ops dispatch on RaggedTensor arguments (after every op is in place), and tf.ragged's further names
_ragged_ops.install(globals(), math, strings, nn, ragged, experimental)
RaggedTensorSpec = _ragged_ops.RaggedTensorSpec
# RaggedTensor and SparseTensor as tf.data elements (registered with jdist.tfdata.composites)
from jdist.tf_compat import dataset_composites as _dataset_composites  # noqa: E402

SparseTensorSpec = _dataset_composites.SparseTensorSpec

# --- end of the namespaces' further names ---

# TF's ops give tensors with `.numpy()`, also those computed with numpy on the host (jdist.tf_compat.host_tensors)
_host_tensors.wrap_ops(globals())
for _namespace in (math, nn, linalg, sparse, random, image, debugging, dtypes, random.experimental):
    _host_tensors.wrap_ops(_namespace.__dict__)
for _method in ("normal", "uniform", "truncated_normal", "uniform_full_int", "binomial", "make_seeds"):
    setattr(random.Generator, _method, _host_tensors.returning_tensors(getattr(random.Generator, _method)))
for _method in ("read", "stack", "gather", "concat", "size"):
    setattr(TensorArray, _method, _host_tensors.returning_tensors(getattr(TensorArray, _method)))

# `tf.initializers` is TF's alias of `tf.keras.initializers` (observed in TF 2.21: `tf.initializers.zeros()` is
# Keras's Zeros); the submodule of that name (the `tf.*_initializer` classes) must not shadow it.
globals().pop("initializers", None)


def __getattr__(name: str) -> Any:
    if name == "keras":
        return _keras_namespace.tf_keras()
    if name in _keras_namespace.ALIASES:
        return _keras_namespace.alias(name)
    if name.startswith("__"):
        raise AttributeError(name)
    unsupported = _unsupported.module(name)
    if unsupported is not None:
        return unsupported
    raise not_provided(f"tf.{name}")


__all__ = [
    "DType", "GradientTape", "Module", "RaggedTensor", "TensorArray", "TensorShape", "TensorSpec",
    "UnconnectedGradients", "Variable", "VariableAggregation", "VariableSynchronization", "__version__",
    "abs", "add", "add_n", "argmax", "argmin", "as_dtype", "bfloat16", "bool", "cast", "clip_by_value", "compat",
    "complex128", "complex64", "concat", "config", "constant", "convert_to_tensor", "data", "device", "distribute",
    "divide", "double", "dtypes", "einsum", "equal", "errors", "eye", "exp", "expand_dims", "fill", "float16",
    "float32", "float64", "function", "gather", "greater", "greater_equal", "half", "identity", "int16", "io",
    "int32", "int64", "int8", "less", "less_equal", "linalg", "logical_and", "logical_not", "logical_or", "math",
    "newaxis", "matmul", "maximum", "minimum", "multiply", "negative", "nest", "nn", "norm", "not_equal", "one_hot",
    "ones", "ones_like", "pow", "print", "random", "range", "rank", "reduce_all", "reduce_any", "reduce_logsumexp",
    "reduce_max", "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum", "reshape", "round", "saved_model",
    "shape", "sign", "size", "sparse", "SparseTensor", "split", "sqrt", "square", "squeeze", "stack", "stop_gradient",
    "string", "subtract", "tanh", "tensordot", "tile", "tpu", "train", "transpose", "uint16", "uint32", "uint64",
    "uint8", "unstack", "where", "zeros", "zeros_like",
    # the everyday math, array and nn ops
    "acos", "argsort", "asin", "atan", "atan2", "boolean_mask", "broadcast_to", "cos", "cosh", "cumsum", "floor",
    "gather_nd", "linspace", "meshgrid", "pad", "realdiv", "repeat", "reverse", "roll", "scatter_nd", "searchsorted",
    "sequence_mask", "sigmoid", "sin", "sinh", "slice", "sort", "strided_slice", "tan", "tensor_scatter_nd_add",
    "tensor_scatter_nd_update", "truediv", "unique",
]

# --- control flow, clipping, predicates, tf.debugging, tf.summary (__all__) ---
__all__ += [
    "Tensor", "autograph", "case", "clip_by_global_norm", "clip_by_norm", "cond", "debugging", "executing_eagerly",
    "foldl", "foldr", "get_logger", "group", "identity_n", "init_scope", "is_tensor", "map_fn", "no_op", "scan",
    "summary",
    "while_loop",
]
# --- end control flow ... (__all__) ---

# --- tf.image, tf.random.Generator, host calls, partitions, tf.io files (__all__) ---
__all__ += ["bitcast", "complex", "dynamic_partition", "ensure_shape", "histogram_fixed_width", "image",
            "numpy_function", "py_function", "timestamp"]
__all__ += ["experimental", "ragged", "strings", "test"]
__all__ += ["types"]
# --- end tf.image ... (__all__) ---
# the namespaces' further names (jdist.tf_compat.namespace_additions)
__all__ += ["SparseTensorSpec"]  # jdist.tf_compat.dataset_composites
__all__ += ["RaggedTensorSpec", "audio", "bitwise", "lookup", "sets", "signal", "version",
            *sorted(_additions.TOP_LEVEL)]


def __dir__() -> list[str]:
    return sorted(__all__ + ["keras", *_keras_namespace.ALIASES])
