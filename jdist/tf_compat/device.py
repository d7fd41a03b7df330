"""`tf.device(name)`: arrays made in the block go to that device, with TF's soft placement.

TF 2.21 (observed, eager, on one CPU): `'/CPU:0'`, `'cpu:0'`, `'/device:CPU:0'`, `'CPU'`, `''`, `None` and
`'/job:localhost/replica:0/task:0/device:CPU:0'` are accepted; a device the machine lacks (`'/GPU:0'`,
`'/TPU:0'`, `'/CPU:1'`) is not an error, the ops run on the default device instead; `'foo'` raises
ValueError "Unknown attribute 'foo' is encountered while parsing the device spec: 'foo'."; a function
raises RuntimeError "tf.device does not support functions.". jdist enters `jax.default_device` for a device
JAX has and, for one it lacks, keeps the default device as TF does, with a warning naming what exists.
With `tf.config.set_soft_device_placement(False)` a missing device is TF's InvalidArgumentError instead.
jdist's host ops (`tf.constant`, `tf.matmul` outside compiled code) are numpy: they run on the host
wherever the block says.
"""
from __future__ import annotations

import contextlib
import re
import warnings
from typing import Iterator

import jax

from jdist import resolve_device
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tfdata import host_device

_TYPES = ("CPU", "GPU", "TPU")
_NAMED = re.compile(r"(job:[^/:]+|replica:\d+|task:\d+|device:[A-Za-z_]+(:(\d+|\*))?)$", re.IGNORECASE)
_HOST = "/job:localhost/replica:0/task:0"
_SHORT = re.compile(r"([A-Za-z_]+)(:(\d+|\*))?$")


def _device_part(spec: str) -> str | None:
    """The `TYPE:index` part of a TF device spec, None when it names no device; ValueError when not a spec."""
    device = None
    for part in filter(None, spec.split("/")):
        short = _SHORT.match(part)
        if _NAMED.match(part):
            if part.lower().startswith("device:"):
                device = part[len("device:"):]
        elif short and short.group(1).upper() in _TYPES:
            device = part
        else:
            key = part.split(":")[0]
            raise ValueError(f"Unknown attribute '{key}' is encountered while parsing the device spec: '{spec}'.")
    return device


def _refuse_without_soft_placement(part: str) -> None:
    """TF 2.21 with `tf.config.set_soft_device_placement(False)` (observed): an op on a device the machine lacks
    is InvalidArgumentError "Could not satisfy device specification ..."; jdist raises it entering the block."""
    from jdist.tf_compat import config_switches, device_config  # config_switches imports after this module

    if config_switches.get_soft_device_placement():
        return
    kind, _, index = part.partition(":")
    wanted = f"{_HOST}/device:{kind.upper()}:{index or 0}"
    present = device_config.list_logical_devices()
    types = ", ".join(dict.fromkeys(d.device_type for d in present))
    names = ", ".join(_HOST + d.name for d in present)
    raise InvalidArgumentError(message=(
        f"Could not satisfy device specification '{wanted}'. enable_soft_placement=0. Supported device types "
        f"[{types}]. All available devices [{names}]. Name a device the machine has, or call "
        "tf.config.set_soft_device_placement(True) to run the block on the default device."))


@contextlib.contextmanager
def device(device_name: str | None) -> Iterator[None]:
    """`with tf.device('/GPU:0'):` places the block's JAX arrays there (`jax.default_device`)."""
    if callable(device_name):
        raise RuntimeError("tf.device does not support functions.")
    if device_name is not None and not isinstance(device_name, str):
        raise ValueError(f"tf.device takes a device name such as '/CPU:0', got {device_name!r}.")
    part = _device_part(device_name or "")
    if part is None:
        yield
        return
    try:
        target = resolve_device(part.replace("*", "0"))
    except ValueError as missing:  # TF's soft placement: the default device
        _refuse_without_soft_placement(part)
        warnings.warn(f"tf.device({device_name!r}): {missing} The block runs on the default device, as "
                      "TensorFlow's soft placement does.", stacklevel=3)
        yield
        return
    with jax.default_device(target), host_device.scope(part):  # host tensors record it (TF's `t.device`)
        yield
