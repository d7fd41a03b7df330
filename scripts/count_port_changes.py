"""Counts the lines scripts/port_tf_tutorial.py changes in TensorFlow's custom-training tutorial.

    python scripts/count_port_changes.py --reference tutorial.py        # the count, then the changed lines
    python scripts/count_port_changes.py --reference tutorial.py --raw  # module renames counted as changes too

The tutorial is not kept in this repository: `--reference` is a file holding its code, which you
export from tensorflow/docs `site/en/tutorials/distribute/custom_training.ipynb`: the code cells
from "Create a strategy" to "Restore the latest checkpoint and test", in order, with the imports,
the Fashion-MNIST download and the "alternate ways of iterating" cells left out (the numbers in
docs/porting.md were measured on that export). The port's code is what lies between its
`# --- the tutorial` and `# --- end of the tutorial` markers. Blank lines, comments and
indentation are ignored. A port line is *changed* when it is not in the longest common
subsequence of the two line lists (difflib): new and edited lines count, and so does a
tutorial line that the port drops (`removed`). `--raw` compares the lines as written: the port
spells TensorFlow's names (`import jdist.tf_compat as tf`), so a module rename is a change
there. By default both sides are first read with the renames an import of jdist's own names
would make (RENAMES: `tf.keras.` is `keras.`, `tf.nn.` and `tf.distribute.` are `jdist.`,
other `tf.` names `jdist.`), so that a port written with `import jdist` counts the same.
"""
from __future__ import annotations

import argparse
import difflib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PORT = ROOT / "scripts" / "port_tf_tutorial.py"
START, END = "# --- the tutorial", "# --- end of the tutorial"
RENAMES = [("tf.keras.", "keras."), ("tf.nn.", "jdist."), ("tf.distribute.", "jdist."), ("tf.", "jdist.")]


def code_lines(text: str) -> list[str]:
    """Non-blank, non-comment lines, stripped, with trailing comments removed."""
    lines = []
    for line in text.splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()  # the tutorial has no '#' inside strings
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def port_region(text: str) -> str:
    start, end = text.index(START), text.index(END)
    return text[text.index("\n", start) + 1:end]


def renamed(line: str) -> str:
    for old, new in RENAMES:
        line = re.sub(r"(?<![\w.])" + re.escape(old), new, line)
    return line


def count(reference_path: str | Path, raw: bool = False) -> dict:
    reference = code_lines(Path(reference_path).read_text())
    port = code_lines(port_region(PORT.read_text()))
    if not raw:
        reference = [renamed(line) for line in reference]
        port = [renamed(line) for line in port]
    matcher = difflib.SequenceMatcher(a=reference, b=port, autojunk=False)
    kept = sum(block.size for block in matcher.get_matching_blocks())
    changed = [port[j] for tag, _, _, j1, j2 in matcher.get_opcodes() if tag in ("replace", "insert")
               for j in range(j1, j2)]
    removed = [reference[i] for tag, i1, i2, _, _ in matcher.get_opcodes() if tag in ("replace", "delete")
               for i in range(i1, i2)]
    return {"reference_lines": len(reference), "port_lines": len(port), "unchanged": kept,
            "changed": changed, "removed": removed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", required=True, metavar="PATH",
                        help="a file holding the tutorial's code cells (see above)")
    parser.add_argument("--raw", action="store_true", help="count module renames as changes")
    args = parser.parse_args()
    result = count(args.reference, raw=args.raw)
    print(f"tutorial: {result['reference_lines']} lines, port: {result['port_lines']} lines, "
          f"changed or new: {len(result['changed'])}, removed: {len(result['removed'])}"
          + (" (module renames counted)" if args.raw else " (module renames not counted)"))
    for line in result["changed"]:
        print("  +", line)
    for line in result["removed"]:
        print("  -", line)


if __name__ == "__main__":
    main()
