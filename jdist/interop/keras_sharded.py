"""Keras layer weights split by a `ParameterServerStrategy`'s `variable_partitioner`, as TF splits them.

TF 2.21 with tf_keras (TF_USE_LEGACY_KERAS=1), observed: under
`ParameterServerStrategy(variable_partitioner=FixedShardsPartitioner(3))` a
`Dense(5)` on 4 inputs gets a kernel of pieces `(2, 5), (1, 5), (1, 5)` named
`d1/kernel/part_0:0` ... and a bias of pieces `(2,), (2,), (1,)`: every variable of
rank >= 1 whose partitioner asks for more than one axis-0 shard is split "div"
style, each piece takes the next server round robin, `layer.weights` and
`model.trainable_variables` list the pieces (the tutorial's `(8, 16384)` embedding:
`len(emb_layer.weights) == 2`), the layer's attribute (`layer.kernel`) is a
`ShardedVariable` the forward pass reads whole, and gradients and optimizer
updates go to each piece. (TF's own Keras 3 keeps one Keras variable wrapping the
pieces, and its `GradientTape` then fails with "'ShardedVariable' object has no
attribute 'handle'"; the tutorial runs on tf_keras only.)

Here `Layer.add_weight` in such a scope makes the pieces as ordinary Keras
variables of the layer (so the servers keep each one where it was placed, and
workers load and push them one by one) and returns a `ShardedVariable` that reads
as their concatenation. The initial value is drawn whole, then split, so a
partitioned model starts from the values the unpartitioned one would.
Metric variables are split the same way (tf_keras splits an `AUC`'s `(10,)`
counts into `(4,), (3,), (3,)` under `FixedShardsPartitioner(3)`); optimizer slots
are made per piece and not split again (TF colocates them with their piece).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from jdist.partitioners import div_partition, num_axis0_shards


class ShardedVariable:
    """A Keras layer weight kept as axis-0 pieces (`variables`), read as one value (TF's `ShardedVariable`)."""

    def __init__(self, variables: Sequence[Any], name: str, path: str):
        if not variables:
            raise ValueError("A ShardedVariable needs at least one piece.")
        self._variables = list(variables)
        self._name = name
        self._path = path

    # ------------------------------------------------------------ identity
    @property
    def variables(self) -> list:
        """The pieces, in row order."""
        return list(self._variables)

    @property
    def name(self) -> str:
        return self._name

    @property
    def path(self) -> str:
        return self._path

    @property
    def shape(self) -> tuple:
        first = tuple(self._variables[0].shape)
        return (sum(int(v.shape[0]) for v in self._variables),) + first[1:]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> Any:
        return self._variables[0].dtype

    @property
    def trainable(self) -> bool:
        return all(v.trainable for v in self._variables)

    @trainable.setter
    def trainable(self, value: bool) -> None:
        for v in self._variables:
            v.trainable = value

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return (f"<ShardedVariable path={self._path}, shape={self.shape}, dtype={self.dtype}, "
                f"pieces={[tuple(v.shape) for v in self._variables]}>")

    # --------------------------------------------------------------- reads
    @property
    def value(self) -> Any:
        """The pieces' values concatenated on axis 0 (inside a traced step: the step's values)."""
        import jax.numpy as jnp

        return jnp.concatenate([jnp.asarray(v.value) for v in self._variables], axis=0)

    def read_value(self) -> Any:
        return self.value

    def numpy(self) -> np.ndarray:
        return np.asarray(self.value)

    def __jax_array__(self) -> Any:
        return self.value

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.value, dtype=dtype)

    def __getitem__(self, index: Any) -> Any:
        return self.value[index]

    # -------------------------------------------------------------- writes
    def _split(self, value: Any) -> list:
        import jax.numpy as jnp

        value = jnp.asarray(value)
        if tuple(value.shape) != self.shape:
            raise ValueError(f"Cannot assign a value of shape {tuple(value.shape)} to the ShardedVariable "
                             f"{self._path!r} of shape {self.shape}.")
        bounds = np.cumsum([0] + [int(v.shape[0]) for v in self._variables])
        return [value[start:stop] for start, stop in zip(bounds[:-1], bounds[1:])]

    def assign(self, value: Any) -> "ShardedVariable":
        """Assigns each piece its rows of `value` (each piece's server gets its own rows)."""
        for piece, part in zip(self._variables, self._split(value)):
            piece.assign(part)
        return self

    def assign_add(self, value: Any) -> "ShardedVariable":
        for piece, part in zip(self._variables, self._split(value)):
            piece.assign_add(part)
        return self

    def assign_sub(self, value: Any) -> "ShardedVariable":
        for piece, part in zip(self._variables, self._split(value)):
            piece.assign_sub(part)
        return self

    def __neg__(self) -> Any:
        return -self.value


