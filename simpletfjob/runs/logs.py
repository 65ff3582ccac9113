"""A run's container logs: every task's, read at once and merged line by line, as stern prints them.

    the run's Jobs and pods (one list each) -> the tasks asked for -> one log stream per
    task's pod and container -> lines, whole, in order of arrival -> `worker-0 | line`

Each stream is read in a thread of its own and hands over whole lines only, so two tasks'
output never mixes within a line. There is no limit on streams (kubectl stops at
`--max-log-requests 5`).

With `follow`, the run's pods are watched as well: a pod the Job controller makes later (a
new attempt after a failure) and a container started again in place (`OnFailure`) each
get a stream of their own once they run. Following ends when the run has ended by its
success policy and every stream of a task that has finished is drained; a task still
running then (a parameter server never ends on its own) is read for GRACE seconds more.

A task with nothing to show yet (no pod, or a container waiting: `ContainerCreating`,
`ErrImagePull`) gets one note with the reason; with `follow`, its output comes once it
starts. That is not an error.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from simpletfjob.kube.request import Action, request
from simpletfjob.kube.resources import PODS
from simpletfjob.runs.logsources import (
    Object,
    Selection,
    Source,
    container_state,
    sources_now,
    tasks_asked,
    tasks_of,
)
from simpletfjob.runs.objects import NoRunError
from simpletfjob.runs.state import Run

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection

GRACE = 2.0  # seconds a still-running task's stream is read after the run has ended
COLORS = (36, 33, 32, 35, 34, 31, 96, 93, 92, 95, 94, 91)  # ANSI foregrounds, one per stream


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


# ---- reading --------------------------------------------------------------------------------------


def read_stream(
    conn: Connection,
    source: Source,
    query: Sequence[tuple[str, str | int]],
    follow: bool,
) -> Iterator[list[bytes]]:
    """The container's log as batches of whole lines (each ending with a newline), as they come."""
    action = Action("get", PODS, conn.namespace, source.pod, subresource="log")
    answer = request(
        conn,
        action,
        query=query,
        stream=True,
        read_timeout=24 * 3600.0 if follow else None,
    )
    if answer.stream is None:
        yield [line + b"\n" for line in answer.data.splitlines()]
        return
    response = answer.stream
    # As a watch reads its stream (kube/watch.py): by HTTP chunk when the answer is chunked.
    if response.chunked and response.supports_chunked_reads():
        chunks: Iterator[bytes] = response.read_chunked(decode_content=True)
    else:
        chunks = iter(lambda: bytes(response.read1(65536)), b"")
    try:
        pending = b""
        for chunk in chunks:
            pending += chunk
            end = pending.rfind(b"\n") + 1
            if end:
                yield pending[:end].splitlines(keepends=True)
                pending = pending[end:]
        if pending:
            yield [pending + b"\n"]
    finally:
        response.close()


_END = object()


class Merger:
    """Streams read in threads, their whole lines handed to the caller's thread as they come."""

    def __init__(self, conn: Connection, request_: LogRequest, note: Callable[[str], None]) -> None:
        self.conn = conn
        self.request = request_
        self.note = note
        self.lines: queue.Queue[tuple[Source, Any]] = queue.Queue()  # batches, errors, _END
        self.open: dict[Source, threading.Thread] = {}
        self.stopped: set[Source] = set()
        self.failed: list[str] = []  # what broke the streams that failed, one line each

    def start(self, source: Source, *, whole: bool = False) -> None:
        query = self.request.query(source.container, whole=whole, earlier=source.earlier)
        thread = threading.Thread(target=self._read, args=(source, query), daemon=True)
        self.open[source] = thread
        thread.start()

    def _read(self, source: Source, query: Sequence[tuple[str, str | int]]) -> None:
        try:
            for batch in read_stream(self.conn, source, query, self.request.follow):
                if source in self.stopped:
                    break
                self.lines.put((source, batch))
        except BaseException as e:  # handed over, to be said in the caller's thread
            self.lines.put((source, e))
        self.lines.put((source, _END))

    def next(self, timeout: float | None) -> tuple[Source, Any] | None:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def busy(self) -> bool:
        return any(thread.is_alive() for thread in self.open.values()) or not self.lines.empty()


# ---- printing ---------------------------------------------------------------------------------


