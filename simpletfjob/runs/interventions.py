"""What `run` does to a run it follows: a task restarted alone, a worker let go, an interrupt's end.

**A task restarted alone.** A role the training does not depend on (`Framework.independent`,
a TensorFlow evaluator) does not fail the run. When its Job fails, within the budget and when
--restart-on restarts its class, `run` deletes that Job alone (Foreground, until gone) and
applies the attempt's plan again; else the run goes on without it. It spends one of
--max-restarts, but the run's restart count (its annotations) counts whole-run restarts only.

**A worker let go.** A Job whose pod its node refused fails only with backoffLimit 0, and one
on a lost node never fails (its pod stays Running or Unknown). So when the framework's rule
(`Framework.lost`) lets an elastic run train on without it, `run` ends the task: parallelism 0
and the `simpletfjob/lost` annotation, by a server-side apply under a field manager of their
own so that a later apply does not take them back, and on a lost node its pods deleted at once
(grace 0: the node will not confirm their end). A loss that would leave fewer than M workers,
or the rendezvous host, stays the run's failure.

**An interrupt** (SIGINT, SIGTERM, SIGHUP): `run` keeps `Where` up to date, and `interrupted`
words the one line the process leaves for its phase (applying, following, deleting, going,
planning, ended, draining). With --on-interrupt delete, it first settles the writes in flight
(up to SETTLE: a Job whose apply was out may still be created), deletes every Job and Service
(Background) and lists again until none is left, for up to BUDGET, and the line says so only
once it is so. After the verdict it deletes only what the cleanup would: a finished task's Job
and logs stay. A second signal stops the deleting, and the line says how far it got.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from simpletfjob.errors import ClusterError, Interrupted, Unsettled
from simpletfjob.identity import LOST_ANNOTATION
from simpletfjob.kube.request import Deadline
from simpletfjob.kube.resources import JOBS, PODS, SERVICES
from simpletfjob.options.rules import format_duration
from simpletfjob.runs.classify import NODE_LOST, REFUSED, Cause
from simpletfjob.runs.taskstate import FAILED, LOST

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection
    from simpletfjob.runs.state import Run


GONE_WITHIN = 300.0  # seconds a task's Job is given to go when the run has no --timeout


@dataclass(eq=False)
class Aside:
    """What `run` did of the independent tasks that failed: restarts made, failures left."""

    made: int = 0  # restarts of a task alone; they spend the budget
    left: set[str] = field(default_factory=set)  # uids of failed Jobs reported and not restarted


def delete_task(conn: Connection, run: Run, task: str, deadline: Deadline | None) -> None:
    """Delete one task's Job (Foreground: its pods first) and return once it is gone."""
    from simpletfjob.kube.objects import delete, get

    found = next((t for t in run.tasks if t.task == task), None)
    if found is None:
        return
    delete(conn, JOBS, found.job, propagation="Foreground", uid=found.uid or None)
    until = deadline or Deadline.after(GONE_WITHIN)
    while True:
        now = get(conn, JOBS, found.job, missing_ok=True, deadline=until)
        if now is None or (now.get("metadata") or {}).get("uid") != found.uid:
            return
        if until.remaining() <= 0:
            raise ClusterError(
                f"job {found.job!r} of run {run.name!r} was not gone within "
                f"{GONE_WITHIN:.0f}s; its pods may still be stopping"
            )
        time.sleep(0.5)


FIELD_MANAGER = "simpletfjob-lost"


def losable(run: Run, cause: Cause) -> bool:
    """Whether an elastic run trains on without the tasks of `cause` (a refusal or a lost node), by
    the framework's rule, with those it has lost already."""
    if run.min_workers is None or cause.kind not in (REFUSED, NODE_LOST) or not cause.tasks:
        return False
    from simpletfjob.frameworks import framework

    gone = [t.task for t in run.tasks if t.finished and t.state in (FAILED, LOST)]
    names = [t.task for t in run.tasks]
    lost = framework(run.framework).lost([*gone, *cause.tasks], names, run.min_workers)
    return set(cause.tasks) <= lost


def reason(cause: Cause) -> str:
    """'refused by node h3: OutOfcpu', 'node h3 NotReady for more than 1m'."""
    if cause.kind == REFUSED:
        return f"refused by node {cause.node}: {cause.reason}"
    return f"node {cause.node} {cause.reason}"


