"""A run read (`status`: a list of Jobs and one of pods, at once) and followed (`wait`).

`follow` lists once, then watches both from the lists' resourceVersions (kube/watch.py resumes
or re-lists); it never polls. `Follower` keeps the objects as the events tell of them and judges
them with state.run_state, as `status` does, so both say the same of the same objects; only the
tasks whose Job or pods have changed are worked out again.

`verdict` says when `wait` may end. Succeeded, Ambiguous and Deleting end it at once, as does
Failed when a deciding task is gone. Otherwise Failed ends it once the failure's second has
passed on the server (TIE): the Job controller stamps each status write with its second and
the watch brings writes in order, so a deciding task that completes in the same second wins
the tie, and the failed pod's news (the Job's condition says only BackoffLimitExceeded) has
come through its watch.

What can no longer be read is kept as last seen: a task's restart count and a failed task's
exit code once its pod is gone (the Job controller deletes an OnFailure pod at the backoff
limit), and a Job's end once seen, so a Job deleted after it ended (ttlSecondsAfterFinished,
or by hand) is judged as it ended.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from simpletfjob.errors import Interrupted
from simpletfjob.identity import JOB_LABEL, NAME_ANNOTATION
from simpletfjob.kube.inflight import Pool, Write, cut_short
from simpletfjob.kube.lists import ObjectList, list_objects
from simpletfjob.kube.objects import Deleted, delete
from simpletfjob.kube.request import Action, Deadline, request
from simpletfjob.kube.resources import JOBS, NODES, PODS, SERVICES
from simpletfjob.kube.watch import Watches
from simpletfjob.runs.delete import replaced_line
from simpletfjob.runs.objects import NoRunError, named_tasks, run_selector, some
from simpletfjob.runs.state import (
    AMBIGUOUS,
    DELETED,
    DELETING,
    FAILED,
    SUCCEEDED,
    UNKNOWN,
    Run,
    changes,
    is_gone,
    run_state,
)
from simpletfjob.runs.taskstate import (
    Object,
    TaskStatus,
    condition,
    labels_of,
    last_failure,
    metadata_of,
    name_or_invalid,
    node_condition,
    pods_by_job,
    task_of,
)

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection
    from simpletfjob.kube.watch import Event


Seen = Callable[[Sequence[Object], Sequence[Object]], None]  # a run's Jobs and pods, as listed


def list_both(
    conn: Connection,
    name: str | None,
    deadline: Deadline | None = None,
    namespace: str | None = None,
) -> tuple[ObjectList, ObjectList]:
    """The Jobs and pods of the run (of every run: None), listed at once; namespace '': all.

    The Jobs are listed in the caller's thread, so an interrupt goes up from there at once.
    """
    within = None if deadline is None else deadline.sooner(conn.settings.deadline)
    selector = run_selector(name)
    pool = Pool(1, "simpletfjob-pods")
    try:
        pods = pool.submit(
            list_objects, conn, PODS, namespace=namespace, label_selector=selector, deadline=within
        )
        jobs = list_objects(
            conn, JOBS, namespace=namespace, label_selector=selector, deadline=within
        )
        return jobs, pods.result()
    finally:
        pool.shutdown(wait=False)


def read_run(conn: Connection, name: str, seen: Seen | None = None) -> Run:
    """The run as it is now; `NoRunError` when none of its Jobs is there. `seen` is given its
    Jobs and pods as soon as they are listed (status's progress: reporting.Tail)."""
    jobs, pods = list_both(conn, name)
    if seen is not None:
        seen(jobs.items, pods.items)
    nodes = NodeReader(conn).read(unknown_nodes(pods.items))
    run = run_state(name, conn.namespace, jobs.items, pods.items, named_tasks(jobs.items), nodes)
    if not run.tasks:
        raise NoRunError(name, conn.namespace)
    return run


def read_runs(conn: Connection, every_namespace: bool = False) -> list[Run]:
    """Every run in the connection's namespace, by name; or in every namespace, by namespace
    then name (two lists across the cluster, as `kubectl get -A` makes one)."""
    jobs, pods = list_both(conn, None, namespace="" if every_namespace else None)
    nodes = NodeReader(conn).read(unknown_nodes(pods.items))
    pods_of: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for pod in pods.items:
        label = ((pod.get("metadata") or {}).get("labels") or {}).get(JOB_LABEL, "")
        pods_of.setdefault((_namespace_of(pod, conn), str(label)), []).append(pod)
    jobs_in: dict[str, list[Object]] = {}
    for job in jobs.items:
        jobs_in.setdefault(_namespace_of(job, conn), []).append(job)
    return [
        run_state(
            name,
            namespace,
            run_jobs,
            pods_of.get((namespace, name), []),
            named_tasks(run_jobs),
            nodes,
        )
        for namespace in sorted(jobs_in)
        for name, run_jobs in group_runs(jobs_in[namespace]).items()
    ]


def group_runs(jobs: Iterable[Object]) -> dict[str, list[Object]]:
    """The Jobs of each run (by the simpletfjob/job label), runs in name order; those being
    deleted too (a run whose Jobs all are is Deleting)."""
    runs: dict[str, list[Object]] = {}
    for job in jobs:
        runs.setdefault(str(labels_of(job).get(JOB_LABEL, "")), []).append(job)
    return dict(sorted(runs.items()))


def _namespace_of(obj: Object, conn: Connection) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or conn.namespace)


