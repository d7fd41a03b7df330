"""The Colab notebook runs top to bottom on the 8 simulated CPU devices (falling back to MirroredStrategy):
it finds jdist in an uploaded zip of the repository, trains, and displays its curves inline."""
import json
import zipfile
from pathlib import Path

import matplotlib
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "colab_tpu.ipynb"


def _code_cells(path):
    """The notebook's code cells, without shell (`!`) and magic (`%`) lines, which only Colab runs."""
    cells = json.loads(path.read_text())["cells"]
    for cell in cells:
        if cell["cell_type"] == "code":
            lines = [line for line in "".join(cell["source"]).splitlines()
                     if not line.lstrip().startswith(("!", "%"))]
            yield "\n".join(lines)


def _upload_repository_zip(folder):
    """What GitHub's "Download ZIP" gives: the repository under one top-level folder."""
    with zipfile.ZipFile(folder / "jdist-main.zip", "w") as archive:
        for path in [ROOT / "pyproject.toml", *sorted((ROOT / "jdist").rglob("*.py"))]:
            archive.write(path, "jdist-main/" + str(path.relative_to(ROOT)))


def test_notebook_runs_top_to_bottom(tmp_path, monkeypatch):
    previous = matplotlib.get_backend()
    matplotlib.use("svg")  # stands in for the notebook's inline backend, which jdist must not replace
    monkeypatch.setenv("JDIST_NOTEBOOK_EPOCHS", "2")
    monkeypatch.chdir(tmp_path)
    _upload_repository_zip(tmp_path)
    displayed = []
    namespace: dict = {"__name__": "__main__", "display": displayed.append}
    try:
        for index, source in enumerate(_code_cells(NOTEBOOK)):
            exec(compile(source, f"{NOTEBOOK.name}[cell {index}]", "exec"), namespace)
        assert matplotlib.get_backend() == "svg"
    finally:
        matplotlib.use(previous)
    assert namespace["JDIST_ROOT"] == tmp_path / "jdist-main" / "jdist-main"
    assert namespace["on_tpu"] is False and namespace["strategy"].num_replicas_in_sync == 8
    history = namespace["history"].history
    assert len(history["loss"]) == 2 and history["loss"][1] < history["loss"][0]
    assert namespace["accuracy"] > 0.8
    assert (tmp_path / "logs" / "curves.png").stat().st_size > 0
    assert len(namespace["predictions"]) == 8

    (figure,) = displayed
    assert type(figure).__name__ == "Figure"
    panels = {ax.get_title(): ax for ax in figure.axes}
    assert set(panels) == {"loss", "accuracy"}
    for name, ax in panels.items():
        train, val = ax.get_lines()
        np.testing.assert_allclose(train.get_ydata(), history[name])
        np.testing.assert_allclose(val.get_ydata(), history["val_" + name])