def let_go(conn: Connection, run: Run, cause: Cause, pods: Iterable[Mapping[str, Any]]) -> None:
    """End the tasks of `cause` as lost (the module's docstring says how)."""
    from simpletfjob.kube.objects import apply, delete

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


Say = Callable[[str], None]

APPLYING, FOLLOWING, RESTARTING, GOING, REPLANNING, ENDED, DRAINING = (
    "applying",
    "following",
    "deleting for a restart",
    "waiting for the run to go, for a restart",
    "planning the restart",
    "ended",
    "draining the logs",
)
SETTLE = 30.0  # seconds a write in flight is given to be answered (an admission webhook's most)
BUDGET = 60.0  # seconds --on-interrupt delete is given, from the interrupt, to leave nothing


@dataclass
class Where:
    """Where `run` is: the phase, the attempt (restart N of most), and, once known, the end."""

    phase: str = APPLYING
    restart: int = 0
    most: int = 0
    cause: str = ""  # why the run is being restarted
    verdict: str = ""  # 'run mnist succeeded: worker-0 Succeeded'
    run: Run | None = None  # the run as it ended, for the cleanup


def interrupted(
    conn: Connection, name: str, where: Where, cleanup: str, delete: bool, say: Say, e: Interrupted
) -> None:
    """Set `e.detail`, the line the interrupt leaves; with `delete`, delete first (module doc)."""
    from simpletfjob.runs.objects import scope_flags

    scope = scope_flags(conn)
    if not delete:
        e.detail = _left_line(conn, name, where, cleanup, scope, e)
        return
    try:
        if where.phase in (ENDED, DRAINING):
            e.detail = _finish_cleanup(conn, where, cleanup, say, scope, e)
        else:
            e.detail = _delete_run(conn, name, e.unsettled, scope)
    except Interrupted as again:  # a second signal, while it was deleting
        done = f": {again.progress}" if again.progress else ""
        e.detail = (
            f"a second signal stopped the deleting of run {name!r} (--on-interrupt delete){done}; "
            f"see what is left with simpletfjob status {name} {scope}, and remove it with "
            f"simpletfjob delete {name} {scope}"
        )


def _left_line(
    conn: Connection, name: str, where: Where, cleanup: str, scope: str, e: Interrupted
) -> str:
    """The line when the run is left as it is (--on-interrupt leave)."""
    restart = f"restart {where.restart}/{where.most} ({where.cause})"
    again = f"run it again to finish it, or remove it with simpletfjob delete {name} {scope}"
    if where.phase == APPLYING and where.restart == 0:
        if e.progress:
            return f"{e.progress}; {again}"
        return e.detail or f"nothing of run {name!r} was applied to namespace {conn.namespace}"
    if where.phase == APPLYING and e.progress:
        return f"run {name!r} was deleted for {restart}; of its next attempt, {e.progress}; {again}"
    if where.phase in (APPLYING, REPLANNING):
        return (
            f"run {name!r} was deleted for {restart}, and nothing of its next attempt was "
            "applied; run it again to start it over"
        )
    if where.phase == RESTARTING and e.progress:
        return (
            f"run {name!r} was being deleted for {restart}: {e.progress}; nothing of its "
            f"next attempt was applied; remove the rest with simpletfjob delete {name} {scope} "
            "--wait, then run it again"
        )
    if where.phase == RESTARTING:  # (listing it, before any delete)
        return (
            f"run {name!r} was to be deleted for {restart}, and nothing of it was deleted: it "
            f"is left as it is; remove it with simpletfjob delete {name} {scope} --wait, then "
            "run it again"
        )
    if where.phase == GOING:
        from simpletfjob.runs.objects import run_selector

        return (
            f"run {name!r} is being deleted for {restart}: each of its Jobs and Services was "
            "deleted, and its pods are stopping; nothing of its next attempt was applied; once "
            f"they are gone (kubectl get pods -l {run_selector(name)} {scope}), run it again"
        )
    if where.phase == ENDED:
        done = f": {e.progress}" if e.progress else ""
        extra = " --cleanup all" if cleanup == "all" else ""
        return (
            f"{where.verdict}; its cleanup (--cleanup {cleanup}) was cut short{done}; finish "
            f"it with simpletfjob wait {name} {scope}{extra}"
        )
    if where.phase == DRAINING:
        return _drained(where, cleanup, name, scope)
    attempt = f" (restart {where.restart}/{where.most})" if where.restart else ""
    return (
        f"run {name!r}{attempt} is left running in namespace {conn.namespace}; follow it with "
        f"simpletfjob wait {name} {scope}, or remove it with simpletfjob delete {name} {scope}"
    )


