"""The served resources, as discovery and messages name them, and errors as v1 Status objects."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

FULL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class Resource:
    """One served resource, with what discovery says about it."""

    name: str
    kind: str
    group: str
    version: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = FULL_VERBS
    storage_version_hash: str = ""
    default_propagation: str = "Background"
    return_deleted: bool = False  # a DELETE answers the object, not a Status

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """As messages name it: `pods`, `jobs.batch`."""
        return f"{self.name}.{self.group}" if self.group else self.name

    @property
    def kind_qualified(self) -> str:
        """As validation messages name it: `Pod`, `Job.batch`."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    def details(self, name: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if name is not None:
            out["name"] = name
        if self.group:
            out["group"] = self.group
        out["kind"] = self.name
        return out


RESOURCES: dict[str, Resource] = {
    r.name: r
    for r in (
        Resource(
            "namespaces",
            "Namespace",
            "",
            "v1",
            False,
            ("ns",),
            verbs=tuple(v for v in FULL_VERBS if v != "deletecollection"),
            storage_version_hash="Q3oi5N2YM8M=",
            return_deleted=True,
        ),
        Resource("nodes", "Node", "", "v1", False, ("no",), storage_version_hash="XwShjMxG9Fs="),
        Resource(
            "pods",
            "Pod",
            "",
            "v1",
            True,
            ("po",),
            ("all",),
            storage_version_hash="xPOwRZ+Yhw8=",
            return_deleted=True,
        ),
        Resource(
            "services",
            "Service",
            "",
            "v1",
            True,
            ("svc",),
            ("all",),
            verbs=tuple(v for v in FULL_VERBS if v != "deletecollection"),
            storage_version_hash="0/CO1lhkEBI=",
        ),
        Resource("events", "Event", "", "v1", True, ("ev",), storage_version_hash="r2yiGXH7wu8="),
        Resource(
            "jobs",
            "Job",
            "batch",
            "v1",
            True,
            (),
            ("all",),
            storage_version_hash="mudhfqk/qZY=",
            default_propagation="Orphan",
        ),
    )
}
STATUS_SUBRESOURCE = {"namespaces", "nodes", "pods", "services", "jobs"}


class ApiError(Exception):
    """A failure the server answers with a v1 Status."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details = dict(details) if details is not None else None
        self.metadata = dict(metadata or {})

    def status(self) -> dict[str, Any]:
        return status_object(self.code, self.reason, self.message, self.details, self.metadata)


def status_object(
    code: int,
    reason: str,
    message: str,
    details: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """An error as kube-apiserver writes it (a Status without `reason` for 500s it has none for)."""
    out: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": dict(metadata or {}),
        "status": "Failure",
        "message": message,
    }
    if reason:
        out["reason"] = reason
    if details is not None:
        out["details"] = dict(details)
    out["code"] = code
    return out


def not_found(resource: Resource, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{resource.qualified} "{name}" not found', resource.details(name)
    )


def invalid(resource: Resource, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """422 Invalid; causes are (field, reason, message) as field.ErrorList prints them."""
    text = ", ".join(f"{f}: {m}" for f, _, m in causes)
    if len(causes) > 1:
        text = "[" + text + "]"
    details = {
        "name": name,
        **({"group": resource.group} if resource.group else {}),
        "kind": resource.kind,
        "causes": [{"reason": r, "message": m, "field": f} for f, r, m in causes],
    }
    return ApiError(
        422, "Invalid", f'{resource.kind_qualified} "{name}" is invalid: {text}', details
    )
