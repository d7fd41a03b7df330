"""TPU system setup (`initialize_tpu_system()` and the topology it reports): the public face of
`jdist.strategy.tpu_system`, where the strategy runtime keeps it."""
from jdist.strategy.tpu_system import (
    TPUNotFoundError,
    TPUTopology,
    initialize_tpu_system,
    tpu_devices,
    tpu_pod_env_detected,
)

__all__ = ["TPUNotFoundError", "TPUTopology", "initialize_tpu_system", "tpu_devices", "tpu_pod_env_detected"]
