"""`CheckpointManager`: the whole training state to disk and back, onto any strategy.

A thin layer over `orbax.checkpoint.CheckpointManager`. Each checkpoint holds
three items: `state` (the arrays, written by every process, replicated values
once), `manifest` (paths, shapes, dtypes, checksums and user metadata) and,
when given, `iterator` (each process's input position). Orbax writes into a
temporary directory and renames it once complete, so a crash mid-save leaves
no visible checkpoint.

    manager = jdist.checkpoint.CheckpointManager("/ckpt", max_to_keep=3)
    for step in range(start, steps):
        state = train_step(state, next(it))
        manager.save(step + 1, state, iterator=it)     # async: returns while writing
    manager.wait_until_finished()

    with new_strategy.scope():                          # any mesh, any device count
        state = manager.restore(target=abstract_state, iterator=it)
"""
from __future__ import annotations

import itertools
import json
import logging
import os
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, Protocol, Sequence

import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath
from orbax.checkpoint import multihost as ocp_multihost

from jdist.checkpoint import integrity, tree
from jdist.checkpoint.handlers import (
    IteratorPositionError,
    IteratorRestore,
    IteratorSave,
    IteratorStateHandler,
    ManifestHandler,
    ManifestSave,
    PendingManifest,
    encode_iterator_state,
)
from jdist.checkpoint.integrity import CheckpointCorruptedError, CheckpointError, CheckpointMismatchError
from jdist.checkpoint.restore_plan import abstract_leaf, agree_across_processes, target_shardings
from jdist.checkpoint.tree import LeafSpec
from jdist.strategy import context
from jdist.typing import PyTree

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy

logger = logging.getLogger("jdist.checkpoint")

FORMAT_VERSION = 1
CORRUPTED_PREFIX = "corrupted-step-"


def _keeper(tree: Any, strategy: Strategy | None) -> Strategy:
    """The strategy whose hooks save and restore `tree` (`checkpoint_view`, `restore_into`): the
    one given, else the one that placed values kept outside this process, else the current one."""
    return strategy or getattr(tree, "placed_by", None) or context.get_strategy()


class IteratorWithState(Protocol):
    """An input iterator whose position a checkpoint keeps (grain's, a distributed dataset's iterator)."""

    def get_state(self) -> Any: ...  # any JSON-able value

    def set_state(self, state: Any, /) -> None: ...  # what get_state returned


class Restored(NamedTuple):
    """What `CheckpointManager.restore_with_info` returns."""

    state: PyTree
    step: int
    metadata: dict[str, Any]


