"""`tf.random.Generator` and the stateless seed ops `tf.random.experimental.stateless_split` / `stateless_fold_in`.

A Generator holds TF's state layout, [counter, counter_high, key] (int64), and draws with `jax.random` from a key
made of its key and counter (`jdist.tf_compat.generator_draws`), then moves the counter on by one: the same seed
gives the same numbers in every run, on the host and inside compiled code alike, and `split` gives generators
whose streams are independent (each seeded from a draw of its parent). TF's numbers themselves cannot be
reproduced bit for bit; what matches TF 2.21 (observed, tests/test_tf_compat_random_generator.py) is the API, the
dtypes and shapes, the ranges, `from_seed`'s determinism, and how replicas share a generator in `strategy.run`
(TF's guide "Random number generation"):

- made outside any strategy's scope, the replicas draw from it in turn: replica i gets the number the host's
  i-th next draw would give, and the counter moves on by the number of replicas;
- made in a strategy's scope, or inside the replica function, each replica draws its own stream (the same
  streams for both), and the counter moves on by one per draw; outside a replica context (on the host, in a
  loaded SavedModel's program) such a generator draws the plain stream.

Inside `strategy.run` the state is a variable that run hands to the compiled replica function and writes back,
as Keras variables are (`jdist.interop.keras_run`): the generator must be named by the function (a global, a
closure variable or `self.<name>`). Inside a user's own `jax.jit` a generator made outside it cannot move on:
that is an error naming TF's way for such code (`make_seeds` outside, the `stateless_*` ops inside).
"""
from __future__ import annotations

import contextlib
import os
import threading
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike

from jdist.interop import keras_objects
from jdist.strategy import context, function_trace
from jdist.tf_compat import generator_draws as draws
from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.ops import convert_to_tensor
from jdist.tf_compat.predicates import tracing
from jdist.tf_compat.random_ops import _shape, stateless_uniform
from jdist.tfdata.structure import HostTensor
from jdist.typing import ShapeLike, Tensor, TensorLike

_ALGORITHMS = {None: 1, "philox": 1, "auto_select": 3, "threefry": 2, 1: 1, 2: 2, 3: 3}
_MASK = (1 << 64) - 1


def _algorithm(alg: Any) -> int:
    key = getattr(alg, "value", alg)
    key = key.lower() if isinstance(key, str) else key
    if key not in _ALGORITHMS:
        raise ValueError(f"Argument `alg` got unsupported value {alg}. Supported values are philox for the Philox "
                         "algorithm, threefry for the ThreeFry algorithm, and auto_select for auto-selection.")
    return _ALGORITHMS[key]


def _in_compiled_code() -> bool:
    return context.in_replica_context() or tracing()


def _as_int64(value: int) -> int:
    value &= _MASK
    return value - (1 << 64) if value >= 1 << 63 else value


def _replica() -> tuple[Any, int] | None:
    """(this replica's id, the replicas in sync) inside `strategy.run`; None elsewhere."""
    if not context.in_replica_context():
        return None
    ctx = context.get_replica_context()
    assert ctx is not None, "in a replica context there is one"
    return ctx.replica_id_in_sync_group, ctx.num_replicas_in_sync


def _words(state: np.ndarray) -> np.ndarray:
    """TF's int64 state [counter, counter_high, key] as the four uint32 words the draws use."""
    counter, key = int(state[0]) & _MASK, int(state[2]) & _MASK
    return np.asarray([counter & 0xFFFFFFFF, counter >> 32, key & 0xFFFFFFFF, key >> 32], np.uint32)


def _state(words: Any, counter_high: int) -> np.ndarray:
    w = [int(v) & 0xFFFFFFFF for v in np.asarray(words).reshape(-1)]
    return np.asarray([_as_int64(w[0] | (w[1] << 32)), counter_high, _as_int64(w[2] | (w[3] << 32))], np.int64)


