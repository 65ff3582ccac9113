"""HTTP for the loopback API server: keep-alive HTTP/1.1 (https with a trustme certificate if
asked), compact JSON answers, watches as chunked streams of JSON lines."""

from __future__ import annotations

import json
import queue
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.support.kubeapi.api import Answer, KubeAPI, parse_query, watch_event

# A local port nothing listens on, from this xdist worker's own (tests/support/parallel.py).
from tests.support.parallel import closed_port as closed_port


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as kube-apiserver
    # TCP_NODELAY, as Go sets it on every connection: the headers and the body go out in two
    # writes, and with Nagle's algorithm the body would wait for the client's delayed ACK
    # (40 ms on Linux), which a real server never makes a small answer wait.
    disable_nagle_algorithm = True
    server: _Server

    def _handle(self) -> None:
        api = self.server.api
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        url = urlsplit(self.path)
        answer = api.handle(
            self.command,
            url.path,
            parse_query(self.path),
            self.headers.get("Authorization"),
            body,
            dict(self.headers.items()),
        )
        try:
            if answer.reset:
                self._reset()
            elif "chunked" in answer.headers.get("Transfer-Encoding", ""):
                self._stream(answer)
            else:
                self.send_response(answer.code)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True  # the client gave up (a timeout test)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    def setup(self) -> None:
        super().setup()
        with self.server.lock:
            self.server.open.add(self.connection)

    def finish(self) -> None:
        with self.server.lock:
            self.server.open.discard(self.connection)
        super().finish()

    def _reset(self) -> None:
        """Close with RST: the client sees its connection dropped with no answer."""
        self.connection.setsockopt(
            socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
        )
        self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _stream(self, answer: Answer) -> None:
        api = self.server.api
        self.send_response(answer.code)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.end_headers()
        watcher = answer.watcher
        if watcher is None:  # an ERROR event (or nothing), and the end
            if answer.body:
                self._chunk(answer.body)
            self.wfile.write(b"0\r\n\r\n")
            return
        assert answer.resource is not None
        sent = 0
        deadline = time.monotonic() + answer.timeout
        next_bookmark = time.monotonic() + api.bookmark_interval
        try:
            while not api.closing.is_set():
                now = time.monotonic()
                if now >= deadline:
                    break
                if answer.bookmarks and now >= next_bookmark:
                    self._chunk(api.bookmark(answer.resource))
                    next_bookmark = now + api.bookmark_interval
                try:
                    event = watcher.events.get(timeout=min(0.05, deadline - now))
                except queue.Empty:
                    continue
                if event is None:
                    break
                self._chunk(watch_event(answer.resource, *event))
                sent += 1
                if answer.drop_after is not None and sent >= answer.drop_after:
                    if answer.reset_on_drop:  # RST now, before the server would end it with FIN
                        self._reset()
                        self.connection.close()
                        return
                    break
            self.wfile.write(b"0\r\n\r\n")
        finally:
            api.store.stop_watch(watcher)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    api: KubeAPI

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lock = threading.Lock()
        self.open: set[socket.socket] = set()  # the connections being served

    def close_connections(self) -> None:
        """End every kept connection, as a server that goes away does: a client's kept
        connection must not go on being answered by this server once a new one has its port."""
        with self.lock:
            connections = list(self.open)
        for connection in connections:
            with suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up mid-answer is expected in the fault tests


@contextmanager
def serve(api: KubeAPI, tls: Any = None) -> Iterator[KubeAPI]:
    """Run `api` on 127.0.0.1 in a thread; `tls` is a trustme.CA to serve https with its certificate."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.api = api
    scheme = "http"
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.issue_cert("127.0.0.1", "localhost").configure_cert(context)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    api.url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
    api.closing.clear()
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield api
    finally:
        api.closing.set()  # open watches end
        server.shutdown()
        server.server_close()
        server.close_connections()
        thread.join(timeout=5)


def write_kubeconfig(
    path: Path,
    server: str,
    *,
    token: str | None = None,
    ca_file: Path | None = None,
    insecure: bool = False,
    context: str = "loopback",
    user: str = "tester",
    namespace: str | None = None,
    current: bool = True,
) -> Path:
    """A kubeconfig with one cluster, user and context, as `kubectl config` writes it."""
    cluster: dict[str, Any] = {"server": server}
    if ca_file is not None:
        cluster["certificate-authority"] = str(ca_file)
    if insecure:
        cluster["insecure-skip-tls-verify"] = True
    context_entry: dict[str, Any] = {"cluster": f"{context}-cluster", "user": user}
    if namespace is not None:
        context_entry["namespace"] = namespace
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": f"{context}-cluster", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token} if token else {}}],
        "contexts": [{"name": context, "context": context_entry}],
        "preferences": {},
    }
    if current:
        config["current-context"] = context
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2))  # JSON is YAML, and needs no yaml import here
    return path
