"""A run's progress as its reporting task's log tells it: followed by `run` and `wait` (`Feed`),
read once beside `status`'s lists (`Tail`), and noted on the deciding Job at the end.

The deciding Job's annotations (`Setting`) name the reporting task, the pattern, the stall
timeout, the best step before the current attempt and the last progress noted. `Feed` reads
the task's current container as its bytes arrive (a bar's updates come before a newline), a
stream per container instance into one Tracker; a new pod is read by a stream of its own.
The note is a merge patch, left out where the user may not patch Jobs or the Job is gone.
"""

from __future__ import annotations

import codecs
import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from simpletfjob.errors import ClusterError
from simpletfjob.identity import (
    PROGRESS_ANNOTATION,
    PROGRESS_BEST_ANNOTATION,
    PROGRESS_PATTERN_ANNOTATION,
    PROGRESS_TASK_ANNOTATION,
    STALL_TIMEOUT_ANNOTATION,
)
from simpletfjob.kube.podlog import LogBroken
from simpletfjob.kube.resources import JOBS, PODS, Action
from simpletfjob.options.progress import check_pattern
from simpletfjob.runs.annotations import task_name
from simpletfjob.runs.classify import STALLED, stall_cause
from simpletfjob.runs.logsources import container_state, current_pod, framework_container
from simpletfjob.runs.objects import run_framework
from simpletfjob.runs.progress import (
    Budget,
    Progress,
    Tracker,
    best_note,
    progress_note,
    read_note,
    reporting_task,
    resumed_line,
    stall_due,
    stall_line,
)
from simpletfjob.runs.progresslog import LogReader, Report, ahead
from simpletfjob.runs.state import RUNNING, Run, is_gone
from simpletfjob.runs.taskstate import LOST, Object, condition, metadata_of, pods_by_job

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection
    from simpletfjob.runs.classify import Cause

TAIL = 200  # lines of a container's log that status reads, and wait reads of one running already
TAIL_BYTES = 256 * 1024  # ... at most


@dataclass(frozen=True)
class Setting:
    """What a run's Jobs say of its progress (see the module)."""

    task: str  # the reporting task
    uid: str  # its Job's uid (its pods' controller-uid)
    deciding: str  # the deciding Job's name, which carries the notes
    pattern: re.Pattern[str] | None = None
    stall: float | None = None
    note: Progress | None = None  # the last progress run or wait noted
    best: Progress | None = None  # the best step before the attempt now running
    finished: bool = False  # the reporting task's Job has ended


def setting_of(jobs: Sequence[Object], chosen: str = "", pattern: str = "") -> Setting | None:
    """The run's Setting (`chosen`, `pattern`: run's options over the annotations); None: no Job."""
    by_task = {task_name(j): j for j in jobs if not is_gone(j)}
    default = reporting_task(run_framework(jobs), [t for t in by_task if t])
    notes = metadata_of(by_task.get(default) or {}).get("annotations") or {}
    said = {key: value for key, value in notes.items() if isinstance(value, str)}
    task = chosen or said.get(PROGRESS_TASK_ANNOTATION) or default
    job = by_task.get(task)
    if job is None:
        return None
    text = pattern or said.get(PROGRESS_PATTERN_ANNOTATION, "")
    try:
        stall: float | None = float(said.get(STALL_TIMEOUT_ANNOTATION, "nan"))
    except ValueError:
        stall = None
    return Setting(
        task=task,
        uid=str(metadata_of(job).get("uid") or ""),
        deciding=str(metadata_of(by_task[default]).get("name")),
        pattern=re.compile(text) if text and check_pattern(text) is None else None,
        stall=stall if stall is not None and 0 < stall < math.inf else None,
        note=read_note(said.get(PROGRESS_ANNOTATION, "")),
        best=read_note(said.get(PROGRESS_BEST_ANNOTATION, "")),
        finished=bool(condition(job, "Complete") or condition(job, "Failed")),
    )


def _container(pods: Sequence[Object], uid: str) -> tuple[str, str, str, int] | None:
    """(pod, container, state, instance) of the Job `uid`'s current container, once started."""
    mine = pods_by_job(pods).get(uid, [])
    pod = current_pod(sorted(mine, key=lambda p: str(metadata_of(p).get("creationTimestamp"))))
    if pod is None:
        return None
    container = framework_container(pod)
    state, instance, _ = container_state(pod, container)
    if state not in ("running", "terminated"):
        return None
    return str(metadata_of(pod).get("name")), container, state, instance


