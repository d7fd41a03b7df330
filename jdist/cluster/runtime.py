"""Joining JAX's distributed runtime: checks first, then `jax.distributed.initialize`.

Order matters because a wrong step hangs: validate the cluster config, make
sure the coordinator can be reached (or, on the chief, that its port is free),
make sure JAX has not started its runtime yet (restarting it when only the CPU
backend is up), then connect and start the failure watchdog. Under
`python -m jdist.launch`, importing this module also starts the heartbeat the
launcher watches (see jdist/cluster/heartbeat.py).
"""
from __future__ import annotations

import dataclasses
import errno
import logging
import math
import os
import socket
import time

from jdist.cluster import heartbeat
from jdist.cluster.communication import CommunicationImplementation, CommunicationOptions
from jdist.cluster.resolver import ClusterResolver
from jdist.cluster.spec import split_address
from jdist.cluster.watchdog import Watchdog

logger = logging.getLogger("jdist")

DEFAULT_FAILURE_TIMEOUT = 60.0
FAILURE_TIMEOUT_ENV = "JDIST_FAILURE_TIMEOUT"
DEFAULT_INITIALIZATION_TIMEOUT = 300.0
RESTART_COUNT_ENV = "JDIST_RESTART_COUNT"

heartbeat.start_from_environment()  # as early as possible: the launcher only watches workers that beat


@dataclasses.dataclass(frozen=True)
class RuntimeSettings:
    """What the communication options become in JAX's terms (see docs/multi_worker.md)."""

    failure_timeout: float
    heartbeat_timeout_seconds: int
    shutdown_timeout_seconds: int
    initialization_timeout: int


def runtime_settings(options: CommunicationOptions | None,
                     initialization_timeout: float | None = None) -> RuntimeSettings:
    """`timeout_seconds` (else $JDIST_FAILURE_TIMEOUT, else 60 s) bounds how long a worker waits on a dead peer.

    jdist's watchdog acts at that bound. JAX's own heartbeat check is the
    backstop: it fires between half and all of its timeout after a death
    (heartbeats go out every half timeout), so it gets twice the bound plus 10 s.
    JAX's exit barrier gets five times the bound, so a chief that writes final
    files after the others finish is not cut short.
    """
    timeout = options.timeout_seconds if options is not None else None
    if timeout is None:
        env = os.environ.get(FAILURE_TIMEOUT_ENV)
        try:
            timeout = float(env) if env else DEFAULT_FAILURE_TIMEOUT
        except ValueError:
            raise ValueError(f"{FAILURE_TIMEOUT_ENV}={env!r} is not a number of seconds.") from None
    if not timeout > 0:
        raise ValueError(f"The failure timeout must be positive, got {timeout!r} seconds.")
    init = DEFAULT_INITIALIZATION_TIMEOUT if initialization_timeout is None else float(initialization_timeout)
    return RuntimeSettings(
        failure_timeout=float(timeout),
        heartbeat_timeout_seconds=math.ceil(2 * timeout + 10),
        shutdown_timeout_seconds=math.ceil(5 * timeout),
        initialization_timeout=math.ceil(init),
    )


# ----------------------------------------------------------------- checks
def wait_for_coordinator(address: str, timeout: float, name: str = "the coordinator") -> None:
    """Retries a TCP connect to `address` until it succeeds or `timeout` seconds pass.

    Workers usually start before the chief is listening, so one failed connect
    is not an error; `timeout` seconds of them is, and it names host:port.
    """
    host, port = split_address(address, name)
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while True:
        try:
            with socket.create_connection((host, port), timeout=min(2.0, max(0.1, timeout))):
                return
        except OSError as err:
            last = err
        if time.monotonic() >= deadline:
            break
        time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
    raise ConnectionError(
        f"Cannot reach the coordinator {name} at {host}:{port} after {timeout:.0f} s ({last}). "
        f"Check that the {name} process is running, that the cluster config gives its real host and port "
        "(TF_CONFIG 'cluster', or SLURM's node list and port_base), and that the port is open between machines."
    )


def check_port_free(address: str, name: str = "the coordinator") -> None:
    """On the process that will host the coordination service: its port must be free here."""
    _, port = split_address(address, name)
    for family, host in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue
        with sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
                return
            except OSError as err:
                if err.errno == errno.EADDRINUSE:
                    raise OSError(
                        f"Port {port} of {name} ({address}) is already in use on this machine, so the "
                        "coordination service cannot start. Pick a free port in the cluster config, or stop the "
                        "process that holds it (an earlier run?)."
                    ) from None
    # Neither family could bind for another reason: let JAX report it.