def follow(
    conn: Connection,
    name: str,
    deadline: Deadline | None,
    seen: Callable[[Sequence[Object], Sequence[Object]], None] | None = None,
    tick: float | None = None,
    every: bool = False,
) -> Generator[Run, None, None]:
    """The run now, then after each change, until it has ended or the deadline has passed.

    A deadline of 0 s checks once, as `kubectl wait --timeout 0s` does (the lists are not cut
    short, so an ended run is told as ended). `seen` is given the Jobs and pods each run was
    judged from (`logs -f`). `tick`: the run is yielded again when no event has come for that
    many seconds (`run` checks the nodes). `every`: yielded after each batch of events.
    """

    def tell() -> None:
        if seen is not None:
            seen(
                list(follower.stores["jobs"].objects.values()),
                list(follower.stores["pods"].objects.values()),
            )

    once = deadline is not None and deadline.seconds <= 0
    jobs, pods = list_both(conn, name, None if once else deadline)
    follower = Follower(name, conn.namespace, jobs.items, pods.items, named_tasks(jobs.items))
    nodes = NodeReader(conn)
    run = follower.judge(nodes.read(follower.unknown_nodes()))
    if not run.tasks:
        raise NoRunError(name, conn.namespace)
    follower.remember(run)
    tell()
    yield run
    if once or verdict(run, settled=False) is not None:
        return
    with Watches(conn, deadline) as watches:
        for resource, listed in ((JOBS, jobs), (PODS, pods)):
            watches.add(
                resource.plural,
                resource,
                label_selector=run_selector(name),
                resource_version=listed.resource_version,
            )
        settle: Deadline | None = Deadline.after(TIE) if run.state == FAILED else None
        shown = run  # what the caller was last given
        while True:
            wait_until = deadline if settle is None else settle
            if settle is not None and deadline is not None:
                wait_until = deadline.sooner(settle.remaining())
            if tick is not None:
                wait_until = Deadline.after(tick) if wait_until is None else wait_until.sooner(tick)
            # Every event that has come (at least one), then the run judged once.
            items = watches.take(wait_until)
            ticked = not items and tick is not None
            for plural, event in items:
                follower.take(plural, event)
            if not items and deadline is not None and deadline.remaining() <= 0:
                if run.state == FAILED:
                    tell()
                    yield run  # the deadline cut the wait for its second short: it failed
                return
            settled = settle is not None and settle.remaining() <= 0
            now = follower.judge(nodes.read(follower.unknown_nodes()))
            follower.remember(now)
            if now.state == FAILED and settle is None:
                settle = Deadline.after(TIE)  # its second passes on the server meanwhile
            elif now.state != FAILED:
                settle = None
            ended = verdict(now, settled)
            if ended is not None:
                tell()
                yield ended
                return
            if now.state != FAILED and (changes(shown, now) or ticked or every):
                tell()
                yield now
                shown = now
            run = now


class NodeReader:
    """How the nodes of pods in phase Unknown are, each read once (a get) when first asked.

    Without `get` on nodes (403) a node reads as REFUSED, so the task's reason says why no more
    is known, and the command goes on.
    """

    REFUSED = "unreachable (cannot get nodes: 403 Forbidden)"

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.known: dict[str, str] = {}
        self.refused = False

    def read(self, names: Iterable[str]) -> dict[str, str]:
        for name in sorted(set(names) - set(self.known)):
            if self.refused:
                self.known[name] = self.REFUSED
                continue
            answer = request(self.conn, Action("get", NODES, None, name), passthrough=(403, 404))
            if answer.status == 404:
                self.known[name] = "is gone"
            elif answer.status == 403:
                self.refused = True
                self.known[name] = self.REFUSED
            else:
                self.known[name] = node_condition(json.loads(answer.data))
        return self.known


