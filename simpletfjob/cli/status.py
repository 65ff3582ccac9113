"""`simpletfjob status [RUN]`: one run's tasks, or every run in the namespace."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from simpletfjob.cli.params import make_command
from simpletfjob.options.runs import StatusOptions

if TYPE_CHECKING:
    from datetime import datetime

    from simpletfjob.kube.connection import Connection
    from simpletfjob.runs.state import Claim, Run, TaskStatus


@make_command(
    "status",
    StatusOptions,
    short_help="Show a run's tasks, or every run in the namespace.",
)
def command(values: dict[str, Any], given: frozenset[str]) -> None:
    """Show the tasks of RUN (the simpletfjob/job label), or without RUN every run in the namespace.

    A run is Succeeded, Failed, Running, Unknown, Pending, Ambiguous or
    Deleting, as wait judges it; a failed run is explained on stderr after the
    table. -w follows it until it ends and exits as wait does; otherwise the
    exit status is 0 whatever the state, 1 when there is no such run.

    \b
    Example:
      simpletfjob status mnist -n ml
      simpletfjob status mnist -n ml -o name | xargs kubectl describe -n ml
    """
    from simpletfjob.kube.resources import JOBS
    from simpletfjob.output import write_stdout
    from simpletfjob.runs.ending import read_status
    from simpletfjob.runs.objects import NoRunError, check_run_name, connect_for, pointing_elsewhere
    from simpletfjob.runs.queue import place_of
    from simpletfjob.runs.watch import read_runs
    from simpletfjob.streams import say

    options = StatusOptions(**values)
    options.check()
    if options.run is not None:
        check_run_name(options.run)
    connection = (options.kubeconfig, options.context, options.namespace)
    notes: list[str] = []
    table = options.output == "table"
    with connect_for(*connection, purpose="read runs from") as conn, pointing_elsewhere(conn):
        namespace = conn.namespace
        if options.watch:
            assert options.run is not None  # options.check
            _watch(conn, options.run, options.tail_on_failure)
            return
        if options.run is None:
            runs = read_runs(conn, options.all_namespaces)
        else:  # the table's notes: what REASON cuts short, in full; a failure explained
            tail = options.tail_on_failure if table else None
            try:
                found, notes = read_status(conn, options.run, tail, stuck=table)
            except NoRunError:  # no Jobs: waiting in a queue, perhaps (runs/queue.py)
                place = place_of(conn, options.run, options.queue_namespace)
                if place is None:
                    raise
                return _queued(options, namespace, place)
            runs = [found]
    if options.output == "name":
        write_stdout([f"{JOBS.ref(task.job)}\n" for run in runs for task in run.tasks])
        if not runs:
            say(_no_runs(namespace, options.all_namespaces))
    elif options.output != "table":
        data: Any = (
            runs[0].as_dict()
            if options.run is not None
            else {
                "namespace": None if options.all_namespaces else namespace,
                "runs": [r.as_dict() for r in runs],
            }
        )
        write_stdout([_dump(data, options.output)])
    elif options.run is not None:
        write_stdout(_one_run(runs[0]))
        sys.stdout.flush()  # the table, then what stderr adds to it
    elif runs:
        write_stdout(_every_run(runs, options.all_namespaces))
    else:
        say(_no_runs(namespace, options.all_namespaces))  # as kubectl says it
    for line in notes:
        say(line)


def _queued(options: StatusOptions, namespace: str, place: dict[str, Any]) -> None:
    """A run that waits in a queue: its state Queued, and its place."""
    from simpletfjob.output import write_stdout
    from simpletfjob.runs.queue import ordinal

    run = {"name": options.run, "namespace": namespace, "state": "Queued", "queue": place}
    if options.output in ("json", "yaml"):
        write_stdout([_dump({**run, "tasks": []}, options.output)])
    elif options.output == "table":
        where = f'{ordinal(place["position"])} of {place["of"]} in queue "{place["name"]}"'
        write_stdout([f"run {options.run} in {namespace}: Queued, 0 tasks ({where})\n"])


def _no_runs(namespace: str, every: bool) -> str:
    return "No runs found." if every else f"No runs found in {namespace} namespace."


def _watch(conn: Connection, name: str, tail: int) -> None:
    """The table, then a task's row again whenever it changes, until the run ends (as wait exits)."""
    from simpletfjob.output import write_stdout
    from simpletfjob.runs.ending import succeeded_line, watch_status
    from simpletfjob.streams import say

    shown: dict[str, tuple[str, ...]] = {}
    widths: list[int] = []

    def show(run: Run) -> None:
        nonlocal shown, widths
        rows = {row[0]: row for row in _rows(run)}
        if not widths:
            widths = _widths([HEADER, *rows.values()])
            write_stdout(_one_run(run))
        else:  # AGE aside: it changes every second, as kubectl get -w does not print
            changed = [
                r
                for t, r in rows.items()
                if shown.get(t, ())[:4] + shown.get(t, ())[5:] != r[:4] + r[5:]
            ]
            write_stdout([_line(r, widths) for r in changed])
        sys.stdout.flush()
        shown = rows

    say(succeeded_line(watch_status(conn, name, tail, show, say)))


