"""Converting a Python function with AutoGraph: its source, rewritten (`transformer`), compiled into a function
that shares the original's globals, closure cells and defaults.

TF converts the user's functions a `tf.function` calls, recursively, and leaves library code, builtins and
functions marked `tf.autograph.experimental.do_not_convert` as they are; so does `convert` here (a function
from an installed package, the standard library or jdist itself runs as written). A function whose source is
not available (code made by `exec`, a generator, a lambda its line does not single out) or that uses a
construct the conversion does not handle also runs as written, as TF runs it after its warning "AutoGraph could
not transform".
"""
from __future__ import annotations

import ast
import functools
import inspect
import os
import sys
import sysconfig
import textwrap
import types
import weakref
from typing import Any, Callable

from jdist.interop import traced_shapes
from jdist.interop.autograph import conditionals, loops, transformer, values
from jdist.interop.autograph.analysis import Unsupported

_DO_NOT_CONVERT = "__jdist_autograph_do_not_convert__"
_CONVERTED = "__jdist_autograph_converted__"
_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # code object -> code of the converted function
_BUILT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # function -> its converted function
_FAILED = object()
# the standard library and installed packages, then jdist itself: code AutoGraph leaves as written (jdist last)
_LIBRARY_ROOTS = tuple(dict.fromkeys(os.path.realpath(p) + os.sep for p in (
    sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))))
_VERBOSITY = [0]
# where a tracer's `numpy` raises TF's AttributeError (`traced_shapes`): not the frame that asked for it
_RAISES_NUMPY = os.path.realpath(traced_shapes.__file__)


def set_verbosity(level: int, alsologtostdout: bool = False) -> None:
    """`tf.autograph.set_verbosity`: kept; a non-zero level logs each function that runs unconverted."""
    del alsologtostdout
    _VERBOSITY[0] = int(level)


def get_verbosity() -> int:
    return _VERBOSITY[0]


def do_not_convert(func: Callable | None = None) -> Any:
    """`tf.autograph.experimental.do_not_convert`: `func` runs as written even inside converted code."""
    if func is None:
        return do_not_convert

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)
    setattr(wrapper, _DO_NOT_CONVERT, True)
    return wrapper


def _is_user_code(func: types.FunctionType) -> bool:
    if getattr(func, _DO_NOT_CONVERT, False) or getattr(func, _CONVERTED, False):
        return False
    filename = func.__code__.co_filename
    if filename.startswith("<"):
        return False
    path = os.path.realpath(filename)
    return not path.startswith(_LIBRARY_ROOTS)


def convert(func: Any) -> Any:
    """`func` converted (a function or bound method of user code), or `func` itself where it is not."""
    if isinstance(func, types.MethodType):
        converted = convert(func.__func__)
        return func if converted is func.__func__ else types.MethodType(converted, func.__self__)
    if not isinstance(func, types.FunctionType):
        return func
    built = _BUILT.get(func)
    if built is not None:
        return func if built is _FAILED else built
    if not _is_user_code(func):
        _BUILT[func] = _FAILED
        return func
    code = _CACHE.get(func.__code__)
    if code is None:
        code = _convert_code(func)
        _CACHE[func.__code__] = code
    try:
        built = func if code is _FAILED else _build(func, code)
    except Exception:  # noqa: BLE001 - a closure the converted code cannot share: the function runs as written
        built = func
    # one converted function per function: callers cache by it (strategy.run's programs)
    _BUILT[func] = _FAILED if built is func else built
    return built


def _converted_tree(func: types.FunctionType) -> ast.FunctionDef:
    """The `def` of `func` with its statements rewritten (`transformer`); raises where it cannot be."""
    source = textwrap.dedent(inspect.getsource(func))
    tree = ast.parse(source)
    node = _lambda_def(func, tree) if func.__name__ == "<lambda>" else tree.body[0]
    if not isinstance(node, ast.FunctionDef) or node.name != func.__name__:
        raise Unsupported("source is not a plain `def`")
    if any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)) for n in ast.walk(node)):
        raise Unsupported("a generator")
    node.decorator_list = []
    first = node.args.posonlyargs + node.args.args
    node = transformer.Expressions(first[0].arg if first else None).visit(node)
    params = transformer._params(node.args)
    node.body = transformer.Statements().function_body(node.body, params)
    return node


def _lambda_def(func: types.FunctionType, tree: ast.Module) -> ast.FunctionDef:
    """A lambda as the `def` TF's AutoGraph converts it to: its expression returned. Its source line must hold
    one lambda with its parameters (two alike on one line cannot be told apart, as TF cannot either)."""
    code = func.__code__
    params = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)
             and [a.arg for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs] == params
             and n.lineno == 1]
    if len(found) != 1:
        raise Unsupported("a lambda that its source line does not single out")
    return ast.FunctionDef(name=func.__name__, args=found[0].args, body=[ast.Return(found[0].body)],
                           decorator_list=[], returns=None, lineno=1, col_offset=0)


