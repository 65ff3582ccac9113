"""A run's state, from its Jobs and their pods as plain dicts (no cluster; tasks: taskstate.py).

The run's state, by the success policy its Jobs record:

- **Deleting** when every Job is being deleted; `holds` counts the finalizers that keep them;
- **Ambiguous** when several Jobs claim one task (a copy under another name with its labels;
  `claims`), or the recorded policy cannot be right (`wrong_policy`): nothing is decided on a
  guess;
- **Failed** when a task's Job has failed, unless the run had succeeded by then (success wins
  a tie: the same second, the API server's resolution; a failure with no time counts) or the
  task's role is `independent` (a TensorFlow evaluator: `side_failures`);
- **Succeeded** when the deciding tasks' Jobs (the framework's `deciding`, less the Lost ones)
  are complete;
- **Failed** with reason `deleted` when a deciding Job is gone and its end was not seen (by
  hand, or ttlSecondsAfterFinished); `expected` names the tasks known to have existed;
- else **Running**, **Unknown** or **Pending**, by the tasks' pods.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cache
from typing import TYPE_CHECKING, Any

from simpletfjob.frameworks import framework as framework_named
from simpletfjob.frameworks import independent_roles
from simpletfjob.runs.annotations import read_min_workers, read_policy, read_restarts, values_of

if TYPE_CHECKING:
    from simpletfjob.runs.progress import Progress
from simpletfjob.runs.taskstate import (
    DELETING,
    FAILED,
    FINISHED,
    PENDING,
    RUNNING,
    SUCCEEDED,
    UNKNOWN,
    Object,
    TaskStatus,
    condition,
    finalizers,
    in_role_order,
    job_pods,
    lost_line,
    mark_lost,
    metadata_of,
    pods_by_job,
    rfc3339,
    still_in,
    task_of,
    timestamp,
)

AMBIGUOUS = "Ambiguous"
__all__ = [  # what the commands read from here; the task's part lives in taskstate.py
    "AMBIGUOUS", "DELETING", "FAILED", "PENDING", "RUNNING", "SUCCEEDED", "UNKNOWN",
    "Claim", "Run", "TaskStatus", "changes", "describe",
    "run_state", "task_of",
]  # fmt: skip
DELETED = "deleted"
NEVER = datetime.min.replace(tzinfo=timezone.utc)  # a time the server did not write


@dataclass(frozen=True)
class Claim:
    """A task that more than one Job claims: the Jobs, and those of them that are copies."""

    task: str
    jobs: tuple[str, ...]
    copies: tuple[str, ...]  # Jobs whose simpletfjob/name annotation names another Job

    def describe(self) -> str:
        """'worker-0 is claimed by 2 Jobs: mnist-worker-0, mnist-worker-0-copy (a copy)'."""
        names = ", ".join(j + (" (a copy)" if j in self.copies else "") for j in self.jobs)
        return f"{self.task} is claimed by {len(self.jobs)} Jobs: {names}"


@dataclass(frozen=True)
class Run:
    """A run's tasks in role order, its state, and which task decided it and why."""

    name: str
    namespace: str
    policy: str
    tasks: tuple[TaskStatus, ...]
    state: str
    decided_by: str = ""  # the task that made the run Succeeded or Failed
    reason: str = ""  # why it failed: the task's reason, or 'deleted'; or cannot be judged
    created: datetime | None = None  # the oldest Job's creationTimestamp
    claims: tuple[Claim, ...] = ()  # tasks that several Jobs claim (the run is Ambiguous)
    holds: tuple[tuple[str, int], ...] = ()  # Deleting: each finalizer, and how many Jobs it holds
    decided_at: datetime | None = None  # when the task that decided it succeeded or failed
    restarts: tuple[int, int] = (0, 0)  # whole-run restarts so far and the limit (`run`)
    wrong_policy: str = ""  # why the recorded policy cannot be right (the run is Ambiguous)
    wrong_restarts: str = ""  # why the recorded restarts cannot be (restarts is then (0, 0))
    framework: str = "tensorflow"  # as its Jobs say (objects.run_framework): who decides, the order
    min_workers: int | None = None  # an elastic run's (elastic.py), from its annotation
    in_a_row: int = 0  # of its restarts, those in a row without progress (= restarts[0] if none)
    progress: Progress | None = None  # its reporting task's (reporting.py)

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    @property
    def started(self) -> datetime | None:
        """When its first task started (the earliest Job startTime)."""
        return min((t.started for t in self.tasks if t.started is not None), default=None)

    @property
    def ended(self) -> datetime | None:
        """When it ended: when the task that decided it succeeded or failed; None until then."""
        if not self.finished:
            return None
        task = next((t for t in self.tasks if t.task == self.decided_by), None)
        return self.decided_at or (task.ended if task is not None else None)

    def count(self, *states: str) -> int:
        return sum(task.state in states for task in self.tasks)

    def outcome(self) -> str:
        """One line for the end of a run: 'worker-1 Failed: Error (exit 1)', 'worker-0 Succeeded'."""
        if self.state == AMBIGUOUS:
            wrong = [w for w in (self.wrong_policy, self.reason) if w]
            return "; ".join([*(claim.describe() for claim in self.claims), *wrong])
        if self.state == DELETING:
            return self.deleting()
        if self.reason == DELETED:
            return (
                f"{self.decided_by}'s Job is gone and its end was not seen "
                "(deleted, or removed by ttlSecondsAfterFinished)"
            )
        if self.state == FAILED:
            return f"{self.decided_by} Failed" + (f": {self.reason}" if self.reason else "")
        fw = framework_named(self.framework)
        if (
            self.state == SUCCEEDED
            and self.policy == "all-workers"
            and not (fw.lead and self.decided_by == fw.lead)
        ):
            # No one worker decided: 'all 2 workers succeeded (1 lost; min 2)'.
            count = len(
                still_in(fw.deciding(self.policy, [t.task for t in self.tasks]), self.tasks)
            )
            role = self.decided_by.rpartition("-")[0]  # the last of them to succeed
            lost = lost_line(self.tasks, self.min_workers)
            return f"all {count} {role}{'s' if count != 1 else ''} succeeded{lost}"
        if self.state == SUCCEEDED:
            return f"{self.decided_by} Succeeded"
        return self.state

    def deleting(self) -> str:
        """'3 Jobs being deleted, held by foregroundDeletion (3 Jobs)'."""
        count = len(self.tasks)
        line = f"{count} Job{'s' if count != 1 else ''} being deleted"
        held = [f"{name} ({n} Job{'s' if n != 1 else ''})" for name, n in self.holds]
        return line + (f", held by {', '.join(held)}" if held else ", held by no finalizer")

    def as_dict(self) -> dict[str, Any]:
        from simpletfjob.runs.progress import progress_json

        data: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "state": self.state,
            "successPolicy": None if self.wrong_policy else self.policy,
            "restarts": None if self.wrong_restarts else self.restarts[0],
            "maxRestarts": None if self.wrong_restarts else self.restarts[1],
            "restartsWithoutProgress": None if self.wrong_restarts else self.in_a_row,
            "startTime": rfc3339(self.started),
            "completionTime": rfc3339(self.ended),
            "tasks": [task.as_dict() for task in self.tasks],
            "progress": progress_json(self.progress),
        }
        if self.min_workers is not None:
            data["minWorkers"] = self.min_workers
        if self.claims:
            data["claims"] = [
                {"task": c.task, "jobs": list(c.jobs), "copies": list(c.copies)}
                for c in self.claims
            ]
        if self.state == DELETING:
            data["deleting"] = {"jobs": len(self.tasks), "finalizers": dict(self.holds)}
        wrong = [w for w in (self.wrong_policy, self.wrong_restarts) if w]
        if wrong:  # annotations that cannot be right, instead of their values
            data["annotationErrors"] = wrong
        return data


