"""Watches read in turns in one thread (simpletfjob/kube/turns.py): every event that has come is
handed over at once, even when the TLS layer or the HTTP reader holds it already (where poll(2)
does not see it), and a silent connection still times out.

Each stream here is a real chunked HTTP answer (over TLS, or not) from a socket server of the
test's own, read by urllib3 as the client reads a watch: the server writes what the test says,
in one write, when it says.
"""

from __future__ import annotations

import queue
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3

from simpletfjob.kube.request import Deadline
from simpletfjob.kube.turns import Turns, Waiting
from simpletfjob.kube.watch import _lines

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunked(*events: bytes) -> bytes:
    """Each event (a line) as a chunk of its own, as the API server writes a watch's events."""
    return b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events)


class Stream:
    """A server that answers one GET with a chunked stream, then writes what `send` is given."""

    def __init__(self, ca: Any | None) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.context: ssl.SSLContext | None = None
        if ca is not None:
            self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ca.issue_cert("127.0.0.1").configure_cert(self.context)
        self.writes: queue.Queue[bytes | None] = queue.Queue()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        if self.context is not None:
            conn = self.context.wrap_socket(conn, server_side=True)
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(4096)
            conn.sendall(HEAD)
            while (data := self.writes.get()) is not None:
                conn.sendall(data)  # one write: the events arrive together

    def send(self, *events: bytes) -> None:
        self.writes.put(chunked(*events))

    def close(self) -> None:
        self.writes.put(None)
        self.thread.join(5)
        self.listener.close()


@pytest.fixture(params=["tls", "plain"])
def streams(request: pytest.FixtureRequest, cluster_ca: Any) -> Iterator[Any]:
    """make(read_timeout) -> (server, the stream's lines read in turns)."""
    ca = cluster_ca if request.param == "tls" else None
    made: list[tuple[Stream, Any]] = []
    pool = urllib3.PoolManager(ssl_context=_client_context(ca)) if ca else urllib3.PoolManager()

    def make(read_timeout: float = 30.0) -> tuple[Stream, Iterator[bytes | Waiting]]:
        server = Stream(ca)
        scheme = "https" if ca else "http"
        response = pool.request(
            "GET", f"{scheme}://127.0.0.1:{server.port}/watch", preload_content=False, timeout=10
        )
        lines = _lines(response, None, read_timeout, in_turns=True)
        made.append((server, response))
        return server, lines

    yield make
    for server, response in made:
        response.close()
        server.close()
    pool.clear()


def _client_context(ca: Any) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


def _take_all(turns: Turns[bytes], count: int, seconds: float = 10.0) -> list[list[bytes]]:
    """Each `take` until `count` lines have come: what each gave."""
    batches: list[list[bytes]] = []
    deadline = Deadline.after(seconds)
    while sum(map(len, batches)) < count and deadline.remaining() > 0:
        got = [line for _, line in turns.take(deadline)]
        if got:
            batches.append(got)
    return batches


@pytest.mark.parametrize("first", [b"small", b"x" * 40_000], ids=["small", "40kB"])
def test_events_that_came_together_are_handed_over_together(streams: Any, first: bytes) -> None:
    """The second event is already off the socket (the HTTP reader's buffer; a TLS record read
    whole) once the first is read: it is handed over with it, not after the next event."""
    server, lines = streams()
    turns: Turns[bytes] = Turns({"a": lines})
    server.send(b'{"n": 1, "p": "' + first + b'"}\n', b'{"n": 2}\n', b'{"n": 3}\n')
    batches = _take_all(turns, 3)
    assert batches == [[b'{"n": 1, "p": "' + first + b'"}', b'{"n": 2}', b'{"n": 3}']]
    assert turns.take(Deadline.after(0.3)) == []  # nothing more came, and none is made up
    server.send(b'{"n": 4}\n')
    assert _take_all(turns, 1) == [[b'{"n": 4}']]


def test_two_streams_are_read_in_one_thread_whichever_speaks(streams: Any) -> None:
    quiet, quiet_lines = streams()
    busy, busy_lines = streams()
    turns: Turns[bytes] = Turns({"quiet": quiet_lines, "busy": busy_lines})
    busy.send(b"b1\n")
    assert turns.take(Deadline.after(10)) == [("busy", b"b1")]
    quiet.send(b"q1\n")
    assert turns.take(Deadline.after(10)) == [("quiet", b"q1")]
    busy.send(b"b2\n")
    quiet.send(b"q2\n")
    got = _take_all(turns, 2)
    assert sorted(line for batch in got for line in batch) == [b"b2", b"q2"]


def test_a_silent_stream_times_out_as_a_blocking_read_would(streams: Any) -> None:
    """Past its read timeout with nothing come, the watch is resumed and its read times out
    (kube/watch.py then opens it again), even while poll(2) saw nothing."""
    _, lines = streams(read_timeout=0.5)
    turns: Turns[bytes] = Turns({"a": lines})
    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        turns.take(Deadline.after(10))
    assert 0.4 < time.monotonic() - started < 5


def test_a_stream_that_ends_is_dropped_and_the_others_go_on(streams: Any) -> None:
    ending, ending_lines = streams()
    going, going_lines = streams()
    turns: Turns[bytes] = Turns({"ending": ending_lines, "going": going_lines})
    ending.send(b"last\n")
    assert turns.take(Deadline.after(10)) == [("ending", b"last")]
    ending.writes.put(b"0\r\n\r\n")  # the chunked stream's end
    assert turns.take(Deadline.after(5)) == []
    assert list(turns.watches) == ["going"]
    going.send(b"g1\n")
    assert turns.take(Deadline.after(10)) == [("going", b"g1")]


def test_a_watch_that_pauses_before_its_next_try_leaves_the_others_read(streams: Any) -> None:
    """A pause (Waiting with no socket: kube/watch.py's backoff) is waited out beside the
    others' sockets, not slept in the caller's thread."""
    server, lines = streams()

    def pausing() -> Iterator[bytes | Waiting]:
        yield Waiting(None, time.monotonic() + 2.0)
        yield b"tried again"

    turns: Turns[bytes] = Turns({"pausing": pausing(), "stream": lines})
    started = time.monotonic()
    server.send(b"s1\n")
    assert turns.take(Deadline.after(10)) == [("stream", b"s1")]
    assert time.monotonic() - started < 1.5  # not after the pause
    assert turns.take(Deadline.after(10)) == [("pausing", b"tried again")]
    assert time.monotonic() - started >= 2.0
