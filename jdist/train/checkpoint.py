"""`jdist.train.Checkpoint`: TF's object checkpoints for Keras models, optimizers and `tf.Variable`s.

    checkpoint = jdist.train.Checkpoint(optimizer=optimizer, model=model, epoch=epoch)
    checkpoint.save(os.path.join(checkpoint_dir, "ckpt"))          # ckpt-1, ckpt-2, ... (ckpt-1.npz on disk)
    new_checkpoint = jdist.train.Checkpoint(optimizer=new_optimizer, model=new_model, epoch=new_epoch)
    new_checkpoint.restore(jdist.train.latest_checkpoint(checkpoint_dir))

Values are named by TF's object paths (`net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE`, `object_graph.py`),
built from attribute names, never from Keras's instance-numbered names (`sequential_1/...`), so a checkpoint
written under a strategy restores into a freshly created model built with or without one; shapes are checked.
As in TF: `Checkpoint`s nest (`tf.train.Checkpoint(net=tf.train.Checkpoint(l1=...))`), attributes set later
are dependencies too, lists and dicts hold variables by index and key, tf.data iterators save their position;
an object attached after `restore` takes its saved value then (delayed restoration), and a Keras object not
yet built (an optimizer before its first step) when it is built; `restore` returns a status whose
`assert_consumed` checks that every saved value was used; `Checkpoint(root)` keys the root's own dependencies
at the top level. `save_counter` is TF's int64 `tf.Variable`: `save` and `restore` save and restore it (a
restarted job numbers its next save on), `write` and `read` leave it out, as TF's; `restore(None)` (no
checkpoint yet) restores nothing. A value restores only into a variable of its shape and dtype (TF's
errors). The directory's `checkpoint` file is TF's text format, so `latest_checkpoint` and `CheckpointManager`
read it as TF's do; the values are one `.npz` per checkpoint (TF writes `.index` and `.data` files). Sharded,
asynchronous checkpoints of whole training states are `jdist.checkpoint.CheckpointManager`.
"""
from __future__ import annotations

import functools
import json
import os
import re
import time
from typing import Any, Callable

import numpy as np

from jdist.errors import InvalidArgumentError, NotFoundError
from jdist.strategy import function_trace
from jdist.train import object_graph

INDEX = "checkpoint"
_SUFFIX = ".npz"
_COUNTER = object_graph.join("save_counter", object_graph.VARIABLE)
_VARIABLE_CLASS: list[Callable[..., Any]] = []  # `tf.Variable`, registered by jdist.tf_compat


def use_variable_class(variable_class: Callable[..., Any]) -> None:
    """Makes `save_counter` a `tf.Variable` of this class (TF's: int64, named `save_counter`)."""
    _VARIABLE_CLASS[:] = [variable_class]


def _new_counter() -> Any:
    if _VARIABLE_CLASS:
        return _VARIABLE_CLASS[0](0, dtype="int64", trainable=False, name="save_counter")
    import keras

    return keras.Variable(0, dtype="int32", trainable=False, name="save_counter")


class CheckpointLoadStatus:
    """What `restore` returns: TF's checks of how the checkpoint and the objects matched.

    `assert_consumed` fails unless every saved value was restored and every object's value was in the checkpoint
    (values restored later, by delayed restoration, count once they are); `assert_existing_objects_matched`
    only needs every object now present to have been restored; `expect_partial` silences nothing (jdist warns
    about no unrestored value) and returns the status."""

    def __init__(self, path: str | None, saved_keys: set[str] | None = None, canonical: dict | None = None):
        self.save_path = path
        self._saved = set(saved_keys or ()) - {object_graph.GRAPH}
        self._canonical = canonical or {}
        self._consumed: set[str] = set()
        self._unmatched: dict[str, Any] = {}  # key -> object with no saved value

    def _restored(self, key: str) -> None:
        self._consumed.add(self._canonical.get(key, key))
        self._unmatched.pop(key, None)

    def assert_consumed(self) -> "CheckpointLoadStatus":
        if self.save_path is None:
            raise AssertionError(_NOTHING)
        unused = sorted(self._saved - self._consumed)
        if unused:
            raise AssertionError(f"Unrestored values in the checkpoint {self.save_path}: {unused}; the objects they "
                                 "belong to are not (yet) attached to the restoring Checkpoint. Attach them, or use "
                                 "assert_existing_objects_matched() / expect_partial() for a partial restore.")
        return self.assert_existing_objects_matched()

    def assert_existing_objects_matched(self) -> "CheckpointLoadStatus":
        if self.save_path is None:
            raise AssertionError(_NOTHING)
        if self._unmatched:
            raise AssertionError(f"Objects with no value in the checkpoint {self.save_path}: {sorted(self._unmatched)}"
                                 "; is the checkpoint from a different model, or were these attributes renamed?")
        return self

    def assert_nontrivial_match(self) -> "CheckpointLoadStatus":
        if self.save_path is None:
            raise AssertionError(_NOTHING)
        if not self._consumed:
            raise AssertionError(f"Nothing was restored from {self.save_path}: no object matched the checkpoint.")
        return self

    def expect_partial(self) -> "CheckpointLoadStatus":
        return self

    def run_restore_ops(self, session: Any = None) -> None:
        """Nothing to run: the values were assigned when `restore` was called."""

    def initialize_or_restore(self, session: Any = None) -> None:
        """Nothing to run: the values were assigned when `restore` was called."""


