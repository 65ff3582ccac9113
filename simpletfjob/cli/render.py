"""`simpletfjob render TEMPLATE ...`, also run as `simpletfjob TEMPLATE ...` (the default command)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from simpletfjob.cli.params import make_command, version_option
from simpletfjob.errors import SelectionError, SimpleTFJobError, UsageError
from simpletfjob.options.render import Options
from simpletfjob.streams import say


@make_command(
    "render",
    Options,
    short_help="Render TEMPLATE into the Jobs of a run (the default command).",
    extra=[version_option()],
)
def command(values: dict[str, Any], given: frozenset[str]) -> None:
    """Render TEMPLATE once per TensorFlow task into one multi-document Job stream.

    TEMPLATE is a file, or the name of a built-in template; a file that exists
    wins (write ./NAME to render a file named like a built-in or a command).
    A template's header can give defaults for variables and for --psn, --chief,
    --evaluator, --evaluator-in-cluster, --port, -N, --tasks-per-host and
    --network; the command line wins.
    A built-in's default output is ./NAME_tfjob.yaml.

    \b
    Variables: <<type>> <<index>> <<host>> <<node>> <<port>> <<TF_CONFIG>>
    <<ps_hosts>> <<worker_hosts>> <<chief_hosts>> <<num_tasks>>, and --set values.
    The original tool's {{.type}} {{.index}} {{.host}} {{.TF_CONFIG}} work too.

    \b
    Example:
      simpletfjob mnist.yaml -N 3 -E -o - | kubectl apply -f -
    """
    from simpletfjob.template.catalog import prepare_options
    from simpletfjob.template.values import parse_set

    if values["template"] is None:
        exc = values["exc"]
        context = click.get_current_context()
        if exc is not None and exc.endswith((".yaml", ".yml")):
            raise click.UsageError(
                f"-E took {exc!r} as the exclusion file; put -E after the template, or write -E exc",
                context,
            )
        raise click.UsageError("missing the TEMPLATE argument", context)
    options = Options(**values)
    sets = [parse_set(item) for item in options.set_values]
    write_run(prepare_options(options, given, sets))


def write_run(options: Options) -> None:
    """Plan the run, write its documents where -o says, and say what was written."""
    from simpletfjob.output import destination, refuse_inputs, spare_inputs_from_stderr, write_to
    from simpletfjob.plan import default_output_name, inputs
    from simpletfjob.streams import stream_fd

    spare_inputs_from_stderr(inputs(options))
    if options.output is None:
        if stream_fd(options.template) is not None:
            raise UsageError(
                f"the template is read from {options.template}, so there is no directory to "
                "write beside it; give -o FILE, or -o - for stdout"
            )
        output = os.path.join(
            os.path.dirname(options.template), default_output_name(options.template)
        )
    else:
        output = options.output
    dest = destination(output, directory_hint=default_output_name(options.template))
    refuse_inputs(dest, inputs(options))
    planned = plan_explained(options)
    # Warnings wait until the run has been written: a failure is one line, whatever came
    # before (only --explain's table, asked for, comes with it).
    try:
        write_to(dest, planned.chunks())
    except SimpleTFJobError:
        if options.explain:
            explain(planned.verdicts, planned.tasks, options)
        raise
    tell(planned, options)
    checked = f"; valid for Kubernetes {planned.validated}" if planned.validated else ""
    say(summary(planned.tasks, dest.shown) + checked)


def plan_explained(options: Options) -> Any:
    """The plan; when it fails for want of hosts, --explain's table comes before the error."""
    from simpletfjob.plan import plan

    try:
        return plan(options)
    except SelectionError as e:
        if options.explain and e.verdicts is not None:
            explain(e.verdicts, [], options)
        raise


def tell(planned: Any, options: Options) -> None:
    """Once the run has succeeded: its warnings, with --explain's table where it belongs."""
    from simpletfjob.streams import warn

    early = planned.warned_before_selection
    for message in planned.warnings[:early]:
        warn(message)
    if options.explain:
        explain(planned.verdicts, planned.tasks, options)
    for message in planned.warnings[early:]:
        warn(message)
    for note in planned.notes:
        say(f"simpletfjob: {note}")


def explain(verdicts: Sequence[Any], tasks: Sequence[Any], options: Options) -> None:
    """--explain: the verdicts table, on stderr."""
    from simpletfjob.cli.explain import explain_table

    print(explain_table(verdicts, tasks, limited=options.num != -1), file=sys.stderr)


def summary(tasks: Sequence[Any], destination: str, verb: str = "wrote") -> str:
    """'wrote 3 tasks to out.yaml: 1 ps (h10), 2 worker (h100, h14)'."""
    groups: dict[str, list[str]] = {}
    shared_hosts = len({t.host for t in tasks}) < len(tasks)
    for t in tasks:
        groups.setdefault(t.role, []).append(t.endpoint if shared_hosts else t.host)
    parts = []
    for role, hosts in groups.items():
        shown = ", ".join(hosts[:4]) + (f", ... {len(hosts) - 4} more" if len(hosts) > 4 else "")
        parts.append(f"{len(hosts)} {role} ({shown})")
    noun = "task" if len(tasks) == 1 else "tasks"
    return f"simpletfjob: {verb} {len(tasks)} {noun} to {destination}: " + ", ".join(parts)
