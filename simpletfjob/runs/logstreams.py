"""The streams of a run's logs: what to read of each container, each read in a thread of its own.

`Merger` reads each stream in a thread and hands its batches of whole lines to the caller's
thread, in order of arrival. A container that runs has a thread (and a connection) of its
own, as its log goes on as long as it runs. The log of one that has ended ends by itself:
those are read ENDED_AT_ONCE at a time, each to its end and then the next, by threads that
keep their connection (the client's pool keeps it alive between two), so that a finished
run of a hundred tasks costs a few TLS handshakes, not a hundred. While following, each is read with kube/podlog.py's
`follow_log`, which reads on across a break from where it stopped; `Merger._again` tells it
where the run of the container it reads stands then (logsources.run_now), from the pod as
the follow last told of it or, when that says it still runs, as it is now.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from simpletfjob.errors import ClusterError
from simpletfjob.kube.podlog import Again, follow_log, read_log
from simpletfjob.kube.resources import PODS
from simpletfjob.runs.logsources import Object, Source, container_state, run_now

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection


@dataclass(frozen=True)
class LogRequest:
    """What to read of each container, as `kubectl logs` takes it."""

    tail: int | None = None  # lines from the end; None or -1: all
    since: float | None = None  # seconds
    timestamps: bool = False
    previous: bool = False
    follow: bool = False

    def query(
        self, container: str, *, whole: bool = False, earlier: bool = False
    ) -> list[tuple[str, str | int]]:
        """The pods/log query; `whole` reads a container's output from its start (a new instance),
        `earlier` the run of the container before the current one."""
        query: list[tuple[str, str | int]] = [("container", container)]
        if self.follow and not earlier:  # a run that has ended has no more to follow
            query.append(("follow", "true"))
        if self.timestamps:
            query.append(("timestamps", "true"))
        if self.previous or earlier:
            query.append(("previous", "true"))
        if not whole:
            if self.tail is not None and self.tail >= 0:
                query.append(("tailLines", self.tail))
            if self.since is not None:
                query.append(("sinceSeconds", max(1, int(-(-self.since // 1)))))
        return query


END = object()
ENDED_AT_ONCE = 4  # logs of ended containers read at once (kubectl's --max-log-requests is 5)
PAUSES = (0.5, 1.0, 2.0)  # seconds: the pod of a log that ended while it runs is read again


class Merger:
    """Streams read in threads, their whole lines handed to the caller's thread as they come.

    While following, each stream is read with kube/podlog.py's `follow_log`, which reads on
    across a break from where it stopped; `_again` tells it which run of the container that
    now is, from the pod as it is then.
    """

    def __init__(self, conn: Connection, request_: LogRequest, note: Callable[[str], None]) -> None:
        self.conn = conn
        self.request = request_
        self.note = note
        self.lines: queue.Queue[tuple[Source, Any]] = queue.Queue()  # batches, errors, END
        self.open: dict[Source, threading.Thread | _Queued] = {}
        self._ended: deque[tuple[Source, Sequence[tuple[str, str | int]], _Queued]] = deque()
        self._readers = 0  # threads reading the logs of ended containers, one after another
        self._lock = threading.Lock()
        self.stopped: set[Source] = set()
        self.failed: list[str] = []  # what broke the streams that failed, one line each
        self.known: Mapping[str, Object] = {}  # the pods by name, as the follow last told of them

    def start(self, source: Source, *, whole: bool = False) -> None:
        query = self.request.query(source.container, whole=whole, earlier=source.earlier)
        if not self._has_ended(source):
            thread = threading.Thread(target=self._read, args=(source, query), daemon=True)
            self.open[source] = thread
            thread.start()
            return
        queued = self.open[source] = _Queued()
        with self._lock:
            self._ended.append((source, query, queued))
            if self._readers >= ENDED_AT_ONCE:
                return
            self._readers += 1
        threading.Thread(target=self._read_ended, daemon=True).start()

    def _has_ended(self, source: Source) -> bool:
        """Whether the log read for `source` ends by itself: that run of its container has
        ended, by its pod as last told (a log read without `follow` ends too, but one whose
        container runs is read at once, as it is followed)."""
        if source.earlier or self.request.previous:
            return True
        pod = self.known.get(source.pod)
        return pod is not None and run_now(pod, source) == "ended"

    def _read_ended(self) -> None:
        """Read the queued logs of ended containers, one after another, until none is left."""
        while True:
            with self._lock:
                if not self._ended:
                    self._readers -= 1
                    return
                source, query, queued = self._ended.popleft()
            try:
                now = at_its_turn(self.request, source, self.known.get(source.pod), query)
                if source in self.stopped:
                    self.lines.put((source, END))
                elif now is None:
                    self.lines.put((source, ClusterError(LOST.format(source=source))))
                    self.lines.put((source, END))
                else:
                    self._read(source, now)
            finally:
                queued.done.set()

    def _read(self, source: Source, query: Sequence[tuple[str, str | int]]) -> None:
        try:
            if self.request.follow:
                batches = follow_log(
                    self.conn,
                    source.pod,
                    query,
                    keep_stamps=self.request.timestamps,
                    again=lambda broke: self._again(source, broke),
                )
            else:
                batches = read_log(self.conn, source.pod, query)
            for batch in batches:
                if source in self.stopped:
                    break
                self.lines.put((source, batch))
        except BaseException as e:  # handed over, to be said in the caller's thread
            self.lines.put((source, e))
        self.lines.put((source, END))

    def _again(self, source: Source, broke: bool) -> Again | None:
        """How to read on in the run of the container that `source` reads (see follow_log).

        After a break, as the pod is now. A log that ended once the follow had told of its
        run's end was read to its end. One that ended first may have been cut short (a
        kubelet that restarts ends its logs as if they had ended), so the rest is read once
        more from where it stopped: as the follow tells of the run after each of PAUSES (a
        kubelet reports a container's end a moment after its log ends), or as the pod is
        then. Followed again too soon, a container started again in place meanwhile would
        have its new run read as the rest of the old one.
        """
        known = self.known.get(source.pod)
        if not broke and known is not None and run_now(known, source) != "running":
            return None
        where = ""
        for pause in () if broke else PAUSES:
            time.sleep(pause)
            known = self.known.get(source.pod)
            where = run_now(known, source) if known is not None else ""
            if where not in ("", "running"):
                break
        if source in self.stopped:
            return None
        if where in ("", "running"):
            pod = read_pod(self.conn, source.pod)
            where = run_now(pod, source) if pod is not None else "gone"
        if where == "running":
            return Again(previous=False, follow=True)
        if where == "ended":
            return Again(previous=False, follow=False)
        if where == "previous":
            return Again(previous=True, follow=False)
        if not broke:
            return None  # nothing more of that run can be read
        what = f"pod {source.pod} is gone" if where == "gone" else "it was started again twice"
        raise ClusterError(f"{what} while its log could not be read; the rest of that log is lost")

    def next(self, timeout: float | None) -> tuple[Source, Any] | None:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def busy(self) -> bool:
        return any(thread.is_alive() for thread in self.open.values()) or not self.lines.empty()


LOST = (
    "pod {source.pod}: container {source.container} was started again twice before its log "
    "was read; that log is lost"
)


def at_its_turn(
    request: LogRequest,
    source: Source,
    pod: Object | None,
    query: Sequence[tuple[str, str | int]],
) -> Sequence[tuple[str, str | int]] | None:
    """The query of an ended container's log that waited for a reader, as the run of that
    container stands in `pod` (as the follow last told of it) when its turn comes.

    One started again in place meanwhile (restartPolicy OnFailure) has the run that ended
    read as pods/log's `previous`, and not followed into its new run, which a stream of its
    own reads. None when it was started again twice: pods/log no longer has that run.
    """
    if source.earlier or request.previous or pod is None:
        return query
    where = run_now(pod, source)
    if where == "previous":
        kept = [(k, v) for k, v in query if k not in ("follow", "previous")]
        return [*kept, ("previous", "true")]
    if where == "lost" and container_state(pod, source.container)[1] > source.instance + 1:
        return None
    return query


class _Queued:
    """A log of an ended container, waiting for a reader or being read: alive until read."""

    def __init__(self) -> None:
        self.done = threading.Event()

    def is_alive(self) -> bool:
        return not self.done.is_set()


def read_pod(conn: Connection, name: str) -> Object | None:
    """The pod as it is now (a list by name: `logs` needs no `get` on pods), or None when gone."""
    from simpletfjob.kube.lists import list_objects

    items = list_objects(conn, PODS, field_selector=f"metadata.name={name}").items
    return items[0] if items else None
