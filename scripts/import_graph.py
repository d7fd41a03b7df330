"""jdist's import graph: which module imports which, and the cycles in it.

    python scripts/import_graph.py            # the cycles (exit status 1 if any besides the allowed one)
    python scripts/import_graph.py --edges    # every edge, "importer -> imported (line)"
    python scripts/import_graph.py --folders  # the graph between folders, checked against LAYERS

Both top-level and function-level imports count: a function-level import only
defers a dependency, it does not remove it. Imports under `if TYPE_CHECKING:`
do not (they never run; annotations only). `from jdist.x import name` is an
edge to `jdist.x`, or to the submodule `jdist.x.name` when there is one. The
packages a module sits in are not counted as imported by it (Python runs their
`__init__` first, but they are not the module's dependency).

One cycle is part of the design: the strategy runtime's own (`RUNTIME`: the
context stack, the replica context, `Strategy` with its `run`, cross-replica and
`extended` halves, and the default strategy), closed
by one edge: `jdist.strategy.context.get_strategy()` returning the default strategy,
which is a `Strategy` and so reads the context. No other module may sit on a
cycle, and with that edge (`ALLOWED`) left out the graph has no cycle at all.

Between folders (a top-level package or module of jdist: `strategy`, `input`, `losses`, ...) the
graph is layered (`LAYERS`, bottom first): a folder imports only folders of lower layers, apart
from the edges in `FOLDER_ALLOWED`, and never a private name (`_x`) or private module of another
folder. The higher layers extend the strategy runtime through `jdist.strategy.extensions`.
"""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "jdist"

# get_strategy() returning the default strategy: the edge that closes the runtime's own cycle.
ALLOWED = {("jdist.strategy.context", "jdist.strategy.default")}
# The strategy runtime: the only modules that cycle may hold.
RUNTIME = frozenset({"jdist.strategy.context", "jdist.strategy.replica_context", "jdist.strategy.base",
                     "jdist.strategy.run", "jdist.strategy.cross_replica", "jdist.strategy.default",
                     "jdist.strategy.extended",
                     # the replicas of a short batch run as threads, each with a replica context (`run` uses it)
                     "jdist.strategy.uneven_rows"})


# Folders by layer, bottom first: each imports only from the layers below it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("_numpy_rng", "errors", "layout", "lazy", "optimizers", "partitioners", "thread_locals", "thread_stdout",
     "typing"),  # no jdist imports
    ("cluster",),  # processes, resolvers, collectives' options
    ("strategy",),  # the runtime: meshes, scope, run, reduce, distributed batches, gradient capture, TPU setup
    ("checkpoint", "diagnostics", "input", "layers", "losses", "mixed_precision"),
    ("callbacks", "interop", "metrics", "pipeline", "tfdata", "training"),
    ("data", "saved_model", "tpu", "train"),  # faces: TF's names over the layers below
    ("launch", "parameter_server", "tf_compat", "trainer"),
    ("jdist",),  # the package's own face
)
# tf_compat binds TF's names to the whole public face (`tf.distribute.MirroredStrategy` is jdist's).
FOLDER_ALLOWED = {("tf_compat", "jdist")}


