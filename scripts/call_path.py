"""Which jdist modules one batch passes through in `Trainer.fit`: module boundaries crossed, counted by a tracer.

    python scripts/call_path.py                 # counts, then every module -> module edge
    python scripts/call_path.py --strategy one  # the same under OneDeviceStrategy

Fits a small MLP on numpy arrays under MirroredStrategy (default options) twice and counts each: the first
`fit` builds the state and compiles its steps, the second runs one epoch of `--batches` batches on them. A call
from jdist module A straight into jdist module B is an edge A -> B, as a reader following the code would
cross it; with `--through-libraries`, a call that reaches B through jax, flax or another library (a tree
rebuilt by `jax.tree.map`, a model traced by `jax.jit`) is charged to the nearest jdist frame that led to it.
The count is the number of distinct edges and the modules they touch. Package `__init__`s count as modules.

Folders (the top-level units of jdist: `trainer`, `strategy`, `input`, ...; see docs/architecture.md): a
folder crossing is a distinct caller-folder -> callee-folder edge, and a re-entry is a call stack that
enters a folder, leaves it and enters it again (`trainer > training > trainer`): code of a lower layer
calling back up, or a folder whose job is split across another.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections import Counter

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")


def _module(frame) -> str | None:
    name = frame.f_globals.get("__name__", "")
    return name if name == "jdist" or name.startswith("jdist.") else None


def folder(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _folder_path(frame) -> tuple[str, ...]:
    """The folders of the jdist frames on the stack, outermost first, repeats in a row collapsed."""
    names = []
    while frame is not None:
        module = _module(frame)
        if module is not None:
            names.append(folder(module))
        frame = frame.f_back
    path: list[str] = []
    for name in reversed(names):
        if not path or path[-1] != name:
            path.append(name)
    return tuple(path)


def reentries(paths: Counter) -> list[tuple[str, ...]]:
    """The folder paths (call stacks) that enter a folder twice, each cut at its first repeat."""
    found = set()
    for path in paths:
        seen: set[str] = set()
        for i, name in enumerate(path):
            if name in seen:
                found.add(path[: i + 1])
                break
            seen.add(name)
    return sorted(found)


def folder_crossings(edges: Counter) -> Counter:
    """Module edges grouped by (caller folder, callee folder), between different folders."""
    out: Counter = Counter()
    for (caller, callee), n in edges.items():
        if folder(caller) != folder(callee):
            out[(folder(caller), folder(callee))] += n
    return out


def trace_edges(fn, through_libraries: bool = False, paths: Counter | None = None) -> Counter:
    """Distinct (caller module, callee module) pairs between jdist modules while `fn()` runs, with counts;
    with `paths`, also counts each distinct folder path (call stack) at a call into a new folder."""
    edges: Counter = Counter()

    def profile(frame, event, arg):
        if event != "call":
            return
        callee = _module(frame)
        if callee is None:
            return
        caller_frame = frame.f_back
        while through_libraries and caller_frame is not None and _module(caller_frame) is None:
            caller_frame = caller_frame.f_back
        if caller_frame is None:
            return
        caller = _module(caller_frame)
        if caller is not None and caller != callee:
            edges[(caller, callee)] += 1
            if paths is not None and folder(caller) != folder(callee):
                paths[_folder_path(frame)] += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return edges


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategy", choices=["mirrored", "one"], default="mirrored")
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--through-libraries", action="store_true",
                        help="also charge calls made through jax/flax to the jdist frame that led to them")
    args = parser.parse_args(argv)

    import flax.linen as nn
    import numpy as np

    import jdist

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(10)(nn.relu(nn.Dense(32)(x)))

    strategy = jdist.MirroredStrategy() if args.strategy == "mirrored" else jdist.OneDeviceStrategy("cpu:0")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64 * args.batches, 16)).astype(np.float32)
    y = rng.integers(0, 10, size=(64 * args.batches,)).astype(np.int32)
    trainer = jdist.Trainer(MLP(), "adam", metrics=["accuracy"], strategy=strategy)
    runs, folder_paths = {}, {}
    for label in ("first fit (state made, steps compiled)", "second fit (compiled steps)"):
        folder_paths[label] = Counter()
        runs[label] = trace_edges(lambda: trainer.fit(x, y, batch_size=64, epochs=1, verbose=0, shuffle=False),
                                  args.through_libraries, folder_paths[label])
    for label, edges in runs.items():
        modules = {m for edge in edges for m in edge}
        crossings = folder_crossings(edges)
        folders = {f for pair in crossings for f in pair}
        print(f"{label}, one epoch of {args.batches} batches ({args.strategy}): {len(edges)} module boundaries "
              f"(distinct caller -> callee edges) over {len(modules)} modules; {len(crossings)} folder crossings "
              f"over {len(folders)} folders, {len(reentries(folder_paths[label]))} re-entries")
    for label, paths in folder_paths.items():
        for path in reentries(paths):
            print(f"  re-entry ({label.split(' (')[0]}): {' > '.join(path)}")
    for label, edges in runs.items():
        print(f"\n{label}:")
        for (caller, callee), n in sorted(edges.items()):
            print(f"  {caller} -> {callee}  ({n} calls)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
