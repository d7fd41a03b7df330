"""TF's stateless random numbers, bit for bit: Philox4x32-10 and TF's conversions of its words to numbers.

TF 2.21's `tf.random.stateless_*` (alg "auto_select" and "philox" on CPU) scramble the seed into a Philox key
and counter (`random_ops_util._philox_scramble_seed`: one Philox block of the seed under the key
0x02461E293EC8F720), then fill the output four 32-bit words at a time, block g at counter + g. A float32 in
[0, 1) is a word's low 23 bits as the mantissa of a number in [1, 2), minus 1 (float16 and bfloat16 take 10 or
7 bits of its low half); a float64 takes 52 bits of two words; a normal is Box-Muller of two such floats (sin
and cos of 2*pi*u2, times sqrt(-2 log u1), u1 >= 1e-7).

On the host the words are numpy's and the functions the C library's own (`logf`, `sinf`, `cosf`, `log`, ...:
the ones TF's kernel calls), so the numbers are TF's exactly (tests/test_tf_compat_stateless_random.py compares
them). Inside compiled code, where the seed may be a traced value, the words are the same and the functions
XLA's: integers and uniforms are equal, normals within a few ulps.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any

import numpy as np

_MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
_KEY_STEPS = (0x9E3779B9, 0xBB67AE85)
_SCRAMBLE_KEY = (0x3EC8F720, 0x02461E29)
_MASK = 0xFFFFFFFF


# --- the words ---

def _host_rounds(counter: list, key: tuple[int, int]) -> list:
    """Ten Philox4x32 rounds on numpy uint64 words (each < 2**32)."""
    c0, c1, c2, c3 = (np.asarray(w, np.uint64) for w in counter)
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    m0, m1, mask, shift = np.uint64(_MULTIPLIERS[0]), np.uint64(_MULTIPLIERS[1]), np.uint64(_MASK), np.uint64(32)
    for _ in range(10):
        p0, p1 = m0 * c0, m1 * c2
        c0, c1, c2, c3 = (p1 >> shift) ^ c1 ^ k0, p1 & mask, (p0 >> shift) ^ c3 ^ k1, p0 & mask
        k0, k1 = (k0 + np.uint64(_KEY_STEPS[0])) & mask, (k1 + np.uint64(_KEY_STEPS[1])) & mask
    return [c0, c1, c2, c3]


def _scrambled(seed: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
    """TF's key and the high half of its counter for `seed` (the low half starts at 0)."""
    s0, s1 = (int(v) & 0xFFFFFFFFFFFFFFFF for v in seed)
    mix = [int(w[0]) for w in _host_rounds([[s0 & _MASK], [s0 >> 32], [s1 & _MASK], [s1 >> 32]], _SCRAMBLE_KEY)]
    return (mix[0], mix[1]), (mix[2], mix[3])


