"""Deleting a run: each of its Jobs and Services, and waiting until its Jobs are gone.

Only objects that carry the run's labels are deleted (objects.py lists them by those
labels, and each is checked again here), one request each, Jobs first so that no new
pod starts meanwhile. The first refusal stops the deletion: what was deleted before it
has been reported, and the error says how far it got.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from simpletfjob.errors import ClusterError
from simpletfjob.kube.objects import Propagation, delete
from simpletfjob.kube.request import Deadline
from simpletfjob.kube.resources import JOBS, Resource
from simpletfjob.options.table import format_duration
from simpletfjob.runs.objects import RunObjects, belongs_to, list_run, object_name, run_selector

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection


class JobsRemain(ClusterError):
    """The run's Jobs (or Services) were still there when the time to wait for them ran out."""


def delete_run(
    conn: Connection,
    run: RunObjects,
    propagation: Propagation,
    report: Callable[[str], None],
) -> int:
    """Delete every object of the run, reporting each as kubectl does; how many were deleted.

    An object already gone (deleted meanwhile) is not reported. The first failure raises,
    naming how many objects were deleted before it.
    """
    total = len(run.jobs) + len(run.services)
    done = 0
    for resource, obj in run.objects():
        name = object_name(obj)
        if not belongs_to(obj, run.name):  # the server's selector is not trusted to delete
            raise ClusterError(
                f"{resource.ref(name)} was listed as part of run {run.name!r} but lacks its "
                "labels; nothing more was deleted"
            )
        try:
            gone = delete(conn, resource, name, namespace=run.namespace, propagation=propagation)
        except ClusterError as e:
            if not done:
                raise
            raise ClusterError(
                f"{e}; {done} of {total} objects of run {run.name!r} were deleted before it "
                "(listed above)"
            ) from e
        done += 1
        if not gone.already_gone:
            report(f'{resource.qualified} "{name}" deleted')
    return done


def wait_until_gone(
    conn: Connection, run: str, timeout: float, resources: Sequence[Resource] = (JOBS,)
) -> None:
    """Return once no object of the run's `resources` is left in the namespace; watched, not polled.

    A Job deleted in the foreground stays (with a deletionTimestamp) until the garbage
    collector has deleted its pods; a pod on a node stays until its kubelet has stopped it.
    """
    deadline = Deadline.after(timeout)
    for resource in resources:
        left = _wait_for_none(conn, resource, run, deadline)
        if left:
            shown = ", ".join(left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
            one = len(left) == 1
            why = (
                f"; their pods may still be stopping, see kubectl get pods -l {run_selector(run)}"
                if resource is JOBS
                else ""
            )
            raise JobsRemain(
                f"run {run!r} in namespace {conn.namespace}: {len(left)} "
                f"{resource.singular if one else resource.plural} {'is' if one else 'are'} still "
                f"there after {format_duration(timeout)} ({shown}){why}"
            )


def _wait_for_none(conn: Connection, resource: Resource, run: str, deadline: Deadline) -> list[str]:
    """Watch the run's objects of one resource until none is left; those left at the deadline."""
    from simpletfjob.kube.watch import watch

    present: set[str] | None = None
    for event in watch(conn, resource, label_selector=run_selector(run), deadline=deadline):
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
    if present is None:  # the time was up before the first list: look once more
        listed = list_run(conn, run)
        present = {object_name(o) for o in (listed.jobs if resource is JOBS else listed.services)}
    return sorted(resource.ref(name) for name in present)
