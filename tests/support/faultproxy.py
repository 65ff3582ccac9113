"""A fault-injecting HTTP proxy between a kubeconfig and an API server, switchable while a
command runs.

    with FaultProxy(cluster.url, ca_file=cluster.ca_file, tls=ca) as proxy:
        proxy.kubeconfig(path, token=..., namespace="ml")   # the command talks to the proxy
        proxy.delay(3, verb="apply")            # slow writes, as by a slow admission webhook
        proxy.cut(verb="list", after=40)        # the answer's body cut after 40 bytes
        proxy.fail(500)                         # or 503; 429 with Retry-After: proxy.throttle(1)
        proxy.gone(resource="pods")             # a watch answered 410 Gone (Expired)
        proxy.refuse(401)                       # or 403, as kube-apiserver words them
        proxy.cut_streams()                     # every open watch stream cut mid-chunk, now
        proxy.silence(verb="watch")             # a watch answered 200, then nothing: silent
        proxy.down(); proxy.up()                # connection refused, then back on the same port
        proxy.clear()                           # everything passes again
        proxy.wait_for("watch", "jobs")         # until a command's watch of Jobs is open
        proxy.close_each()                      # each answer with Connection: close (below)

`close_each(framing)` makes the proxy answer each request with `Connection: close` and close
the connection after the answer, as many corporate proxies and some API gateways do: the
client then holds no socket of its own for the answer (urllib3's connection has none), and a
streamed answer (a watch, a followed log) must be read as its bytes come. `framing` says how
a streamed answer's body is delimited: "chunked", or "close" (no length, no chunks: the
body ends when the connection does, as an HTTP/1.0 proxy relays it).

Each fault matches requests by `verb` (kube-apiserver's: get, list, watch, create, apply,
patch, update, delete), `resource` (the plural), `dry_run` (server dry runs, or real writes)
and `count` (None: until cleared), in the order added; the first that matches a request takes it. A fault added while a watch is open
acts on the next request: `cut_streams()` ends the open ones, so that a fault can start
both before and after a command's watch is up.

What reaches the server, reaches it whole: a delayed request is sent once its delay has
passed even if the client has gone meanwhile (a write then lands after the client stopped
waiting, as behind a webhook that outlives the request), and a cut answer was the server's
full answer, cut on its way back. Non-streamed answers are read whole from the server and
sent with a Content-Length, so that a cut is an IncompleteRead; watches and `follow` logs are
relayed chunk by chunk as they come. Plain http to the client unless `tls` (a trustme CA)
is given; the server is reached over https when its URL says so, trusting `ca_file`.
`requests` lists what the proxy saw (method, verb, resource, path, and what it did), for a
test to wait on or to count.
"""

from __future__ import annotations

import contextlib
import errno
import http.client
import json
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.support.kubeapi.serving import write_kubeconfig
from tests.support.parallel import free_ports

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "te", "trailer"}


@dataclass
class Seen:
    """One request as the proxy saw it, and what it did with it ('passed', 'cut', '500', ...)."""

    method: str
    path: str
    query: dict[str, str]
    verb: str
    resource: str
    done: str = ""
    dry_run: bool = False  # dryRun in the query, or in a delete's DeleteOptions


@dataclass
class Fault:
    """What to do to the requests that match (see the module docstring)."""

    kind: str  # 'delay', 'cut', 'status', 'silence'
    verb: str | None = None
    resource: str | None = None
    dry_run: bool | None = None  # True: only server dry runs (dryRun=All); False: only real ones
    count: int | None = None  # None: every match, until cleared
    seconds: float = 0.0  # delay: before the request goes to the server
    after: int = 0  # cut: the body's bytes that get through
    reset: bool = False  # cut: with RST (reset by peer), not a clean close (IncompleteRead)
    status: int = 0  # status: the code answered instead of the server
    retry_after: int | None = None
    message: str = ""
    reason: str = ""

    def matches(self, seen: Seen) -> bool:
        return (
            (self.verb is None or self.verb == seen.verb)
            and (self.resource is None or self.resource == seen.resource)
            and (self.dry_run is None or self.dry_run == seen.dry_run)
        )


