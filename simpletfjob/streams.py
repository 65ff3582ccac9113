"""The process's standard streams, set up once by the console script.

- A standard stream that was closed at start (`>&-`, `2>&-`) gets /dev/null on its
  descriptor, so that the next file opened (a temporary output file, say) cannot
  take descriptor 1 or 2 and receive messages or YAML meant for the stream.
  Writing to a closed stdout still fails, as it should; a closed stderr drops
  messages.
- stderr never fails a run: what cannot be written there (closed, full, a
  broken pipe) is dropped.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys

# Descriptors of the standard streams that were closed when the process started.
closed_at_start: frozenset[int] = frozenset()


class _ClosedRaw(io.RawIOBase):
    """The stdout of a process started with stdout closed: every write fails as on a closed descriptor."""

    def writable(self) -> bool:
        return True

    def write(self, data: object) -> int:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))


class _DroppingStderr(io.TextIOWrapper):
    """stderr that drops what it cannot write: a closed, full or broken stderr never fails a run."""

    def write(self, text: str) -> int:
        try:
            return super().write(text)
        except (OSError, ValueError):
            return len(text)

    def flush(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            super().flush()


def guard_standard_streams() -> None:
    """Put /dev/null on closed standard descriptors and make stderr forgiving; see the module doc."""
    global closed_at_start
    closed = set()
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            closed.add(fd)
            # Opened in order 0, 1, 2, /dev/null takes the lowest free descriptor: this one.
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    closed_at_start = frozenset(closed)
    if 1 in closed:
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(_ClosedRaw()), encoding="utf-8")
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    with contextlib.suppress(OSError, ValueError):
        if sys.stderr is not None:
            sys.stderr.flush()
    sys.stderr = _DroppingStderr(
        open(2, "wb", closefd=False),  # noqa: SIM115 (lives as long as the process)
        encoding=encoding,
        errors="backslashreplace",
        line_buffering=True,
    )
