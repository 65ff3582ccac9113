"""A run's logs at their source: which containers they come from, and each one's stream read in a thread.

A task's pod is the newest that has not finished, else the newest; its container the one named,
every one, or by default the one whose env carries the framework's variables, else the first.
A container waiting to start has no output yet; one in CrashLoopBackOff still shows the run
that crashed.

`Merger` hands each stream's batches of whole lines to the caller's thread as they come. A
running container's log goes on as long as it runs, so it has a thread and a connection of its
own; ended containers' logs end by themselves, so ENDED_AT_ONCE threads read them one after
another over kept connections (a few TLS handshakes for a hundred tasks, not a hundred). When
following, `follow_log` reads on across a break, and `Merger._again` tells it where the
container's run stands, from the pod as last told or, if that says it runs, as it is now.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from simpletfjob.errors import ClusterError, SimpleTFJobError, UsageError
from simpletfjob.frameworks import FRAMEWORKS, framework
from simpletfjob.kube.podlog import Again, follow_log, read_log
from simpletfjob.kube.request import ApiError
from simpletfjob.kube.resources import PODS
from simpletfjob.runs.objects import named_tasks, run_framework
from simpletfjob.runs.state import is_gone
from simpletfjob.runs.taskstate import (
    container_status,
    in_role_order,
    job_pods,
    metadata_of,
    pods_by_job,
    task_of,
    waiting_why,
    why,
)

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection


Object = Mapping[str, Any]


@dataclass(frozen=True)
class Source:
    """One container log to read: whose it is, and the label its lines are prefixed with."""

    task: str
    pod: str
    container: str
    label: str
    instance: int = 0  # which run of the container: its restartCount while that run is current
    earlier: bool = False  # the run before the current one (pods/log's `previous`)


def tasks_of(jobs: Iterable[Object], pods: Iterable[Object]) -> dict[str, list[Object]]:
    """Every task of the run ('worker-0') and its pods, newest last, tasks in role order."""
    by_job = pods_by_job(pods)
    jobs = list(jobs)
    rank = in_role_order(run_framework(jobs).role_order)
    found: list[tuple[tuple[int, str, int, str], str, list[Object]]] = []
    for job in jobs:
        if is_gone(job):
            continue
        mine = job_pods(job, by_job)
        task = task_of(job, mine)
        by_age = sorted(mine, key=lambda p: str(metadata_of(p).get("creationTimestamp") or ""))
        found.append((rank(task), task.task, by_age))
    return {task: pods for _, task, pods in sorted(found, key=lambda item: item[0])}


def tasks_asked(
    known: Sequence[str],
    tasks: Sequence[str],
    roles: Sequence[str],
    run: str,
    gone: Mapping[str, str] | None = None,
    note: Callable[[str], None] | None = None,
) -> list[str]:
    """The tasks asked for, in the run's order (every task when none is named); a named one whose
    Job is gone (`gone`) is said to `note`, and an error when no other named is there."""
    unknown = [t for t in tasks if t not in known and t not in (gone or {})]
    if unknown:
        raise UsageError(
            f"run {run!r} has no task {unknown[0]!r}; its tasks are {', '.join(known)}"
        )
    have = dict.fromkeys(t.rsplit("-", 1)[0] for t in known)  # its roles, in order
    every = {role for name in FRAMEWORKS for role in framework(name).role_order}
    # A role of some framework is no error: the run's Jobs of it may be gone (a cleanup, a TTL).
    odd = [r for r in roles if r not in have and r not in every]
    if odd:
        raise UsageError(f"run {run!r} has no role {odd[0]!r}; its roles are {', '.join(have)}")
    told = [(gone or {})[t] for t in tasks if t not in known]
    if told and all(t not in known for t in tasks):
        raise SimpleTFJobError(told[0])
    for line in told:
        if note is not None:
            note(line)
    if not tasks and not roles:
        return list(known)
    wanted = set(tasks)
    return [t for t in known if t in wanted or t.rsplit("-", 1)[0] in roles]


def gone_tasks(
    run: str, jobs: Sequence[Object], pods: Iterable[Object], known: Collection[str]
) -> dict[str, str]:
    """The tasks the run's Jobs name that have no Job left, each with what became of it: deleted
    by the cleanup when the run has ended by another task, else gone."""
    from simpletfjob.runs.state import DELETED, run_state

    named = named_tasks(jobs)
    missing = [t for t in named if t not in known]
    if not missing:
        return {}
    judged = run_state(run, "", jobs, pods, named)
    cleaned = judged.finished and judged.reason != DELETED
    return {
        task: f"{task}'s Job was deleted by the cleanup after the verdict; its logs went with it"
        if cleaned and task != judged.decided_by
        else f"{task}'s Job is gone (deleted, or removed by ttlSecondsAfterFinished); its logs "
        "went with it"
        for task in missing
    }


def current_pod(pods: Sequence[Object]) -> Object | None:
    """The pod that stands for the task now: the newest that has not finished, else the newest."""
    running = [p for p in pods if _phase(p) not in ("Succeeded", "Failed") and not is_gone(p)]
    candidates = running or list(pods)
    return candidates[-1] if candidates else None


def _phase(pod: Object) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def framework_container(pod: Object) -> str:
    """The container whose env carries any framework's variables (`env_names`), else the first."""
    from simpletfjob.frameworks import FRAMEWORKS, framework

    placed = {name for fw in FRAMEWORKS for name in framework(fw).env_names}
    containers = ((pod.get("spec") or {}).get("containers")) or []
    for container in containers:
        if any(
            isinstance(e, Mapping) and e.get("name") in placed for e in container.get("env") or ()
        ):
            return str(container.get("name"))
    return str(containers[0].get("name")) if containers else ""