def host_words(seed: Any, count: int) -> np.ndarray:
    """The first `count` 32-bit words TF's stateless ops draw for `seed` (two ints), in output order."""
    first, second = (int(v) for v in np.asarray(seed).reshape(-1))
    key, (c2, c3) = _scrambled((first, second))
    blocks = np.arange((count + 3) // 4, dtype=np.uint64)
    words = _host_rounds([blocks, np.zeros_like(blocks), np.full_like(blocks, c2), np.full_like(blocks, c3)], key)
    return np.stack(words, axis=1).astype(np.uint32).reshape(-1)[:count]


def _mulhilo(a: int, b: Any) -> tuple[Any, Any]:
    """The high and low 32 bits of a * b for uint32 JAX arrays, in 16-bit pieces (no 64-bit integers)."""
    import jax.numpy as jnp

    a_lo, a_hi, b_lo, b_hi = jnp.uint32(a & 0xFFFF), jnp.uint32(a >> 16), b & 0xFFFF, b >> 16
    ll, lh, hl, hh = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi
    middle = (ll >> 16) + (lh & 0xFFFF) + (hl & 0xFFFF)
    return hh + (lh >> 16) + (hl >> 16) + (middle >> 16), jnp.uint32(a) * b


def traced_words(seed: Any, count: int) -> Any:
    """`host_words` for a seed that is a traced value (inside compiled code): the same words, as a JAX array."""
    import jax.numpy as jnp

    signed = jnp.asarray(seed).astype(jnp.int32)
    low, high = signed.astype(jnp.uint32), jnp.where(signed < 0, jnp.uint32(_MASK), jnp.uint32(0))  # int64's halves

    def rounds(c: list, k: tuple) -> list:
        k0, k1 = jnp.uint32(k[0]), jnp.uint32(k[1])
        for _ in range(10):
            hi0, lo0 = _mulhilo(_MULTIPLIERS[0], c[0])
            hi1, lo1 = _mulhilo(_MULTIPLIERS[1], c[2])
            c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
            k0, k1 = k0 + jnp.uint32(_KEY_STEPS[0]), k1 + jnp.uint32(_KEY_STEPS[1])
        return c

    mix = rounds([low[0], high[0], low[1], high[1]], _SCRAMBLE_KEY)
    blocks = jnp.arange((count + 3) // 4, dtype=jnp.uint32)
    zeros = jnp.zeros_like(blocks)
    words = rounds([blocks, zeros, zeros + mix[2], zeros + mix[3]], (mix[0], mix[1]))
    return jnp.stack(words, axis=1).reshape(-1)[:count]


# --- words to numbers (xp: numpy on the host, jax.numpy in compiled code) ---

def unit_float32(words: Any, xp: Any = np) -> Any:
    """[0, 1) from each word: its low 23 bits as the mantissa of [1, 2), minus 1 (TF's Uint32ToFloat)."""
    bits = (words & xp.uint32(0x7FFFFF)) | xp.uint32(127 << 23)
    return (bits.view(np.float32) if xp is np else _bitcast(bits, xp.float32)) - xp.float32(1.0)


def unit_16bit(words: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """[0, 1) in float16 or bfloat16 from each word's low 16 bits, as TF's Uint16ToHalf / Uint16ToGfloat16: the
    mantissa bits (10 or 7) under the exponent of 1, minus 1."""
    low = (words & np.uint32(0xFFFF)).astype(np.uint16)
    if dtype == np.float16:
        bits = (low & np.uint16(0x3FF)) | np.uint16(15 << 10)
    else:
        bits = (low & np.uint16(0x7F)) | np.uint16(127 << 7)
    return bits.view(dtype) - dtype.type(1.0)


def unit_float64(words: Any) -> np.ndarray:
    """[0, 1) from each pair of words (high, low): 52 bits as the mantissa of [1, 2), minus 1 (Uint64ToDouble)."""
    high, low = (words[0::2] & np.uint32(0xFFFFF)).astype(np.uint64), words[1::2].astype(np.uint64)
    return ((high << np.uint64(32)) | low | np.uint64(1023 << 52)).view(np.float64) - 1.0


def _bitcast(x: Any, dtype: Any) -> Any:
    import jax

    return jax.lax.bitcast_convert_type(x, dtype)


@functools.cache
def _glibc() -> Any:
    name = ctypes.util.find_library("m")
    try:
        lib = ctypes.CDLL(name) if name else None
    except OSError:
        lib = None
    if lib is None or not all(hasattr(lib, f) for f in _LIBM):
        return None
    for f, kind in _LIBM.items():
        getattr(lib, f).restype, getattr(lib, f).argtypes = kind, [kind]
    return lib


_LIBM = {"logf": ctypes.c_float, "sinf": ctypes.c_float, "cosf": ctypes.c_float, "log": ctypes.c_double,
         "sin": ctypes.c_double, "cos": ctypes.c_double}


def _libm(name: str) -> Any:
    """The C library's function (TF's kernel calls it), else numpy's (float64, rounded: within an ulp)."""
    lib = _glibc()
    if lib is not None:
        return np.frompyfunc(getattr(lib, name), 1, 1)
    return getattr(np, name.rstrip("f"))


_TWO_PI_HIGH = float(np.float32(2 * np.pi))
_TWO_PI_LOW = float(np.float32(2 * np.pi - _TWO_PI_HIGH))


def normal_float32(words: Any, xp: Any = np) -> Any:
    """Box-Muller of word pairs, as TF's BoxMullerFloat: sin, cos of 2*pi*u2 times sqrt(-2 log u1)."""
    u1 = xp.maximum(unit_float32(words[0::2], xp), xp.float32(1e-7))
    if xp is np:
        v1 = (2.0 * np.pi * unit_float32(words[1::2]).astype(np.float64)).astype(np.float32)
        log, sin, cos = (lambda x, n=n: np.asarray(_libm(n)(x.astype(np.float64)), np.float32)
                         for n in ("logf", "sinf", "cosf"))
    else:
        unit = unit_float32(words[1::2], xp)  # 2*pi*u in double then rounded, as TF's: pi in two float32 parts
        v1 = xp.float32(_TWO_PI_HIGH) * unit + xp.float32(_TWO_PI_LOW) * unit
        log, sin, cos = xp.log, xp.sin, xp.cos
    radius = xp.sqrt(xp.float32(-2.0) * log(u1))
    return xp.stack([sin(v1) * radius, cos(v1) * radius], axis=-1).reshape(-1)


def normal_float64(words: np.ndarray) -> np.ndarray:
    """Box-Muller of doubles from word quadruples, as TF's BoxMullerDouble."""
    units = unit_float64(words)
    u1, v1 = np.maximum(units[0::2], 1e-7), 2 * np.pi * units[1::2]
    log, sin, cos = (lambda x, n=n: np.asarray(_libm(n)(x), np.float64) for n in ("log", "sin", "cos"))
    radius = np.sqrt(-2.0 * log(u1))
    return np.stack([sin(v1) * radius, cos(v1) * radius], axis=-1).reshape(-1)
