"""TF's string fingerprint: FarmHash's `Fingerprint64` (farmhashna's 64-bit hash), in Python.

`tf.strings.to_hash_bucket_fast(s, n)` is `Fingerprint64(s) % n`, and Keras's `StringLookup` spreads unknown
strings over its OOV indices by it. Equal to TF 2.21 bit for bit on strings of every length branch (0-199, 255,
256, 257 and 1000 bytes, checked against `to_hash_bucket_fast(s, 2**63 - 1)`); tests hold observed buckets.
Pure Python, for host-side text pipelines.
"""
from __future__ import annotations

_M = (1 << 64) - 1
_K0, _K1, _K2 = 0xC3A5C85C97CB3127, 0xB492B66FBE98F273, 0x9AE16A3B2F90404F
_KMUL = 0x9DDFEA08EB382D69


def _fetch64(s: bytes, i: int) -> int:
    return int.from_bytes(s[i:i + 8], "little")


def _fetch32(s: bytes, i: int) -> int:
    return int.from_bytes(s[i:i + 4], "little")


def _rotate(value: int, shift: int) -> int:
    return value if shift == 0 else ((value >> shift) | (value << (64 - shift))) & _M


def _shift_mix(value: int) -> int:
    return value ^ (value >> 47)


def _hash16(u: int, v: int, mul: int = _KMUL) -> int:
    a = ((u ^ v) * mul) & _M
    a ^= a >> 47
    b = ((v ^ a) * mul) & _M
    b ^= b >> 47
    return (b * mul) & _M


def _len_0_to_16(s: bytes) -> int:
    n = len(s)
    if n >= 8:
        mul = (_K2 + n * 2) & _M
        a = (_fetch64(s, 0) + _K2) & _M
        b = _fetch64(s, n - 8)
        c = (_rotate(b, 37) * mul + a) & _M
        d = ((_rotate(a, 25) + b) * mul) & _M
        return _hash16(c, d, mul)
    if n >= 4:
        mul = (_K2 + n * 2) & _M
        return _hash16((n + (_fetch32(s, 0) << 3)) & _M, _fetch32(s, n - 4), mul)
    if n > 0:
        y = (s[0] + (s[n >> 1] << 8)) & 0xFFFFFFFF
        z = (n + (s[n - 1] << 2)) & 0xFFFFFFFF
        return (_shift_mix(((y * _K2) ^ (z * _K0)) & _M) * _K2) & _M
    return _K2


def _ends(s: bytes, first: int) -> tuple[int, int, int, int, int]:
    """The multiplier and the four words both medium-length hashes start from (the first scaled by `first`)."""
    n = len(s)
    mul = (_K2 + n * 2) & _M
    return (mul, (_fetch64(s, 0) * first) & _M, _fetch64(s, 8), (_fetch64(s, n - 8) * mul) & _M,
            (_fetch64(s, n - 16) * _K2) & _M)


def _len_17_to_32(s: bytes) -> int:
    mul, a, b, c, d = _ends(s, _K1)
    return _hash16((_rotate((a + b) & _M, 43) + _rotate(c, 30) + d) & _M,
                   (a + _rotate((b + _K2) & _M, 18) + c) & _M, mul)


def _len_33_to_64(s: bytes) -> int:
    n = len(s)
    mul, a, b, c, d = _ends(s, _K2)
    y = (_rotate((a + b) & _M, 43) + _rotate(c, 30) + d) & _M
    z = _hash16(y, (a + _rotate((b + _K2) & _M, 18) + c) & _M, mul)
    e = (_fetch64(s, 16) * mul) & _M
    f = _fetch64(s, 24)
    g = ((y + _fetch64(s, n - 32)) * mul) & _M
    h = ((z + _fetch64(s, n - 24)) * mul) & _M
    return _hash16((_rotate((e + f) & _M, 43) + _rotate(g, 30) + h) & _M,
                   (e + _rotate((f + a) & _M, 18) + g) & _M, mul)


def _weak_32(s: bytes, i: int, a: int, b: int) -> tuple[int, int]:
    w, x, y, z = _fetch64(s, i), _fetch64(s, i + 8), _fetch64(s, i + 16), _fetch64(s, i + 24)
    a = (a + w) & _M
    b = _rotate((b + a + z) & _M, 21)
    c = a
    a = (a + x + y) & _M
    b = (b + _rotate(a, 44)) & _M
    return (a + z) & _M, (b + c) & _M


def fingerprint64(s: bytes) -> int:
    """FarmHash's Fingerprint64 of `s` (an unsigned 64-bit int), as TF computes it."""
    n = len(s)
    if n <= 16:
        return _len_0_to_16(s)
    if n <= 32:
        return _len_17_to_32(s)
    if n <= 64:
        return _len_33_to_64(s)
    seed = 81
    x = (seed * _K2 + _fetch64(s, 0)) & _M
    y = (seed * _K1 + 113) & _M
    z = (_shift_mix((y * _K2 + 113) & _M) * _K2) & _M
    v, w = (0, 0), (0, 0)
    end = ((n - 1) // 64) * 64
    i = 0
    while True:  # 64-byte blocks
        x = (_rotate((x + y + v[0] + _fetch64(s, i + 8)) & _M, 37) * _K1) & _M
        y = (_rotate((y + v[1] + _fetch64(s, i + 48)) & _M, 42) * _K1) & _M
        x ^= w[1]
        y = (y + v[0] + _fetch64(s, i + 40)) & _M
        z = (_rotate((z + w[0]) & _M, 33) * _K1) & _M
        v = _weak_32(s, i, (v[1] * _K1) & _M, (x + w[0]) & _M)
        w = _weak_32(s, i + 32, (z + w[1]) & _M, (y + _fetch64(s, i + 16)) & _M)
        z, x = x, z
        i += 64
        if i == end:
            break
    mul = (_K1 + ((z & 0xFF) << 1)) & _M
    i = end + ((n - 1) & 63) - 63  # the last 64 bytes
    w0 = (w[0] + ((n - 1) & 63)) & _M
    v0 = (v[0] + w0) & _M
    w = ((w0 + v0) & _M, w[1])
    v = (v0, v[1])
    x = (_rotate((x + y + v[0] + _fetch64(s, i + 8)) & _M, 37) * mul) & _M
    y = (_rotate((y + v[1] + _fetch64(s, i + 48)) & _M, 42) * mul) & _M
    x ^= (w[1] * 9) & _M
    y = (y + v[0] * 9 + _fetch64(s, i + 40)) & _M
    z = (_rotate((z + w[0]) & _M, 33) * mul) & _M
    v = _weak_32(s, i, (v[1] * mul) & _M, (x + w[0]) & _M)
    w = _weak_32(s, i + 32, (z + w[1]) & _M, (y + _fetch64(s, i + 16)) & _M)
    z, x = x, z
    return _hash16((_hash16(v[0], w[0], mul) + _shift_mix(y) * _K0 + z) & _M,
                   (_hash16(v[1], w[1], mul) + x) & _M, mul)
