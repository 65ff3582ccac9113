"""The loopback API server's front: routing, authentication, RBAC, faults, and the Python API
tests use to set the cluster up and change it while a client watches.

Requests are routed as kube-apiserver routes them: /api/v1/... and /apis/GROUP/VERSION/...,
cluster-wide or under /namespaces/NS, with the status and binding subresources. The order
of checks is the real one: authentication (401), authorization (403), then the resource
(404), then the storage.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.kubeapi import discovery
from tests.support.kubeapi.objects import Encoded, pod_status
from tests.support.kubeapi.rbac import (
    ANONYMOUS,
    Attributes,
    Rule,
    default_allows,
    forbidden_details,
    forbidden_message,
    groups_of,
)
from tests.support.kubeapi.resources import (
    RESOURCES,
    STATUS_SUBRESOURCE,
    ApiError,
    Resource,
    status_object,
)
from tests.support.kubeapi.store import (
    INCONSISTENT_CONTINUE,
    Store,
    Watcher,
    compact_json,
    decode_continue,
    encode_continue,
    with_kind,
)

VERSION = {
    "major": "1",
    "minor": "20",
    "gitVersion": "v1.20.2",
    "gitCommit": "faecb196815e248d3ecfb03c680a4507229c2a56",
    "gitTreeState": "clean",
    "buildDate": "2021-01-13T13:20:00Z",
    "goVersion": "go1.15.5",
    "compiler": "gc",
    "platform": "linux/amd64",
}


@dataclass
class Faults:
    """What goes wrong, and how often; counters count down as faults are served.

    `resource` and `verb` limit them (None: every resource request; discovery is never
    faulted). Add more than one set with KubeAPI.add_faults.
    """

    fail_first: int = 0  # the first K requests answer 500 (etcd timed out)
    drop_first: int = 0  # the first K requests get their connection reset, with no answer
    throttle_first: int = 0  # the first K requests answer 429 with Retry-After
    retry_after: int = 1
    expire_continue: int = 0  # the next K lists that carry `continue` answer 410 Expired
    delay: float = 0.0  # seconds to wait before answering each request
    short_pages: bool = False  # lists read `limit` objects, then filter (see store.py)
    # A misbehaving proxy or aggregated API: each list page repeats its first K items at
    # its end. A real API server never lists one name twice; a client must still not trust it.
    repeat_items: int = 0
    watch_gone_first: int = 0  # the next K watches answer HTTP 410 before any event
    watch_expire_first: int = 0  # the next K watches send one ERROR event (410) and end
    watch_empty_first: int = 0  # the next K watches end at once, with no event
    watch_drop_after: int | None = None  # watches end after this many events ...
    watch_drops: int = 1  # ... this many of them; then watches run normally
    watch_reset: bool = False  # a dropped watch is reset (no end of stream), not ended
    resource: str | None = None
    verb: str | None = None

    def applies(self, request: Request) -> bool:
        if not request.resource:
            return False
        if self.resource is not None and request.resource != self.resource:
            return False
        return self.verb is None or request.verb == self.verb


@dataclass
class Request:
    """One request as the server saw it."""

    path: str
    query: dict[str, str]
    authorization: str | None
    method: str = "GET"
    user: str | None = None
    verb: str = ""
    resource: str = ""
    namespace: str | None = None
    name: str | None = None
    subresource: str = ""
    accept: str = ""  # the Accept header: a list of names only asks for PartialObjectMetadataList


@dataclass
class Answer:
    """What to send back: a body, a watch to stream, or nothing (a reset connection)."""

    code: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    watcher: Watcher | None = None
    resource: Resource | None = None
    timeout: float = 0.0
    bookmarks: bool = False
    drop_after: int | None = None
    reset_on_drop: bool = False
    reset: bool = False


def _json(code: int, obj: Any, headers: Mapping[str, str] | None = None) -> Answer:
    return Answer(code, {"Content-Type": "application/json", **(headers or {})}, compact_json(obj))


def _error(error: ApiError) -> Answer:
    return _json(error.code, error.status())


@dataclass
class KubeAPI:
    """The server's state: objects, users and their rights, faults, and the requests it saw."""

    store: Store = field(default_factory=Store)
    tokens: dict[str, str] = field(default_factory=dict)  # bearer token -> user name
    groups: dict[str, set[str]] = field(default_factory=dict)  # user -> more groups
    anonymous_auth: bool = True  # --anonymous-auth: requests without a token are anonymous
    rules: list[Rule] = field(default_factory=list)
    faults: Faults = field(default_factory=Faults)
    more_faults: list[Faults] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    url: str = ""
    ca_file: Path | None = None
    bookmark_interval: float = 60.0  # a watch with allowWatchBookmarks gets one this often
    watch_timeout: float = 1800.0  # a watch without timeoutSeconds ends after this long
    closing: threading.Event = field(default_factory=threading.Event)
    in_flight: int = 0  # requests being answered now
    peak_in_flight: int = 0  # the most requests answered at once
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- users and rights ------------------------------------------------------------------

    def add_user(self, name: str, token: str, groups: Iterable[str] = ()) -> None:
        """A --token-auth-file line: `token,name,uid,"group1,group2"`."""
        self.tokens[token] = name
        self.groups[name] = set(groups)

    def add_admin(self, token: str = "admin-token", name: str = "admin") -> str:
        self.add_user(name, token, ["system:masters"])
        return token

    def grant(
        self,
        subject: str,
        verbs: str | Sequence[str],
        resources: str | Sequence[str],
        namespace: str | None = None,
    ) -> None:
        """A Role and RoleBinding in `namespace`, or with None a ClusterRole and its binding."""

        def as_set(value: str | Sequence[str]) -> frozenset[str]:
            return frozenset([value] if isinstance(value, str) else value)

        self.rules.append(Rule(subject, as_set(verbs), as_set(resources), namespace))

    def authenticate(self, authorization: str | None) -> str | None:
        """The user a request is from; None answers 401."""
        if authorization is None or not authorization.lower().startswith("bearer "):
            return ANONYMOUS if self.anonymous_auth else None
        return self.tokens.get(authorization.split(" ", 1)[1].strip())

    def authorize(self, user: str, attributes: Attributes) -> bool:
        groups = groups_of(user, self.groups.get(user, ()))
        if default_allows(groups, attributes):
            return True
        subjects = {user, *groups}
        return any(rule.allows(subjects, attributes) for rule in self.rules)

    # -- faults ------------------------------------------------------------------------------

    def add_faults(self, **settings: Any) -> Faults:
        """Another set of faults, usually for one resource or verb: add_faults(resource="pods", ...)."""
        faults = Faults(**settings)
        self.more_faults.append(faults)
        return faults

    def _faults_for(self, request: Request) -> list[Faults]:
        return [f for f in (*self.more_faults, self.faults) if f.applies(request)]

    # -- what tests read ---------------------------------------------------------------------

    def requests_for(self, resource: str, verb: str | None = None) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.resource == resource and verb in (None, r.verb)]

    def nodes_requests(self) -> list[Request]:
        return [r for r in self.requests if r.path == "/api/v1/nodes"]

    @property
    def nodes(self) -> list[dict[str, Any]]:
        return self.objects("nodes")

    def objects(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        result = self.store.list_page(resource, namespace)
        return [json.loads(b) for b in result.items]

    # -- what tests change -------------------------------------------------------------------

    def set_nodes(self, nodes: Iterable[Mapping[str, Any]]) -> None:
        """Replace every node (they are stored as given, status and all)."""
        self.store.clear("nodes")
        self.store.load("nodes", nodes)  # type: ignore[arg-type]

    def load(self, resource: str, objs: Iterable[Mapping[str, Any]]) -> None:
        """Objects as they already are in the cluster (status and all); their namespaces appear."""
        self.store.load(resource, objs)  # type: ignore[arg-type]

    def load_encoded(self, resource: str, items: Iterable[Encoded]) -> None:
        self.store.load_encoded(resource, items)

    def create(
        self, resource: str, obj: Mapping[str, Any], manager: str = "test"
    ) -> dict[str, Any]:
        """As a POST does it: defaults, a fresh status, an ADDED event."""
        namespace = (obj.get("metadata") or {}).get("namespace") or "default"
        ns = namespace if RESOURCES[resource].namespaced else None
        return self.store.create(resource, ns, dict(obj), manager=manager)

    def get(self, resource: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        ns = (namespace or "default") if RESOURCES[resource].namespaced else None
        return self.store.get(resource, ns, name)

    def patch(
        self,
        resource: str,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        content_type: str = "application/merge-patch+json",
        manager: str = "test",
    ) -> dict[str, Any]:
        ns = (namespace or "default") if RESOURCES[resource].namespaced else None
        return self.store.patch(
            resource, ns, name, content_type, patch, manager=manager, subresource=subresource
        )[1]

    def delete(
        self,
        resource: str,
        name: str,
        *,
        namespace: str | None = None,
        propagation: str | None = None,
        grace: int | None = None,
    ) -> dict[str, Any]:
        ns = (namespace or "default") if RESOURCES[resource].namespaced else None
        return self.store.delete(resource, ns, name, propagation=propagation, grace=grace)

    def set_pod_status(
        self, name: str, namespace: str = "default", phase: str = "Running", **status: Any
    ) -> dict[str, Any]:
        """Play the kubelet: write `pod_status(pod, phase, ...)` through pods/status."""
        pod = self.get("pods", name, namespace)
        return self.patch(
            "pods",
            name,
            {"status": pod_status(pod, phase, **status)},
            namespace=namespace,
            subresource="status",
            manager="kubelet",
        )

    def force_delete(self, name: str, namespace: str = "default") -> dict[str, Any]:
        """What a kubelet does once a pod's containers are gone: delete with grace 0."""
        return self.delete("pods", name, namespace=namespace, grace=0)

    def compact(self) -> int:
        """etcd compaction: continue tokens and watches from before now expire (410)."""
        return self.store.compact()

    # -- answering ---------------------------------------------------------------------------

    def answer(
        self,
        path: str,
        query: dict[str, str],
        authorization: str | None,
        method: str = "GET",
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """One request, answered without a socket (a watch answers its headers only)."""
        answer = self.handle(method, path, query, authorization, body, headers or {})
        return answer.code, answer.headers, answer.body

    def handle(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        authorization: str | None,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """One request answered; `peak_in_flight` counts the most answered at once (a watch
        counts until its headers are out)."""
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            return self._handle(method, path, query, authorization, body, headers)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _handle(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        authorization: str | None,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        headers = headers or {}
        request = Request(
            path, dict(query), authorization, method, accept=headers.get("Accept", "")
        )
        info = _route(method, path, query)
        if info is not None:
            (
                request.verb,
                request.resource,
                request.namespace,
                request.name,
                request.subresource,
                group,
            ) = info
        user = self.authenticate(authorization)
        request.user = user
        with self._lock:
            self.requests.append(request)
        faults = self._faults_for(request)
        with self._lock:
            for f in faults:
                if f.drop_first > 0:
                    f.drop_first -= 1
                    return Answer(0, reset=True)
        if user is None:
            return _json(401, status_object(401, "Unauthorized", "Unauthorized"))
        if info is None:
            attributes = Attributes(verb=method.lower() if method != "GET" else "get", path=path)
        else:
            attributes = Attributes(
                request.verb,
                request.resource,
                request.subresource,
                group,
                request.namespace,
                request.name,
                path,
            )
        if not self.authorize(user, attributes):
            return _json(
                403,
                status_object(
                    403,
                    "Forbidden",
                    forbidden_message(user, attributes),
                    forbidden_details(attributes),
                ),
            )
        if info is None:
            return self._non_resource(path)
        for f in faults:
            if f.delay:
                time.sleep(f.delay)
        fault = self._fault(request, faults)
        if fault is not None:
            return fault
        try:
            return self._serve(request, group, query, body, headers, faults)
        except ApiError as e:
            return _error(e)

    def _fault(self, request: Request, faults: list[Faults]) -> Answer | None:
        with self._lock:
            for f in faults:
                if f.fail_first > 0:
                    f.fail_first -= 1
                    return _json(
                        500,
                        status_object(
                            500,
                            "InternalError",
                            "Internal error occurred: etcdserver: request timed out",
                            {"causes": [{"message": "etcdserver: request timed out"}]},
                        ),
                    )
                if f.throttle_first > 0:
                    f.throttle_first -= 1
                    return _json(
                        429,
                        status_object(
                            429,
                            "TooManyRequests",
                            "Too many requests, please try again later.",
                            {"retryAfterSeconds": f.retry_after},
                        ),
                        {"Retry-After": str(f.retry_after)},
                    )
                if request.verb == "list" and "continue" in request.query and f.expire_continue > 0:
                    f.expire_continue -= 1
                    try:
                        _, start = decode_continue(request.query["continue"])
                    except ApiError as e:
                        return _error(e)
                    return _json(
                        410,
                        status_object(
                            410,
                            "Expired",
                            INCONSISTENT_CONTINUE,
                            metadata={"continue": encode_continue(-1, start)},
                        ),
                    )
                if request.verb == "watch" and f.watch_gone_first > 0:
                    f.watch_gone_first -= 1
                    rv = self.store.rv
                    return _json(
                        410,
                        status_object(410, "Expired", f"too old resource version: 1 ({rv})"),
                    )
        return None

    def _non_resource(self, path: str) -> Answer:
        document = discovery.document(path, self.url)
        if document is not None:
            return _json(200, document)
        if path.rstrip("/") in ("/healthz", "/livez", "/readyz"):
            return Answer(200, {"Content-Type": "text/plain; charset=utf-8"}, b"ok")
        if path.rstrip("/") == "/version":
            return _json(200, VERSION)
        if path.startswith(("/api/", "/apis/")) or path in ("/api", "/apis"):
            return _json(
                404,
                status_object(
                    404, "NotFound", "the server could not find the requested resource", {}
                ),
            )
        return _json(404, {"paths": discovery.paths()})

    def _serve(
        self,
        request: Request,
        group: str,
        query: dict[str, str],
        body: bytes,
        headers: Mapping[str, str],
        faults: list[Faults],
    ) -> Answer:
        resource = RESOURCES.get(request.resource)
        sub = request.subresource
        known_sub = sub == "" or (
            sub == "status" and request.resource in STATUS_SUBRESOURCE and request.name
        )
        known_sub = known_sub or (sub == "binding" and request.resource == "pods")
        if (
            resource is None
            or resource.group != group
            or not known_sub
            or (not resource.namespaced and request.namespace and resource.name != "namespaces")
        ):
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        store = self.store
        ns = request.namespace if resource.namespaced else None
        dry_run = query.get("dryRun") == "All"
        manager = query.get("fieldManager") or _manager_from(headers.get("User-Agent", ""))
        verb = request.verb
        if verb == "get":
            return Answer(
                200,
                {"Content-Type": "application/json"},
                store.get_body(resource.name, ns, str(request.name)),
            )
        if verb == "list":
            return self._list(resource, ns, query, faults, request.accept)
        if verb == "watch":
            return self._watch(resource, request, ns, query, faults)
        if verb == "create" and sub == "binding":
            target = (_parse_body(body, headers) or {}).get("target") or {}
            store.bind(str(ns), str(request.name), str(target.get("name", "")))
            return _json(
                201,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "code": 201,
                },
            )
        if verb == "create":
            obj = _parse_body(body, headers)
            if not isinstance(obj, dict):
                raise ApiError(400, "BadRequest", "the body of the request is not an object")
            created = store.create(resource.name, ns, obj, manager=manager, dry_run=dry_run)
            return _json(
                201, {"kind": resource.kind, "apiVersion": resource.api_version, **created}
            )
        if verb == "update":
            obj = _parse_body(body, headers)
            updated = store.update(
                resource.name, ns, str(request.name), obj, manager=manager,
                subresource=sub or None, dry_run=dry_run,
            )  # fmt: skip
            return _json(
                200, {"kind": resource.kind, "apiVersion": resource.api_version, **updated}
            )
        if verb == "patch":
            content_type = headers.get("Content-Type", "").split(";")[0].strip()
            patch = _parse_body(
                body, headers, yaml_ok=content_type == "application/apply-patch+yaml"
            )
            apply_manager = query.get("fieldManager")
            if content_type == "application/apply-patch+yaml" and not sub:
                self._may_create_by_apply(request, resource, group, ns)
            code, patched = store.patch(
                resource.name, ns, str(request.name), content_type, patch,
                manager=apply_manager if content_type == "application/apply-patch+yaml" else manager,
                force=query.get("force") == "true", subresource=sub or None, dry_run=dry_run,
            )  # fmt: skip
            return _json(
                code, {"kind": resource.kind, "apiVersion": resource.api_version, **patched}
            )
        if verb == "delete":
            options = _delete_options(query, body, headers)
            answer = store.delete(resource.name, ns, str(request.name), **options)
            return _json(200, answer)
        if verb == "deletecollection":
            options = _delete_options(query, body, headers)
            listed = store.list_page(
                resource.name, ns, label_selector=query.get("labelSelector", ""),
                field_selector=query.get("fieldSelector", ""),
            )  # fmt: skip
            deleted = []
            for item in listed.items:
                meta = json.loads(item)["metadata"]
                deleted.append(
                    store.delete(resource.name, meta.get("namespace"), meta["name"], **options)
                )
            items = [
                {k: v for k, v in d.items() if k not in ("kind", "apiVersion")}
                for d in deleted
                if d.get("kind") != "Status"
            ]
            return _json(
                200,
                {
                    "kind": resource.kind + "List",
                    "apiVersion": resource.api_version,
                    "metadata": {"resourceVersion": str(store.rv)},
                    "items": items,
                },
            )
        raise ApiError(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )

    def _may_create_by_apply(
        self, request: Request, resource: Resource, group: str, ns: str | None
    ) -> None:
        """An apply that would create the object needs `create` too, checked after `patch`.

        v1.20 checks it inside the patch handler, so its refusal lacks the authorizer's
        wording: `services "s" is forbidden: ` and nothing after it.
        """
        try:
            self.store.get(resource.name, ns, str(request.name))
            return
        except ApiError as e:
            if e.code != 404:
                raise
        attributes = Attributes("create", resource.name, "", group, ns, request.name, request.path)
        if request.user is None or not self.authorize(request.user, attributes):
            raise ApiError(
                403,
                "Forbidden",
                f'{resource.name} "{request.name}" is forbidden: ',
                {"name": str(request.name), "kind": resource.name},
            )

    def _list(
        self,
        resource: Resource,
        ns: str | None,
        query: dict[str, str],
        faults: list[Faults],
        accept: str = "",
    ) -> Answer:
        """A page of a list; with `as=PartialObjectMetadataList` first in Accept (client-go's
        metadata client), each item's metadata only, as a PartialObjectMetadataList."""
        try:
            limit = int(query.get("limit") or 0)
        except ValueError:
            limit = 0
        result = self.store.list_page(
            resource.name,
            ns,
            label_selector=query.get("labelSelector", ""),
            field_selector=query.get("fieldSelector", ""),
            limit=limit,
            token=query.get("continue") or None,
            resource_version=query.get("resourceVersion") or None,
            short_pages=any(f.short_pages for f in faults),
        )
        metadata: dict[str, Any] = {"resourceVersion": str(result.rv)}
        if result.token:
            metadata["continue"] = result.token
        if result.remaining is not None:
            metadata["remainingItemCount"] = result.remaining
        items = list(result.items)
        kind, api_version = resource.kind + "List", resource.api_version
        if "as=PartialObjectMetadataList" in accept.split(",")[0]:
            kind, api_version = "PartialObjectMetadataList", "meta.k8s.io/v1"
            partial = {"kind": "PartialObjectMetadata", "apiVersion": api_version}
            items = [
                compact_json({**partial, "metadata": json.loads(i)["metadata"]}) for i in items
            ]
        head = compact_json(
            {"kind": kind, "apiVersion": api_version, "metadata": metadata}
        )  # compact, as Go's encoding/json writes it, metadata before items
        repeat = max((f.repeat_items for f in faults), default=0)
        items += items[:repeat]
        listed = b"[" + b",".join(items) + b"]"
        if kind == "PartialObjectMetadataList" and not items:
            listed = b"null"  # as Go writes this list's nil slice
        body = b"".join([head[:-1], b',"items":', listed, b"}"])
        return Answer(200, {"Content-Type": "application/json"}, body)

    def _watch(
        self,
        resource: Resource,
        request: Request,
        ns: str | None,
        query: dict[str, str],
        faults: list[Faults],
    ) -> Answer:
        field_selector = query.get("fieldSelector", "")
        if request.name:  # the old /pods/NAME?watch=1 form
            name_term = f"metadata.name={request.name}"
            field_selector = f"{field_selector},{name_term}" if field_selector else name_term
        try:
            timeout = float(query.get("timeoutSeconds") or 0) or self.watch_timeout
        except ValueError:
            timeout = self.watch_timeout
        answer = Answer(
            200,
            {"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
            resource=resource,
            timeout=timeout,
            bookmarks=query.get("allowWatchBookmarks") == "true",
        )
        with self._lock:
            for f in faults:
                if f.watch_expire_first > 0:
                    f.watch_expire_first -= 1
                    rv = query.get("resourceVersion") or "1"
                    answer.body = _error_event(f"too old resource version: {rv} ({self.store.rv})")
                    return answer
                if f.watch_empty_first > 0:
                    f.watch_empty_first -= 1
                    return answer  # no watcher and no body: the stream ends at once
                if f.watch_drop_after is not None and f.watch_drops > 0:
                    f.watch_drops -= 1
                    answer.drop_after = f.watch_drop_after
                    answer.reset_on_drop = f.watch_reset
                    break
        try:
            answer.watcher = self.store.watch(
                resource.name,
                ns,
                label_selector=query.get("labelSelector", ""),
                field_selector=field_selector,
                resource_version=query.get("resourceVersion") or None,
            )
        except ApiError as e:
            if e.code == 410:  # the watch cache answers 200 and then one ERROR event
                answer.body = _error_event(e.message)
                return answer
            raise
        return answer

    def bookmark(self, resource: Resource) -> bytes:
        """A BOOKMARK event: an empty object of the kind that carries only a resourceVersion."""
        obj: dict[str, Any] = {
            "kind": resource.kind,
            "apiVersion": resource.api_version,
            "metadata": {"resourceVersion": str(self.store.rv), "creationTimestamp": None},
        }
        if resource.name == "pods":
            obj["spec"] = {"containers": None}
            obj["status"] = {}
        elif resource.name == "jobs":
            obj["spec"] = {
                "template": {"metadata": {"creationTimestamp": None}, "spec": {"containers": None}}
            }
            obj["status"] = {}
        return b'{"type":"BOOKMARK","object":' + compact_json(obj) + b"}\n"


def watch_event(resource: Resource, kind: str, body: bytes) -> bytes:
    return b'{"type":"' + kind.encode() + b'","object":' + with_kind(resource, body) + b"}\n"


def _error_event(message: str) -> bytes:
    status = status_object(410, "Expired", message)
    return b'{"type":"ERROR","object":' + compact_json(status) + b"}\n"


def _manager_from(user_agent: str) -> str:
    """The field manager of an Update without fieldManager: the user agent up to its first '/'."""
    return user_agent.split("/", 1)[0] or "unknown"


def _parse_body(body: bytes, headers: Mapping[str, str], yaml_ok: bool = False) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        if yaml_ok:
            import yaml

            try:
                return yaml.safe_load(body)
            except yaml.YAMLError as e:
                raise ApiError(400, "BadRequest", f"error decoding YAML: {e}") from e
        raise ApiError(400, "BadRequest", "the body of the request is not JSON") from None


def _delete_options(
    query: Mapping[str, str], body: bytes, headers: Mapping[str, str]
) -> dict[str, Any]:
    """DeleteOptions from the query, or, when there is a body, from the body alone (as v1.20)."""
    source: dict[str, Any]
    if body.strip():
        parsed = _parse_body(body, headers)
        source = parsed if isinstance(parsed, dict) else {}
        dry = source.get("dryRun") or []
    else:
        source = dict(query)
        dry = [query["dryRun"]] if "dryRun" in query else []
    grace = source.get("gracePeriodSeconds")
    policy = source.get("propagationPolicy")
    if policy is None and source.get("orphanDependents") in (True, "true"):
        policy = "Orphan"
    return {
        "propagation": policy,
        "grace": None if grace is None else int(grace),
        "dry_run": "All" in dry,
        "preconditions": source.get("preconditions"),
    }


def _route(
    method: str, path: str, query: Mapping[str, str]
) -> tuple[str, str, str | None, str | None, str, str] | None:
    """(verb, resource, namespace, name, subresource, group) of a resource path, else None."""
    parts = [p for p in urlsplit(path).path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, rest = parts[1], parts[3:]
    else:
        return None
    if not rest:
        return None
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else ""
    watching = query.get("watch") in ("1", "true")
    verb = {
        "GET": "watch" if watching else ("get" if name else "list"),
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if name else "deletecollection",
    }.get(method, method.lower())
    if resource == "namespaces" and name:
        namespace = name  # a namespace is authorized as inside itself
    return verb, resource, namespace, name, subresource, group


def parse_query(url: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(url).query, keep_blank_values=True).items()}