def _drained(where: Where, cleanup: str, name: str, scope: str) -> str:
    return (
        f"{where.verdict}; its cleanup (--cleanup {cleanup}) was done, and its logs were cut "
        f"short (simpletfjob logs {name} {scope} reads them)"
    )


def _finish_cleanup(
    conn: Connection, where: Where, cleanup: str, say: Say, scope: str, e: Interrupted
) -> str:
    """The run has ended: --on-interrupt delete deletes what the cleanup would, and no more."""
    from simpletfjob.runs.watch import clean_up

    name = where.run.name if where.run is not None else ""
    if where.phase == DRAINING or where.run is None:
        return _drained(where, cleanup, name, scope)
    budget = Deadline.after(BUDGET)
    for sent in e.unsettled:
        sent.settle(min(SETTLE, budget.remaining()))
    try:
        clean_up(conn, where.run, cleanup, say)
    except ClusterError as error:
        return (
            f"{where.verdict}; its cleanup (--cleanup {cleanup}) was cut short, and could not "
            f"be finished (--on-interrupt delete): {error}"
        )
    return (
        f"{where.verdict}; its cleanup (--cleanup {cleanup}) was cut short and then finished: "
        "--on-interrupt delete deletes no more than the cleanup, once the run has ended"
    )


def _delete_run(conn: Connection, name: str, unsettled: Sequence[Unsettled], scope: str) -> str:
    """Settle, delete, and list again until nothing of the run is left (see the module doc)."""
    from simpletfjob.runs.delete import JobsRemain, delete_run, wait_until_gone
    from simpletfjob.runs.objects import list_run, object_name, some

    budget = Deadline.after(BUDGET)
    unknown = [w.what for w in unsettled if not w.settle(min(SETTLE, budget.remaining()))]
    deleted: set[tuple[str, str]] = set()
    left: list[str] = []
    try:
        while True:
            listed = list_run(conn, name, deadline=budget.sooner(conn.settings.deadline))
            left = [r.ref(object_name(obj)) for r, obj in listed.objects()]
            if not left or budget.remaining() <= 0:
                break
            done = delete_run(conn, listed, "Background", lambda line: None, deadline=budget)
            deleted |= {(r.plural, n) for r, n in done.deleted}
            # Watched, not polled; once none is left, the list above says so.
            with contextlib.suppress(JobsRemain):
                wait_until_gone(conn, name, max(1.0, budget.remaining()), (JOBS, SERVICES))
    except ClusterError as error:
        return f"run {name!r} could not be deleted (--on-interrupt delete): {error}"
    jobs = len([1 for plural, _ in deleted if plural == JOBS.plural])
    services = len(deleted) - jobs
    counts = [_counted(n, kind) for n, kind in ((jobs, "Job"), (services, "Service")) if n]
    what = f"{' and '.join(counts) or 'nothing'} in namespace {conn.namespace}"
    if left:
        return (
            f"run {name!r} was not deleted whole within {format_duration(BUDGET)} "
            f"(--on-interrupt delete): it deleted {what}, and {some(left)} "
            f"{'is' if len(left) == 1 else 'are'} still there; remove the rest with "
            f"simpletfjob delete {name} {scope}"
        )
    line = (
        f"run {name!r} deleted (--on-interrupt delete): {what}; none of its Jobs and "
        "Services is left (the garbage collector stops their pods)"
    )
    if unknown:
        line += (
            f"; but {', '.join(unknown)} had no answer within {format_duration(SETTLE)}, and "
            f"may still be carried out: see simpletfjob status {name} {scope}"
        )
    return line


def _counted(n: int, kind: str) -> str:
    return f"{n} {kind}{'' if n == 1 else 's'}"
