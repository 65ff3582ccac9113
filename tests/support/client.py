"""A small HTTP client for Kubernetes API servers, for test fixtures and the tests of them.

It speaks to the loopback server and to the real control plane alike (bearer token,
CA-verified https or plain http), answers parsed JSON with the status code, and reads
watches line by line. Tests of simpletfjob itself go through the real `kubernetes`
client and a kubeconfig instead.
"""

from __future__ import annotations

import functools
import http.client
import json
import os
import select
import ssl
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit


class ApiFailure(Exception):
    """An answer that is not 2xx; `status` is the server's Status object."""

    def __init__(self, method: str, path: str, code: int, status: Any) -> None:
        message = status.get("message") if isinstance(status, dict) else status
        super().__init__(f"{method} {path}: {code} {message}")
        self.code = code
        self.status = status


@dataclass
class Response:
    code: int
    body: Any  # parsed JSON, or the text when it is not JSON
    headers: Mapping[str, str]


# Connections kept open between requests, per thread (http.client's are not thread-safe), by
# (url, CA file, timeout): a new TLS connection for each request costs kube-apiserver and this
# process about 10 ms of CPU, and the kubelet stand-in and fixtures make many small requests.
_pool = threading.local()
_IDLE = 5.0  # seconds: a connection idle longer is closed rather than reused


@functools.lru_cache(maxsize=64)
def _tls_context(ca_file: str | None, stamp: tuple[int, int]) -> ssl.SSLContext:
    """One context per CA file (and version of it: `stamp` is its mtime and size)."""
    return ssl.create_default_context(cafile=ca_file)


def _dropped(connection: http.client.HTTPConnection) -> bool:
    """The server closed this idle connection (it is readable: EOF or an alert), as urllib3 checks."""
    sock = connection.sock
    if sock is None:
        return True
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


@dataclass
class Client:
    url: str
    token: str | None = None
    ca_file: Path | None = None
    timeout: float = 30.0
    user_agent: str = "simpletfjob-tests"

    def _connection(self, timeout: float | None = None) -> http.client.HTTPConnection:
        parts = urlsplit(self.url)
        host, port = parts.hostname or "127.0.0.1", parts.port
        if parts.scheme == "https":
            ca = str(self.ca_file) if self.ca_file else None
            stat = os.stat(ca) if ca else None
            context = _tls_context(ca, (stat.st_mtime_ns, stat.st_size) if stat else (0, 0))
            return http.client.HTTPSConnection(
                host, port, timeout=timeout or self.timeout, context=context
            )
        return http.client.HTTPConnection(host, port, timeout=timeout or self.timeout)

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": self.user_agent}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    @staticmethod
    def _target(path: str, query: Mapping[str, Any] | None) -> str:
        if not query:
            return path
        items = {k: str(v).lower() if isinstance(v, bool) else v for k, v in query.items()}
        return f"{path}?{urlencode(items)}"

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> Response:
        """Any request; the answer whatever its code."""
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        connection = self._pooled()
        try:
            connection.request(
                method,
                self._target(path, query),
                body=data,
                headers=self._headers(content_type if data is not None else None),
            )
            response = connection.getresponse()
            raw = response.read()
            headers = {k: v for k, v in response.getheaders()}
        except BaseException:
            connection.close()
            raise
        if not response.will_close:
            self._keep(connection)
        else:
            connection.close()
        try:
            parsed: Any = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        return Response(response.status, parsed, headers)

    def _key(self) -> tuple[str, str, float]:
        return (self.url, str(self.ca_file), self.timeout)

    def _pooled(self) -> http.client.HTTPConnection:
        """A kept connection to this server, if one is fresh and the server has not closed it."""
        kept: dict[tuple[str, str, float], tuple[http.client.HTTPConnection, float]]
        kept = _pool.__dict__.setdefault("kept", {})
        now = time.monotonic()
        for key, (connection, since) in list(kept.items()):
            if now - since > _IDLE:  # the server may be gone, or about to close it
                del kept[key]
                connection.close()
        entry = kept.pop(self._key(), None)
        if entry is not None and not _dropped(entry[0]):
            return entry[0]
        if entry is not None:
            entry[0].close()
        return self._connection()

    def _keep(self, connection: http.client.HTTPConnection) -> None:
        kept = _pool.__dict__.setdefault("kept", {})
        old = kept.pop(self._key(), None)
        if old is not None:
            old[0].close()
        kept[self._key()] = (connection, time.monotonic())

    def call(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        """A request that must succeed; its parsed answer."""
        response = self.request(method, path, body, **kwargs)
        if not 200 <= response.code < 300:
            raise ApiFailure(method, path, response.code, response.body)
        return response.body

    def get(self, path: str, **query: Any) -> Any:
        return self.call("GET", path, query=query)

    def post(self, path: str, body: Any, **query: Any) -> Any:
        return self.call("POST", path, body, query=query)

    def delete(self, path: str, body: Any = None, **query: Any) -> Any:
        return self.call("DELETE", path, body, query=query)

    def merge_patch(self, path: str, patch: Any, **query: Any) -> Any:
        return self.call(
            "PATCH", path, patch, query=query, content_type="application/merge-patch+json"
        )

    def apply(self, path: str, obj: Any, manager: str = "tests", force: bool = False) -> Any:
        query: dict[str, Any] = {"fieldManager": manager}
        if force:
            query["force"] = True
        return self.call(
            "PATCH", path, obj, query=query, content_type="application/apply-patch+yaml"
        )

    @contextmanager
    def watch(self, path: str, **query: Any) -> Iterator[Iterator[dict[str, Any]]]:
        """`with client.watch(path, resourceVersion=rv) as events: for event in events: ...`.

        Raises ApiFailure if the server refuses the watch; the stream ends when the server
        ends it (timeoutSeconds) or when the block is left.
        """
        connection = self._connection(timeout=float(query.get("timeoutSeconds", 30)) + 10)
        connection.request(
            "GET", self._target(path, {**query, "watch": 1}), headers=self._headers(None)
        )
        response = connection.getresponse()
        if response.status != 200:
            raw = response.read()
            connection.close()
            raise ApiFailure("GET", path, response.status, json.loads(raw) if raw else None)

        def events() -> Iterator[dict[str, Any]]:
            while True:
                line = response.readline()
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)

        try:
            yield events()
        finally:
            connection.close()