# ----------------------------------------------------------------- backends
def prepare_backends() -> None:
    """Makes sure JAX's runtime is not started yet; restarts it when only the CPU backend is up."""
    import jax
    from jax._src import xla_bridge

    if not xla_bridge.backends_are_initialized():
        return
    platforms = sorted(xla_bridge.backends())
    if any(p != "cpu" for p in platforms):
        raise RuntimeError(
            "JAX already started its runtime in this process (backends: "
            f"{', '.join(platforms)}) before the multi-worker strategy joined the cluster, and an accelerator "
            "runtime cannot be restarted safely. Create jdist.MultiWorkerMirroredStrategy() (or call "
            "jdist.cluster.initialize()) before anything that touches devices: jax.devices(), creating "
            "arrays, model.init(...), or any jitted call."
        )
    logger.warning(
        "JAX's CPU runtime was already started in this process; jdist restarts it to join the cluster. "
        "Arrays created before this point stay valid but live outside the cluster's mesh: re-place them "
        "with strategy.place(...) (TrainState.create does) before training."
    )
    import jax.extend.backend

    jax.extend.backend.clear_backends()


def configure_collectives(options: CommunicationOptions | None) -> None:
    """Cross-process collectives for CPU arrays: gloo (a ring all-reduce) unless MPI was chosen."""
    import jax

    implementation = options.implementation if options is not None else CommunicationImplementation.AUTO
    # jax.config's options are attributes its class does not declare to a type checker.
    current = jax.config.jax_cpu_collectives_implementation  # pyright: ignore[reportAttributeAccessIssue]
    if implementation is CommunicationImplementation.RING or current in (None, "none"):
        jax.config.update("jax_cpu_collectives_implementation", "gloo")


def warn_unhonoured(options: CommunicationOptions | None) -> None:
    """After the backend is up: say which requested options this platform ignores."""
    if options is None:
        return
    import jax

    platform = jax.default_backend()
    if options.implementation is CommunicationImplementation.NCCL and platform != "gpu":
        logger.warning("CommunicationImplementation.NCCL needs GPUs; this cluster runs on %s, so collectives "
                       "use %s instead.", platform, "gloo" if platform == "cpu" else "the platform's own links")
    if options.implementation is CommunicationImplementation.RING and platform != "cpu":
        logger.warning("CommunicationImplementation.RING is not available on %s: XLA uses %s for collectives "
                       "between accelerators.", platform, "NCCL" if platform == "gpu" else "ICI/DCN")
    if options.bytes_per_pack and platform != "cpu":
        logger.info("bytes_per_pack=%d is not applied on %s: XLA combines collectives itself.", options.bytes_per_pack,
                    platform)


# ---------------------------------------------------------------- joining
_watchdog: Watchdog | None = None


def initialize(
    cluster_resolver: ClusterResolver | None = None,
    communication_options: CommunicationOptions | None = None,
    *,
    initialization_timeout: float | None = None,
) -> ClusterResolver:
    """Joins this process to its cluster (idempotent); returns the resolver used.

    A single-worker config does nothing. Call it at program start to connect
    early, or let `MultiWorkerMirroredStrategy()` call it.
    """
    import jax
    from jax._src import distributed

    from jdist.cluster.detect import resolve_cluster

    resolver = cluster_resolver if cluster_resolver is not None else resolve_cluster()
    num_workers, process_id = resolver.num_workers, resolver.process_id  # validates the config
    settings = runtime_settings(communication_options, initialization_timeout)
    if jax.distributed.is_initialized():  # started by the program itself, e.g. on a TPU pod
        state = distributed.global_state
        if (state.num_processes, state.process_id) != (num_workers, process_id):
            raise RuntimeError(
                f"JAX's distributed runtime is already running as process {state.process_id} of "
                f"{state.num_processes}, but the cluster config says this is {resolver.task_name(process_id)}, "
                f"process {process_id} of {num_workers}. Use one cluster config per program."
            )
        _start_watchdog(resolver, settings)
        return resolver
    if num_workers == 1:
        return resolver
    address = resolver.coordinator_address
    assert address is not None, "a cluster of several training processes has a coordinator"
    coordinator = resolver.task_name(0)
    if process_id == 0:
        check_port_free(address, coordinator)
    else:
        wait_for_coordinator(address, settings.initialization_timeout, coordinator)
    prepare_backends()
    configure_collectives(communication_options)
    jax.distributed.initialize(
        coordinator_address=address,
        num_processes=num_workers,
        process_id=process_id,
        local_device_ids=resolver.local_device_ids,
        cluster_detection_method="deactivate",  # else JAX's SLURM detection may pin one GPU per process
        initialization_timeout=settings.initialization_timeout,
        heartbeat_timeout_seconds=settings.heartbeat_timeout_seconds,
        shutdown_timeout_seconds=settings.shutdown_timeout_seconds,
    )
    _start_watchdog(resolver, settings)
    warn_unhonoured(communication_options)
    return resolver


def _start_watchdog(resolver: ClusterResolver, settings: RuntimeSettings) -> None:
    """Once per process, for every multi-process runtime (also one the program started itself)."""
    global _watchdog
    from jax._src import distributed

    if _watchdog is not None or resolver.num_workers == 1 or distributed.global_state.client is None:
        return
    names = [resolver.task_name(p) for p in range(resolver.num_workers)]
    _watchdog = Watchdog(distributed.global_state.client, resolver.process_id, names,
                         settings.failure_timeout,
                         coordinator_address=getattr(distributed.global_state, "coordinator_address", None)).start()
