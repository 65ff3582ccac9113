"""What the Python API returns: plain, frozen values made from the runs/ layer's.

States are the words `status` prints (`Pending`, `Running`, `Unknown`, `Succeeded`,
`Failed`, `Deleting`; a run may also be `Ambiguous`). A value the cluster does not tell
(a task with no pod yet has no node) is None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simpletfjob.runs.state import Run as RunState
    from simpletfjob.runs.taskstate import TaskStatus as TaskState

_EXIT = re.compile(r"\(exit (-?\d+)\)")


@dataclass(frozen=True)
class TaskStatus:
    """One task (one Job) of a run, as a row of `simpletfjob status RUN`."""

    name: str  # 'worker-1'
    role: str
    index: int
    state: str
    node: str | None  # where its pod runs; None when not known
    restarts: int | None  # container restarts plus failed pods; None when not known
    exit_code: int | None  # its container's, once it has ended (0 when it succeeded); else None
    reason: str | None  # its last failure ('Error (exit 1)'), or why its pod does not run
    job: str  # its Job's name


@dataclass(frozen=True)
class RunStatus:
    """A run as `simpletfjob status RUN -o json` gives it."""

    name: str
    namespace: str
    state: str
    restarts: int | None  # whole-run restarts that `run` made; None when not known
    max_restarts: int | None  # its --max-restarts
    tasks: tuple[TaskStatus, ...]  # in role order: chief, ps, worker, evaluator
    outcome: str  # one line: 'worker-1 Failed: Error (exit 1)', 'worker-0 Succeeded', 'Running'
    started: datetime | None
    ended: datetime | None

    @property
    def finished(self) -> bool:
        return self.state in ("Succeeded", "Failed")


@dataclass(frozen=True)
class Outcome:
    """How a run ended (`wait`, `run`): succeeded or not, and why; a failure is an Outcome, not an error."""

    name: str
    namespace: str
    state: str  # Succeeded, Failed; Ambiguous or Deleting for a run that cannot be decided
    succeeded: bool
    cause: str | None  # why it failed ('worker-1 Failed: Error (exit 1)'); None when it succeeded
    restarts: int | None  # whole-run restarts made (`run`), None when not known
    message: str  # the line the CLI ends with: 'run mnist succeeded: worker-0 Succeeded'


@dataclass(frozen=True)
class LogLine:
    """One line of a task's log, without its newline."""

    task: str  # 'worker-0' (with all_containers, 'worker-0/sidecar')
    text: str


def task_status(task: TaskState) -> TaskStatus:
    failure = task.failure or task.reason
    found = _EXIT.search(failure) if failure else None
    code = int(found[1]) if found else (0 if task.state == "Succeeded" else None)
    return TaskStatus(
        name=task.task,
        role=task.role,
        index=task.index,
        state=task.state,
        node=task.node or None,
        restarts=task.restarts,
        exit_code=code,
        reason=task.reason or None,
        job=task.job,
    )


def run_status(run: RunState) -> RunStatus:
    known = not run.wrong_restarts
    return RunStatus(
        name=run.name,
        namespace=run.namespace,
        state=run.state,
        restarts=run.restarts[0] if known else None,
        max_restarts=run.restarts[1] if known else None,
        tasks=tuple(task_status(t) for t in run.tasks),
        outcome=run.outcome(),
        started=run.started,
        ended=run.ended,
    )


def outcome(
    run: RunState, message: str, *, cause: str | None = None, restarts: int | None = None
) -> Outcome:
    """The Outcome of a run that ended as `run` says (`cause` for a failure that the state does
    not tell, such as a lost node; `restarts` when counted rather than read from the Jobs)."""
    succeeded = run.state == "Succeeded"
    if restarts is None and not run.wrong_restarts:
        restarts = run.restarts[0]
    return Outcome(
        name=run.name,
        namespace=run.namespace,
        state=run.state if not cause else "Failed",
        succeeded=succeeded and not cause,
        cause=None if succeeded and not cause else (cause or run.outcome()),
        restarts=restarts,
        message=message,
    )
