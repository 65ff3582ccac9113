"""Deleting a run, and what `apply --replace` checks before it deletes anything.

Only objects carrying the run's labels are deleted (each checked again here: the server's
selector is not trusted), one request each, `in_flight` at a time, the Jobs before the
Services so that no new pod starts meanwhile, and each only if it is still the object listed
(its uid as a precondition). The first refusal stops the deletion and says how far it got.

Deleting the old run and failing to apply the new one would leave nothing running, so before
the first delete `check_replace` has the server judge both halves: each delete as a dry run
(RBAC, admission, a name taken since), and each new object as a dry run of the very apply,
under a temporary name. Under its own name it would be judged against the old object, still
there; a PATCH takes no generateName, so the name is made as the server's generator makes one
(its last five characters random), the same length, so that the name checks judge it as the
real one. Left to the real apply: a quota the old run fills ("exceeded quota", skipped) and a
Service's fixed cluster IP or node port (left to the server to choose in the check).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from simpletfjob.errors import ClusterError, Interrupted, NoRunError
from simpletfjob.kube.inflight import Sending, Write, cut_short
from simpletfjob.kube.objects import Deleted, Propagation, apply, delete
from simpletfjob.kube.request import ApiError, Deadline
from simpletfjob.kube.resources import JOBS, SERVICES, Resource
from simpletfjob.options.rules import format_duration
from simpletfjob.runs.objects import (
    Manifest,
    RunObjects,
    belongs_to,
    find_run,
    object_name,
    run_selector,
    scope_flags,
    some,
)

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection


class JobsRemain(ClusterError):
    """The run's Jobs (or Services) were still there when the time to wait for them ran out."""


class Deletion(NamedTuple):
    """What a deletion did: the objects it deleted, and those left alone as replaced."""

    deleted: list[tuple[Resource, str]]
    replaced: list[str]  # 'job.batch/x': another object took the name after the list
    held: list[str]  # Jobs deleted but still there (a finalizer, a Foreground delete)

    def count(self, resource: Resource) -> int:
        return sum(r is resource for r, _ in self.deleted)


def deleted_line(run: RunObjects, done: Deletion, waited: bool) -> str:
    """`delete`'s last line: 'simpletfjob: deleted run mnist in namespace ml (3 objects: 2 jobs,
    1 service) and its Jobs are gone'."""
    deleted = len(done.deleted)
    jobs, services = done.count(JOBS), done.count(SERVICES)
    left = len(done.replaced)
    alone = f"; {left} left alone, replaced since listed" if left else ""
    return (
        f"simpletfjob: deleted run {run.name} in namespace {run.namespace} ({deleted} "
        f"{'object' if deleted == 1 else 'objects'}: "
        f"{jobs} {'job' if jobs == 1 else 'jobs'}, {services} "
        f"{'service' if services == 1 else 'services'}{alone})"
        + (" and its Jobs are gone" if waited else "")
    )


def replaced_line(ref: str) -> str:
    return f"{ref} was replaced since it was listed; left alone"


