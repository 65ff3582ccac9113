"""`simpletfjob apply TEMPLATE ...`: render a run as `render` does, and apply it to the cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from simpletfjob.cli.params import make_command
from simpletfjob.options.runs import ApplyOptions
from simpletfjob.streams import say

if TYPE_CHECKING:
    from simpletfjob.plan import Plan
    from simpletfjob.runs.apply import AppliedRun


@make_command(
    "apply",
    ApplyOptions,
    short_help="Render TEMPLATE and apply the run to the cluster.",
    omit=("output",),
)
def command(values: dict[str, Any], given: frozenset[str]) -> None:
    """Render TEMPLATE as `render` does, and apply the run to the cluster.

    Nothing is sent unless every document passes the render's checks and the
    server's dry run. Server-side apply (field manager simpletfjob), Services
    first, then Jobs, into the namespace: -n, else the context's, else default.
    A run of the same name that differs (another pod template, a task this
    render lacks) is refused; --replace deletes it first, once the server's
    dry run has accepted every delete and every new object. The same run
    again is applied as unchanged. Fields that another field manager owns
    are refused, naming it; --force-conflicts takes them over.

    \b
    Example:
      simpletfjob apply mnist.yaml --nodes-file hosts -N 3 -n ml
      simpletfjob delete mnist -n ml --wait
    """
    from simpletfjob.template.catalog import prepare_options

    if values["template"] is None:
        raise click.UsageError("missing the TEMPLATE argument", click.get_current_context())
    options = prepare_options(ApplyOptions(**values), given)
    say_applied(options, run(options))


def run(options: ApplyOptions) -> AppliedRun[Plan]:
    """The run applied (runs/apply.py), planned for the namespace it goes to."""
    from simpletfjob.cli.report import plan_explained
    from simpletfjob.kube.connection import Settings
    from simpletfjob.output import spare_inputs_from_stderr
    from simpletfjob.plan import inputs
    from simpletfjob.runs.apply import Choices, apply_run

    spare_inputs_from_stderr(inputs(options))
    # The namespace is written into every document, as the run's DNS names need it.
    return apply_run(
        Settings(
            kubeconfig=options.kubeconfig, context=options.context, namespace=options.namespace
        ),
        lambda namespace: plan_explained(options.replace(namespace=namespace)),
        Choices.of(options),
        report=say,
    )


def say_applied(options: ApplyOptions, applied: AppliedRun[Plan]) -> None:
    """As a render's: warnings once the run has been applied, then the summary line."""
    from simpletfjob.cli.report import summary, tell

    planned = applied.planned
    tell(planned, options.replace(namespace=applied.namespace))
    where = f"run {planned.job} in namespace {applied.namespace}"
    if options.dry_run == "server":
        line = summary(planned.tasks, where, verb="would apply")
        say(f"{line} ({applied.counts()}; server dry run, nothing changed)")
    else:
        line = summary(planned.tasks, where, verb="applied")
        say(f"{line} ({applied.counts()})")
