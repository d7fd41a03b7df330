"""`ClusterSpec` and the rules TF applies to it (`multi_worker_util`).

A cluster maps job names (`chief`, `worker`, `ps`, `evaluator`) to task
addresses. The training processes are the chief plus the workers; the chief is
`chief:0`, else `worker:0`, and worker `i` gets process id `i + number of
chiefs` (TF's `id_in_cluster`). Error texts start with TF's own.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

ALLOWED_JOBS = ("chief", "worker", "evaluator", "ps")
TRAINING_JOBS = ("chief", "worker")


class ClusterSpec:
    """Job name -> task addresses (TF's `tf.train.ClusterSpec`).

    A job is a list of "host:port" addresses or TF's sparse form, a dict of task index ->
    address (`{"ps": {0: "h0:1", 3: "h3:1"}}`; string indices, as JSON gives them, are read
    as integers). As in TF 2.21 (observed), a sparse job counts its listed tasks only
    (`num_tasks`), `job_tasks` fills the gaps with None, and `as_dict()` gives a dict for a
    sparse job and a list for a dense one. Training jobs (chief, worker) must be dense:
    `validate` says so.
    """

    def __init__(self, cluster: "Mapping[str, Any] | ClusterSpec | None" = None):
        if isinstance(cluster, ClusterSpec):
            cluster = cluster.as_dict()
        cluster = {} if cluster is None else cluster
        if not isinstance(cluster, Mapping):
            raise ClusterSpecError(
                "`cluster` must be a dictionary mapping one or more job names to lists of network addresses "
                f"('host:port'), got {type(cluster).__name__}: {cluster!r}."
            )
        self._jobs = {str(job): _task_dict(str(job), tasks) for job, tasks in cluster.items()}

    @property
    def jobs(self) -> list[str]:
        return list(self._jobs)

    def _tasks(self, job_name: str) -> dict[int, str]:
        if job_name not in self._jobs:
            raise ValueError(f"No such job in cluster: {job_name!r} (jobs: {self.jobs}).")
        return self._jobs[job_name]

    def num_tasks(self, job_name: str) -> int:
        """The tasks the job lists (a sparse job: only those given)."""
        return len(self._tasks(job_name))

    def task_indices(self, job_name: str) -> list[int]:
        return sorted(self._tasks(job_name))

    def job_tasks(self, job_name: str) -> list[str | None]:
        """Addresses by task index; a sparse job has None where no task is given."""
        tasks = self._tasks(job_name)
        return [tasks.get(i) for i in range(max(tasks) + 1)] if tasks else []

    def task_address(self, job_name: str, task_index: int) -> str:
        tasks = self._tasks(job_name)
        if task_index not in tasks:
            raise ValueError(f"No task with index {task_index} in job {job_name!r} (tasks: {sorted(tasks)}).")
        return tasks[task_index]

    def is_dense(self, job_name: str) -> bool:
        return self.task_indices(job_name) == list(range(self.num_tasks(job_name)))

    def as_dict(self) -> dict[str, Any]:
        """Job -> list of addresses (dict of index -> address for a sparse job), as TF returns it."""
        return {job: self.job_tasks(job) if self.is_dense(job) else dict(sorted(tasks.items()))
                for job, tasks in self._jobs.items()}

    def __bool__(self) -> bool:
        return bool(self._jobs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClusterSpec) and self.as_dict() == other.as_dict()

    def __repr__(self) -> str:
        return f"ClusterSpec({dict(sorted(self.as_dict().items()))!r})"


class ClusterSpecError(TypeError, ValueError):
    """A malformed cluster: TF raises TypeError; jdist's earlier checks raised ValueError (both catch it)."""


def _task_dict(job: str, tasks: Any) -> dict[int, str]:
    if isinstance(tasks, Mapping):
        try:
            indexed = {int(k): v for k, v in tasks.items()}
        except (TypeError, ValueError):
            raise ClusterSpecError(f"Job {job!r} has non-integer task indices: {list(tasks)}.") from None
    elif isinstance(tasks, Sequence) and not isinstance(tasks, str):
        indexed = dict(enumerate(tasks))
    else:
        fix = f": it must list its task addresses; write [{tasks!r}]." if isinstance(tasks, str) else "."
        raise ClusterSpecError(
            f"The tasks for job {job!r} must be a list or a dictionary from integers to strings, got {tasks!r}{fix}")
    for address in indexed.values():
        if not isinstance(address, str):
            raise ClusterSpecError(f"Job {job!r} has a task address that is not a string: {address!r}.")
    return indexed


def split_address(address: str, where: str = "") -> tuple[str, int]:
    """("host", port) from "host:port" (IPv6 as "[::1]:port"); a clear error otherwise."""
    host, sep, port = address.rpartition(":")
    context = f" ({where})" if where else ""
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(
            f"Task address {address!r}{context} is not 'host:port' with a port in 1..65535, "
            "e.g. 'worker0.example.com:2222'."
        )
    return host.strip("[]"), int(port)


def validate(cluster: ClusterSpec, task_type: str | None, task_id: int | None) -> None:
    """TF's `_validate_cluster_spec`, with the offending values named."""
    unknown = [job for job in cluster.jobs if job not in ALLOWED_JOBS]
    if unknown:
        raise ValueError(
            f"Disallowed task type found in cluster spec. Allowed types are {ALLOWED_JOBS} and the "
            f"cluster spec is {cluster.as_dict()}. Unknown job name(s): {unknown}."
        )
    for job in TRAINING_JOBS:
        if job in cluster.jobs and not cluster.is_dense(job):
            indices = cluster.task_indices(job)
            raise ValueError(
                f"Job {job!r} lists tasks {indices}; every index 0..{len(indices) - 1} must be present: "
                "each training process needs its task."
            )
    if task_type not in ALLOWED_JOBS:
        raise ValueError(f"Unrecognized task_type: {task_type!r}, valid task types are: {ALLOWED_JOBS}")
    if task_type not in cluster.jobs and task_type != "evaluator":
        raise ValueError(
            f"`task_type` {task_type!r} not found in cluster_spec. The cluster has jobs {cluster.jobs}."
        )
    if len(cluster.as_dict().get("chief", [])) > 1:
        raise ValueError(
            f"There must be at most one 'chief' job. Got {cluster.num_tasks('chief')} chief tasks: "
            f"{cluster.job_tasks('chief')}; make the others 'worker' tasks."
        )
    if len(cluster.as_dict().get("evaluator", [])) > 1:
        raise ValueError(
            f"There must be at most one 'evaluator' job. Got {cluster.job_tasks('evaluator')}."
        )
    if isinstance(task_id, bool) or not isinstance(task_id, int) or task_id < 0:
        raise ValueError(f"The task index must be a non-negative integer, got {task_id!r}.")
    if task_type in cluster.jobs and task_id >= cluster.num_tasks(task_type):
        n = cluster.num_tasks(task_type)
        raise ValueError(
            f"The `task_id` {task_id} exceeds the maximum id of {task_type}. Job {task_type!r} has {n} "
            f"task(s), so valid indices are 0..{n - 1}."
        )
    for job in TRAINING_JOBS:
        for i, address in enumerate(cluster.as_dict().get(job, [])):
            split_address(address, f"{job}:{i}")


def worker_count(cluster: ClusterSpec, task_type: str) -> int:
    """Processes in this task's training cluster: chief + workers (an evaluator counts alone)."""
    if task_type == "evaluator":
        return max(1, len(cluster.as_dict().get("evaluator", [])))
    if task_type not in TRAINING_JOBS:
        raise ValueError(f"Unexpected `task_type` {task_type!r}: only chief and worker tasks train.")
    jobs = cluster.as_dict()
    return len(jobs.get("chief", [])) + len(jobs.get("worker", []))


def id_in_cluster(cluster: ClusterSpec, task_type: str, task_id: int) -> int:
    """The chief is 0 and worker `i` is `i + number of chiefs` (TF's `id_in_cluster`)."""
    if task_type == "chief":
        return 0
    if task_type == "worker":
        return task_id + len(cluster.as_dict().get("chief", []))
    if task_type == "evaluator":
        return task_id
    raise ValueError(f"There is no id for task_type {task_type!r}")


def is_chief(cluster: ClusterSpec, task_type: str, task_id: int) -> bool:
    """`chief` (and an evaluator, chief of itself), else `worker:0` when there is no chief."""
    if task_type in ("chief", "evaluator"):
        return True
    return "chief" not in cluster.jobs and task_type == "worker" and task_id == 0


def coordinator_task(cluster: ClusterSpec) -> tuple[str, int]:
    """The task that hosts the coordination service: `chief:0`, else `worker:0`."""
    return ("chief", 0) if "chief" in cluster.jobs and cluster.num_tasks("chief") else ("worker", 0)