def delete_run(
    conn: Connection,
    run: RunObjects,
    propagation: Propagation,
    report: Callable[[str], None],
    deadline: Deadline | None = None,
) -> Deletion:
    """Delete every object of the run, reporting each as kubectl does.

    An object that took a listed name since (another uid) is left alone and reported; one
    already gone is not reported. A failure or an interruption says how many were deleted
    before it. `deadline` bounds each delete (by default, the connection's).
    """
    total = len(run.jobs) + len(run.services)
    done = Deletion([], [], [])
    # The Jobs first, so that no new pod starts meanwhile; then the Services.
    stages: tuple[list[Write[Deleted]], list[Write[Deleted]]] = ([], [])
    names: dict[int, tuple[Resource, str]] = {}  # each write's object
    for resource, obj in run.objects():
        name = object_name(obj)
        if not belongs_to(obj, run.name):  # the server's selector is not trusted to delete
            raise ClusterError(
                f"{resource.ref(name)} was listed as part of run {run.name!r} but lacks its "
                "labels; nothing was deleted"
            )
        uid = str((obj.get("metadata") or {}).get("uid") or "") or None
        send = partial(
            delete,
            conn,
            resource,
            name,
            namespace=run.namespace,
            propagation=propagation,
            uid=uid,
            deadline=deadline,
        )
        write = Write(resource.ref(name), send)
        names[id(write)] = (resource, name)
        stages[0 if resource is JOBS else 1].append(write)
    sending: Sending[Deleted] | None = None  # the deletes whose requests are out, if any

    def said(write: Write[Deleted], gone: Deleted) -> None:
        resource, name = names[id(write)]
        if gone.replaced:
            done.replaced.append(resource.ref(name))
            report(replaced_line(resource.ref(name)))
            return
        done.deleted.append((resource, name))
        if gone.object is not None and resource is JOBS:
            done.held.append(resource.ref(name))
        if not gone.already_gone:
            report(f'{resource.qualified} "{name}" deleted')

    try:
        for stage in stages:
            sending = Sending(stage, conn.settings.in_flight)
            for write, gone in sending:
                said(write, gone)
            sending = None
    except ClusterError as e:
        if sending is not None:
            for write in sending.settle(conn.settings.deadline):
                said(write, write.result())
        if not done.deleted:
            raise
        raise ClusterError(
            f"{e}; {len(done.deleted)} of {total} objects of run {run.name!r} were deleted "
            "before it (listed above)"
        ) from e
    except Interrupted as e:
        of = f" of run {run.name!r} in namespace {run.namespace}"
        # Those counted already, or found replaced, are not counted again.
        counted = set(done.deleted)
        out = (
            [w for w in sending.out() if names[id(w)] not in counted and not _replaced(w)]
            if sending is not None
            else None
        )
        e.progress = cut_short("deleted", len(done.deleted), total, of, out, e)
        e.detail = (
            f"{e.progress}; delete the rest with simpletfjob delete {run.name} {scope_flags(conn)}"
        )
        raise
    return done


def _replaced(write: Write[Deleted]) -> bool:
    return write.landed and write.result().replaced


def delete_named(
    conn: Connection,
    name: str,
    *,
    wait: bool,
    timeout: float,
    ignore_not_found: bool,
    report: Callable[[str], None],
) -> tuple[RunObjects, Deletion] | None:
    """`delete RUN`: the run found, deleted (Background) and with `wait` waited for; what was listed
    and done. None for no such run with `ignore_not_found`, as kubectl; else NoRunError."""
    try:
        run = find_run(conn, name)
    except NoRunError:
        if ignore_not_found:
            return None
        raise
    done = delete_run(conn, run, "Background", report)
    # A Job the server deleted at once answers with a Status, not the Job: nothing to watch for.
    if wait and done.held:
        wait_until_gone(conn, run.name, timeout, report=report)
    return run, done


def wait_until_gone(
    conn: Connection,
    run: str,
    timeout: float,
    resources: Sequence[Resource] = (JOBS,),
    report: Callable[[str], None] = lambda line: None,
) -> None:
    """Return once no object of the run's `resources` is left in the namespace; watched, not polled.

    A Job deleted in the foreground stays until the garbage collector has deleted its pods, and
    a pod until its kubelet has stopped it. An API server that goes away meanwhile is waited for
    until `timeout`, with a line to `report` when it goes and one when it is back.
    """
    from simpletfjob.kube.outage import riding_out

    deadline = Deadline.after(timeout)
    until = f"the --timeout ({format_duration(timeout)})"
    with riding_out(conn, deadline, report, until) as ride:
        for resource in resources:
            left = _wait_for_none(conn, resource, run, deadline)
            if ride.away:
                raise JobsRemain(
                    f"run {run!r} in namespace {conn.namespace}: its {resource.plural} were not "
                    f"seen gone within {format_duration(timeout)}: {ride.note()}"
                )
            if left:
                one = len(left) == 1
                why = (
                    f"; their pods may still be stopping, see kubectl get pods -l {run_selector(run)} "
                    f"{scope_flags(conn)}"
                    if resource is JOBS
                    else ""
                )
                raise JobsRemain(
                    f"run {run!r} in namespace {conn.namespace}: {len(left)} "
                    f"{resource.singular if one else resource.plural} {'is' if one else 'are'} "
                    f"still there after {format_duration(timeout)} ({some(left)}){why}"
                )


