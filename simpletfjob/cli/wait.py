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

    It watches the run's Jobs and pods, and rides out an API server outage
    until --timeout. Exit status: 0 when the run succeeds; 1 when it fails (the
    failing task's last log lines and Warning events come before the last line,
    which names the task and why) or cannot be decided; 3 when --timeout passes
    first (the run is left as it is); 2 for a usage error.

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
    followed: list[object] = []  # the run's objects, let go after the verdict is said
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
                diagnose_on_failure=options.diagnose_on_failure,
                stall=options.stall_timeout,
                keep=followed,
            )
        # The status line erased, the verdict is said before the connection is closed.
        say(succeeded_line(run))