def is_gone(obj: Object) -> bool:
    """Being deleted counts as gone: a Foreground delete keeps the Job until its pods are gone."""
    return bool(metadata_of(obj).get("deletionTimestamp"))


def run_state(
    name: str,
    namespace: str,
    jobs: Iterable[Object],
    pods: Iterable[Object],
    expected: Iterable[str] = (),
    nodes: Mapping[str, str] | None = None,
    task: Callable[[Object, Sequence[Object], Mapping[str, str] | None], TaskStatus] = task_of,
) -> Run:
    """The run's tasks and state; `expected` names tasks known to have existed (task_of: `nodes`;
    `task` stands for task_of where the caller keeps what it gave before: watch.Follower)."""
    from simpletfjob.runs.objects import run_framework

    listed = list(jobs)
    present = [job for job in listed if not is_gone(job)]
    deleting = bool(listed) and not present  # every Job being deleted: told what holds them
    judged = present or listed
    found = values_of(judged)  # the run's annotations, read in one pass
    floor, wrong_floor = (None, "") if deleting else read_min_workers(found)  # elastic.py
    fw = run_framework(judged, elastic=floor is not None)
    order = in_role_order(fw.role_order)
    by_job = pods_by_job(pods)
    tasks = tuple(sorted((task(j, job_pods(j, by_job), nodes) for j in judged), key=order))
    tasks = mark_lost(tasks, floor, fw)
    policy, wrong_policy = read_policy(found)
    created = min((t.created for t in tasks if t.created is not None), default=None)
    if deleting:
        holds = Counter(finalizer for job in listed for finalizer in finalizers(job))
        return Run(
            name,
            namespace,
            policy,
            tasks,
            DELETING,
            created=created,
            holds=tuple(sorted(holds.items())),
            framework=fw.name,
        )
    wrong_policy = wrong_policy or wrong_floor
    restarts = read_restarts(found)
    by_name = {task.task: task for task in tasks}
    claims = _claims(tasks) if len(by_name) < len(tasks) else ()

    def run(state: str, decided_by: str = "", reason: str = "", at: datetime | None = None) -> Run:
        return Run(
            name, namespace, policy, tasks, state, decided_by, reason, created, claims, (), at,
            (restarts.done, restarts.limit), wrong_policy, restarts.wrong, fw.name, floor,
            restarts.done if restarts.in_a_row is None else restarts.in_a_row,
        )  # fmt: skip

    if claims or wrong_policy:  # nothing is decided on a guess
        return run(AMBIGUOUS)
    deciders = still_in(fw.deciding(policy, [*by_name, *expected]), tasks)
    finished_at = {d: _second(by_name[d].ended) or NEVER for d in deciders if d in by_name}
    # Only a Job's condition ends a task: a pod that has ended, not yet counted, decides nothing.
    succeeded = all(
        d in by_name and by_name[d].finished and by_name[d].state == SUCCEEDED for d in deciders
    )
    success_time = max(finished_at.values(), default=NEVER)
    # A failure counts unless the run had succeeded by then (success wins a tie).
    aside = independent()
    failed = [t for t in tasks if t.finished and t.state == FAILED and t.role not in aside]
    # Each Job by its name (the first of a name), to read when it failed.
    pairs = [(metadata_of(job).get("name"), job) for job in present] if failed else []
    named = {n: job for n, job in reversed(pairs) if isinstance(n, str)}
    failures = sorted((failed_at(named.get(t.job, {})) or NEVER, order(t), t) for t in failed)
    before = [
        (when, t)
        for when, _, t in failures
        if not succeeded or when == NEVER or when < success_time
    ]
    if before:
        when, first = before[0]
        return run(FAILED, first.task, first.reason, None if when == NEVER else when)
    if succeeded:
        # the last to finish; in the same second (the API's resolution), the last in order
        last = max(enumerate(deciders), key=lambda d: (finished_at[d[1]], d[0]))[1]
        return run(SUCCEEDED, last, at=None if success_time == NEVER else success_time)
    missing = [d for d in deciders if d not in by_name]
    unread = [t.job for t in tasks if t.index < 0 or not t.role]  # its labels edited by hand
    if missing and unread:  # the missing task may be one of these: not guessed
        return run(AMBIGUOUS, reason=f"job {unread[0]}'s role and index labels name no task")
    if missing:
        return run(FAILED, missing[0], DELETED)
    # A pod that has succeeded, until its Job counts it, still keeps the run Running.
    if any(t.state == RUNNING or (t.state == SUCCEEDED and not t.finished) for t in tasks):
        return run(RUNNING)
    if any(t.state == UNKNOWN for t in tasks):
        return run(UNKNOWN)
    return run(PENDING)


