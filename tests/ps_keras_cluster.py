"""The local parameter-server cluster and the small binary task the Keras parameter-server tests share."""
from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Iterator

import numpy as np
import ray

import jdist

RNG = np.random.default_rng(0)
X = RNG.standard_normal((24, 4)).astype(np.float32)
Y = (X[:, :1] > 0).astype(np.int64)
BATCHES = [(X[i:i + 8], Y[i:i + 8]) for i in range(0, 24, 8)]


@contextmanager
def keras_cluster(num_workers: int = 1, **strategy_kwargs) -> Iterator[tuple]:
    """(strategy, coordinator) over `num_workers` workers and 2 servers; Ray is started here unless an earlier module's
    strategy left its local Ray running, and then only shut down here if started here."""
    started = not ray.is_initialized()
    if started:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)  # Ray's fork+exec
            ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    strategy = jdist.ParameterServerStrategy(jdist.ParameterServerCluster(num_workers=num_workers, num_ps=2),
                                             **strategy_kwargs)
    coordinator = jdist.ClusterCoordinator(strategy)
    yield strategy, coordinator
    strategy.shutdown()
    if started:
        ray.shutdown()
