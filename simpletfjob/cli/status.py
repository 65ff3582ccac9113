"""`simpletfjob status [RUN]`: one run's tasks, or every run in the namespace."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from simpletfjob.cli.params import make_command
from simpletfjob.options.runs import StatusOptions

if TYPE_CHECKING:
    from simpletfjob.runs.state import Claim, Run, Task


@make_command(
    "status",
    StatusOptions,
    short_help="Show a run's tasks, or every run in the namespace.",
)
def command(values: dict[str, Any], given: frozenset[str]) -> None:
    """Show the tasks of RUN (the simpletfjob/job label), or without RUN every run in the namespace.

    The run's state: Succeeded when the chief's Job is complete, with no chief worker 0's
    (--success-policy worker0) or every worker's (all-workers); Failed when a task's Job
    has failed, unless the run had succeeded by then (success wins a tie: the same
    second); else Running when a pod runs, else Unknown when a pod's node is lost, else
    Pending. Ambiguous when several Jobs claim one task (they are named), Deleting when
    every Job of the run is being deleted. Exits 0 whatever the state; 1 when there is no
    such run.

    -o name prints one job.batch/NAME line per task's Job, as kubectl get -o name does,
    in the table's order (runs by name, then tasks by role and index): the Jobs only,
    since the tasks are Jobs (a run's Services, if any, carry the same names).

    A run that `run --max-restarts` applied shows its whole-run restarts on its line
    (restarts 1/3; in -o json, restarts and maxRestarts).

    \b
    Example:
      simpletfjob status mnist -n ml
      simpletfjob status mnist -n ml -o name | xargs kubectl describe -n ml
    """
    from simpletfjob.kube.resources import JOBS
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
    if options.output == "name":
        write_stdout([f"{JOBS.ref(task.job)}\n" for run in runs for task in run.tasks])
        if not runs:
            print(f"No runs found in {namespace} namespace.", file=sys.stderr)
    elif options.output != "table":
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
    from simpletfjob.runs.state import AMBIGUOUS, DELETING, age

    count = len(run.tasks)
    head = (
        f"run {run.name} in {run.namespace}: {run.state}, {count} task{'s' if count != 1 else ''}"
    )
    if (run.finished and run.decided_by) or run.state in (AMBIGUOUS, DELETING):
        head += f" ({run.outcome()})"
    if run.restarts[1]:  # a run that `run --max-restarts` applied
        head += f", restarts {run.restarts[0]}/{run.restarts[1]}"
    claimed = {job: claim for claim in run.claims for job in claim.jobs}
    rows = [
        (t.task, t.node or "<none>", t.state, str(t.restarts), age(t.created), _reason(t, claimed))
        for t in run.tasks
    ]
    return [head + "\n", *columns(("TASK", "NODE", "STATE", "RESTARTS", "AGE", "REASON"), rows)]


def _reason(task: Task, claimed: Mapping[str, Claim]) -> str:
    """The task's reason; for a task that several Jobs claim, which Job this row is first."""
    claim = claimed.get(task.job)
    if claim is None:
        return task.reason
    which = f"one of {len(claim.jobs)} Jobs: {task.job}"
    if task.copied_from:
        which += f", a copy of {task.copied_from}"
    return which + (f"; {task.reason}" if task.reason else "")


def _every_run(runs: Sequence[Run]) -> list[str]:
    from simpletfjob.runs.state import FAILED, PENDING, RUNNING, SUCCEEDED, UNKNOWN, age

    rows = [
        (
            r.name,
            str(len(r.tasks)),
            str(r.count(PENDING, RUNNING, UNKNOWN)),
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
