"""`simpletfjob render TEMPLATE ...`, also run as `simpletfjob TEMPLATE ...` (the default command)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from simpletfjob.cli.params import make_command, version_option
from simpletfjob.errors import SimpleTFJobError, UsageError
from simpletfjob.options.render import Options
from simpletfjob.streams import say

if TYPE_CHECKING:
    from simpletfjob.plan import Plan

TASK_OPTION = click.Option(
    ["--task"],
    multiple=True,
    metavar="TASK",
    help="Write only this task's documents (worker-1: its Job, and its Service if the run "
    "has one per task), the whole run still planned (TF_CONFIG lists every task); may be "
    "repeated.",
)


@make_command(
    "render",
    Options,
    short_help="Render TEMPLATE into the Jobs of a run (the default command).",
    extra=[TASK_OPTION, version_option()],
)
def command(values: dict[str, Any], given: frozenset[str]) -> None:
    """Render TEMPLATE once per task into one multi-document Job stream.

    TEMPLATE is a file, or a built-in template's name (simpletfjob templates); a
    file that exists wins (./NAME renders a file named like a built-in or a
    command). A template's header may give defaults for its variables and some
    options; the command line wins. The variables a template reads (<<host>>,
    <<TF_CONFIG>>, <<TORCH_ENV>>, <<JAX_ENV>>, ...): docs/templates.md.

    \b
    Example:
      simpletfjob mnist.yaml -N 3 -E -o - | kubectl apply -f -
    """
    from simpletfjob.template.catalog import prepare_options

    only = tuple(dict.fromkeys(values.pop("task", ()) or ()))
    if values["template"] is None:
        exc = values["exc"]
        context = click.get_current_context()
        if exc is not None and exc.endswith((".yaml", ".yml")):
            raise click.UsageError(
                f"-E took {exc!r} as the exclusion file; put -E after the template, or write -E exc",
                context,
            )
        raise click.UsageError("missing the TEMPLATE argument", context)
    write_run(prepare_options(Options(**values), given), only)


def write_run(options: Options, only: Sequence[str] = ()) -> None:
    """Plan the run, write its documents where -o says, and say what was written.
    With `only` (--task), only those tasks' documents are written; the run is planned whole."""
    from simpletfjob.cli.report import explain_plan, plan_explained, tasks_line, tell
    from simpletfjob.output import destination, refuse_inputs, spare_inputs_from_stderr, write_to
    from simpletfjob.plan import default_output_name, inputs
    from simpletfjob.streams import stream_fd

    spare_inputs_from_stderr(inputs(options))
    name = default_output_name(options.template, options.framework)
    if options.output is None:
        if stream_fd(options.template) is not None:
            raise UsageError(
                f"the template is read from {options.template}, so there is no directory to "
                "write beside it; give -o FILE, or -o - for stdout"
            )
        output = os.path.join(os.path.dirname(options.template), name)
    else:
        output = options.output
    dest = destination(output, directory_hint=name)
    refuse_inputs(dest, inputs(options))
    planned = plan_explained(options)
    whole = planned.tasks
    if only:
        planned = only_tasks(planned, only)
    # Warnings wait until the run has been written: a failure is one line, whatever came
    # before (only --explain's table, asked for, comes with it).
    try:
        write_to(dest, planned.chunks())
    except SimpleTFJobError:
        if options.explain:
            explain_plan(planned, options)
        raise
    tell(planned, options)
    checked = f"; valid for Kubernetes {planned.validated}" if planned.validated else ""
    part = f" (of {len(whole)}; the whole run planned)" if only else ""
    say(tasks_line(planned.tasks, dest.shown) + part + checked)


def only_tasks(planned: Plan, only: Sequence[str]) -> Plan:
    """The plan with only the named tasks and their documents; a name of no task is refused."""
    names = [f"{t.role}-{t.index}" for t in planned.tasks]
    unknown = [name for name in only if name not in names]
    if unknown:
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        raise UsageError(f"--task {unknown[0]!r}: the run has no such task; its tasks are {shown}")
    chosen = set(only)
    return planned._replace(
        tasks=[t for t in planned.tasks if f"{t.role}-{t.index}" in chosen],
        documents=[d for d in planned.documents if f"{d.task.role}-{d.task.index}" in chosen],
    )
