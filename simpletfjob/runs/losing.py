"""An elastic run's worker whose pod its node refused, or whose node was lost past
--node-grace: let go, as a worker whose Job failed is (elastic.py), not a whole-run restart.

A Job whose pod its node refused fails by itself only with backoffLimit 0 (else the Job
controller makes another pod, which may be refused again), and a Job on a lost node never
fails by itself: its pod stays Running, or Unknown, on a node that no longer answers. So `run`
ends the task itself, when the framework's rule (`Framework.lost`) lets the run train on
without it: it sets the Job's parallelism to 0, so that no pod of it runs or is made again,
and annotates it `simpletfjob/lost` with the reason (a server-side apply of those two fields
alone, under a field manager of their own, so that a later apply of the run's manifests does
not take them back). `status` and `wait` read the annotation: the task is Lost. On a lost node
its pods are deleted at once (grace 0, as `kubectl delete --force`), as a restart deletes
them: the node will not confirm their end.

A loss that would leave fewer than M workers, or the rendezvous host, is not let go: the cause
stays the run's, and `run` restarts the whole run (or ends) as for any other failure.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from simpletfjob.errors import ClusterError
from simpletfjob.identity import LOST_ANNOTATION
from simpletfjob.runs.classify import NODE_LOST, REFUSED, Cause
from simpletfjob.runs.taskstate import FAILED, LOST

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection
    from simpletfjob.runs.state import Run

FIELD_MANAGER = "simpletfjob-lost"


def losable(run: Run, cause: Cause) -> bool:
    """Whether the run trains on without the tasks of `cause`: a refusal or a lost node, in an
    elastic run, of tasks the framework's rule lets it lose with those it has lost already."""
    if run.min_workers is None or cause.kind not in (REFUSED, NODE_LOST) or not cause.tasks:
        return False
    from simpletfjob.frameworks import framework

    gone = [t.task for t in run.tasks if t.finished and t.state in (FAILED, LOST)]
    names = [t.task for t in run.tasks]
    lost = framework(run.framework).lost([*gone, *cause.tasks], names, run.min_workers)
    return set(cause.tasks) <= lost


def reason(cause: Cause) -> str:
    """The lost tasks' reason, without their names: 'refused by node h3: OutOfcpu',
    'node h3 NotReady for more than 1m'."""
    if cause.kind == REFUSED:
        return f"refused by node {cause.node}: {cause.reason}"
    return f"node {cause.node} {cause.reason}"


def let_go(conn: Connection, run: Run, cause: Cause, pods: Iterable[Mapping[str, Any]]) -> None:
    """End the tasks of `cause` as lost (the module's docstring says how)."""
    from simpletfjob.kube.objects import apply, delete
    from simpletfjob.kube.resources import JOBS, PODS

    jobs = {t.task: t.job for t in run.tasks}
    why = reason(cause)
    for task in cause.tasks:
        manifest = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": jobs[task], "annotations": {LOST_ANNOTATION: why}},
            "spec": {"parallelism": 0},
        }
        apply(conn, JOBS, manifest, field_manager=FIELD_MANAGER, force=True)
    if cause.kind != NODE_LOST:
        return
    names = {jobs[task] for task in cause.tasks}
    for pod in pods:
        metadata = pod.get("metadata") or {}
        if (metadata.get("labels") or {}).get("job-name") in names:
            # gone already, or not ours to delete: the Job's parallelism 0 holds it anyway
            with contextlib.suppress(ClusterError):
                delete(conn, PODS, str(metadata.get("name")), grace=0)