class Printer:
    """Writes lines with their source's prefix (`worker-0 | `), coloured if asked, a batch a write.

    With `visible` (stdout is a terminal), each line is shown as `cat -v` shows it, tabs
    kept (streams.visible_lines): a task's output cannot erase its prefix, move the
    cursor over earlier lines or colour itself, so it cannot pass itself off as another
    task's or as the verdict. Elsewhere (a pipe, a file) the lines are written byte for byte.
    """

    def __init__(
        self, write: Callable[[bytes], None], prefix: bool, color: bool, visible: bool = False
    ) -> None:
        self.write = write
        self.prefix = prefix
        self.color = color
        self.visible = visible
        self.width = 0
        self.colors: dict[str, int] = {}
        self.heads: dict[str, bytes] = {}

    def know(self, labels: Iterable[str]) -> None:
        for label in labels:
            if len(label) > self.width:
                self.width = len(label)
                self.heads.clear()  # every prefix is as wide as the widest
            self.colors.setdefault(label, COLORS[len(self.colors) % len(COLORS)])

    def render(self, source: Source, lines: Sequence[bytes]) -> bytes:
        """The lines as they are printed."""
        if not all(line.endswith(b"\n") for line in lines):
            lines = _whole(lines)
        if self.visible:
            from simpletfjob.streams import visible_lines

            # the batch at once (each line ends with a newline, which stays as it is)
            lines = visible_lines(b"".join(lines)).splitlines(keepends=True)
        if not self.prefix:
            return b"".join(lines)
        head = self.heads.get(source.label)
        if head is None:
            self.know([source.label])
            text = f"{source.label:<{self.width}} |"
            if self.color:
                text = f"\x1b[{self.colors[source.label]}m{text}\x1b[0m"
            head = self.heads[source.label] = text.encode() + b" "
        return head + head.join(lines)


def _whole(lines: Sequence[bytes]) -> list[bytes]:
    """Lines that end with a newline: a piece that ends with a lone carriage return (which
    `bytes.splitlines` also splits at) is joined to the rest of its line, as `kubectl logs`
    shows it, so that the prefix comes once, at the start of the line."""
    whole: list[bytes] = []
    piece = b""
    for line in lines:
        piece += line
        if line.endswith(b"\n"):
            whole.append(piece)
            piece = b""
    if piece:
        whole.append(piece)
    return whole


# ---- the command's work ---------------------------------------------------------------------------


def read_jobs_and_pods(conn: Connection, name: str) -> tuple[Sequence[Object], Sequence[Object]]:
    from simpletfjob.runs.watch import list_jobs_and_pods

    jobs, pods = list_jobs_and_pods(conn, name)
    if not any(not (j.get("metadata") or {}).get("deletionTimestamp") for j in jobs):
        raise NoRunError(name, conn.namespace)
    return jobs, pods


def show_logs(
    conn: Connection,
    name: str,
    selection: Selection,
    request_: LogRequest,
    printer: Printer,
    note: Callable[[str], None],
) -> None:
    """Print the logs of the run's chosen tasks once (no follow)."""
    jobs, pods = read_jobs_and_pods(conn, name)
    tasks = tasks_of(jobs, pods)
    chosen = tasks_asked(list(tasks), selection.tasks, selection.roles, name)
    found = sources_now(tasks, chosen, selection, request_.previous, note)
    printer.know(s.label for s, _ in found)
    merger = Merger(conn, request_, note)
    for source, readable in found:
        if readable:
            merger.start(source)
    _drain(merger, printer, note, until=None)
    check_streams(merger)


def _drain(
    merger: Merger, printer: Printer, note: Callable[[str], None], until: float | None
) -> None:
    """Print what the streams bring until every one has ended (or `until`, on the monotonic clock)."""
    while merger.busy():
        wait = None if until is None else max(0.0, until - time.monotonic())
        item = merger.next(0.2 if wait is None else min(wait, 0.2))
        if item is None:
            if until is not None and time.monotonic() >= until:
                return
            continue
        _print(merger, printer, note, item)


def _print(
    merger: Merger,
    printer: Printer,
    note: Callable[[str], None],
    first: tuple[Source, Any] | None = None,
) -> None:
    """Print `first` and every batch that has come since, in order of arrival, in one write."""
    out: list[bytes] = []
    item = first if first is not None else merger.next(0)
    while item is not None:
        source, batch = item
        if isinstance(batch, list):
            if source not in merger.stopped:
                out.append(printer.render(source, batch))
        elif isinstance(batch, BaseException):
            if out:
                printer.write(b"".join(out))
                out = []
            _failed(merger, source, batch, note)
        item = merger.next(0)
    if out:
        printer.write(b"".join(out))


