"""`tf.io.gfile` on local paths: Python's `os` and `shutil` with TF 2.21's rules and errors (observed).

TF scripts make and clean checkpoint and log directories with it (the multi-worker tutorials'
`tf.io.gfile.makedirs` / `rmtree`). Paths are local files (a `file://` prefix is accepted); other
schemes (`gs://`, `s3://`, ...) raise `UnimplementedError` naming what to use. TF's rules kept:
`makedirs` and `mkdir` accept an existing directory, `mkdir` needs its parent, `copy` and `rename`
refuse an existing destination unless `overwrite=True`, `remove` refuses a directory, `rmtree` and
`remove` of a missing path raise `NotFoundError`, `listdir` gives names, `glob` full paths, and
`GFile` opens lazily (a missing file raises at the first read), reads `str` in "r" and `bytes` in "rb",
and writes either.
"""
from __future__ import annotations

import glob as _glob
import os
import shutil
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING

from jdist.tf_compat.error_types import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    UnimplementedError,
)

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, StrOrBytesPath, StrPath


def _local(path: StrOrBytesPath) -> str:
    name = os.fspath(path)
    path = name.decode() if isinstance(name, bytes) else name
    if path.startswith("file://"):
        return path[len("file://"):]
    scheme, sep, _ = path.partition("://")
    if sep and scheme.isidentifier():
        raise UnimplementedError(None, None, (
            f"File system scheme '{scheme}' not implemented (file: '{path}'): jdist's tf.io.gfile works on local "
            "paths. For cloud storage use fsspec (gcsfs, s3fs) or etils.epath directly, or a locally mounted "
            "bucket (gcsfuse)."))
    return path


def _missing(path: str) -> NotFoundError:
    return NotFoundError(None, None, f"{path}; No such file or directory")


def exists(path: StrOrBytesPath) -> bool:
    return os.path.exists(_local(path))


def isdir(path: StrOrBytesPath) -> bool:
    return os.path.isdir(_local(path))


def makedirs(path: StrOrBytesPath) -> None:
    os.makedirs(_local(path), exist_ok=True)


def mkdir(path: StrOrBytesPath) -> None:
    local = _local(path)
    if os.path.isdir(local):
        return
    if not os.path.isdir(os.path.dirname(local) or "."):
        raise _missing(local)
    os.mkdir(local)


def listdir(path: StrOrBytesPath) -> list[str]:
    local = _local(path)
    if not os.path.isdir(local):
        raise NotFoundError(None, None, f"Could not find directory {local}")
    return os.listdir(local)


def glob(pattern: StrOrBytesPath) -> list[str]:
    return _glob.glob(_local(pattern))


def remove(path: StrOrBytesPath) -> None:
    local = _local(path)
    if os.path.isdir(local):
        raise FailedPreconditionError(None, None, f"{local}; Is a directory")
    if not os.path.lexists(local):
        raise _missing(local)
    os.remove(local)


def rmtree(path: StrOrBytesPath) -> None:
    local = _local(path)
    if not os.path.lexists(local):
        raise NotFoundError(None, None, f"{local} not found")
    if os.path.isdir(local) and not os.path.islink(local):
        shutil.rmtree(local)
    else:
        os.remove(local)  # TF 2.21 removes a file given to rmtree


def _check_destination(src: str, dst: str, overwrite: bool) -> None:
    if not os.path.lexists(src):
        raise _missing(src)
    if not overwrite and os.path.lexists(dst):
        raise AlreadyExistsError(None, None, "file already exists")


def copy(src: StrOrBytesPath, dst: StrOrBytesPath, overwrite: bool = False) -> None:
    src, dst = _local(src), _local(dst)
    _check_destination(src, dst, overwrite)
    shutil.copyfile(src, dst)


def rename(src: StrOrBytesPath, dst: StrOrBytesPath, overwrite: bool = False) -> None:
    src, dst = _local(src), _local(dst)
    _check_destination(src, dst, overwrite)
    os.replace(src, dst)


def join(path: StrPath, *paths: StrPath) -> str:
    return os.path.join(path, *paths)


def walk(top: StrOrBytesPath, topdown: bool = True,
         onerror: Callable[[OSError], object] | None = None) -> Iterator[tuple[str, list[str], list[str]]]:
    return os.walk(_local(top), topdown=topdown, onerror=onerror)


class FileStatistics:
    """What `stat` returns: TF's `length`, `mtime_nsec` and `is_directory`."""

    def __init__(self, result: os.stat_result, is_directory: bool):
        self.length, self.mtime_nsec, self.is_directory = result.st_size, result.st_mtime_ns, is_directory


def stat(path: StrOrBytesPath) -> FileStatistics:
    local = _local(path)
    if not os.path.exists(local):
        raise _missing(local)
    return FileStatistics(os.stat(local), os.path.isdir(local))


def get_registered_schemes() -> list[str]:
    return ["", "file"]


_MODES = ("r", "w", "a", "r+", "w+", "a+")


class GFile:
    """`tf.io.gfile.GFile(name, mode='r')`: a file opened at its first use, as TF's."""

    def __init__(self, name: StrOrBytesPath, mode: str = "r"):
        if mode.replace("b", "") not in _MODES:
            raise InvalidArgumentError(None, None, "mode is not 'r' or 'w' or 'a' or 'r+' or 'w+' or 'a+'")
        self.name, self.mode = _local(name), mode
        self._binary = "b" in mode
        self._file: IO[bytes] | None = None

    def _opened(self) -> IO[bytes]:
        if self._file is None:
            if "r" in self.mode and not os.path.exists(self.name):
                raise _missing(self.name)
            self._file = open(self.name, self.mode.replace("b", "") + "b")
        return self._file

    def _decoded(self, data: bytes) -> str | bytes:
        return data if self._binary else data.decode()

    def read(self, n: int = -1) -> str | bytes:
        """`str` in a text mode ("r"), `bytes` in a binary one ("rb")."""
        return self._decoded(self._opened().read(n))

    def readline(self) -> str | bytes:
        return self._decoded(self._opened().readline())

    def readlines(self) -> list[str | bytes]:
        return [self._decoded(line) for line in self._opened().readlines()]

    def __iter__(self) -> Iterator[str | bytes]:
        return iter(self.readlines())

    def write(self, data: str | ReadableBuffer) -> None:
        self._opened().write(data.encode() if isinstance(data, str) else bytes(data))

    def size(self) -> int:
        return os.path.getsize(self.name)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._opened().seek(offset, whence)

    def tell(self) -> int:
        return self._opened().tell()

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> "GFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


NAMES = dict(GFile=GFile, copy=copy, exists=exists, get_registered_schemes=get_registered_schemes, glob=glob,
             isdir=isdir, join=join, listdir=listdir, makedirs=makedirs, mkdir=mkdir, remove=remove, rename=rename,
             rmtree=rmtree, stat=stat, walk=walk)
