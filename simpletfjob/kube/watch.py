"""A watch that keeps going: it resumes from the last resourceVersion and re-lists on 410 Gone.

The caller gets a stream of `Event`s until its deadline passes (or it stops
reading). The server ends each watch after `timeoutSeconds`, and connections
drop; either way the watch is opened again from the last resourceVersion it
saw, so no change is missed or seen twice. When the server no longer has that
version (410: an HTTP answer, or an ERROR event with code 410), the objects are
listed again and handed over whole, as a RELIST event, and the watch goes on
from the new list. Nothing polls: between events, the watch waits on its socket.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from simpletfjob.errors import ClusterError
from simpletfjob.kube.lists import list_objects, namespace_for
from simpletfjob.kube.outage import StillAway
from simpletfjob.kube.refusals import first_line
from simpletfjob.kube.request import OUTAGE_CAP, Action, Deadline, KeptFailing, OutOfTime, request
from simpletfjob.kube.resources import Resource
from simpletfjob.kube.send import Unreachable, broken
from simpletfjob.kube.turns import Waiting, ready

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection

WINDOW = 300.0  # seconds the server keeps one watch open (timeoutSeconds), as client-go's minimum
SLACK = 10.0  # seconds past the window before a silent connection counts as dropped
CHANGES = ("ADDED", "MODIFIED", "DELETED", "BOOKMARK")


class Event(NamedTuple):
    """A change to one object, or (RELIST) every object as it is now, which replaces what came before."""

    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK (only a resourceVersion), or RELIST
    object: dict[str, Any] | None  # None for RELIST
    objects: tuple[dict[str, Any], ...] = ()  # RELIST: every object, listed again


class _Gone(Exception):
    """The server no longer has the resourceVersion the watch asked for (410)."""


def watch(
    conn: Connection,
    resource: Resource,
    *,
    namespace: str | None = None,
    label_selector: str | None = None,
    field_selector: str | None = None,
    resource_version: str | None = None,
    deadline: Deadline | None = None,
    bookmarks: bool = True,
    slim: Callable[[bytes], bytes] | None = None,
    lean: Callable[[dict[str, Any]], None] | None = None,
) -> Iterator[Event]:
    """Changes to the objects that match, from `resource_version` (None: list first, as a RELIST).

    It ends when `deadline` passes (None: never); a server that keeps failing, or refuses,
    is a `ClusterError`. `slim` may cut what the caller needs none of from each event's JSON
    and each page of a list again, before they are parsed (a result that does not parse is
    parsed whole): lists.without_managed_fields. `lean` is given each object parsed (an
    event's, a list's item), to cut in place what the caller keeps none of.
    """
    return cast(
        "Iterator[Event]",
        _watch(
            conn, resource, namespace, label_selector, field_selector, resource_version,
            deadline, bookmarks, slim, lean, in_turns=False,
        ),
    )  # fmt: skip


def watch_in_turns(
    conn: Connection,
    resource: Resource,
    *,
    namespace: str | None = None,
    label_selector: str | None = None,
    field_selector: str | None = None,
    resource_version: str | None = None,
    deadline: Deadline | None = None,
    bookmarks: bool = True,
    slim: Callable[[bytes], bytes] | None = None,
    lean: Callable[[dict[str, Any]], None] | None = None,
) -> Iterator[Event | Waiting]:
    """`watch`, read in the caller's thread beside others (turns.Turns): before a read that
    would block on the socket, it yields `Waiting`, and is resumed once the socket is readable
    (or by the time its read must begin: a silent connection times out as it would have)."""
    return _watch(
        conn, resource, namespace, label_selector, field_selector, resource_version,
        deadline, bookmarks, slim, lean, in_turns=True,
    )  # fmt: skip


def _watch(
    conn: Connection,
    resource: Resource,
    namespace: str | None,
    label_selector: str | None,
    field_selector: str | None,
    resource_version: str | None,
    deadline: Deadline | None,
    bookmarks: bool,
    slim: Callable[[bytes], bytes] | None,
    lean: Callable[[dict[str, Any]], None] | None,
    in_turns: bool,
) -> Iterator[Event | Waiting]:
    settings = conn.settings
    ns = namespace_for(conn, resource, namespace)
    action = Action("watch", resource, ns)
    selectors: list[tuple[str, str | int]] = []
    if label_selector:
        selectors.append(("labelSelector", label_selector))
    if field_selector:
        selectors.append(("fieldSelector", field_selector))

    version = resource_version or ""

    def relist() -> Iterator[Event | Waiting]:
        listed = list_objects(
            conn,
            resource,
            namespace=ns,
            label_selector=label_selector,
            field_selector=field_selector,
            deadline=_within(deadline, settings.deadline),
            slim=slim,
            lean=lean,
        )
        nonlocal version
        version = listed.resource_version
        yield Event("RELIST", None, tuple(listed.items))

    def pause(seconds: float) -> Iterator[Waiting]:
        """The pause before the next try: read in turns, a wait the caller takes while it reads
        the other watches (turns.Turns); else settings.sleep."""
        if in_turns:
            yield Waiting(None, time.monotonic() + seconds)
        else:
            settings.sleep(seconds)

    def follow(fresh: bool) -> Iterator[Event | Waiting]:
        nonlocal version
        # Failures in a row. Once the ride has said the server is back (another call was
        # answered), a watch opened again counts from 0: a later break is a new outage's first
        # failure, not the last attempt of the one that is over.
        failures = 0
        returns = 0  # the ride's count of the server's returns at this watch's last failure
        problem = ""
        opened_once = False
        relist_first = False
        while True:
            remaining = math.inf if deadline is None else deadline.remaining()
            if remaining <= 0:
                return
            if relist_first:
                yield from relist()
                relist_first, fresh = False, True
            # The server ends the watch at the caller's deadline, or after a window; a read
            # timeout a little past that catches a server that went silent.
            window = min(WINDOW, remaining)
            query: list[tuple[str, str | int]] = [
                ("watch", "true"),
                ("resourceVersion", version),
                ("timeoutSeconds", max(1, math.ceil(window))),
                *selectors,
            ]
            if bookmarks:
                query.append(("allowWatchBookmarks", "true"))
            opened = time.monotonic()
            seen = 0
            events: Generator[Event | Waiting, None, None] | None = None
            try:
                read_timeout = remaining if remaining <= WINDOW else WINDOW + SLACK
                answer = request(
                    conn,
                    action,
                    query=query,
                    deadline=_within(deadline, settings.deadline),
                    passthrough=(410,),
                    stream=True,
                    read_timeout=read_timeout,
                )
                if answer.status == 410:
                    raise _Gone()
                opened_once = True
                if failures and conn.ride is not None and conn.ride.returns > returns:
                    failures = 0
                events = _events(
                    answer.stream, conn, action, deadline, read_timeout, slim, lean, in_turns
                )
                for event in events:
                    if isinstance(event, Waiting):
                        yield event  # (turns.Turns resumes it once its socket is readable)
                        continue
                    seen += 1
                    fresh = False
                    if failures >= settings.attempts and conn.ride is not None:
                        conn.ride.back()  # this watch said the server was away: it is back
                    failures = 0
                    version = _version_of(event) or version
                    yield event
                    if deadline is not None and deadline.remaining() <= 0:
                        return
            except _Gone:
                relist_first = True
                if not fresh:  # the watch's version is too old: list again, as the API asks
                    continue
                # Gone again, with a version just listed: a server (or a proxy) that is not
                # well. Listing again at once would spin; it counts as a failure, and waits.
                problem = " (last: the watch was answered 410 Gone right after a fresh list)"
            except _Dropped as e:
                problem = f" (last: {e})"
            except Unreachable as e:
                if not opened_once:  # never reached: say so now, as a list would
                    raise
                # The server went away between two watches (a restart): try again.
                problem = f" (last: {str(e).removeprefix(f'{conn.target}: ')})"
            else:
                # The stream ended: the server's timeoutSeconds, or it closed the watch. Only one
                # that ends early with nothing in it counts as a failure, so that this cannot spin.
                if seen or time.monotonic() - opened >= window - 1:
                    continue
                problem = " (last: the watch ended at once, with no event)"
            finally:
                if events is not None:
                    events.close()
            if deadline is not None and deadline.remaining() <= 0:
                return
            failures += 1
            delay = min(settings.backoff * 2 ** (failures - 1), settings.max_delay)
            ride = conn.ride
            returns = ride.returns if ride is not None else 0
            if failures >= settings.attempts:
                if ride is None or ride.remaining() <= 0:
                    raise KeptFailing(
                        f"{conn.target}: the server kept failing after {settings.attempts} "
                        f"attempts to {action}{problem}",
                        problem.removeprefix(" (last: ").removesuffix(")"),
                    )
                if failures == settings.attempts:  # one line for a run of failures
                    ride.lost(problem.removeprefix(" (last: ").removesuffix(")"))
                delay = min(delay, OUTAGE_CAP)
            if deadline is not None and deadline.remaining() <= delay:
                yield from pause(max(0.0, deadline.remaining()))
                return  # the deadline passes before the next try: the watch is over
            yield from pause(delay)

    try:
        if resource_version is None:
            yield from relist()
        yield from follow(fresh=resource_version is None)
    except OutOfTime as e:
        if e.deadline is not deadline:
            raise
        # The caller's deadline comes while the server is failing: the watch is over then,
        # as it would be had the server been quiet.
        yield from pause(max(0.0, deadline.remaining()))
    except StillAway:
        # The ride's deadline passed with the server away (outage.py): so did the watch's,
        # unless it has one of its own, later; the caller reads the ride's note.
        if deadline is None or deadline.remaining() > 0:
            raise


def _within(deadline: Deadline | None, seconds: float) -> Deadline:
    """The call's own deadline, cut short by the caller's."""
    return Deadline.after(seconds) if deadline is None else deadline.sooner(seconds)


class _Dropped(Exception):
    """The watch's connection broke, or went silent past its read timeout."""


