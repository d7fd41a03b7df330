"""The local Ray cluster a parameter-server strategy starts: started once, stopped with the strategy.

`ensure_ray` joins a given Ray cluster, or starts a local one; only a local
one started here is this job's to stop. `ParameterServerStrategy.shutdown()`
stops it (`ray.shutdown()`, then `jdist.parameter_server.ray_reaper` kills any
Ray process left), and the reaper does the same when the coordinator ends in
any other way, killed outright included, so no Ray process outlives the job.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from typing import Any

_reaper: subprocess.Popen | None = None


def require_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ImportError(
            "ParameterServerStrategy runs its parameter servers and workers on Ray, which is not installed. "
            "Install it with: pip install 'jdist[ps]'"
        ) from None
    return ray


def ensure_ray(address: str | None) -> bool:
    """Joins the Ray cluster at `address` (or RAY_ADDRESS), or starts a local one, unless already connected.

    Returns whether a local cluster was started here (the job's to stop)."""
    ray = require_ray()
    if ray.is_initialized():
        return False
    with warnings.catch_warnings():
        # JAX warns about os.fork() in a threaded process; Ray's daemons are fork+exec, which is safe.
        warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)
        ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING)
    if not sys.platform.startswith("linux"):
        return address is None and not os.environ.get("RAY_ADDRESS")
    from jdist.parameter_server.ray_reaper import ray_processes

    # Without an address Ray may also join a cluster started by `ray start`: not this job's to stop.
    started = bool(ray_processes(os.getpid()))
    if started:
        _start_reaper()
    return started


def _start_reaper() -> None:
    global _reaper
    if _reaper is not None and _reaper.poll() is None:
        return
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ray_reaper.py")
    # Its own session: a signal to the job's process group (Ctrl-C, the launcher) leaves it to clean up.
    _reaper = subprocess.Popen([sys.executable, "-I", "-S", script, str(os.getpid())], stdin=subprocess.PIPE,
                               start_new_session=True)


def stop_local_ray(timeout: float = 30.0) -> None:
    """`ray.shutdown()`, then waits for the reaper to kill what Ray left (each within `timeout` s)."""
    global _reaper
    ray = require_ray()
    ray.shutdown()
    reaper, _reaper = _reaper, None
    if reaper is None:
        return
    if reaper.stdin is not None:
        reaper.stdin.close()
    try:
        reaper.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        reaper.kill()
        reaper.wait(timeout=5)
