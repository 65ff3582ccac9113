"""A run on the cluster: its Jobs and pods read by label, followed through watches, cleaned up.

`status` reads with two lists (Jobs, pods), made at the same time, whatever the number of
tasks. `wait` lists each once, then watches both from the lists' resourceVersions (a dropped
watch resumes from where it was; on 410 it re-lists, in kube/watch.py); it never polls. The
two watches run in threads that hand their events to the caller's thread.

state.py judges what is read here.
"""

from __future__ import annotations

import math
import queue
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from simpletfjob.identity import JOB_LABEL
from simpletfjob.kube.lists import ObjectList, list_objects
from simpletfjob.kube.objects import delete
from simpletfjob.kube.request import Deadline
from simpletfjob.kube.resources import JOBS, PODS, SERVICES, Resource
from simpletfjob.kube.watch import Event, watch
from simpletfjob.runs.objects import NoRunError, named_tasks, run_selector
from simpletfjob.runs.state import FAILED, Run, group_runs, run_state

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection

MANAGER = "simpletfjob"


def _both(
    conn: Connection, name: str | None, deadline: Deadline | None = None
) -> tuple[ObjectList, ObjectList]:
    """The Jobs and the pods of the run (or of every run), listed at the same time."""
    found: dict[str, ObjectList] = {}
    failed: list[BaseException] = []
    within = None if deadline is None else deadline.sooner(conn.settings.deadline)

    def read(resource: Resource) -> None:
        try:
            found[resource.plural] = list_objects(
                conn, resource, label_selector=run_selector(name), deadline=within
            )
        except BaseException as e:  # handed to the caller, in its thread
            failed.append(e)

    pods = threading.Thread(target=read, args=(PODS,), daemon=True)
    pods.start()
    read(JOBS)
    pods.join()
    if failed:
        raise failed[0]
    return found[JOBS.plural], found[PODS.plural]


def read_run(conn: Connection, name: str) -> Run:
    """The run as it is now; `NoRunError` when none of its Jobs is there."""
    jobs, pods = _both(conn, name)
    run = run_state(name, conn.namespace, jobs.items, pods.items, named_tasks(jobs.items))
    if not run.tasks:
        raise NoRunError(name, conn.namespace)
    return run


def read_runs(conn: Connection) -> list[Run]:
    """Every run in the connection's namespace, by name."""
    jobs, pods = _both(conn, None)
    pods_of: dict[str, list[dict[str, Any]]] = {}
    for pod in pods.items:
        label = ((pod.get("metadata") or {}).get("labels") or {}).get(JOB_LABEL, "")
        pods_of.setdefault(str(label), []).append(pod)
    return [
        run_state(name, conn.namespace, run_jobs, pods_of.get(name, []), named_tasks(run_jobs))
        for name, run_jobs in group_runs(jobs.items).items()
    ]


class _Until(Deadline):
    """The caller's deadline, which also passes once the caller stops: the watches then end."""

    stopped: threading.Event

    def remaining(self) -> float:
        return 0.0 if self.stopped.is_set() else super().remaining()


def _until(deadline: Deadline | None) -> _Until:
    until = _Until(math.inf, math.inf) if deadline is None else _Until(*deadline)
    until.stopped = threading.Event()
    return until


class _Store:
    """The objects of one resource as the watch has told of them, by name."""

    def __init__(self, listed: ObjectList) -> None:
        self.objects = {_name(o): o for o in listed.items}

    def apply(self, event: Event) -> None:
        if event.type == "RELIST":
            self.objects = {_name(o): o for o in event.objects}
        elif event.type == "DELETED" and event.object is not None:
            self.objects.pop(_name(event.object), None)
        elif event.type in ("ADDED", "MODIFIED") and event.object is not None:
            self.objects[_name(event.object)] = event.object


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name"))


