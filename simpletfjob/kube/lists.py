"""Lists of any resource: page by page, the next page fetched while this one is parsed.

A namespaced list goes to the connection's namespace unless it names one; `''`
means every namespace, as client-go's `NamespaceAll`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from simpletfjob.errors import ClusterError
from simpletfjob.kube.inflight import Pool
from simpletfjob.kube.request import Action, Deadline, request
from simpletfjob.kube.resources import Resource

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection, Target

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list, parsed: what the caller made of it, and the list's metadata."""

    value: T
    token: str | None  # metadata.continue: None on the last page
    resource_version: str


@dataclass(frozen=True)
class Listed(Generic[T]):
    """Every page of a list, in order, and the resourceVersion the list was read at."""

    pages: list[T]
    resource_version: str


class ObjectList(NamedTuple):
    items: list[dict[str, Any]]
    resource_version: str  # to watch from


class _Expired(Exception):
    """A continue token the server no longer knows (410)."""


def namespace_for(conn: Connection, resource: Resource, namespace: str | None) -> str | None:
    """The namespace a call goes to: None for a cluster-scoped resource, else as given or the connection's."""
    if not resource.namespaced:
        return None
    return conn.namespace if namespace is None else namespace


def list_pages(
    conn: Connection,
    resource: Resource,
    parse: Callable[[bytes], Page[T]],
    *,
    namespace: str | None = None,
    label_selector: str | None = None,
    field_selector: str | None = None,
    resource_version: str | None = None,
    deadline: Deadline | None = None,
    alternative: str = "",
    accept: str = "application/json",
) -> Listed[T]:
    """A whole list, page by page, each page's raw JSON handed to `parse` while the next one comes.
    A continue token that expires (410) restarts the list from the beginning, once, and the
    pages parsed so far are dropped: a list is a snapshot, and mixing two would not be one.
    `resource_version='0'` lets the API server answer from its cache (in one page)."""
    settings = conn.settings
    action = Action("list", resource, namespace_for(conn, resource, namespace), None, alternative)
    deadline = deadline or Deadline.after(settings.deadline)
    base: list[tuple[str, str | int]] = [("limit", settings.page_size)]
    if label_selector:
        base.append(("labelSelector", label_selector))
    if field_selector:
        base.append(("fieldSelector", field_selector))

    def fetch(token: str | None) -> bytes:
        if token is None:
            query = [*base, ("resourceVersion", resource_version)] if resource_version else base
            return request(conn, action, query=query, deadline=deadline, accept=accept).data
        # The token carries the resourceVersion the list is read at; the server refuses both.
        answer = request(
            conn, action, query=[*base, ("continue", token)], deadline=deadline,
            passthrough=(410,), accept=accept,
        )  # fmt: skip
        if answer.status == 410:
            raise _Expired()
        return answer.data

    for restart in (False, True):
        try:
            return _read_pages(fetch, parse)
        except _Expired as e:
            if restart:
                raise ClusterError(
                    f"{conn.target}: the {resource.singular} list changes faster than it can "
                    "be read in pages (the continue token expired twice, 410 Expired); try again"
                ) from e
    raise AssertionError("unreachable")


def list_objects(
    conn: Connection,
    resource: Resource,
    *,
    namespace: str | None = None,
    label_selector: str | None = None,
    field_selector: str | None = None,
    resource_version: str | None = None,
    deadline: Deadline | None = None,
) -> ObjectList:
    """Every object of a list (matching the selectors), and the resourceVersion to watch from."""
    path = resource.path(namespace_for(conn, resource, namespace))
    listed = list_pages(
        conn,
        resource,
        lambda data: decode_page(data, conn.target, resource, path),
        namespace=namespace,
        label_selector=label_selector,
        field_selector=field_selector,
        resource_version=resource_version,
        deadline=deadline,
    )
    return ObjectList([item for page in listed.pages for item in page], listed.resource_version)


# A list of the objects' metadata only (PartialObjectMetadataList, served from Kubernetes 1.15),
# else the whole objects: as client-go's metadata client asks for it.
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"


def list_metadata(conn: Connection, resource: Resource) -> ObjectList:
    """Every object's metadata (name, labels, ...) of a list: a few bytes an object, whatever its
    size. A server that answers with whole objects is read the same way, each cut to its
    metadata. In the connection's namespace, for a namespaced resource."""
    path = resource.path(namespace_for(conn, resource, None))

    def parse(data: bytes) -> Page[list[Any]]:
        # An empty PartialObjectMetadataList has `"items":null` (Go's nil slice); a quote in
        # a string is escaped, so this is the list's own.
        data = data.replace(b'"items":null', b'"items":[]', 1)
        page = decode_page(data, conn.target, resource, path)
        items = [{"metadata": o.get("metadata") or {}} for o in page.value if isinstance(o, dict)]
        return Page(items, page.token, page.resource_version)

    listed = list_pages(conn, resource, parse, accept=METADATA_ONLY)
    return ObjectList([item for page in listed.pages for item in page], listed.resource_version)


