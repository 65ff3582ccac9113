"""Output: where the documents go, and writing them there, atomically or into an open stream.

Nothing is written until every document has passed its checks (manifest/documents.py).
A file is replaced atomically (a temporary file beside it, then a rename); a
device, a FIFO or a stream that is already open (stdout, /dev/fd/N) is written
in place. The output may never be one of the run's input files.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from simpletfjob import streams
from simpletfjob.errors import Interrupted, OutputError, ReaderGone, UsageError
from simpletfjob.streams import STREAM_NAMES, stream_fd, stream_name


def encoded(chunks: Iterable[str]) -> Iterator[bytes]:
    return (chunk.encode() for chunk in chunks)


class Destination(NamedTuple):
    """Where the documents go: a file (replaced atomically) or a stream that is already open."""

    shown: str  # in messages and the summary: 'stdout', or the path as given
    path: str | None = None  # a file; a device or a FIFO at this path is written in place
    fd: int | None = None  # an open stream: stdout for '-', or /dev/stderr, /dev/fd/N ...

    @property
    def subject(self) -> str:
        """How a message names it: 'stdout', 'stderr', or "output 'out.yaml'"."""
        if self.fd is not None and (self.fd in STREAM_NAMES or self.shown == "stdout"):
            return stream_name(self.fd)
        return f"output {self.shown!r}"


STDOUT = Destination("stdout", fd=1)


def destination(output: str, directory_hint: str | None = None) -> Destination:
    """Where `-o OUTPUT` writes, checked as far as it can be before anything is rendered.
    '-' is stdout. A path that names an open stream (/dev/stdout, /dev/fd/N) is written into
    where it stands, never truncated or renamed. Any other path is a file, replaced
    atomically. `directory_hint` is the file name suggested when OUTPUT is a directory."""
    if output == "-":
        dest = STDOUT
    elif not output:
        raise UsageError("-o needs a file name, or '-' for stdout")
    else:
        fd = stream_fd(output)
        dest = Destination(output, fd=fd) if fd is not None else Destination(output, path=output)
    if dest.fd is not None:
        _check_stream(dest.fd)
    else:
        assert dest.path is not None
        _check_file_target(dest.path, directory_hint)
    return dest


def _check_stream(fd: int) -> None:
    if fd in streams.env.closed_at_start:
        # /dev/null stands in for it (see streams.guard_standard_streams); writing
        # there would lose the documents without a word.
        raise OutputError(f"cannot write to {stream_name(fd)}: {os.strerror(errno.EBADF)}")
    try:
        os.fstat(fd)
    except OSError as e:
        raise OutputError(f"cannot write to {stream_name(fd)}: {e.strerror or e}") from e
    except OverflowError as e:  # /dev/fd/99999999999: no descriptor has that number
        raise OutputError(f"cannot write to {stream_name(fd)}: {os.strerror(errno.EBADF)}") from e


def _check_file_target(shown: str, directory_hint: str | None = None) -> None:
    """The path can name a new or replaced file: not a directory, in a directory that exists."""
    path = _target(shown)
    if os.path.isdir(path):
        hint = ""
        if directory_hint:
            hint = f"; give a file name, such as {os.path.join(shown, directory_hint)!r}"
        raise OutputError(f"output {shown!r} is a directory{hint}")
    directory = os.path.dirname(path) or "."
    try:
        status = os.stat(directory)
    except OSError as e:
        problem = _missing_directory(directory, e)
        raise OutputError(f"cannot write {shown!r}: {problem}") from e
    if not stat.S_ISDIR(status.st_mode):
        raise OutputError(f"cannot write {shown!r}: {directory!r} is not a directory")
    for fd in (1, 2):
        mine = None if fd in streams.env.closed_at_start else _identity(fd)
        if mine is not None and _identity(path) == mine:
            name = stream_name(fd)
            raise OutputError(
                f"output {shown!r} is the file {name} is redirected to; "
                f"write -o - to send the documents there, or choose another -o"
                if fd == 1
                else f"output {shown!r} is the file {name} is redirected to, where messages go; "
                "choose another -o"
            )


def _target(shown: str) -> str:
    """The file that gets replaced: through a symlink, the file it points to, not the link."""
    if not os.path.islink(shown):
        return shown
    try:
        return os.path.realpath(shown)
    except OSError as e:  # a part of the link's target that may not be looked into
        raise OutputError(f"cannot write {shown!r}: {e.strerror or e}") from e


def _missing_directory(directory: str, error: OSError) -> str:
    """Why `directory` cannot hold the output: the first part of it that is missing or not a directory."""
    if error.errno not in (errno.ENOENT, errno.ENOTDIR):
        return f"cannot reach directory {directory!r}: {error.strerror or error}"
    parent = os.path.dirname(directory)  # up to the first that exists, if one does
    while parent and parent != os.path.dirname(parent) and not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    if parent and os.path.lexists(parent) and not os.path.isdir(parent):
        return f"{parent!r} is not a directory"
    return f"directory {directory!r} does not exist"


def _identity(file: str | int) -> tuple[int, int] | None:
    """(device, inode) of the regular file at a path (through symlinks) or open on a
    descriptor; None for anything else (a pipe, a terminal, closed, missing)."""
    try:
        status = os.stat(file)
    except (OSError, ValueError):
        return None
    return (status.st_dev, status.st_ino) if stat.S_ISREG(status.st_mode) else None


def spare_inputs_from_stderr(inputs: Iterable[tuple[str, str | None]]) -> None:
    """Drop the messages when stderr is redirected into a file the run reads (`2>>mnist.yaml`):
    stderr gets /dev/null, as a closed one does, and the run goes on."""
    mine = _identity(2)
    if mine is None or 2 in streams.env.closed_at_start:
        return
    if any(path is not None and _identity(path) == mine for _, path in inputs):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stderr.flush()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)


def refuse_inputs(dest: Destination, inputs: Iterable[tuple[str, str | None]]) -> None:
    """The output must not be any file the run reads, compared by file identity.
    Device and inode, after symlinks, of regular files; `inputs` are (what, path) pairs,
    such as ('template', 'mnist.yaml')."""
    mine = _identity(dest.fd if dest.fd is not None else dest.path or "")
    if mine is None:
        return
    for what, path in inputs:
        if path is None or _identity(path) != mine:
            continue
        if dest.fd is not None and dest.subject in ("stdout", "stderr"):
            raise OutputError(
                f"{dest.subject} is redirected to {path!r}, the {what}; "
                "redirect it elsewhere, or choose a file with -o"
            )
        if os.path.abspath(path) == os.path.abspath(dest.shown):
            same = f"the {what}"
        else:
            same = f"the same file as {path!r}, the {what}"
        raise OutputError(f"{dest.subject} is {same}; choose another -o")


def write_to(dest: Destination, chunks: Iterable[str]) -> None:
    """Write every chunk to the destination, all or nothing where it is a file."""
    if dest.fd is not None:
        write_stream(dest.fd, encoded(chunks))
    else:
        assert dest.path is not None
        write_atomic(dest.path, chunks)


def write_stdout(chunks: Iterable[str]) -> None:
    """Write to stdout; any failure (closed, full, a broken pipe) is one OutputError."""
    write_stream(1, encoded(chunks))


def write_stdout_bytes(chunks: Iterable[bytes]) -> None:
    """Write bytes to stdout as they are (container logs), flushed; failures as write_stdout's."""
    write_stream(1, chunks)