def _delegate(name: str) -> Callable:
    def method(self: ShardedVariable, other: Any) -> Any:
        return getattr(self.value, name)(other)

    method.__name__ = name
    return method


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
              "__matmul__", "__rmatmul__", "__pow__"):
    setattr(ShardedVariable, _name, _delegate(_name))


def install() -> None:
    """Wraps Keras's `Layer.add_weight` and `Metric.add_variable` once per process (no-ops outside a
    partitioning scope)."""
    from keras.src.layers.layer import Layer
    from keras.src.metrics.metric import Metric

    if getattr(Layer.add_weight, "_jdist_sharded", False):
        return
    Layer.add_weight = _layer_add_weight(Layer.add_weight)  # pyright: ignore[reportAttributeAccessIssue]
    Layer._check_load_own_variables = _counting_whole(  # pyright: ignore[reportAttributeAccessIssue]
        Layer._check_load_own_variables)
    Metric.add_variable = _metric_add_variable(Metric.add_variable)  # pyright: ignore[reportAttributeAccessIssue]


def _counting_whole(original: Callable) -> Callable:
    """Keras's layers (Dense, Embedding, ...) save each weight whole (`layer.kernel`, read through the pieces);
    their load checks the count against the tracked variables. A store with one entry per whole weight loads
    (`ShardedVariable.assign` splits it); one entry per piece loads as Keras's generic layers save it."""
    @functools.wraps(original)
    def check(layer: Any, store: Any) -> Any:
        tracked = layer._trainable_variables + layer._non_trainable_variables
        wholes = {id(getattr(v, "_jdist_sharded_in", v)) for v in tracked}
        if len(wholes) != len(tracked) and len(store.keys()) == len(wholes):
            return None
        return original(layer, store)

    return check


_copy_partitioner: list = []  # set while a worker unpickles a function sent by `worker_copy`


def worker_copy(fn: Callable, partitioner: Any, preludes: Sequence[Callable] = ()) -> Any:
    """`fn` as sent to a worker. Keras pickles a model as its config and weights, so the worker rebuilds the
    Keras objects `fn` carries: first each of `preludes` runs there (registering the Keras classes they name),
    then the objects are rebuilt with their weights split as `partitioner` splits them here (None: whole), so
    the worker's copies have the same pieces as the servers."""
    return _WorkerCopy(fn, partitioner, tuple(preludes))


class _WorkerCopy:
    def __init__(self, fn: Callable, partitioner: Any, preludes: tuple):
        self._fn, self._partitioner, self._preludes = fn, partitioner, preludes

    def __reduce__(self) -> tuple:
        from ray import cloudpickle

        return _rebuild, (self._partitioner, self._preludes, cloudpickle.dumps(self._fn))  # pyright: ignore[reportPrivateImportUsage]


def _rebuild(partitioner: Any, preludes: tuple, payload: bytes) -> Any:
    from ray import cloudpickle

    for prelude in preludes:
        prelude()
    if partitioner is None:
        return cloudpickle.loads(payload)
    install()
    _copy_partitioner.append(partitioner)
    try:
        return cloudpickle.loads(payload)
    finally:
        _copy_partitioner.pop()