class CheckpointManager:
    """Saves and restores training state (TF's `tf.train.CheckpointManager`, on orbax).

    Args:
      directory: where checkpoints live, one subdirectory per step; shared by all processes.
      save_interval_steps: `save(step, ...)` writes only when `step` is a multiple of this
        (or `force=True`, or the platform signalled preemption).
      max_to_keep: keep at most this many checkpoints (None keeps all).
      best_fn: `metrics -> float`; with it, `max_to_keep` keeps the best checkpoints
        by `save(..., metrics=...)` instead of the newest.
      best_mode: "max" or "min" for `best_fn`.
      keep_checkpoints_without_metrics: whether checkpoints saved without metrics are kept.
      async_save: return from `save` once the arrays are copied off the accelerator and
        write in the background (orbax's async checkpointing).
      checksums: record a checksum of every leaf and verify it on restore.
      quarantine_corrupted: when a restore falls back past a corrupted checkpoint, rename
        it to `corrupted-step-<N>` so later saves and restores skip it (data is kept).
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        *,
        save_interval_steps: int = 1,
        max_to_keep: int | None = None,
        best_fn: Callable[[Mapping[str, Any]], float] | None = None,
        best_mode: str = "max",
        keep_checkpoints_without_metrics: bool = True,
        async_save: bool = True,
        checksums: bool = True,
        quarantine_corrupted: bool = True,
    ):
        if best_mode not in ("max", "min"):
            raise ValueError(f"best_mode must be 'max' or 'min', got {best_mode!r}.")
        if save_interval_steps < 1:
            raise ValueError(f"save_interval_steps must be >= 1, got {save_interval_steps}.")
        if max_to_keep is not None and max_to_keep < 1:
            raise ValueError(f"max_to_keep must be >= 1 or None, got {max_to_keep}.")
        self._directory = epath.Path(os.fspath(directory)).absolute()
        self._checksums = checksums
        self._quarantine = quarantine_corrupted
        self._async = async_save
        options = ocp.CheckpointManagerOptions(
            save_interval_steps=save_interval_steps,
            max_to_keep=max_to_keep,
            best_fn=best_fn,
            best_mode=best_mode,
            keep_checkpoints_without_metrics=keep_checkpoints_without_metrics,
            enable_async_checkpointing=async_save,
            cleanup_tmp_directories=True,
            create=True,
        )
        handlers = {
            "state": ocp.StandardCheckpointHandler(),
            "manifest": ManifestHandler(),
            "iterator": IteratorStateHandler(),
        }
        _settle_previous_manager(self._directory)
        self._manager = ocp.CheckpointManager(self._directory, options=options, item_handlers=handlers)
        _OPEN[str(self._directory)] = self

    # ----------------------------------------------------------------- queries
    @property
    def directory(self) -> epath.Path:
        return self._directory

    def all_steps(self) -> list[int]:
        return sorted(self._manager.all_steps())

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def best_step(self) -> int | None:
        return self._manager.best_step()

    def should_save(self, step: int) -> bool:
        return self._manager.should_save(step)

    def reached_preemption(self, step: int) -> bool:
        """True on every process at the step all agreed to save at after a preemption notice."""
        return self._manager.reached_preemption(step)

    def is_saving_in_progress(self) -> bool:
        return self._manager.is_saving_in_progress()

    def wait_until_finished(self) -> None:
        """Blocks until pending async saves are on disk (and raises their errors, if any)."""
        self._manager.wait_until_finished()
        self._manager.check_for_errors()

    def metadata(self, step: int) -> dict[str, Any]:  # the JSON-able values saved
        """The `metadata=` dict saved with `step`."""
        return dict(self._read_manifest(step).get("metadata", {}))

    # -------------------------------------------------------------------- save
    def save(
        self,
        step: int,
        state: PyTree,
        *,
        iterator: IteratorWithState | None = None,
        metrics: Mapping[str, float] | None = None,
        metadata: Mapping[str, Any] | None = None,  # any JSON-able values
        force: bool = False,
    ) -> bool:
        """Saves `state` (any pytree of arrays, keys, numpy values) as `step`; every process calls it.

        Returns whether a checkpoint was started (False when `step` is off the save
        interval or not newer than the latest). `iterator` is any object with
        `get_state()` (its JSON-able position is saved); `metrics` feed `best_fn`;
        `metadata` is a JSON-able dict saved alongside (e.g. the epoch).
        """
        step = int(step)
        if not force and not self._manager.should_save(step):
            return False
        state = _keeper(state, None).checkpoint_view(state)  # a host copy of values kept elsewhere
        paths, leaves, _ = tree.flatten(state)
        specs = [tree.leaf_spec(leaf, path) for path, leaf in zip(paths, leaves)]
        stored = [tree.to_storable(leaf, spec.kind) for leaf, spec in zip(leaves, specs)]
        header = {
            "format": FORMAT_VERSION,
            "step": step,
            "leaves": [s.to_json() for s in specs],
            "metadata": _json_copy(dict(metadata or {}), "metadata"),
            "has_iterator": iterator is not None,
            "num_processes": jax.process_count(),
            "time": time.time(),
        }
        manifest = PendingManifest(header)
        items: dict[str, Any] = {
            "state": ocp.args.StandardSave(tree.nest(paths, stored)),
            "manifest": ManifestSave(manifest),
        }
        if iterator is not None:
            items["iterator"] = IteratorSave(_json_copy(encode_iterator_state(_get_state(iterator)), "iterator state"))

        def checksums() -> list[Any]:
            return integrity.checksums_of(stored, [s.kind for s in specs]) if self._checksums else [None] * len(specs)

        if not self._async:  # a synchronous save writes the manifest before returning
            manifest.set_checksums(checksums())
            return self._manager.save(step, args=ocp.args.Composite(**items), metrics=metrics, force=force)
        try:
            saved = self._manager.save(step, args=ocp.args.Composite(**items), metrics=metrics, force=force)
        except BaseException:
            manifest.set_checksums([None] * len(specs))
            raise
        # Dispatched after orbax has copied the arrays off the devices, so the save does not wait
        # for it; it is enqueued before any later (donating) step, so it reads the saved values.
        try:
            manifest.set_checksums(checksums() if saved else [None] * len(specs))
        except BaseException:
            manifest.set_checksums([None] * len(specs))
            raise
        return saved

    # ----------------------------------------------------------------- restore
    def restore(
        self,
        step: int | None = None,
        target: PyTree = None,
        *,
        iterator: IteratorWithState | None = None,
        strategy: Strategy | None = None,
    ) -> PyTree:
        """Restores a checkpoint into the structure of `target`, laid out by the current strategy.

        `target` is a state of the same model (concrete arrays or `jax.ShapeDtypeStruct`s):
        its leaves give shapes and dtypes, and `strategy.parameter_shardings(target)` of
        `strategy` (default: the current `jdist.get_strategy()`) gives each leaf's sharding,
        so every device reads only its own shard. Outside any strategy scope, concrete
        target arrays keep their own shardings (as TF restores into existing variables).

        `step=None` takes the newest intact checkpoint: damaged ones are reported (logged
        warning naming the step and the problem) and skipped. An explicit `step` that is
        damaged raises `CheckpointCorruptedError`. A checkpoint whose leaves differ from
        `target` raises `CheckpointMismatchError` naming them. `iterator.set_state()` is
        called with the saved position once everything else checked out.
        """
        return self.restore_with_info(step, target, iterator=iterator, strategy=strategy).state

    def restore_with_info(
        self,
        step: int | None = None,
        target: PyTree = None,
        *,
        iterator: IteratorWithState | None = None,
        strategy: Strategy | None = None,
    ) -> Restored:
        """`restore`, also returning which step was restored and its saved metadata."""
        if target is None:
            raise ValueError(
                "restore() needs `target=`: a state of the same model (arrays or jax.ShapeDtypeStruct, "
                "e.g. from jax.eval_shape) that gives the structure, shapes and dtypes to restore into."
            )
        keeper = _keeper(target, strategy)
        view = keeper.checkpoint_view(target)
        if view is not target:  # kept outside this process: restored on the host, then pushed back
            restored = self.restore_with_info(step, view, iterator=iterator, strategy=strategy)
            return restored._replace(state=keeper.restore_into(target, restored.state))
        self.wait_until_finished()
        self._manager.reload()
        steps = self.all_steps()
        if step is not None:
            if int(step) not in steps:
                raise FileNotFoundError(
                    f"No checkpoint for step {step} in {self._directory}; available steps: {steps}."
                )
            return self._restore_step(int(step), target, iterator, strategy)
        if not steps:
            raise FileNotFoundError(f"No checkpoint found in {self._directory}.")
        problems = []
        for candidate in reversed(steps):
            try:
                restored = self._restore_step(candidate, target, iterator, strategy)
            except CheckpointCorruptedError as e:
                logger.warning("Skipping checkpoint step %d in %s: %s", candidate, self._directory, e.problem)
                problems.append(f"step {candidate}: {e.problem}")
                continue
            self._quarantine_newer_than(candidate, steps)
            return restored
        raise CheckpointCorruptedError(
            None, f"no intact checkpoint in {self._directory}:\n  " + "\n  ".join(problems)
        )

    def _restore_step(self, step: int, target: Any, iterator: Any, strategy: Strategy | None) -> Restored:
        problem = None
        try:
            restored = self._try_restore_step(step, target, iterator, strategy)
        except CheckpointCorruptedError as e:
            problem, restored = e.problem, None
        problem = agree_across_processes(problem)
        if problem is not None:
            raise CheckpointCorruptedError(step, problem)
        assert restored is not None, "a local failure is a problem every process agrees on"
        return restored

    def _try_restore_step(self, step: int, target: Any, iterator: Any, strategy: Strategy | None) -> Restored:
        manifest = self._read_manifest(step)
        saved = [LeafSpec.from_json(d) for d in manifest["leaves"]]
        paths, target_leaves, treedef = tree.flatten(target)
        expected = [tree.leaf_spec(leaf, path) for path, leaf in zip(paths, target_leaves)]
        mismatch = integrity.target_problems(saved, expected)
        if mismatch:
            raise integrity.mismatch_error(step, self._directory, mismatch)
        if iterator is not None and not manifest.get("has_iterator"):
            raise CheckpointMismatchError(
                f"Checkpoint step {step} in {self._directory} holds no input iterator position, but "
                "`iterator=` was passed; restore without `iterator=` or save with it."
            )
        saved_by_path = {s.path: s for s in saved}
        ordered = [saved_by_path[p] for p in paths]
        self._check_stored_arrays(step, ordered)

        shardings = target_shardings(target, target_leaves, treedef, strategy)
        abstract = [abstract_leaf(spec, leaf, sharding)
                    for spec, leaf, sharding in zip(expected, target_leaves, shardings)]
        items: dict[str, ocp.args.CheckpointArgs] = {"state": ocp.args.StandardRestore(tree.nest(paths, abstract))}
        if iterator is not None:
            items["iterator"] = IteratorRestore()
        try:
            out = self._manager.restore(step, args=ocp.args.Composite(**items))
        except IteratorPositionError:
            raise
        except Exception as e:  # orbax/tensorstore raise many types for unreadable data
            raise CheckpointCorruptedError(step, f"reading the arrays failed: {_first_line(e)}") from e
        values = tree.unnest(out["state"], paths)

        if self._checksums and "checksums" in manifest:
            saved_sums = {s.path: c for s, c in zip(saved, manifest["checksums"])}
            want = [saved_sums[p] for p in paths]
            as_saved = [v if have.dtype == want.dtype else np.asarray(v).astype(have.dtype)
                        for v, have, want in zip(values, ordered, expected)]
            got = integrity.fetch_checksums(integrity.checksums_of(as_saved, [s.kind for s in expected]))
            bad = integrity.checksum_problems(ordered, want, got)
            if bad:
                raise CheckpointCorruptedError(
                    step, "restored values differ from what was saved: " + "; ".join(bad[:5]))

        leaves = [tree.from_stored(v, spec, leaf) for v, spec, leaf in zip(values, expected, target_leaves)]
        if iterator is not None:
            _set_state(iterator, out["iterator"])
        return Restored(jax.tree_util.tree_unflatten(treedef, leaves), step, dict(manifest.get("metadata", {})))

    def _read_manifest(self, step: int) -> dict[str, Any]:
        path = self._directory / str(step) / "manifest" / "manifest.json"
        try:
            manifest = json.loads(path.read_text())
            manifest["leaves"]  # noqa: B018  (must exist)
        except FileNotFoundError:
            raise CheckpointCorruptedError(step, f"its manifest {path} is missing") from None
        except (ValueError, KeyError, TypeError) as e:
            raise CheckpointCorruptedError(step, f"its manifest {path} is unreadable ({e})") from None
        if manifest.get("format", 0) > FORMAT_VERSION:
            raise CheckpointError(
                f"Checkpoint step {step} was written by a newer jdist (format {manifest['format']}); upgrade jdist."
            )
        return manifest

    def _check_stored_arrays(self, step: int, specs: Sequence[LeafSpec]) -> None:
        try:
            stored = self._manager.item_metadata(step)["state"]
            stored_tree = getattr(stored, "tree", stored)
        except Exception as e:
            raise CheckpointCorruptedError(step, f"its array metadata is unreadable: {_first_line(e)}") from e
        if stored_tree is None:
            raise CheckpointCorruptedError(step, "its array metadata is missing")
        problems = integrity.stored_problems(specs, stored_tree)
        if problems:
            raise CheckpointCorruptedError(
                step, "the stored arrays disagree with the manifest written with them: " + "; ".join(problems[:5])
            )

    def _quarantine_newer_than(self, step: int, steps: Sequence[int]) -> None:
        newer = [s for s in steps if s > step]
        if not newer or not self._quarantine:
            return
        if jax.process_index() == 0:
            for s in newer:
                src = self._directory / str(s)
                dst = self._directory / f"{CORRUPTED_PREFIX}{s}-{int(time.time())}"
                if src.exists():
                    src.rename(dst)
                    logger.warning("Moved corrupted checkpoint step %d aside to %s.", s, dst)
        barrier("checkpoint_quarantine")
        self._manager.reload()

    # ------------------------------------------------------------------ admin
    def delete(self, step: int) -> None:
        self._manager.delete(step)

    def close(self) -> None:
        """Waits for pending saves and releases orbax's resources."""
        self._manager.wait_until_finished()
        self._manager.close()
        if _OPEN.get(str(self._directory)) is self:
            del _OPEN[str(self._directory)]

    def __enter__(self) -> "CheckpointManager":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"CheckpointManager({str(self._directory)!r}, steps={self.all_steps()})"


