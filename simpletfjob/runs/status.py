"""`status RUN` and `status -w`: one run read as it is now, or followed until it ends.

The command prints; these read, and hand each state of the run to the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from simpletfjob.runs.failure import explain, stuck_reasons
from simpletfjob.runs.state import AMBIGUOUS, DELETING, FAILED, SUCCEEDED, Run

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection


def read_status(conn: Connection, name: str, tail: int | None) -> tuple[Run, list[str]]:
    """`status RUN`: the run as it is now, with its stuck tasks' reasons, and the notes that come
    after it (events that could not be read; with `tail`, a failed run explained as `explain` does)."""
    from simpletfjob.runs.watch import read_run

    run, note = stuck_reasons(conn, read_run(conn, name))
    notes = [note] if note else []
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
    from simpletfjob.runs.wait import RunFailed, failed_line, undecided
    from simpletfjob.runs.watch import follow

    last: Run | None = None
    with riding_out(conn, None, say, "it is back (no --timeout)"):
        for run in follow(conn, name, None):
            show(run)
            last = run
        if last is not None and last.state in (AMBIGUOUS, DELETING):
            raise RunFailed(undecided(last, None), run=last)
        if last is not None and last.state != SUCCEEDED:
            for line in explain(conn, last, tail):
                say(line)
    assert last is not None
    if last.state != SUCCEEDED:
        raise RunFailed(failed_line(last), run=last)
    return last