@cache
def independent() -> frozenset[str]:
    """The roles whose failure fails no run (frameworks' `independent`), read once."""
    return independent_roles()


def side_failures(run: Run) -> list[TaskStatus]:
    """The tasks of roles the training does not depend on whose Job has failed, in role order."""
    aside = independent()
    return [t for t in run.tasks if t.role in aside and t.finished and t.state == FAILED]


def _claims(tasks: Sequence[TaskStatus]) -> tuple[Claim, ...]:
    jobs: dict[str, list[TaskStatus]] = {}
    for task in tasks:
        jobs.setdefault(task.task, []).append(task)
    return tuple(
        Claim(name, tuple(t.job for t in claiming), tuple(t.job for t in claiming if not t.applied))
        for name, claiming in jobs.items()
        if len(claiming) > 1
    )


def _second(when: datetime | None) -> datetime | None:
    """A time to the second: the API server writes no finer, and the same second is a tie."""
    return None if when is None else when.replace(microsecond=0)


def failed_at(job: Object) -> datetime | None:
    """When the Job's Failed condition came, to the second (None without one, or its time)."""
    failed = condition(job, "Failed")
    return _second(timestamp(failed.get("lastTransitionTime"))) if failed else None


def describe(task: TaskStatus) -> str:
    """One line for a task's state: 'worker-0 Running on h100', 'worker-1 Failed: Error (exit 1)'.

    A pod failed before its Job counted it: 'worker-1 Failed (exit 1)'; waiting again after a
    failure: 'worker-1 Pending after 1 restart (last: Error (exit 1))'.
    """
    line = f"{task.task} {task.state}"
    if task.state == FAILED and not task.finished:
        return line + (f" ({pod_words(task.reason)})" if task.reason not in ("", FAILED) else "")
    if task.state == RUNNING and task.node:
        line += f" on {task.node}"
    again = task.state == RUNNING or (task.state == PENDING and task.reason == task.failure)
    if again and task.reason and task.restarts is None:
        return line + f" (last: {task.reason})"
    if again and task.restarts:
        plural = "s" if task.restarts > 1 else ""
        line += f" after {task.restarts} restart{plural}"
        return line + (f" (last: {task.reason})" if task.reason else "")
    return line + (f": {task.reason}" if task.reason and task.state != SUCCEEDED else "")


