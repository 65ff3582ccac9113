"""`simpletfjob run TEMPLATE ...`: plan, apply and follow a run to its end, restarting it on failure."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from simpletfjob.cli.params import make_command
from simpletfjob.options.runs import RunOptions

if TYPE_CHECKING:
    from simpletfjob.plan import Plan
    from simpletfjob.runs.objects import Manifest


@make_command(
    "run",
    RunOptions,
    short_help="Apply a run and follow it to its end, restarting it on failure.",
    omit=("output",),
)
def command(values: dict[str, Any], given: frozenset[str]) -> None:
    """Render TEMPLATE as `apply` does, apply the run, and follow it as `wait` does.

    The deciding task's log goes to stdout (--logs). --max-restarts N restarts
    the whole run when it fails. Exit status: 0 succeeded, 1 failed, 2 usage,
    3 --timeout passed; 130, 143 or 129 when interrupted.

    \b
    Example:
      simpletfjob run mnist.yaml -N 3 -n ml --max-restarts 3 --timeout 24h
    """
    from simpletfjob.template.catalog import prepare_options

    if values["template"] is None:
        raise click.UsageError("missing the TEMPLATE argument", click.get_current_context())
    run_command(prepare_options(RunOptions(**values), given))


def run_command(options: RunOptions) -> None:
    from simpletfjob.cli.report import StatusLine, plan_explained, tasks_line, tell, write_log_line
    from simpletfjob.output import spare_inputs_from_stderr
    from simpletfjob.plan import inputs
    from simpletfjob.runs.apply import applied_counts
    from simpletfjob.runs.ending import succeeded_line
    from simpletfjob.runs.logs import Printer
    from simpletfjob.runs.objects import connect_for
    from simpletfjob.runs.queue import empty_nodes
    from simpletfjob.runs.run import run_to_end
    from simpletfjob.streams import say

    spare_inputs_from_stderr(inputs(options))
    connection = (options.kubeconfig, options.context, options.namespace)
    terminal = sys.stdout.isatty()
    printer = Printer(write_log_line, prefix=True, color=terminal, visible=terminal)
    status = StatusLine(options.name or "")  # named by the plan's run once it is followed
    with connect_for(*connection, purpose="run the run on") as conn, status:
        namespace = conn.namespace
        planning = options.replace(namespace=namespace)

        def applied(planned: Plan, done: Sequence[tuple[Manifest, str]]) -> None:
            tell(planned, planning)
            where = f"run {planned.job} in namespace {namespace}"
            say(f"{tasks_line(planned.tasks, where, verb='applied')} ({applied_counts(done)})")

        first = planning if options.queue is None else empty_nodes(planning)  # (queue.py)
        run = run_to_end(
            conn,
            lambda: plan_explained(first),
            planning,
            say=say,
            applied=applied,
            printer=None if options.logs == "none" else printer,
            progress=status,
            replan=lambda restart: plan_explained(planning.replace(restart=restart)),
            waiting=status.queued,
        )
    say(succeeded_line(run))
