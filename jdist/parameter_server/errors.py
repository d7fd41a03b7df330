"""Errors of asynchronous parameter-server training: TF's `tf.errors.UnavailableError` and `CancelledError`
(jdist.errors; also RuntimeErrors), so a script's `except tf.errors.UnavailableError` catches them."""
from __future__ import annotations

from jdist.errors import CancelledError, UnavailableError


class PSUnavailableError(UnavailableError):
    """A parameter server died or stopped answering; training cannot go on with this cluster.

    Parameter servers hold the only copy of the parameters, so, as in TF, this is
    fatal: start a new strategy and coordinator and restore from the last checkpoint.
    """

    def __init__(self, server_index: int, reason: str):
        self.server_index = server_index
        self.reason = reason
        super().__init__(
            f"Parameter server {server_index} is unavailable ({reason}). The parameters it held are lost, so "
            "asynchronous training cannot continue with this cluster. Restore from the last checkpoint: create a "
            "new ParameterServerStrategy and ClusterCoordinator, build the train state again, load the last saved "
            "parameters into it with strategy.restore(state, checkpointed_state), and resume scheduling."
        )

    def __reduce__(self):
        return (type(self), (self.server_index, self.reason))


__all__ = ["CancelledError", "PSUnavailableError", "UnavailableError"]
