"""`tf.saved_model.SaveOptions` / `LoadOptions`: TF's fields, of which jdist honours where the files are read."""
from __future__ import annotations

import dataclasses
from typing import Any

_LOCAL = (None, "/job:localhost", "/job:localhost/replica:0/task:0", "/job:localhost/device:CPU:0",
          "/job:localhost/replica:0/task:0/device:CPU:0")


def _check_io_device(device: Any, what: str) -> None:
    # TF reads and writes through the named device's host; jdist's files are read by the calling process,
    # which is what '/job:localhost' asks for (the tutorial's use, for Cloud TPU workers).
    if device not in _LOCAL:
        raise ValueError(f"{what}(experimental_io_device={device!r}): jdist reads and writes SavedModel files "
                         "in the calling process, which is TF's '/job:localhost'; pass that (or nothing), "
                         "and run the save or load on the host that holds the files.")


@dataclasses.dataclass
class SaveOptions:
    """`tf.saved_model.SaveOptions`; `namespace_whitelist`, `save_debug_info`, `function_aliases` are TF-graph
    options, kept and unused."""

    namespace_whitelist: Any = None
    save_debug_info: bool = False
    function_aliases: Any = None
    experimental_io_device: Any = None
    experimental_variable_policy: Any = None
    experimental_custom_gradients: bool = True
    experimental_image_format: bool = False
    experimental_skip_saver: bool = False
    experimental_sharding_callback: Any = None
    extra_tags: Any = None

    def __post_init__(self):
        _check_io_device(self.experimental_io_device, "SaveOptions")


@dataclasses.dataclass
class LoadOptions:
    """`tf.saved_model.LoadOptions`."""

    allow_partial_checkpoint: bool = False
    experimental_io_device: Any = None
    experimental_load_function_aliases: bool = False
    experimental_variable_policy: Any = None
    experimental_skip_checkpoint: bool = False

    def __post_init__(self):
        _check_io_device(self.experimental_io_device, "LoadOptions")