_NOTHING = "No checkpoint specified (save_path=None); nothing is being restored."  # TF's text


class InitializationOnlyStatus(CheckpointLoadStatus):
    """What `restore(None)` returns (TF's class): every assertion fails, as nothing was restored."""

    def __init__(self) -> None:
        super().__init__(None)


class ListWrapper(list):
    """A list attached to a `Checkpoint` (TF's `ListWrapper`): an item appended after `restore` gets its value."""

    def __init__(self, items: Any = (), owner: Any = None, path: str = ""):
        super().__init__(items)
        self._owner, self._path = owner, path

    def append(self, item: Any) -> None:
        super().append(item)
        if self._owner is not None:
            self._owner._restore_late(object_graph.join(self._path, str(len(self) - 1)), item)

    def __repr__(self) -> str:
        return f"ListWrapper({list(self)!r})"


class DictWrapper(dict):
    """A dict attached to a `Checkpoint`: a value set after `restore` gets its value (TF's `_DictWrapper`)."""

    def __init__(self, items: Any = (), owner: Any = None, path: str = ""):
        super().__init__(items)
        self._owner, self._path = owner, path

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        if self._owner is not None:
            self._owner._restore_late(object_graph.join(self._path, object_graph.escape(str(key))), value)


class Checkpoint(object_graph.Trackable):
    """Saves and restores the variables (and iterator positions) of the objects it is given, by TF's paths."""

    _deps: dict[str, Any]
    _pending: dict[str, Any]  # saved values not yet assigned, for objects attached later (keys relative here)
    _status: "CheckpointLoadStatus | None"
    _base: str  # this object's path from the restoring root
    _root: Any  # `Checkpoint(root)`: the object whose dependencies are the checkpoint's top level
    _counter: Any

    def __init__(self, root: Any = None, **objects: Any):
        object.__setattr__(self, "_deps", {})
        object.__setattr__(self, "_pending", {})
        object.__setattr__(self, "_status", None)
        object.__setattr__(self, "_base", "")
        object.__setattr__(self, "_counter", None)
        object.__setattr__(self, "_root", None)
        if root is not None:  # TF's: the root's own dependencies are the top-level keys (`w/.ATTRIBUTES/...`)
            object_graph.check_trackable(root, "root")
            object.__setattr__(self, "_root", root)
        for name, obj in objects.items():
            setattr(self, name, obj)

    @property
    def root(self) -> Any:
        """The object given as `root`, else the checkpoint itself (TF's)."""
        return self if self._root is None else self._root

    @property
    def save_counter(self) -> Any:
        """TF's int64 `tf.Variable` counting `save` calls (restored with the checkpoint)."""
        if self._counter is None:
            object.__setattr__(self, "_counter", _new_counter())
        return self._counter

    def _count(self) -> int:
        return 0 if self._counter is None else int(np.asarray(self._counter.value))

    def _set_count(self, count: int) -> None:
        self.save_counter.assign(count)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
            return
        if name in ("save_counter", "root"):
            raise AttributeError(f"Checkpoint.{name} is TF's own attribute; attach the object under another name.")
        object_graph.check_trackable(value, name)
        if isinstance(value, list) and not isinstance(value, ListWrapper):
            value = ListWrapper(value, self, name)
        elif isinstance(value, dict) and not isinstance(value, DictWrapper):
            value = DictWrapper(value, self, name)
        self._deps[name] = value
        object.__setattr__(self, name, value)
        self._restore_late(name, value)

    def _dependencies(self) -> dict[str, Any]:
        deps = {} if self._root is None else dict(object_graph.children(self._root))
        deps.update(self._deps)
        return deps

    def _restore_late(self, path: str, value: Any) -> None:
        """Delayed restoration: an object attached after `restore` takes the value saved at its path."""
        if self._pending:
            sub = object_graph.subtree(self._pending, path)
            if sub:
                _apply(value, sub, self._status, object_graph.join(self._base, path))

    def _arrays(self) -> dict[str, Any]:
        arrays: dict[str, Any] = {}
        aliases: dict[str, str] = {}
        for path, obj in object_graph.walk(self, aliases):
            if object_graph.is_iterator(obj):
                arrays[object_graph.leaf_key(path, obj)] = np.asarray(json.dumps(obj.get_state()))
            elif object_graph.is_variable(obj):
                arrays[object_graph.leaf_key(path, obj)] = _declared(np.asarray(obj.value), obj.dtype)
        if self._counter is not None:  # TF's: saved once it exists (`save`, `restore`, a read of `save_counter`)
            arrays[_COUNTER] = np.asarray(self._count(), np.int64)
        arrays[object_graph.GRAPH] = np.asarray(json.dumps({"keys": sorted(arrays), "aliases": aliases,
                                                            "escaped": True}))  # names escaped as TF's
        return arrays

    def write(self, file_prefix: str, options: Any = None) -> str:
        """Writes the checkpoint at exactly `file_prefix` (no number, no `checkpoint` file): TF's `write`."""
        arrays = self._arrays()
        file_prefix = os.fspath(file_prefix)
        os.makedirs(os.path.dirname(file_prefix) or ".", exist_ok=True)
        partial = f"{file_prefix}.partial-{os.getpid()}{_SUFFIX}"
        # numpy's stub matches **arrays against `allow_pickle`; the keys are TF's paths.
        np.savez(partial, **arrays)  # pyright: ignore[reportArgumentType]
        os.replace(partial, file_prefix + _SUFFIX)  # a process killed mid-save leaves no half checkpoint
        return file_prefix

    def save(self, file_prefix: str, options: Any = None) -> str:
        """Writes `{file_prefix}-{n}` for the n-th save and names it in the directory's `checkpoint` file."""
        self._set_count(self._count() + 1)
        path = self.write(f"{os.fspath(file_prefix)}-{self._count()}")
        write_index(os.path.dirname(path) or ".", path, [path], [time.time()])
        return path

    def restore(self, save_path: str | None, options: Any = None) -> CheckpointLoadStatus:
        """Assigns the saved values and the save counter; `None` (what `latest_checkpoint` gives before the
        first save) restores nothing, as in TF, where `restore(None)` initializes."""
        return self._load(save_path, with_counter=True)

    def read(self, save_path: str | None, options: Any = None) -> CheckpointLoadStatus:
        """`restore` for what `write` wrote: the save counter is neither restored nor expected (TF's)."""
        return self._load(save_path, with_counter=False)

    def _load(self, save_path: str | None, with_counter: bool) -> CheckpointLoadStatus:
        if save_path is None:
            return InitializationOnlyStatus()
        save_path = os.fspath(save_path)
        saved = read_arrays(save_path)
        graph = json.loads(str(saved[object_graph.GRAPH]))
        if not graph.get("escaped"):  # written before names were escaped (object_graph.escape)
            object_graph.rekey_unescaped(self, saved)
        keys = set(saved)
        canonical = object_graph.expand_aliases(saved, graph["aliases"])
        status = CheckpointLoadStatus(save_path, keys, canonical)
        counter = saved.get(_COUNTER)
        if with_counter and counter is not None:
            self._set_count(int(counter))
            status._restored(_COUNTER)
        elif with_counter:  # a checkpoint from `write`: TF counts the counter as an object with no value
            status._unmatched[_COUNTER] = self.save_counter
        root = self._root
        if root is not None and not getattr(root, "built", True) and hasattr(root, "build"):
            _defer(root, saved, status, "")  # a Keras model given as the root, built later
        _apply(self, saved, status, "")
        return status