def to_code(entity: Any, recursive: bool = True, experimental_optional_features: Any = None) -> str:
    """`tf.autograph.to_code`: the source of `entity` as AutoGraph converts it, a `def tf__<name>` whose
    `if`/`while`/`for` call `ag__.if_stmt`, `ag__.while_stmt`, `ag__.for_stmt` (observed in TF 2.21: a str
    with `ag__.if_stmt` for a function with an `if`). The calls are jdist's AutoGraph runtime's, so the text
    is not TF's line for line. A function whose source is unavailable raises TF's error type, ValueError."""
    del recursive, experimental_optional_features
    func = getattr(entity, "python_function", entity)
    func = getattr(func, "__func__", func)
    if not isinstance(func, types.FunctionType):
        raise ValueError(f"tf.autograph.to_code expects a Python function; got {entity!r}")
    try:
        node = _converted_tree(func)
    except (OSError, TypeError, SyntaxError, Unsupported) as error:
        raise ValueError(f"AutoGraph could not convert {func.__qualname__}: {error}") from None
    if func.__name__ == "<lambda>":  # TF's text: `tf__lam = lambda x: ...` (observed, TF 2.21)
        node.name = "tf__lam"
        if len(node.body) == 1 and isinstance(node.body[0], ast.Return) and node.body[0].value is not None:
            assign = ast.Assign([ast.Name("tf__lam", ast.Store())], ast.Lambda(node.args, node.body[0].value))
            return ast.unparse(ast.fix_missing_locations(ast.Module([assign], []))) + "\n"
    else:
        node.name = f"tf__{func.__name__}"
    return ast.unparse(ast.fix_missing_locations(node)) + "\n"


def _convert_code(func: types.FunctionType) -> Any:
    try:
        node = _converted_tree(func)
        # named apart from the function: a body that calls itself by name (recursion) reads the global or
        # closure binding, as the original does, not the factory's local definition
        node.name = "ag__converted"
        freevars = list(func.__code__.co_freevars)
        factory = ast.FunctionDef(name="ag__factory", args=ast.arguments(
            posonlyargs=[], args=[ast.arg(n) for n in ["ag__"] + freevars], vararg=None, kwonlyargs=[],
            kw_defaults=[], kwarg=None, defaults=[]), body=[node, ast.Return(ast.Name(node.name, ast.Load()))],
            decorator_list=[], returns=None)
        module = ast.Module([factory], [])
        ast.fix_missing_locations(module)
        ast.increment_lineno(module, func.__code__.co_firstlineno - 1)
        compiled = compile(module, func.__code__.co_filename, "exec")
        factory_code = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
        code = next(c for c in factory_code.co_consts if isinstance(c, types.CodeType) and c.co_name == node.name)
        return code.replace(co_name=func.__name__, co_qualname=func.__code__.co_qualname)
    except Exception as error:  # noqa: BLE001 - whatever stops the conversion: the function runs as written
        if _VERBOSITY[0]:
            print(f"AutoGraph could not transform {func.__qualname__} and will run it as-is: {error}",
                  file=sys.stderr)
        return _FAILED


def _cell(value: Any) -> Any:
    return types.CellType(value)


def _build(func: types.FunctionType, code: types.CodeType) -> types.FunctionType:
    cells = dict(zip(func.__code__.co_freevars, func.__closure__ or ()))
    closure = tuple(_cell(ag__) if name == "ag__" else cells[name] for name in code.co_freevars)
    new = types.FunctionType(code, func.__globals__, func.__name__, func.__defaults__, closure)
    new.__kwdefaults__ = func.__kwdefaults__
    new.__dict__.update(func.__dict__)
    new.__qualname__ = func.__qualname__
    new.__module__ = func.__module__
    setattr(new, _CONVERTED, True)
    return new


def converted_call(func: Any, args: tuple, kwargs: dict) -> Any:
    """A call in converted code: the called function converted first where it is user code (TF's rule)."""
    return convert(func)(*args, **kwargs)


def to_graph(entity: Any, recursive: bool = True, experimental_optional_features: Any = None) -> Any:
    """`tf.autograph.to_graph`: the function converted (its `if`/loops on tensors become graph control flow)."""
    del recursive, experimental_optional_features
    return convert(entity)


def symbolic_numpy_error(error: BaseException) -> AttributeError | None:
    """TF's AttributeError for `tensor.numpy()` in the user's code of a traced function (observed in TF 2.21:
    "'SymbolicTensor' object has no attribute 'numpy'"), where JAX's tracer lacked it; None for other errors."""
    text = str(error)
    if not isinstance(error, AttributeError) or ("Tracer" not in text and "SymbolicTensor" not in text) or not (
            text.endswith("has no attribute numpy") or text.endswith("has no attribute 'numpy'")):
        return None
    caller = None  # the last frame outside the installed libraries (JAX's own frames come after it)
    frame = error.__traceback__
    while frame is not None:
        path = os.path.realpath(frame.tb_frame.f_code.co_filename)
        if not path.startswith(_LIBRARY_ROOTS[:-1]) and path != _RAISES_NUMPY:
            caller = path
        frame = frame.tb_next
    if caller is None or caller.startswith(_LIBRARY_ROOTS[-1]):
        return None  # jdist's own code asked: not the user's `.numpy()`
    return AttributeError("'SymbolicTensor' object has no attribute 'numpy'")


def _retval(value: object) -> object:
    """A function's result after its `return`s became assignments: None where no `return` ran."""
    return None if values.is_undefined(value) else value


# The namespace converted code calls (`ag__.if_stmt(...)`), bound into each converted function's closure.
ag__ = types.SimpleNamespace(
    Undefined=values.Undefined, if_stmt=conditionals.if_stmt, if_exp=conditionals.if_exp,
    and_=conditionals.and_, or_=conditionals.or_, not_=conditionals.not_, while_stmt=loops.while_stmt,
    for_stmt=loops.for_stmt, range_call=loops.range_call, python_iter=loops.python_iter,
    python_test=loops.python_test, converted_call=converted_call, convert=convert, retval=_retval)