class Generator:
    """TF's stateful random generator: `from_seed(s).normal([2, 3])`, `uniform`, `split`, `make_seeds`, ..."""

    _jdist_holds_variables = True  # strategy.run threads its `variables` (jdist.interop.keras_run)

    def __init__(self, copy_from: Generator | None = None, state: TensorLike | None = None, alg: Any = None):
        self._lock = threading.Lock()  # a tf.data map function may draw from several threads
        self._var: Any = None  # the state as a tf.Variable, once strategy.run or a checkpoint needs one
        # TF: made in a strategy's scope, or inside its replica function, each replica draws its own stream.
        self._strategy = context.get_strategy() if context.has_strategy() else None
        self._per_replica = self._strategy is not None
        # made while a compiled function is traced: its state is the trace's; made in a tf.function's trace it
        # outlives the trace, as TF's variables made in a first trace do (its state becomes a program input)
        self._local = _in_compiled_code() and not function_trace.active()
        keras_objects.holder_made()
        if copy_from is not None:
            if state is not None:
                raise ValueError("Generator: give `copy_from` or `state`, not both")
            self._host, self._alg = np.array(copy_from._state, np.int64), copy_from._alg
            return
        if state is None:
            raise ValueError("Generator needs `state` (or `copy_from`); use Generator.from_seed(seed) or "
                             "Generator.from_non_deterministic_state()")
        values = np.asarray(state).reshape(-1)
        if values.shape != (3,):
            raise ValueError(f"Generator: the Philox state has 3 int64 values [counter, counter, key]; got shape "
                             f"{list(np.shape(state))}")
        self._host, self._alg = values.astype(np.int64), _algorithm(alg)

    # ------------------------------------------------------------------------------ constructors
    @classmethod
    def from_seed(cls, seed: int, alg: Any = None) -> Generator:
        """The generator whose numbers repeat for the same `seed`."""
        if isinstance(seed, jax.core.Tracer):  # pyright: ignore[reportAttributeAccessIssue]
            raise ValueError("Generator.from_seed: `seed` must be a Python int, not a traced value")
        return cls(state=[0, 0, _as_int64(int(seed))], alg=alg)

    @classmethod
    def from_non_deterministic_state(cls, alg: Any = None) -> Generator:
        """A generator seeded from the operating system's entropy."""
        return cls(state=[0, 0, _as_int64(int.from_bytes(os.urandom(8), "little"))], alg=alg)

    @classmethod
    def from_state(cls, state: TensorLike, alg: Any) -> Generator:
        return cls(state=state, alg=alg)

    @classmethod
    def from_key_counter(cls, key: TensorLike, counter: TensorLike, alg: Any) -> Generator:
        counts = np.asarray(counter).reshape(-1)
        high = int(counts[1]) if counts.size > 1 else 0
        return cls(state=[int(counts[0]), high, int(np.asarray(key).reshape(-1)[0])], alg=alg)

    # ------------------------------------------------------------------------------ state
    @property
    def _state(self) -> np.ndarray:
        if self._var is None or _in_compiled_code():
            return self._host
        return _state(np.asarray(self._var.value).view(np.uint32), int(self._host[1]))

    @_state.setter
    def _state(self, value: np.ndarray) -> None:
        self._host = np.asarray(value, np.int64).reshape(3).copy()
        if self._var is not None:
            self._var.assign(_words(self._host).view(np.int32))

    @property
    def variables(self) -> list:
        """The state as one int32 [4] `tf.Variable` (made on first use, in the strategy's scope the generator
        was made in): what `strategy.run` threads through its compiled function and `tf.train.Checkpoint`
        saves."""
        if self._var is None:
            from jdist.tf_compat.variables import variable_class

            scope = self._strategy.scope() if self._strategy is not None else contextlib.nullcontext()
            with scope:
                self._var = variable_class()(_words(self._host).view(np.int32), trainable=False,
                                             name="generator_state")
        return [self._var]

    @property
    def state(self) -> Any:
        """[counter, counter_high, key], int64 (TF's Philox state layout); inside compiled code, where the state
        is traced, int32 unless JAX runs with 64-bit types (the counter's and key's low 32 bits then)."""
        if _in_compiled_code() and not self._local and self._var is not None:
            words = self._traced_words("state")
            if draws.x64():
                counter, key = (draws.joined(words[i], words[i + 1]).view(jnp.int64) for i in (0, 2))
            else:
                counter, key = words[0].astype(jnp.int32), words[2].astype(jnp.int32)
            return jnp.stack([counter, jnp.asarray(int(self._host[1]), counter.dtype), key])
        return self._state.view(HostTensor)

    @property
    def algorithm(self) -> int:
        return self._alg

    @property
    def key(self) -> np.ndarray:
        return self._state[2:3].copy()

    def reset(self, state: TensorLike) -> None:
        self._state = np.asarray(state, np.int64).reshape(3).copy()

    def reset_from_seed(self, seed: int) -> None:
        self._state = np.asarray([0, 0, _as_int64(int(seed))], np.int64)

    def reset_from_key_counter(self, key: TensorLike, counter: TensorLike) -> None:
        self._state = Generator.from_key_counter(key, counter, self._alg).state

    def skip(self, delta: int) -> None:
        """Moves the counter `delta` draws on, as if that many had been made."""
        with self._lock:
            self._advance(int(delta))

    def _advance(self, draws: int) -> None:
        state = self._state
        counter = ((int(state[0]) & _MASK) | ((int(state[1]) & _MASK) << 64)) + draws
        self._state = np.asarray([_as_int64(counter), _as_int64(counter >> 64), state[2]], np.int64)

    def _draw(self, op: str, sampler: draws.Sampler) -> Any:
        if _in_compiled_code() and not self._local:
            return self._draw_compiled(op, sampler)
        with self._lock:
            words = _words(self._state)
            if self._local:  # made in this trace: its state is concrete, its draws part of the program
                replica = (_replica() or (0, 1))[0] if self._per_replica else None
                out = draws.traced(sampler, draws.key_for(words, 0, replica))
            else:
                out = draws.on_host(sampler, words)
            self._advance(1)
        return out

    def _traced_words(self, op: str) -> jax.Array:
        """The state as run (or a saved module's program) hands it to the compiled function: traced uint32 words."""
        if self._var is None and function_trace.active():  # a traced tf.function: the state becomes its input
            with function_trace.outside_trace():
                self.variables  # noqa: B018 - made on first use
        value = None if self._var is None else self._var.value
        if function_trace.active() and value is not None:
            # first read in a tf.function's trace: concrete now, the trace is redone with the state as an input
            return jax.lax.bitcast_convert_type(jnp.asarray(value), jnp.uint32)
        if not isinstance(value, jax.core.Tracer):  # pyright: ignore[reportAttributeAccessIssue]
            raise RuntimeError(
                f"tf.random.Generator.{op} inside compiled code changes the generator's state, which only "
                "strategy.run (and a tf.function's strategy.run) can carry out of its compiled function: name the "
                "generator in the replica function (a global, a closure variable or self.<name>). Inside a "
                "jax.jit of your own draw seeds outside: seeds = generator.make_seeds(n), pass them in, and use "
                "tf.random.stateless_uniform / stateless_normal(shape, seed=seeds[:, i]) inside.")
        return jax.lax.bitcast_convert_type(jnp.asarray(value), jnp.uint32)

    def _draw_compiled(self, op: str, sampler: draws.Sampler) -> Any:
        """A draw inside `strategy.run`: from the state variable run threads in (see the module docstring)."""
        words = self._traced_words(op)
        in_run = _replica()
        replica, count = in_run or (0, 1)
        if self._per_replica and in_run is not None:
            out, step = draws.traced(sampler, draws.key_for(words, 0, replica)), 1
        else:  # TF: the replicas take turns on a generator made outside the scope
            out, step = draws.traced(sampler, draws.key_for(words, replica)), count
        self._var.assign(jax.lax.bitcast_convert_type(draws.add(words, step), jnp.int32))
        return out

    # ------------------------------------------------------------------------------ distributions
    def normal(self, shape: ShapeLike, mean: float = 0.0, stddev: float = 1.0, dtype: DTypeLike = "float32",
               name: str | None = None) -> Any:
        target = _float("normal", dtype, mean)
        return self._draw("normal", draws.Sampler("normal", _shape(shape), target.name, (mean, stddev)))

    def truncated_normal(self, shape: ShapeLike, mean: float = 0.0, stddev: float = 1.0, dtype: DTypeLike = "float32",
                         name: str | None = None) -> Any:
        """Normal values redrawn where more than 2 standard deviations from the mean."""
        target = _float("truncated_normal", dtype, mean)
        return self._draw("truncated_normal", draws.Sampler("truncated_normal", _shape(shape), target.name,
                                                            (mean, stddev)))

    def uniform(self, shape: ShapeLike, minval: TensorLike = 0, maxval: TensorLike | None = None,
                dtype: DTypeLike = "float32", name: str | None = None) -> Any:
        """Floats in [minval, maxval) (maxval 1 by default); ints in [minval, maxval), both bounds required."""
        target = numpy_dtype(dtype)
        size = _shape(shape)
        if target.kind in "iu":
            if maxval is None or minval is None:
                raise ValueError(f"For integer dtype {target}, minval and maxval must be both `None` or both "
                                 f"non-`None`; got minval={minval} and maxval={maxval}")
            low, high = np.asarray(minval), np.asarray(maxval)
            if low.dtype.kind not in "iu" or high.dtype.kind not in "iu":
                raise TypeError(f"Generator.uniform with dtype {target}: `minval` and `maxval` must be ints (TF: "
                                f"'Cannot convert 0.5 to EagerTensor of dtype int32'); got {minval!r}, {maxval!r}")
            return self._draw("uniform", draws.Sampler("uniform", size, target.name, (low, high)))
        high = 1.0 if maxval is None else maxval
        return self._draw("uniform", draws.Sampler("uniform", size, target.name, (minval, high)))

    def uniform_full_int(self, shape: ShapeLike, dtype: DTypeLike = "uint64", name: str | None = None) -> Any:
        """Integers over the dtype's whole range."""
        target = numpy_dtype(dtype)
        if target.kind not in "iu":
            raise ValueError(f"Generator.uniform_full_int needs an integer dtype, got {target}")
        return self._draw("uniform_full_int", draws.Sampler("full_int", _shape(shape), target.name))

    def binomial(self, shape: ShapeLike, counts: TensorLike, probs: TensorLike, dtype: DTypeLike = "int32",
                 name: str | None = None) -> Any:
        """Successes in `counts` trials of probability `probs` (float counts, as TF takes, are whole numbers)."""
        target = numpy_dtype(dtype)
        trials = np.rint(np.asarray(counts, np.float32))
        return self._draw("binomial", draws.Sampler("binomial", _shape(shape), target.name,
                                                    (trials, np.asarray(probs, np.float32))))

    # ------------------------------------------------------------------------------ seeds and children
    def make_seeds(self, count: int = 1) -> Any:
        """`count` seeds for the stateless ops, int64 [2, count] (column i is one seed; int32 in compiled code
        without 64-bit JAX). Their values fit in 32 bits, so a seed gives the same numbers on the host and in
        compiled code, where JAX holds it in 32 bits (TF's XLA takes int32 seeds only)."""
        wide = not (_in_compiled_code() and not draws.x64())
        seeds = self._draw("make_seeds", draws.Sampler("full_int", (2, int(count)), "int32"))
        return seeds.astype(np.int64) if wide else seeds

    def split(self, count: int = 1) -> list[Generator]:
        """`count` new generators, each seeded from a draw of this one (so their streams are independent)."""
        if _in_compiled_code() and not self._local:
            raise RuntimeError("tf.random.Generator.split inside compiled code: split the generator outside it "
                               "(its children are generators made on the host)")
        seeds = np.asarray(self.make_seeds(count))[0]
        return [Generator.from_seed(int(s), alg=self._alg) for s in seeds]

    def __repr__(self) -> str:
        return f"<jdist.tf_compat tf.random.Generator state={self._state.tolist()}>"


