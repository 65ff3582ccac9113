"""`simpletfjob apply TEMPLATE ...`: render a run as `render` does, and apply it to the cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from simpletfjob.cli.params import make_command
from simpletfjob.options.runs import ApplyOptions
from simpletfjob.streams import say

if TYPE_CHECKING:
    from collections.abc import Callable

    from simpletfjob.kube.connection import Settings
    from simpletfjob.plan import Plan
    from simpletfjob.runs.apply import AppliedRun, Choices, Preview


@make_command(
    "apply",
    ApplyOptions,
    short_help="Render TEMPLATE and apply the run to the cluster.",
    omit=("output",),
)
def command(values: dict[str, Any], given: frozenset[str]) -> None:
    """Render TEMPLATE as `render` does, and apply the run to the cluster.

    Nothing is sent unless every document passes the render's checks and the
    server's dry run; then server-side apply (field manager simpletfjob),
    Services first, into the namespace: -n, else the context's, else default.
    A run of the same name that differs is refused; --replace deletes it first.
    --dry-run=client prints the objects it would send, and sends nothing.

    \b
    Example:
      simpletfjob apply mnist.yaml --nodes-file hosts -N 3 -n ml
      simpletfjob delete mnist -n ml --wait
    """
    from simpletfjob.template.catalog import prepare_options

    if values["template"] is None:
        raise click.UsageError("missing the TEMPLATE argument", click.get_current_context())
    options = prepare_options(ApplyOptions(**values), given)
    if options.dry_run == "client":
        say_applied(options, preview(options), "would apply", "; client dry run, nothing sent")
    elif options.dry_run == "server":
        say_applied(options, run(options), "would apply", "; server dry run, nothing changed")
    else:
        say_applied(options, run(options))


def run(options: ApplyOptions) -> AppliedRun[Plan]:
    """The run applied (runs/apply.py), planned for the namespace it goes to."""
    from simpletfjob.runs.apply import apply_run

    cluster, planned, choices = _prepared(options)
    if options.queue is not None:  # applied at its turn (runs/queue.py)
        from simpletfjob.cli.report import StatusLine, plan_explained
        from simpletfjob.runs.queue import apply_queued

        with StatusLine(options.name or "") as status:
            return apply_queued(cluster, options, plan_explained, say, status.queued)
    return apply_run(cluster, planned, choices, report=say)


def preview(options: ApplyOptions) -> Preview[Plan]:
    """--dry-run=client: what apply would send (runs/apply.py), on stdout as kubectl -o yaml
    prints it; nothing is sent."""
    import yaml

    from simpletfjob.output import write_stdout
    from simpletfjob.runs.apply import preview_run

    previewed = preview_run(*_prepared(options), report=say)
    objects = previewed.objects
    write_stdout([yaml.safe_dump_all(objects, sort_keys=False, width=1 << 30, allow_unicode=True)])
    return previewed


def _prepared(options: ApplyOptions) -> tuple[Settings, Callable[[str], Plan], Choices]:
    """The cluster, the plan for a namespace, and apply's choices; the inputs spared first."""
    from simpletfjob.cli.report import plan_explained
    from simpletfjob.kube.connection import Settings
    from simpletfjob.output import spare_inputs_from_stderr
    from simpletfjob.plan import inputs
    from simpletfjob.runs.apply import Choices

    spare_inputs_from_stderr(inputs(options))
    cluster = Settings(
        kubeconfig=options.kubeconfig, context=options.context, namespace=options.namespace
    )
    # The namespace is written into every document, as the run's DNS names need it.
    return (
        cluster,
        lambda namespace: plan_explained(options.replace(namespace=namespace)),
        Choices.of(options),
    )


def say_applied(
    options: ApplyOptions,
    applied: AppliedRun[Plan] | Preview[Plan],
    verb: str = "applied",
    note: str = "",
) -> None:
    """As a render's: warnings once the run has been applied, then the summary line."""
    from simpletfjob.cli.report import tasks_line, tell

    planned = applied.planned
    tell(planned, options.replace(namespace=applied.namespace))
    where = f"run {planned.job} in namespace {applied.namespace}"
    say(f"{tasks_line(planned.tasks, where, verb=verb)} ({applied.counts()}{note})")
