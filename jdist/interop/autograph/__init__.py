"""AutoGraph for jdist's `tf.function`: Python `if`/`while`/`for` on traced tensors become compiled control flow.

TF rewrites a `tf.function`'s source so that an `if` on a tensor becomes `tf.cond`, a `while` on a tensor
`tf.while_loop`, and a `for` over `tf.range(tensor)` or a tensor a loop in the graph; statements on Python
values stay Python. Here the same rewrite (`conversion`, `transformer`, `analysis`) calls the runtime in
`conditionals` and `loops`, which use `lax.cond` / `lax.while_loop` where a condition is traced.
`ag__` is the namespace converted code calls.
"""
from __future__ import annotations

from jdist.interop.autograph import loops, values
from jdist.interop.autograph.conversion import (
    ag__,
    convert,
    converted_call,
    do_not_convert,
    get_verbosity,
    set_verbosity,
    symbolic_numpy_error,
    to_code,
    to_graph,
)
from jdist.strategy import extensions

extensions.register_method("autograph", convert)  # `strategy.run` converts its function with it

set_loop_options = loops.set_loop_options
is_error = values.is_autograph_error
plain_error = values.plain

__all__ = ["ag__", "convert", "converted_call", "do_not_convert", "get_verbosity", "is_error", "plain_error",
           "set_loop_options", "set_verbosity", "symbolic_numpy_error", "to_code", "to_graph"]