def _failed(
    merger: Merger, source: Source, error: BaseException, note: Callable[[str], None]
) -> None:
    from simpletfjob.errors import ClusterError

    if isinstance(error, ClusterError):
        if "(403" in str(error):
            raise error  # a refusal is the same for every task: one error line
        note(f"{source.label}: {error}")
        merger.failed.append(f"{source.label}: {error}")
        return
    raise error


def check_streams(merger: Merger) -> None:
    """Exit 1 once every stream is read, when some could not be (each was said as it broke)."""
    from simpletfjob.errors import ClusterError

    if merger.failed:
        count = len(merger.failed)
        raise ClusterError(
            f"{count} of {len(merger.open)} log streams could not be read; first: {merger.failed[0]}"
        )


def follow_logs(
    conn: Connection,
    name: str,
    selection: Selection,
    request_: LogRequest,
    printer: Printer,
    note: Callable[[str], None],
) -> Run:
    """Print the chosen tasks' logs as they come, pods made later included, until the run ends."""
    from simpletfjob.runs.watch import follow

    merger = Merger(conn, request_, note)
    opened: set[tuple[str, str, int]] = set()  # (pod, container, instance)
    running: dict[Source, bool] = {}  # whether each stream's container ran at the last news
    told: dict[str, str] = {}
    chosen: list[str] | None = None
    first = True
    ended: Run | None = None
    last: Run | None = None
    ended_at = 0.0
    stop = threading.Event()
    changes: queue.Queue[Any] = queue.Queue()
    latest: list[Sequence[Object]] = [[], []]

    def pump() -> None:
        def seen(jobs: Sequence[Object], pods: Sequence[Object]) -> None:
            latest[:] = [jobs, pods]

        try:
            for run in follow(conn, name, None, seen):
                changes.put((run, *latest))
                if stop.is_set():
                    return
            changes.put(_END)  # ended without a verdict: the run is being deleted
        except BaseException as e:  # handed to the caller's thread
            changes.put(e)

    threading.Thread(target=pump, daemon=True).start()
    try:
        while True:
            try:
                update = changes.get(timeout=0.05)
            except queue.Empty:
                update = None
            if isinstance(update, BaseException):
                raise update
            if update is _END:
                if ended is None:  # deleted before its verdict: nothing more will come
                    ended, ended_at = last, time.monotonic()
            elif update is not None:
                run, jobs, pods = update
                last = run
                tasks = tasks_of(jobs, pods)
                if chosen is None:
                    chosen = tasks_asked(list(tasks), selection.tasks, selection.roles, name)
                said: list[str] = []
                found = sources_now(tasks, chosen, selection, request_.previous, said.append)
                for line in said:
                    task = line.split(":", 1)[0]
                    if told.get(task) != line:
                        told[task] = line
                        note(line)
                printer.know(s.label for s, _ in found)
                for source, readable in found:
                    key = (source.pod, source.container, source.instance)
                    if not readable or key in opened:
                        continue
                    before = (source.pod, source.container, source.instance - 1)
                    if (
                        not first
                        and source.instance
                        and not source.earlier
                        and before not in opened
                    ):
                        # A run that crashed and was started again between two looks: read it
                        # whole first, as the run before the current one.
                        opened.add(before)
                        gone = replace(source, instance=source.instance - 1, earlier=True)
                        merger.start(gone, whole=True)
                    opened.add(key)
                    # a pod or instance that came later is read from its start
                    merger.start(source, whole=not first and not request_.previous)
                first = False
                by_name = {str((p.get("metadata") or {}).get("name")): p for p in pods}
                for source in merger.open:
                    pod = by_name.get(source.pod)
                    state = container_state(pod, source.container)[0] if pod else ""
                    running[source] = state in ("running", "")
                if run.finished and ended is None:
                    ended, ended_at = run, time.monotonic()
            _print(merger, printer, note)
            if ended is not None:
                # A container that has ended has its stream end once read to the end; one
                # still running (a ps never ends on its own) is read GRACE seconds more.
                live = [
                    s
                    for s, t in merger.open.items()
                    if t.is_alive() and s not in merger.stopped and running.get(s, True)
                ]
                if live and time.monotonic() - ended_at >= GRACE:
                    merger.stopped.update(live)
                if not any(t.is_alive() for s, t in merger.open.items() if s not in merger.stopped):
                    _print(merger, printer, note)
                    check_streams(merger)
                    return ended
    finally:
        stop.set()
