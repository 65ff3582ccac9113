"""A run on the cluster: its Jobs and pods read by label, followed through watches, cleaned up.

`status` reads with two lists (Jobs, pods), made at the same time, whatever the number of
tasks. `wait` lists each once, then watches both from the lists' resourceVersions (a dropped
watch resumes from where it was; on 410 it re-lists, in kube/watch.py); it never polls.

state.py judges what is read here.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
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
from simpletfjob.runs.follower import TIE, Follower, unknown_nodes, verdict
from simpletfjob.runs.objects import NoRunError, named_tasks, run_selector
from simpletfjob.runs.state import FAILED, Run, changes, run_state
from simpletfjob.runs.taskstate import Object, labels_of, name_or_invalid

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection

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
    follower.py judges. A failure is told once its second has passed (follower.TIE), the
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
        from simpletfjob.runs.causes import node_condition

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