def containers_of(pod: Object, container: str | None, every: bool) -> list[str]:
    names = [str(c.get("name")) for c in ((pod.get("spec") or {}).get("containers")) or []]
    if every:
        return names
    if container is not None:
        return [container] if container in names else []
    return [framework_container(pod)]


def container_state(pod: Object, container: str) -> tuple[str, int, str]:
    """('running'|'terminated'|'waiting'|'', restartCount, reason) of a container of the pod."""
    status = container_status(pod, container)
    if status:
        state = status.get("state") or {}
        restarts = int(status.get("restartCount") or 0)
        if "running" in state:
            return "running", restarts, ""
        if "terminated" in state:
            return "terminated", restarts, str(state["terminated"].get("reason") or "")
        # (CrashLoopBackOff: the container that just ended still has its output to show)
        return "waiting", restarts, str((state.get("waiting") or {}).get("reason") or "waiting")
    if _phase(pod) == "Failed":
        return "failed", 0, str((pod.get("status") or {}).get("reason") or "Failed")
    return "", 0, "ContainerCreating" if (pod.get("spec") or {}).get("nodeName") else "Pending"


def run_now(pod: Object, source: Source) -> str:
    """Where the run of the container that `source` reads stands in `pod`: 'running', 'ended',
    'previous' (pods/log's `previous` reads it), or 'lost' (pods/log keeps only the last two runs)."""
    state, restarts, _ = container_state(pod, source.container)
    if state in ("running", "terminated") and restarts == source.instance:
        return "running" if state == "running" else "ended"
    if state in ("running", "terminated", "waiting") and restarts == source.instance + 1:
        return "previous"  # started again, or crashed and waiting to: restartCount counts it
    return "lost"


def has_output(pod: Object, container: str, previous: bool) -> tuple[bool, str]:
    """Whether the container's log can be read now, and if not, why."""
    state, restarts, reason = container_state(pod, container)
    if previous:
        return restarts > 0, "" if restarts else "no previous container (it has not restarted)"
    if state in ("running", "terminated") or (state == "waiting" and restarts > 0):
        return True, ""  # (waiting between restarts: the last instance's output)
    if state == "failed":
        return False, f"its pod failed ({reason}) before the container started"
    said, message = waiting_why(pod, container)
    return False, f"waiting to start: {why(said or reason, message)}"


@dataclass(frozen=True)
class Selection:
    """Which of the run's tasks and containers to show."""

    tasks: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    container: str | None = None
    all_containers: bool = False


GONE = "its pod is gone; its logs went with it"  # as status and wait say it


def pods_gone(jobs: Iterable[Object], tasks: Mapping[str, Sequence[Object]]) -> set[str]:
    """The tasks with no pod left whose Job has had one (it counts one ended, or has ended)."""
    gone = set()
    for job in jobs:
        if is_gone(job):
            continue
        task = task_of(job, [])
        status = job.get("status") or {}
        counted = bool(status.get("succeeded") or status.get("failed") or task.job_condition)
        if counted and not tasks.get(task.task):
            gone.add(task.task)
    return gone


