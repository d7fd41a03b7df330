"""A parameter-server job on a local Ray cluster it starts itself; prints the Ray processes it has.

`shutdown`: calls strategy.shutdown() and prints which of them still run. `killed`: prints "ready" and
waits to be killed (SIGKILL) by the test.
"""
import json
import os
import sys
import time

import numpy as np

import jdist
from jdist.parameter_server import ray_reaper

mode = sys.argv[1]
strategy = jdist.ParameterServerStrategy(jdist.ParameterServerCluster(num_workers=1, num_ps=1))
coordinator = jdist.ClusterCoordinator(strategy)
assert coordinator.fetch(coordinator.schedule(np.add, args=(1, 2))) == 3
noted = ray_reaper.ray_processes(os.getpid())
print("ray processes " + json.dumps(noted), flush=True)
if mode == "shutdown":
    strategy.shutdown()
    print("after shutdown " + json.dumps(ray_reaper.still_running({int(k): v for k, v in noted.items()})), flush=True)
else:
    print("ready", flush=True)
    time.sleep(600)
