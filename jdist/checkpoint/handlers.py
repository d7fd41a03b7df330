"""Orbax item handlers for the two small JSON parts of a jdist checkpoint.

* The manifest (leaf paths, shapes, dtypes, checksums, user metadata): written
  by the primary process in the background, after the checksums computed on
  device are fetched, so a save does not wait for them.
* The input iterator's position: every process writes its own
  `process_<i>-of-<n>.json`, because each process reads its own shard of the
  data and so has its own position (as grain's orbax handler does).
"""
from __future__ import annotations

import base64
import dataclasses
import json
import threading
from typing import Any

import jax
import orbax.checkpoint as ocp
from etils import epath

from jdist.checkpoint.integrity import fetch_checksums

MANIFEST_FILE = "manifest.json"


class PendingManifest:
    """A manifest whose checksums are supplied, and computed on device, after the save starts.

    An async save hands this to orbax first, so orbax's copy of the arrays off the
    devices is not queued behind the checksum computation; the background writer
    waits for `set_checksums` and then for the device results.
    """

    def __init__(self, header: dict[str, Any]):
        self.header = header
        self._checksums: list[Any] | None = None
        self._ready = threading.Event()

    def set_checksums(self, checksums: list[Any]) -> None:
        self._checksums = checksums
        self._ready.set()

    def resolve(self, timeout: float = 3600.0) -> dict[str, Any]:
        if not self._ready.wait(timeout):
            raise TimeoutError("checkpoint manifest: checksums were never supplied")
        assert self._checksums is not None, "set_checksums stores them before it signals"
        return {**self.header, "checksums": fetch_checksums(self._checksums)}


class ManifestHandler(ocp.JsonCheckpointHandler):
    def __init__(self, **kwargs):
        super().__init__(filename=MANIFEST_FILE, **kwargs)

    async def _save_fn(self, x, directory):
        if isinstance(x, PendingManifest):
            x = x.resolve()
        await super()._save_fn(x, directory)


@ocp.args.register_with_handler(ManifestHandler, for_save=True)
@dataclasses.dataclass
class ManifestSave(ocp.args.CheckpointArgs):
    item: Any


@ocp.args.register_with_handler(ManifestHandler, for_restore=True)
@dataclasses.dataclass
class ManifestRestore(ocp.args.CheckpointArgs):
    item: Any = None


def _process_file(index: int, count: int) -> str:
    return f"process_{index}-of-{count}.json"


def encode_iterator_state(state: Any) -> Any:  # any JSON-able value
    """`get_state()` results are JSON-able dicts (grain datasets) or bytes (grain loaders)."""
    if isinstance(state, (bytes, bytearray)):
        return {"__bytes__": base64.b64encode(bytes(state)).decode("ascii")}
    return state


def decode_iterator_state(state: Any) -> Any:  # any JSON-able value
    if isinstance(state, dict) and set(state) == {"__bytes__"}:
        return base64.b64decode(state["__bytes__"])
    return state


class IteratorStateHandler(ocp.JsonCheckpointHandler):
    """One JSON file per process holding that process's iterator position."""

    async def _save_fn(self, x, directory):
        name = _process_file(jax.process_index(), jax.process_count())
        (directory / name).write_text(json.dumps(encode_iterator_state(x)))

    def restore(self, directory: epath.Path, item: Any = None, args: Any = None) -> Any:
        own = directory / _process_file(jax.process_index(), jax.process_count())
        if own.exists():
            return decode_iterator_state(json.loads(own.read_text()))
        files = sorted(directory.glob("process_*-of-*.json"))
        if not files:
            raise FileNotFoundError(f"No iterator position files in {directory}.")
        states = [json.loads(f.read_text()) for f in files]
        if all(s == states[0] for s in states):
            return decode_iterator_state(states[0])
        raise IteratorPositionError(
            f"The input iterator's position was saved by {len(files)} processes, each at a different "
            f"position, and this job has {jax.process_count()}; a per-process position cannot be mapped "
            "onto a different process count. Restore with the original number of processes, or restore "
            "without `iterator=` and restart the input pipeline yourself."
        )


class IteratorPositionError(ValueError):
    """Saved per-process iterator positions that do not fit this job's process count."""


@ocp.args.register_with_handler(IteratorStateHandler, for_save=True)
@dataclasses.dataclass
class IteratorSave(ocp.args.CheckpointArgs):
    item: Any


@ocp.args.register_with_handler(IteratorStateHandler, for_restore=True)
@dataclasses.dataclass
class IteratorRestore(ocp.args.CheckpointArgs):
    item: Any = None
