"""The process's standard streams and signals, set up once by the console script.

- A standard stream that was closed at start (`>&-`, `2>&-`) gets /dev/null on its
  descriptor, so that the next file opened (a temporary output file, say) cannot
  take descriptor 1 or 2 and receive messages or YAML meant for the stream.
  Writing to a closed stdout still fails, as it should; a closed stderr drops
  messages.
- stderr never fails a run: what cannot be written there (closed, full, a
  broken pipe) is dropped.
- SIGINT, SIGTERM and SIGHUP raise `Interrupted`, which unwinds like any exception and
  is reported as one line with the exit status a shell gives for the signal. A second
  one, while the first unwinds (a cleanup waiting on a slow server), raises it again
  with the first one's status; a third ends the process at once, as kubectl and helm
  do. A temporary output file is removed whichever way it ends.
- A tick (SIGALRM, four times a second) interrupts whatever the process waits in, so a
  signal that lands just before a blocking call is handled; another thread stops the
  command through it too (`stop_main`).
- `leave` readies the process for the interpreter's end (a closed pipe's 141, no
  "Exception ignored" message).
- What a run keeps of its process is one `Environment`, `env`: the console script's, or
  a fresh one for each `cli.main` run.
"""

from __future__ import annotations

import _thread
import contextlib
import errno
import gc
import io
import os
import signal
import sys
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING

from simpletfjob.errors import EXIT_READER_GONE, Interrupted

if TYPE_CHECKING:
    import re
    from collections.abc import Iterator


@dataclass
class Environment:
    """What a run of the command line knows and keeps of its process (as httpie's Environment);
    `env` is the current run's. Only the console script's knows `closed_at_start`."""

    closed_at_start: frozenset[int] = frozenset()
    # The pipes and sockets this run has read, by (device, inode), with the input that read
    # each: a pipe can be read once, so a second input naming it is refused (inputs.py).
    pipes_read: dict[tuple[int, int], str] = field(default_factory=dict)
    # The temporary files the run has open (output.py), removed however the process ends.
    temporary_files: set[str] = field(default_factory=set)
    # The exit statuses of the signals that have come, in order (the first decides the status).
    signalled: list[int] = field(default_factory=list)
    # What stop_main asked, raised in the main thread by the tick.
    stops: list[Interrupted] = field(default_factory=list)
    status: str = ""  # the terminal's status line drawn now (status_line), '' when none


env = Environment()  # the current run's (see Environment)

STREAM_NAMES = {0: "stdin", 1: "stdout", 2: "stderr"}
_STANDARD_PATHS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def stream_fd(path: str) -> int | None:
    """The descriptor a path names (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N), else None.
    Read from the name and its symlinks, never by opening it: opening /dev/stdout truncates
    a file that stdout was opened on with `>>`."""
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
    with contextlib.suppress(OSError, ValueError):
        say(f"simpletfjob: warning: {message}")


def say(line: str) -> None:
    """One line on stderr, written whole, whatever it quotes: the one writer of the commands' lines.
    What it quotes (a path, a server's event) is escaped as `shown` does, so it cannot make
    two lines or act on a terminal; written in one call under a lock, so other threads'
    lines never cut into it."""
    # None: closed at start, in a main() run in-process, without guard_standard_streams.
    stream = sys.stderr
    if stream is None:
        return
    text = shown(line, _is_terminal(stream)) + "\n"
    with _WRITING:
        if env.status:  # cleared before the line, drawn again under it
            text = ERASE + text + ERASE + env.status
        stream.write(text)
        stream.flush()


# Held while a line is written to stderr (see say). `_thread`, not `threading`: it is
# imported before anything else runs, and costs nothing.
_WRITING = _thread.allocate_lock()

# A terminal's status line (status_line): back to the line's start and erase it.
ERASE = "\r\x1b[K"


def status_line(text: str) -> None:
    """Keep `text` as one line at the bottom of stderr, redrawn in place; '' clears it.
    Only on a terminal. `say` clears it and draws it again under each line it writes;
    `status_cleared` does the same around writes to stdout."""
    stream = sys.stderr
    if stream is None or not _is_terminal(stream):
        return
    drawn = shown(text, True)
    with _WRITING, contextlib.suppress(OSError, ValueError):
        if drawn != env.status:
            env.status = drawn
            stream.write(ERASE + drawn)
            stream.flush()


@contextlib.contextmanager
def status_cleared() -> Iterator[None]:
    """Around a write to stdout (a task's log line): the status line cleared, then drawn again."""
    if not env.status:
        yield
        return
    stream = sys.stderr
    with _WRITING:
        with contextlib.suppress(OSError, ValueError):
            stream.write(ERASE)
            stream.flush()
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError):
                if env.status:
                    stream.write(ERASE + env.status)
                    stream.flush()


def _is_terminal(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):  # closed, or not a file
        return False


def shown(text: str, terminal: bool) -> str:
    """`text` as one line, safe to print: what could act on a terminal or break the line is escaped.
    Control characters but the tab, format characters, line and paragraph separators and
    undecodable bytes are shown as `cat -v` shows their bytes on a terminal (`^[`,
    `M-BM-^[`), elsewhere as Python escapes them (`\\x1b`)."""
    if text.isprintable():
        return text
    import re

    # The characters to look at: every one but printable ASCII and the tab.
    return re.sub("[^\t -~]", _cat_v if terminal else _python_escape, text)


