"""The API server's storage: objects by key, one resourceVersion counter, history, watches.

This is the part of kube-apiserver plus etcd that clients can observe:

- Every write takes the next value of one global counter as its resourceVersion, as
  etcd's revision. Objects are kept as compact JSON in etcd key order (namespace/name).
- A paged list reads at one revision: later pages of a list see the objects as they
  were when its first page was read (MVCC), rebuilt from the history of changes. When
  that history has been compacted away, the continue token has expired (410, with a
  fresh token that continues at the latest revision, as the real server sends).
- Like the etcd3 store, a page is filled to `limit` with objects that pass the
  selectors; the last page may be empty. `short_pages` reads `limit` objects and then
  filters, as the API contract allows ("servers may return fewer than limit items, even
  zero, with a continue token").
- `resourceVersion=0` on a list is answered from the watch cache: every match in one
  page, `limit` ignored (v1.20 serves no pages from its cache).
- A watch replays the changes after its resourceVersion, then follows live changes,
  with the watch cache's filtering: an object that stops matching a selector comes as
  DELETED, one that starts matching as ADDED. A resourceVersion older than the history
  is "too old" (410).
- Deletion: pods bound to a node terminate gracefully (deletionTimestamp) until deleted
  with gracePeriodSeconds 0, as no kubelet finishes them; finalizers hold objects; the
  garbage collector's work (Orphan, Background, Foreground) is done at once, in the same
  request, not seconds later as the real controller does.
- No controllers besides that garbage collection: no Job controller, no scheduler, no
  namespace controller (deleting a namespace deletes its objects at once).
"""

from __future__ import annotations

import base64
import bisect
import copy
import json
import queue
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.support.kubeapi import defaults
from tests.support.kubeapi.admission import (
    prepare_for_create,
    prepare_for_update,
    validate,
    validate_metadata,
)
from tests.support.kubeapi.objects import Encoded
from tests.support.kubeapi.patches import (
    ApplyConflict,
    PatchError,
    conflict_message,
    json_patch,
    merge_patch,
    record_update,
    render_path,
    server_side_apply,
    strategic_merge_patch,
)
from tests.support.kubeapi.resources import (
    RESOURCES,
    STATUS_SUBRESOURCE,
    ApiError,
    Resource,
    not_found,
)
from tests.support.kubeapi.selectors import (
    FieldTerm,
    SelectorError,
    check_fields,
    field_values,
    parse_field_selector,
    parse_label_selector,
)

INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token results "
    "in an inconsistent list - objects that were created, modified, or deleted between the time the "
    "first chunk was returned and now may show up in the list."
)


