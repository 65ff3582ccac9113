"""`simpletfjob delete RUN`: delete a run's Jobs and Services."""

from __future__ import annotations

import sys
from typing import Any

from simpletfjob.cli.params import make_command
from simpletfjob.options.runs import DeleteOptions


@make_command("delete", DeleteOptions, short_help="Delete a run's Jobs and Services.")
def command(values: dict[str, Any], given: frozenset[str]) -> None:
    """Delete every Job and Service of run RUN (propagation Background).

    Only objects labelled simpletfjob/job=RUN and managed by simpletfjob are
    deleted. A run that does not exist is an error. --wait returns once the
    Jobs are gone (their pods may still be stopping).

    \b
    Example:
      simpletfjob delete mnist -n ml --wait
    """
    from simpletfjob.options.table import check_values
    from simpletfjob.runs.delete import delete_run, wait_until_gone
    from simpletfjob.runs.objects import check_run_name, connect_for, find_run

    options = DeleteOptions(**values)
    check_values(options)
    check_run_name(options.run)
    connection = (options.kubeconfig, options.context, options.namespace)
    with connect_for(*connection, purpose="delete a run from") as conn:
        run = find_run(conn, options.run)
        deleted = delete_run(conn, run, "Background", lambda line: print(line, file=sys.stderr))
        if options.wait:
            wait_until_gone(conn, run.name, options.timeout)
    jobs, services = len(run.jobs), len(run.services)
    waited = " and its Jobs are gone" if options.wait else ""
    print(
        f"simpletfjob: deleted run {run.name} in namespace {run.namespace} ({deleted} "
        f"{'object' if deleted == 1 else 'objects'}: "
        f"{jobs} {'job' if jobs == 1 else 'jobs'}, {services} "
        f"{'service' if services == 1 else 'services'}){waited}",
        file=sys.stderr,
    )
