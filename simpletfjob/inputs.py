"""Reading input files: a size cap, binary refused, a pipe read once; and values described for messages.

Every input (template, values file, host list, NodeList, kubeconfig) is read here,
so each failure is one line that names the file. kube/ reads kubeconfigs with these
and may import no other module of simpletfjob but errors.py, streams.py and yamlload.py.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from typing import Any

from simpletfjob import streams
from simpletfjob.errors import InputError

# How much of an input file is read: far above any real input (a saved NodeList of 10,000
# nodes is about 200 MB, other inputs a few MB), so /dev/zero, `<(yes)` or a huge file
# named by mistake is refused at once instead of filling the memory.
INPUT_LIMIT = 16 << 20
NODE_LIST_LIMIT = 1 << 30
_CHUNK = 1 << 20


def _check_pipe_unread(path: str, what: str, pipes_read: dict[tuple[int, int], str]) -> None:
    """A pipe is read once: a second input naming it (/dev/stdin twice) would read nothing.
    Checked with stat before opening, which never waits for a named pipe's writer."""
    try:
        status = os.stat(path)
    except OSError:
        return  # the open says what is wrong
    if not (stat.S_ISFIFO(status.st_mode) or stat.S_ISSOCK(status.st_mode)):
        return
    key = (status.st_dev, status.st_ino)
    earlier = pipes_read.get(key)
    if earlier is not None:
        raise InputError(
            f"{what} {path!r} is the pipe that the {earlier} was read from already; "
            "a pipe can be read only once, so give each input its own file or pipe"
        )
    pipes_read[key] = f"{what} {path!r}"


def read_bytes(path: str, what: str, limit: int = INPUT_LIMIT) -> bytes:
    """Read a whole input file, naming it in every failure.
    A file larger than `limit` bytes, or with a NUL byte (binary, /dev/zero), is refused; a
    stream is read in chunks, so that is seen early. A stream closed at start (/dev/stdin
    after `<&-`) is refused, not read as the /dev/null that stands in for it."""
    fd = streams.stream_fd(path)
    if fd is not None and fd in streams.env.closed_at_start:
        raise InputError(
            f"cannot read {what} {path!r}: {streams.stream_name(fd)} is closed "
            f"({os.strerror(errno.EBADF)})"
        )
    _check_pipe_unread(path, what, streams.env.pipes_read)
    try:
        with open(path, "rb") as f:
            status = os.fstat(f.fileno())
            if stat.S_ISREG(status.st_mode):
                if status.st_size > limit:
                    raise _too_large(path, what, limit)
                data = f.read()
            else:
                data = _read_stream(f, path, what, limit)
    except FileNotFoundError:
        raise InputError(f"{what} {path!r} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{what} {path!r} is a directory, not a file") from None
    except OSError as e:
        raise InputError(f"cannot read {what} {path!r}: {e.strerror or e}") from e
    if len(data) > limit:  # a regular file that grew while it was read
        raise _too_large(path, what, limit)
    nul = data.find(b"\0")
    if nul >= 0:
        raise _binary(path, what, nul)
    return data


def _read_stream(f: Any, path: str, what: str, limit: int) -> bytes:
    chunks = []
    size = 0
    while size <= limit:
        chunk = f.read1(min(_CHUNK, limit + 1 - size))
        if not chunk:
            break
        nul = chunk.find(b"\0")
        if nul >= 0:
            raise _binary(path, what, size + nul)
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise _too_large(path, what, limit)
    return b"".join(chunks)


def _too_large(path: str, what: str, limit: int) -> InputError:
    size = f"{limit >> 30} GiB" if limit >= 1 << 30 else f"{limit >> 20} MiB"
    return InputError(
        f"{what} {path!r} is larger than {size}, the limit for it; see Limits in the README"
    )


def _binary(path: str, what: str, at: int) -> InputError:
    return InputError(f"{what} {path!r} is not UTF-8 text (byte {at} is NUL: a binary file?)")


def read_text(path: str, what: str) -> str:
    """Read a UTF-8 input file, turning every failure into one line that names it."""
    return decode_text(read_bytes(path, what), path, what)


def decode_text(data: bytes, path: str, what: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(
            f"{what} {path!r} is not UTF-8 text (byte {e.start} cannot be decoded)"
        ) from e


def describe_value(value: object) -> str:
    """'a list', 'a string \'x\'', 'an integer 4'... for messages about a value of the wrong type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {shown!r}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"
