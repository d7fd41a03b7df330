"""jdist's modules import each other without cycles, but for the strategy runtime's own.

The graph is read from the source (scripts/import_graph.py): top-level and
function-level imports both count, so a lazy import cannot hide a loop.
"""
import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "import_graph.py"


def _script():
    spec = importlib.util.spec_from_file_location("import_graph", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_cycle_but_the_strategy_runtime():
    graph = _script()
    edges = graph.graph()
    bad = graph.unexpected(edges)
    assert bad == [], "\n".join(
        f"{c}: " + ", ".join(f"{a} -> {b} ({line})" for a in c for b, line in edges[a].items() if b in c)
        for c in bad)
    # The allowed edge is real and closes the runtime's cycle, the only one (so the check looks at the right graph).
    assert graph.cycles(edges) == [sorted(graph.RUNTIME)]
    # The steps sit above the strategy: only the package's face imports them.
    assert sorted(m for m, out in edges.items() if "jdist.training.steps" in out) == ["jdist"]


def test_the_graph_sees_function_level_imports_and_skips_type_checking_ones(tmp_path):
    graph = _script()
    package = tmp_path / "jdist"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from jdist import b\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from jdist.c import C\n"
                                  "from . import a\n")
    (package / "c.py").write_text("import jdist.b\n")
    edges = graph.graph(tmp_path)
    assert edges["jdist.a"] == {"jdist.b": 2}
    assert edges["jdist.b"] == {"jdist.a": 4}
    assert edges["jdist.c"] == {"jdist.b": 1}
    assert graph.cycles(edges) == [["jdist.a", "jdist.b"]]


def test_folders_import_only_lower_layers_and_no_private_names():
    graph = _script()
    edges = graph.graph()
    assert graph.layer_violations(edges) == []
    assert graph.private_imports() == []
    folders = graph.folder_edges(edges)
    # The runtime imports no layer above it: the Keras, input and diagnostics parts are registered.
    assert not [b for (a, b) in folders if a == "strategy" and graph.layer_of(b) > graph.layer_of("strategy")]
    assert ("interop", "strategy") in folders and ("input", "strategy") in folders  # the registrations


def test_the_folder_check_finds_a_back_edge_and_a_private_import(tmp_path):
    graph = _script()
    package = tmp_path / "jdist"
    (package / "strategy").mkdir(parents=True)
    (package / "input").mkdir()
    for folder in ("", "strategy", "input"):
        (package / folder / "__init__.py").write_text("")
    (package / "strategy" / "base.py").write_text("def f():\n    from jdist.input import dataset\n")
    (package / "input" / "dataset.py").write_text("from jdist.strategy.base import _hidden\n")
    edges = graph.graph(tmp_path)
    (problem,) = graph.layer_violations(edges)
    assert problem.startswith("strategy (layer 2) -> input (layer 3)")
    assert graph.private_imports(tmp_path) == ["jdist.input.dataset (1): from jdist.strategy.base import _hidden"]


def test_the_strategy_extensions_are_registered_by_importing_jdist():
    import jdist  # noqa: F401
    from jdist.strategy import extensions

    assert sorted(extensions._METHODS) == sorted(extensions.PROVIDERS)
    assert [type(e).__name__ for e in extensions._RUNS] == ["KerasRun"]
    assert len(extensions._SCOPES) == 1


def test_call_path_counts_folder_crossings_and_reentries():
    from collections import Counter

    spec = importlib.util.spec_from_file_location("call_path", SCRIPT.parent / "call_path.py")
    call_path = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(call_path)
    paths = Counter({("trainer", "input", "strategy"): 3, ("trainer", "strategy", "layout", "strategy", "x"): 1,
                     ("trainer", "input", "trainer"): 2})
    assert call_path.reentries(paths) == [("trainer", "input", "trainer"), ("trainer", "strategy", "layout", "strategy")]
    edges = Counter({("jdist.trainer.a", "jdist.trainer.b"): 4, ("jdist.trainer.a", "jdist.input.c"): 2,
                     ("jdist.trainer.b", "jdist.input.d"): 1, ("jdist", "jdist.strategy.e"): 1})
    assert call_path.folder_crossings(edges) == Counter({("trainer", "input"): 3, ("jdist", "strategy"): 1})


def test_step_fingerprint_ignores_source_locations_only():
    spec = importlib.util.spec_from_file_location("step_fingerprint", SCRIPT.parent / "step_fingerprint.py")
    fingerprint = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fingerprint)
    a = ('FileNames\n1 "/a/jdist/x.py"\nENTRY %main {\n  %p = f32[2] parameter(0), metadata={op_name="a" '
         'source_file="/a/jdist/x.py" source_line=3}\n}')
    b = a.replace("/a/", "/b/").replace("source_line=3", "source_line=9")
    assert fingerprint.hlo_without_locations(a) == fingerprint.hlo_without_locations(b)
    assert fingerprint.hlo_without_locations(a) != fingerprint.hlo_without_locations(a.replace("f32[2]", "f32[3]"))
