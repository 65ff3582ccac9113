"""A run's state, read from its Jobs and their pods as the API server returns them (plain dicts).

Nothing here talks to a cluster: `status` and `wait` (through watch.py) hand in what they
listed or watched, and get back each task's state and the run's.

A task is one Job, named by its role and index labels (`worker-1`). Its state:

- **Failed** when its Job has the `Failed` condition (backoffLimit or a deadline reached);
- **Succeeded** when its Job has the `Complete` condition;
- else **Running** when one of its pods runs (or has succeeded, until the Job controller
  counts it), else **Pending**.

The run's state follows the success policy recorded on its documents:

- **Failed** as soon as a task's Job has failed (a failure after the run had succeeded, as
  when a worker crashes on its way out after the chief finished, does not undo the success);
- **Succeeded** when the chief's Job is complete; with no chief, worker 0's (`worker0`) or
  every worker's (`all-workers`). A ps or evaluator never decides success;
- **Failed** with reason `deleted` when a Job that decides success is gone (or being
  deleted) and its end was not seen: deleted by hand, or removed by `ttlSecondsAfterFinished`
  once it ended, which leaves nothing to tell how. `expected` names the tasks known to have
  existed: those the run's Jobs name (as the framework reads them) and what
  `wait` saw first. Without them, a deciding task is missing when no chief is listed and
  worker 0 (or, for `all-workers`, a worker below the highest index listed) is not;
- else **Running** when any pod runs, else **Pending**.

Jobs that are gone are not listed and count only as above: `wait`'s cleanup deletes the tasks
that had not finished when the run ended, and the run keeps the state it ended in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from simpletfjob.identity import INDEX_LABEL, JOB_LABEL, POLICY_ANNOTATION, ROLE_LABEL

PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"
FINISHED = (SUCCEEDED, FAILED)
ROLE_ORDER = ("chief", "ps", "worker", "evaluator")  # the order render writes the tasks in
DEFAULT_POLICY = "worker0"
DELETED = "deleted"
NEVER = datetime.min.replace(tzinfo=timezone.utc)  # a time the server did not write

Object = Mapping[str, Any]


@dataclass(frozen=True)
class Task:
    """One task of a run, as `status` shows it."""

    task: str  # 'worker-1'
    role: str
    index: int
    job: str  # the Job's name
    node: str  # where its pod runs (or is pinned by nodeName); '' when not known
    state: str  # Pending, Running, Succeeded or Failed
    restarts: int  # container restarts plus failed pods
    reason: str  # the last failure ('Error (exit 1)'), or why the pod is not running; '' if none
    created: datetime | None  # the Job's creationTimestamp
    reason_from_job: bool = False  # failed, and only the Job's condition says why (no pod did)

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    def as_dict(self) -> dict[str, Any]:
        keys = ("task", "role", "index", "job", "node", "state", "restarts", "reason")
        return {key: getattr(self, key) for key in keys}


@dataclass(frozen=True)
class Run:
    """A run's tasks in role order, its state, and which task decided it and why."""

    name: str
    namespace: str
    policy: str
    tasks: tuple[Task, ...]
    state: str
    decided_by: str = ""  # the task that made the run Succeeded or Failed
    reason: str = ""  # why it failed: the task's reason, or 'deleted'
    created: datetime | None = None  # the oldest Job's creationTimestamp

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    def count(self, *states: str) -> int:
        return sum(task.state in states for task in self.tasks)

    def outcome(self) -> str:
        """One line for the end of a run: 'worker-1 Failed: Error (exit 1)', 'worker-0 Succeeded'."""
        if self.reason == DELETED:
            # Gone before its end was seen: by hand, or by ttlSecondsAfterFinished after it ended.
            return (
                f"{self.decided_by}'s Job is gone and its end was not seen "
                "(deleted, or removed by ttlSecondsAfterFinished)"
            )
        if self.state == FAILED:
            return f"{self.decided_by} Failed" + (f": {self.reason}" if self.reason else "")
        if self.state == SUCCEEDED:
            return f"{self.decided_by} Succeeded"
        return self.state

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "namespace": self.namespace,
            "state": self.state,
            "successPolicy": self.policy,
            "tasks": [task.as_dict() for task in self.tasks],
        }


# ---- one task ------------------------------------------------------------------------------------


def timestamp(value: Any) -> datetime | None:
    """An RFC 3339 time as the API server writes it ('2026-11-26T08:00:00Z'); None if absent or odd."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _metadata(obj: Object) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}


def _labels(obj: Object) -> Mapping[str, Any]:
    labels = _metadata(obj).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def _condition(job: Object, kind: str) -> Mapping[str, Any] | None:
    status = job.get("status") or {}
    for condition in status.get("conditions") or ():
        if (
            isinstance(condition, Mapping)
            and condition.get("type") == kind
            and condition.get("status") == "True"
        ):
            return condition
    return None


def _owner_uid(pod: Object) -> str | None:
    for ref in _metadata(pod).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("kind") == "Job" and ref.get("controller"):
            return str(ref.get("uid"))
    return None


def pods_by_job(pods: Iterable[Object]) -> dict[str, list[Object]]:
    """The pods of each Job, by the Job's uid (its controller reference), else by name (job-name label)."""
    found: dict[str, list[Object]] = {}
    for pod in pods:
        key = _owner_uid(pod) or f"name:{_labels(pod).get('job-name', '')}"
        found.setdefault(key, []).append(pod)
    return found


