"""A run's end, followed once for `wait`, `run`, `status -w` and `logs -f` (an Ending), the
lines that say it, and `status RUN`.

`follow` hands each state of the run to `on_change` (what the command shows), asks `check`
for an end the state does not tell (run's: a refused pod, a side task's failure, a lost node),
and ends as Succeeded, Failed (with its Cause), Undecided (a task several Jobs claim, a run
being deleted) or TimedOut. `ending_of`, `finishing` and `finished_as` are pure, so the
Ending of recorded events is tested without a server.

After a success, the tasks that end by themselves (a collective's workers end a moment after
the deciding one) are given --cleanup-grace (`let_finish`), so that the cleanup does not take
their Jobs and logs. These read; the command prints.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING

from simpletfjob.errors import ClusterError, RunFailed
from simpletfjob.frameworks import framework as framework_named
from simpletfjob.identity import INDEX_LABEL, JOB_LABEL, POLICY_ANNOTATION, ROLE_LABEL
from simpletfjob.kube.request import Deadline
from simpletfjob.kube.resources import JOBS
from simpletfjob.kube.watch import watch
from simpletfjob.runs.classify import REFUSED, STALLED, TASK_FAILED, Cause, run_failure
from simpletfjob.runs.failure import explanation, stuck_reasons
from simpletfjob.runs.objects import object_name, run_selector, some
from simpletfjob.runs.state import (
    AMBIGUOUS,
    DELETED,
    DELETING,
    FAILED,
    RUNNING,
    SUCCEEDED,
    Run,
    describe,
    is_gone,
)
from simpletfjob.runs.taskstate import (
    Object,
    TaskStatus,
    condition,
    metadata_of,
    stuck_lines,
    task_of,
)
from simpletfjob.runs.watch import follow, read_run

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection
    from simpletfjob.runs.failure import Keeper


# Reasons a new attempt of the whole run would not change: it was deleted, or its deadline passed.
UNRESTARTABLE = (DELETED, "DeadlineExceeded")


class End(str, Enum):
    """How following a run ended. A str: `End.SUCCEEDED == "Succeeded"`."""

    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNDECIDED = "Undecided"  # Ambiguous (several Jobs claim a task) or Deleting: no verdict
    TIMED_OUT = "TimedOut"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Ending:
    """A run's end as followed: how, the run as last judged (None if never read), the cause of a
    failure or of no verdict, and the request a deadline cut short."""

    end: End
    run: Run | None
    cause: Cause | None = None
    problem: ClusterError | None = None

    @property
    def succeeded(self) -> bool:
        return self.end == End.SUCCEEDED


def judged(run: Run, exit_codes: Collection[int] = ()) -> Ending | None:
    """The Ending of a run whose state has ended it; None while it goes on."""
    if run.state == SUCCEEDED:
        return Ending(End.SUCCEEDED, run)
    if run.state == FAILED:
        return Ending(End.FAILED, run, run_failure(run, exit_codes))
    if run.state in (AMBIGUOUS, DELETING):
        return Ending(End.UNDECIDED, run, run_failure(run, exit_codes))
    return None


OnChange = Callable[[Run], None]
Check = Callable[[Run], Cause | None]


def ending_of(
    runs: Iterable[Run],
    *,
    on_change: OnChange | None = None,
    check: Check | None = None,
    exit_codes: Collection[int] = (),
) -> Ending:
    """The Ending of the run's states as they come (pure): each to `on_change`, then judged, then
    to `check`, whose cause ends it Failed; TimedOut when they stop before an end."""
    last: Run | None = None
    for run in runs:
        if on_change is not None:
            on_change(run)
        last = run
        ended = judged(run, exit_codes)
        if ended is not None:
            return ended
        cause = check(run) if check is not None else None
        if cause is not None:
            return Ending(End.FAILED, run, cause)
    return Ending(End.TIMED_OUT, last)


def follow_to_end(
    conn: Connection,
    name: str,
    deadline: Deadline | None = None,
    *,
    on_change: OnChange | None = None,
    check: Check | None = None,
    seen: Callable[[Sequence[Object], Sequence[Object]], None] | None = None,
    tick: float | None = None,
    every: bool = False,
    exit_codes: Collection[int] = (),
) -> Ending:
    """Follow run NAME until it ends (`ending_of` over watch.follow), or the deadline passes.

    `seen`, `tick` and `every` are watch.follow's. A request the deadline cut short is TimedOut,
    with it as the `problem`; before the deadline, the cluster's error goes up.
    """
    last: list[Run] = []

    def changed(run: Run) -> None:
        last[:] = [run]
        if on_change is not None:
            on_change(run)

    try:
        with closing(follow(conn, name, deadline, seen, tick=tick, every=every)) as runs:
            return ending_of(runs, on_change=changed, check=check, exit_codes=exit_codes)
    except ClusterError as e:
        if deadline is None or deadline.remaining() > 0:
            raise
        return Ending(End.TIMED_OUT, last[0] if last else None, problem=e)


def finishing(run: Run) -> list[TaskStatus]:
    """Of a run that has succeeded, the unended tasks its framework says end by themselves
    (`ends_by_itself`), not copies nor being deleted; [] for any other run."""
    if run.state != SUCCEEDED:
        return []
    roles = framework_named(run.framework).ends_by_itself({t.role for t in run.tasks})
    return [
        t
        for t in run.tasks
        if t.role in roles and not t.finished and t.applied and t.state != DELETING
    ]


def finished_as(task: TaskStatus, job: Object | None) -> TaskStatus | None:
    """A `finishing` task as its Job (None: gone) says it is: as it ended; itself when its Job is
    gone or made anew (nothing to wait for); None while it goes on."""
    if job is None or is_gone(job) or metadata_of(job).get("uid") != task.uid:
        return task
    if not (condition(job, "Complete") or condition(job, "Failed")):
        return None
    # (its pods are not read again: where it ran and its restarts stay as they were)
    return replace(task_of(job, ()), node=task.node, restarts=task.restarts)


def let_finish(
    conn: Connection,
    run: Run,
    grace: float,
    deadline: Deadline | None,
    say: Callable[[str], None] | None = None,
) -> Run:
    """Give a succeeded run's `finishing` tasks `grace` seconds (within `deadline`) to end, by
    one watch of its Jobs; the run with those that ended as they ended, each said to `say`
    (`worker-1 Succeeded`). Its state and verdict stay as they were."""
    waiting = {task.job: task for task in finishing(run)}
    if grace <= 0 or not waiting:
        return run
    until = Deadline.after(grace) if deadline is None else deadline.sooner(grace)
    ended: dict[str, TaskStatus] = {}
    for event in watch(conn, JOBS, label_selector=run_selector(run.name), deadline=until):
        if event.type == "RELIST":
            listed = {object_name(job): job for job in event.objects}
            news = [(name, listed.get(name)) for name in waiting]
        elif event.type in ("ADDED", "MODIFIED", "DELETED") and event.object is not None:
            gone = event.type == "DELETED"
            news = [(object_name(event.object), None if gone else event.object)]
        else:
            continue
        for name, job in news:
            task = waiting.get(name)
            now = finished_as(task, job) if task is not None else None
            if task is None or now is None:
                continue
            del waiting[name]
            if now is not task:
                ended[name] = now
                if say is not None and describe(now) != describe(task):  # as state.changes
                    say(describe(now))
        if not waiting:
            break
    if not ended:
        return run
    return replace(run, tasks=tuple(ended.get(task.job, task) for task in run.tasks))


# A line of a task's log that says a host name did not resolve: getaddrinfo's words (glibc,
# musl, macOS), torch's `gai error`, gRPC's (TensorFlow's) `DNS resolution failed`.
UNRESOLVED = (
    r"gai error|Name or service not known|Temporary failure in name resolution|"
    r"nodename nor servname|No address associated with hostname|Name does not resolve|"
    r"DNS resolution failed|Could not resolve host|getaddrinfo"
)


def names_to_resolve(run: Run, jobs: Iterable[Object]) -> list[str]:
    """The node names the run's tasks reach each other at (`peer_hosts` that are its nodes),
    which resolve inside a pod only where the cluster's DNS knows them; [] for addresses."""
    import ipaddress

    fw = framework_named(run.framework)
    hosts = next((found for job in jobs if (found := fw.peer_hosts(job))), [])
    nodes = {task.node for task in run.tasks if task.node}
    named = []
    for host in dict.fromkeys(hosts):
        try:
            ipaddress.ip_address(host)
        except ValueError:
            if host in nodes:
                named.append(host)
    return sorted(named)


