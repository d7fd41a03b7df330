"""Small runtime helpers shared by training loops (kept for imports; see `jdist.dispatch`)."""
from jdist.dispatch import InFlightLimiter

__all__ = ["InFlightLimiter"]