def _float(op: str, dtype: DTypeLike, mean: Any) -> np.dtype:
    target = numpy_dtype(dtype)
    if target.kind != "f":
        raise TypeError(f"Generator.{op} draws floats; got dtype {target} (TF: 'Cannot convert {float(mean)} to "
                        f"EagerTensor of dtype {target}')")
    return target


_GLOBAL: list[Generator | None] = [None]


def get_global_generator() -> Generator:
    """The process's generator, made from non-deterministic state at first use (as TF's)."""
    if _GLOBAL[0] is None:
        _GLOBAL[0] = Generator.from_non_deterministic_state()
    return _GLOBAL[0]


def set_global_generator(generator: Generator) -> None:
    if not isinstance(generator, Generator):
        raise TypeError(f"set_global_generator takes a tf.random.Generator, got {type(generator).__name__}")
    _GLOBAL[0] = generator


# ------------------------------------------------------------------------------------------ stateless seeds
def _split_dtype(seed: TensorLike) -> np.dtype:
    """TF 2.21 (observed): split's seeds have the seed's dtype: int32 for Python ints, int64 for int64 (a tuple
    of int64 tensors, as a `Dataset.zip` of counters gives, is an int64 seed)."""
    if isinstance(seed, (list, tuple)):
        seed = convert_to_tensor(seed)
    dtype = np.dtype(seed.dtype if hasattr(seed, "dtype") else np.asarray(seed).dtype)  # pyright: ignore[reportAttributeAccessIssue]
    return dtype if dtype in (np.dtype(np.int64), np.dtype(np.uint64)) else np.dtype(np.int32)


