"""A run's container logs: every task's, read at once and merged line by line, as stern prints them.

Each running container's stream is read in a thread of its own, ended containers' a few at a
time (logsources.py); each hands over whole lines only, so two tasks' output never mixes
within a line. There is no limit on streams (kubectl stops at `--max-log-requests 5`).

With `follow`, every change of the run's pods is watched: a pod made later and a container
started again in place (`OnFailure`) each get a stream once they run; a stream is read on
across a break from its last line, and an API server outage is ridden out as `wait` does.
Following ends when the run has ended and every finished task's stream is drained; GRACE
seconds after the end, a stream whose container still runs (a parameter server) is cut.

A task with nothing to show yet (no pod, a waiting container) or whose pod is gone gets one
note with the reason, not an error; `run`, whose own lines say each task's state, has no note
for a task without a pod (`podless=False`).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from simpletfjob.errors import ClusterError, SimpleTFJobError
from simpletfjob.kube.resources import PODS
from simpletfjob.runs.logsources import (
    GONE,
    Merger,
    Object,
    Selection,
    Source,
    gone_tasks,
    pods_gone,
    run_now,
    sources_now,
    tasks_asked,
    tasks_of,
)
from simpletfjob.runs.logsources import LogRequest as LogRequest
from simpletfjob.runs.objects import NoRunError, some
from simpletfjob.runs.state import Run, is_gone

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection
    from simpletfjob.runs.ending import Ending

GRACE = 2.0  # seconds after the run's end when the streams whose container still runs are cut
COLORS = (36, 33, 32, 35, 34, 31, 96, 93, 92, 95, 94, 91)  # ANSI foregrounds, one per stream


class Printer:
    """Writes lines with their source's prefix (`worker-0 | `), coloured if asked, a batch a write.

    With `visible` (a terminal, or colour for one), each line is shown as `cat -v` shows it,
    tabs kept, so that a task's output cannot pass itself off as another task's or as the
    verdict; otherwise the lines are written byte for byte.
    """

    def __init__(
        self, write: Callable[[bytes], None], prefix: bool, color: bool, visible: bool = False
    ) -> None:
        self.write, self.prefix, self.color, self.visible = write, prefix, color, visible
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
        """The lines as printed: the prefix after each newline only, so that a lone carriage
        return stays in its line, as `kubectl logs` shows it."""
        blob = b"".join(lines)
        if self.visible:
            from simpletfjob.streams import visible_lines

            blob = visible_lines(blob)  # newlines stay as they are
        if not self.prefix:
            return blob
        head = self.heads.get(source.label)
        if head is None:
            self.know([source.label])
            text = f"{source.label:<{self.width}} |"
            if self.color:
                text = f"\x1b[{self.colors[source.label]}m{text}\x1b[0m"
            head = self.heads[source.label] = text.encode() + b" "
        shown = head + blob.replace(b"\n", b"\n" + head)
        return shown[: -len(head)] if blob.endswith(b"\n") else shown


def show_logs(
    conn: Connection,
    name: str,
    selection: Selection,
    request_: LogRequest,
    printer: Printer,
    note: Callable[[str], None],
) -> None:
    """Print the logs of the run's chosen tasks once (no follow)."""
    from simpletfjob.runs.watch import list_both

    listed = list_both(conn, name)
    jobs, pods = listed[0].items, listed[1].items
    if all(is_gone(j) for j in jobs):
        raise NoRunError(name, conn.namespace)
    tasks = tasks_of(jobs, pods)
    deleted = gone_tasks(name, jobs, pods, tasks) if selection.tasks else {}
    chosen = tasks_asked(list(tasks), selection.tasks, selection.roles, name, deleted, note)
    gone = pods_gone(jobs, tasks)
    if request_.previous and chosen and all(task in gone for task in chosen):
        # Nothing to read, and nothing will be: an error, as kubectl logs -p of a pod that
        # is gone is (not "no pod yet", which a later call may change).
        raise SimpleTFJobError(f"{some(chosen)}: {GONE}")
    found = sources_now(tasks, chosen, selection, request_.previous, note, gone)
    printer.know(s.label for s, _ in found)
    merger = Merger(conn, request_, note)
    merger.known = {str((p.get("metadata") or {}).get("name")): p for p in pods}
    for source, readable in found:
        if readable:
            merger.start(source)
    while merger.busy():  # until every stream has ended
        item = merger.next(0.2)
        if item is not None:
            _print(merger, printer, note, item)
    check_streams(merger)


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
    if not isinstance(error, ClusterError) or "(403" in str(error):
        raise error  # a refusal is the same for every task: one error line
    note(f"{source.label}: {error}")
    merger.failed.append(f"{source.label}: {error}")


def check_streams(merger: Merger) -> None:
    """Exit 1 once every stream is read, when some could not be (each was said as it broke)."""
    if merger.failed:
        count = len(merger.failed)
        raise ClusterError(
            f"{count} of {len(merger.open)} log streams could not be read; first: {merger.failed[0]}"
        )


