"""An elastic run (`--min-workers M`): which of its tasks are lost, not its failure (pure).

An elastic run trains on as long as M tasks of its elastic role remain (PyTorch's workers:
torchrun's agents form a smaller world when one goes). Which role that is, and which task
hosts the rendezvous, are the framework's (frameworks/workers.py's `Rules.lost`): a task of
that role whose Job has failed is **Lost** while at least M others remain. It fails nothing,
and the run succeeds when the deciding tasks still in it have all succeeded (at least M of
them, then). When fewer than M would remain, nothing is lost: the failures are the run's, as
in a static run, and the first one decides it.

`run` says a newly lost task in one line (`lost_lines`), spends no restart on it, and
follows the others; a failure of the run (fewer than M left, the rendezvous host) is a
whole-run restart, as in a static run. A task whose pod its node refused, or whose node was
lost past --node-grace, does not fail its Job by itself: `run` lets it go (losing.py), and its
Job, annotated, is read as a failed one here.

The rendezvous host (PyTorch's worker 0) is never lost: its torchrun agent hosts the c10d
store, and no agent goes on without it (pytorch/pytorch#67742). Its failure is the run's.

This module takes tasks and counts, not a `Run` (state.py imports it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from simpletfjob.runs.taskstate import FAILED, LOST, TaskStatus

if TYPE_CHECKING:
    from simpletfjob.frameworks import Framework


def mark_lost(
    tasks: Sequence[TaskStatus], floor: int | None, fw: Framework
) -> tuple[TaskStatus, ...]:
    """The tasks, with those lost under min-workers `floor` in state Lost; as they are without one."""
    if floor is None:
        return tuple(tasks)
    failed = [t.task for t in tasks if t.finished and t.state == FAILED]
    lost = fw.lost(failed, [t.task for t in tasks], floor)
    return tuple(replace(t, state=LOST) if t.task in lost else t for t in tasks)


def still_in(deciders: Iterable[str], tasks: Iterable[TaskStatus]) -> list[str]:
    """The deciding tasks that are not lost."""
    lost = {t.task for t in tasks if t.state == LOST}
    return [d for d in deciders if d not in lost]


def lost_line(tasks: Sequence[TaskStatus], floor: int | None) -> str:
    """' (1 lost; min 2)' after the count of the tasks that succeeded; '' when none is lost."""
    lost = sum(t.state == LOST for t in tasks)
    return f" ({lost} lost; min {floor})" if lost else ""


def lost_lines(
    lines: Iterable[str],
    before: Sequence[TaskStatus] | None,
    after: Sequence[TaskStatus],
    floor: int | None,
) -> list[str]:
    """`changes(before, after)`'s lines (the tasks of the run before and after), each newly
    lost task's said as `run` says it: 'worker-2 lost (exit 137); training goes on with 2 of 3
    workers (min 2)', and then no more."""
    was = {t.task for t in before if t.state == LOST} if before is not None else set()
    said = {}
    for task in after:
        if task.state != LOST or task.task in was:
            continue
        peers = [t for t in after if t.role == task.role]
        left = sum(t.state != LOST for t in peers)
        said[f"{task.task} {LOST}"] = (
            f"{task.task} lost ({_why(task)}); training goes on with {left} of {len(peers)} "
            f"{task.role}s (min {floor})"
        )
    # once said lost, a task's later changes (its Job's reason, its pod gone) are not said
    quiet = tuple(f"{task} " for task in was)
    lines = [line for line in lines if not line.startswith(quiet)] if quiet else list(lines)
    return [next((v for k, v in said.items() if line.startswith(k)), line) for line in lines]


def _why(task: TaskStatus) -> str:
    if task.refused:
        return f"refused by node {task.node}: {task.failure_reason}"
    return (
        f"exit {task.exit_code}" if task.exit_code is not None else task.reason or "its Job failed"
    )