def read_arrays(save_path: str) -> dict[str, np.ndarray]:
    if not os.path.exists(save_path + _SUFFIX):  # TF's class: tf.errors.NotFoundError (also a FileNotFoundError)
        raise NotFoundError(None, None, f"Checkpoint.restore: no checkpoint at {save_path!r} (expected the file "
                                        f"{save_path + _SUFFIX}); pass a prefix that save() or latest_checkpoint() "
                                        "gave, with its number ('path/to/ckpt-1').")
    with np.load(save_path + _SUFFIX) as data:
        saved = {key: data[key] for key in data.files}
    if object_graph.GRAPH not in saved:
        raise ValueError(f"{save_path + _SUFFIX} is a checkpoint from an older jdist (values by position, not by "
                         "TF's object paths); save it again with this version.")
    return saved


def _apply(root: Any, saved: dict[str, Any], status: CheckpointLoadStatus | None, base: str) -> None:
    """Assigns `saved` (keys relative to `root`) to what `root` reaches; records pending values on Checkpoints and
    defers unbuilt Keras objects until they are built."""
    for path, obj in object_graph.walk(root):
        full = object_graph.join(base, path)
        if isinstance(obj, Checkpoint):
            object.__setattr__(obj, "_pending", object_graph.subtree(saved, path) if path else dict(saved))
            object.__setattr__(obj, "_status", status)
            object.__setattr__(obj, "_base", full)
            continue
        if not getattr(obj, "built", True) and hasattr(obj, "build") and not (
                object_graph.is_variable(obj) or object_graph.is_iterator(obj)):
            sub = object_graph.subtree(saved, path) if path else dict(saved)
            if sub:
                _defer(obj, sub, status, full)
            continue
        if not (object_graph.is_variable(obj) or object_graph.is_iterator(obj)):
            continue
        key = object_graph.leaf_key(path, obj)
        full_key = object_graph.leaf_key(full, obj)
        if key not in saved:
            if status is not None:
                status._unmatched[full_key] = obj
            continue
        value = saved[key]
        if object_graph.is_iterator(obj):
            obj.set_state(json.loads(str(value)))
        else:
            if tuple(obj.shape) != np.shape(value):
                raise ValueError(f"Checkpoint.restore: {full_key} has shape {tuple(obj.shape)}, the checkpoint "
                                 f"{np.shape(value)}; is it from a different model?")
            _check_dtype(full_key, obj.dtype, np.asarray(value).dtype)
            # a layer built inside a traced tf.function restores after the trace, not into its program
            function_trace.after_trace(functools.partial(_assign_outside_scopes, obj, value))
        if status is not None:
            status._restored(full_key)


