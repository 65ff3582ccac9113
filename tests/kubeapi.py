"""The loopback API server as today's tests know it: a re-export of tests.support.kubeapi.

The server itself now lives in tests/support/kubeapi/ and answers as a real server does:
anonymous users get 403 unless granted. This module's `KubeAPI` keeps the permissive
behaviour the existing tests were written against: with no tokens anyone may do
anything; with tokens, a request without one is 401 and only the users in `can_list`
may list nodes. New tests should use tests.support.kubeapi directly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.support import kubeapi as _support
from tests.support.kubeapi import (
    CONTROL_PLANE_TAINT,
    GPU_TAINT,
    NOT_READY_NO_EXECUTE,
    NOT_READY_NO_SCHEDULE,
    UNREACHABLE_NO_EXECUTE,
    UNSCHEDULABLE_TAINT,
    Attributes,
    Faults,
    Request,
    closed_port,
    cloud_name,
    make_node,
    realistic_cluster,
    serve,
    short_name,
    status_object,
    write_kubeconfig,
)
from tests.support.kubeapi.__main__ import main
from tests.support.kubeapi.selectors import _LabelParser

__all__ = [
    "CONTROL_PLANE_TAINT",
    "GPU_TAINT",
    "NOT_READY_NO_EXECUTE",
    "NOT_READY_NO_SCHEDULE",
    "UNREACHABLE_NO_EXECUTE",
    "UNSCHEDULABLE_TAINT",
    "Faults",
    "KubeAPI",
    "Request",
    "closed_port",
    "cloud_name",
    "forbidden_message",
    "main",
    "make_node",
    "parse_selector",
    "realistic_cluster",
    "serve",
    "short_name",
    "status",
    "write_kubeconfig",
]


@dataclass
class KubeAPI(_support.KubeAPI):
    """The permissive server of the original tests (see the module docstring)."""

    can_list: set[str] = field(default_factory=set)  # users with RBAC to list nodes

    def authenticate(self, authorization: str | None) -> str | None:
        if not self.tokens:
            return "system:anonymous"
        if authorization is None or not authorization.lower().startswith("bearer "):
            return None
        return self.tokens.get(authorization.split(" ", 1)[1].strip())

    def authorize(self, user: str, attributes: Attributes) -> bool:
        if not self.tokens or attributes.resource != "nodes":
            return True
        return user in self.can_list


def status(code: int, reason: str, message: str, **extra: Any) -> dict[str, Any]:
    """An error as kube-apiserver writes it: a v1 Status object."""
    return status_object(code, reason, message, extra.get("details"), extra.get("metadata"))


def forbidden_message(user: str) -> str:
    return (
        f'nodes is forbidden: User "{user}" cannot list resource "nodes" '
        'in API group "" at the cluster scope'
    )


def parse_selector(text: str) -> list[Callable[[Mapping[str, str]], bool]]:
    """The server's own reading of a label selector, one predicate per requirement."""
    return [r.matches for r in _LabelParser(text).parse()]


if __name__ == "__main__":
    main()
