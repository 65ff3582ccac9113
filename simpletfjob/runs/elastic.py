"""An elastic PyTorch run (`--min-workers M`): which of its workers are lost, not its failure (pure).

An elastic run trains on as long as M of its workers remain: torchrun's agents form a
smaller world when one goes. So a worker whose Job has failed is **Lost** while at least M
others are still in the run: it fails nothing, and the run succeeds when the workers still in
it have all succeeded (at least M of them, then). When fewer than M would remain, nothing is
lost: the failures are the run's, as in a static run, and the first one decides it.

`run` says a newly lost worker in one line (`lost_lines`), spends no restart on it, and
follows the others; a failure of the run (fewer than M left, worker 0) is a whole-run
restart, as in a static run. Only a worker whose Job has failed is lost: a pod the node
refused, or a node lost past --node-grace, is still a whole-run restart.

Worker 0 is never lost: its torchrun agent hosts the c10d rendezvous store, and no agent goes
on without it (pytorch/pytorch#67742). Its failure is the run's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from simpletfjob.runs.taskstate import FAILED, LOST, TaskStatus

if TYPE_CHECKING:
    from simpletfjob.runs.state import Run

WORKER = "worker"


def mark_lost(tasks: Sequence[TaskStatus], floor: int | None) -> tuple[TaskStatus, ...]:
    """The tasks, with the workers lost under min-workers `floor` in state Lost; as they are without one."""
    if floor is None:
        return tuple(tasks)
    workers = [t for t in tasks if t.role == WORKER]
    failed = [t for t in workers if t.finished and t.state == FAILED]
    if not failed or any(t.index == 0 for t in failed) or len(workers) - len(failed) < floor:
        return tuple(tasks)
    lost = {t.task for t in failed}
    return tuple(replace(t, state=LOST) if t.task in lost else t for t in tasks)


def still_in(deciders: Iterable[str], tasks: Iterable[TaskStatus]) -> list[str]:
    """The deciding tasks that are not lost."""
    lost = {t.task for t in tasks if t.state == LOST}
    return [d for d in deciders if d not in lost]


def lost_line(tasks: Sequence[TaskStatus], floor: int | None) -> str:
    """' (1 lost; min 2)' after the count of the workers that succeeded; '' when none is lost."""
    lost = sum(t.state == LOST for t in tasks)
    return f" ({lost} lost; min {floor})" if lost else ""


def lost_lines(lines: Iterable[str], before: Run | None, after: Run) -> list[str]:
    """`changes(before, after)`'s lines, each newly lost worker's said as `run` says it:
    'worker-2 lost (exit 137); training goes on with 2 of 3 workers (min 2)', and then no more."""
    was = {t.task for t in before.tasks if t.state == LOST} if before is not None else set()
    workers = [t for t in after.tasks if t.role == WORKER]
    left = sum(t.state != LOST for t in workers)
    said = {
        f"{t.task} {LOST}": f"{t.task} lost ({_why(t)}); training goes on with {left} of "
        f"{len(workers)} workers (min {after.min_workers})"
        for t in workers
        if t.state == LOST and t.task not in was
    }
    # once said lost, a worker's later changes (its Job's reason, its pod gone) are not said
    quiet = tuple(f"{task} " for task in was)
    lines = [line for line in lines if not line.startswith(quiet)] if quiet else list(lines)
    return [next((v for k, v in said.items() if line.startswith(k)), line) for line in lines]


def _why(task: TaskStatus) -> str:
    return (
        f"exit {task.exit_code}" if task.exit_code is not None else task.reason or "its Job failed"
    )
