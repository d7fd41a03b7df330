"""`tf.random.Generator` and the stateless seed ops `tf.random.experimental.stateless_split` / `stateless_fold_in`.

A Generator holds TF's Philox state, [counter_low, counter_high, key] (int64), and draws on the host with
numpy's Philox bit generator started from it, then moves the counter past what it used: the same seed gives the
same numbers in every run, and `split` gives generators whose streams are independent (each seeded from a draw
of its parent). TF's numbers themselves cannot be reproduced bit for bit; what matches TF 2.21 (observed) is the
API, the dtypes and shapes, the ranges and `from_seed`'s determinism. Drawing changes the generator's state, so
inside compiled code (`tf.function`, `strategy.run`, `jax.jit`) it would be frozen into the program: there it
raises, naming the way TF documents for such code: `seeds = rng.make_seeds(n)` outside, passed in, and the
`tf.random.stateless_*` ops inside.
"""
from __future__ import annotations

import os
import threading
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike

from jdist.strategy import context
from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.predicates import tracing
from jdist.tf_compat.random_ops import _shape, _stateless_key
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


class Generator:
    """TF's stateful random generator: `from_seed(s).normal([2, 3])`, `uniform`, `split`, `make_seeds`, ..."""

    def __init__(self, copy_from: Generator | None = None, state: TensorLike | None = None, alg: Any = None):
        self._lock = threading.Lock()  # a tf.data map function may draw from several threads
        if copy_from is not None:
            if state is not None:
                raise ValueError("Generator: give `copy_from` or `state`, not both")
            self._state, self._alg = copy_from.state.copy(), copy_from._alg
            return
        if state is None:
            raise ValueError("Generator needs `state` (or `copy_from`); use Generator.from_seed(seed) or "
                             "Generator.from_non_deterministic_state()")
        values = np.asarray(state).reshape(-1)
        if values.shape != (3,):
            raise ValueError(f"Generator: the Philox state has 3 int64 values [counter, counter, key]; got shape "
                             f"{list(np.shape(state))}")
        self._state, self._alg = values.astype(np.int64), _algorithm(alg)

    # ------------------------------------------------------------------------------ constructors
    @classmethod
    def from_seed(cls, seed: int, alg: Any = None) -> Generator:
        """The generator whose numbers repeat for the same `seed`."""
        if isinstance(seed, jax.core.Tracer):  # pyright: ignore[reportAttributeAccessIssue]
            raise ValueError("Generator.from_seed: `seed` must be a Python int (the generator draws on the host)")
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
    def state(self) -> np.ndarray:
        """[counter_low, counter_high, key], int64 (TF's Philox state layout)."""
        return self._state

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
        """Moves the counter `delta` blocks on, as if that many had been drawn."""
        with self._lock:
            self._advance(int(delta))

    def _advance(self, blocks: int) -> None:
        counter = ((int(self._state[0]) & _MASK) | ((int(self._state[1]) & _MASK) << 64)) + blocks
        self._state = np.asarray([_as_int64(counter), _as_int64(counter >> 64), self._state[2]], np.int64)

    def _draw(self, op: str, draw: Any) -> Any:
        if _in_compiled_code():
            raise RuntimeError(
                f"tf.random.Generator.{op} draws on the host and changes the generator's state, so inside compiled "
                "code (tf.function, strategy.run, jax.jit) its numbers would be frozen into the program. Draw "
                "seeds outside: seeds = generator.make_seeds(n), pass them into the step, and use "
                "tf.random.stateless_uniform / stateless_normal(shape, seed=seeds[:, i]) inside.")
        with self._lock:
            counter = [int(v) & _MASK for v in self._state[:2]] + [0, 0]
            bits = np.random.Philox(counter=counter, key=[int(self._state[2]) & _MASK, 0])
            out = draw(np.random.Generator(bits))
            used = bits.state["state"]["counter"]
            self._advance(max(1, (int(used[0]) | (int(used[1]) << 64)) - (counter[0] | (counter[1] << 64))))
        return out

    # ------------------------------------------------------------------------------ distributions
    def normal(self, shape: ShapeLike, mean: float = 0.0, stddev: float = 1.0, dtype: DTypeLike = "float32",
               name: str | None = None) -> np.ndarray:
        target = _float("normal", dtype, mean)
        return self._draw("normal", lambda g: (mean + stddev * g.standard_normal(_shape(shape))).astype(target))

    def truncated_normal(self, shape: ShapeLike, mean: float = 0.0, stddev: float = 1.0, dtype: DTypeLike = "float32",
                         name: str | None = None) -> np.ndarray:
        """Normal values redrawn where more than 2 standard deviations from the mean."""
        target = _float("truncated_normal", dtype, mean)

        def draw(g: np.random.Generator) -> np.ndarray:
            values = g.standard_normal(_shape(shape))
            outside = np.abs(values) > 2
            while np.any(outside):
                values[outside] = g.standard_normal(int(outside.sum()))
                outside = np.abs(values) > 2
            return (mean + stddev * values).astype(target)
        return self._draw("truncated_normal", draw)

    def uniform(self, shape: ShapeLike, minval: TensorLike = 0, maxval: TensorLike | None = None,
                dtype: DTypeLike = "float32", name: str | None = None) -> np.ndarray:
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
            return self._draw("uniform", lambda g: g.integers(low, high, size=size).astype(target))
        high = 1.0 if maxval is None else maxval
        return self._draw("uniform", lambda g: g.uniform(minval, high, size=size).astype(target))  # pyright: ignore[reportArgumentType]

    def uniform_full_int(self, shape: ShapeLike, dtype: DTypeLike = "uint64", name: str | None = None) -> np.ndarray:
        """Integers over the dtype's whole range."""
        target = numpy_dtype(dtype)
        if target.kind not in "iu":
            raise ValueError(f"Generator.uniform_full_int needs an integer dtype, got {target}")
        info = np.iinfo(target)
        return self._draw("uniform_full_int", lambda g: g.integers(info.min, info.max, size=_shape(shape),
                                                                   dtype=target, endpoint=True))

    def binomial(self, shape: ShapeLike, counts: TensorLike, probs: TensorLike, dtype: DTypeLike = "int32",
                 name: str | None = None) -> np.ndarray:
        target = numpy_dtype(dtype)
        """Successes in `counts` trials of probability `probs` (float counts, as TF takes, are whole numbers)."""
        trials = np.rint(np.asarray(counts)).astype(np.int64)
        return self._draw("binomial", lambda g: g.binomial(trials, np.asarray(probs),
                                                           size=_shape(shape)).astype(target))

    # ------------------------------------------------------------------------------ seeds and children
    def make_seeds(self, count: int = 1) -> np.ndarray:
        """`count` seeds for the stateless ops, int64 [2, count] (column i is one seed)."""
        info = np.iinfo(np.int64)
        return self._draw("make_seeds", lambda g: g.integers(info.min, info.max, size=(2, int(count)),
                                                             dtype=np.int64, endpoint=True))

    def split(self, count: int = 1) -> list[Generator]:
        """`count` new generators, each seeded from a draw of this one (so their streams are independent)."""
        seeds = self.make_seeds(count)[0]
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
def _finish_seeds(words: jax.Array, seed: TensorLike, target: np.dtype) -> Tensor:
    if isinstance(seed, jax.Array) or hasattr(seed, "__jax_array__"):
        return jax.lax.bitcast_convert_type(words, jnp.int32).astype(jax.dtypes.canonicalize_dtype(target))
    return np.asarray(words).view(np.int32).astype(target)