def _wait_for_none(conn: Connection, resource: Resource, run: str, deadline: Deadline) -> list[str]:
    """Watch the run's objects of one resource until none is left; those left at the deadline."""
    from simpletfjob.kube.watch import watch

    present: set[str] | None = None
    with watch(conn, resource, label_selector=run_selector(run), deadline=deadline) as events:
        for event in events:
            if event.type == "RELIST":
                present = {object_name(obj) for obj in event.objects}
            elif present is not None and event.object is not None and event.type != "BOOKMARK":
                name = object_name(event.object)
                if event.type == "DELETED":
                    present.discard(name)
                else:
                    present.add(name)
            if present is not None and not present:
                return []
    if conn.ride is not None and conn.ride.away:
        return []  # the caller says what is unknown
    if present is None:  # the time was up before the first list: look once more
        from simpletfjob.kube.lists import list_objects

        listed = list_objects(conn, resource, label_selector=run_selector(run)).items
        present = {object_name(o) for o in listed if belongs_to(o, run)}
    return sorted(resource.ref(name) for name in present)


# kube-apiserver's name generator: lowercase consonants and digits, no vowels.
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SUFFIX = 5
NOTHING_DONE = "--replace deleted nothing, and nothing of this render was applied"


def temporary_name(name: str, taken: set[str]) -> str:
    """A name of the same length (five more if it has five or fewer), in no use in `taken`."""
    while True:
        suffix = "".join(random.choices(_ALPHABET, k=_SUFFIX))
        made = name[:-_SUFFIX] + suffix if len(name) > _SUFFIX else name + suffix
        if made not in taken:
            taken.add(made)
            return made


def check_replace(
    conn: Connection, old: RunObjects, wanted: Sequence[Manifest], *, force: bool
) -> dict[tuple[str, str], dict[str, Any]]:
    """Raise the first thing that would stop --replace half-way; else each new object's dry run."""
    for resource, obj in old.objects():
        name = object_name(obj)
        uid = str((obj.get("metadata") or {}).get("uid") or "") or None
        try:
            gone = delete(conn, resource, name, propagation="Foreground", dry_run=True, uid=uid)
        except ClusterError as e:
            raise ClusterError(f"{e} (server dry run); {NOTHING_DONE}") from e
        if gone.replaced:
            raise ClusterError(
                f"{resource.ref(name)} was replaced since it was listed, so the run changed "
                f"while --replace looked at it; {NOTHING_DONE}: apply again"
            )
    taken = {object_name(obj) for _, obj in old.objects()} | {m.name for m in wanted}
    made: dict[tuple[str, str], dict[str, Any]] = {}
    for m in wanted:
        name = temporary_name(m.name, taken)
        probe = _probe(m.body, name)
        try:
            applied = apply(
                conn, m.resource, probe, namespace=conn.namespace, force=force, dry_run=True,
                live=None,
            )  # fmt: skip
        except ApiError as e:
            if e.status == 403 and "exceeded quota" in str(e):
                continue  # the old run's objects count until they are gone
            said = str(e).replace(name, m.name)
            raise ClusterError(f"{said} (server dry run); {NOTHING_DONE}") from e
        made[m.key] = applied.object
    return made


def _probe(body: dict[str, Any], name: str) -> dict[str, Any]:
    """The manifest under another name, without what only the old object may hold now."""
    probe = copy.deepcopy(body)
    probe["metadata"]["name"] = name
    spec = probe.get("spec")
    if probe.get("kind") == "Service" and isinstance(spec, dict):
        if spec.get("clusterIP") not in (None, "None"):
            spec.pop("clusterIP", None)
            spec.pop("clusterIPs", None)
        for port in spec.get("ports") or ():
            if isinstance(port, dict):
                port.pop("nodePort", None)
    return probe
