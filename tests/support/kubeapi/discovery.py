"""Discovery documents (/api, /api/v1, /apis, /apis/batch, /apis/batch/v1) for the served
resources, in the shape kube-apiserver v1.20 writes them."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from tests.support.kubeapi.resources import RESOURCES, STATUS_SUBRESOURCE, Resource


def _entry(resource: Resource) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": resource.name,
        "singularName": "",
        "namespaced": resource.namespaced,
        "kind": resource.kind,
        "verbs": list(resource.verbs),
    }
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if resource.categories:
        entry["categories"] = list(resource.categories)
    entry["storageVersionHash"] = resource.storage_version_hash
    return entry


def _subresource(resource: Resource, name: str, kind: str, verbs: list[str]) -> dict[str, Any]:
    return {
        "name": f"{resource.name}/{name}",
        "singularName": "",
        "namespaced": resource.namespaced,
        "kind": kind,
        "verbs": verbs,
    }


def resource_list(group: str) -> list[dict[str, Any]]:
    entries = []
    for resource in sorted(RESOURCES.values(), key=lambda r: r.name):
        if resource.group != group:
            continue
        entries.append(_entry(resource))
        if resource.name == "pods":
            entries.append(_subresource(resource, "binding", "Binding", ["create"]))
        if resource.name in STATUS_SUBRESOURCE:
            entries.append(
                _subresource(resource, "status", resource.kind, ["get", "patch", "update"])
            )
    return entries


def document(path: str, url: str) -> dict[str, Any] | None:
    path = path.rstrip("/")
    address = urlsplit(url).netloc or "127.0.0.1:6443"
    batch = {"groupVersion": "batch/v1", "version": "v1"}
    group = {"name": "batch", "versions": [batch], "preferredVersion": batch}
    if path == "/api":
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
        }
    if path == "/api/v1":
        return {"kind": "APIResourceList", "groupVersion": "v1", "resources": resource_list("")}
    if path == "/apis":
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]}
    if path == "/apis/batch":
        return {"kind": "APIGroup", "apiVersion": "v1", **group}
    if path == "/apis/batch/v1":
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": "batch/v1",
            "resources": resource_list("batch"),
        }
    return None


def paths() -> list[str]:
    """What a 404 for an unknown path lists, as the real server does."""
    return sorted(
        [
            "/api",
            "/api/v1",
            "/apis",
            "/apis/",
            "/apis/batch",
            "/apis/batch/v1",
            "/healthz",
            "/livez",
            "/readyz",
            "/version",
        ]
    )