def verb_of(
    method: str, path: str, query: dict[str, str], content_type: str = ""
) -> tuple[str, str]:
    """(verb, resource) as kube-apiserver's authorizer names them: ('watch', 'jobs')."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"]:
        rest = parts[3:]
    else:
        return "", ""
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    if not rest:
        return "", ""
    resource, name = rest[0], rest[1] if len(rest) > 1 else None
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    watching = query.get("watch") in ("true", "1")
    verbs = {
        "GET": "get" if name else ("watch" if watching else "list"),
        "POST": "create",
        "PUT": "update",
        "DELETE": "delete" if name else "deletecollection",
        "PATCH": "apply" if "apply-patch" in content_type else "patch",
    }
    return verbs.get(method, method.lower()), resource


_REASONS = {
    401: ("Unauthorized", "Unauthorized"),
    403: ("Forbidden", ""),
    410: ("Expired", "too old resource version: 1 (2)"),
    429: (
        "TooManyRequests",
        "the server has received too many requests and has asked us to try again later",
    ),
    500: ("InternalError", "Internal error occurred: etcdserver: request timed out"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
}


def status_body(code: int, seen: Seen, reason: str = "", message: str = "") -> bytes:
    """A Status as kube-apiserver answers with `code`."""
    default_reason, default_message = _REASONS.get(code, ("InternalError", "error"))
    if code == 403 and not message:
        message = (
            f'{seen.resource} is forbidden: User "system:anonymous" cannot {seen.verb} resource '
            f'"{seen.resource}" in API group ""'
        )
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message or default_message,
        "reason": reason or default_reason,
        "code": code,
    }
    return json.dumps(status).encode()


class FaultProxy:
    """The proxy (see the module docstring); a context manager that serves on a free port."""

    def __init__(self, upstream: str, *, ca_file: Path | None = None, tls: Any = None) -> None:
        target = urlsplit(upstream)
        self._upstream = (target.scheme, target.hostname or "127.0.0.1", target.port or 443)
        self._upstream_tls: ssl.SSLContext | None = None
        if target.scheme == "https":
            self._upstream_tls = ssl.create_default_context(
                cafile=str(ca_file) if ca_file else None
            )
            if ca_file is None:
                self._upstream_tls.check_hostname = False
                self._upstream_tls.verify_mode = ssl.CERT_NONE
        self._tls: ssl.SSLContext | None = None
        self.ca_file: Path | None = None
        if tls is not None:
            self._tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            tls.issue_cert("127.0.0.1", "localhost").configure_cert(self._tls)
        self._tls_ca = tls
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._streams: dict[socket.socket, Seen] = {}  # the open watches, and what each is
        self._clients: set[socket.socket] = set()
        self.requests: list[Seen] = []
        self.connections = 0  # accepted from clients: one per TLS handshake
        self._listener: socket.socket | None = None
        self.port = 0
        self._closed = False
        self._close_each: str | None = None  # None: connections kept; else the streams' framing

    # -- serving ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"{'https' if self._tls else 'http'}://127.0.0.1:{self.port}"

    def __enter__(self) -> FaultProxy:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed = True
        self.down()

    def kubeconfig(self, path: Path, **kwargs: Any) -> Path:
        """A kubeconfig whose server is the proxy (write_kubeconfig's arguments)."""
        if self._tls_ca is not None and "ca_file" not in kwargs:
            ca = path.parent / f"{path.name}.proxy-ca.crt"
            self._tls_ca.cert_pem.write_to_path(str(ca))
            kwargs["ca_file"] = ca
        return write_kubeconfig(path, self.url, **kwargs)

    def up(self) -> None:
        """Listen (again, on the same port after `down`)."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # first on a port of this xdist worker's own, outside the ephemeral range, so that no
        # connection the machine opens while the proxy is down takes it before `up`. Where the
        # ephemeral range leaves no room for the blocks (parallel.port_block) a connection may
        # still take one between the check and the bind: a first `up` then moves on to the next
        # free port, and a later one waits for its own port to be let go (10 s at most).
        deadline = time.monotonic() + 10
        while True:
            try:
                listener.bind(("127.0.0.1", self.port or free_ports()))
                break
            except OSError as e:
                if e.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                    listener.close()
                    raise
                time.sleep(0.05 if self.port else 0)
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        """Stop listening and reset every connection: the server is unreachable (refused)."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):  # wakes the accept up: nothing listens any more
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            clients = list(self._clients)
        for client in clients:
            _reset(client)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    # -- faults -------------------------------------------------------------------------

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self._faults.append(fault)
        return fault

    def delay(self, seconds: float, **match: Any) -> Fault:
        return self.add(Fault("delay", seconds=seconds, **match))

    def cut(self, after: int = 16, **match: Any) -> Fault:
        return self.add(Fault("cut", after=after, **match))

    def fail(self, status: int = 500, **match: Any) -> Fault:
        return self.add(Fault("status", status=status, **match))

    def throttle(self, retry_after: int = 1, **match: Any) -> Fault:
        return self.add(Fault("status", status=429, retry_after=retry_after, **match))

    def silence(self, **match: Any) -> Fault:
        """A streamed answer's head relayed, then nothing more (the connection held open until
        the client lets it go): a server gone silent in the middle of a watch."""
        return self.add(Fault("silence", **match))

    def gone(self, **match: Any) -> Fault:
        match.setdefault("verb", "watch")
        return self.add(Fault("status", status=410, **match))

    def refuse(self, status: int = 401, message: str = "", **match: Any) -> Fault:
        return self.add(Fault("status", status=status, message=message, **match))

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def close_each(self, framing: str = "chunked") -> None:
        """Answer each request with `Connection: close`, and close the connection after it; a
        streamed answer's body "chunked" or, with "close", delimited by the connection's end."""
        if framing not in ("chunked", "close"):
            raise ValueError(f"framing {framing!r}: chunked or close")
        self._close_each = framing

    def cut_streams(self, reset: bool = False) -> int:
        """Cut every open watch (or follow) stream in the middle of an event; how many there were.

        The stream is closed (or with `reset`, reset) after half a chunk.
        """
        with self._lock:
            streams = list(self._streams)
            for seen in self._streams.values():
                seen.done = "cut"
        # a chunk that never ends; in a body the close ends, an event that never ends
        cut = b'{"type":' if self._close_each == "close" else b'1f\r\n{"type":'
        for stream in streams:
            with contextlib.suppress(OSError):
                stream.sendall(cut)
            _cut(stream, reset)
        return len(streams)

    def seen(self, verb: str | None = None, resource: str | None = None) -> list[Seen]:
        with self._lock:
            return [
                r
                for r in self.requests
                if (verb is None or r.verb == verb) and (resource is None or r.resource == resource)
            ]

    def wait_for(self, verb: str, resource: str | None = None, timeout: float = 60.0) -> Seen:
        """The first request seen of `verb` (and `resource`), waiting for it; for a watch, the
        first that is open now (its answer has begun: `cut_streams` cuts it)."""
        deadline = time.monotonic() + timeout
        while True:
            if verb == "watch":
                with self._lock:
                    found = [s for s in self._streams.values() if resource in (None, s.resource)]
            else:
                found = self.seen(verb, resource)
            if found:
                return found[0]
            if time.monotonic() > deadline:
                raise AssertionError(f"no {verb} of {resource or 'anything'} came in {timeout} s")
            time.sleep(0.02)

    def _fault_for(self, seen: Seen) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.matches(seen) and (fault.count is None or fault.count > 0):
                    if fault.count is not None:
                        fault.count -= 1
                    return fault
        return None

    # -- one connection -----------------------------------------------------------------

    def _serve(self, raw: socket.socket) -> None:
        with self._lock:
            self._clients.add(raw)
            self.connections += 1
        client: socket.socket = raw
        try:
            if self._tls is not None:
                client = self._tls.wrap_socket(raw, server_side=True)
                with self._lock:
                    self._clients.add(client)
            reader = _Reader(client)  # not makefile(), which would keep the socket open
            while self._listener is not None and self._one(client, reader):
                pass
        except (OSError, ValueError, http.client.HTTPException):
            pass
        finally:
            with self._lock:
                self._clients.discard(raw)
                self._clients.discard(client)
                self._streams.pop(client, None)
            _close(client)

    def _one(self, client: socket.socket, reader: _Reader) -> bool:
        """One request and its answer; False when the connection is over."""
        line = reader.readline(65537)
        if not line:
            return False
        method, target, _ = line.decode("latin-1").split(" ", 2)
        headers: list[tuple[str, str]] = []
        while True:
            header = reader.readline(65537).decode("latin-1").rstrip("\r\n")
            if not header:
                break
            name, _, value = header.partition(":")
            headers.append((name.strip(), value.strip()))
        lower = {k.lower(): v for k, v in headers}
        body = _read_body(reader, lower)
        url = urlsplit(target)
        query = dict(parse_qsl(url.query))
        verb, resource = verb_of(method, url.path, query, lower.get("content-type", ""))
        dry_run = "dryRun" in query or b'"dryRun"' in body
        seen = Seen(method, url.path, query, verb, resource, dry_run=dry_run)
        with self._lock:
            self.requests.append(seen)
        fault = self._fault_for(seen)
        if fault is not None and fault.kind == "status":
            seen.done = str(fault.status)
            extra = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
            data = status_body(fault.status, seen, fault.reason, fault.message)
            _answer(
                client,
                fault.status,
                [("Content-Type", "application/json"), *extra.items(), *self._closing()],
                data,
            )
            return self._close_each is None
        if fault is not None and fault.kind == "delay":
            time.sleep(fault.seconds)  # the request goes on, whether the client waits or not
        streaming = query.get("watch") in ("true", "1") or query.get("follow") == "true"
        upstream = self._connect()
        try:
            upstream.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            for name, value in headers:
                if name.lower() not in HOP_BY_HOP:
                    upstream.putheader(name, value)
            upstream.putheader("Content-Length", str(len(body)))
            upstream.endheaders(body)
            response = upstream.getresponse()
            kept = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP]
            if streaming and response.status == 200:
                return self._stream(client, response, kept, fault, seen)
            data = response.read()
        finally:
            upstream.close()
        if fault is not None and fault.kind == "cut":
            seen.done = "cut"
            head = _head(
                response.status, response.reason, [*kept, ("Content-Length", str(len(data)))]
            )
            client.sendall(head + data[: fault.after])
            _cut(client, fault.reset)
            return False
        seen.done = seen.done or "passed"
        _answer(client, response.status, [*kept, *self._closing()], data, response.reason)
        return self._close_each is None

    def _closing(self) -> list[tuple[str, str]]:
        """The header of an answer after which the connection is closed (close_each)."""
        return [("Connection", "close")] if self._close_each is not None else []

    def _stream(
        self,
        client: socket.socket,
        response: http.client.HTTPResponse,
        headers: list[tuple[str, str]],
        fault: Fault | None,
        seen: Seen,
    ) -> bool:
        """Relay a watch chunk by chunk until either side ends it (or cut_streams does); with
        close_each's "close" framing, its bytes as they come, the body ended by the close."""
        chunked = self._close_each != "close"
        framing = [("Transfer-Encoding", "chunked")] if chunked else []
        client.sendall(
            _head(response.status, response.reason, [*headers, *framing, *self._closing()])
        )
        with self._lock:
            self._streams[client] = seen
            seen.done = "streamed"
        sent = 0
        try:
            if fault is not None and fault.kind == "silence":
                seen.done = "silenced"
                while client.recv(65536):  # until the client closes its end (or cut_streams)
                    pass
                return False
            while True:
                data = response.read1(65536)
                if not data:
                    if chunked:
                        client.sendall(b"0\r\n\r\n")
                    return self._close_each is None
                if fault is not None and fault.kind == "cut" and sent + len(data) > fault.after:
                    seen.done = "cut"
                    data = data[: max(0, fault.after - sent)]
                    client.sendall(f"{len(data) + 10:x}\r\n".encode() + data if chunked else data)
                    _cut(client, fault.reset)
                    return False
                sent += len(data)
                client.sendall(f"{len(data):x}\r\n".encode() + data + b"\r\n" if chunked else data)
        finally:
            with self._lock:
                self._streams.pop(client, None)
            response.close()

    def _connect(self) -> http.client.HTTPConnection:
        _scheme, host, port = self._upstream
        if self._upstream_tls is not None:
            return http.client.HTTPSConnection(host, port, context=self._upstream_tls, timeout=600)
        return http.client.HTTPConnection(host, port, timeout=600)


