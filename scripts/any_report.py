"""Count public functions of jdist whose annotations mention ``Any``.

A function counts when it is public: its name has no leading underscore, it sits at module level or
in a public class (nested functions are not API), and its module is public (no path part starts with
an underscore, ``__init__.py`` aside). It mentions ``Any`` when a parameter or return annotation
names ``Any`` (``typing.Any`` or a string annotation that contains the word). An overloaded function counts
once, and mentions ``Any`` when its implementation or any of its ``@overload`` signatures does.

    python scripts/any_report.py            # the percentage and the count per module
    python scripts/any_report.py --list     # every counted function that still mentions Any
    python scripts/any_report.py --pytree   # also count `PyTree` (jdist.typing's alias of Any)
"""

from __future__ import annotations

import argparse
import ast
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "jdist"
_NAMES = {"Any"}


def _public_module(path: Path) -> bool:
    parts = path.relative_to(ROOT).parts
    return not any(p.startswith("_") and p != "__init__.py" for p in parts)


def _mentions_any(node: ast.expr | None) -> bool:
    if node is None:
        return False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in _NAMES:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr in _NAMES:
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and any(
                re.search(rf"\b{name}\b", sub.value) for name in _NAMES):
            return True
    return False


def _annotations(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.expr | None]:
    a = fn.args
    args = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    if a.vararg:
        args.append(a.vararg)
    if a.kwarg:
        args.append(a.kwarg)
    return [arg.annotation for arg in args] + [fn.returns]


def _is_overload(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "overload" or isinstance(d, ast.Attribute) and d.attr == "overload"
               for d in fn.decorator_list)


Function = list[ast.FunctionDef | ast.AsyncFunctionDef]  # the implementation, then its @overload signatures


def public_functions(tree: ast.Module) -> list[tuple[str, Function]]:
    """Module-level functions and methods of public classes (any depth of public classes)."""
    out: list[tuple[str, Function]] = []
    signatures: dict[str, Function] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                if _is_overload(node):
                    signatures.setdefault(prefix + node.name, []).append(node)
                else:
                    out.append((prefix + node.name, [node, *signatures.pop(prefix + node.name, [])]))
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.If):  # functions defined under `if TYPE_CHECKING:` / version checks
                visit(node.body, prefix)
                visit(node.orelse, prefix)

    visit(tree.body, "")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list every public function that mentions Any")
    parser.add_argument("--pytree", action="store_true",
                        help="count `PyTree` as Any too (to a type checker it is: nodes register at run time)")
    opts = parser.parse_args()
    if opts.pytree:
        _NAMES.add("PyTree")
    total = with_any = 0
    per_module: Counter[str] = Counter()
    listed: list[str] = []
    for path in sorted(ROOT.rglob("*.py")):
        if not _public_module(path):
            continue
        module = str(path.relative_to(ROOT.parent))
        for name, defs in public_functions(ast.parse(path.read_text(), filename=str(path))):
            total += 1
            if any(_mentions_any(a) for fn in defs for a in _annotations(fn)):
                with_any += 1
                per_module[module] += 1
                listed.append(f"{module}:{defs[0].lineno}: {name}")
    if opts.list:
        print("\n".join(listed))
    else:
        for module, n in per_module.most_common():
            print(f"{n:4d}  {module}")
    what = "Any or PyTree" if opts.pytree else "Any"
    print(f"{with_any}/{total} public functions mention {what} ({100.0 * with_any / max(total, 1):.1f}%)")


if __name__ == "__main__":
    main()
