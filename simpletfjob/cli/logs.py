"""`simpletfjob logs RUN [TASK...]`: the run's container logs, merged line by line and prefixed by task."""

from __future__ import annotations

import sys
from typing import Any

from simpletfjob.cli.params import make_command
from simpletfjob.errors import Interrupted
from simpletfjob.options.runs import LogsOptions


@make_command(
    "logs",
    LogsOptions,
    short_help="Show the logs of a run's tasks, merged and prefixed by task.",
)
def command(values: dict[str, Any], given: frozenset[str]) -> None:
    """Show the logs of RUN's tasks: every task, or the TASKs named as status prints them (worker-0).

    Lines from several tasks are merged whole, in order of arrival, each
    prefixed with its task (worker-0 | ...). With -f it follows every task until
    the run ends, and exits as wait does: 0 when it succeeded, 1 when it failed.

    \b
    Examples:
      simpletfjob logs mnist                     # the last 10 lines of every task
      simpletfjob logs mnist worker-1 --previous # why worker 1 keeps crashing
      simpletfjob logs mnist --role ps -f
    """
    from simpletfjob.cli.report import write_log_line
    from simpletfjob.runs.ending import outcome_line
    from simpletfjob.runs.logs import LogRequest, Printer, follow_logs, show_logs
    from simpletfjob.runs.logsources import Selection
    from simpletfjob.runs.objects import check_run_name, connect_for, pointing_elsewhere
    from simpletfjob.streams import say

    options = LogsOptions(**values)
    options.check()
    check_run_name(options.run)
    selection = Selection(options.tasks, options.roles, options.container, options.all_containers)
    several = len(options.tasks) != 1 or bool(options.roles) or options.all_containers
    tail = options.tail if options.tail is not None else (10 if several else -1)
    request = LogRequest(tail, options.since, options.timestamps, options.previous, options.follow)
    prefix = several if options.prefix is None else options.prefix
    terminal = sys.stdout.isatty()
    color = options.color == "always" or (options.color == "auto" and terminal)
    # On a terminal, or coloured for one (`--color always | less -R`), a task's control
    # characters are shown as cat -v shows them (runs/logs.py): none can wipe a prefix.
    printer = Printer(write_log_line, prefix, color, visible=terminal or color)
    connection = (options.kubeconfig, options.context, options.namespace)
    with (
        connect_for(*connection, purpose="read the logs of a run on") as conn,
        pointing_elsewhere(conn),
    ):
        if not options.follow:
            show_logs(conn, options.run, selection, request, printer, say)
            return
        try:
            ending = follow_logs(conn, options.run, selection, request, printer, say)
        except Interrupted as e:
            # Ctrl-C is how a follow ends, as for kubectl logs -f: no message, the signal's code.
            raise SystemExit(e.exit_code) from None
    say(outcome_line(ending))  # RunFailed, exit 1, for any end but success
