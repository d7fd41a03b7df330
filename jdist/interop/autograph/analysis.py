"""What AutoGraph's conversion needs to know of a function's statements: the names they assign and read, and
the rewrites that come before the control-flow conversion (`return` inside `if`, `break` and `continue`).

A converted `if`/loop becomes nested functions that take and return the Python variables it changes, so the
conversion asks which names a block assigns (not inside nested functions), which it reads, and which code
after it reads. A `return` inside an `if` becomes an assignment of the return value with the code after the
`if` moved into the branch that does not return (TF's "return value" of a branch); `break` and `continue`
become flags that guard the rest of the loop body and the loop's condition, as TF's converter does.
"""
from __future__ import annotations

import ast
import copy
from typing import Iterable, Sequence

RETVAL, BREAK, CONTINUE = "ag__retval", "ag__break", "ag__cont"
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
           ast.DictComp, ast.GeneratorExp)
LOOPS = (ast.For, ast.While, ast.AsyncFor)


class Unsupported(Exception):
    """A construct this conversion leaves alone: the function runs as written."""


def _walk(nodes: Iterable[ast.AST], into_loops: bool = True) -> Iterable[ast.AST]:
    """The nodes under `nodes`, not inside nested functions, classes or comprehensions (nor loops, if asked)."""
    stack = list(nodes)[::-1]
    while stack:
        node = stack.pop()
        yield node
        for child in reversed(list(ast.iter_child_nodes(node))):
            if isinstance(child, _SCOPES):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    yield child  # its name is assigned here; its decorators and defaults read here
                    stack.extend(reversed(child.decorator_list))
                continue
            if not into_loops and isinstance(child, LOOPS):
                continue
            stack.append(child)


def assigned(nodes: Iterable[ast.AST]) -> set[str]:
    names: set[str] = set()
    for node in _walk(nodes):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.NamedExpr):
            names.add(node.target.id)
    return names


def loaded(nodes: Iterable[ast.AST]) -> set[str]:
    """Names read (inside nested functions too: a closure reads them when called)."""
    names: set[str] = set()
    for root in nodes:
        for node in ast.walk(root):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                names.add(node.id)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return names


def declared(nodes: Iterable[ast.AST]) -> set[str]:
    return {n for node in _walk(nodes) if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names}


def contains(nodes: Iterable[ast.AST], kinds: tuple, into_loops: bool = True) -> bool:
    return any(isinstance(node, kinds) for node in _walk(nodes, into_loops))


def first_assigned(body: list[ast.stmt]) -> set[str]:
    """Names the body's top level sets (by `name = value` not reading them) before anything reads them: a pass's
    temporaries, not loop variables."""
    seen: set[str] = set()
    fresh: set[str] = set()
    for stmt in body:
        reads = loaded([stmt])
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name) and target.id not in seen and target.id not in loaded([stmt.value]):
                    fresh.add(target.id)
        seen |= reads | assigned([stmt])
    return fresh


def _ends_with_return(body: list[ast.stmt]) -> bool:
    return bool(body) and (isinstance(body[-1], ast.Return) or isinstance(body[-1], ast.If) and
                           _ends_with_return(body[-1].body) and _ends_with_return(body[-1].orelse))


def _returns_in_ifs_only(body: list[ast.stmt]) -> bool:
    """Whether every `return` sits in plain statement lists and `if` branches (not in a loop, `with`, `try`)."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            if not (_returns_in_ifs_only(stmt.body) and _returns_in_ifs_only(stmt.orelse)):
                return False
        elif not isinstance(stmt, ast.Return) and contains([stmt], (ast.Return,)):
            return False
    return True


def lift_returns(body: list[ast.stmt]) -> list[ast.stmt] | None:
    """`body` with each `return` inside an `if` as an assignment of `RETVAL` (the code after such an `if` moved
    into its branch that falls through); None where no `if` holds a `return`, or a `return` is elsewhere too."""
    if not any(isinstance(s, ast.If) and contains([s], (ast.Return,)) for s in body):
        return None
    if not _returns_in_ifs_only(body):
        return None
    return _lift(body)


def _lift(body: list[ast.stmt]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for index, stmt in enumerate(body):
        if isinstance(stmt, ast.Return):
            value = stmt.value or ast.Constant(None)
            out.append(ast.copy_location(ast.Assign([ast.Name(RETVAL, ast.Store())], value), stmt))
            return out
        if isinstance(stmt, ast.If) and contains([stmt], (ast.Return,)):
            rest = body[index + 1:]
            main = stmt.body if _ends_with_return(stmt.body) else stmt.body + copy.deepcopy(rest)
            other = stmt.orelse if _ends_with_return(stmt.orelse) else stmt.orelse + copy.deepcopy(rest)
            out.append(ast.copy_location(ast.If(stmt.test, _lift(main) or [ast.Pass()], _lift(other)), stmt))
            return out
        out.append(stmt)
    return out


def _flag(name: str, node: ast.AST) -> ast.stmt:
    return ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], ast.Constant(True)), node)


def _not_flags(flags: list[str]) -> ast.expr:
    parts = [ast.Lambda(_no_args(), ast.Name(f, ast.Load())) for f in flags]
    either = parts[0].body if len(parts) == 1 else _ag_call("or_", parts)
    return _ag_call("not_", [either])


def _no_args() -> ast.arguments:
    return ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                         defaults=[])


def _ag_call(name: str, args: Sequence[ast.expr]) -> ast.Call:
    return ast.Call(ast.Attribute(ast.Name("ag__", ast.Load()), name, ast.Load()), list(args), [])


def guard_jumps(body: list[ast.stmt]) -> tuple[list[ast.stmt], bool, bool]:
    """A loop body with `break` / `continue` (not in inner loops) as flags, the code after one guarded by
    `if not (flags):`; and whether it has each."""
    has_break = contains(body, (ast.Break,), into_loops=False)
    has_continue = contains(body, (ast.Continue,), into_loops=False)
    flags = [f for f, has in ((BREAK, has_break), (CONTINUE, has_continue)) if has]
    return (_guarded(body, flags) if flags else body), has_break, has_continue


def _guarded(body: list[ast.stmt], flags: list[str]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for index, stmt in enumerate(body):
        if isinstance(stmt, ast.Break):
            out.append(_flag(BREAK, stmt))
            return out
        if isinstance(stmt, ast.Continue):
            out.append(_flag(CONTINUE, stmt))
            return out
        if not contains([stmt], (ast.Break, ast.Continue), into_loops=False):
            out.append(stmt)
            continue
        if not isinstance(stmt, ast.If):
            raise Unsupported(f"`break`/`continue` inside `{type(stmt).__name__.lower()}` in a loop")
        out.append(ast.copy_location(ast.If(stmt.test, _guarded(stmt.body, flags) or [ast.Pass()],
                                            _guarded(stmt.orelse, flags)), stmt))
        rest = _guarded(body[index + 1:], flags)
        if rest:
            out.append(ast.copy_location(ast.If(_not_flags(flags), rest, []), stmt))
        return out
    return out
