"""One try of a request, and what can stop it before the server answers.

request.py makes the tries and decides what to do with their failures; this module
says what each failure was, in a whole line for the user and in a few words (`cause`)
for a ride through an outage (outage.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from simpletfjob.errors import ClusterError
from simpletfjob.kube.refusals import first_line

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection


class Answer(NamedTuple):
    """The server's answer: its status and body, or for an open watch, the stream to read."""

    status: int
    data: bytes
    headers: Mapping[str, str]
    stream: Any = None  # the urllib3 response of an open stream (status 200), else None
    reason: str = ""  # the HTTP reason phrase


class Unreachable(ClusterError):
    """No answer from the server at all: refused, timed out, TLS, a name that does not resolve.
    `cause` says it in a few words ('connection refused'); `lasting` marks the one that is an
    answer of sorts (a certificate that does not verify): no outage to ride out (outage.py)."""

    def __init__(self, message: str, cause: str = "", lasting: bool = False) -> None:
        super().__init__(message)
        self.cause = cause or message
        self.lasting = lasting


class Dropped(Exception):
    """The connection was reset or closed before an answer: worth another try."""


def send(
    conn: Connection,
    method: str,
    path: str,
    query: Sequence[tuple[str, str | int]],
    headers: Mapping[str, str],
    body: object,
    stream: bool,
    connect_timeout: float,
    wait: float,
) -> Answer:
    """One try: the answer (a 200 stream unread), `Dropped`, or `Unreachable`."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import (
        ConnectTimeoutError,
        HTTPError,
        MaxRetryError,
        NameResolutionError,
        NewConnectionError,
        ProtocolError,
        ProxyError,
        ReadTimeoutError,
        SSLError,
    )

    target, client = conn.target, conn.client
    try:
        serialized = client.param_serialize(
            method=method,
            resource_path=path,
            query_params=list(query),
            header_params=dict(headers),
            body=body,
            auth_settings=["BearerToken"],
        )
        response = client.call_api(*serialized, _request_timeout=(connect_timeout, wait))
        status = int(response.status)
        reason = str(response.reason or "")
        if stream and status == 200:
            return Answer(status, b"", response.headers, response.response, reason)
        data = response.read()
    except (ApiException, SSLError) as e:  # the REST layer reports TLS failures as ApiException
        detail = tls_detail(str(getattr(e, "reason", None) or e))
        lasting = detail.startswith("certificate verify failed")  # an answer, not an outage
        raise Unreachable(
            f"{target}: TLS error: {detail}{_TLS_HINT}", f"TLS error: {detail}", lasting
        ) from e
    except ProxyError as e:  # ('Unable to connect to proxy', the cause)
        cause = e.args[-1] if e.args else e
        raise Unreachable(
            f"{target}: cannot reach the proxy: {_connect_detail(cause)}; "
            "check $HTTPS_PROXY or the cluster's proxy-url",
            f"cannot reach the proxy: {_connect_detail(cause)}",
        ) from e
    except MaxRetryError as e:  # only when a proxy or redirect is involved
        raise Unreachable(
            f"{target}: cannot reach the server: {first_line(e.reason)}", first_line(e.reason)
        ) from e
    except NameResolutionError as e:
        raise Unreachable(
            f"{target}: unreachable: cannot resolve the server's host name; check the server in your kubeconfig",
            "cannot resolve the server's host name",
        ) from e
    except NewConnectionError as e:
        raise Unreachable(
            f"{target}: unreachable: {_connect_detail(e)}; is the cluster up, and is this the right context?",
            _connect_detail(e),
        ) from e
    except ConnectTimeoutError as e:
        raise Unreachable(
            f"{target}: unreachable: no answer from the server within {connect_timeout:g} s; "
            "is the cluster up and reachable from here?",
            f"no answer within {connect_timeout:g} s",
        ) from e
    except ReadTimeoutError as e:
        raise Unreachable(
            f"{target}: unreachable: the server took the request but sent no answer within {wait:g} s",
            f"the server took a request but sent no answer within {wait:g} s",
        ) from e
    except ProtocolError as e:
        raise Dropped(broken(e)) from e
    except HTTPError as e:
        raise Unreachable(
            f"{target}: cannot reach the server: {first_line(e)}", first_line(e)
        ) from e
    data = data if isinstance(data, bytes) else bytes(data)
    return Answer(status, data, response.headers, None, reason)


def arrived(response: Any) -> Iterator[bytes]:
    """A streamed answer's body (a watch, a followed log) as it comes, each read taking what has
    arrived: a chunk of a chunked answer; else what the connection holds, as for a body that
    ends with the connection (behind a proxy that closes each one). Never a read of a set
    size, which would wait for that many bytes."""
    if response.chunked and response.supports_chunked_reads():
        chunks: Iterator[bytes] = response.read_chunked(decode_content=True)
        return chunks
    return iter(lambda: bytes(response.read1(65536)), b"")


def broken(error: BaseException) -> str:
    """How a connection broke, in a few words, never urllib3's text: 'the answer broke off
    after 40 of 7463 bytes', 'the connection was reset'."""
    from http.client import IncompleteRead, RemoteDisconnected

    from urllib3.exceptions import IncompleteRead as Incomplete
    from urllib3.exceptions import InvalidChunkLength, ReadTimeoutError

    seen: list[BaseException] = []
    pending: list[object] = [error]
    while pending:  # the error, what it wraps (its args), and what it was raised from
        found = pending.pop(0)
        if isinstance(found, BaseException) and all(found is not s for s in seen):
            seen.append(found)
            pending += [*found.args, found.__cause__, found.__context__]
    for cause in seen:
        if isinstance(cause, InvalidChunkLength):
            return "the answer broke off in the middle of a chunk"
        if isinstance(cause, (Incomplete, IncompleteRead)):
            # urllib3's counts what came; http.client's holds it. Both count what is missing.
            partial = cause.partial if isinstance(cause.partial, int) else len(cause.partial)
            if isinstance(cause.expected, int):
                total = partial + cause.expected
                return f"the answer broke off after {partial} of {total} bytes"
            return f"the answer broke off after {partial} bytes"
        if isinstance(cause, RemoteDisconnected):
            return "the server closed the connection without answering"
        if isinstance(cause, ConnectionResetError):
            return "the connection was reset"
        if isinstance(cause, BrokenPipeError):
            return "the connection was closed while the request was being sent"
        if isinstance(cause, (ReadTimeoutError, TimeoutError)):
            return "the server went silent in the middle of an answer"
    if "ended prematurely" in str(error):
        return "the answer ended before it was whole"
    return "the connection broke"


_TLS_HINT = "; check certificate-authority in your kubeconfig, or that the server address is right"


def tls_detail(text: str) -> str:
    text = " ".join(text.split())
    found = re.search(r"certificate verify failed: ([^(]*)", text)
    if found:
        return f"certificate verify failed: {found[1].strip()}"
    found = re.search(r"\[SSL: [A-Z_]+\] ([^(]*)", text)
    if found:
        return found[1].strip()
    return re.sub(r"^SSLError ", "", text)[:200]


def _connect_detail(error: Exception) -> str:
    text = str(error)
    if "refused" in text.lower():
        return "connection refused"
    found = re.search(r"\[Errno -?\d+\] ([^')]*)", text)
    return found[1].strip() if found else first_line(text)
