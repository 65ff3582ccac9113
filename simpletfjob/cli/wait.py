"""`simpletfjob wait RUN`: follow a run to its end through watches, then clean up."""

from __future__ import annotations

import sys
from typing import Any

from simpletfjob.cli.params import make_command
from simpletfjob.errors import EXIT_TIMEOUT, ClusterError, SimpleTFJobError
from simpletfjob.options.runs import WaitOptions


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
    succeeds, 1 when it fails (one line names the task and why), the cluster
    fails, or the cleanup is refused (the line still says how the run ended),
    3 when --timeout passes first (the run is left as it is), 2 for a usage
    error. A run that has already ended returns at once, cleanup included.

    \b
    Example, in CI:
      simpletfjob apply mnist.yaml -N 3 && simpletfjob wait mnist --timeout 1h
    """
    from simpletfjob.kube.request import Deadline
    from simpletfjob.options.table import format_duration
    from simpletfjob.runs.objects import check_run_name, connect_for
    from simpletfjob.runs.state import SUCCEEDED, Run, changes
    from simpletfjob.runs.watch import clean_up, follow

    options = WaitOptions(**values)
    check_run_name(options.run)
    deadline = None if options.timeout is None else Deadline.after(options.timeout)
    connection = (options.kubeconfig, options.context, options.namespace)
    with connect_for(*connection, purpose="wait for a run on") as conn:
        last: Run | None = None
        problem: ClusterError | None = None
        try:
            for run in follow(conn, options.run, deadline):
                for line in changes(last, run):
                    _say(line)
                last = run
        except ClusterError as e:
            if deadline is None or deadline.remaining() > 0:
                raise
            problem = e  # a request that --timeout cut short
        if last is None or not last.finished:
            assert options.timeout is not None  # without one, follow ends only when the run does
            state = f" ({last.state})" if last is not None else ""
            raise TimedOut(
                f"run {options.run!r} did not end within {format_duration(options.timeout)}"
                f"{state}; it is left as it is"
            ) from problem
        try:
            clean_up(conn, last, options.cleanup, _say)
        except ClusterError as e:
            # The run's end is the news: it goes in the one line, with what stopped the cleanup.
            ended = "succeeded" if last.state == SUCCEEDED else "failed"
            raise ClusterError(
                f"run {last.name!r} {ended}: {last.outcome()}; but its cleanup "
                f"(--cleanup {options.cleanup}) failed: {e}"
            ) from e
    if last.state != SUCCEEDED:
        raise RunFailed(f"run {last.name!r} failed: {last.outcome()}")
    _say(f"run {last.name} succeeded: {last.outcome()}")


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