class Cancelled(Exception):
    """`follow_logs` was told to stop (its `cancel` event was set) before the run ended."""


class _Stopped(Exception):
    """The reader of `follow_logs`'s changes has gone: following the run stops."""


def follow_logs(
    conn: Connection,
    name: str,
    selection: Selection,
    request_: LogRequest,
    printer: Printer,
    note: Callable[[str], None],
    cancel: threading.Event | None = None,
    podless: bool = True,
) -> Ending:
    """Print the chosen tasks' logs as they come, pods made later included, until the run ends;
    how it ended. Without `podless`, a task with no pod is not noted (`run` says it). An outage
    is ridden out with no deadline; once `cancel` is set, it raises Cancelled.
    """
    from simpletfjob.kube.outage import riding_out
    from simpletfjob.runs.ending import Ending, follow_to_end, judged

    merger = Merger(conn, request_, note)
    merger.podless = podless
    opened: set[tuple[str, str, int]] = set()  # (pod, container, instance)
    told: dict[str, str] = {}
    chosen: list[str] | None = None
    first = True
    ended: Ending | None = None
    ended_at = 0.0
    checked = False  # the streams still open were checked against their pods, after GRACE
    stop = threading.Event()
    changes: queue.Queue[Any] = queue.Queue()
    latest: list[Sequence[Object]] = [[], []]

    def pump() -> None:
        def seen(jobs: Sequence[Object], pods: Sequence[Object]) -> None:
            latest[:] = [jobs, pods]

        def show(run: Run) -> None:
            changes.put((run, *latest))
            if stop.is_set():
                raise _Stopped

        try:
            # every change of a pod, not only of a task's line: a container started again in
            # place leaves its task's line as it was, and its new run is read from then on
            changes.put(follow_to_end(conn, name, None, on_change=show, seen=seen, every=True))
        except _Stopped:
            return
        except BaseException as e:  # handed to the caller's thread
            changes.put(e)

    with riding_out(conn, None, note, "it is back (no --timeout)"):
        threading.Thread(target=pump, daemon=True).start()
        try:
            while True:
                if cancel is not None and cancel.is_set():
                    merger.stopped.update(merger.open)
                    raise Cancelled(name)
                try:
                    update = changes.get(timeout=0.05)
                except queue.Empty:
                    update = None
                if isinstance(update, BaseException):
                    raise update
                if isinstance(update, Ending):
                    if ended is None:  # deleted before its verdict: nothing more will come
                        ended, ended_at = update, time.monotonic()
                elif update is not None:
                    run, jobs, pods = update
                    # (before any stream starts: one that ends asks how its pod is)
                    merger.known = {str((p.get("metadata") or {}).get("name")): p for p in pods}
                    tasks = tasks_of(jobs, pods)
                    if chosen is None:
                        deleted = gone_tasks(name, jobs, pods, tasks) if selection.tasks else {}
                        asked = selection.tasks, selection.roles, name, deleted, note
                        chosen = tasks_asked(list(tasks), *asked)
                    said: list[str] = []
                    left = pods_gone(jobs, tasks)  # a finished task's pod gone is not "no pod yet"
                    found = sources_now(
                        tasks, chosen, selection, request_.previous, said.append, left, podless
                    )
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
                        again = not first and source.instance and not source.earlier
                        if again and before not in opened:
                            # crashed and started again between two looks: read that run whole first
                            opened.add(before)
                            gone = replace(source, instance=source.instance - 1, earlier=True)
                            merger.start(gone, whole=True)
                        opened.add(key)
                        # a pod or instance that came later is read from its start
                        merger.start(source, whole=not first and not request_.previous)
                    first = False
                    if run.finished and ended is None:
                        ended, ended_at = judged(run), time.monotonic()
                _print(merger, printer, note)
                if ended is not None:
                    live = [
                        s
                        for s, t in merger.open.items()
                        if t.is_alive() and s not in merger.stopped
                    ]
                    if live and not checked and time.monotonic() - ended_at >= GRACE:
                        # An ended container's stream is read to its end; one still running (a
                        # ps never ends on its own) is read no further.
                        checked = True
                        merger.stopped.update(still_running(conn, name, live))
                    if not any(
                        t.is_alive() for s, t in merger.open.items() if s not in merger.stopped
                    ):
                        _print(merger, printer, note)
                        check_streams(merger)
                        return ended
        finally:
            stop.set()


def still_running(conn: Connection, name: str, sources: Iterable[Source]) -> list[Source]:
    """The sources whose container still runs the run they read, by the run's pods as they are now."""
    from simpletfjob.kube.lists import list_objects
    from simpletfjob.runs.objects import run_selector

    pods = list_objects(conn, PODS, label_selector=run_selector(name)).items
    by_name = {str((p.get("metadata") or {}).get("name")): p for p in pods}
    return [
        s
        for s in sources
        if (pod := by_name.get(s.pod)) is not None and run_now(pod, s) == "running"
    ]