def write_stream(fd: int, chunks: Iterable[bytes]) -> None:
    """Write into an open descriptor where it stands: never truncated, never renamed over.
    A reader gone is ReaderGone; any other failure (closed, full) is one OutputError."""
    if fd == 2:
        sys.stderr.flush()  # the warnings so far come before the documents
    try:
        target = fd
        if fd == 1:  # sys.stdout's, wherever it has been pointed
            sys.stdout.flush()
            out = sys.stdout.buffer
            out.flush()
            try:
                target = out.fileno()
            except (AttributeError, ValueError, OSError):  # not a descriptor (a test's capture)
                for data in chunks:
                    out.write(data)
                out.flush()
                return
        write_all(target, chunks)
    except BrokenPipeError:
        raise ReaderGone(stream_name(fd)) from None
    except OSError as e:
        raise OutputError(f"cannot write to {stream_name(fd)}: {e.strerror or e}") from e


def write_all(fd: int, chunks: Iterable[bytes]) -> None:
    """Every byte of the chunks to the descriptor. os.write in a loop, not a buffered file: a
    signal (the tick) makes a write to a slow pipe partial, and Python's buffered writer (3.11)
    can then drop the rest."""
    for data in chunks:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]


def write_atomic(
    path: str, chunks: Iterable[Any], encode: Callable[[Iterable[Any]], Iterator[bytes]] = encoded
) -> None:
    """Write to a temporary file beside `path` and rename it into place: all or nothing."""
    try:
        _write_atomic(path, chunks, encode)
    except OSError as e:
        raise OutputError(f"cannot write {path!r}: {e.strerror or e}") from e


def write_atomic_bytes(path: str, chunks: Iterable[bytes]) -> None:
    """`write_atomic` of bytes as they are (an archive)."""
    write_atomic(path, chunks, iter)


def _write_atomic(
    shown: str, chunks: Iterable[Any], encode: Callable[[Iterable[Any]], Iterator[bytes]]
) -> None:
    _check_file_target(shown)
    path = _target(shown)
    directory = os.path.dirname(path) or "."
    try:
        status = os.stat(path)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    else:
        if not stat.S_ISREG(status.st_mode):
            # A device or a FIFO (/dev/null, a named pipe) cannot be renamed over:
            # write to it in place, after every check has passed, as for stdout.
            fd = os.open(path, os.O_WRONLY)
            try:
                write_all(fd, encode(chunks))
            except BrokenPipeError:
                raise ReaderGone(repr(shown)) from None
            finally:
                os.close(fd)
            return
        mode = status.st_mode & 0o7777
    # (not tempfile: importing it slows the cold start)
    name = os.path.basename(path)[:200]
    temp = os.path.join(directory, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    created = False
    streams.env.temporary_files.add(temp)  # before it exists: an interrupt may land in the open
    try:
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as e:
            raise OutputError(
                f"cannot write {shown!r}: cannot create a file in directory {directory!r}: "
                f"{e.strerror or e}"
            ) from e
        created = True
        with os.fdopen(fd, "wb") as f:
            for data in encode(chunks):
                f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException as e:
        # An interrupt can land between the open and `created = True`: then the
        # file may exist too. A failed open never created one (O_EXCL).
        if created or isinstance(e, (Interrupted, KeyboardInterrupt)):
            with contextlib.suppress(OSError):
                os.unlink(temp)
        # (Not in a `finally`: a second signal that cuts the unlink short leaves the file
        # listed, and the process removes it on its way out.)
        streams.env.temporary_files.discard(temp)
        raise
    streams.env.temporary_files.discard(temp)
