"""Watches that keep going: each resumes from the last resourceVersion and re-lists on 410 Gone.

`Watches` is the one way simpletfjob watches (`wait`, `run`, `status -w`, `logs -f`, `delete
--wait`): each watch is read in a thread of its own, which queues each event as soon as its
line has come, reading what has arrived chunk by chunk (send.arrived), never a fixed size, so
a proxy's `Connection: close` answers pass event by event. The caller `take`s what has come,
waiting at most `POLL` seconds at a time, so that a notebook's Ctrl-C is raised soon.

A watch that the server ends or that drops (or is silent past its window and SLACK) is opened
again from the last resourceVersion it saw. On 410 (an HTTP answer or an ERROR event) the
objects are listed again and handed over whole as a RELIST event. A failing server is ridden
out (outage.py), or its error is raised by `take` in the caller's thread.
"""

from __future__ import annotations

import json
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator
from contextlib import closing, suppress
from dataclasses import dataclass
from typing import Any, NamedTuple

from simpletfjob.errors import ClusterError
from simpletfjob.kube.connection import Connection, cut
from simpletfjob.kube.lists import list_objects, namespace_for
from simpletfjob.kube.outage import StillAway
from simpletfjob.kube.refusals import first_line
from simpletfjob.kube.request import OUTAGE_CAP, Action, Deadline, OutOfTime, Streak, request
from simpletfjob.kube.resources import Resource
from simpletfjob.kube.send import Unreachable, arrived, broken

WINDOW = 300.0  # seconds the server keeps one watch open (timeoutSeconds), as client-go's minimum
SLACK = 10.0  # seconds past the window before a silent connection counts as dropped
POLL = 0.25  # seconds: the longest the caller's thread waits at once
CHANGES = ("ADDED", "MODIFIED", "DELETED", "BOOKMARK")


class Event(NamedTuple):
    """A change to one object, or (RELIST) every object as it is now, which replaces what came before."""

    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK (only a resourceVersion), or RELIST
    object: dict[str, Any] | None  # None for RELIST
    objects: tuple[dict[str, Any], ...] = ()  # RELIST: every object, listed again


# What a watch's thread hands over: an event, the error that ended it, or None once it has ended.
_Item = tuple[str, Event | BaseException | None]


class Watches:
    """Watches, each read in a thread of its own, their events taken in the caller's thread.
    A context manager: leaving it (or `close`) stops every watch and cuts its connection.
    Iterating it gives each event in turn until every watch has ended (at the deadline)."""

    def __init__(self, conn: Connection, deadline: Deadline | None = None) -> None:
        self.conn = conn
        self.deadline = deadline
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._going: set[str] = set()  # the watches whose thread has not ended
        self._watches: list[_Watch] = []
        self._ready: deque[Event] = deque()  # taken, not yet iterated
        self._stopped = threading.Event()

    def add(
        self,
        name: str,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
    ) -> Watches:
        """Watch `resource` from `resource_version` (None: list first, as a RELIST); its events
        are taken under `name`."""
        one = _Watch(
            self.conn, resource, self.deadline, self._stopped, namespace=namespace,
            label_selector=label_selector, field_selector=field_selector,
            resource_version=resource_version,
        )  # fmt: skip
        self._watches.append(one)
        self._going.add(name)
        thread = threading.Thread(
            target=one.run, args=(name, self._queue.put), name=f"simpletfjob-watch-{name}"
        )
        thread.daemon = True
        thread.start()
        return self

    def take(self, until: Deadline | None = None) -> list[tuple[str, Event]]:
        """Every event that has come, once at least one has, each with its watch's name; []
        once `until` (None: never) has passed with none, or every watch has ended with no
        `until` to wait for. The error that ended a watch is raised here."""
        got: list[tuple[str, Event]] = []
        while True:
            while True:  # what has come, without waiting
                try:
                    self._file(*self._queue.get_nowait(), got)
                except queue.Empty:
                    break
            if got:
                return got
            left = math.inf if until is None else until.remaining()
            if left <= 0 or (not self._going and until is None):
                return []
            step = min(POLL, left)
            if not self._going:  # every watch has ended: only the wait is left
                time.sleep(step)
                continue
            with suppress(queue.Empty):
                self._file(*self._queue.get(timeout=step), got)

    def _file(self, name: str, item: Event | BaseException | None, got: list[Any]) -> None:
        if item is None:
            self._going.discard(name)
        elif isinstance(item, BaseException):
            raise item
        else:
            got.append((name, item))

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        while not self._ready:
            if not self._going and self._queue.empty():
                raise StopIteration
            got = self.take(self.deadline)
            if not got and self.deadline is not None and self.deadline.remaining() <= 0:
                raise StopIteration
            self._ready.extend(event for _, event in got)
        return self._ready.popleft()

    def close(self) -> None:
        """Stop every watch: each thread ends, its connection cut."""
        self._stopped.set()
        for one in self._watches:
            one.stop()

    def __enter__(self) -> Watches:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def watch(
    conn: Connection,
    resource: Resource,
    *,
    deadline: Deadline | None = None,
    **options: Any,
) -> Watches:
    """One watch (`Watches.add`'s options), to iterate: its events until `deadline` (None:
    never); a server that keeps failing, or refuses, is a `ClusterError`."""
    return Watches(conn, deadline).add(resource.plural, resource, **options)


