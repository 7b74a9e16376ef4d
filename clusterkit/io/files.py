"""Files on disk: atomic output files, and input files that are read only when regular.

A file clusterkit writes is either the complete new content or the old file, never a truncated
mix. Each file is written to a temporary file in its own folder, flushed and fsync'ed, and only then
renamed over the target with :func:`os.replace` (atomic within one file system). Several files
are staged together by :func:`write_all`, which renames none of them unless every one was written.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from typing import Iterable, Union

from clusterkit.errors import ModelLoadError, WriteError

PathLike = Union[str, "os.PathLike[str]"]


def read_input(path: PathLike, what: str = "model") -> bytes:
    """The bytes of an input file. A missing path, a directory or any other non-regular file
    (``/dev/zero``, a FIFO: reading them would never end) is a :class:`ModelLoadError` saying
    ``cannot read WHAT 'PATH': REASON``."""
    path = os.fspath(path)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            kind = "a directory" if os.path.isdir(path) else "not a regular file"
            raise ModelLoadError(f"cannot read {what} {path!r}: it is {kind}")
        with open(path, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # replaced since the check
                raise ModelLoadError(f"cannot read {what} {path!r}: it is not a regular file")
            return fh.read()
    except FileNotFoundError as exc:
        raise ModelLoadError(f"cannot read {what} {path!r}: no such file") from exc
    except OSError as exc:
        raise ModelLoadError(f"cannot read {what} {path!r}: {exc.strerror or exc}") from exc


def write_atomic(path: PathLike, data: str | bytes) -> None:
    """Write ``data`` (text is UTF-8 encoded) to ``path`` atomically, in a folder that exists
    (a missing folder is an error naming it: no folder is ever created).

    Raises :class:`WriteError` naming the path and the operating system's reason; the previous
    file, if any, is then left intact."""
    write_all([(path, data)])


def write_all(outputs: Iterable[tuple[PathLike, str | bytes | Iterable[str]]]) -> None:
    """Write several files atomically as one step: every file is staged first, and the targets
    are replaced only once all of them were written (see :func:`write_atomic`). A file's data
    may also be an iterable of text pieces, written as they come (a large text need not be
    held whole)."""
    staged: list[tuple[str, str]] = []
    try:
        for path, data in outputs:
            staged.append((_stage(os.fspath(path), data), os.fspath(path)))
        while staged:
            tmp, path = staged[0]
            replace_file(tmp, path)
            staged.pop(0)
    finally:
        for tmp, _ in staged:
            _remove(tmp)


def replace_file(tmp: str, path: str) -> None:
    """Rename the finished file ``tmp`` over ``path`` (on the same file system) and sync the
    target's folder."""
    try:
        os.replace(tmp, path)
    except OSError as exc:
        raise write_error(path, exc) from exc
    try:  # make the rename itself durable; not every file system can sync a folder
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def sync_file(path: str) -> None:
    """Flush a file another library wrote to the disk."""
    with open(path, "rb+") as fh:
        os.fsync(fh.fileno())


def _stage(path: str, data: str | bytes | Iterable[str]) -> str:
    """Write ``data`` (or its text pieces, in turn) to a synced temporary file beside ``path``;
    return the temporary's path."""
    pieces = [data] if isinstance(data, (str, bytes, bytearray, memoryview)) else data
    tmp = None
    check_output(path)
    try:
        folder = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                                   dir=folder)
        with os.fdopen(fd, "wb") as fh:
            for piece in pieces:
                fh.write(piece.encode("utf-8") if isinstance(piece, str) else bytes(piece))
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _mode_for(path))
    except OSError as exc:
        if tmp is not None:
            _remove(tmp)
        raise write_error(path, exc) from exc
    except BaseException:  # the pieces' maker failed: no partial file stays behind
        if tmp is not None:
            _remove(tmp)
        raise
    return tmp


def check_output(path: PathLike) -> None:
    """Refuse an output path before anything is made: a directory, or a file in a folder that
    does not exist (named: clusterkit never creates a folder) or is not a folder. Raises
    :class:`WriteError` (``cannot write 'PATH': ...``)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise write_error(path, IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR)))
    folder = os.path.dirname(path)
    if folder and not os.path.exists(folder):
        raise WriteError(f"cannot write {path!r}: the folder {folder!r} does not exist")
    if folder and not os.path.isdir(folder):
        raise write_error(path, NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR)))


def check_outputs(paths: Iterable[PathLike | None] = (),
                  folders: Iterable[PathLike | None] = ()) -> None:
    """:func:`check_output` for each given path (``None``: the flag was not given), and for each
    output folder (``--dump-dot DIR``) that it exists and is a folder."""
    for path in paths:
        if path is not None:
            check_output(path)
    for folder in folders:
        if folder is None:
            continue
        folder = os.fspath(folder)
        if not os.path.exists(folder):
            raise WriteError(f"cannot write into {folder!r}: the folder does not exist")
        if not os.path.isdir(folder):
            raise WriteError(f"cannot write into {folder!r}: it is not a folder")


def _mode_for(path: str) -> int:
    """The permission bits the file would get from a plain ``open(path, "w")``: the existing
    file's, or 0o666 less the umask."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_error(path: str | os.PathLike, exc: BaseException) -> WriteError:
    """The error for an output that could not be written: ``cannot write 'PATH': REASON``."""
    reason = exc.strerror if isinstance(exc, OSError) else None
    reason = reason or str(exc) or type(exc).__name__
    return WriteError(f"cannot write {os.fspath(path)!r}: {reason}")


def _remove(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass
