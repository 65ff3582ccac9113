"""Waiting for a run: follow it to its end through watches, say why it failed, then clean up.

    follow_to_end (ending.py, riding out an outage: kube/outage.py); a run found going on:
    what following it and cleaning up need, asked before it is followed (permissions.py)
      -> Ambiguous or Deleting: no verdict, nothing cleaned up (RunFailed, with what to do)
      -> --timeout first: TimedOut (exit 3), the run left as it is
      -> failed: with --diagnose-on-failure, its bundle (diagnose.py); why (failure.py: its
         error and last lines, its Warning events), before the cleanup that takes its pods
      -> succeeded: the tasks that end by themselves given --cleanup-grace to end (ending.py)
      -> the cleanup (--cleanup), then the verdict: RunFailed, or the success line

`wait`, `status -w`, `logs -f` and `run` end with the same lines (ending.py), so that a
script reads the same verdict whichever it ran.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from simpletfjob.errors import ClusterError, Interrupted
from simpletfjob.errors import RunFailed as RunFailed  # (declared with the other errors)
from simpletfjob.errors import TimedOut as TimedOut
from simpletfjob.runs.ending import (
    End,
    explain_failure,
    failed_line,
    follow_to_end,
    let_finish,
    succeeded_line,
    undecided,
    unresolved_hint,
)
from simpletfjob.runs.state import Run, changes
from simpletfjob.runs.watch import ENDS

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection
    from simpletfjob.runs.taskstate import Object

Say = Callable[[str], None]


def wait_for_run(
    conn: Connection,
    name: str,
    *,
    timeout: float | None,
    cleanup: str,
    tail: int,
    context: str | None,
    say: Say,
    grace: float,
    progress: Callable[[Run], None] | None = None,
    diagnose_on_failure: str | None = None,
    stall: float | None = None,
) -> Run:
    """Follow run NAME to its end, saying each task's changes, then clean up; the run, succeeded.

    `progress` is given the run each time it is judged (the command's status line). After a
    success, the tasks that end by themselves are given `grace` seconds (--cleanup-grace) to
    end before the cleanup (ending.let_finish); those that do are said, and kept. The
    reporting task's log is followed for the run's progress (reporting.Feed): a stall (`stall`,
    --stall-timeout, else the run's own) fails the run; its last progress is noted at the end. A run that
    fails has its bundle written into `diagnose_on_failure`, a directory, first.

    What the following and the cleanup need is asked once the run is found going on
    (permissions.py): a cleanup that would be refused once the run has ended is refused
    before it is followed. A run that has already ended is cleaned up at once, and a
    refusal then says how it ended first.
    Raises RunFailed (failed, or no verdict), TimedOut, or the cluster's error.
    """
    from simpletfjob.kube.outage import StillAway, riding_out
    from simpletfjob.kube.request import Deadline
    from simpletfjob.options.rules import format_duration
    from simpletfjob.runs.diagnose import OnFailure
    from simpletfjob.runs.objects import scope_flags
    from simpletfjob.runs.permissions import check_wait
    from simpletfjob.runs.reporting import Feed, stalled_lines, verdict_of
    from simpletfjob.runs.watch import clean_up

    deadline = None if timeout is None else Deadline.after(timeout)
    until = (
        "it is back (no --timeout)"
        if timeout is None
        else f"the --timeout ({format_duration(timeout)})"
    )
    with riding_out(conn, deadline, say, until) as ride:
        shown: list[Run] = []
        bundles = OnFailure(conn, diagnose_on_failure, say)
        keeper = bundles.keeper(tail)  # with a directory, it keeps each task's log
        feed = Feed(conn, stall=stall, shown=progress)

        def show(run: Run) -> None:
            if not shown and run.state not in ENDS:
                check_wait(conn, cleanup)  # it goes on: what it will rely on, asked now
            for line in changes(shown[0] if shown else None, run):
                say(line)
            shown[:] = [run]
            feed.show(run)

        def seen(jobs: Sequence[Object], pods: Sequence[Object]) -> None:
            keeper.seen(jobs, pods)
            feed.seen(jobs, pods)

        try:
            ending = follow_to_end(conn, name, deadline, on_change=show, seen=seen, check=feed.check, tick=feed.tick)  # fmt: skip
        except BaseException:
            feed.close()
            raise
        feed.finish(noted=ending.end in (End.SUCCEEDED, End.FAILED))  # its last progress
        last = ending.run
        if ending.end == End.UNDECIDED:
            assert last is not None
            raise RunFailed(undecided(last, context), run=last, cause=ending.cause)
        if ending.end == End.TIMED_OUT or last is None:
            assert timeout is not None  # without one, following ends only when the run does
            state = f" ({last.state})" if last is not None else ""
            away = f"; {ride.note()}" if ride.away else ""
            hint = unresolved_hint(last, keeper.jobs) if last is not None else ""
            raise TimedOut(
                f"run {name!r} did not end within {format_duration(timeout)}"
                f"{state}{away}{hint}{stuck_and_next(last, name, scope_flags(conn))}"
            ) from ending.problem
        ended = "succeeded" if ending.succeeded else "failed"
        failed = "" if ending.succeeded else failed_line(last, verdict_of(ending.cause))
        said = "" if ending.succeeded else bundles.write(last, ending.cause, failed)
        # read before the cleanup, which takes pods with it
        for line in explain_failure(conn, last, ending.cause, tail, keeper) + stalled_lines(conn, last, ending.cause, tail, keeper):  # fmt: skip
            say(line)
        bundles.close()
        try:
            if ending.succeeded and cleanup != "none":
                last = let_finish(conn, last, grace, deadline, say)
            clean_up(conn, last, cleanup, say)
        except Interrupted as e:  # the verdict is known: it is the news, with what is undone
            verdict = succeeded_line(last) if ending.succeeded else failed + said
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
    if not ending.succeeded:
        raise RunFailed(failed + said, run=last, cause=ending.cause, bundle=bundles.path)
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
