"""One object of any resource: get it, apply it server-side, delete it.

A call goes to the connection's namespace unless it names one (or, for apply,
the manifest does).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from types import EllipsisType
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from simpletfjob.errors import ClusterError, InputError, UsageError
from simpletfjob.kube.lists import namespace_for
from simpletfjob.kube.request import Action, ApiError, Deadline, request
from simpletfjob.kube.resources import Resource

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection

Propagation = Literal["Background", "Foreground", "Orphan"]
APPLY_PATCH = "application/apply-patch+yaml"


class Applied(NamedTuple):
    object: dict[str, Any]  # as the server answered (with --dry-run: as it would be)
    outcome: str  # 'created', 'configured' or 'unchanged', as kubectl prints them


class Deleted(NamedTuple):
    object: dict[str, Any] | None  # still there while finalizers or dependents hold it; else None
    already_gone: bool  # 404: there was nothing to delete
    replaced: bool = False  # 409 on the uid precondition: the name now holds another object


def get(
    conn: Connection,
    resource: Resource,
    name: str,
    *,
    namespace: str | None = None,
    deadline: Deadline | None = None,
    missing_ok: bool = False,
) -> dict[str, Any] | None:
    """The object as it is now; None if it does not exist and `missing_ok` (else a 404 error)."""
    action = Action("get", resource, namespace_for(conn, resource, namespace), name)
    answer = request(conn, action, deadline=deadline, passthrough=(404,) if missing_ok else ())
    if answer.status == 404:
        return None
    return _object(answer.data, conn, action)


def apply(
    conn: Connection,
    resource: Resource,
    manifest: Mapping[str, Any],
    *,
    namespace: str | None = None,
    field_manager: str = "simpletfjob",
    force: bool = False,
    dry_run: bool = False,
    live: Mapping[str, Any] | EllipsisType | None = ...,
    expected: Mapping[str, Any] | Callable[[], Mapping[str, Any] | None] | None = None,
    deadline: Deadline | None = None,
) -> Applied:
    """Server-side apply of one object, and whether that created, configured or left it unchanged.

    The namespace is the one given, else the manifest's, else the connection's; a manifest
    naming another than the one given is refused, as kubectl refuses it. `live` is the
    object as it was before (None: there was none); by default it is read first.

    The three words are kubectl's client-side apply's, decided from the server's answer:
    'created' when there was no object (or the answer is 201), 'unchanged' when the answer
    equals the live object but for status, resourceVersion and managedFields (`_content`),
    else 'configured'. A dry run is judged the same way, against its would-be object.

    An object not there when `live` was read but found by the server (200) was created
    meanwhile by another writer; `expected` (the server's dry run of creating it, or a
    function that gives it) stands in for its past: 'unchanged' when it is what this apply
    would have created, else 'configured'; without `expected`, 'created'.
    """
    metadata = manifest.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or not name:
        raise InputError(f"a {resource.kind} to apply needs a metadata.name")
    if (manifest.get("apiVersion"), manifest.get("kind")) != (resource.api_version, resource.kind):
        raise InputError(
            f"{resource.ref(name)}: the manifest is apiVersion {manifest.get('apiVersion')!r}, "
            f"kind {manifest.get('kind')!r}, not {resource.api_version} {resource.kind}"
        )
    written = metadata.get("namespace") if isinstance(metadata, Mapping) else None
    if resource.namespaced and written and namespace and written != namespace:
        raise UsageError(
            f"{resource.ref(name)} names namespace {written!r}, which is not the namespace "
            f"{namespace!r} it is applied to; give --namespace {written}, or remove it from the document"
        )
    ns = namespace_for(conn, resource, namespace or (written if resource.namespaced else None))
    action = Action("apply", resource, ns, name)
    deadline = deadline or Deadline.after(conn.settings.deadline)
    if live is ...:
        live = get(conn, resource, name, namespace=ns, deadline=deadline, missing_ok=True)
    query: list[tuple[str, str | int]] = [("fieldManager", field_manager)]
    if force:
        query.append(("force", "true"))
    if dry_run:
        query.append(("dryRun", "All"))
    body = json.dumps(manifest, separators=(",", ":")).encode()  # JSON is YAML
    answer = request(
        conn, action, query=query, body=body, content_type=APPLY_PATCH, deadline=deadline
    )
    applied = _object(answer.data, conn, action)
    if answer.status == 201:
        return Applied(applied, "created")
    if live is None:
        before = expected() if callable(expected) else expected
        if before is None:
            return Applied(applied, "created")
        same = _identity_free(applied) == _identity_free(before)
    else:
        same = _content(applied) == _content(live)
    return Applied(applied, "unchanged" if same else "configured")


def _content(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What an apply can change: not the status (controllers write it meanwhile), nor what
    a write touches even when it changes nothing else (resourceVersion, managedFields)."""
    metadata = {
        k: v
        for k, v in (obj.get("metadata") or {}).items()
        if k not in ("resourceVersion", "managedFields")
    }
    kept = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion", "metadata", "status")}
    return {**kept, "metadata": metadata}


def _identity_free(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An object's content without what the server makes up for each object it creates:
    name, uid and times, and what it derives from them (a Job's controller-uid and
    job-name labels, a Service's cluster IPs)."""
    content: dict[str, Any] = json.loads(json.dumps(_content(obj)))
    metadata = content["metadata"]
    for key in ("name", "uid", "creationTimestamp", "generation", "selfLink"):
        metadata.pop(key, None)
    spec = content.get("spec")
    if not isinstance(spec, dict):
        return content
    labelled = [
        (spec.get("selector") or {}).get("matchLabels"),
        ((spec.get("template") or {}).get("metadata") or {}).get("labels"),
    ]
    for labels in labelled:
        if isinstance(labels, dict):
            labels.pop("controller-uid", None)
            labels.pop("job-name", None)
    if spec.get("clusterIP") != "None":
        spec.pop("clusterIP", None)
        spec.pop("clusterIPs", None)
    return content


def delete(
    conn: Connection,
    resource: Resource,
    name: str,
    *,
    namespace: str | None = None,
    propagation: Propagation = "Background",
    dry_run: bool = False,
    uid: str | None = None,
    deadline: Deadline | None = None,
    grace: int | None = None,
) -> Deleted:
    """Delete one object, its dependents as `propagation` says; one that is not there is already gone.
    With `uid` (as listed) the server deletes only that object (`preconditions.uid`): a
    newcomer under the name answers 409, which comes back as `replaced`. `grace` 0 is
    kubectl's --force --grace-period=0, for a pod whose node is lost."""
    action = Action("delete", resource, namespace_for(conn, resource, namespace), name)
    options: dict[str, Any] = {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "propagationPolicy": propagation,
    }
    if dry_run:
        options["dryRun"] = ["All"]
    if uid:
        options["preconditions"] = {"uid": uid}
    if grace is not None:
        options["gracePeriodSeconds"] = grace
    try:
        answer = request(conn, action, body=options, deadline=deadline, passthrough=(404,))
    except ApiError as e:
        if uid and e.status == 409 and "precondition" in str(e).lower():
            return Deleted(None, already_gone=False, replaced=True)
        raise
    if answer.status == 404:
        return Deleted(None, already_gone=True)
    answered = _object(answer.data, conn, action)
    return Deleted(None if answered.get("kind") == "Status" else answered, already_gone=False)


def _object(data: bytes, conn: Connection, action: Action) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise ClusterError(f"{conn.target}: the answer to {action} is not JSON") from e
    if not isinstance(obj, dict):
        raise ClusterError(f"{conn.target}: the answer to {action} is not an object")
    return obj