def sources_now(
    tasks: Mapping[str, Sequence[Object]],
    chosen: Sequence[str],
    selection: Selection,
    previous: bool,
    note: Callable[[str], None],
    gone: Collection[str] = (),
    podless: bool = True,
) -> list[tuple[Source, bool]]:
    """Each chosen task's containers that have output now, as (source, readable); notes the
    others, a task with no pod (none yet, or gone) only with `podless`."""
    found: list[tuple[Source, bool]] = []
    for task in chosen:
        pod = current_pod(tasks.get(task, []))
        if pod is None:
            if podless:
                note(f"{task}: {GONE if task in gone else 'no pod yet'}")
            continue
        name = str((pod.get("metadata") or {}).get("name"))
        names = containers_of(pod, selection.container, selection.all_containers)
        if not names:
            note(f"{task}: pod {name} has no container {selection.container!r}")
            continue
        for container in names:
            label = f"{task}/{container}" if selection.all_containers else task
            readable, why = has_output(pod, container, previous)
            state, restarts, _ = container_state(pod, container)
            if not readable:
                note(f"{task}: {why}" if not selection.all_containers else f"{label}: {why}")
            if (state == "waiting" and restarts) or previous:
                # waiting after a crash, or --previous: the run before the current one
                source = Source(task, name, container, label, max(0, restarts - 1), earlier=True)
            else:
                source = Source(task, name, container, label, restarts)
            found.append((source, readable))
    return found


def log_tasks(chosen: str, planned: Any) -> list[str]:
    """The tasks whose logs --logs names: [] for all; by default the one that decides success."""
    names = [f"{t.role}-{t.index}" for t in planned.tasks]
    if chosen in ("all", "none"):
        return []
    if not chosen:
        from simpletfjob.frameworks import framework

        fw = framework(planned.framework)
        return fw.deciding(fw.default_policy, names)[:1]
    return chosen.split(",")


def check_log_tasks(chosen: str, planned: Any) -> None:
    """A task --logs names that the plan lacks is a usage error, before anything is applied."""
    names = [f"{t.role}-{t.index}" for t in planned.tasks]
    unknown = [task for task in log_tasks(chosen, planned) if task not in names]
    if chosen and unknown:  # (the default, worker-0, is there: the plan's checks saw to it)
        raise UsageError(
            f"--logs names {unknown[0]!r}, which the run does not have; its tasks are "
            f"{', '.join(names)}"
        )


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
        """The pods/log query; `whole` reads from the start, `earlier` the run before."""
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
    """Streams read in threads, their whole lines handed to the caller's thread as they come."""

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
        self.podless = True  # a pod gone before its log was read is noted (GONE)

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
        """Whether that run of `source`'s container has ended (its log ends by itself)."""
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
        read = False  # a batch of it was handed over
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
                read = True
                self.lines.put((source, batch))
        except ApiError as e:
            if e.status != 404 or read:
                self.lines.put((source, e))
            elif self.podless:
                # Deleted before its log was read (the Job controller deletes a failed task's
                # pod at its backoff limit): as for a task whose pod had gone when listed.
                self.note(f"{source.task}: {GONE}")
        except BaseException as e:  # handed over, to be said in the caller's thread
            self.lines.put((source, e))
        self.lines.put((source, END))

    def _again(self, source: Source, broke: bool) -> Again | None:
        """How to read on in the run of the container that `source` reads (see follow_log).

        After a break, as the pod is now. A log that ended before the follow told of its run's
        end may have been cut short (a restarting kubelet ends logs so), so the rest is read
        from where it stopped, as the run stands after each of PAUSES (the kubelet reports the
        end a moment after the log's) or as the pod is then: too soon, a container started
        again in place would have its new run read as the rest of the old one.
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
        if where in ("running", "ended", "previous"):
            return Again(previous=where == "previous", follow=where == "running")
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
    """The query of an ended container's log that waited for a reader, as its run stands in
    `pod` when its turn comes: `previous` if it was started again in place meanwhile (its new
    run has a stream of its own); None if twice, as pods/log no longer has that run.
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