def stateless_split(seed: TensorLike, num: int = 2, alg: str = "auto_select") -> Tensor:
    """`num` new seeds [num, 2] from `seed` (shape [2]): TF's, full-range integers drawn with `seed` (TF 2.21's
    `split` is `stateless_uniform([num, 2], seed, dtype=seed's, minval=None, maxval=None)`)."""
    return stateless_uniform([int(num), 2], seed, minval=None, maxval=None, dtype=_split_dtype(seed), alg=alg)


def stateless_fold_in(seed: TensorLike, data: TensorLike, alg: str = "auto_select") -> Tensor:
    """A new seed [2] from `seed` and an integer `data` (e.g. a step or a replica id): TF's `[one full-range
    integer drawn with seed, data]`, of `data`'s dtype (int32 for a Python int, as TF 2.21's)."""
    data = convert_to_tensor(data)
    first = stateless_uniform([], seed, minval=None, maxval=None, dtype=data.dtype, alg=alg)
    xp = jnp if isinstance(first, jax.Array) or isinstance(data, jax.Array) else np
    return xp.stack([xp.asarray(first, data.dtype), xp.asarray(data, data.dtype)])


EXPERIMENTAL = dict(Generator=Generator, get_global_generator=get_global_generator,
                    set_global_generator=set_global_generator, stateless_split=stateless_split,
                    stateless_fold_in=stateless_fold_in)
RANDOM = dict(Generator=Generator, get_global_generator=get_global_generator, set_global_generator=set_global_generator,
              split=stateless_split, fold_in=stateless_fold_in)
