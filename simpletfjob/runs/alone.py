"""A task the training does not depend on (a TensorFlow evaluator), restarted alone by `run`.

The framework names such roles (`Framework.independent`); state.py does not fail a run for
them. When one's Job fails, `run` says so with the failing task's lines and classifies the
failure as any other (classify.py). Within the budget, and when --restart-on restarts its
class, it deletes that Job alone (Foreground, until it is gone) and applies the attempt's
plan again: the other objects are unchanged, and only that Job is made anew. Otherwise the
run goes on without it. Either way the run is not restarted and its verdict is not changed.

A restart of a task alone spends one of --max-restarts; the run's restart count (its
annotations, `status`'s `restarts 1/3`, `<<restart>>`) counts whole-run restarts only.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from simpletfjob.errors import ClusterError
from simpletfjob.kube.resources import JOBS

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection
    from simpletfjob.kube.request import Deadline
    from simpletfjob.runs.state import Run

GONE_WITHIN = 300.0  # seconds a task's Job is given to go when the run has no --timeout


class Aside:
    """What `run` did of the independent tasks that failed: restarts made, failures left."""

    def __init__(self) -> None:
        self.made = 0  # restarts of a task alone; they spend the budget
        self.left: set[str] = set()  # uids of failed Jobs reported and not restarted


def delete_task(conn: Connection, run: Run, task: str, deadline: Deadline | None) -> None:
    """Delete one task's Job (Foreground: its pods first) and return once it is gone."""
    from simpletfjob.kube.objects import delete, get
    from simpletfjob.kube.request import Deadline

    found = next((t for t in run.tasks if t.task == task), None)
    if found is None:
        return
    delete(conn, JOBS, found.job, propagation="Foreground", uid=found.uid or None)
    until = deadline or Deadline.after(GONE_WITHIN)
    while True:
        now = get(conn, JOBS, found.job, missing_ok=True, deadline=until)
        if now is None or (now.get("metadata") or {}).get("uid") != found.uid:
            return
        if until.remaining() <= 0:
            raise ClusterError(
                f"job {found.job!r} of run {run.name!r} was not gone within "
                f"{GONE_WITHIN:.0f}s; its pods may still be stopping"
            )
        time.sleep(0.5)