def _current_partitioner() -> Any:
    if _copy_partitioner:
        return _copy_partitioner[-1]
    from jdist.strategy import context

    strategy = context.get_strategy()
    if strategy.keras_variable_store() is None:
        return None
    return getattr(strategy, "variable_partitioner", None)


def _layer_add_weight(original: Callable) -> Callable:
    @functools.wraps(original)
    def add_weight(layer: Any, *args: Any, shape: Any = None, initializer: Any = None, dtype: Any = None,
                   name: str | None = None, **kwargs: Any) -> Any:
        partitioner = _current_partitioner()
        if partitioner is None or args:  # Keras's legacy positional form: Keras checks it
            return original(layer, *args, shape=shape, initializer=initializer, dtype=dtype, name=name, **kwargs)
        from keras.src import backend

        dtype = backend.standardize_dtype(dtype) if dtype is not None else layer.variable_dtype
        if initializer is None:  # Keras's default, as `add_weight` chooses it
            initializer = "glorot_uniform" if "float" in dtype else "zeros"

        def make(shape: tuple, initializer: Any, name: str | None) -> Any:
            return original(layer, shape=shape, initializer=initializer, dtype=dtype, name=name, **kwargs)

        return _create(partitioner, make, shape, initializer, dtype, name)

    add_weight._jdist_sharded = True  # pyright: ignore[reportFunctionMemberAccess, reportAttributeAccessIssue]
    return add_weight


def _metric_add_variable(original: Callable) -> Callable:
    @functools.wraps(original)
    def add_variable(metric: Any, shape: Any, initializer: Any, dtype: Any = None, aggregation: str = "sum",
                     name: str | None = None) -> Any:
        partitioner = _current_partitioner()
        if partitioner is None:
            return original(metric, shape, initializer, dtype=dtype, aggregation=aggregation, name=name)
        from keras.src import backend

        resolved = backend.standardize_dtype(dtype) if dtype is not None else backend.floatx()

        def make(shape: tuple, initializer: Any, name: str | None) -> Any:
            return original(metric, shape, initializer, dtype=dtype, aggregation=aggregation, name=name)

        return _create(partitioner, make, shape, initializer, resolved, name)

    return add_variable


def _create(partitioner: Any, make: Callable, shape: Any, initializer: Any, dtype: str, name: str | None) -> Any:
    """`make(shape, initializer, name)` once (not split) or once per piece, each with its rows of one value."""
    from keras.src import initializers

    shape = tuple(int(s) for s in (shape or ()))
    shards = num_axis0_shards(partitioner, shape, dtype)
    if shards == 1:
        return make(shape, initializer, name)
    draw: Any = initializers.get(initializer)
    whole = np.asarray(draw(shape, dtype=dtype))  # drawn whole: the same start as unsplit
    base = name or "variable"
    pieces, start = [], 0
    for i, rows in enumerate(div_partition(shape[0], shards)):
        piece_name = f"{base}_part_{i}"  # Keras refuses "/" in a name; TF's name is set after
        piece = make((rows,) + shape[1:], _constant(whole[start:start + rows]), piece_name)
        start += rows
        prefix = piece.path[:-len(piece_name)]
        piece._name, piece._path = f"{base}/part_{i}", f"{prefix}{base}/part_{i}"
        pieces.append(piece)
    prefix = pieces[0].path[:-len(f"{base}/part_0")]
    sharded = ShardedVariable(pieces, base, f"{prefix}{base}")
    for piece in pieces:
        piece._jdist_sharded_in = sharded
    return sharded


def _constant(value: np.ndarray) -> Callable:
    def initializer(shape: Any, dtype: Any = None) -> np.ndarray:
        del shape
        return value if dtype is None else value.astype(dtype)

    return initializer