class _Reader:
    """Lines and sized reads from a socket, buffered."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = b""

    def _fill(self) -> bool:
        data = self._sock.recv(65536)
        self._buffer += data
        return bool(data)

    def readline(self, limit: int = 65537) -> bytes:
        while b"\n" not in self._buffer and len(self._buffer) < limit:
            if not self._fill():
                break
        end = self._buffer.find(b"\n") + 1 or len(self._buffer)
        line, self._buffer = self._buffer[:end], self._buffer[end:]
        return line

    def read(self, size: int) -> bytes:
        while len(self._buffer) < size:
            if not self._fill():
                break
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data


def _read_body(reader: _Reader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", ""):
        parts: list[bytes] = []
        while True:
            size = int(reader.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                reader.readline()
                return b"".join(parts)
            parts.append(reader.read(size))
            reader.readline()
    length = int(headers.get("content-length") or 0)
    return bytes(reader.read(length)) if length else b""


def _head(status: int, reason: str, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason or http.client.responses.get(status, '')}"]
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _answer(
    client: socket.socket,
    status: int,
    headers: list[tuple[str, str]],
    data: bytes,
    reason: str = "",
) -> None:
    client.sendall(_head(status, reason, [*headers, ("Content-Length", str(len(data)))]) + data)


def _cut(sock: socket.socket, reset: bool) -> None:
    """End the connection mid-answer: a clean close (the body ends short), or a reset."""
    if reset:
        _reset(sock)
        return
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    _close(sock)


def _reset(sock: socket.socket) -> None:
    """Close with RST: the other side's next read fails as on a connection cut."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    _close(sock)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()


# ---- what the tests of riding faults out share -------------------------------------------------

# Each fault by the name a test's parameter gives it, switched on in a proxy.
FAULTS: dict[str, Callable[[FaultProxy], object]] = {
    "slow": lambda p: p.delay(1.0),
    "cut": lambda p: p.cut(after=40),
    "429": lambda p: p.throttle(1),
    "500": lambda p: p.fail(500),
    "503": lambda p: p.fail(503),
    "410": lambda p: p.gone(),
    "401": lambda p: p.refuse(401),
    "403": lambda p: p.refuse(403),
    "down": lambda p: p.down(),
    "down, then 401": lambda p: p.down(),  # back, credentials refused (test_faults.py: `play`)
}
# The lines a command prints when it loses the API server, and when it has it back.
LOST = re.compile(
    r"simpletfjob: lost the API server at \S+ \(context '[^']*'\): (.+); retrying until (.+)"
)
BACK = re.compile(r"simpletfjob: the API server is back after \d+s")
