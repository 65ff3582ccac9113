"""A run read and followed through watches, and `wait`'s judgement of it as its events come.

A run on the cluster: its Jobs and pods read by label, followed through watches, cleaned up.

`status` reads with two lists (Jobs, pods), made at the same time, whatever the number of
tasks. `wait` lists each once, then watches both from the lists' resourceVersions (a dropped
watch resumes from where it was; on 410 it re-lists, in kube/watch.py); it never polls.

state.py judges what is read here.

`wait`'s judgement of a run as its events come: pure, with no server and no clock.

`Follower` keeps the run's Jobs and pods as the lists and then the watches told of them,
and judges the run with state.run_state, as `status` judges what it lists: both say the
same of the same objects. `verdict` says whether `wait` may end on that judgement:

- **Succeeded**, **Ambiguous** (a task that several Jobs claim) and **Deleting** end it at
  once; so does **Failed** when a deciding task is gone (reason `deleted`).
- **Failed** otherwise ends it only once the failure's second has passed on the server
  (`settled`), which also gives the failed pod's news time to come through its watch (the
  Job's condition alone says only BackoffLimitExceeded): a deciding task that completes in the same second wins the tie, and a failure
  in the same second that comes first in role order is the one named. The Job controller
  stamps each Job status it writes with the time of the write, and the Jobs watch brings
  the writes in the order they were made, so a success stamped with an earlier second than
  a failure always comes first, and once the failure's second has passed every write
  stamped with it has been made. watch.follow waits TIE seconds after it first sees the
  failure (the server's clock was at least at that second then), taking events meanwhile.

A task's restarts that can no longer be counted (its pod gone: taskstate.py) are the count
last seen while following, so `wait`, `run` and `status -w` keep what they saw. Likewise a
failed task's exit code, once its pods no longer tell it (the Job controller deletes an
OnFailure pod at the backoff limit): the code its pods showed, which the cause carries.

A Job's end, once seen, is kept (`Follower.ended`): a Job seen Complete or Failed that is
then deleted (by ttlSecondsAfterFinished, which may come within the failure's second, or
by hand) is judged as it ended, with the pods seen with it, not as a task whose end was
not seen. `run` restarts on that failure as on any other.

`status` needs none of this: what it lists is the final word on what has happened so far.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from simpletfjob.errors import Interrupted
from simpletfjob.identity import JOB_LABEL, NAME_ANNOTATION
from simpletfjob.kube.inflight import Write, cut_short
from simpletfjob.kube.lists import ObjectList, list_objects
from simpletfjob.kube.objects import Deleted, delete
from simpletfjob.kube.request import Action, Deadline, request
from simpletfjob.kube.resources import JOBS, NODES, PODS, SERVICES
from simpletfjob.kube.watch import Watches
from simpletfjob.runs.delete import replaced_line
from simpletfjob.runs.objects import NoRunError, named_tasks, run_selector
from simpletfjob.runs.state import (
    AMBIGUOUS,
    DELETED,
    DELETING,
    FAILED,
    SUCCEEDED,
    Run,
    changes,
    is_gone,
    run_state,
)
from simpletfjob.runs.taskstate import (
    Object,
    condition,
    labels_of,
    last_failure,
    metadata_of,
    name_or_invalid,
    node_condition,
    pods_by_job,
)

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection
    from simpletfjob.kube.watch import Event


MANAGER = "simpletfjob"
Seen = Callable[[Sequence[Object], Sequence[Object]], None]  # a run's Jobs and pods, as listed


def _both(
    conn: Connection,
    name: str | None,
    deadline: Deadline | None = None,
    namespace: str | None = None,
) -> tuple[ObjectList, ObjectList]:
    """The Jobs and the pods of the run (or of every run), listed at the same time.

    `namespace` '' lists them in every namespace (None: the connection's).

    The pods in a thread, the Jobs in the caller's: an interrupt goes up from there at
    once, never into the other thread's errors while the pods' list rides out an outage.
    """
    found: list[ObjectList] = []
    failed: list[BaseException] = []
    within = None if deadline is None else deadline.sooner(conn.settings.deadline)

    def read_pods() -> None:
        try:
            found.append(
                list_objects(
                    conn,
                    PODS,
                    namespace=namespace,
                    label_selector=run_selector(name),
                    deadline=within,
                )
            )
        except BaseException as e:  # handed to the caller, in its thread
            failed.append(e)

    pods = threading.Thread(target=read_pods, daemon=True)
    pods.start()
    jobs = list_objects(
        conn, JOBS, namespace=namespace, label_selector=run_selector(name), deadline=within
    )
    pods.join()
    if failed:
        raise failed[0]
    return jobs, found[0]


def list_jobs_and_pods(conn: Connection, name: str) -> tuple[Sequence[Object], Sequence[Object]]:
    """The run's Jobs and pods as they are now (two lists, made at the same time)."""
    jobs, pods = _both(conn, name)
    return jobs.items, pods.items


def read_run(conn: Connection, name: str, seen: Seen | None = None) -> Run:
    """The run as it is now; `NoRunError` when none of its Jobs is there. `seen` is given its
    Jobs and pods as soon as they are listed (status's progress: reporting.Tail)."""
    jobs, pods = _both(conn, name)
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
    jobs, pods = _both(conn, None, namespace="" if every_namespace else None)
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
    """The run now, then again after each change, until it has ended or the deadline has passed.

    One list of Jobs and one of pods, then a watch of each from where its list was read;
    the Follower judges. A failure is told once its second has passed (TIE), the
    events of that time taken. A deadline of 0 s checks once, as `kubectl wait --timeout 0s`
    does: the lists are not cut short by it, so that a run that has ended is told as ended.
    `seen` is given the Jobs and pods each run was judged from, before it is yielded
    (`logs -f` reads the pods). With `tick`, the run is yielded again (changed or not) when
    no event has come for that many seconds: `run` checks the nodes then. With `every`, it is
    yielded after each batch of events, changed or not (`logs -f` reads every pod's change).
    """

    def tell() -> None:
        if seen is not None:
            seen(
                list(follower.stores["jobs"].objects.values()),
                list(follower.stores["pods"].objects.values()),
            )

    once = deadline is not None and deadline.seconds <= 0
    jobs, pods = _both(conn, name, None if once else deadline)
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
    """How the nodes of pods in phase Unknown are: each node read once (a get), when first asked.

    Reading nodes needs `get` on nodes, cluster-wide; a user without it (403) gets
    `unreachable (cannot get nodes: 403 Forbidden)` for the node, so that the task's reason
    says why no more is known, and the command goes on. No node is asked for again.
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
    """Delete what `cleanup` says (running: the tasks not finished; all: the run), Background.

    Background propagation: the Job goes at once and the garbage collector removes its pods;
    the pods of finished tasks stay, with their Jobs, for `kubectl logs`. Each delete names
    the uid of the object as it was read: one that took the name since is left alone, and
    reported.

    Only what the run's apply made is deleted: an object whose `simpletfjob/name`
    annotation names another object is a copy (made under another name with the run's
    labels), and is left, with a line that says so. An object without the annotation (a
    run applied by an older version) is taken as made by apply: a copy of it cannot be told
    apart, but a copy that claims a task of the run makes it Ambiguous, and then nothing is
    cleaned up at all.
    """
    if cleanup == "none":
        return
    chosen = [task for task in run.tasks if cleanup == "all" or not task.finished]
    if not chosen and cleanup != "all":
        return
    jobs = [task.job for task in chosen if task.applied]
    for task in chosen:
        if not task.applied:
            report(_left("job.batch", task.job, task.copied_from))
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
            report(_left("service", _name(s), own))
        else:
            doomed.append(s)
    targets = [(JOBS, name, uids.get(name, "")) for name in jobs] + [
        (SERVICES, _name(s), str((s.get("metadata") or {}).get("uid") or "")) for s in doomed
    ]
    sending: Write[Deleted] | None = None
    finished = 0
    try:
        for resource, object_name, uid in targets:
            # Only the object that was read: one that took its name since is not the run's.
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
            shown = ", ".join(left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
            e.progress += f"; {shown} {'is' if len(left) == 1 else 'are'} left"
        raise


def _left(kind: str, name: str, copied_from: str) -> str:
    return (
        f"{kind}/{name} left: not made by apply (its {NAME_ANNOTATION} annotation "
        f"names {name_or_invalid(copied_from)!r}, a copy)"
    )


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name"))


# Seconds a failure waits for its second to pass on the server: one second, and half a
# second for the writes stamped with it to come through the watch.
TIE = 1.5
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
        self.expected = list(expected)
        self._expected = set(self.expected)
        self.restarts: dict[str, int] = {}  # the last count seen of each Job's task, by uid
        self.ended: dict[str, Mapping[str, Any]] = {}  # Job name -> the Job as seen ended
        self._keep_ends(self.stores["jobs"].objects.values())
        self.unknown = Counter(unknown_node(pod) for pod in self.stores["pods"].objects.values())
        self.unknown.pop("", None)

    def take(self, plural: str, event: Event) -> None:
        """One event of the Jobs' watch ('jobs') or the pods' ('pods')."""
        store = self.stores[plural]
        if plural == "pods":
            self._count_unknown(store.objects, event)
        store.apply(event)
        if plural == "jobs":
            self._keep_ends(event.objects if event.type == "RELIST" else [event.object])

    def _keep_ends(self, jobs: Iterable[Mapping[str, Any] | None]) -> None:
        for job in jobs:
            if job is None or is_gone(job):
                continue
            if condition(job, "Complete") or condition(job, "Failed"):
                self.ended[_name(job)] = job

    def judge(self, nodes: Mapping[str, str] | None = None) -> Run:
        """The run as `status` would judge these objects (run_state over every Job and pod),
        each Job seen ended judged so."""
        run = self._judge_whole(nodes)
        return self._failures_seen(run) if run.state == FAILED else run

    def _failures_seen(self, run: Run) -> Run:
        """A failed run whose failed tasks' pods no longer tell how they failed (the Job
        controller deletes an OnFailure pod at the backoff limit, before it marks the Job
        failed), with the exit codes those pods showed while they were there: its cause
        carries them (classify.py). Its lines say what they said."""
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
                kept.update(self._pods_of(job))
        every = {**kept, **pods} if kept else pods
        run = run_state(
            self.name, self.namespace, jobs.values(), every.values(), self.expected, nodes
        )
        tasks = []
        for task in run.tasks:
            key = task.uid or task.job
            if task.restarts is not None:
                self.restarts[key] = task.restarts
            elif key in self.restarts:  # its pod is gone: the count seen while it was there
                task = replace(task, restarts=self.restarts[key])
            tasks.append(task)
        return replace(run, tasks=tuple(tasks))

    def _pods_of(self, job: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        """The pods last seen of a Job that is gone, gone with it or not."""
        mine = pods_by_job(self.stores["pods"].last.values()).get(_uid(job), [])
        return {_name(pod): pod for pod in mine}

    def remember(self, run: Run) -> None:
        """The tasks seen: one whose Job is deleted later is known to have existed."""
        for task in run.tasks:
            if task.task not in self._expected:
                self.expected.append(task.task)
                self._expected.add(task.task)

    def unknown_nodes(self) -> set[str]:
        """The nodes of the pods in phase Unknown (counted as the pods' events come)."""
        return {node for node, count in self.unknown.items() if node and count}

    def _count_unknown(self, pods: Mapping[str, Mapping[str, Any]], event: Event) -> None:
        """The pods in phase Unknown on each node, as the event changes them (before the store
        takes it)."""
        if event.type == "RELIST":
            self.unknown = Counter(unknown_node(pod) for pod in event.objects)
            return
        if event.object is None:
            return
        was = pods.get(_name(event.object))
        if was is not None:
            self.unknown[unknown_node(was)] -= 1
        if event.type in ("ADDED", "MODIFIED"):
            self.unknown[unknown_node(event.object)] += 1
        self.unknown.pop("", None)


def unknown_nodes(pods: Iterable[Mapping[str, Any]]) -> set[str]:
    """The nodes of pods in phase Unknown, whose condition says why."""
    return {node for node in map(unknown_node, pods) if node}


def unknown_node(pod: Mapping[str, Any]) -> str:
    """The node of a pod in phase Unknown; '' for any other pod."""
    node = (pod.get("spec") or {}).get("nodeName")
    return str(node) if node and (pod.get("status") or {}).get("phase") == "Unknown" else ""


def verdict(run: Run, settled: bool) -> Run | None:
    """The run's end as `wait` tells it, or None while it may still change (see the module)."""
    if run.state in (SUCCEEDED, AMBIGUOUS, DELETING):
        return run
    if run.state != FAILED:
        return None
    if settled or run.reason == DELETED:
        return run
    # No time to wait for, and the pod's own failure known (the Job's condition, which can
    # come first through the other watch, says only BackoffLimitExceeded).
    task = next((t for t in run.tasks if t.task == run.decided_by), None)
    return run if run.decided_at is None and task is not None and not task.reason_from_job else None
