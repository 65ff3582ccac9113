"""How a broken connection is said (kube/send.py's `broken`), and a watch stream that ends in the
middle of an event (kube/watch.py): the project's words, never urllib3's text.

What a command prints when the fault proxy cuts an answer is in tests/loopback/test_faultproxy.py.
"""

from __future__ import annotations

import http.client
import io
from collections.abc import Iterator

import pytest
from urllib3.exceptions import IncompleteRead, InvalidChunkLength, ProtocolError, ReadTimeoutError

from simpletfjob.kube import watch as kube_watch
from simpletfjob.kube.send import arrived, broken


class _Read:
    """What urllib3 reads of a response to word a bad chunk."""

    length_remaining = 10

    def tell(self) -> int:
        return 0


def raised(error: BaseException, cause: BaseException | None = None) -> BaseException:
    """`error` as it comes out of an except block: raised from `cause`."""
    try:
        try:
            if cause is not None:
                raise cause
        except BaseException as inner:
            raise error from inner
        raise error
    except BaseException as e:
        return e


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (
            ProtocolError(
                "Connection broken: IncompleteRead(40 bytes read, 7423 more expected)",
                http.client.IncompleteRead(b"x" * 40, 7423),
            ),
            "the answer broke off after 40 of 7463 bytes",
        ),
        (
            ProtocolError("Connection broken: ...", IncompleteRead(8, 23)),
            "the answer broke off after 8 of 31 bytes",
        ),
        (
            ProtocolError("Connection broken: ...", InvalidChunkLength(_Read(), b"")),  # type: ignore[arg-type]
            "the answer broke off in the middle of a chunk",
        ),
        (
            ProtocolError("Connection aborted.", ConnectionResetError(104, "reset by peer")),
            "the connection was reset",
        ),
        (
            ProtocolError(
                "Connection aborted.",
                http.client.RemoteDisconnected("Remote end closed connection without response"),
            ),
            "the server closed the connection without answering",
        ),
        (
            ProtocolError("Connection aborted.", BrokenPipeError(32, "Broken pipe")),
            "the connection was closed while the request was being sent",
        ),
        (ProtocolError("Response ended prematurely"), "the answer ended before it was whole"),
        (
            ReadTimeoutError(None, "/", "Read timed out."),
            "the server went silent in the middle of an answer",
        ),  # type: ignore[arg-type]
        (ProtocolError("something new"), "the connection broke"),
    ],
)
def test_a_broken_connection_in_a_few_words(error: BaseException, said: str) -> None:
    assert broken(error) == said


def test_the_cause_is_found_where_it_was_raised_from() -> None:
    error = raised(ProtocolError("Connection broken"), ConnectionResetError(104, "reset"))
    assert broken(error) == "the connection was reset"


class _Stream(io.BytesIO):
    """A watch's body that is not chunked (read until the connection closes)."""

    chunked = False

    def supports_chunked_reads(self) -> bool:
        return False


def lines(data: bytes) -> Iterator[bytes]:
    return kube_watch._stream_lines(arrived(_Stream(data)))


def test_a_stream_cut_in_the_middle_of_an_event_is_a_dropped_connection() -> None:
    """It was handed over as a line, and the watch failed: `sent a line that is not JSON`."""
    stream = lines(b'{"type":"ADDED","object":{}}\n{"type":"MODI')
    assert next(stream) == b'{"type":"ADDED","object":{}}'
    with pytest.raises(kube_watch._Dropped, match="in the middle of an event"):
        next(stream)


def test_a_stream_that_ends_after_a_whole_event_just_ends() -> None:
    assert list(lines(b'{"type":"ADDED","object":{}}\n\n')) == [b'{"type":"ADDED","object":{}}']
