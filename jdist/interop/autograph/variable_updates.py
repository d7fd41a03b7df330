"""Variables assigned inside a traced branch or loop body, carried out of it as the statement's values.

A compiled `tf.function` reads and assigns its variables through a Keras `StatelessScope` (its mapping holds
each variable's current traced value). A `lax.cond` branch or `lax.while_loop` body is traced as its own
program, so a value it assigns must leave through the statement's outputs, not stay in the scope: here each
branch runs with the scope's `add_update` noted and its mapping restored after, and the caller writes the
statement's outputs back into the scope (TF's `if x > 0: v.assign_add(1)` in a graph).
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator


def current_scope() -> Any:
    from keras.src.backend.common.stateless_scope import get_stateless_scope

    return get_stateless_scope()


@contextlib.contextmanager
def noted(scope: Any, assigned: dict[int, Any]) -> Iterator[None]:
    """Notes in `assigned` (id -> variable) what the block assigns through `scope`, then undoes it there."""
    if scope is None:
        yield
        return
    mapping = dict(scope.state_mapping)
    recorded = dict(getattr(scope, "assigned", {}))
    original: Callable = scope.add_update
    shadowed = scope.__dict__.get("add_update")  # an enclosing statement's, when nested

    def add_update(update: Any) -> None:
        assigned.setdefault(id(update[0]), update[0])
        original(update)

    scope.add_update = add_update
    try:
        yield
    finally:
        if shadowed is None:
            del scope.add_update
        else:
            scope.add_update = shadowed
        scope.state_mapping.clear()
        scope.state_mapping.update(mapping)
        if hasattr(scope, "assigned"):
            scope.assigned.clear()
            scope.assigned.update(recorded)


def value_in(scope: Any, variable: Any) -> Any:
    """The variable's current value as the code traced so far sees it."""
    value = None if scope is None else scope.state_mapping.get(id(variable))
    return variable.value if value is None else value


def write_back(scope: Any, variables: list, values: list) -> None:
    for variable, value in zip(variables, values):
        if scope is None:
            variable.assign(value)
        else:
            scope.add_update((variable, value))
