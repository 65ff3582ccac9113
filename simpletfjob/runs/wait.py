"""Waiting for a run: follow it to its end through watches, say why it failed, then clean up.

    follow (watch.py, riding out an outage: kube/outage.py); a run found going on: what
    following it and cleaning up need, asked before it is followed (permissions.py)
      -> Ambiguous or Deleting: no verdict, nothing cleaned up (RunFailed, with what to do)
      -> --timeout first: TimedOut (exit 3), the run left as it is
      -> failed: why (failure.py: its last lines, its Warning events), before the cleanup
         that takes its pods
      -> the cleanup (--cleanup), then the verdict: RunFailed, or the success line

`wait`, `status -w`, `logs -f` and `run` end with these errors and lines, so that a script
reads the same verdict whichever it ran.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from simpletfjob.errors import ClusterError, Interrupted
from simpletfjob.errors import RunFailed as RunFailed  # (declared with the other errors)
from simpletfjob.errors import TimedOut as TimedOut
from simpletfjob.identity import JOB_LABEL, POLICY_ANNOTATION
from simpletfjob.runs.follower import ENDS
from simpletfjob.runs.state import AMBIGUOUS, DELETED, DELETING, SUCCEEDED, Run, changes

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection

Say = Callable[[str], None]

# Reasons a new attempt of the whole run would not change: it was deleted, or its deadline passed.
UNRESTARTABLE = (DELETED, "DeadlineExceeded")


def wait_for_run(
    conn: Connection,
    name: str,
    *,
    timeout: float | None,
    cleanup: str,
    tail: int,
    context: str | None,
    say: Say,
    progress: Callable[[Run], None] | None = None,
) -> Run:
    """Follow run NAME to its end, saying each task's changes, then clean up; the run, succeeded.

    `progress` is given the run each time it is judged (the command's status line).

    What the following and the cleanup need is asked once the run is found going on
    (permissions.py): a cleanup that would be refused once the run has ended is refused
    before it is followed. A run that has already ended is cleaned up at once, and a
    refusal then says how it ended first.
    Raises RunFailed (failed, or no verdict), TimedOut, or the cluster's error.
    """
    from simpletfjob.kube.outage import StillAway, riding_out
    from simpletfjob.kube.request import Deadline
    from simpletfjob.options.table import format_duration
    from simpletfjob.runs.failure import Keeper, explain
    from simpletfjob.runs.objects import scope_flags
    from simpletfjob.runs.permissions import check_wait
    from simpletfjob.runs.watch import clean_up, follow

    deadline = None if timeout is None else Deadline.after(timeout)
    until = (
        "it is back (no --timeout)"
        if timeout is None
        else f"the --timeout ({format_duration(timeout)})"
    )
    with riding_out(conn, deadline, say, until) as ride:
        last: Run | None = None
        problem: ClusterError | None = None
        keeper = Keeper(conn, tail)
        try:
            for run in follow(conn, name, deadline, keeper.seen):
                if last is None and run.state not in ENDS:
                    check_wait(conn, cleanup)  # it goes on: what it will rely on, asked now
                for line in changes(last, run):
                    say(line)
                last = run
                if progress is not None:
                    progress(run)
        except ClusterError as e:
            if deadline is None or deadline.remaining() > 0:
                raise
            problem = e  # a request that --timeout cut short
        if last is not None and last.state in (AMBIGUOUS, DELETING):
            raise RunFailed(undecided(last, context), run=last)
        if last is None or not last.finished:
            assert timeout is not None  # without one, follow ends only when the run does
            state = f" ({last.state})" if last is not None else ""
            away = f"; {ride.note()}" if ride.away else ""
            raise TimedOut(
                f"run {name!r} did not end within {format_duration(timeout)}"
                f"{state}{away}{stuck_and_next(last, name, scope_flags(conn))}"
            ) from problem
        ended = "succeeded" if last.state == SUCCEEDED else "failed"
        if last.state != SUCCEEDED:  # read before the cleanup, which takes pods with it
            for line in explain(conn, last, tail, keeper):
                say(line)
        try:
            clean_up(conn, last, cleanup, say)
        except Interrupted as e:  # the verdict is known: it is the news, with what is undone
            verdict = succeeded_line(last) if last.state == SUCCEEDED else failed_line(last)
            done = f": {e.progress}" if e.progress else ""
            e.detail = (
                f"{verdict}; its cleanup (--cleanup {cleanup}) was cut short{done}; finish it "
                f"with simpletfjob wait {name} {scope_flags(conn)}"
                + (" --cleanup all" if cleanup == "all" else "")
            )
            raise
        except StillAway as e:
            assert timeout is not None  # without one, the ride never ends so
            raise TimedOut(
                f"run {last.name!r} {ended}: {last.outcome()}; but its cleanup (--cleanup "
                f"{cleanup}) did not finish within {format_duration(timeout)}: {e}"
            ) from e
        except ClusterError as e:
            # The run's end is the news: it goes in the one line, with what stopped the cleanup.
            raise ClusterError(
                f"run {last.name!r} {ended}: {last.outcome()}; but its cleanup "
                f"(--cleanup {cleanup}) failed: {e}"
            ) from e
    if last.state != SUCCEEDED:
        raise RunFailed(failed_line(last), run=last)
    return last


def stuck_and_next(run: Run | None, name: str, scope: str) -> str:
    """What a timed-out run's Pending tasks say, and the commands to look further:
    '; worker-0 Pending: ImagePullBackOff: ...; it is left as it is; see: simpletfjob status
    mnist -n ml; simpletfjob logs mnist worker-0 -n ml'."""
    from simpletfjob.runs.taskstate import stuck_lines

    tasks = [] if run is None else [t for t in run.tasks if not t.finished]
    stuck = stuck_lines(tasks)
    told = "".join(f"; {line}" for line in stuck[:2])
    if len(stuck) > 2:
        told += f" (and {len(stuck) - 2} more)"
    task = next((t.task for t in tasks if t.stuck), tasks[0].task if tasks else "TASK")
    return (
        f"{told}; it is left as it is; see: simpletfjob status {name} {scope}; "
        f"simpletfjob logs {name} {task} {scope}"
    )


def failed_line(run: Run) -> str:
    """'run 'mnist' failed: worker-1 Failed: Error (exit 1)', and the restarts `run` has left."""
    done, limit = run.restarts
    left = (
        f"; {limit - done} of its {limit} restarts are left, which only simpletfjob run "
        "restarts (wait has no template to plan again from)"
        if done < limit and run.reason not in UNRESTARTABLE
        else ""
    )
    if run.wrong_restarts:  # tampered with: no count to tell
        left = f"; the restarts it has left are not known: {run.wrong_restarts}"
    return f"run {run.name!r} failed: {run.outcome()}{left}"


def succeeded_line(run: Run) -> str:
    return f"run {run.name} succeeded: {run.outcome()}"


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
