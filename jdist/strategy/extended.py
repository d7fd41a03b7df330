"""`strategy.extended`: TF's lower-level half of a strategy (`tf.distribute.StrategyExtended`).

Scripts and custom optimizers reach for it to ask where work runs (`worker_devices`), who writes
files (`should_checkpoint`), and to reduce or update values by hand (`reduce_to`, `update`, usually
inside `get_replica_context().merge_call`). Behaviour follows TF 2.21 (observed with two logical CPUs,
`tests/test_strategy_extended.py`). One difference is by design: TF keeps one copy of a mirrored
variable per device, and an update given different values per replica leaves the copies different,
with reads showing device 0's. jdist keeps one copy: a concrete per-replica argument whose components
differ is refused, and inside `run` replica 0's value is the one applied (what TF's reads show).
"""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import jax
import jax.core
import jax.numpy as jnp
import numpy as np

from jdist.strategy import context
from jdist.strategy.devices import tf_device_name
from jdist.strategy.reduce_op import ReduceOp
from jdist.strategy.values import is_per_replica, mark_mirrored

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy

_CROSS_REPLICA_ONLY = "Method requires being in cross-replica context, use get_replica_context().merge_call()"


class StrategyExtended:
    """What `strategy.extended` answers: devices, writer roles and hand-made reductions and updates."""

    def __init__(self, strategy: "Strategy"):
        self._strategy = strategy

    # ------------------------------------------------------------- devices and roles
    @property
    def worker_devices(self) -> tuple[str, ...]:
        """This process's devices of the strategy, by TF's names ('/job:localhost/replica:0/task:0/device:CPU:0')."""
        return tuple(tf_device_name(d) for d in self._local_devices())

    @property
    def worker_devices_by_replica(self) -> list[list[str]]:
        return [[name] for name in self.worker_devices]

    @property
    def parameter_devices(self) -> tuple[str, ...]:
        """Where variables live: every replica's device (a copy each), unless the strategy keeps them elsewhere."""
        return self._strategy._parameter_device_names() or self.worker_devices

    def non_slot_devices(self, var_list: Sequence[Any]) -> tuple[str, ...]:
        del var_list  # one placement for every variable of a strategy
        return self.parameter_devices

    def _local_devices(self) -> list:
        here = jax.process_index()
        return [d for d in self._strategy.mesh.devices.flat if d.process_index == here]

    @property
    def should_checkpoint(self) -> bool:
        return self._strategy.should_checkpoint

    @property
    def should_save_summary(self) -> bool:
        return self._strategy.should_save_summary

    @property
    def experimental_should_init(self) -> bool:
        return True

    @property
    def experimental_between_graph(self) -> bool:
        """True where each worker process runs its own copy of the program (TF's between-graph strategies)."""
        return self._strategy._between_graph

    @property
    def experimental_require_static_shapes(self) -> bool:
        return self._strategy._require_static_shapes

    @property
    def experimental_enable_get_next_as_optional(self) -> bool:
        return True

    def _in_multi_worker_mode(self) -> bool:
        """Whether the strategy spans several worker processes (Keras and TF's tutorials ask this)."""
        return self._strategy._between_graph and jax.process_count() > 1

    # ------------------------------------------------------------------- variables
    def variable_created_in_scope(self, v: Any) -> bool:
        """Whether `v` was made under this strategy (TF's; a variable made outside every scope belongs to the
        default strategy): the strategy a `tf.Variable` records, else where its value is placed."""
        owner = getattr(v, "_jdist_strategy", None)  # a weak reference to it
        if callable(owner):
            return owner() is self._strategy
        sharding = getattr(_value_of(v), "sharding", None)
        return getattr(sharding, "mesh", None) == self._strategy.mesh

    def value_container(self, value: Any) -> Any:
        return value  # one object holds every replica's view of a variable here

    def read_var(self, v: Any) -> Any:
        """`v`'s current value, as one array."""
        value = _value_of(v)
        if value is None:
            raise TypeError(f"read_var() needs a variable; got {type(v).__name__}.")
        return value

    @contextlib.contextmanager
    def colocate_vars_with(self, colocate_with_variable: Any) -> Iterator[None]:
        """Accepted as TF's: variables made inside are placed as the strategy places every variable."""
        del colocate_with_variable
        yield

    # ------------------------------------------------------------------ reductions
    def _require_cross_replica(self) -> None:
        if context.in_replica_context():
            raise RuntimeError(_CROSS_REPLICA_ONLY)

    def reduce_to(self, reduce_op: ReduceOp | str, value: Any, destinations: Any, options: Any = None) -> Any:
        """Combines a per-replica `value` into one, as `strategy.reduce`; a plain value is one copy of
        itself, which MEAN keeps and SUM refuses (TF's ValueError) when there are several replicas."""
        del destinations, options  # every result is placed where the strategy's variables are
        self._require_cross_replica()
        op = ReduceOp.from_value(reduce_op)
        if any(is_per_replica(x) for x in jax.tree.leaves(value, is_leaf=is_per_replica)):
            return self._strategy.reduce(op, value, axis=None)
        if op is ReduceOp.SUM and self._strategy.num_replicas_in_sync > 1:
            raise ValueError(
                f"A non-DistributedValues value {value} cannot be reduced with the given reduce op {op}. "
                "Pass a per-replica value (a run() result), or reduce with MEAN."
            )
        return _read(value)

    def batch_reduce_to(self, reduce_op: ReduceOp | str, value_destination_pairs: Sequence[tuple[Any, Any]],
                        options: Any = None) -> list:
        return [self.reduce_to(reduce_op, value, dest, options) for value, dest in value_destination_pairs]

    def broadcast_to(self, tensor: Any, destinations: Any) -> Any:
        """`tensor` placed on every replica's device."""
        del destinations
        self._require_cross_replica()
        if isinstance(tensor, jax.core.Tracer):
            return tensor
        return mark_mirrored(jax.device_put(jnp.asarray(tensor), self._strategy.replicated_sharding()))

    # --------------------------------------------------------------------- updates
    def update(self, var: Any, fn: Callable[..., Any], args: Sequence[Any] = (),
               kwargs: Mapping[str, Any] | None = None, group: bool = True) -> Any:
        """Runs `fn(var, *args, **kwargs)` once on the variable; in replica context through `merge_call`,
        as TF does. Returns `fn`'s result (`group=False`: one per worker device, as TF's tuple)."""
        kwargs = dict(kwargs or {})
        replica_context = context.get_replica_context() if context.in_replica_context() else None
        if replica_context is not None:
            return replica_context.merge_call(
                lambda strategy, *a, **k: strategy.extended.update(var, fn, a, k, group), args=tuple(args),
                kwargs=kwargs)
        call_args, call_kwargs = jax.tree.map(_one_value, (tuple(args), kwargs), is_leaf=is_per_replica)
        return self._grouped(fn(var, *call_args, **call_kwargs), group)

    def update_non_slot(self, colocate_with: Any, fn: Callable[..., Any], args: Sequence[Any] = (),
                        kwargs: Mapping[str, Any] | None = None, group: bool = True) -> Any:
        del colocate_with
        self._require_cross_replica()
        return self._grouped(fn(*args, **dict(kwargs or {})), group)

    def _grouped(self, result: Any, group: bool) -> Any:
        """`result`, or with `group=False` TF's tuple of one result per worker device."""
        return result if group else (result,) * max(1, len(self._local_devices()))

    def call_for_each_replica(self, fn: Callable[..., Any], args: Sequence[Any] = (),
                              kwargs: Mapping[str, Any] | None = None) -> Any:
        return self._strategy.run(fn, args=tuple(args), kwargs=dict(kwargs or {}))

    def __repr__(self) -> str:
        return f"{type(self._strategy).__name__}.extended"


def _value_of(v: Any) -> Any:
    value = getattr(v, "value", None)
    return None if callable(value) else value


def _read(value: Any) -> Any:
    inner = _value_of(value)
    return value if inner is None else inner


def _one_value(x: Any) -> Any:
    """The value an update applies for a per-replica argument: the components when they agree; inside
    `run` (traced) replica 0's, which is what TF's reads of its device copies return."""
    if not is_per_replica(x):
        return x
    parts = x.values
    if any(isinstance(p, jax.core.Tracer) for p in jax.tree.leaves(parts)):
        return parts[0]
    first = np.asarray(parts[0])
    if any(not np.array_equal(first, np.asarray(p)) for p in parts[1:]):
        raise ValueError(
            f"update() got a per-replica argument whose replicas hold different values "
            f"({[np.asarray(p).tolist() for p in parts]}); a variable keeps one value for every replica. "
            "Reduce it first, e.g. strategy.extended.reduce_to(tf.distribute.ReduceOp.SUM, value, var), "
            "and update with the result."
        )
    return first  # on the host: the variable's own placement applies when it is assigned