def decode_page(
    data: bytes,
    target: Target,
    resource: Resource,
    path: str,
    skim: Callable[[bytes], Any] | None = None,
) -> Page[list[Any]]:
    """A list page's items and metadata, checked. `skim` may decode it first, keeping only what
    the caller reads; where it gives None, the whole page is parsed."""
    page = skim(data) if skim is not None else None
    if page is None:
        try:
            page = json.loads(data)
        except (ValueError, RecursionError) as e:  # RecursionError: nested too deeply to parse
            raise ClusterError(f"{target}: the answer to GET {path} is not JSON") from e
    not_a_list = f"{target}: the answer to GET {path} is not a {resource.kind}List"
    if not isinstance(page, dict):
        raise ClusterError(not_a_list)
    items = page.get("items")
    metadata = page.get("metadata") or {}
    if (
        not isinstance(items, list)
        or not isinstance(metadata, Mapping)
        or not isinstance(metadata.get("continue") or "", str)
    ):
        raise ClusterError(not_a_list)
    return Page(items, metadata.get("continue") or None, str(metadata.get("resourceVersion") or ""))


def _read_pages(
    fetch: Callable[[str | None], bytes], parse: Callable[[bytes], Page[T]]
) -> Listed[T]:
    """Fetch the next page while this one is parsed: the server and the network work meanwhile."""
    values: list[T] = []
    version: str | None = None
    pool = Pool(1, "simpletfjob-page")
    try:
        data = fetch(None)
        while True:
            peeked = _peek_continue(data)
            ahead = pool.submit(fetch, peeked) if peeked else None
            page = parse(data)
            del data  # one page of raw JSON at a time
            values.append(page.value)
            if version is None:  # every page of a list is read at the first page's version
                version = page.resource_version
            token = page.token
            del page
            if ahead is not None and token == peeked:
                data = ahead.result()
                continue
            if ahead is not None:
                ahead.exception()  # waited for; its page is not the one the token names
            if token is None:
                return Listed(values, version)
            data = fetch(token)
    finally:
        pool.shutdown(wait=False)


# kube-apiserver writes a list's metadata before its items; the token is base64.
_CONTINUE = re.compile(rb'"continue"\s*:\s*"([A-Za-z0-9+/=_-]+)"')


def _peek_continue(data: bytes) -> str | None:
    """The continue token, read from the page's head without parsing it; None if not there."""
    items = data.find(b'"items":')
    found = _CONTINUE.search(data, 0, items) if items > 0 else None
    return found[1].decode("ascii") if found else None


def list_each(
    conn: Connection,
    resource: Resource,
    parse: Callable[[bytes], Page[T]],
    field_selectors: Iterable[str],
    *,
    namespace: str | None = None,
    alternative: str = "",
) -> Generator[list[T], None, None]:
    """One list for each field selector, the settings' `in_flight` at a time; each list's pages, in order.
    Each is read at resourceVersion 0: the API server answers from its cache. Closing
    the iterator stops early: the lists in flight are waited for, no more are asked for."""
    from collections import deque
    from concurrent.futures import Future
    from itertools import islice

    deadline = Deadline.after(conn.settings.deadline)
    in_flight = max(1, conn.settings.in_flight)
    selectors = iter(field_selectors)
    pending: deque[Future[Listed[T]]] = deque()
    pool = Pool(in_flight, "simpletfjob-list")

    def refill() -> None:
        for selector in islice(selectors, in_flight - len(pending)):
            pending.append(
                pool.submit(
                    list_pages,
                    conn,
                    resource,
                    parse,
                    namespace=namespace,
                    field_selector=selector,
                    resource_version="0",
                    deadline=deadline,
                    alternative=alternative,
                )
            )

    stopped = False
    try:
        refill()
        while pending:
            listed = pending.popleft().result()
            refill()  # the next request leaves before this list is handed over
            yield listed.pages
        stopped = True
    except GeneratorExit:
        stopped = True
        raise
    finally:
        # Stopped or done: wait for what is in flight, so that no request outlives the
        # call. Failed: go at once; the caller reports the failure and closes the connection.
        pool.shutdown(wait=stopped, cancel_futures=True)
