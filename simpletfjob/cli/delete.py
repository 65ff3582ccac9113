"""`simpletfjob delete RUN`: delete a run's Jobs and Services."""

from __future__ import annotations

from typing import Any

from simpletfjob.cli.params import make_command
from simpletfjob.options.runs import DeleteOptions


@make_command("delete", DeleteOptions, short_help="Delete a run's Jobs and Services.")
def command(values: dict[str, Any], given: frozenset[str]) -> None:
    """Delete every Job and Service of run RUN (propagation Background).

    Only the run's own objects are deleted, each only if it is still the object
    listed. --wait returns once the Jobs are gone. Exit status: 0 when the run
    is deleted, 1 when it is not there (0 with --ignore-not-found), the cluster
    refuses, or --timeout passes first; 2 for a usage error.

    \b
    Example:
      simpletfjob delete mnist -n ml --wait
      simpletfjob delete mnist -n ml --ignore-not-found   # a CI cleanup step
    """
    from simpletfjob.options.table import check_values
    from simpletfjob.runs.delete import delete_named, deleted_line
    from simpletfjob.runs.objects import check_run_name, connect_for, pointing_elsewhere
    from simpletfjob.streams import say

    options = DeleteOptions(**values)
    check_values(options)
    check_run_name(options.run)
    connection = (options.kubeconfig, options.context, options.namespace)
    with connect_for(*connection, purpose="delete a run from") as conn, pointing_elsewhere(conn):
        found = delete_named(
            conn,
            options.run,
            wait=options.wait,
            timeout=options.timeout,
            ignore_not_found=options.ignore_not_found,
            report=say,
        )
    if found is not None:  # None: as kubectl, nothing to delete, nothing said
        say(deleted_line(*found, waited=options.wait))