def _node_names(hosts: Sequence[str]) -> str:
    return f"their nodes' names ({some(hosts)})"


TAKE_IP = "--address internal-ip gives them the nodes' InternalIP"


def unresolved_hint(run: Run, jobs: Iterable[Object]) -> str:
    """'; its tasks reach each other at their nodes' names (h1, h2): ...' for a run not ended whose
    running tasks do; '' otherwise."""
    names = names_to_resolve(run, jobs) if run.count(RUNNING) else []
    if not names:
        return ""
    return (
        f"; its tasks reach each other at {_node_names(names)}: where their pods cannot resolve "
        f"those, they wait for each other until stopped; {TAKE_IP}"
    )


def unresolved_note(task: str, lines: Sequence[str], run: Run, jobs: Iterable[Object]) -> list[str]:
    """The line after a failed task's `lines` when its log says a name did not resolve and the
    tasks reach each other by node name; [] otherwise."""
    import re

    said = [line for line in lines if line.startswith(f"{task} | ")]
    if not any(re.search(UNRESOLVED, line, re.IGNORECASE) for line in said):
        return []
    names = names_to_resolve(run, jobs)
    if not names:
        return []
    return [
        f"{task}: its log says a name did not resolve; its tasks reach each other at "
        f"{_node_names(names)}, which their pods may not resolve: {TAKE_IP}"
    ]


