"""`simpletfjob status [RUN]`: one run's tasks, or every run in the namespace."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from simpletfjob.cli.params import make_command
from simpletfjob.options.runs import StatusOptions

if TYPE_CHECKING:
    from simpletfjob.runs.state import Run


@make_command(
    "status",
    StatusOptions,
    short_help="Show a run's tasks, or every run in the namespace.",
)
def command(values: dict[str, Any], given: frozenset[str]) -> None:
    """Show the tasks of RUN (the simpletfjob/job label), or without RUN every run in the namespace.

    The run's state: Succeeded when the chief's Job is complete, with no chief worker 0's
    (--success-policy worker0) or every worker's (all-workers); Failed as soon as a task's
    Job has failed; else Running when a pod runs, else Pending. Exits 0 whatever the state;
    1 when there is no such run.

    \b
    Example:
      simpletfjob status mnist -n ml
    """
    from simpletfjob.output import write_stdout
    from simpletfjob.runs.objects import check_run_name, connect_for
    from simpletfjob.runs.watch import read_run, read_runs

    options = StatusOptions(**values)
    if options.run is not None:
        check_run_name(options.run)
    connection = (options.kubeconfig, options.context, options.namespace)
    with connect_for(*connection, purpose="read runs from") as conn:
        namespace = conn.namespace
        runs = read_runs(conn) if options.run is None else [read_run(conn, options.run)]
    if options.output != "table":
        data: Any = (
            runs[0].as_dict()
            if options.run is not None
            else {"namespace": namespace, "runs": [r.as_dict() for r in runs]}
        )
        write_stdout([_dump(data, options.output)])
    elif options.run is not None:
        write_stdout(_one_run(runs[0]))
    elif runs:
        write_stdout(_every_run(runs))
    else:
        print(f"No runs found in {namespace} namespace.", file=sys.stderr)  # as kubectl says it


def _dump(data: Any, form: str) -> str:
    if form == "json":
        return json.dumps(data, indent=2) + "\n"
    import yaml

    return str(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))


def _one_run(run: Run) -> list[str]:
    from simpletfjob.runs.state import age

    count = len(run.tasks)
    head = (
        f"run {run.name} in {run.namespace}: {run.state}, {count} task{'s' if count != 1 else ''}"
    )
    if run.finished and run.decided_by:
        head += f" ({run.outcome()})"
    rows = [
        (t.task, t.node or "<none>", t.state, str(t.restarts), age(t.created), t.reason)
        for t in run.tasks
    ]
    return [head + "\n", *columns(("TASK", "NODE", "STATE", "RESTARTS", "AGE", "REASON"), rows)]


def _every_run(runs: Sequence[Run]) -> list[str]:
    from simpletfjob.runs.state import FAILED, PENDING, RUNNING, SUCCEEDED, age

    rows = [
        (
            r.name,
            str(len(r.tasks)),
            str(r.count(PENDING, RUNNING)),
            str(r.count(SUCCEEDED)),
            str(r.count(FAILED)),
            r.state,
            age(r.created),
        )
        for r in runs
    ]
    return columns(("NAME", "TASKS", "ACTIVE", "SUCCEEDED", "FAILED", "STATE", "AGE"), rows)


def columns(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows in columns three spaces apart, as kubectl prints them; no trailing blanks."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return [
        "   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        + "\n"
        for row in [header, *rows]
    ]