def _events(
    response: Any,
    conn: Connection,
    action: Action,
    deadline: Deadline | None,
    read_timeout: float,
    slim: Callable[[bytes], bytes] | None = None,
    lean: Callable[[dict[str, Any]], None] | None = None,
    in_turns: bool = False,
) -> Generator[Event | Waiting, None, None]:
    """The events of one open watch, until its stream ends or the deadline; an ERROR event ends
    it too. `in_turns`: a `Waiting` before each read that would block (watch_in_turns)."""
    from urllib3.exceptions import HTTPError

    try:
        for line in _lines(response, deadline, read_timeout, in_turns):
            if isinstance(line, Waiting):
                yield line
                continue
            try:
                event = _parsed(line, slim)
            except (ValueError, RecursionError) as e:
                raise ClusterError(
                    f"{conn.target}: the watch of {action.what} sent a line that is not JSON"
                ) from e
            kind = event.get("type") if isinstance(event, dict) else None
            obj = event.get("object") if isinstance(event, dict) else None
            if not isinstance(obj, dict) or kind not in (*CHANGES, "ERROR"):
                raise ClusterError(
                    f"{conn.target}: the watch of {action.what} sent something that is not an event"
                )
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise _Gone()
                raise _Dropped(
                    f"error event: {obj.get('code')} {obj.get('reason') or ''}: "
                    f"{first_line(obj.get('message') or '')}"
                )
            if lean is not None and kind != "BOOKMARK":
                lean(obj)
            yield Event(kind, obj)
    except HTTPError as e:  # reset, broken chunk, timed out: the server or network let go
        raise _Dropped(f"connection dropped: {broken(e)}") from e
    finally:
        response.close()  # a watch is never read to its end: the connection cannot be reused