def note(conn: Connection, setting: Setting | None, progress: Progress | None) -> None:
    """Note a finished run's last progress on its deciding Job, where the user may."""
    if setting is None or progress is None:
        return
    body = {"metadata": {"annotations": {PROGRESS_ANNOTATION: progress_note(progress)}}}
    action = Action("patch", JOBS, conn.namespace, setting.deciding)
    try:
        from simpletfjob.kube.request import request

        request(conn, action, body=body, content_type="application/merge-patch+json",
                passthrough=range(400, 500))  # fmt: skip
    except ClusterError:
        pass  # the run's end is the news; its note is not worth an error


class Feed:
    """The reporting task's progress while `run` or `wait` follows the run: `seen` is given the
    Jobs and pods as followed (the streams), `check` each state of the run (a stall), `show`
    each state the command shows (with the progress), in the follower's thread."""

    def __init__(
        self,
        conn: Connection,
        *,
        stall: float | None = None,
        chosen: str = "",
        pattern: str = "",
        shown: Callable[[Run], None] | None = None,
        budget: Budget | None = None,
        say: Callable[[str], None],
    ) -> None:
        self.conn, self.stall, self.chosen, self.pattern = conn, stall, chosen, pattern
        self.shown, self.budget, self.say = shown, budget, say
        self.setting: Setting | None = None
        self.tracker: Tracker | None = None
        self.first: Report | None = None  # the attempt's first report
        self.lock = threading.Lock()
        self.closed = threading.Event()
        self.ending = threading.Event()  # finish: a stream that has ended reads on no more
        self.streams: dict[tuple[str, str, int], threading.Thread] = {}
        self.now: tuple[tuple[str, str, int], bool] | None = None  # the current container, running
        self.since: float | None = None  # when every task was first seen Running
        self.run: Run | None = None
        self.unread = ""  # why the reporting task's log cannot be read (a 403): no stall check

    @property
    def tick(self) -> float:
        """How often the follower looks again with no news: a quarter of the stall timeout."""
        return 10.0 if self.stall is None else max(0.5, min(self.stall / 4, 10.0))

    def seen(self, jobs: Sequence[Object], pods: Sequence[Object]) -> None:
        """The run's Jobs and pods: a stream for the reporting task's current container."""
        first = self.setting is None
        if self.setting is None:
            self.setting = setting_of(jobs, self.chosen, self.pattern)
            if self.setting is None:
                return
            self.stall = self.stall or self.setting.stall
            self.tracker = Tracker(self.setting.task)
        found = _container(pods, self.setting.uid)
        if found is None:
            return
        pod, container, state, instance = found
        key = (pod, container, instance)
        self.now = key, state == "running"
        if key not in self.streams and not self.closed.is_set():
            # a run followed late: its last lines (those of an attempt's later pods: all)
            thread = threading.Thread(target=self._read, args=(key, first), daemon=True)
            self.streams[key] = thread
            thread.start()

    def _read(self, key: tuple[str, str, int], tail: bool) -> None:
        from simpletfjob.kube.podlog import read_chunks

        assert self.setting is not None
        pod, container, _ = key
        reader = LogReader(self.setting.pattern)
        text = codecs.getincrementaldecoder("utf-8")("replace")
        query: list[tuple[str, str | int]] = [("container", container), ("follow", "true")]
        if tail:
            query.append(("tailLines", TAIL))
        last = time.monotonic()
        while not self.closed.is_set():
            try:
                for chunk in read_chunks(self.conn, pod, query):
                    last = time.monotonic()
                    self._take(reader.feed(text.decode(chunk)))
                    if self.closed.is_set():
                        return
            except LogBroken:
                pass
            except ClusterError as e:  # gone: no progress from this container; refused: none
                if getattr(e, "status", None) == 403 and not self.unread:
                    # no stall can be judged without the log: the check is off, not a stall
                    self.unread = f"cannot read the log of {self.setting.task}: {e}"
                    self.say(f"simpletfjob: warning: no stall check: {self.unread}")
                return
            # read on after a break, or a log that ended while the container still runs
            if self.ending.wait(1.0) or self.now != (key, True):
                break
            gone = ("sinceSeconds", math.ceil(time.monotonic() - last) + 1)
            query = [("container", container), ("follow", "true"), gone]
        self._take(reader.close())

    def _take(self, reports: Sequence[Report]) -> None:
        new = False
        resumed: Report | None = None  # the attempt's first report, if among these
        with self.lock:
            for report in reports:
                assert self.tracker is not None
                if self.tracker.add(report, time.time()):
                    resumed = report if self.first is None else resumed
                    self.first, new = self.first or report, True
        if resumed and self.budget is not None and self.budget.restarts:
            self.say(resumed_line(self.budget, resumed))  # a new attempt's first report
        if new and self.run is not None:
            self.show(self.run)

    def latest(self) -> Progress | None:
        with self.lock:
            return None if self.tracker is None else self.tracker.progress()

    def best(self) -> Report | None:
        """The furthest step this attempt reached."""
        with self.lock:
            return None if self.tracker is None else self.tracker.best

    def spent(self) -> Budget:
        """The run's budget now (`run`): given back once this attempt passed the best before it."""
        best = self.best()
        assert self.budget is not None
        return self.budget.reached(best) if best is not None else self.budget

    def show(self, run: Run) -> None:
        """The run as judged, with the progress now, to `shown` (the command's status line)."""
        self.run = run
        if self.shown is not None:
            self.shown(replace(run, progress=self.latest()))

    def check(self, run: Run) -> Cause | None:
        """A stall of the run now (progress.py), as its Cause."""
        with self.lock:
            last, stepped = (
                (None, None) if self.tracker is None else (self.tracker.last, self.tracker.updated)
            )
        if self.stall is None or self.setting is None or self.unread:
            return None
        now = time.time()
        every = all(t.state in (RUNNING, LOST) for t in run.tasks) and run.count(RUNNING) > 0
        self.since = (self.since or now) if every else None
        due = stall_due(self.stall, self.since, stepped)
        if due is None or now < due:
            return None
        task = self.setting.task
        return stall_cause(stall_line(self.stall, task, last, stepped), [task])

    def finish(self, noted: bool) -> None:
        """Stop the streams, the stream of a container that has ended given 2 s to read its last
        lines; note the last progress if `noted` (the run has ended)."""
        self.ending.set()
        if self.now is not None and not self.now[1]:
            thread = self.streams.get(self.now[0])
            if thread is not None:
                thread.join(2.0)
        self.close()
        if noted:
            note(self.conn, self.setting, self.latest())

    def close(self) -> None:
        self.ending.set()
        self.closed.set()


