"""`simpletfjob wait RUN`: follow a run to its end through watches, then clean up."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from simpletfjob.cli.params import make_command
from simpletfjob.errors import EXIT_TIMEOUT, ClusterError, SimpleTFJobError
from simpletfjob.options.runs import WaitOptions

if TYPE_CHECKING:
    from simpletfjob.runs.state import Run


class RunFailed(SimpleTFJobError):
    """The run ended Failed: exit 1, naming the task and its reason."""


class TimedOut(SimpleTFJobError):
    """--timeout passed before the run ended (exit 3)."""

    exit_code = EXIT_TIMEOUT


@make_command(
    "wait",
    WaitOptions,
    short_help="Wait for a run to end, then clean up what still runs.",
)
def command(values: dict[str, Any], given: frozenset[str]) -> None:
    """Wait for RUN to succeed or fail, printing each task's changes to stderr, then clean up.

    It watches the run's Jobs and pods (no polling). Exit status: 0 when the run
    succeeds, 1 when it fails (the last line names the task and why), the cluster
    fails, or the cleanup is refused (the line still says how the run ended),
    3 when --timeout passes first (the run is left as it is, or its cleanup is
    unfinished), 2 for a usage error. A run that has already ended returns at
    once, cleanup included.

    An API server that goes away meanwhile (connection refused or reset, TLS,
    429, 5xx) is waited for until --timeout, cleanup included: one line when
    it goes, one when it is back; if --timeout passes first, the exit 3 line
    says since when it has been away. What the server answers about the run
    (401, 403, 404) ends the wait at once.

    A failure in the same second as the run's success does not undo it. A run
    that cannot be decided is exit 1, and nothing is cleaned up: a task that
    several Jobs claim (the line names them and what to delete), or a run
    whose Jobs are being deleted.

    When the run fails, the failing task's last log lines (--tail-on-failure, kept
    when its crashed container's pod is deleted) and the Warning events of its Job
    and pods come before the last line; what cannot be read is said in one line.

    \b
    Example, in CI:
      simpletfjob apply mnist.yaml -N 3 && simpletfjob wait mnist --timeout 1h
    """
    from simpletfjob.kube.outage import StillAway, riding_out
    from simpletfjob.kube.request import Deadline
    from simpletfjob.options.table import format_duration
    from simpletfjob.runs.failure import Keeper, explain
    from simpletfjob.runs.objects import check_run_name, connect_for
    from simpletfjob.runs.state import AMBIGUOUS, DELETING, SUCCEEDED, changes
    from simpletfjob.runs.watch import clean_up, follow

    options = WaitOptions(**values)
    check_run_name(options.run)
    deadline = None if options.timeout is None else Deadline.after(options.timeout)
    until = (
        "it is back (no --timeout)"
        if options.timeout is None
        else f"the --timeout ({format_duration(options.timeout)})"
    )
    connection = (options.kubeconfig, options.context, options.namespace)
    with (
        connect_for(*connection, purpose="wait for a run on") as conn,
        riding_out(conn, deadline, _say, until) as ride,
    ):
        last: Run | None = None
        problem: ClusterError | None = None
        keeper = Keeper(conn, options.tail_on_failure)
        try:
            for run in follow(conn, options.run, deadline, keeper.seen):
                for line in changes(last, run):
                    _say(line)
                last = run
        except ClusterError as e:
            if deadline is None or deadline.remaining() > 0:
                raise
            problem = e  # a request that --timeout cut short
        if last is not None and last.state in (AMBIGUOUS, DELETING):
            raise RunFailed(_undecided(last, options.context))
        if last is None or not last.finished:
            assert options.timeout is not None  # without one, follow ends only when the run does
            state = f" ({last.state})" if last is not None else ""
            away = f"; {ride.note()}" if ride.away else ""
            raise TimedOut(
                f"run {options.run!r} did not end within {format_duration(options.timeout)}"
                f"{state}{away}; it is left as it is"
            ) from problem
        ended = "succeeded" if last.state == SUCCEEDED else "failed"
        if last.state != SUCCEEDED:  # read before the cleanup, which takes pods with it
            for line in explain(conn, last, options.tail_on_failure, keeper):
                _say(line)
        try:
            clean_up(conn, last, options.cleanup, _say)
        except StillAway as e:
            assert options.timeout is not None  # without one, the ride never ends so
            raise TimedOut(
                f"run {last.name!r} {ended}: {last.outcome()}; but its cleanup (--cleanup "
                f"{options.cleanup}) did not finish within {format_duration(options.timeout)}: {e}"
            ) from e
        except ClusterError as e:
            # The run's end is the news: it goes in the one line, with what stopped the cleanup.
            raise ClusterError(
                f"run {last.name!r} {ended}: {last.outcome()}; but its cleanup "
                f"(--cleanup {options.cleanup}) failed: {e}"
            ) from e
    if last.state != SUCCEEDED:
        from simpletfjob.runs.run import UNRESTARTABLE

        done, limit = last.restarts
        left = (
            f"; {limit - done} of its {limit} restarts are left, which only simpletfjob run "
            "restarts (wait has no template to plan again from)"
            if done < limit and last.reason not in UNRESTARTABLE
            else ""
        )
        raise RunFailed(f"run {last.name!r} failed: {last.outcome()}{left}")
    _say(f"run {last.name} succeeded: {last.outcome()}")


def _undecided(run: Run, context: str | None) -> str:
    """Why the run has no verdict, and what to do: a task claimed by several Jobs, or a run being deleted."""
    from simpletfjob.runs.state import DELETING

    where = f"-n {run.namespace}" + (f" --context {context}" if context else "")
    if run.state == DELETING:
        return (
            f"run {run.name!r} is being deleted: {run.deleting()}; it has no verdict to wait "
            f"for (simpletfjob delete {run.name} {where} --wait waits until it is gone)"
        )
    hints = []
    for claim in run.claims:
        copies = [j for j in claim.jobs if j in claim.copies]
        if copies and len(copies) < len(claim.jobs):
            hints.append(f"kubectl delete job {' '.join(copies)} {where}")
        else:  # nothing tells which one apply made: the user knows
            hints.append(
                f"kubectl delete job NAME {where}, for all of {', '.join(claim.jobs)} but one"
            )
    return (
        f"run {run.name!r} cannot be decided: {run.outcome()}; delete what is not the run's "
        f"({'; '.join(hints)}) and wait again; nothing was cleaned up"
    )


def _say(line: str) -> None:
    """One line on stderr, written whole: the watches' threads report an outage meanwhile."""
    if sys.stderr is None:  # closed at start, in a run without guard_standard_streams
        return
    sys.stderr.write(f"{line}\n")
    sys.stderr.flush()