def _job_pods(job: Object, by_job: Mapping[str, list[Object]]) -> list[Object]:
    metadata = _metadata(job)
    return by_job.get(str(metadata.get("uid")), []) or by_job.get(
        f"name:{metadata.get('name')}", []
    )


def _containers(pod: Object) -> list[Mapping[str, Any]]:
    status = pod.get("status") or {}
    return [
        c
        for key in ("initContainerStatuses", "containerStatuses")
        for c in status.get(key) or ()
        if isinstance(c, Mapping)
    ]


def _termination(term: Mapping[str, Any]) -> str:
    """'Error (exit 1)', 'OOMKilled' (its exit code, 137, says nothing more), 'Completed' is no failure."""
    reason = str(term.get("reason") or "Error")
    code = term.get("exitCode")
    if reason == "OOMKilled" or code is None:
        return reason
    return f"{reason} (exit {code})"


def _last_failure(pods: Sequence[Object]) -> tuple[datetime | None, str]:
    """The latest container or pod failure among the pods: when, and its reason."""
    latest: tuple[datetime | None, str] = (None, "")
    for pod in pods:
        for container in _containers(pod):
            for where in ("state", "lastState"):
                term = (container.get(where) or {}).get("terminated")
                if isinstance(term, Mapping) and term.get("exitCode") not in (0, None):
                    when = timestamp(term.get("finishedAt"))
                    if latest[0] is None or (when is not None and when >= latest[0]):
                        latest = (when, _termination(term))
        status = pod.get("status") or {}
        if status.get("phase") == "Failed" and not latest[1]:  # evicted, deadline: no container
            latest = (None, str(status.get("reason") or "Failed"))
    return latest


def _waiting(pod: Object) -> str:
    """Why a pod that does not run is not running: a container's waiting reason, or unscheduled."""
    for container in _containers(pod):
        waiting = (container.get("state") or {}).get("waiting")
        if isinstance(waiting, Mapping) and waiting.get("reason"):
            return str(waiting["reason"])
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if (
            isinstance(condition, Mapping)
            and condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
        ):
            return str(condition.get("reason") or "Unschedulable")
    return ""


def _current(pods: Sequence[Object]) -> Object | None:
    """The pod that stands for the task now: the newest that has not finished, else the newest."""

    def key(pod: Object) -> tuple[bool, str]:
        phase = (pod.get("status") or {}).get("phase")
        return phase not in FINISHED, str(_metadata(pod).get("creationTimestamp") or "")

    return max(pods, key=key, default=None)


def task_of(job: Object, pods: Sequence[Object]) -> Task:
    """The task of one Job, given its pods."""
    metadata = _metadata(job)
    labels = _labels(job)
    name = str(metadata.get("name") or "")
    role = str(labels.get(ROLE_LABEL) or "")
    try:
        index = int(labels.get(INDEX_LABEL, ""))
    except ValueError:
        index = -1
    live = [p for p in pods if not _metadata(p).get("deletionTimestamp")] or list(pods)
    pod = _current(live)
    spec = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    node = str(((pod or {}).get("spec") or {}).get("nodeName") or spec.get("nodeName") or "")
    restarts = sum(int(c.get("restartCount") or 0) for p in pods for c in _containers(p))
    failed_pods = sum((p.get("status") or {}).get("phase") == "Failed" for p in pods)
    restarts += max(failed_pods, int((job.get("status") or {}).get("failed") or 0))
    _, failure = _last_failure(pods)
    failed = _condition(job, "Failed")
    phase = ((pod or {}).get("status") or {}).get("phase")
    if failed is not None:
        state, reason = FAILED, failure or str(failed.get("reason") or "Failed")
    elif _condition(job, "Complete") is not None:
        state, reason = SUCCEEDED, ""
    elif phase in ("Running", "Succeeded"):
        # A pod that has succeeded leaves its Job active until the Job controller counts it.
        state, reason = RUNNING, failure
    else:
        state, reason = PENDING, (_waiting(pod) if pod is not None else "") or failure
        if pod is None and not reason:
            reason = "no pod yet"
    task = f"{role}-{index}" if role and index >= 0 else name
    created = timestamp(metadata.get("creationTimestamp"))
    from_job = failed is not None and not failure
    return Task(task, role, index, name, node, state, restarts, reason, created, from_job)


# ---- the run -------------------------------------------------------------------------------------


def _order(task: Task) -> tuple[int, str, int, str]:
    rank = ROLE_ORDER.index(task.role) if task.role in ROLE_ORDER else len(ROLE_ORDER)
    return rank, task.role, task.index, task.job


