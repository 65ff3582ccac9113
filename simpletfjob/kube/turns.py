"""Several watches read in the caller's thread, each in turn, with no thread of their own.

A watch read in turns (watch.watch_in_turns) yields `Waiting` before a read that would
block: the socket to wait on, and by when its read must have begun (the silent connection's
timeout, or the caller's deadline). `Turns` runs each watch until it waits, hands the caller
every event that had come, and then waits on all their sockets at once (poll(2)), at most
`POLL` seconds at a time: the caller's thread runs Python again that often, so that a Ctrl-C
a notebook sends (`_thread.interrupt_main()`) is raised soon.

A watch's pause between two tries (its server away, or its connection dropped) is a wait
like the others: meanwhile the other watch is read. What a watch does to open itself again
(a request, with the request's own retries while the server is away) and to list again after
410 Gone, it does in the caller's thread, each bounded by the caller's deadline: meanwhile
the other watch's events wait on its socket, and are read right after, in order. A Ctrl-C
from the terminal (SIGINT) stops either at once; a notebook's, when it next runs Python.

A read that poll(2) woke takes what has come and may wait for the rest of it (half of a TLS
record, of a chunk): the server writes each event whole, so that wait is short.

Why no threads: a process ends only once each of its threads has been woken and has ended.
`wait`'s reaction ends with its process's end, and two threads blocked on their sockets
made that end a few milliseconds longer on a busy machine (bench/scale.py).
"""

from __future__ import annotations

import select
import ssl
import time
from collections.abc import Iterator, Mapping
from typing import Any, Generic, NamedTuple, TypeVar

POLL = 0.25  # seconds: the longest the caller's thread waits at once

T = TypeVar("T")


class Waiting(NamedTuple):
    """A watch's next read would block: resume it once `sock` is readable, or at `by`; with no
    `sock`, a pause (before a watch's next try) that ends at `by`."""

    sock: Any  # a socket (plain or TLS): what poll(2) waits on; None for a pause
    by: float  # time.monotonic(): when the read must begin all the same (it then times out)


def ready(response: Any, sock: Any) -> bool:
    """Whether the next bytes of a streamed answer were read off the socket already: in the
    TLS layer, urllib3's decoder or http.client's buffered reader, where poll(2) does not
    see them. A reader of another shape (a urllib3 not known here) counts as ready: it is
    then read, blocking, rather than left with an event in it. A broken connection raises
    its OSError (ConnectionResetError, an SSLError)."""
    pending = getattr(sock, "pending", None)
    if pending is not None and pending():
        return True
    if getattr(getattr(response, "_decoder", None), "has_unconsumed_tail", False):
        return True
    if len(getattr(response, "_decoded_buffer", b"")):  # urllib3 2's, read1 leaves
        return True
    peek = getattr(getattr(getattr(response, "_fp", None), "fp", None), "peek", None)
    if peek is None:
        return True
    timeout = sock.gettimeout()
    sock.settimeout(0.0)  # what is buffered, else a read that takes only what has come
    try:
        return bool(peek(1))  # b'' when nothing has come (or the stream has ended)
    except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return False
    finally:
        sock.settimeout(timeout)


class Turns(Generic[T]):
    """Watches read in turns: `take` gives what has come, keyed by each watch's name.

    Each watch is an iterator of items (its events) and `Waiting`s; one that ends (its
    deadline passed) is dropped. An error a watch raises goes up from `take`.
    """

    def __init__(self, watches: Mapping[str, Iterator[T | Waiting]]) -> None:
        self.watches = dict(watches)
        self.waiting: dict[str, Waiting] = {}

    def take(self, until: Any = None) -> list[tuple[str, T]]:
        """Every item that has come, once at least one has; [] once `until` (a Deadline, or
        None: never) has passed with none."""
        while True:
            got = self._run()
            if got:
                return got
            step = POLL if until is None else min(POLL, until.remaining())
            if step <= 0:
                return []
            if self.waiting:
                soonest = min(w.by for w in self.waiting.values()) - time.monotonic()
                self._wait(max(0.0, min(step, soonest)))
            else:  # every watch has ended: only the deadline is left
                time.sleep(step)

    def _run(self) -> list[tuple[str, T]]:
        """Each watch not waiting, run until it waits (or ends): the items it gave."""
        got: list[tuple[str, T]] = []
        for name, watch in list(self.watches.items()):
            if name in self.waiting:
                continue
            for item in watch:
                if isinstance(item, Waiting):
                    self.waiting[name] = item
                    break
                got.append((name, item))
            else:
                del self.watches[name]
        return got

    def _wait(self, seconds: float) -> None:
        """Wait until a waiting watch's socket is readable, its `by` has come, or `seconds`
        have passed; those are resumed at the next `_run`."""
        poller = select.poll()
        names: dict[int, list[str]] = {}
        for name, waiting in list(self.waiting.items()):
            if waiting.sock is None:  # a pause: its `by` ends it
                continue
            fd = waiting.sock.fileno()
            if fd < 0:  # closed under it (the connection's close): its read says what happened
                del self.waiting[name]
                return
            poller.register(fd, select.POLLIN | select.POLLPRI)
            names.setdefault(fd, []).append(name)
        for fd, _ in poller.poll(seconds * 1000):
            for name in names.get(fd, []):
                self.waiting.pop(name, None)
        now = time.monotonic()
        for name in [n for n, w in self.waiting.items() if w.by <= now]:
            del self.waiting[name]

    def close(self) -> None:
        """Close every watch (its connection with it)."""
        watches, self.watches = list(self.watches.values()), {}
        self.waiting.clear()
        for watch in watches:
            close = getattr(watch, "close", None)
            if close is not None:
                close()
