"""The package's shape: strategies through hooks, and a light `import jdist`.

No module outside `jdist/parameter_server/` names the parameter-server strategy's types in code
(prose in docstrings and error messages may name it): the Trainer, its checkpoint I/O and the
checkpoint manager reach it only through the `Strategy` hooks it overrides. `import jdist` loads
neither orbax, tensorstore nor ray: checkpointing and parameter servers load on first use.
"""
from __future__ import annotations

import io
import os
import pathlib
import subprocess
import sys
import tokenize

import jax
import numpy as np

import jdist

PACKAGE = pathlib.Path(jdist.__file__).parent
PS_NAMES = {"ParameterServerStrategy", "is_parameter_server_strategy", "RemoteTrainState", "RemoteParameters",
            "RemoteStepsStrategy", "WorkerStrategy", "parameter_server"}


def _code_names(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, name) of every name token in `path`'s code (strings and comments left out)."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return [(tok.start[0], tok.string) for tok in tokens if tok.type == tokenize.NAME]


REEXPORTS = {pathlib.Path("__init__.py"), pathlib.Path("tf_compat/distribute_namespace.py")}


def test_no_module_outside_the_parameter_server_package_names_its_types():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "parameter_server" or relative in REEXPORTS:
            continue  # the package itself, and the faces that re-export jdist's public names
        offenders += [f"jdist/{relative}:{line}: {name}" for line, name in _code_names(path) if name in PS_NAMES]
    assert not offenders, "Use a Strategy hook instead of naming the parameter-server strategy:\n" + "\n".join(
        offenders)


def test_the_check_sees_a_name_in_code_and_not_in_prose(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('"""Runs under ParameterServerStrategy."""\n# RemoteTrainState\n'
                      'from jdist.parameter_server.strategy import is_parameter_server_strategy\n')
    assert [name for _, name in _code_names(sample) if name in PS_NAMES] == [
        "parameter_server", "is_parameter_server_strategy"]


def test_import_jdist_loads_no_orbax_tensorstore_or_ray():
    probe = ("import sys, jdist, jdist.trainer.trainer\n"
             "heavy = ('orbax', 'orbax.checkpoint', 'tensorstore', 'ray')\n"
             "print(sorted(m for m in heavy if m in sys.modules))\n"
             "jdist.checkpoint.CheckpointManager\n"  # checkpointing still loads on first use
             "print('orbax.checkpoint' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["[]", "True"], out.stdout


def test_public_names_are_sorted_and_resolve():
    assert jdist.__all__ == sorted(jdist.__all__)
    missing = [name for name in jdist.__all__ if not hasattr(jdist, name)]
    assert not missing


class _Handle:
    """Values kept outside this process (as on parameter servers): a pytree without leaves here."""

    def __init__(self, strategy, values):
        self.placed_by, self.values = strategy, values


jax.tree_util.register_pytree_node(_Handle, lambda h: ((), h), lambda h, _: h)


class _ElsewhereStrategy(jdist.OneDeviceStrategy):
    """Keeps `_Handle`s "elsewhere" through the hooks only, recording each call."""

    def __init__(self):
        super().__init__("cpu:0")
        self.calls = []

    def checkpoint_view(self, tree):
        self.calls.append("checkpoint_view")
        return dict(tree.values) if isinstance(tree, _Handle) else tree

    def restore_into(self, target, restored):
        self.calls.append("restore_into")
        if isinstance(target, _Handle):
            target.values = restored
            return target
        return restored


def test_the_checkpoint_manager_saves_and_restores_through_the_owners_hooks(tmp_path):
    from jdist.checkpoint import CheckpointManager

    strategy = _ElsewhereStrategy()
    handle = _Handle(strategy, {"w": np.arange(4, dtype=np.float32)})
    manager = CheckpointManager(tmp_path, async_save=False)
    manager.save(1, handle)  # outside any scope: the handle names the strategy that placed it
    handle.values = {"w": np.zeros(4, np.float32)}
    restored = manager.restore(target=handle)
    manager.close()
    assert restored is handle and strategy.calls == ["checkpoint_view", "checkpoint_view", "restore_into"]
    np.testing.assert_array_equal(np.asarray(handle.values["w"]), np.arange(4, dtype=np.float32))


def test_every_package_folder_is_installed():
    """pyproject's explicit package list names every folder of jdist with an __init__.py: a folder left out
    works in the editable install the README uses and is missing from a wheel."""
    import tomllib

    root = pathlib.Path(jdist.__file__).parent
    folders = {".".join(("jdist",) + p.parent.relative_to(root).parts) for p in root.rglob("__init__.py")}
    listed = set(tomllib.loads((root.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    assert folders <= listed, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(folders - listed)}"
