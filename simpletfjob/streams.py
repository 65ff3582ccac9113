"""The process's standard streams and signals, set up once by the console script.

- A standard stream that was closed at start (`>&-`, `2>&-`) gets /dev/null on its
  descriptor, so that the next file opened (a temporary output file, say) cannot
  take descriptor 1 or 2 and receive messages or YAML meant for the stream.
  Writing to a closed stdout still fails, as it should; a closed stderr drops
  messages.
- stderr never fails a run: what cannot be written there (closed, full, a
  broken pipe) is dropped.
- SIGINT, SIGTERM and SIGHUP raise `Interrupted`, which unwinds like any
  exception (a temporary output file is removed on the way) and is reported as
  one line with the exit status a shell gives a process killed by the signal.
  No signal is ever ignored once the handlers are in: a second one, while the
  first unwinds (a cleanup that waits on a slow server), raises `Interrupted`
  again, with the first one's status, so that what is under way stops and says
  where it stopped; a third ends the process at once, as kubectl and helm end on
  a second Ctrl-C. A temporary output file is removed whichever way it ends.
- A tick (SIGALRM, four times a second) interrupts whatever the process waits in.
  Python runs a signal's handler between bytecodes, so a signal that lands just
  before a blocking call (reading a named pipe, writing to a full one) would
  otherwise wait until that call returns, which may be never.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
from types import FrameType

from simpletfjob.errors import Interrupted

try:
    # The C module that `signal` wraps: importing `signal` builds three enums, a
    # millisecond of a 60 ms start, and the handlers need only the numbers.
    import _signal  # type: ignore[import-not-found]
except ImportError:  # not CPython
    import signal as _signal

# Descriptors of the standard streams that were closed when the process started.
closed_at_start: frozenset[int] = frozenset()

# The pipes and sockets this run has read, by (device, inode), with the input that read
# each: a pipe can be read once, so a second input naming it is refused (inputs.py).
pipes_read: dict[tuple[int, int], str] = {}

STREAM_NAMES = {0: "stdin", 1: "stdout", 2: "stderr"}
_STANDARD_PATHS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def stream_fd(path: str) -> int | None:
    """The descriptor a path names (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N), else None.

    The name is read as written, and through symlinks the user made to it, never by
    opening it: opening /dev/stdout truncates a file that stdout was opened on with
    `>>`, and renaming over it replaces what the stream points to.
    """
    for _ in range(40):  # the kernel's limit on symlinks in one lookup
        fd = _named_fd(os.path.normpath(os.path.abspath(path)))
        if fd is not None:
            return fd if fd >= 0 else None
        try:
            target = os.readlink(path)
        except OSError:  # not a symlink, or not there
            return None
        path = os.path.join(os.path.dirname(path), target)
    return None


def _named_fd(path: str) -> int | None:
    """The descriptor a normalized path names; -1 for another process's; None for no stream."""
    if path in _STANDARD_PATHS:
        return _STANDARD_PATHS[path]
    directory, _, number = path.rpartition("/")
    if not (number.isascii() and number.isdigit()):
        return None
    if directory in ("/dev/fd", "/proc/self/fd", "/proc/thread-self/fd"):
        return int(number)
    process, _, fd_dir = directory.removeprefix("/proc/").partition("/")
    if directory.startswith("/proc/") and fd_dir == "fd" and process.isdigit():
        return int(number) if int(process) == os.getpid() else -1
    return None


def stream_name(fd: int) -> str:
    """'stdout' for 1, 'stderr' for 2, '/dev/fd/N' for the others: how messages name a stream."""
    return STREAM_NAMES.get(fd, f"/dev/fd/{fd}")


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


def warn(message: str) -> None:
    """`simpletfjob: warning: MESSAGE` on stderr; dropped, never failing the run, if stderr cannot take it."""
    # None: closed at start, in a main() run in-process, without guard_standard_streams.
    if sys.stderr is None:
        return
    with contextlib.suppress(OSError, ValueError):
        say(f"simpletfjob: warning: {message}")


def say(line: str) -> None:
    """One line on stderr, whatever it quotes.

    A path or value quoted as it was given can hold a newline, which would make
    two lines, a terminal escape, or a character that reorders the text: control
    and format characters, line and paragraph separators and bytes that are not
    UTF-8 are shown escaped, as repr() shows them. Other characters stay as they are.
    """
    if not line.isprintable():
        import unicodedata

        line = "".join(repr(c)[1:-1] if unicodedata.category(c) in _ESCAPED else c for c in line)
    print(line, file=sys.stderr)


# Control, format, line and paragraph separator, and surrogate (undecodable byte) characters.
_ESCAPED = frozenset(["Cc", "Cf", "Zl", "Zp", "Cs"])


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


# The exit status a shell reports for a process killed by the signal: 128 + its number.
_HANDLED = (_signal.SIGINT, _signal.SIGTERM, getattr(_signal, "SIGHUP", None))

# The exit statuses of the signals that have come, in order (the first decides the status).
signalled: list[int] = []

# The temporary files the run has open (output.py), removed however the process ends.
temporary_files: set[str] = set()

# Signals after which the process ends at once, whatever it is doing.
PATIENCE = 2


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # Never ignored: a cleanup on the way out that hangs (a server that does not answer)
    # must not keep the process from ending. See the module docstring.
    signalled.append(128 + signum)
    if len(signalled) > PATIENCE:
        leave_now(signalled[0])
    raise Interrupted(signalled[0], again=len(signalled) > 1)


def remove_temporary_files() -> None:
    """Remove what is left of the run's temporary output files (an interrupt cut their cleanup short)."""
    for path in list(temporary_files):
        with contextlib.suppress(OSError):
            os.unlink(path)
        temporary_files.discard(path)


def leave_now(code: int) -> None:
    """End the process at once: its temporary files removed, one line on stderr, no cleanup."""
    remove_temporary_files()
    with contextlib.suppress(OSError):
        os.write(2, b"simpletfjob: interrupted again: stopped at once, nothing more cleaned up\n")
    os._exit(code)


def install_signal_handlers() -> None:
    """SIGINT, SIGTERM and SIGHUP raise `Interrupted`.

    SIGINT and SIGTERM always, even when the process started with them ignored (a
    shell script's `simpletfjob ... &` ignores SIGINT): a stopped run must still
    clean up, as kubectl and helm do. SIGHUP only if it is not ignored, so that
    `nohup simpletfjob ...` keeps running when the terminal goes.
    """
    sighup = getattr(_signal, "SIGHUP", None)
    for signum in _HANDLED:
        if signum is None or (signum == sighup and _signal.getsignal(signum) == _signal.SIG_IGN):
            continue
        _signal.signal(signum, _interrupt)
    # The tick: see the module docstring. Interval timers are not inherited by children.
    with contextlib.suppress(AttributeError, ValueError, OSError):  # no SIGALRM or timers
        _signal.signal(_signal.SIGALRM, _tick)
        _signal.setitimer(_signal.ITIMER_REAL, TICK_SECONDS, TICK_SECONDS)


TICK_SECONDS = 0.25


def _tick(signum: int, frame: FrameType | None) -> None:
    """Nothing: the tick only lets Python run the handlers of signals that came before it."""