class _Gone(Exception):
    """The server no longer has the resourceVersion the watch asked for (410)."""


class _Dropped(Exception):
    """The watch's connection broke, or went silent past its read timeout."""


@dataclass
class _Watch:
    """One watch, in its thread: opened, read, opened again, listed again (see the module)."""

    conn: Connection
    resource: Resource
    deadline: Deadline | None
    stopped: threading.Event
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    resource_version: str | None = None  # None: list first
    response: Any = None  # the open watch's answer, cut by `stop`

    def __post_init__(self) -> None:
        self.namespace = namespace_for(self.conn, self.resource, self.namespace)
        self.action = Action("watch", self.resource, self.namespace)
        self.version = self.resource_version or ""
        self.selectors: list[tuple[str, str | int]] = [
            *([("labelSelector", self.label_selector)] if self.label_selector else []),
            *([("fieldSelector", self.field_selector)] if self.field_selector else []),
            ("allowWatchBookmarks", "true"),
        ]

    def run(self, name: str, put: Callable[[_Item], None]) -> None:
        """The thread: each event to `put`, then the error that ended the watch, then None."""
        try:
            with closing(self.events()) as events:
                for event in events:
                    if self.stopped.is_set():
                        return
                    put((name, event))
        except BaseException as e:  # raised in the caller's thread (Watches.take)
            if not self.stopped.is_set():
                put((name, e))
        finally:
            put((name, None))

    def stop(self) -> None:
        response = self.response
        if response is not None:
            cut(response)

    def remaining(self) -> float:
        return math.inf if self.deadline is None else self.deadline.remaining()

    def events(self) -> Generator[Event, None, None]:
        """The list first where asked, then each change, until the deadline."""
        try:
            if self.resource_version is None:
                yield self.relist()
            yield from self.follow(fresh=self.resource_version is None)
        except OutOfTime as e:
            if e.deadline is not self.deadline:
                raise
            # The deadline comes while the server is failing: the watch is over then, as it
            # would be had the server been quiet.
            self.conn.settings.sleep(max(0.0, self.remaining()))
        except StillAway:
            # The ride's deadline passed with the server away (outage.py): so did the watch's,
            # unless it has one of its own, later; the caller reads the ride's note.
            if self.remaining() > 0:
                raise

    def relist(self) -> Event:
        listed = list_objects(
            self.conn, self.resource, namespace=self.namespace, label_selector=self.label_selector,
            field_selector=self.field_selector, deadline=self.within(),
        )  # fmt: skip
        self.version = listed.resource_version
        return Event("RELIST", None, tuple(listed.items))

    def within(self) -> Deadline:
        """A call's own deadline, cut short by the watch's."""
        seconds = self.conn.settings.deadline
        return Deadline.after(seconds) if self.deadline is None else self.deadline.sooner(seconds)

    def follow(self, fresh: bool) -> Generator[Event, None, None]:
        """Each change, the watch opened again as often as it ends or breaks. `fresh`: the
        version was just listed, so that a 410 now is the server's trouble, not age."""
        conn, settings = self.conn, self.conn.settings
        streak = Streak(conn)
        opened_once = gone = False
        while not self.stopped.is_set():
            remaining = self.remaining()
            if remaining <= 0:
                return
            # The server ends the watch at the deadline, or after a window; a read timeout a
            # little past that catches a server that went silent.
            window = min(WINDOW, remaining)
            opened = time.monotonic()
            seen = 0
            try:
                response = self.open(window, remaining if remaining <= WINDOW else WINDOW + SLACK)
                opened_once = True
                with closing(self.read(response)) as events:
                    for event in events:
                        seen += 1
                        fresh = False
                        streak.ok()
                        self.version = _version_of(event) or self.version
                        yield event
                        if self.remaining() <= 0:
                            return
            except _Gone:
                if not fresh:  # the watch's version is too old: list again, as the API asks
                    yield self.relist()
                    fresh = True
                    continue
                # Gone again, with a version just listed: a server (or a proxy) that is not
                # well. Listing again at once would spin; it counts as a failure, and waits.
                problem, gone = "the watch was answered 410 Gone right after a fresh list", True
            except _Dropped as e:
                problem = str(e)
            except Unreachable as e:
                if not opened_once:  # never reached: say so now, as a list would
                    raise
                # The server went away between two watches (a restart): try again.
                problem = str(e).removeprefix(f"{conn.target}: ")
            else:
                # The stream ended: the server's timeoutSeconds, or it closed the watch. Only one
                # that ends early with nothing in it counts as a failure, so that this cannot spin.
                if seen or time.monotonic() - opened >= window - 1:
                    continue
                problem = "the watch ended at once, with no event"
            if self.remaining() <= 0 or self.stopped.is_set():
                return
            failures = streak.failed(problem, self.kept_failing)
            delay = min(settings.backoff * 2.0 ** (failures - 1), settings.max_delay)
            if failures >= settings.attempts:  # the outage's pace
                delay = min(delay, OUTAGE_CAP)
            if self.remaining() <= delay:
                settings.sleep(max(0.0, self.remaining()))
                return  # the deadline passes before the next try: the watch is over
            settings.sleep(delay)
            if gone:  # listed again, after the wait
                yield self.relist()
                fresh, gone = True, False

    def kept_failing(self, _: int) -> str:
        return (
            f"the server kept failing after {self.conn.settings.attempts} attempts to {self.action}"
        )

    def open(self, window: float, read_timeout: float) -> Any:
        """The watch's answer, open from the last version; _Gone on 410."""
        query: list[tuple[str, str | int]] = [
            ("watch", "true"),
            ("resourceVersion", self.version),
            ("timeoutSeconds", max(1, math.ceil(window))),
            *self.selectors,
        ]
        answer = request(
            self.conn, self.action, query=query, deadline=self.within(), passthrough=(410,),
            stream=True, read_timeout=read_timeout,
        )  # fmt: skip
        if answer.status == 410:
            raise _Gone()
        return answer.stream

    def read(self, response: Any) -> Generator[Event, None, None]:
        """The events of one open watch, until its stream ends; an ERROR event ends it too."""
        from urllib3.exceptions import HTTPError

        self.response = response
        if self.stopped.is_set():
            cut(response)
        try:
            for line in _stream_lines(arrived(response)):
                yield self.event(line)
        except (HTTPError, OSError) as e:  # reset, broken chunk, timed out, cut
            raise _Dropped(f"connection dropped: {broken(e)}") from e
        finally:
            self.response = None
            response.close()  # a watch is never read to its end: the connection is not reused

    def event(self, line: bytes) -> Event:
        what = self.action.what
        try:
            event = json.loads(line)
        except (ValueError, RecursionError) as e:
            raise ClusterError(
                f"{self.conn.target}: the watch of {what} sent a line that is not JSON"
            ) from e
        kind = event.get("type") if isinstance(event, dict) else None
        obj = event.get("object") if isinstance(event, dict) else None
        if not isinstance(obj, dict) or kind not in (*CHANGES, "ERROR"):
            raise ClusterError(
                f"{self.conn.target}: the watch of {what} sent something that is not an event"
            )
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Gone()
            raise _Dropped(
                f"error event: {obj.get('code')} {obj.get('reason') or ''}: "
                f"{first_line(obj.get('message') or '')}"
            )
        return Event(kind, obj)


def _stream_lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """Each newline-ended line of a stream, as soon as it has come; `_Dropped` when the stream
    ends in the middle of a line."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if line.strip():
                yield line
    if pending.strip():
        # Every event ends with a newline: this one was cut off on its way (a proxy, the
        # network). The watch goes on from the last whole event, which loses nothing.
        raise _Dropped("connection dropped: the stream broke off in the middle of an event")


def _version_of(event: Event) -> str | None:
    metadata = (event.object or {}).get("metadata")
    version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
    return str(version) if version else None