def _split_dtype(seed: TensorLike) -> np.dtype:
    """TF 2.21 (observed): split's seeds have the seed's dtype: int32 for Python ints, int64 for int64."""
    if isinstance(seed, (list, tuple)):
        return np.dtype(np.int32)
    dtype = np.dtype(seed.dtype if hasattr(seed, "dtype") else np.asarray(seed).dtype)  # pyright: ignore[reportAttributeAccessIssue]
    return dtype if dtype in (np.dtype(np.int64), np.dtype(np.uint64)) else np.dtype(np.int32)


def stateless_split(seed: TensorLike, num: int = 2, alg: str = "auto_select") -> Tensor:
    """`num` new seeds [num, 2] from `seed` (shape [2]), independent of it and of each other."""
    key = _stateless_key("experimental.stateless_split", seed)
    words = jax.random.key_data(jax.random.split(key, int(num)))
    return _finish_seeds(words, seed, _split_dtype(seed))


def stateless_fold_in(seed: TensorLike, data: TensorLike, alg: str = "auto_select") -> Tensor:
    """A new seed [2] from `seed` and an integer `data` (e.g. a step or a replica id); int32, as TF 2.21's for int32
    and int64 seeds alike (observed)."""
    key = _stateless_key("experimental.stateless_fold_in", seed)
    words = jax.random.key_data(jax.random.fold_in(key, jnp.asarray(data).astype(jnp.uint32)))
    return _finish_seeds(words, seed, np.dtype(np.int32))


EXPERIMENTAL = dict(Generator=Generator, get_global_generator=get_global_generator,
                    set_global_generator=set_global_generator, stateless_split=stateless_split,
                    stateless_fold_in=stateless_fold_in)
RANDOM = dict(Generator=Generator, get_global_generator=get_global_generator, set_global_generator=set_global_generator,
              split=stateless_split, fold_in=stateless_fold_in)