def clean_up(conn: Connection, run: Run, cleanup: str, report: Callable[[str], None]) -> None:
    """Delete what `cleanup` says (running: the unfinished tasks; all: the run), Background.

    The Job goes at once and the garbage collector removes its pods; finished tasks stay for
    `kubectl logs`. Each delete names the uid as read, so an object that took the name since
    is left. A copy (its `simpletfjob/name` annotation names another object) is left, with a
    line; one without the annotation is taken as apply's (a copy claiming a task makes the
    run Ambiguous, and then nothing is cleaned up).
    """
    if cleanup == "none":
        return
    chosen = [task for task in run.tasks if cleanup == "all" or not task.finished]
    if not chosen and cleanup != "all":
        return
    jobs = [task.job for task in chosen if task.applied]
    for task in chosen:
        if not task.applied:
            report(_copy_left("job.batch", task.job, task.copied_from))
    services = list_objects(conn, SERVICES, label_selector=run_selector(run.name)).items
    names = set(jobs)
    uids = {task.job: task.uid for task in run.tasks}
    doomed: list[Mapping[str, Any]] = []
    for s in services:
        if not (
            cleanup == "all"
            or _name(s) in names
            or ((s.get("spec") or {}).get("selector") or {}).get("job-name") in names
        ):
            continue
        own = ((s.get("metadata") or {}).get("annotations") or {}).get(NAME_ANNOTATION)
        if isinstance(own, str) and own != _name(s):
            report(_copy_left("service", _name(s), own))
        else:
            doomed.append(s)
    targets = [(JOBS, name, uids.get(name, "")) for name in jobs] + [
        (SERVICES, _name(s), str((s.get("metadata") or {}).get("uid") or "")) for s in doomed
    ]
    sending: Write[Deleted] | None = None
    finished = 0
    try:
        for resource, object_name, uid in targets:
            one = partial(
                delete, conn, resource, object_name, propagation="Background", uid=uid or None
            )
            sending = Write(resource.ref(object_name), one)
            gone = sending.start().result()
            sending = None
            finished += 1
            if gone.replaced:
                report(replaced_line(resource.ref(object_name)))
            elif not gone.already_gone:
                report(f"{resource.ref(object_name)} deleted")
    except Interrupted as e:
        e.progress = "it " + cut_short("deleted", finished, len(targets), "", sending, e)
        rest = targets[finished:]
        if sending is not None and (sending.landed or not sending.answered):
            rest = rest[1:]  # deleted, or said to be on its way
        left = [resource.ref(name) for resource, name, _ in rest]
        if left:
            e.progress += f"; {some(left)} {'is' if len(left) == 1 else 'are'} left"
        raise


def _copy_left(kind: str, name: str, copied_from: str) -> str:
    return (
        f"{kind}/{name} left: not made by apply (its {NAME_ANNOTATION} annotation "
        f"names {name_or_invalid(copied_from)!r}, a copy)"
    )


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name"))


TIE = 1.5  # seconds for a failure's second to pass on the server, and its writes to come
ENDS = (SUCCEEDED, FAILED, AMBIGUOUS, DELETING)  # the states `wait` ends in


class Store:
    """The objects of one resource as the list and the watch have told of them, by name;
    `last`, each object's last state, kept once it is gone."""

    def __init__(self, listed: Iterable[Mapping[str, Any]]) -> None:
        self.objects = {_name(o): o for o in listed}
        self.last = dict(self.objects)

    def apply(self, event: Event) -> None:
        if event.type == "RELIST":
            self.objects = {_name(o): o for o in event.objects}
            self.last.update(self.objects)
        elif event.type == "DELETED" and event.object is not None:
            self.objects.pop(_name(event.object), None)
        elif event.type in ("ADDED", "MODIFIED") and event.object is not None:
            self.objects[_name(event.object)] = event.object
            self.last[_name(event.object)] = event.object


def _uid(obj: Mapping[str, Any]) -> str:
    return str(metadata_of(obj).get("uid") or "")