def visible_lines(lines: bytes) -> bytes:
    """Lines of a task's output (each ending with a newline) as `cat -v` shows them, tabs kept.
    So a task's line cannot move a terminal's cursor, erase its prefix or set modes; see
    `shown` for what is escaped."""
    text = lines.decode("utf-8", "surrogateescape")
    return "\n".join(shown(line, True) for line in text.split("\n")).encode()


def cat_v(byte: int) -> str:
    """One byte as `cat -v` shows it: ^@ .. ^_, ^?, M-a, M-^[; tab and printable ASCII as they are."""
    meta = "M-" if byte >= 0x80 else ""
    low = byte & 0x7F
    if low == 0x7F:
        return f"{meta}^?"
    if low < 0x20 and (meta or low != 0x09):
        return f"{meta}^{chr(low + 0x40)}"
    return meta + chr(low)


def _cat_v(match: re.Match[str]) -> str:
    char = match[0]
    if not _escaped(char):
        return char
    if 0xDC80 <= ord(char) <= 0xDCFF:  # an undecodable byte, as surrogateescape keeps it
        return cat_v(ord(char) - 0xDC00)
    return "".join(cat_v(b) for b in char.encode("utf-8", "surrogatepass"))


def _python_escape(match: re.Match[str]) -> str:
    char = match[0]
    return repr(char)[1:-1] if _escaped(char) else char


def _escaped(char: str) -> bool:
    import unicodedata

    return char != "\t" and unicodedata.category(char) in _ESCAPED


# Control, format, line and paragraph separator, and surrogate (undecodable byte) characters.
_ESCAPED = frozenset(["Cc", "Cf", "Zl", "Zp", "Cs"])


def guard_standard_streams() -> frozenset[int]:
    """Put /dev/null on closed standard descriptors and make stderr forgiving; see the module
    doc. Returns the descriptors that were closed."""
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
    return frozenset(closed)


# The signals that stop a run (the status a shell reports for them: 128 + their number).
_HANDLED = (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None))
PATIENCE = 2  # signals after which the process ends at once, whatever it is doing


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # Never ignored: a cleanup on the way out that hangs (a server that does not answer)
    # must not keep the process from ending. See the module docstring.
    signalled = env.signalled
    signalled.append(128 + signum)
    if len(signalled) > PATIENCE:
        leave_now(signalled[0])
    raise Interrupted(signalled[0])


def remove_temporary_files() -> None:
    """Remove what is left of the run's temporary output files (an interrupt cut their cleanup short)."""
    for path in list(env.temporary_files):
        with contextlib.suppress(OSError):
            os.unlink(path)
        env.temporary_files.discard(path)


def leave_now(code: int) -> None:
    """End the process at once: its temporary files removed, one line on stderr, no cleanup."""
    remove_temporary_files()
    with contextlib.suppress(OSError):
        os.write(2, b"simpletfjob: interrupted again: stopped at once, nothing more cleaned up\n")
    os._exit(code)


def install_signal_handlers() -> None:
    """SIGINT, SIGTERM and SIGHUP raise `Interrupted`.
    SIGINT and SIGTERM always, even when started ignored (`simpletfjob ... &`): a stopped run
    must still clean up. SIGHUP only if not ignored, so `nohup simpletfjob` keeps running."""
    sighup = getattr(signal, "SIGHUP", None)
    for signum in _HANDLED:
        if signum is None or (signum == sighup and signal.getsignal(signum) == signal.SIG_IGN):
            continue
        signal.signal(signum, _interrupt)
        _INSTALLED.append(signum)
    _MAIN[0] = _thread.get_ident()
    # The tick: see the module docstring. Interval timers are not inherited by children.
    with contextlib.suppress(AttributeError, ValueError, OSError):  # no SIGALRM or timers
        signal.signal(signal.SIGALRM, _tick)
        _INSTALLED.append(signal.SIGALRM)
        signal.setitimer(signal.ITIMER_REAL, TICK_SECONDS, TICK_SECONDS)


TICK_SECONDS = 0.25
_MAIN = [0]  # the main thread, where Python runs the handlers
_INSTALLED: list[int] = []  # the signals whose handlers are simpletfjob's


def _tick(signum: int, frame: FrameType | None) -> None:
    """The tick lets Python run the handlers of signals that came before it; and it raises
    in the main thread what another thread asked it to (stop_main)."""
    if env.stops:
        raise env.stops.pop()


def stop_main(stop: Interrupted) -> None:
    """From a thread other than the main one: stop the command, as a signal would, by raising
    `stop` in the main thread, at once (the tick, sent to it). Only in the console script's
    process (install_signal_handlers); elsewhere the caller's thread alone stops."""
    if not _MAIN[0] or env.stops:
        return
    env.stops.append(stop)
    with contextlib.suppress(AttributeError, ValueError, OSError):
        signal.pthread_kill(_MAIN[0], signal.SIGALRM)


def leave(code: int) -> int:
    """The command returned `code`: the process made ready for the interpreter's end; its status.

    The tick stops and the signals handled are ignored (the status is the command's).
    stdout is flushed: its reader gone, the status is 141; set aside when it cannot be, so
    the interpreter's own flush has nothing to fail on."""
    for signum in _INSTALLED:
        signal.signal(signum, signal.SIG_IGN)
    with contextlib.suppress(AttributeError, ValueError, OSError):
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
    remove_temporary_files()  # those that a second signal kept from being removed
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except (OSError, ValueError) as e:  # what the buffer holds would fail again at the end
        if isinstance(e, BrokenPipeError):
            code = EXIT_READER_GONE
        sys.stdout = None  # (the interpreter flushes only the current one)
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.flush()
    # What lives to the end is kept out of the collector's last passes, which free nothing.
    gc.freeze()
    return code
