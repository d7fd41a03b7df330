"""`TFConfigClusterResolver`: the cluster from the `TF_CONFIG` environment variable.

    TF_CONFIG='{"cluster": {"chief": ["h0:2222"], "worker": ["h1:2222", "h2:2222"]},
                "task": {"type": "worker", "index": 1}}'

As in TF, the variable is read at every access, so a launcher may set it after
the resolver exists. Unlike TF, broken JSON is reported with the offending text.
"""
from __future__ import annotations

import json
import os
from typing import Any

from jdist.cluster.resolver import ClusterResolver
from jdist.cluster.spec import ClusterSpec

TF_CONFIG = "TF_CONFIG"
_SHOWN_CHARS = 400


def load_tf_config(environ: Any = None) -> dict:
    """The parsed `TF_CONFIG` ({} when unset or empty); `ValueError` showing bad text."""
    text = (os.environ if environ is None else environ).get(TF_CONFIG, "")
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        shown = text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."
        raise ValueError(
            f"TF_CONFIG is not valid JSON ({err.msg} at line {err.lineno}, column {err.colno}): {shown!r}. "
            'Expected e.g. {"cluster": {"worker": ["host0:2222", "host1:2222"]}, '
            '"task": {"type": "worker", "index": 0}}.'
        ) from None
    if not isinstance(value, dict):
        raise ValueError(
            f"TF_CONFIG must be a JSON object with 'cluster' and 'task', got {type(value).__name__}: {text!r}."
        )
    return value


def _task(config: dict) -> dict:
    task = config.get("task", {})
    if not isinstance(task, dict):
        raise ValueError(f"TF_CONFIG's 'task' must be an object like {{\"type\": \"worker\", \"index\": 0}}, "
                         f"got {task!r}.")
    return task


class TFConfigClusterResolver(ClusterResolver):
    """Reads `TF_CONFIG`; `task_type`/`task_id`/`rpc_layer` arguments override it (TF's API)."""

    def __init__(
        self,
        task_type: str | None = None,
        task_id: int | None = None,
        rpc_layer: str | None = None,
        environment: str | None = None,
    ):
        self._task_type = task_type
        self._task_id = task_id
        self._rpc_layer = rpc_layer
        self._environment = environment

    def cluster_spec(self) -> ClusterSpec:
        config = load_tf_config()
        return ClusterSpec(config.get("cluster", {}))

    @property
    def task_type(self) -> str | None:
        if self._task_type is not None:
            return str(self._task_type)
        task = _task(load_tf_config())
        return str(task["type"]) if "type" in task else None

    @task_type.setter
    def task_type(self, value: str | None) -> None:
        self._task_type = value

    @property
    def task_id(self) -> int | None:
        if self._task_id is not None:
            return _as_index(self._task_id)
        task = _task(load_tf_config())
        return _as_index(task["index"]) if "index" in task else None

    @task_id.setter
    def task_id(self, value: int | None) -> None:
        self._task_id = value

    @property
    def rpc_layer(self) -> str | None:
        return self._rpc_layer if self._rpc_layer is not None else load_tf_config().get("rpc_layer")

    @property
    def environment(self) -> str:
        return self._environment or ""

    def master(self, task_type: str | None = None, task_id: int | None = None, rpc_layer: str | None = None) -> str:
        session_master = load_tf_config().get("session_master")
        if session_master is not None:
            return session_master
        return super().master(task_type, task_id, rpc_layer)


def _as_index(value: Any) -> int:
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(f"The task index must be an integer, got {value!r}.")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"The task index must be an integer, got {value!r}.") from None
