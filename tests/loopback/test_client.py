"""The fixtures' HTTP client (tests/support/client.py) keeps its connections: one TLS handshake
for many requests, as the kubelet stand-in and the fixtures make them, and a new connection
when the server has closed the one it kept."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.client import Client
from tests.support.cluster import loopback_cluster, wait_for


class _Counting(http.server.ThreadingHTTPServer):
    daemon_threads = True
    connections = 0
    closed = 0
    close_after_answer = False

    def shutdown_request(self, request: Any) -> None:
        """Counted once the socket is closed (a handler's finish() comes before that: a
        count made there let a client see it while the connection was still open)."""
        super().shutdown_request(request)
        self.closed += 1


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Counting

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1

    def do_GET(self) -> None:
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        # as a server whose idle timeout passes: it closes without saying so beforehand
        self.close_connection = self.server.close_after_answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def counting_server() -> Iterator[_Counting]:
    server = _Counting(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_requests_from_one_thread_share_one_connection() -> None:
    with counting_server() as server:
        client = Client(f"http://127.0.0.1:{server.server_address[1]}")
        for _ in range(5):
            assert client.get("/")["ok"] is True
        other = Client(client.url, token="t")  # the same server: the same kept connection
        assert other.get("/")["ok"] is True
        assert server.connections == 1


def test_a_connection_the_server_closed_is_replaced_not_used() -> None:
    with counting_server() as server:
        server.close_after_answer = True
        client = Client(f"http://127.0.0.1:{server.server_address[1]}")
        assert client.get("/")["ok"] is True
        wait_for(lambda: server.closed == 1, 10, "the server to close its end")
        assert client.get("/")["ok"] is True  # not a RemoteDisconnected on the closed one
        assert server.connections == 2


def test_each_thread_has_its_own_connection() -> None:
    with counting_server() as server:
        client = Client(f"http://127.0.0.1:{server.server_address[1]}")
        answers: list[bool] = []
        threads = [
            threading.Thread(target=lambda: answers.append(client.get("/")["ok"])) for _ in range(3)
        ]
        for thread in threads:
            thread.start()
            thread.join()
        assert answers == [True, True, True]
        assert server.connections == 3


def test_the_loopback_servers_answers_come_whole_over_a_kept_connection() -> None:
    with loopback_cluster() as cluster:
        admin = cluster.admin
        for i in range(3):
            admin.post(
                "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"kept-{i}"}},
            )
        names = {n["metadata"]["name"] for n in admin.get("/api/v1/namespaces")["items"]}
        assert {"kept-0", "kept-1", "kept-2"} <= names
        assert admin.request("GET", "/api/v1/namespaces/nope").code == 404
        assert admin.get("/api/v1/namespaces/kept-1")["metadata"]["name"] == "kept-1"