def _parsed(line: bytes, slim: Callable[[bytes], bytes] | None) -> Any:
    """An event's JSON, cut by `slim` first; whole when what `slim` gives does not parse."""
    if slim is not None:
        try:
            return json.loads(slim(line))
        except (ValueError, RecursionError):
            pass
    return json.loads(line)


def _lines(
    response: Any, deadline: Deadline | None, read_timeout: float, in_turns: bool = False
) -> Iterator[bytes | Waiting]:
    """Each newline-ended line of a streamed body, as soon as it has come, until the deadline;
    `_Dropped` when the stream ends in the middle of a line. `in_turns`: a `Waiting` before each
    read that would block (none where the socket cannot be found: each read then blocks)."""
    if response.chunked and response.supports_chunked_reads():
        chunks: Iterator[bytes] = response.read_chunked(decode_content=True)
    else:
        chunks = iter(lambda: bytes(response.read1(65536)), b"")
    # A read's timeout counts from when it starts: each read is given only what is left
    # before the deadline, so that the watch ends on time even while events keep coming.
    sock = getattr(getattr(response, "connection", None), "sock", None)
    pending = b""
    while True:
        remaining = math.inf if deadline is None else deadline.remaining()
        if remaining <= 0:
            return
        if in_turns and sock is not None:
            limit = min(remaining, read_timeout)
            if not _on_socket(ready, response, sock):
                by = time.monotonic() + limit
                yield Waiting(sock, by)
                remaining = math.inf if deadline is None else deadline.remaining()
                if remaining <= 0:
                    return
                # Woken by its socket, the read has its whole time; past `by`, it times out.
                limit = min(remaining, read_timeout) if time.monotonic() < by else 0.001
            _on_socket(sock.settimeout, limit)
        elif deadline is not None and sock is not None:
            sock.settimeout(min(remaining, read_timeout))
        chunk = next(chunks, None)
        if chunk is None:
            break
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if line.strip():
                yield line
    if pending.strip():
        # Every event ends with a newline: this one was cut off on its way (a proxy, the
        # network). The watch goes on from the last whole event, which loses nothing.
        raise _Dropped("connection dropped: the stream broke off in the middle of an event")


def _on_socket(call: Callable[..., Any], *args: Any) -> Any:
    """A call on the watch's socket (turns.ready, settimeout); a broken or closed connection is
    `_Dropped`, as the read would have found it."""
    try:
        return call(*args)
    except OSError as e:  # reset, TLS, closed under it
        raise _Dropped(f"connection dropped: {broken(e)}") from e


def _version_of(event: Event) -> str | None:
    metadata = (event.object or {}).get("metadata")
    version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
    return str(version) if version else None
