"""`tf.DeviceSpec`: TF's parsed device name ("/job:worker/replica:0/task:1/device:GPU:0"), immutable.

Parsing follows TF 2.21 (observed): "/cpu:0" and "GPU:0" are device "CPU" / "GPU" with an index, a type is
upper-cased, "*" is any index (None), "" is the empty spec, and an unknown part ("/foo:3") is TF's ValueError.
`tf.device` takes a spec's `to_string()`.
"""
from __future__ import annotations

from typing import Any

_FIELDS = ("job", "replica", "task", "device_type", "device_index")


def _index(value: Any) -> int | None:
    return None if value is None or value == "*" else int(value)


class DeviceSpec:
    """`tf.DeviceSpec(job=None, replica=None, task=None, device_type=None, device_index=None)`."""

    __slots__ = ("_job", "_replica", "_task", "_device_type", "_device_index")

    def __init__(self, job: str | None = None, replica: int | None = None, task: int | None = None,
                 device_type: str | None = None, device_index: int | None = None):
        self._job = None if job is None else str(job)
        self._replica, self._task, self._device_index = _index(replica), _index(task), _index(device_index)
        self._device_type = None if device_type is None else (
            device_type.upper() if device_type.upper() in ("CPU", "GPU", "TPU") else device_type)

    job = property(lambda self: self._job)
    replica = property(lambda self: self._replica)
    task = property(lambda self: self._task)
    device_type = property(lambda self: self._device_type)
    device_index = property(lambda self: self._device_index)

    @classmethod
    def from_string(cls, spec: str) -> "DeviceSpec":
        """A spec from TF's text: "/job:ps/task:2", "/device:GPU:1", "/cpu:0", "CPU"."""
        return cls(**cls._parse(spec))

    def parse_from_string(self, spec: str) -> "DeviceSpec":
        """This spec with the fields `spec` names replaced (TF's method)."""
        return self.replace(**self._parse(spec))

    @staticmethod
    def _parse(spec: str) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        for part in filter(None, (spec or "").split("/")):
            pieces = part.split(":")
            key = pieces[0].lower()
            if key in ("job", "replica", "task") and len(pieces) == 2:
                fields[key] = pieces[1]
            elif key == "device" and len(pieces) in (2, 3):
                fields["device_type"] = pieces[1]
                fields["device_index"] = pieces[2] if len(pieces) == 3 else None
            elif key.upper() in ("CPU", "GPU", "TPU") and len(pieces) in (1, 2):
                fields["device_type"] = key
                fields["device_index"] = pieces[1] if len(pieces) == 2 else None
            else:
                raise ValueError(f"Unknown attribute '{pieces[0]}' is encountered while parsing the device spec: "
                                 f"'{spec}'.")
        return fields

    def to_string(self) -> str:
        """TF's text: "/job:worker/replica:0/task:1/device:GPU:0"; an unset index of a type is "*"."""
        parts = [f"/{key}:{value}" for key, value in (("job", self._job), ("replica", self._replica),
                                                        ("task", self._task)) if value is not None]
        if self._device_type is not None:
            index = "*" if self._device_index is None else self._device_index
            parts.append(f"/device:{self._device_type}:{index}")
        return "".join(parts)

    def replace(self, **kwargs: Any) -> "DeviceSpec":
        """A copy with the given fields changed (TF's TypeError for another keyword)."""
        fields = {name: getattr(self, name) for name in _FIELDS}
        for key in kwargs:
            if key not in fields:
                raise TypeError(f"DeviceSpecV2.__init__() got an unexpected keyword argument '{key}'")
        return DeviceSpec(**{**fields, **kwargs})

    def make_merged_spec(self, dev: "DeviceSpec") -> "DeviceSpec":
        """This spec with `dev`'s set fields taking over."""
        return self.replace(**{name: getattr(dev, name) for name in _FIELDS if getattr(dev, name) is not None})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DeviceSpec) and other.to_string() == self.to_string()

    def __hash__(self) -> int:
        return hash(self.to_string())

    def __repr__(self) -> str:
        return (f"<DeviceSpec(job={self._job}, replica={self._replica}, task={self._task}, "
                f"device_type={self._device_type}, device_index={self._device_index})>")