def follow(conn: Connection, name: str, deadline: Deadline | None) -> Iterator[Run]:
    """The run now, then again after each change, until it has ended or the deadline has passed.

    One list of Jobs and one of pods, then a watch of each from where its list was read.
    A deadline of 0 s checks once, as `kubectl wait --timeout 0s` does: the lists are not
    cut short by it, so that a run that has ended is told as ended.
    """
    once = deadline is not None and deadline.seconds <= 0
    jobs, pods = _both(conn, name, None if once else deadline)
    named = named_tasks(jobs.items)
    run = run_state(name, conn.namespace, jobs.items, pods.items, named)
    if not run.tasks:
        raise NoRunError(name, conn.namespace)
    expected = [*named, *(task.task for task in run.tasks)]
    yield run
    if run.finished:
        return
    stores = {JOBS.plural: _Store(jobs), PODS.plural: _Store(pods)}
    events: queue.Queue[tuple[str, Event] | BaseException] = queue.Queue()
    until = _until(deadline)

    def follow_one(resource: Resource, listed: ObjectList) -> None:
        try:
            for event in watch(
                conn,
                resource,
                label_selector=run_selector(name),
                resource_version=listed.resource_version,
                deadline=until,
            ):
                if until.stopped.is_set():
                    return
                events.put((resource.plural, event))
        except BaseException as e:  # handed to the caller, in its thread
            events.put(e)

    for resource, listed in ((JOBS, jobs), (PODS, pods)):
        threading.Thread(target=follow_one, args=(resource, listed), daemon=True).start()

    def judge() -> Run:
        jobs_now, pods_now = stores[JOBS.plural].objects, stores[PODS.plural].objects
        return run_state(name, conn.namespace, jobs_now.values(), pods_now.values(), expected)

    def take(item: tuple[str, Event] | BaseException) -> None:
        if isinstance(item, BaseException):
            raise item
        plural, event = item
        stores[plural].apply(event)

    try:
        while True:
            item = _next(events, deadline)
            if item is None:
                return  # the deadline passed
            take(item)
            while not events.empty():  # every event that has come, then judge the run once
                take(events.get_nowait())
            run = judge()
            if run.state == FAILED:
                run = _settle(run, events, take, judge, deadline)
            yield run
            if run.finished:
                return
    finally:
        until.stopped.set()


SETTLE = 1.0  # seconds a failure waits for its pod's news from the other watch


def _settle(
    run: Run,
    events: queue.Queue[tuple[str, Event] | BaseException],
    take: Callable[[tuple[str, Event] | BaseException], None],
    judge: Callable[[], Run],
    deadline: Deadline | None,
) -> Run:
    """The failed run once its failed pod has been seen, or after SETTLE seconds.

    The Jobs and the pods come through two watches: the Job controller's `Failed` can come
    before the pod's failure that caused it, and the reason would then be the Job's
    (BackoffLimitExceeded) rather than the pod's (Error (exit 1)).
    """
    settle = Deadline.after(SETTLE)
    if deadline is not None:
        settle = deadline.sooner(SETTLE)
    while run.reason == _job_reason(run):
        item = _next(events, settle)
        if item is None:
            break
        take(item)
        run = judge()
    return run


def _job_reason(run: Run) -> str:
    """The reason a failed run gives when only its Job's condition says why (no pod failure seen)."""
    task = next((t for t in run.tasks if t.task == run.decided_by), None)
    return run.reason if task is not None and task.reason_from_job else ""


def _next(
    events: queue.Queue[tuple[str, Event] | BaseException], deadline: Deadline | None
) -> tuple[str, Event] | BaseException | None:
    """The next event, waiting at most until the deadline; None when it has passed."""
    if deadline is None:
        return events.get()
    remaining = deadline.remaining()
    if remaining <= 0:
        return None
    try:
        return events.get(timeout=remaining)
    except queue.Empty:
        return None


def clean_up(conn: Connection, run: Run, cleanup: str, report: Callable[[str], None]) -> None:
    """Delete what `cleanup` says (running: the tasks not finished; all: the run), Background.

    Background propagation: the Job goes at once and the garbage collector removes its pods;
    the pods of finished tasks stay, with their Jobs, for `kubectl logs`.
    """
    if cleanup == "none":
        return
    jobs = [task.job for task in run.tasks if cleanup == "all" or not task.finished]
    if not jobs and cleanup != "all":
        return
    services = list_objects(conn, SERVICES, label_selector=run_selector(run.name)).items
    chosen = set(jobs)
    doomed = [
        _name(s)
        for s in services
        if cleanup == "all"
        or _name(s) in chosen
        or ((s.get("spec") or {}).get("selector") or {}).get("job-name") in chosen
    ]
    for resource, names in ((JOBS, jobs), (SERVICES, doomed)):
        for object_name in names:
            gone = delete(conn, resource, object_name, propagation="Background")
            if not gone.already_gone:
                report(f"{resource.ref(object_name)} deleted")
