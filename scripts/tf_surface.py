"""How much of TensorFlow 2.21's public namespace `jdist.tf_compat` provides, namespace by namespace.

    .venv/bin/python scripts/tf_surface.py            # one line per namespace: provided / TF's, and what is missing
    .venv/bin/python scripts/tf_surface.py --record   # with TensorFlow importable: record TF's names again

TF's names are `dir()` of each namespace in TensorFlow 2.21 (tensorflow-cpu, its Keras 3), recorded in
scripts/tf_reference/tf_2_21_names.json (TF1's `compat.v1`, `raw_ops` and the graph-only modules left out). A name
counts as provided when `getattr` gives something: what it does is for the tests (tests/test_tf_compat_*.py),
and the names jdist leaves out on purpose raise their way forward (docs/tf_mapping.md).
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

NAMES = Path(__file__).parent / "tf_reference" / "tf_2_21_names.json"
NAMESPACES = ["", "math", "nn", "image", "strings", "linalg", "random", "data", "data.experimental", "distribute",
              "distribute.experimental", "train", "io", "summary", "config", "experimental.numpy", "signal",
              "sparse", "dtypes", "nest", "saved_model", "test", "debugging", "bitwise", "audio", "lookup",
              "ragged", "sets", "types.experimental", "errors", "tpu"]


def _walk(root: Any, path: str) -> Any:
    for part in filter(None, path.split(".")):
        root = getattr(root, part)
    return root


def record() -> None:
    import tensorflow as tf  # only here: TF is never a dependency of jdist

    names = {path: sorted(n for n in dir(_walk(tf, path)) if not n.startswith("_")) for path in NAMESPACES}
    NAMES.write_text(json.dumps(names, indent=1, sort_keys=True) + "\n")


def report() -> tuple[int, int]:
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import jdist.tf_compat as tf

    provided = total = 0
    for path, names in json.loads(NAMES.read_text()).items():
        try:
            namespace = _walk(tf, path)
        except AttributeError:
            missing = names
        else:
            missing = [n for n in names if not _has(namespace, n)]
        provided += len(names) - len(missing)
        total += len(names)
        print(f"tf.{path or '*'}: {len(names) - len(missing)}/{len(names)}"
              + (f"; missing: {' '.join(missing)}" if missing else ""))
    print(f"all: {provided}/{total}")
    return provided, total


def _has(namespace: Any, name: str) -> bool:
    try:
        getattr(namespace, name)
    except Exception:  # an unsupported name raises its way forward
        return False
    return True


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--record", action="store_true", help="record TF's names (needs TensorFlow importable)")
    if parser.parse_args().record:
        record()
    else:
        report()
