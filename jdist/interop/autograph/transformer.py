"""AutoGraph's rewrite of one function's syntax tree: control flow as calls to `ag__.if_stmt` / `while_stmt` /
`for_stmt`, `and`/`or`/`not`/`x if c else y` as `ag__.and_` ..., and each call `f(...)` as
`ag__.convert(f)(...)` (so the functions it calls are converted too, as TF converts recursively).

Each `if`/loop becomes nested functions whose parameters are the Python variables it assigns (see `analysis`)
and which return the ones code after it reads; the runtime (`conditionals`, `loops`) decides at trace time
whether that is plain Python or a `lax` primitive. Names a function assigns start as `ag__.Undefined` so a
branch can be handed a variable the code has not set yet (TF's rule for a variable set in one branch).
"""
from __future__ import annotations

import ast
import itertools
from typing import Any

from jdist.interop.autograph import analysis as A
from jdist.interop.autograph.analysis import Unsupported

_FRAME_CALLS = {"super", "locals", "globals", "vars", "eval", "exec", "dir"}
_FLAGS = {A.RETVAL, A.BREAK, A.CONTINUE}


def _ag(name: str) -> ast.Attribute:
    return ast.Attribute(ast.Name("ag__", ast.Load()), name, ast.Load())


def _call(name: str, *args: ast.expr) -> ast.Call:
    return ast.Call(_ag(name), list(args), [])


def _lambda(body: ast.expr) -> ast.Lambda:
    return ast.Lambda(A._no_args(), body)


def _names(names: list[str], ctx: Any) -> ast.Tuple:
    return ast.Tuple([ast.Name(n, ctx()) for n in names], ctx())


def _strs(names: list[str]) -> ast.Tuple:
    return ast.Tuple([ast.Constant(n) for n in names], ast.Load())


