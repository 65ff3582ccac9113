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
    from simpletfjob.runs.manifests import Manifest


@make_command(
    "run",
    RunOptions,
    short_help="Apply TEMPLATE's run and follow it to its end, restarting it on failure.",
    omit=("output",),
)
def command(values: dict[str, Any], given: frozenset[str]) -> None:
    """Render TEMPLATE as `apply` does, apply the run, and follow it as `wait` does.

    Each task's changes go to stderr; the logs of the task that decides success (the
    chief, or worker 0) stream to stdout, prefixed (--logs all|none|TASK,...). When the
    run ends, wait's cleanup (--cleanup). Exit status: 0 when it succeeds, 1 when it
    fails, 2 for a usage error, 3 when --timeout passes first (the run is left as it is).

    With --max-restarts N the whole run is restarted, up to N times, when a task's Job
    fails, a node refuses a task's pod (OutOf..., NodeAffinity), or a task's node is
    NotReady or gone for longer than --node-grace: the run is deleted (until its Jobs,
    Services and pods are gone), planned again against the cluster as it is now (a
    lost or busy node is left out), applied and followed again, with one line on stderr.
    The limit and the count are annotations on the run's Jobs (status: restarts 1/3).
    A run that --deadline stopped is not restarted. --restart-on disruption restarts
    only disruptions (a lost node, a pod evicted, refused or deleted, a signal: exit
    128 or more) and the --restart-exit-codes: a program error (exit 1-127) ends the
    run at once. A failed TensorFlow evaluator fails nothing, and is restarted alone.
    Before a restart or the verdict, the failing task's last lines and Warning events.

    An interrupt (SIGINT, SIGTERM, SIGHUP) leaves the run as it is and says what that is
    (applied how far, running, being deleted for a restart, or ended: the verdict, and
    what of the cleanup was left undone) and how to go on (exit 130, 143, 129);
    --on-interrupt delete deletes it instead, and says so once nothing of it is left.

    On a terminal, one status line under the others is kept up to date: the tasks by
    state, their restarts and the time so far (never written when stderr is not a
    terminal).

    \b
    Example:
      simpletfjob run mnist.yaml -N 3 -n ml --max-restarts 3 --timeout 24h
    """
    from simpletfjob.template.catalog import prepare_options

    if values["template"] is None:
        raise click.UsageError("missing the TEMPLATE argument", click.get_current_context())
    run_command(prepare_options(RunOptions(**values), given))


def run_command(options: RunOptions) -> None:
    from simpletfjob.cli.report import StatusLine, plan_explained, summary, tell
    from simpletfjob.output import spare_inputs_from_stderr
    from simpletfjob.plan import inputs
    from simpletfjob.runs.apply import applied_counts
    from simpletfjob.runs.logs import Printer
    from simpletfjob.runs.objects import connect_for
    from simpletfjob.runs.run import run_to_end
    from simpletfjob.streams import say

    spare_inputs_from_stderr(inputs(options))
    connection = (options.kubeconfig, options.context, options.namespace)
    terminal = sys.stdout.isatty()
    printer = Printer(_write, prefix=True, color=terminal, visible=terminal)
    status = StatusLine(options.name or "")  # named by the plan's run once it is followed
    with connect_for(*connection, purpose="run the run on") as conn, status:
        namespace = conn.namespace
        planning = options.replace(namespace=namespace)

        def applied(planned: Plan, done: Sequence[tuple[Manifest, str]]) -> None:
            tell(planned, planning)
            where = f"run {planned.job} in namespace {namespace}"
            say(f"{summary(planned.tasks, where, verb='applied')} ({applied_counts(done)})")

        run = run_to_end(
            conn,
            lambda: plan_explained(planning),
            planning,
            say=say,
            applied=applied,
            printer=None if options.logs == "none" else printer,
            progress=status,
            replan=lambda restart: plan_explained(planning.replace(restart=restart)),
        )
    from simpletfjob.runs.ending import succeeded_line

    say(succeeded_line(run))


def _write(line: bytes) -> None:
    from simpletfjob.output import write_stdout_bytes
    from simpletfjob.streams import status_cleared

    with status_cleared():  # a terminal's status line, off while a task's line is written
        write_stdout_bytes((line,))