def _dump(data: Any, form: str) -> str:
    if form == "json":
        return json.dumps(data, indent=2) + "\n"
    import yaml

    return str(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))


def _one_run(run: Run) -> list[str]:
    from simpletfjob.kube.outage import go_duration
    from simpletfjob.runs.progress import progress_line, restarts_words
    from simpletfjob.runs.state import AMBIGUOUS, DELETING
    from simpletfjob.runs.taskstate import rfc3339

    count = len(run.tasks)
    head = (
        f"run {run.name} in {run.namespace}: {run.state}, {count} task{'s' if count != 1 else ''}"
    )
    if (run.finished and run.decided_by) or run.state in (AMBIGUOUS, DELETING):
        head += f" ({run.outcome()})"
    if run.restarts[1]:  # a run that `run --max-restarts` applied
        head += f", {restarts_words(run.restarts[0], run.in_a_row, run.restarts[1])}"
    elif run.wrong_restarts:  # its annotations tampered with
        head += f", restarts not known ({run.wrong_restarts})"
    if run.started is not None:
        head += f"; started {rfc3339(run.started)}"
    if run.ended is not None:
        took = (
            ""
            if run.started is None
            else f" ({go_duration((run.ended - run.started).total_seconds())})"
        )
        head += f", ended {rfc3339(run.ended)}{took}"
    lines = [_one_line(head) + "\n"]
    if run.progress is not None:  # its reporting task's (runs/reporting.py)
        lines.append(_one_line(progress_line(run.progress, time.time(), run.progress.trend)) + "\n")
    return [*lines, *columns(HEADER, _rows(run))]


HEADER = ("TASK", "NODE", "STATE", "RESTARTS", "AGE", "REASON")


def _rows(run: Run) -> list[tuple[str, ...]]:
    """The table's row of each task."""
    claimed = {job: claim for claim in run.claims for job in claim.jobs}
    return [
        (
            t.task,
            _one_line(t.node or "<none>"),
            t.state,
            "-" if t.restarts is None else str(t.restarts),  # not known: its pod is gone
            age(t.created),
            _one_line(_reason(t, claimed)),
        )
        for t in run.tasks
    ]


def _one_line(text: str) -> str:
    """Server text (a node, a reason) as one line, its control characters shown (streams.shown)."""
    from simpletfjob.streams import shown

    return shown(text, sys.stdout.isatty())


def _widths(rows: Sequence[Sequence[str]]) -> list[int]:
    return [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]


def _line(row: Sequence[str], widths: Sequence[int], gap: str = "   ") -> str:
    return (
        gap.join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() + "\n"
    )


def _reason(task: TaskStatus, claimed: Mapping[str, Claim]) -> str:
    """The task's reason; for a task that several Jobs claim, which Job this row is first."""
    from simpletfjob.runs.state import FAILED, SUCCEEDED

    claim = claimed.get(task.job)
    reason = task.reason
    if task.state in (SUCCEEDED, FAILED) and not task.finished:  # what its pod says
        reason = "; ".join(filter(None, [reason, "its Job has yet to count it"]))
    if claim is None:
        return reason
    which = f"one of {len(claim.jobs)} Jobs: {task.job}"
    if task.copied_from:
        which += f", a copy of {task.copied_from}"
    return which + (f"; {reason}" if reason else "")


def _every_run(runs: Sequence[Run], every_namespace: bool = False) -> list[str]:
    from simpletfjob.runs.state import DELETING, FAILED, SUCCEEDED

    def ended(run: Run, state: str) -> str:  # by its Job's condition
        return str(sum(t.finished and t.state == state for t in run.tasks))

    rows = [
        (
            *((r.namespace,) if every_namespace else ()),
            r.name,
            str(len(r.tasks)),
            str(sum(not t.finished and t.state != DELETING for t in r.tasks)),
            ended(r, SUCCEEDED),
            ended(r, FAILED),
            r.state,
            age(r.created),
        )
        for r in runs
    ]
    header = ("NAME", "TASKS", "ACTIVE", "SUCCEEDED", "FAILED", "STATE", "AGE")
    return columns((*(("NAMESPACE",) if every_namespace else ()), *header), rows)


def columns(header: Sequence[str], rows: Sequence[Sequence[str]], gap: str = "   ") -> list[str]:
    """Rows in columns `gap` apart (three spaces, as kubectl prints them); no trailing blanks."""
    widths = _widths([header, *rows])
    return [_line(row, widths, gap) for row in [header, *rows]]


def age(created: datetime | None, now: datetime | None = None) -> str:
    """An age as kubectl prints it: 45s, 3m20s, 45m, 3h20m, 20h, 3d4h, 30d, 2y; '<unknown>' without one."""
    if created is None:
        return "<unknown>"
    from datetime import datetime, timezone

    seconds = int(((now or datetime.now(timezone.utc)) - created).total_seconds())
    if seconds < 0:
        return "0s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y"