def _assign_outside_scopes(variable: Any, value: Any) -> None:
    """`variable.assign(value)` for good, also within a Keras `StatelessScope`, which keeps assignments only for
    the scope (a model that `strategy.run` builds from its first inputs is built in one): a variable made there
    starts from `value` when the scope ends, one made before takes it now."""
    if getattr(variable, "_value", True) is None and hasattr(variable, "_initializer"):
        variable._initializer = lambda shape, dtype=None: value  # Keras initializes it as the scope ends
        return
    from keras.src.backend.common import global_state

    scope = global_state.get_global_attribute("stateless_scope")
    global_state.set_global_attribute("stateless_scope", None)
    try:
        variable.assign(value)
    finally:
        global_state.set_global_attribute("stateless_scope", scope)


def _declared(value: np.ndarray, dtype: Any) -> np.ndarray:
    """A 64-bit variable's value in its declared dtype (JAX holds it in 32 bits unless `jax_enable_x64`)."""
    declared = str(dtype)
    if declared in ("int64", "uint64", "float64") and value.dtype.name != declared:
        return value.astype(declared)
    return value


def _check_dtype(key: str, declared: Any, saved: np.dtype) -> None:
    """TF's refusal of a value saved with another dtype (observed, TF 2.21: int64 into int32, int32 into int64,
    float32 into float64 are all InvalidArgumentError)."""
    declared = str(declared)
    if declared != saved.name and saved.kind in "biuf":
        raise InvalidArgumentError(None, None, f"tensor_name = {key}; expected dtype {declared} does not equal "
                                               f"original dtype {saved.name}: the variable restoring it must have the "
                                               "dtype it was saved with.")


