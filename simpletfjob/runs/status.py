"""`status RUN` and `status -w`: one run read as it is now, or followed until it ends.

The command prints; these read, and hand each state of the run to the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from simpletfjob.errors import RunFailed
from simpletfjob.runs.ending import End, explain_failure, failed_line, follow_to_end, undecided
from simpletfjob.runs.failure import explain, stuck_reasons
from simpletfjob.runs.state import FAILED, Run

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection


def read_status(
    conn: Connection, name: str, tail: int | None, stuck: bool = False
) -> tuple[Run, list[str]]:
    """`status RUN`: the run as it is now, with its stuck tasks' reasons, and the notes that come
    after it (events that could not be read; with `stuck`, each stuck task's reason in full, as
    the table's REASON column cuts it short; with `tail`, a failed run explained as `explain`
    does)."""
    from simpletfjob.runs.reporting import Tail
    from simpletfjob.runs.taskstate import stuck_lines
    from simpletfjob.runs.watch import read_run

    progress = Tail(conn)  # the reporting task's last lines, read beside the events
    run, note = stuck_reasons(conn, read_run(conn, name, progress.start))
    run = progress.into(run)
    notes = [note] if note else []
    if stuck:
        notes += stuck_lines(run.tasks)
    if tail is not None and run.state == FAILED:
        notes += explain(conn, run, tail)
    return run, notes


def watch_status(
    conn: Connection, name: str, tail: int, show: Callable[[Run], None], say: Callable[[str], None]
) -> Run:
    """`status -w`: each state of the run to `show` (the first, then each change) until it ends,
    riding out an outage; the run, succeeded. A failed run is explained (`say`) before
    RunFailed; one that cannot be decided is RunFailed at once, as `wait` says it."""
    from simpletfjob.kube.outage import riding_out

    with riding_out(conn, None, say, "it is back (no --timeout)"):
        ending = follow_to_end(conn, name, None, on_change=show)
        run = ending.run
        assert run is not None and ending.end != End.TIMED_OUT  # no deadline: it ended
        if ending.end == End.UNDECIDED:
            raise RunFailed(undecided(run, None), run=run, cause=ending.cause)
        for line in explain_failure(conn, run, ending.cause, tail):
            say(line)
    if not ending.succeeded:
        raise RunFailed(failed_line(run), run=run, cause=ending.cause)
    return run