def explain_failure(
    conn: Connection, run: Run, cause: Cause | None, tail: int, keeper: Keeper | None = None
) -> list[str]:
    """The failing task's last log lines and Warning events, and `unresolved_note`, for a task
    that failed or a pod its node refused (a lost node's kubelet does not answer); for a stall,
    the reporting task's last lines, then every task's state and node, so the one that hangs
    may be found; else []."""
    if cause is None or cause.kind not in (TASK_FAILED, REFUSED, STALLED):
        return []
    lines = explanation(conn, run, tail, keeper, cause.task)
    if cause.kind == STALLED:
        return lines + [f"{t.task}: {t.state} on {t.node or '<none>'}" for t in run.tasks]
    return lines + unresolved_note(cause.task, lines, run, keeper.jobs if keeper else ())


def failed_line(run: Run, verdict: str | None = None) -> str:
    """'run 'mnist' failed: worker-1 Failed: Error (exit 1)', and the restarts `run` has left;
    `run`'s `verdict` words stand for both."""
    if verdict is not None:
        return f"run {run.name!r} failed: {verdict}"
    # counted against the limit: those in a row without progress
    spent, limit = run.in_a_row, run.restarts[1]
    left = (
        f"; {limit - spent} of its {limit} restarts are left, which only simpletfjob run "
        "restarts (wait has no template to plan again from)"
        if spent < limit and run.reason not in UNRESTARTABLE
        else ""
    )
    if run.wrong_restarts:  # tampered with: no count to tell
        left = f"; the restarts it has left are not known: {run.wrong_restarts}"
    return f"run {run.name!r} failed: {run.outcome()}{left}"


def succeeded_line(run: Run) -> str:
    return f"run {run.name} succeeded: {run.outcome()}"


def outcome_line(ending: Ending) -> str:
    """The success line; for any other end with a run, RunFailed with the failed line."""
    if ending.run is None:
        raise RunFailed("the run ended without being read")
    if not ending.succeeded:
        raise RunFailed(failed_line(ending.run), run=ending.run)
    return succeeded_line(ending.run)


def undecided(run: Run, context: str | None) -> str:
    """Why the run has no verdict, and what to do: a task claimed by several Jobs, or a run being deleted."""
    where = f"-n {run.namespace}" + (f" --context {context}" if context else "")
    if run.state == DELETING:
        return (
            f"run {run.name!r} is being deleted: {run.deleting()}; it has no verdict to wait "
            f"for (simpletfjob delete {run.name} {where} --wait waits until it is gone)"
        )
    hints = []
    if run.wrong_policy:
        hints.append(
            f"kubectl annotate job -l {JOB_LABEL}={run.name} {POLICY_ANNOTATION}=POLICY "
            f"--overwrite {where}, with the policy the run was rendered with"
        )
    if run.reason:  # a Job's role and index labels, edited by hand
        hints.append(
            f"kubectl label job JOB {ROLE_LABEL}=ROLE {INDEX_LABEL}=INDEX --overwrite {where}"
        )
    for claim in run.claims:
        copies = [j for j in claim.jobs if j in claim.copies]
        if copies and len(copies) < len(claim.jobs):
            hints.append(f"kubectl delete job {' '.join(copies)} {where}")
        else:  # nothing tells which one apply made: the user knows
            hints.append(
                f"kubectl delete job NAME {where}, for all of {', '.join(claim.jobs)} but one"
            )
    mend = "delete what is not the run's" if run.claims else "set it right"
    if run.claims and run.wrong_policy:
        mend += " and set its annotation right"
    return (
        f"run {run.name!r} cannot be decided: {run.outcome()}; {mend} "
        f"({'; '.join(hints)}) and wait again; nothing was cleaned up"
    )


def read_status(
    conn: Connection, name: str, tail: int | None, stuck: bool = False
) -> tuple[Run, list[str]]:
    """`status RUN`: the run as it is now, with its stuck tasks' reasons, and the notes after it
    (with `stuck`, each reason in full; with `tail`, a failed run explained)."""
    from simpletfjob.runs.reporting import Tail

    progress = Tail(conn)  # the reporting task's last lines, read beside the events
    run, note = stuck_reasons(conn, read_run(conn, name, progress.start))
    run = progress.into(run)
    notes = [note] if note else []
    if stuck:
        notes += stuck_lines(run.tasks)
    if tail is not None and run.state == FAILED:
        notes += explanation(conn, run, tail)
    return run, notes


def watch_status(
    conn: Connection, name: str, tail: int, show: Callable[[Run], None], say: Callable[[str], None]
) -> Run:
    """`status -w`: each state to `show` until the run ends, riding out an outage; the run.
    A failed run is explained before RunFailed; an undecided one is RunFailed at once."""
    from simpletfjob.kube.outage import riding_out

    with riding_out(conn, None, say, "it is back (no --timeout)"):
        ending = follow_to_end(conn, name, None, on_change=show)
        run = ending.run
        assert run is not None and ending.end != End.TIMED_OUT  # no deadline: it ended
        if ending.end == End.UNDECIDED:
            raise RunFailed(undecided(run, None), run=run, cause=ending.cause)
        for line in explain_failure(conn, run, ending.cause, tail):
            say(line)
    if not ending.succeeded:
        raise RunFailed(failed_line(run), run=run, cause=ending.cause)
    return run