def encode_continue(rv: int, start: str) -> str:
    """storage.EncodeContinue: unpadded URL-safe base64 of {"v", "rv", "start"}."""
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, str]:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if data.get("v") != "meta.k8s.io/v1":
            raise ValueError(
                "continue key is not valid: server does not recognize this encoded key"
            )
        rv, start = int(data["rv"]), str(data["start"])
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        message = (
            str(e)
            if str(e).startswith("continue key")
            else "continue key is not valid: illegal base64 data"
        )
        raise ApiError(400, "BadRequest", message) from e
    if rv == 0:
        raise ApiError(
            400,
            "BadRequest",
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    return rv, start


@dataclass(frozen=True)
class Stored:
    """One object as stored: its JSON (without kind and apiVersion, as in a list) and its index."""

    key: str
    body: bytes
    labels: Mapping[str, str]
    fields: Mapping[str, str]
    owners: tuple[str, ...]
    rv: int

    def obj(self) -> dict[str, Any]:
        return json.loads(self.body)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Change:
    rv: int
    resource: str
    type: str  # ADDED, MODIFIED, DELETED
    key: str
    new: Stored  # for DELETED, the last state carrying the deletion's resourceVersion
    old: Stored | None


# Field indexes of the watch cache: pods by node, as the real one keeps them.
INDEXED_FIELDS = {"pods": "spec.nodeName"}


class Table:
    """One resource's objects: by key, the keys in etcd order, and the watch cache's index."""

    def __init__(self, resource: Resource) -> None:
        self.resource = resource
        self.objects: dict[str, Stored] = {}
        self.keys: list[str] = []
        self.last_change = 0
        self.indexed = INDEXED_FIELDS.get(resource.name)
        self.index: dict[str, set[str]] = {}

    def put(self, stored: Stored) -> None:
        old = self.objects.get(stored.key)
        if old is None:
            bisect.insort(self.keys, stored.key)
        elif self.indexed:
            self.index.get(old.fields[self.indexed], set()).discard(old.key)
        self.objects[stored.key] = stored
        if self.indexed:
            self.index.setdefault(stored.fields[self.indexed], set()).add(stored.key)

    def remove(self, key: str) -> None:
        old = self.objects.pop(key, None)
        if old is not None:
            del self.keys[bisect.bisect_left(self.keys, key)]
            if self.indexed:
                self.index.get(old.fields[self.indexed], set()).discard(key)

    def reindex(self) -> None:
        self.index = {}
        if self.indexed:
            for key, stored in self.objects.items():
                self.index.setdefault(stored.fields[self.indexed], set()).add(key)

    def cached(self, prefix: str, fields: list[FieldTerm]) -> list[Stored]:
        """What the watch cache holds under `prefix`, narrowed by its index when it can be."""
        exact = [t for t in fields if t.field == self.indexed and t.operator == "="]
        if exact:
            keys: Iterable[str] = (
                k for k in self.index.get(exact[0].value, ()) if k.startswith(prefix)
            )
        else:
            begin = bisect.bisect_left(self.keys, prefix)
            end = bisect.bisect_left(self.keys, prefix + "\U0010ffff") if prefix else len(self.keys)
            keys = self.keys[begin:end]
        # the cache is a map: its lists come in no particular order (here, by a hash of the key)
        return sorted((self.objects[k] for k in keys), key=lambda s: zlib.crc32(s.key.encode()))


def with_kind(resource: Resource, body: bytes) -> bytes:
    """A stored body with `kind` and `apiVersion` first, as GET and watch events carry them."""
    head = f'{{"kind":"{resource.kind}","apiVersion":"{resource.api_version}",'.encode()
    return head + body[1:] if body != b"{}" else head[:-1] + b"}"


def compact_json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


_METADATA_ORDER = (
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "ownerReferences", "finalizers", "managedFields",
)  # fmt: skip


def _ordered(obj: dict[str, Any]) -> dict[str, Any]:
    """Go's field order: metadata, spec, other fields, status; metadata in ObjectMeta's order."""
    meta = obj.get("metadata") or {}
    ordered_meta = {k: meta[k] for k in _METADATA_ORDER if k in meta}
    ordered_meta.update({k: v for k, v in meta.items() if k not in ordered_meta})
    out: dict[str, Any] = {"metadata": ordered_meta}
    if "spec" in obj:
        out["spec"] = obj["spec"]
    out.update(
        {
            k: v
            for k, v in obj.items()
            if k not in ("metadata", "spec", "status", "kind", "apiVersion")
        }
    )
    if "status" in obj:
        out["status"] = obj["status"]
    return out


class Watcher:
    """One open watch: its filter and the queue its events wait in."""

    def __init__(
        self,
        resource: Resource,
        namespace: str | None,
        labels: Callable[[Mapping[str, str]], bool] | None,
        fields: list[FieldTerm],
        after: int,
    ) -> None:
        self.resource = resource
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.after = after  # only changes newer than this
        self.events: queue.Queue[tuple[str, bytes] | None] = queue.Queue()

    def matches(self, stored: Stored) -> bool:
        if self.namespace is not None and not stored.key.startswith(self.namespace + "/"):
            return False
        if self.labels is not None and not self.labels(stored.labels):
            return False
        return all(term.matches(stored.fields) for term in self.fields)

    def event_for(self, change: Change) -> tuple[str, bytes] | None:
        """cacheWatcher.convertToWatchEvent."""
        if change.rv <= self.after:
            return None
        now = change.type != "DELETED" and self.matches(change.new)
        before = change.old is not None and self.matches(change.old)
        if change.type == "DELETED":
            return ("DELETED", change.new.body) if before else None
        if now and not before:
            return "ADDED", change.new.body
        if now and before:
            return "MODIFIED", change.new.body
        if before and change.old is not None:  # it left the selection: DELETED, as it was
            old = change.old.obj()
            old["metadata"]["resourceVersion"] = str(change.rv)
            return "DELETED", compact_json(old)
        return None

    def offer(self, change: Change) -> None:
        event = self.event_for(change)
        if event is not None:
            self.events.put(event)


@dataclass
class ListResult:
    items: list[bytes]
    rv: int
    token: str | None = None
    remaining: int | None = None


@dataclass
class Store:
    """Every object, the revision counter, the history of changes and the open watches."""

    history_size: int = 10_000
    clock: Callable[[], float] = time.time
    rv: int = 1
    oldest: int = 1  # the compaction point: reads at older revisions have expired
    lock: threading.RLock = field(default_factory=threading.RLock)
    tables: dict[str, Table] = field(
        default_factory=lambda: {n: Table(r) for n, r in RESOURCES.items()}
    )
    history: deque[Change] = field(default_factory=deque)
    watchers: set[Watcher] = field(default_factory=set)
    # the garbage collector's graph: owner uid -> its dependents, and owners being deleted
    dependents: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    finalizing: set[tuple[str, str]] = field(default_factory=set)
    # Feature gates of the fields they guard (admission.py): on, as the tests' control plane
    # has them; off, the field is dropped on its way in, as a server without the gate does.
    gates: dict[str, bool] = field(default_factory=lambda: {"TTLAfterFinished": True})

    def __post_init__(self) -> None:
        for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self._commit("namespaces", name, self._new_namespace(name), None)
        self.compact()

    # -- keys and encoding -------------------------------------------------------------------

    @staticmethod
    def key(resource: Resource, namespace: str | None, name: str) -> str:
        return f"{namespace}/{name}" if resource.namespaced else name

    def _new_namespace(self, name: str) -> dict[str, Any]:
        ns: dict[str, Any] = {
            "metadata": {
                "name": name,
                "uid": defaults.new_uid(),
                "creationTimestamp": defaults.timestamp(self.clock()),
                "labels": {"kubernetes.io/metadata.name": name},
            }
        }
        defaults.default_namespace(ns)
        return ns

    def _stored(
        self, resource: Resource, key: str, obj: dict[str, Any], rv: int, ordered: bool = True
    ) -> Stored:
        obj["metadata"]["resourceVersion"] = str(rv)
        meta = obj["metadata"]
        owners = tuple(str(o.get("uid")) for o in meta.get("ownerReferences") or [])
        return Stored(
            key,
            compact_json(_ordered(obj) if ordered else obj),
            dict(meta.get("labels") or {}),
            field_values(resource.name, obj),
            owners,
            rv,
        )

    def _commit(
        self, name: str, key: str, obj: dict[str, Any] | None, old: Stored | None
    ) -> Stored:
        """Write (or, with obj None, delete) one object at the next revision; tell the watches."""
        resource = RESOURCES[name]
        table = self.tables[name]
        self.rv += 1
        if obj is None:
            assert old is not None
            stored = self._stored(resource, key, old.obj(), self.rv)
            table.remove(key)
            kind = "DELETED"
        else:
            stored = self._stored(resource, key, obj, self.rv)
            table.put(stored)
            kind = "MODIFIED" if old is not None else "ADDED"
        self._index(name, old, None if obj is None else stored, obj)
        table.last_change = self.rv
        change = Change(self.rv, name, kind, key, stored, old)
        self.history.append(change)
        while len(self.history) > self.history_size:
            self.oldest = self.history.popleft().rv
        for watcher in list(self.watchers):
            if watcher.resource.name == name:
                watcher.offer(change)
        return stored

    def _index(
        self, name: str, old: Stored | None, new: Stored | None, obj: Mapping[str, Any] | None
    ) -> None:
        if old is not None:
            for uid in old.owners:
                self.dependents.get(uid, set()).discard((name, old.key))
        if new is not None:
            for uid in new.owners:
                self.dependents.setdefault(uid, set()).add((name, new.key))
        either = new or old
        assert either is not None
        entry = (name, either.key)
        meta = (obj or {}).get("metadata") or {}
        waiting = {"orphan", "foregroundDeletion"} & set(meta.get("finalizers") or [])
        if new is not None and meta.get("deletionTimestamp") and waiting:
            self.finalizing.add(entry)
        else:
            self.finalizing.discard(entry)

    def compact(self) -> int:
        """Forget history, as etcd compaction does: older continue tokens and watches expire."""
        with self.lock:
            self.history.clear()
            self.oldest = self.rv
            return self.rv

    # -- bulk loading (the state before the test starts) ----------------------------------------

    def load(self, name: str, objs: Iterable[dict[str, Any]]) -> None:
        """Store objects as given (status and all), each at its own revision, without events."""
        resource = RESOURCES[name]
        table = self.tables[name]
        with self.lock:
            for given in objs:
                # only metadata changes on the way in: copy that, share the rest
                obj = {**given, "metadata": dict(given.get("metadata") or {})}
                meta = obj["metadata"]
                namespace = meta.get("namespace") or ("default" if resource.namespaced else None)
                if resource.namespaced:
                    meta["namespace"] = namespace
                    self._ensure_namespace(str(namespace))
                if "uid" not in meta:
                    meta["uid"] = defaults.new_uid()
                if "creationTimestamp" not in meta:
                    meta["creationTimestamp"] = defaults.timestamp(self.clock())
                key = self.key(resource, namespace, meta["name"])
                self.rv += 1
                stored = self._stored(resource, key, obj, self.rv, ordered=False)
                self._index(name, table.objects.get(key), stored, obj)
                table.put(stored)
            table.last_change = self.rv
            self.compact()

    def load_encoded(self, name: str, items: Iterable[Encoded]) -> None:
        """Store pre-encoded objects (the benchmark's pods) without parsing them."""
        resource = RESOURCES[name]
        table = self.tables[name]
        with self.lock:
            namespaces = set()
            for item in items:
                self.rv += 1
                body = item.body.replace(
                    b'"resourceVersion":"1"', f'"resourceVersion":"{self.rv}"'.encode(), 1
                )
                key = self.key(resource, item.namespace, item.name)
                if item.namespace not in namespaces:
                    namespaces.add(item.namespace)
                    self._ensure_namespace(item.namespace)
                stored = Stored(key, body, item.labels, item.fields, item.owners, self.rv)
                self._index(name, table.objects.get(key), stored, None)
                table.objects[key] = stored
            table.keys = sorted(table.objects)
            table.reindex()
            table.last_change = self.rv
            self.compact()

    def clear(self, name: str) -> None:
        with self.lock:
            self.tables[name] = Table(RESOURCES[name])
            self.rv += 1
            self.compact()

    def _ensure_namespace(self, namespace: str) -> None:
        if namespace not in self.tables["namespaces"].objects:
            self.rv += 1
            table = self.tables["namespaces"]
            table.put(
                self._stored(
                    RESOURCES["namespaces"], namespace, self._new_namespace(namespace), self.rv
                )
            )

    # -- reading ------------------------------------------------------------------------------

    def get(self, name: str, namespace: str | None, obj_name: str) -> dict[str, Any]:
        resource = RESOURCES[name]
        with self.lock:
            stored = self.tables[name].objects.get(self.key(resource, namespace, obj_name))
        if stored is None:
            raise not_found(resource, obj_name)
        return stored.obj()

    def get_body(self, name: str, namespace: str | None, obj_name: str) -> bytes:
        resource = RESOURCES[name]
        with self.lock:
            stored = self.tables[name].objects.get(self.key(resource, namespace, obj_name))
        if stored is None:
            raise not_found(resource, obj_name)
        return with_kind(resource, stored.body)

    def _state_at(self, name: str, rv: int) -> tuple[dict[str, Stored], list[str]]:
        table = self.tables[name]
        if rv >= self.rv or table.last_change <= rv:
            return table.objects, table.keys
        objects = dict(table.objects)
        for change in reversed(self.history):
            if change.rv <= rv:
                break
            if change.resource != name:
                continue
            if change.old is None:
                objects.pop(change.key, None)
            else:
                objects[change.key] = change.old
        return objects, sorted(objects)

    def list_page(
        self,
        name: str,
        namespace: str | None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 0,
        token: str | None = None,
        resource_version: str | None = None,
        short_pages: bool = False,
    ) -> ListResult:
        resource = RESOURCES[name]
        labels, fields = parse_selectors(name, label_selector, field_selector)
        filtered = labels is not None or bool(fields)

        def passes(stored: Stored) -> bool:
            if labels is not None and not labels(stored.labels):
                return False
            return all(term.matches(stored.fields) for term in fields)

        if token and resource_version:
            raise ApiError(
                400, "BadRequest", "specifying resource version is not allowed when using continue"
            )
        if resource_version and not resource_version.isdigit():
            raise ApiError(
                500,
                "",
                f'resourceVersion: Invalid value: "{resource_version}": strconv.ParseUint: '
                f'parsing "{resource_version}": invalid syntax',
            )
        prefix = f"{namespace}/" if resource.namespaced and namespace else ""
        with self.lock:
            if resource_version == "0" or (resource_version and limit <= 0):
                # the watch cache: no pages, every match at the cache's revision
                cached = self.tables[name].cached(prefix, fields)
                return ListResult([s.body for s in cached if passes(s)], self.rv)
            start = ""
            at = self.rv
            if token:
                at, start = decode_continue(token)
                if at < 0:
                    at = self.rv
                elif at < self.oldest:
                    fresh = encode_continue(-1, start)
                    raise ApiError(
                        410, "Expired", INCONSISTENT_CONTINUE, metadata={"continue": fresh}
                    )
            elif resource_version:
                try:
                    at = int(resource_version)
                except ValueError as e:
                    raise ApiError(
                        500,
                        "",
                        f'resourceVersion: Invalid value: "{resource_version}": strconv.ParseUint: parsing "{resource_version}": invalid syntax',
                    ) from e
                if at < self.oldest:
                    raise ApiError(
                        410, "Expired", "The resourceVersion for the provided list is too old."
                    )
            objects, keys = self._state_at(name, at)
            begin = bisect.bisect_left(keys, prefix + start)
            end = bisect.bisect_left(keys, prefix + "\U0010ffff") if prefix else len(keys)
            if not filtered and not short_pages:  # no selector: a slice, not a loop
                position = end if limit <= 0 else min(end, begin + limit)
                items = [objects[k].body for k in keys[begin:position]]
            else:
                items = []
                read, position = 0, begin
                while position < end and not (
                    limit > 0 and (read >= limit if short_pages else len(items) >= limit)
                ):
                    stored = objects[keys[position]]
                    position += 1
                    read += 1
                    if passes(stored):
                        items.append(stored.body)
            result = ListResult(items, at)
            if (
                limit > 0 and position < end
            ):  # etcd has more: the client continues after our last key
                result.token = encode_continue(at, keys[position - 1][len(prefix) :] + "\x00")
                if not filtered:
                    result.remaining = end - position
            return result

    # -- watching -----------------------------------------------------------------------------

    def watch(
        self,
        name: str,
        namespace: str | None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        resource_version: str | None = None,
    ) -> Watcher:
        """Open a watch; its queue holds the replayed events first. Raises ApiError(410) if too old."""
        resource = RESOURCES[name]
        labels, fields = parse_selectors(name, label_selector, field_selector)
        with self.lock:
            if resource_version in (None, "", "0"):
                watcher = Watcher(resource, namespace, labels, fields, self.rv)
                prefix = f"{namespace}/" if namespace else ""
                for stored in self.tables[name].cached(prefix, fields):  # the cache's order
                    if watcher.matches(stored):
                        watcher.events.put(("ADDED", stored.body))
            else:
                try:
                    after = int(resource_version)
                except ValueError as e:
                    raise ApiError(
                        500,
                        "",
                        f'resourceVersion: Invalid value: "{resource_version}": strconv.ParseUint: parsing "{resource_version}": invalid syntax',
                    ) from e
                if after < self.oldest:
                    raise ApiError(
                        410, "Expired", f"too old resource version: {after} ({self.oldest})"
                    )
                watcher = Watcher(resource, namespace, labels, fields, after)
                for change in self.history:
                    if change.resource == name:
                        watcher.offer(change)
            self.watchers.add(watcher)
            return watcher

    def stop_watch(self, watcher: Watcher) -> None:
        with self.lock:
            self.watchers.discard(watcher)

    # -- writing ------------------------------------------------------------------------------

    def create(
        self,
        name: str,
        namespace: str | None,
        obj: dict[str, Any],
        *,
        manager: str,
        dry_run: bool = False,
        operation: str = "Update",
    ) -> dict[str, Any]:
        resource = RESOURCES[name]
        obj = copy.deepcopy(obj)
        obj.pop("kind", None)
        obj.pop("apiVersion", None)
        meta = obj.setdefault("metadata", {})
        if resource.namespaced:
            if meta.get("namespace") not in (None, "", namespace):
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        with self.lock:
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = defaults.generated_name(meta["generateName"])
            validate_metadata(resource, meta)
            if resource.namespaced and namespace not in self.tables["namespaces"].objects:
                raise not_found(RESOURCES["namespaces"], str(namespace))
            key = self.key(resource, namespace, meta["name"])
            if key in self.tables[name].objects:
                raise ApiError(
                    409,
                    "AlreadyExists",
                    f'{resource.qualified} "{meta["name"]}" already exists',
                    resource.details(meta["name"]),
                )
            applied = meta.get("managedFields") if operation == "Apply" else None
            for server_field in (
                "resourceVersion",
                "generation",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "managedFields",
                "selfLink",
            ):
                meta.pop(server_field, None)
            if applied:
                meta["managedFields"] = applied
            meta["uid"] = defaults.new_uid()
            meta["creationTimestamp"] = defaults.timestamp(self.clock())
            prepare_for_create(resource, obj, self.gates)
            validate(resource, obj, None)
            if operation == "Update":
                record_update(
                    None,
                    obj,
                    manager=manager,
                    api_version=resource.api_version,
                    when=meta["creationTimestamp"],
                )
            if dry_run:
                return _ordered(obj)
            stored = self._commit(name, key, obj, None)
            return stored.obj()

    def update(
        self,
        name: str,
        namespace: str | None,
        obj_name: str,
        new: dict[str, Any],
        *,
        manager: str,
        subresource: str | None = None,
        dry_run: bool = False,
        check_version: bool = True,
    ) -> dict[str, Any]:
        """PUT: replace the object (its spec, or its status through the status subresource)."""
        resource = RESOURCES[name]
        with self.lock:
            key = self.key(resource, namespace, obj_name)
            old_stored = self.tables[name].objects.get(key)
            if old_stored is None:
                raise not_found(resource, obj_name)
            new = copy.deepcopy(new)
            new.pop("kind", None)
            new.pop("apiVersion", None)
            given = (new.get("metadata") or {}).get("resourceVersion")
            if check_version and given and given != str(old_stored.rv):
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {resource.qualified} "{obj_name}": the object has been modified; please apply your changes to the latest version and try again',
                    resource.details(obj_name),
                )
            if (new.get("metadata") or {}).get("name", obj_name) != obj_name:
                raise ApiError(
                    400, "BadRequest", "the name of the object does not match the name on the URL"
                )
            return self._write(
                resource,
                key,
                old_stored,
                new,
                manager=manager,
                subresource=subresource,
                dry_run=dry_run,
            )

    def patch(
        self,
        name: str,
        namespace: str | None,
        obj_name: str,
        content_type: str,
        patch: Any,
        *,
        manager: str | None,
        force: bool = False,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> tuple[int, dict[str, Any]]:
        """PATCH with any of the four patch types; (201, obj) when an apply created it."""
        resource = RESOURCES[name]
        with self.lock:
            key = self.key(resource, namespace, obj_name)
            old_stored = self.tables[name].objects.get(key)
            if content_type == "application/apply-patch+yaml":
                if not manager:
                    raise ApiError(
                        422,
                        "Invalid",
                        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
                        {
                            "group": "meta.k8s.io",
                            "kind": "PatchOptions",
                            "causes": [
                                {
                                    "reason": "FieldValueRequired",
                                    "message": "Required value: is required for apply patch",
                                    "field": "fieldManager",
                                }
                            ],
                        },
                    )
                if not isinstance(patch, dict):
                    raise ApiError(
                        400,
                        "BadRequest",
                        "error decoding YAML: the applied configuration is not an object",
                    )
                for field_name, wanted in (
                    ("kind", resource.kind),
                    ("apiVersion", resource.api_version),
                ):
                    if patch.get(field_name) != wanted:
                        raise ApiError(
                            400,
                            "BadRequest",
                            f"the {field_name} of the applied configuration is {patch.get(field_name)!r}, not {wanted!r}",
                        )
                if (patch.get("metadata") or {}).get("name", obj_name) != obj_name:
                    raise ApiError(
                        400,
                        "BadRequest",
                        "the name of the object does not match the name on the URL",
                    )
                when = defaults.timestamp(self.clock())
                try:
                    if old_stored is None:
                        if subresource:
                            raise not_found(resource, obj_name)
                        merged = server_side_apply(
                            None,
                            patch,
                            manager=manager,
                            force=force,
                            api_version=resource.api_version,
                            when=when,
                        )
                        merged["metadata"]["name"] = obj_name
                        return 201, self.create(
                            name,
                            namespace,
                            merged,
                            manager=manager,
                            dry_run=dry_run,
                            operation="Apply",
                        )
                    merged = server_side_apply(
                        old_stored.obj(),
                        patch,
                        manager=manager,
                        force=force,
                        api_version=resource.api_version,
                        when=when,
                    )
                except ApplyConflict as e:
                    raise ApiError(
                        409,
                        "Conflict",
                        conflict_message(e.conflicts),
                        {
                            "causes": [
                                {
                                    "reason": "FieldManagerConflict",
                                    "message": f'conflict with "{m}"{u}',
                                    "field": render_path(p),
                                }
                                for m, u, p in e.conflicts
                            ]
                        },
                    ) from None
                return 200, self._write(
                    resource,
                    key,
                    old_stored,
                    merged,
                    manager=None,
                    subresource=subresource,
                    dry_run=dry_run,
                )
            if old_stored is None:
                raise not_found(resource, obj_name)
            old = old_stored.obj()
            try:
                if content_type == "application/merge-patch+json":
                    new = merge_patch(old, patch)
                elif content_type == "application/strategic-merge-patch+json":
                    new = strategic_merge_patch(old, patch)
                elif content_type == "application/json-patch+json":
                    new = json_patch(old, patch)
                else:
                    raise ApiError(415, "UnsupportedMediaType", "415: Unsupported Media Type", {})
            except PatchError as e:  # v1.20 says no more than this
                message = "the server rejected our request due to an error in our request"
                raise ApiError(422, "Invalid", message, {}) from e
            if not isinstance(new, dict):
                raise ApiError(422, "Invalid", "the patched object is not an object")
            return 200, self._write(
                resource,
                key,
                old_stored,
                new,
                manager=manager or "unknown",
                subresource=subresource,
                dry_run=dry_run,
            )

    def _write(
        self,
        resource: Resource,
        key: str,
        old_stored: Stored,
        new: dict[str, Any],
        *,
        manager: str | None,
        subresource: str | None,
        dry_run: bool,
    ) -> dict[str, Any]:
        old = old_stored.obj()
        new.pop("kind", None)
        new.pop("apiVersion", None)
        meta = new.setdefault("metadata", {})
        for server_field in (
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if server_field in old["metadata"]:
                meta[server_field] = old["metadata"][server_field]
            else:
                meta.pop(server_field, None)
        if "managedFields" not in meta:
            meta["managedFields"] = old["metadata"].get("managedFields", [])
        if subresource == "status":
            for part in list(new):
                if part not in ("metadata", "status"):
                    del new[part]
            for part in old:
                if part not in ("metadata", "status"):
                    new[part] = old[part]
        elif resource.name in STATUS_SUBRESOURCE:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        prepare_for_update(resource, new, old, self.gates)
        validate(resource, new, old)
        if manager is not None:
            record_update(
                old,
                new,
                manager=manager,
                api_version=resource.api_version,
                when=defaults.timestamp(self.clock()),
                subresource=subresource,
            )
        if _comparable(new) == _comparable(old):
            return old  # a no-op writes nothing: same resourceVersion, no event
        if resource.name == "jobs" and new.get("spec") != old.get("spec"):
            meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        if dry_run:
            return _ordered(new)
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not _terminating_pod(resource, new)
        ):
            self._commit(resource.name, key, None, old_stored)
            self._after_delete(old)
            return new
        stored = self._commit(resource.name, key, new, old_stored)
        self._collect_garbage()
        return stored.obj()

    def bind(self, namespace: str, pod_name: str, node: str) -> None:
        """pods/binding: what the scheduler does."""
        resource = RESOURCES["pods"]
        with self.lock:
            key = self.key(resource, namespace, pod_name)
            stored = self.tables["pods"].objects.get(key)
            if stored is None:
                raise not_found(resource, pod_name)
            pod = stored.obj()
            if pod["spec"].get("nodeName"):
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on pods/binding "{pod_name}": pod {pod_name} is already assigned to node "{pod["spec"]["nodeName"]}"',
                    {"name": pod_name, "kind": "pods/binding"},
                )
            pod["spec"]["nodeName"] = node
            conditions = pod.setdefault("status", {}).setdefault("conditions", [])
            conditions[:] = [c for c in conditions if c.get("type") != "PodScheduled"]
            conditions.append(
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": defaults.timestamp(self.clock()),
                }
            )
            self._commit("pods", key, pod, stored)

    # -- deleting -----------------------------------------------------------------------------

    def delete(
        self,
        name: str,
        namespace: str | None,
        obj_name: str,
        *,
        propagation: str | None = None,
        grace: int | None = None,
        dry_run: bool = False,
        preconditions: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """DELETE; the answer is the object (still there, or for pods) or a Success Status."""
        resource = RESOURCES[name]
        if name == "namespaces" and not dry_run:
            self.get(name, None, obj_name)
            self.delete_namespace_contents(obj_name)
        if propagation not in (None, "Orphan", "Background", "Foreground"):
            raise ApiError(
                422,
                "Invalid",
                f'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "{propagation}": supported values: "Foreground", "Background", "Orphan", "nil"',
                {
                    "group": "meta.k8s.io",
                    "kind": "DeleteOptions",
                    "causes": [
                        {
                            "reason": "FieldValueNotSupported",
                            "message": f'Unsupported value: "{propagation}": supported values: "Foreground", "Background", "Orphan", "nil"',
                            "field": "propagationPolicy",
                        }
                    ],
                },
            )
        with self.lock:
            key = self.key(resource, namespace, obj_name)
            stored = self.tables[name].objects.get(key)
            if stored is None:
                raise not_found(resource, obj_name)
            obj = stored.obj()
            meta = obj["metadata"]
            for field_name, wanted in (preconditions or {}).items():
                have = meta.get(field_name)
                if wanted is not None and str(have) != str(wanted):
                    label, why = (
                        ("UID", "deleted and then recreated")
                        if field_name == "uid"
                        else ("ResourceVersion", "modified")
                    )
                    # As kube-apiserver v1.20 words it (the kind, qualified by its group).
                    raise ApiError(
                        409,
                        "Conflict",
                        f'Operation cannot be fulfilled on {resource.kind_qualified} "{obj_name}": '
                        f"the {label} in the precondition ({wanted}) does not match the {label} "
                        f"in record ({have}). The object might have been {why}",
                        resource.details(obj_name),
                    )
            policy = propagation or resource.default_propagation
            finalizers = list(meta.get("finalizers") or [])
            if policy == "Orphan" and "orphan" not in finalizers:
                finalizers.append("orphan")
            if policy == "Foreground" and "foregroundDeletion" not in finalizers:
                finalizers.append("foregroundDeletion")
            period = _grace_period(resource, obj, grace)
            now = self.clock()
            if not finalizers and period == 0:
                # pods are deleted gracefully even with grace 0: the deletion is written first
                graceful = resource.name == "pods"
                if not meta.get("deletionTimestamp") or graceful:
                    if meta.get("deletionGracePeriodSeconds") != 0 or not graceful:
                        meta["deletionTimestamp"] = defaults.timestamp(now)
                    meta["deletionGracePeriodSeconds"] = 0
                if dry_run:
                    return _deleted_answer(resource, obj)
                if graceful and stored.obj()["metadata"].get("deletionGracePeriodSeconds") != 0:
                    stored = self._commit(name, key, obj, stored)
                    obj = stored.obj()
                self._commit(name, key, None, stored)
                self._after_delete(obj, background=policy == "Background")
                return _deleted_answer(resource, obj)
            if (
                meta.get("deletionTimestamp")
                and period >= int(meta.get("deletionGracePeriodSeconds") or 0)
                and finalizers == list(meta.get("finalizers") or [])
            ):
                return with_kind_dict(resource, obj)  # already being deleted, no sooner
            meta["deletionTimestamp"] = defaults.timestamp(now + period)
            meta["deletionGracePeriodSeconds"] = period
            if finalizers:
                meta["finalizers"] = finalizers
            if dry_run:
                return with_kind_dict(resource, _ordered(obj))
            written = self._commit(name, key, obj, stored).obj()
            self._collect_garbage()
            return with_kind_dict(resource, written)

    def _dependents(self, owner: Mapping[str, Any]) -> list[tuple[str, Stored]]:
        out = []
        for name, key in sorted(self.dependents.get(str(owner["metadata"].get("uid")), ())):
            stored = self.tables[name].objects.get(key)
            if stored is not None:
                out.append((name, stored))
        return out

    def _delete_dependent(self, name: str, stored: Stored) -> None:
        namespace, _, obj_name = stored.key.rpartition("/")
        if stored.key in self.tables[name].objects and b'"deletionTimestamp"' not in stored.body:
            self.delete(name, namespace or None, obj_name, propagation="Background")

    def _after_delete(self, obj: Mapping[str, Any], *, background: bool = True) -> None:
        """The garbage collector after an object went: its dependents go too (Background), and
        owners that wait for their dependents (Foreground) are looked at again."""
        if background:
            for name, dependent in self._dependents(obj):
                self._delete_dependent(name, dependent)
        self._collect_garbage()

    def _collect_garbage(self) -> None:
        """Finish the orphaning and foreground deletions that can finish, until none can."""
        progress = True
        while progress:
            progress = False
            for name, key in sorted(self.finalizing):
                stored = self.tables[name].objects.get(key)
                if stored is None:
                    self.finalizing.discard((name, key))
                    continue
                obj = stored.obj()
                finalizers = list(obj["metadata"].get("finalizers") or [])
                if "orphan" in finalizers:
                    uid = obj["metadata"]["uid"]
                    for dep_name, dependent in self._dependents(obj):
                        dep = dependent.obj()
                        refs = [
                            o
                            for o in dep["metadata"].get("ownerReferences", [])
                            if o.get("uid") != uid
                        ]
                        if refs:
                            dep["metadata"]["ownerReferences"] = refs
                        else:
                            del dep["metadata"]["ownerReferences"]
                        record_update(
                            dependent.obj(),
                            dep,
                            manager="kube-controller-manager",
                            api_version=RESOURCES[dep_name].api_version,
                            when=defaults.timestamp(self.clock()),
                        )
                        self._commit(dep_name, dependent.key, dep, dependent)
                    finalizers.remove("orphan")
                else:
                    waiting = False
                    for dep_name, dependent in self._dependents(obj):
                        self._delete_dependent(dep_name, dependent)
                        waiting = waiting or dependent.key in self.tables[dep_name].objects
                    if waiting:
                        continue  # a dependent is still terminating
                    finalizers.remove("foregroundDeletion")
                progress = True
                if finalizers:
                    obj["metadata"]["finalizers"] = finalizers
                    self._commit(name, key, obj, stored)
                    continue
                del obj["metadata"]["finalizers"]
                if _terminating_pod(RESOURCES[name], obj):
                    self._commit(name, key, obj, stored)
                else:
                    self._commit(name, key, None, stored)
                    self._after_delete(obj)
                break  # the set changed: start again

    def delete_namespace_contents(self, namespace: str) -> None:
        with self.lock:
            for name, table in self.tables.items():
                if not table.resource.namespaced:
                    continue
                for key in [k for k in table.keys if k.startswith(namespace + "/")]:
                    self._commit(name, key, None, table.objects[key])


def with_kind_dict(resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    return {"kind": resource.kind, "apiVersion": resource.api_version, **obj}


def _deleted_answer(resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    if resource.return_deleted:
        return with_kind_dict(resource, _ordered(obj))
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {**resource.details(obj["metadata"]["name"]), "uid": obj["metadata"]["uid"]},
    }


def _comparable(obj: Mapping[str, Any]) -> Any:
    """An object without what changes on every write (resourceVersion, managedFields times)."""
    meta = dict(obj.get("metadata") or {})
    meta.pop("resourceVersion", None)
    meta["managedFields"] = [
        {k: v for k, v in e.items() if k != "time"} for e in meta.get("managedFields") or []
    ]
    return {**obj, "metadata": meta}


def _terminating_pod(resource: Resource, obj: Mapping[str, Any]) -> bool:
    """A pod bound to a node stays until its kubelet (or a test) deletes it with grace 0."""
    meta = obj.get("metadata") or {}
    return (
        resource.name == "pods"
        and bool(meta.get("deletionTimestamp"))
        and int(meta.get("deletionGracePeriodSeconds") or 0) > 0
    )


def _grace_period(resource: Resource, obj: Mapping[str, Any], requested: int | None) -> int:
    """Pods bound to a node and still running terminate gracefully; everything else goes now."""
    if resource.name != "pods":
        return 0
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        return 0
    if requested is not None:
        return max(0, requested)
    return int(spec.get("terminationGracePeriodSeconds", 30))


def parse_selectors(
    name: str, label_selector: str, field_selector: str
) -> tuple[Callable[[Mapping[str, str]], bool] | None, list[FieldTerm]]:
    try:
        labels = parse_label_selector(label_selector) if label_selector else None
        fields = parse_field_selector(field_selector) if field_selector else []
        check_fields(name, fields)
    except SelectorError as e:
        raise ApiError(400, "BadRequest", str(e)) from None
    return labels, fields