# ---------------------------------------------------------------------- helpers
# The newest manager of each directory in this process. A new manager starts by
# removing unfinished (temporary) checkpoints, so it first lets an older manager's
# background write land: e.g. when a run that failed is retried in the same process.
_OPEN: dict[str, CheckpointManager] = {}


_BARRIERS = itertools.count()


def barrier(name: str) -> None:
    """Waits for every process (barrier names must be unique; all processes count alike)."""
    if jax.process_count() > 1:
        ocp_multihost.sync_global_processes(f"jdist_{name}_{next(_BARRIERS)}")


def _settle_previous_manager(directory: epath.Path) -> None:
    previous = _OPEN.pop(str(directory), None)
    if previous is None:
        return
    try:
        previous._manager.wait_until_finished()
    except Exception as e:  # its failure is its caller's to see; this manager starts afresh
        logger.warning("An earlier checkpoint save in %s failed: %s", directory, _first_line(e))


def _json_copy(value: Any, what: str) -> Any:
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as e:
        raise TypeError(f"The {what} must be JSON-serializable (dicts, lists, str, numbers): {e}") from None


def _get_state(iterator: Any) -> Any:
    if not hasattr(iterator, "get_state"):
        raise TypeError(
            f"iterator= must have get_state()/set_state() to checkpoint its position; "
            f"{type(iterator).__name__} has no get_state()."
        )
    return iterator.get_state()


def _set_state(iterator: Any, state: Any) -> None:
    if not hasattr(iterator, "set_state"):
        raise TypeError(f"iterator= must have set_state(); {type(iterator).__name__} has none.")
    iterator.set_state(state)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:500]
