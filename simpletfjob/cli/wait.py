"""`simpletfjob wait RUN`: follow a run to its end through watches, then clean up."""

from __future__ import annotations

from typing import Any

from simpletfjob.cli.params import make_command
from simpletfjob.options.runs import WaitOptions


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
    On a terminal, one status line under the others is kept up to date: the tasks by
    state, their restarts and the time so far (never written when stderr is not a
    terminal).

    \b
    Example, in CI:
      simpletfjob apply mnist.yaml -N 3 && simpletfjob wait mnist --timeout 1h
    """
    from simpletfjob.cli.report import StatusLine
    from simpletfjob.runs.ending import succeeded_line
    from simpletfjob.runs.objects import check_run_name, connect_for, pointing_elsewhere
    from simpletfjob.runs.wait import wait_for_run
    from simpletfjob.streams import say

    options = WaitOptions(**values)
    check_run_name(options.run)
    connection = (options.kubeconfig, options.context, options.namespace)
    with connect_for(*connection, purpose="wait for a run on") as conn, pointing_elsewhere(conn):
        with StatusLine(options.run) as status:
            run = wait_for_run(
                conn,
                options.run,
                timeout=options.timeout,
                cleanup=options.cleanup,
                tail=options.tail_on_failure,
                context=options.context,
                say=say,
                progress=status,
                grace=options.cleanup_grace,
            )
        # The status line erased, the verdict is said before the connection is closed.
        say(succeeded_line(run))
