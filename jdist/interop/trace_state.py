"""Whether JAX is tracing the calling code, asked of JAX's trace stack (it has no public alias).

Two questions, with different answers inside a gradient: `under_jit` is True inside `jax.jit`, `strategy.run`
and a `lax` loop's body (where a value is abstract and a program is being built); `under_any_trace` is also
True inside `jax.grad` / `jax.vjp`, where values are concrete but a transformation is recording them. Neither
makes an array: one would start JAX's backend before `tf.config.set_logical_device_configuration` can split
the CPU.
"""
from __future__ import annotations


def under_jit() -> bool:
    """True while JAX traces a program around this call (`jax.jit`, `strategy.run`, a `lax` loop's body)."""
    from jax._src import core as jax_core

    return bool(jax_core.unsafe_am_i_under_a_jit())


def under_any_trace() -> bool:
    """`under_jit`, or any other JAX transformation recording this call (`jax.grad`, `jax.vjp`)."""
    from jax._src import core as jax_core

    clean = getattr(jax_core, "trace_state_clean", lambda: True)
    return under_jit() or not clean()
