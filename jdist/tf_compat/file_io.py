"""`tf.io.read_file` and `tf.io.write_file`: a whole file's bytes, through `tf.io.gfile`'s paths and errors.

TF 2.21 (observed): `read_file` gives a string scalar whose `.numpy()` is the file's bytes (binary-safe); a
missing file raises NotFoundError; `write_file` takes bytes or text, makes missing parent directories, and
returns None. Both run on the host (strings have no place in compiled XLA code).
"""
from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np

from jdist.tf_compat import gfile
from jdist.tfdata.structure import HostTensor


def _path(op: str, filename: Any) -> str:
    if isinstance(filename, jax.core.Tracer):  # pyright: ignore[reportAttributeAccessIssue]
        raise ValueError(f"tf.io.{op} runs on the host: inside compiled code there are no strings or files")
    value = np.asarray(filename).reshape(()).item() if not isinstance(filename, (str, bytes, os.PathLike)) \
        else filename
    return os.fsdecode(value)


def read_file(filename: Any, name: str | None = None) -> HostTensor:
    """The file's contents, a string scalar (`.numpy()` gives the bytes)."""
    with gfile.GFile(_path("read_file", filename), "rb") as f:
        data = f.read()
    return HostTensor.of(np.array(data, dtype=object))


def write_file(filename: Any, contents: Any, name: str | None = None) -> None:
    """Writes `contents` (bytes, or text as UTF-8) to the file, replacing it; parent directories are made."""
    path = _path("write_file", filename)
    if not isinstance(contents, (str, bytes)):
        contents = np.asarray(contents).reshape(()).item()
    parent = os.path.dirname(path)
    if parent:
        gfile.makedirs(parent)
    with gfile.GFile(path, "wb") as f:
        f.write(contents.encode() if isinstance(contents, str) else bytes(contents))


NAMES = dict(read_file=read_file, write_file=write_file)
