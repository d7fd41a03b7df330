"""`CommunicationOptions`: TF's knobs for cross-worker collectives, and what JAX makes of them.

| option | TF | jdist on JAX/XLA |
| --- | --- | --- |
| `implementation=AUTO` | RING on CPU, NCCL on GPU | gloo on CPU, NCCL on GPU, ICI/DCN on TPU (XLA's choice) |
| `implementation=RING` | RPC ring | gloo on CPU (a ring all-reduce); ignored with a warning on GPU/TPU |
| `implementation=NCCL` | NCCL all-reduce on GPU | NCCL on GPU (XLA's default there); on CPU a warning and gloo |
| `timeout_seconds` | per-collective deadline | bound on how long a worker waits on a dead or failed peer |
| `bytes_per_pack` | gradient packing | across CPU processes: pack size of the gradient and `all_reduce` sums |
"""
from __future__ import annotations

import copy
import enum


class CommunicationImplementation(enum.Enum):
    """Which collective implementation cross-worker all-reduces use (TF's enum)."""

    AUTO = "AUTO"
    RING = "RING"
    NCCL = "NCCL"


CollectiveCommunication = CommunicationImplementation  # TF's older name


class CommunicationOptions:
    """TF's `tf.distribute.experimental.CommunicationOptions`, same arguments and validation."""

    def __init__(
        self,
        bytes_per_pack: int = 0,
        timeout_seconds: float | None = None,
        implementation: "CommunicationImplementation | str" = CommunicationImplementation.AUTO,
    ):
        if bytes_per_pack < 0:
            raise ValueError("bytes_per_pack must be non-negative")
        if timeout_seconds is not None and not timeout_seconds > 0:
            raise ValueError(f"timeout_seconds must be positive or None, got {timeout_seconds!r}.")
        if isinstance(implementation, str):
            try:
                implementation = CommunicationImplementation(implementation.upper())
            except ValueError:
                raise ValueError(
                    f"Unknown communication implementation {implementation!r}; use one of "
                    f"{[m.value for m in CommunicationImplementation]} (any case)."
                ) from None
        if not isinstance(implementation, CommunicationImplementation):
            raise ValueError("implementation should be a jdist.CommunicationImplementation (or its name), got "
                             f"{implementation!r}.")
        self.bytes_per_pack = bytes_per_pack
        self.timeout_seconds = timeout_seconds
        self.implementation = implementation

    def merge(self, options: "CommunicationOptions | None") -> "CommunicationOptions":
        """A copy where the non-default values of `options` win (TF's rule)."""
        merged = copy.deepcopy(self)
        if options is None:
            return merged
        if options.bytes_per_pack != 0:
            merged.bytes_per_pack = options.bytes_per_pack
        if options.timeout_seconds is not None:
            merged.timeout_seconds = options.timeout_seconds
        if options.implementation is not CommunicationImplementation.AUTO:
            merged.implementation = options.implementation
        return merged

    def __repr__(self) -> str:
        return (f"CommunicationOptions(bytes_per_pack={self.bytes_per_pack}, timeout_seconds={self.timeout_seconds}, "
                f"implementation={self.implementation.name})")
