"""A small HTTP client for Kubernetes API servers, for test fixtures and the tests of them.

It speaks to the loopback server and to the real control plane alike (bearer token,
CA-verified https or plain http), answers parsed JSON with the status code, and reads
watches line by line. Tests of simpletfjob itself go through the real `kubernetes`
client and a kubeconfig instead.
"""

from __future__ import annotations

import http.client
import json
import ssl
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
            context = ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)
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
        connection = self._connection()
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
        finally:
            connection.close()
        try:
            parsed: Any = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        return Response(response.status, parsed, headers)

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