class Tail:
    """`status`'s progress: the reporting task's last lines, read in a thread (`start`, given
    the Jobs as listed) beside the pods' list; `into` puts it on the run."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.thread: threading.Thread | None = None
        self.found: tuple[Progress | None, Setting | None] = (None, None)
        self.error: BaseException | None = None

    def start(self, jobs: Sequence[Object], pods: Sequence[Object]) -> None:
        self.thread = threading.Thread(target=self._read, args=(jobs, pods), daemon=True)
        self.thread.start()

    def _read(self, jobs: Sequence[Object], pods: Sequence[Object]) -> None:
        try:
            setting = setting_of(jobs)
            self.found = (None, setting)
            if setting is not None:
                self.found = (read_progress(self.conn, setting, pods), setting)
        except ClusterError:
            pass  # a run's progress is not worth an error: status shows none
        except BaseException as e:  # handed to the caller, in its thread
            self.error = e

    def into(self, run: Run) -> Run:
        """The run with its progress; its restarts in a row are 0 once it passed the best before."""
        if self.thread is not None:
            self.thread.join()
        if self.error is not None:
            raise self.error
        progress, setting = self.found
        best = setting.best if setting is not None else None
        passed = progress is not None and best is not None and ahead(progress, best)
        return replace(run, progress=progress, in_a_row=0 if passed else run.in_a_row)


def read_progress(conn: Connection, setting: Setting, pods: Sequence[Object]) -> Progress | None:
    """The reporting task's progress from its current container's last lines, read once; else
    (ended, or no container) the progress noted."""
    from simpletfjob.kube.podlog import stamped
    from simpletfjob.kube.request import request

    if setting.finished and setting.note is not None:
        return setting.note
    found = _container(pods, setting.uid)
    if found is None:
        return setting.note
    pod, container = found[:2]
    query: list[tuple[str, str | int]] = [("container", container), ("tailLines", TAIL)]
    query += [("timestamps", "true"), ("limitBytes", TAIL_BYTES)]
    action = Action("get", PODS, conn.namespace, pod, subresource="log")
    answer = request(conn, action, query=query, passthrough=range(400, 500))
    if answer.status >= 400:
        return setting.note
    tracker, reader, now = Tracker(setting.task), LogReader(setting.pattern), time.time()
    for line in answer.data.split(b"\n"):
        when, text = stamped(line)
        for report in reader.feed(text.decode("utf-8", "replace") + "\n"):
            tracker.add(report, now if when is None else when)
    return tracker.progress() or setting.note


def verdict_of(cause: Cause | None) -> str | None:
    """A stall's line, the run's outcome in its failed line; None for any other cause."""
    return cause.text if cause is not None and cause.kind == STALLED else None


def best_marks(budget: Budget | None, chosen: str) -> tuple[tuple[str, str], ...]:
    """The note of the best step before the attempt about to be applied, which `status`
    compares with; () before any restart. `chosen`: --progress-task ('' for rank 0)."""
    if budget is None or budget.best is None:
        return ()
    return ((PROGRESS_BEST_ANNOTATION, best_note(budget.best, chosen or "rank 0")),)