def _defer(obj: Any, saved: dict[str, Any], status: CheckpointLoadStatus | None, base: str) -> None:
    build = obj.build

    @functools.wraps(build)  # Keras passes the input shape by the signature it reads from build
    def build_then_restore(*args: Any, **kwargs: Any) -> Any:
        del obj.build
        out = build(*args, **kwargs)
        _apply(obj, saved, status, base)
        return out

    obj.build = build_then_restore


def exists(prefix: str) -> bool:
    """Whether a checkpoint was written at `prefix`."""
    return os.path.exists(prefix + _SUFFIX)


def remove(prefix: str) -> None:
    """Deletes the checkpoint at `prefix` (what `CheckpointManager` does beyond `max_to_keep`)."""
    if exists(prefix):
        os.remove(prefix + _SUFFIX)


def write_index(directory: str, latest: str, paths: list[str], timestamps: list[float],
                last_preserved: float | None = None) -> None:
    """The directory's `checkpoint` file in TF's text format (paths inside `directory` written relative)."""
    def shown(path: str) -> str:
        relative = os.path.relpath(path, directory)
        return path if relative.startswith("..") else relative

    lines = [f'model_checkpoint_path: "{shown(latest)}"']
    lines += [f'all_model_checkpoint_paths: "{shown(p)}"' for p in paths]
    lines += [f"all_model_checkpoint_timestamps: {t!r}" for t in timestamps]
    if last_preserved is not None:
        lines.append(f"last_preserved_timestamp: {last_preserved!r}")
    partial = os.path.join(directory, f"{INDEX}.partial-{os.getpid()}")
    with open(partial, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(partial, os.path.join(directory, INDEX))


def read_index(directory: str) -> dict[str, Any] | None:
    """The `checkpoint` file of `directory` as a dict (`latest`, `paths`, `timestamps`, `last_preserved`), or
    None if there is none. Paths come back joined to `directory`, as TF's `get_checkpoint_state` gives them."""
    index = os.path.join(directory, INDEX)
    if not os.path.isfile(index):
        return None
    with open(index) as f:
        text = f.read()
    if text.lstrip().startswith("{"):  # the JSON index jdist wrote before it wrote TF's format
        return {"latest": os.path.join(directory, json.loads(text)["latest"]), "paths": [], "timestamps": [],
                "last_preserved": None}
    fields: dict[str, list[str]] = {}
    for key, value in re.findall(r'^(\w+):\s*(.+?)\s*$', text, flags=re.MULTILINE):
        fields.setdefault(key, []).append(value[1:-1] if value.startswith('"') else value)
    if "model_checkpoint_path" not in fields:
        return None
    return {"latest": os.path.join(directory, fields["model_checkpoint_path"][-1]),
            "paths": [os.path.join(directory, p) for p in fields.get("all_model_checkpoint_paths", [])],
            "timestamps": [float(t) for t in fields.get("all_model_checkpoint_timestamps", [])],
            "last_preserved": float(fields["last_preserved_timestamp"][-1])
            if "last_preserved_timestamp" in fields else None}


def latest_checkpoint(checkpoint_dir: str) -> str | None:
    """The prefix of the newest checkpoint saved to `checkpoint_dir` (`.../ckpt-3`), or None when there is none
    (no directory, no `checkpoint` file, or its newest checkpoint's file is gone), as TF's."""
    state = read_index(os.fspath(checkpoint_dir))
    if state is None or not exists(state["latest"]):
        return None
    return state["latest"]


class _ObjectRoot(Checkpoint):
    """A checkpoint whose root is one object (tf_keras's `model.save_weights(prefix)`: keys `l1/kernel/...`)."""

    _object: Any

    def __init__(self, obj: Any):
        super().__init__()
        object.__setattr__(self, "_object", obj)

    def _dependencies(self) -> dict[str, Any]:
        return dict(object_graph.children(self._object))


def write_object(obj: Any, file_prefix: str) -> str:
    """Writes `obj`'s variables at `file_prefix` with `obj` as the root of the paths."""
    return _ObjectRoot(obj).write(file_prefix)


def restore_object(obj: Any, file_prefix: str) -> CheckpointLoadStatus:
    """Restores what `write_object` wrote into `obj` (deferred until built, if it is not)."""
    root = _ObjectRoot(obj)
    if not getattr(obj, "built", True) and hasattr(obj, "build"):
        saved = read_arrays(os.fspath(file_prefix))
        status = CheckpointLoadStatus(os.fspath(file_prefix), set(saved))
        _defer(obj, saved, status, "")
        return status
    return root.read(file_prefix)