def folder_of(module: str) -> str:
    """The top-level unit of jdist that `module` sits in (`jdist` for the package's own __init__)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layer_of(folder: str) -> int:
    for rank, folders in enumerate(LAYERS):
        if folder in folders:
            return rank
    raise KeyError(f"jdist/{folder} is in no layer: add it to LAYERS in scripts/import_graph.py.")


def folder_edges(edges: dict[str, dict[str, int]]) -> dict[tuple[str, str], list[str]]:
    """`{(folder, imported folder): ["module -> module (line)", ...]}` between different folders."""
    out: dict[tuple[str, str], list[str]] = {}
    for a, targets in edges.items():
        for b, line in targets.items():
            fa, fb = folder_of(a), folder_of(b)
            if fa != fb:
                out.setdefault((fa, fb), []).append(f"{a} -> {b} ({line})")
    return out


def layer_violations(edges: dict[str, dict[str, int]]) -> list[str]:
    """The folder edges that do not go down a layer and are not in FOLDER_ALLOWED."""
    return [f"{fa} (layer {layer_of(fa)}) -> {fb} (layer {layer_of(fb)}): {'; '.join(lines)}"
            for (fa, fb), lines in sorted(folder_edges(edges).items())
            if layer_of(fb) >= layer_of(fa) and (fa, fb) not in FOLDER_ALLOWED]


def private_imports(root: Path = ROOT) -> list[str]:
    """Imports of another folder's private names or private modules (`from jdist.x import _y`, `jdist.x._m`)."""
    known = modules(root)
    found = []
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom) or node.level or not (node.module or "").startswith(PACKAGE):
                continue
            source = node.module or ""
            if folder_of(source) == folder_of(name):
                continue
            private_module = any(p.startswith("_") and not p.startswith("__") for p in source.split(".")[1:])
            for alias in node.names:
                if private_module or (alias.name.startswith("_") and not alias.name.startswith("__")):
                    found.append(f"{name} ({node.lineno}): from {source} import {alias.name}")
    return found


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package by dotted name (packages by their own name)."""
    out = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that `name` (a dotted name) is or lies in."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def _is_type_checking(node: ast.AST) -> bool:
    """An `if TYPE_CHECKING:` block: imports for annotations only, never run."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(module: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int]]:
    """`(imported module, line)` for every import of a jdist module in `path`, at any depth."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    type_only = {id(n) for block in ast.walk(tree) if _is_type_checking(block) for s in block.body
                 for n in ast.walk(s)}
    out = []
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name, known)
                if target:
                    out.append((target, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's package
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if not (source == PACKAGE or source.startswith(PACKAGE + ".")):
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                target = sub if sub in known else _resolve(source, known)
                if target:
                    out.append((target, node.lineno))
    return [(t, line) for t, line in out if t != module]


def graph(root: Path = ROOT) -> dict[str, dict[str, int]]:
    """`{module: {imported module: first line}}`."""
    known = modules(root)
    edges: dict[str, dict[str, int]] = {}
    for name, path in known.items():
        edges[name] = {}
        for target, line in imports(name, path, known):
            edges[name].setdefault(target, line)
    return edges


def cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def without_allowed(edges: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """The graph less the `ALLOWED` edges."""
    return {a: {b: line for b, line in out.items() if (a, b) not in ALLOWED} for a, out in edges.items()}


def unexpected(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The cycles that hold a module outside the strategy runtime, and those that remain once
    the allowed edge is left out."""
    outside = [c for c in cycles(edges) if not set(c) <= RUNTIME]
    return outside + [c for c in cycles(without_allowed(edges)) if c not in outside]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", action="store_true", help="print every edge")
    parser.add_argument("--folders", action="store_true", help="print the folder graph and check its layers")
    args = parser.parse_args()
    edges = graph()
    if args.folders:
        for (fa, fb), lines in sorted(folder_edges(edges).items()):
            print(f"{fa} -> {fb}: {len(lines)} edge(s)")
        problems = layer_violations(edges) + private_imports()
        for problem in problems:
            print(f"NOT LAYERED: {problem}")
        print(f"{len(folder_edges(edges))} folder edges, {len(problems)} problem(s)")
        return 1 if problems else 0
    if args.edges:
        for source in sorted(edges):
            for target, line in sorted(edges[source].items()):
                print(f"{source} -> {target} ({line})")
        return 0
    bad = unexpected(edges)
    for component in cycles(edges):
        tag = "CYCLE" if any(set(c) <= set(component) for c in bad) else "allowed (the strategy runtime)"
        print(f"{tag}: {len(component)} modules: {', '.join(component)}")
        for a in component:
            for b, line in sorted(edges[a].items()):
                if b in component:
                    print(f"    {a} -> {b} ({line}){'  [allowed edge]' if (a, b) in ALLOWED else ''}")
    for component in bad:
        print(f"unexpected: {', '.join(component)}")
    print(f"{len(edges)} modules, {sum(map(len, edges.values()))} edges, {len(bad)} unexpected cycle(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
