"""`concrete_function.graph`: the operations of one traced signature, in the shape TF scripts read a graph.

TF's `ConcreteFunction.graph` is the `FuncGraph` it traced; scripts walk it with `graph.get_operations()`
and `graph.as_graph_def().node` (each node's `name`, `op` and `input`; TF's function guide prints
`f"{node.input} -> {node.name}"` and counts nodes to show a Python loop unrolled). jdist traces the same body
into a JAX program (a jaxpr), so this graph is that program's: a `Placeholder` per input tensor named by its
parameter (observed in TF 2.21: `[] -> a`), a node per JAX operation named after it (`add`, `mul`,
`dot_general`; a second one `add_1`), a `Const` per literal, a `Placeholder` per captured variable and an
`Identity` per output (TF's too). The operations are JAX's, not TF's: their names and counts differ from TF's
graph (TF's `AddV2` is `add` here), while the structure (what feeds what, a loop unrolled or not) is the
program's own. A signature that has no traced program (string tensors, or a body that runs as Python) has no
graph: that is an AttributeError saying so.
"""
from __future__ import annotations

from typing import Any


class NodeDef:
    """One node of `GraphDef.node`: `name`, `op` and `input` (the names of the nodes feeding it)."""

    def __init__(self, name: str, op: str, inputs: list[str]):
        self.name, self.op, self.input = name, op, list(inputs)

    def __str__(self) -> str:
        rows = [f'  name: "{self.name}"', f'  op: "{self.op}"'] + [f'  input: "{i}"' for i in self.input]
        return "node {\n" + "\n".join(rows) + "\n}"

    def __repr__(self) -> str:
        return f"NodeDef(name={self.name!r}, op={self.op!r}, input={self.input!r})"


class GraphDef:
    """`graph.as_graph_def()`: its `node` list; printing shows each node as TF's text format lists them."""

    def __init__(self, nodes: list[NodeDef]):
        self.node = nodes

    def __str__(self) -> str:
        return "\n".join(str(node) for node in self.node)


class Operation:
    """One of `graph.get_operations()`: `name`, `type` and `node_def`, as TF's `Operation` has."""

    def __init__(self, node: NodeDef):
        self.node_def, self.name, self.type = node, node.name, node.op

    def __repr__(self) -> str:
        return f"<jdist.Operation '{self.name}' type={self.type}>"


class Graph:
    """A traced program's operations (see the module docstring)."""

    def __init__(self, jaxpr: Any, input_names: list[str]):
        self._nodes = _nodes(jaxpr, input_names)

    def as_graph_def(self) -> GraphDef:
        return GraphDef(list(self._nodes))

    def get_operations(self) -> list[Operation]:
        return [Operation(node) for node in self._nodes]


def _nodes(closed: Any, input_names: list[str]) -> list[NodeDef]:
    jaxpr = closed.jaxpr
    taken: dict[str, int] = {}
    nodes: list[NodeDef] = []

    def unique(base: str) -> str:
        count = taken.get(base, 0)
        taken[base] = count + 1
        return base if count == 0 else f"{base}_{count}"

    producer: dict[Any, str] = {}
    for index, var in enumerate(jaxpr.invars):
        name = unique(input_names[index] if index < len(input_names) else "resource")
        nodes.append(NodeDef(name, "Placeholder", []))
        producer[var] = name
    for var in jaxpr.constvars:
        name = unique("Const")
        nodes.append(NodeDef(name, "Const", []))
        producer[var] = name

    def source(atom: Any) -> str:
        if type(atom).__name__ == "Literal":
            name = unique("Const")
            nodes.append(NodeDef(name, "Const", []))
            return name
        return producer[atom]

    for eqn in jaxpr.eqns:
        inputs = [source(atom) for atom in eqn.invars]
        name = unique(eqn.primitive.name)
        nodes.append(NodeDef(name, eqn.primitive.name, inputs))
        for var in eqn.outvars:
            producer[var] = name
    for atom in jaxpr.outvars:
        nodes.append(NodeDef(unique("Identity"), "Identity", [source(atom)]))
    return nodes