class Expressions(ast.NodeTransformer):
    """`and`, `or`, `not`, conditional expressions and calls, in every expression of the function."""

    def __init__(self, first_arg: str | None):
        self.first_arg = first_arg

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        self.generic_visit(node)
        return ast.copy_location(_call("and_" if isinstance(node.op, ast.And) else "or_",
                                       *[_lambda(v) for v in node.values]), node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        self.generic_visit(node)
        return ast.copy_location(_call("not_", node.operand), node) if isinstance(node.op, ast.Not) else node

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        self.generic_visit(node)
        return ast.copy_location(_call("if_exp", node.test, _lambda(node.body), _lambda(node.orelse)), node)

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in _FRAME_CALLS:
            if node.func.id == "super" and not node.args and self.first_arg:
                node.args = [ast.Name("__class__", ast.Load()), ast.Name(self.first_arg, ast.Load())]
            return node
        # `ag__.convert(f)(...)`: the call still runs from this frame (a tape's `gradient` finds its `with` here)
        node.func = ast.copy_location(ast.Call(_ag("convert"), [node.func], []), node.func)
        return node

    def visit_Lambda(self, node: ast.Lambda) -> Any:
        return node  # left as written (TF converts lambdas only where their source can be isolated)


class Statements:
    """The control-flow conversion of one function body (see the module docstring)."""

    def __init__(self) -> None:
        self._ids = itertools.count()

    def function_body(self, body: list[ast.stmt], params: set[str], in_loop: bool = False) -> list[ast.stmt]:
        lifted = None if in_loop else A.lift_returns(body)
        if lifted is not None:
            body = lifted + [ast.Return(_call("retval", ast.Name(A.RETVAL, ast.Load())))]
        free = A.declared(body)
        inits = sorted(A.assigned(body) - params - free)
        converted = self.block(body, set(), in_loop=in_loop, declared=free)
        return [ast.Assign([ast.Name(n, ast.Store())], _call("Undefined", ast.Constant(n))) for n in inits] + converted

    def block(self, body: list[ast.stmt], live_out: set[str], in_loop: bool, declared: set[str]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for index, stmt in enumerate(body):
            live = live_out | A.loaded(body[index + 1:])
            out.extend(self.statement(stmt, live, in_loop, declared))
        return out

    def statement(self, stmt: ast.stmt, live: set[str], in_loop: bool, declared: set[str]) -> list[ast.stmt]:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not A.contains(stmt.body, (ast.Yield, ast.YieldFrom, ast.Await)):
                params = _params(stmt.args)
                stmt.body = Statements().function_body(stmt.body, params)
            return [stmt]
        if isinstance(stmt, ast.If):
            return self._if(stmt, live, in_loop, declared)
        if isinstance(stmt, (ast.While, ast.For)):
            return self._loop(stmt, live, declared)
        for field in ("body", "orelse", "finalbody"):
            if isinstance(getattr(stmt, field, None), list) and not isinstance(stmt, ast.ClassDef):
                setattr(stmt, field, self.block(getattr(stmt, field), live, in_loop, declared))
        if isinstance(stmt, ast.Try):
            for handler in stmt.handlers:
                handler.body = self.block(handler.body, live, in_loop, declared)
        return [stmt]

    def _check_declared(self, nodes: list[ast.stmt], declared: set[str]) -> None:
        clash = A.assigned(nodes) & declared
        if clash:
            raise Unsupported(f"global/nonlocal {sorted(clash)} assigned inside converted control flow")

    def _def(self, name: str, params: list[str], body: list[ast.stmt], node: ast.AST) -> ast.FunctionDef:
        fn = ast.FunctionDef(name=name, args=ast.arguments(
            posonlyargs=[], args=[ast.arg(p) for p in params], vararg=None, kwonlyargs=[], kw_defaults=[],
            kwarg=None, defaults=[]), body=body or [ast.Pass()], decorator_list=[], returns=None)
        return ast.copy_location(fn, node)

    def _if(self, stmt: ast.If, live: set[str], in_loop: bool, declared: set[str]) -> list[ast.stmt]:
        if A.contains([stmt], (ast.Return,)):  # a `return` this conversion could not lift: plain Python only
            stmt.test = _call("python_test", stmt.test)
            stmt.body = self.block(stmt.body, live, in_loop, declared)
            stmt.orelse = self.block(stmt.orelse, live, in_loop, declared)
            return [stmt]
        self._check_declared([stmt], declared)
        changed = A.assigned(stmt.body) | A.assigned(stmt.orelse)
        outputs = sorted(changed & (live | _FLAGS))
        params = sorted(set(outputs) | (changed & A.loaded(stmt.body + stmt.orelse)))
        n = next(self._ids)
        defs = []
        for label, branch in (("true", stmt.body), ("false", stmt.orelse)):
            inner = self._branch(branch, set(params), live, in_loop, declared)
            inner.append(ast.Return(_names(outputs, ast.Load)))
            defs.append(self._def(f"ag__if_{label}_{n}", params, inner, stmt))
        call = _call("if_stmt", stmt.test, ast.Name(defs[0].name, ast.Load()), ast.Name(defs[1].name, ast.Load()),
                     _names(params, ast.Load), _strs(outputs))
        return defs + [ast.copy_location(ast.Assign([_names(outputs, ast.Store)], call), stmt)]

    def _branch(self, body: list[ast.stmt], params: set[str], live: set[str], in_loop: bool,
                declared: set[str]) -> list[ast.stmt]:
        inits = sorted(A.assigned(body) - params - declared)
        converted = self.block(body, live, in_loop, declared)
        return [ast.Assign([ast.Name(n, ast.Store())], _call("Undefined", ast.Constant(n))) for n in inits] + converted

    def _loop(self, stmt: ast.While | ast.For, live: set[str], declared: set[str]) -> list[ast.stmt]:
        if stmt.orelse or A.contains(stmt.body, (ast.Return,)):  # plain Python only (TF's error if on a tensor)
            if isinstance(stmt, ast.While):
                stmt.test = _call("python_test", stmt.test)
            else:
                stmt.iter = _call("python_iter", _range_call(stmt.iter))
            stmt.body = self.block(stmt.body, live | A.loaded([stmt]), True, declared)
            stmt.orelse = self.block(stmt.orelse, live, True, declared)
            return [stmt]
        self._check_declared([stmt], declared)
        body, has_break, has_continue = A.guard_jumps(stmt.body)
        if has_continue:
            body = [ast.Assign([ast.Name(A.CONTINUE, ast.Store())], ast.Constant(False))] + body
        target = [stmt.target] if isinstance(stmt, ast.For) else []
        changed = A.assigned(body + [ast.Assign(target, ast.Constant(None))] if target else body)
        reads = A.loaded(body) | A.loaded([stmt.test] if isinstance(stmt, ast.While) else [])
        temps = A.first_assigned(body) - live
        targets = A.assigned([ast.Assign(target, ast.Constant(None))]) if target else set()
        loop_vars = sorted((changed & (live | reads | {A.BREAK})) - temps - {A.CONTINUE} - (targets - live))
        n = next(self._ids)
        inner_live = live | reads
        item = "ag__item"
        prologue: list[ast.stmt] = []
        if target:
            prologue = [ast.copy_location(ast.Assign(target, ast.Name(item, ast.Load())), stmt)]
        inner = self._branch(prologue + body, set(loop_vars), inner_live, True, declared)
        inner.append(ast.Return(_names(loop_vars, ast.Load)))
        params = ([item] if target else []) + loop_vars
        body_def = self._def(f"ag__body_{n}", params, inner, stmt)
        out: list[ast.stmt] = []
        if has_break:
            out.append(ast.copy_location(ast.Assign([ast.Name(A.BREAK, ast.Store())], ast.Constant(False)), stmt))
        out.append(body_def)
        state = _names(loop_vars, ast.Load)
        if isinstance(stmt, ast.While):
            test = stmt.test
            if has_break:
                test = _call("and_", _lambda(_call("not_", ast.Name(A.BREAK, ast.Load()))), _lambda(test))
            test_def = self._def(f"ag__test_{n}", loop_vars, [ast.Return(test)], stmt)
            out.append(test_def)
            call = _call("while_stmt", ast.Name(test_def.name, ast.Load()), ast.Name(body_def.name, ast.Load()),
                         state, _strs(loop_vars))
        else:
            extra: ast.expr = ast.Constant(None)
            if has_break:
                extra_def = self._def(f"ag__extra_{n}", loop_vars,
                                      [ast.Return(_call("not_", ast.Name(A.BREAK, ast.Load())))], stmt)
                out.append(extra_def)
                extra = ast.Name(extra_def.name, ast.Load())
            call = _call("for_stmt", _range_call(stmt.iter), extra, ast.Name(body_def.name, ast.Load()), state,
                         _strs(loop_vars))
        out.append(ast.copy_location(ast.Assign([_names(loop_vars, ast.Store)], call), stmt))
        return out


def _range_call(iterable: ast.expr) -> ast.expr:
    """`tf.range(...)` as a `for`'s iterable: `ag__.range_call`, so a traced bound makes a tensor loop."""
    if not isinstance(iterable, ast.Call):
        return iterable
    func = iterable.func
    if isinstance(func, ast.Call) and isinstance(func.func, ast.Attribute) and func.func.attr == "convert" and \
            isinstance(func.args[0], ast.Attribute) and func.args[0].attr == "range":
        keys: list[ast.expr | None] = [None if k.arg is None else ast.Constant(k.arg) for k in iterable.keywords]
        return ast.Call(_ag("range_call"), [func.args[0], ast.Tuple(iterable.args, ast.Load()),
                                            ast.Dict(keys, [k.value for k in iterable.keywords])], [])
    return iterable


def _params(args: ast.arguments) -> set[str]:
    names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    return names
