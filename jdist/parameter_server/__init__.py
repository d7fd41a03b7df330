"""Asynchronous parameter-server training on Ray: `ParameterServerStrategy` + `ClusterCoordinator`."""
from jdist.cluster.worker_context import get_current_worker_index
from jdist.parameter_server.cluster import ParameterServerCluster
from jdist.parameter_server.coordinator import ClusterCoordinator, PerWorkerValues, RemoteValue
from jdist.parameter_server.errors import CancelledError, PSUnavailableError, UnavailableError
from jdist.parameter_server.remote_state import RemoteParameters, RemoteTrainState
from jdist.parameter_server.strategy import ParameterServerStrategy

# The strategy hands out its coordinator (`Strategy.cluster_coordinator`) without importing the
# coordinator's module, which imports the strategy's.
ParameterServerStrategy.coordinator_class = ClusterCoordinator

__all__ = [
    "CancelledError",
    "ClusterCoordinator",
    "PSUnavailableError",
    "ParameterServerCluster",
    "ParameterServerStrategy",
    "PerWorkerValues",
    "RemoteParameters",
    "RemoteTrainState",
    "RemoteValue",
    "UnavailableError",
    "get_current_worker_index",
]
