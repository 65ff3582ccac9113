"""What the Python API returns: plain, frozen values made from the runs/ layer's.

States are a `State`, a `str` enum of the words `status` prints (`Pending`, `Running`,
`Unknown`, `Succeeded`, `Failed`, `Deleting`; a run may also be `Ambiguous`, or `Queued`
while it waits in a queue), so that
`state == "Succeeded"` holds. Why a run failed is a `Cause`, made from runs/classify.py's,
never read back out of a message. A value the cluster does not tell (a task with no pod
yet has no node) is None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    from simpletfjob.runs.classify import Cause as Classified
    from simpletfjob.runs.progress import Progress as ProgressState
    from simpletfjob.runs.state import Run as RunState
    from simpletfjob.runs.taskstate import TaskStatus as TaskState

_EXIT = re.compile(r"\(exit (-?\d+)\)")


class State(str, Enum):
    """A run's or a task's state, as `status` prints it. A str: `State.RUNNING == "Running"`."""

    PENDING = "Pending"
    RUNNING = "Running"
    UNKNOWN = "Unknown"  # its pod's node is lost
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    DELETING = "Deleting"
    AMBIGUOUS = "Ambiguous"  # a run: several Jobs claim one of its tasks
    QUEUED = "Queued"  # a run waiting in a queue (apply --queue), with no Jobs yet

    def __str__(self) -> str:
        return self.value

    @property
    def finished(self) -> bool:
        return self in (State.SUCCEEDED, State.FAILED)


class CauseKind(str, Enum):
    """What made a run fail. A str: `CauseKind.TASK_FAILED == "task failed"`."""

    TASK_FAILED = "task failed"  # a task's Job failed
    REFUSED = "refused"  # a node refused a task's pod (OutOfcpu, NodeAffinity, ...)
    NODE_LOST = "node lost"  # a task's node NotReady or gone for longer than node_grace
    GONE = "gone"  # the deciding task's Job was deleted before its end was seen
    UNDECIDED = "undecided"  # several Jobs claim a task, or the run is being deleted
    STALLED = "stalled"  # no new step within stall_timeout (a disruption: run restarts it)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Cause:
    """Why a run failed (or has no verdict); `str(cause)` is the one line the CLI prints for it:
    'worker-1 Failed: Error (exit 1)', 'worker-0 refused by node h2: OutOfcpu'."""

    kind: CauseKind
    tasks: tuple[str, ...]  # the tasks it names, the failing one first
    node: str | None  # the node it names (a refusal, a lost node; a failed task's), else None
    text: str
    exit_code: int | None  # the failing container's, when it is known
    category: str  # 'program error', 'disruption', 'deadline' or 'final' (what run restarts)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class TaskStatus:
    """One task (one Job) of a run, as a row of `simpletfjob status RUN`."""

    name: str  # 'worker-1'
    role: str
    index: int
    state: State
    node: str | None  # where its pod runs; None when not known
    restarts: int | None  # container restarts plus failed pods; None when not known
    exit_code: int | None  # its container's, once it has ended (0 when it succeeded); else None
    reason: str | None  # its last failure ('Error (exit 1)'), or why its pod does not run
    job: str  # its Job's name


@dataclass(frozen=True)
class Progress:
    """How far a run's training has gone, as its reporting task's log tells it (`status`'s
    progress line; docs/runs.md#progress). What cannot be known is None; a metric that is not
    finite (a diverged loss) is None."""

    task: str  # the reporting task: 'worker-0'
    step: int
    total: int | None
    epoch: int | None  # from 1
    epochs: int | None
    percent: float | None  # 0 to 100, over the whole fit
    metrics: Mapping[str, float | None]
    steps_per_second: float | None
    eta_seconds: float | None
    updated: datetime | None  # when its step was first seen (UTC)


@dataclass(frozen=True)
class RunStatus:
    """A run as `simpletfjob status RUN -o json` gives it."""

    name: str
    namespace: str
    state: State
    restarts: int | None  # whole-run restarts that `run` made; None when not known
    max_restarts: int | None  # its --max-restarts
    tasks: tuple[TaskStatus, ...]  # in role order: chief, ps, worker, evaluator
    outcome: str  # one line: 'worker-1 Failed: Error (exit 1)', 'worker-0 Succeeded', 'Running'
    started: datetime | None
    ended: datetime | None
    queue: Mapping[str, Any] | None = None  # Queued: {"name", "position" (from 1), "of"}
    progress: Progress | None = None  # its training's, where its reporting task reported it
    restarts_without_progress: int | None = None  # of `restarts`, those in a row without progress

    @property
    def finished(self) -> bool:
        return self.state.finished


@dataclass(frozen=True)
class Outcome:
    """How a run ended (`wait`, `run`): succeeded or not, and why; a failure is an Outcome, not an error."""

    name: str
    namespace: str
    state: State  # Succeeded, Failed; Ambiguous or Deleting for a run that cannot be decided
    succeeded: bool
    cause: Cause | None  # why it failed; None when it succeeded
    restarts: int | None  # whole-run restarts made (`run`), None when not known
    message: str  # the line the CLI ends with: 'run mnist succeeded: worker-0 Succeeded'
    bundle: Path | None = None  # the bundle diagnose_on_failure wrote of a run that failed


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
        state=State(task.state),
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
        state=State(run.state),
        restarts=run.restarts[0] if known else None,
        max_restarts=run.restarts[1] if known else None,
        tasks=tuple(task_status(t) for t in run.tasks),
        outcome=run.outcome(),
        started=run.started,
        ended=run.ended,
        progress=progress_of(run.progress),
        restarts_without_progress=run.in_a_row if known else None,
    )


def progress_of(p: ProgressState | None) -> Progress | None:
    """The API's Progress, from runs/progress.py's: its fields but the sparkline's `trend`, with
    `updated` a UTC datetime."""
    if p is None:
        return None
    same = {f.name: getattr(p, f.name) for f in fields(Progress)}
    updated = None if p.updated is None else datetime.fromtimestamp(p.updated, timezone.utc)
    return Progress(**{**same, "metrics": dict(p.metrics), "updated": updated})


def cause_of(cause: Classified) -> Cause:
    """The API's Cause, from runs/classify.py's."""
    return Cause(
        kind=CauseKind(cause.kind),
        tasks=cause.tasks,
        node=cause.node or None,
        text=cause.text,
        exit_code=cause.exit_code,
        category=cause.klass,
    )


def outcome(
    run: RunState,
    message: str,
    *,
    cause: Classified | None = None,
    restarts: int | None = None,
    bundle: str | None = None,
) -> Outcome:
    """The Outcome of a run that ended as `message` says. `cause`, why it failed, when the
    follower knew it (a lost node, a refused pod: the run's state may not tell); else the
    cause the run's state gives (classify.run_failure). `restarts` when counted rather than
    read from the Jobs."""
    from simpletfjob.runs.classify import run_failure

    if restarts is None and not run.wrong_restarts:
        restarts = run.restarts[0]
    state = State(run.state)
    if cause is None and state != State.SUCCEEDED:
        cause = run_failure(run)
    if cause is not None and state not in (State.FAILED, State.AMBIGUOUS, State.DELETING):
        state = State.FAILED  # it failed for what the follower saw (a lost node)
    return Outcome(
        name=run.name,
        namespace=run.namespace,
        state=state,
        succeeded=cause is None,
        cause=None if cause is None else cause_of(cause),
        restarts=restarts,
        message=message,
        bundle=None if bundle is None else Path(bundle),
    )
