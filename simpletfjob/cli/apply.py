"""`simpletfjob apply TEMPLATE ...`: render a run as `render` does, and apply it to the cluster."""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

import click

from simpletfjob.cli.params import make_command
from simpletfjob.options.render import check_options
from simpletfjob.options.runs import ApplyOptions


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
    from simpletfjob.template.values import parse_set

    if values["template"] is None:
        raise click.UsageError("missing the TEMPLATE argument", click.get_current_context())
    options = ApplyOptions(**values)
    check_options(options)  # --no-labels and the like, before the template or a cluster is read
    from simpletfjob.options.runs import LIMIT_RULES

    sets = [parse_set(item) for item in options.set_values]
    options = prepare_options(options, given, sets)
    for rule in LIMIT_RULES:  # once the header and the framework have given the policy
        rule(options)
    apply_run(options)


def apply_run(options: ApplyOptions) -> None:
    """Plan the run for the namespace it goes to, apply it, and say what was applied."""
    from simpletfjob.cli.report import plan_explained, summary, tell
    from simpletfjob.output import spare_inputs_from_stderr
    from simpletfjob.plan import inputs
    from simpletfjob.runs.apply import apply_manifests, manifests
    from simpletfjob.runs.limits import add_limits
    from simpletfjob.runs.objects import connect_for

    spare_inputs_from_stderr(inputs(options))

    connection = (options.kubeconfig, options.context, options.namespace)
    with connect_for(*connection, purpose="apply the run to") as conn:
        namespace = conn.namespace
        # The namespace is written into every document, as the run's DNS names need it.
        options = options.replace(namespace=namespace)
        planned = plan_explained(options)
        assert planned.job is not None  # labels are on: check_options refused --no-labels
        documents = (
            (d.text, f"document {i} ({d.id})") for i, d in enumerate(planned.documents, start=1)
        )
        wanted = manifests(documents, planned.job, namespace)  # refused in one line, if at all
        owner = add_limits(wanted, deadline=options.deadline, cleanup_after=options.cleanup_after)
        if owner is not None:
            owner.known(conn)
        done = apply_manifests(
            conn,
            planned.job,
            wanted,
            replace=options.replace_run,
            dry_run=options.dry_run == "server",
            timeout=options.timeout,
            report=lambda line: print(line, file=sys.stderr),
            force=options.force_conflicts,
            applied=owner.applied if owner is not None else lambda m, obj: None,
        )
    # As a render's: warnings once the run has been applied, so that a failure is its lines alone.
    tell(planned, options)
    counts = Counter(outcome for _, outcome in done)
    outcomes = ", ".join(
        f"{counts[word]} {word}" for word in ("created", "configured", "unchanged") if counts[word]
    )
    where = f"run {planned.job} in namespace {namespace}"
    if options.dry_run == "server":
        line = summary(planned.tasks, where, verb="would apply")
        print(f"{line} ({outcomes}; server dry run, nothing changed)", file=sys.stderr)
    else:
        print(f"{summary(planned.tasks, where, verb='applied')} ({outcomes})", file=sys.stderr)