class Follower:
    """A run's Jobs and pods, brought up to date event by event, and judged."""

    def __init__(
        self,
        name: str,
        namespace: str,
        jobs: Iterable[Mapping[str, Any]],
        pods: Iterable[Mapping[str, Any]],
        expected: Iterable[str] = (),
    ) -> None:
        self.name = name
        self.namespace = namespace
        self.stores = {"jobs": Store(jobs), "pods": Store(pods)}
        self.expected = dict.fromkeys(expected)  # the tasks known to have existed, in order
        self.restarts: dict[str, int] = {}  # the last count seen of each Job's task, by uid
        self.ended: dict[str, Mapping[str, Any]] = {}  # Job name -> the Job as seen ended
        # Job name -> its object, its pods and its task, as _task last judged them
        self.tasks: dict[str, tuple[Object, Sequence[Object], TaskStatus]] = {}
        self._keep_ends(self.stores["jobs"].objects.values())

    def take(self, plural: str, event: Event) -> None:
        """One event of the Jobs' watch ('jobs') or the pods' ('pods')."""
        self.stores[plural].apply(event)
        if plural == "jobs":
            self._keep_ends(event.objects if event.type == "RELIST" else [event.object])

    def _keep_ends(self, jobs: Iterable[Mapping[str, Any] | None]) -> None:
        for job in jobs:
            if job is None or is_gone(job):
                continue
            if condition(job, "Complete") or condition(job, "Failed"):
                self.ended[_name(job)] = job

    def judge(self, nodes: Mapping[str, str] | None = None) -> Run:
        """The run as `status` would judge these objects, each Job seen ended judged so."""
        run = self._judge_whole(nodes)
        return self._failures_seen(run) if run.state == FAILED else run

    def _failures_seen(self, run: Run) -> Run:
        """The failed run, its failed tasks whose pods are gone given the exit codes seen."""
        tasks = list(run.tasks)
        seen_pods: dict[str, list[Mapping[str, Any]]] | None = None  # by Job, read once if asked
        changed = False
        for i, task in enumerate(tasks):
            if task.state != FAILED or not task.finished or task.exit_code is not None:
                continue
            job = self.stores["jobs"].objects.get(task.job) or self.ended.get(task.job)
            if job is None:
                continue
            if seen_pods is None:
                seen_pods = pods_by_job(self.stores["pods"].last.values())
            seen = last_failure(seen_pods.get(_uid(job), []))
            if seen.exit_code is not None:
                tasks[i] = replace(
                    task, exit_code=seen.exit_code, failure_reason=seen.reason,
                    failure_deleted=seen.deleted,
                )  # fmt: skip
                changed = True
        return replace(run, tasks=tuple(tasks)) if changed else run

    def _judge_whole(self, nodes: Mapping[str, str] | None) -> Run:
        """run_state over every Job and pod, each Job seen ended standing in for itself."""
        jobs = dict(self.stores["jobs"].objects)
        pods = self.stores["pods"].objects
        kept: dict[str, Mapping[str, Any]] = {}
        for name, job in self.ended.items():
            now = jobs.get(name)
            if now is None or (is_gone(now) and _uid(now) == _uid(job)):
                jobs[name] = job  # deleted since its end was seen: it ended so
                mine = pods_by_job(self.stores["pods"].last.values()).get(_uid(job), [])
                kept.update({_name(pod): pod for pod in mine})  # its pods last seen
        every = {**kept, **pods} if kept else pods
        return run_state(
            self.name, self.namespace, jobs.values(), every.values(), self.expected, nodes,
            self._task,
        )  # fmt: skip

    def _task(
        self, job: Object, pods: Sequence[Object], nodes: Mapping[str, str] | None
    ) -> TaskStatus:
        """task_of, worked out again only for a Job whose object or pods have changed since it
        last was (a batch of events changes a few of 1000), or whose pod's node is Unknown (how
        that node is, `nodes`, may have changed). A task whose pod is gone keeps the count of
        restarts seen while it was there."""
        name = _name(job)
        was = self.tasks.get(name)
        if was is not None and was[0] is job and was[1] == pods and was[2].state != UNKNOWN:
            return was[2]
        task = task_of(job, pods, nodes)
        key = task.uid or task.job
        if task.restarts is not None:
            self.restarts[key] = task.restarts
        elif key in self.restarts:
            task = replace(task, restarts=self.restarts[key])
        self.tasks[name] = (job, pods, task)
        return task

    def remember(self, run: Run) -> None:
        """The tasks seen: one whose Job is deleted later is known to have existed."""
        self.expected.update(dict.fromkeys(task.task for task in run.tasks))

    def unknown_nodes(self) -> set[str]:
        """The nodes of the pods in phase Unknown."""
        return unknown_nodes(self.stores["pods"].objects.values())


def unknown_nodes(pods: Iterable[Mapping[str, Any]]) -> set[str]:
    """The nodes of pods in phase Unknown, whose condition says why."""
    return {
        str(node)
        for pod in pods
        if (node := (pod.get("spec") or {}).get("nodeName"))
        and (pod.get("status") or {}).get("phase") == "Unknown"
    }


def verdict(run: Run, settled: bool) -> Run | None:
    """The run's end as `wait` tells it, or None while it may still change (see the module)."""
    if run.state in (SUCCEEDED, AMBIGUOUS, DELETING):
        return run
    if run.state != FAILED:
        return None
    if settled or run.reason == DELETED:
        return run
    # No time to wait for, and the pod's own failure known (not only BackoffLimitExceeded).
    task = next((t for t in run.tasks if t.task == run.decided_by), None)
    return run if run.decided_at is None and task is not None and not task.reason_from_job else None