def _news(then: TaskStatus, line: str, now: TaskStatus) -> bool:
    """Whether `line`, the task's line now, tells more than its line before did."""
    if then.state == now.state and line == f"{now.task} {now.state}":
        return False  # the same state, its detail gone: told already
    return describe(then) != line


def pod_words(reason: str) -> str:
    """A pod's failure as its phase goes with it: 'exit 1' for 'Error (exit 1)', 'OOMKilled',
    'ContainerCannotRun, exit 128', 'OutOfcpu'."""
    cause, _, code = reason.partition(" (exit ")
    if not code:
        return reason
    return f"exit {code[:-1]}" if cause == "Error" else f"{cause}, exit {code[:-1]}"


def changes(before: Run | None, after: Run) -> list[str]:
    """A line for each task whose line differs from before (all of them at first), in role order.

    A task whose state stays and whose line only loses its detail (`Pending: no pod yet`, then
    `Pending`) has nothing new to say.
    """
    was = {t.task: t for t in before.tasks} if before is not None else {}
    lines = []
    for task in after.tasks:
        old = was.get(task.task)
        if old is task:  # the same object: the same line
            continue
        line = describe(task)
        if old is None or _news(old, line, task):
            lines.append(line)
    now = {t.task for t in after.tasks}
    lines += [f"{task} deleted" for task in was if task not in now]
    return lines