def policy_of(jobs: Iterable[Object]) -> str:
    """The success policy the run's documents record; worker0 when none does (as `render` defaults)."""
    for job in jobs:
        annotations = _metadata(job).get("annotations")
        if isinstance(annotations, Mapping) and annotations.get(POLICY_ANNOTATION):
            return str(annotations[POLICY_ANNOTATION])
    return DEFAULT_POLICY


def is_gone(obj: Object) -> bool:
    """Being deleted counts as gone: a Foreground delete keeps the Job until its pods are gone."""
    return bool(_metadata(obj).get("deletionTimestamp"))


def deciding(policy: str, names: Iterable[str]) -> list[str]:
    """The tasks, of those named, whose success is the run's: the chief, else worker 0 or every worker."""
    known = set(names)
    if "chief-0" in known:
        return ["chief-0"]
    if policy == "all-workers":
        indices = [n.removeprefix("worker-") for n in known if n.startswith("worker-")]
        last = max((int(i) for i in indices if i.isdigit()), default=0)
        # Workers are numbered from 0 without a gap: one missing below the last was there too.
        return [f"worker-{i}" for i in range(last + 1)]
    return ["worker-0"]


def run_state(
    name: str,
    namespace: str,
    jobs: Iterable[Object],
    pods: Iterable[Object],
    expected: Iterable[str] = (),
) -> Run:
    """The run's tasks and state from its Jobs and pods; `expected` names tasks known to have existed."""
    present = [job for job in jobs if not is_gone(job)]
    by_job = pods_by_job(pods)
    tasks = tuple(sorted((task_of(j, _job_pods(j, by_job)) for j in present), key=_order))
    policy = policy_of(present)
    created = min((t.created for t in tasks if t.created is not None), default=None)
    by_name = {task.task: task for task in tasks}

    def run(state: str, decided_by: str = "", reason: str = "") -> Run:
        return Run(name, namespace, policy, tasks, state, decided_by, reason, created)

    deciders = deciding(policy, [*by_name, *expected])
    finished_at = {d: _finish(present, by_name[d].job) or NEVER for d in deciders if d in by_name}
    succeeded = all(d in by_name and by_name[d].state == SUCCEEDED for d in deciders)
    success_time = max(finished_at.values(), default=NEVER)
    # A failure counts unless it came after the run had succeeded; one with no time counts.
    failures = sorted(
        (_failure_time(present, t.job) or NEVER, _order(t), t) for t in tasks if t.state == FAILED
    )
    before = [t for when, _, t in failures if not succeeded or when <= success_time]
    if before:
        return run(FAILED, before[0].task, before[0].reason)
    if succeeded:
        # the last to finish; in the same second (the API's resolution), the last in order
        last = max(enumerate(deciders), key=lambda d: (finished_at[d[1]], d[0]))[1]
        return run(SUCCEEDED, last)
    missing = [d for d in deciders if d not in by_name]
    if missing:
        return run(FAILED, missing[0], DELETED)
    return run(RUNNING if any(t.state == RUNNING for t in tasks) else PENDING)


def _finish(jobs: Sequence[Object], name: str) -> datetime | None:
    for job in jobs:
        if _metadata(job).get("name") == name:
            return timestamp((job.get("status") or {}).get("completionTime"))
    return None


def _failure_time(jobs: Sequence[Object], name: str) -> datetime | None:
    for job in jobs:
        if _metadata(job).get("name") == name:
            failed = _condition(job, "Failed")
            return timestamp(failed.get("lastTransitionTime")) if failed else None
    return None


def group_runs(jobs: Iterable[Object]) -> dict[str, list[Object]]:
    """The Jobs of each run (by the simpletfjob/job label), runs in name order."""
    runs: dict[str, list[Object]] = {}
    for job in jobs:
        if not is_gone(job):
            runs.setdefault(str(_labels(job).get(JOB_LABEL, "")), []).append(job)
    return dict(sorted(runs.items()))


def age(created: datetime | None, now: datetime | None = None) -> str:
    """An age as kubectl prints it: 45s, 3m20s, 45m, 3h20m, 20h, 3d4h, 30d, 2y; '<unknown>' without one."""
    if created is None:
        return "<unknown>"
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


def describe(task: Task) -> str:
    """One line for a task's state: 'worker-0 Running on h100', 'worker-1 Failed: Error (exit 1)'."""
    line = f"{task.task} {task.state}"
    if task.state == RUNNING and task.node:
        line += f" on {task.node}"
    if task.state == RUNNING and task.restarts:
        plural = "s" if task.restarts > 1 else ""
        line += f" after {task.restarts} restart{plural}"
        return line + (f" (last: {task.reason})" if task.reason else "")
    return line + (f": {task.reason}" if task.reason and task.state != SUCCEEDED else "")


def changes(before: Run | None, after: Run) -> list[str]:
    """A line for each task whose line differs from before (all of them at first), in role order."""
    seen = {t.task: describe(t) for t in before.tasks} if before is not None else {}
    lines = [line for t in after.tasks if seen.get(t.task) != (line := describe(t))]
    now = {t.task for t in after.tasks}
    lines += [f"{task} deleted" for task in seen if task not in now]
    return lines
