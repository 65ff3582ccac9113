"""`wait`'s judgement of a run as its events come: pure, with no server and no clock.

`Follower` keeps the run's Jobs and pods as the lists and then the watches told of them,
and judges the run with state.run_state, as `status` judges what it lists: both say the
same of the same objects. `verdict` says whether `wait` may end on that judgement:

- **Succeeded**, **Ambiguous** (a task that several Jobs claim) and **Deleting** end it at
  once; so does **Failed** when a deciding task is gone (reason `deleted`).
- **Failed** otherwise ends it only once the failure's second has passed on the server
  (`settled`), which also gives the failed pod's news time to come through its watch (the
  Job's condition alone says only BackoffLimitExceeded): a deciding task that completes in the same second wins the tie, and a failure
  in the same second that comes first in role order is the one named. The Job controller
  stamps each Job status it writes with the time of the write, and the Jobs watch brings
  the writes in the order they were made, so a success stamped with an earlier second than
  a failure always comes first, and once the failure's second has passed every write
  stamped with it has been made. watch.follow waits TIE seconds after it first sees the
  failure (the server's clock was at least at that second then), taking events meanwhile.

A task's restarts that can no longer be counted (its pod gone: taskstate.py) are the count
last seen while following, so `wait`, `run` and `status -w` keep what they saw. Likewise a
failed task's exit code, once its pods no longer tell it (the Job controller deletes an
OnFailure pod at the backoff limit): the code its pods showed, which the cause carries.

A Job's end, once seen, is kept (`Follower.ended`): a Job seen Complete or Failed that is
then deleted (by ttlSecondsAfterFinished, which may come within the failure's second, or
by hand) is judged as it ended, with the pods seen with it, not as a task whose end was
not seen. `run` restarts on that failure as on any other.

`status` needs none of this: what it lists is the final word on what has happened so far.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from simpletfjob.runs.state import (
    AMBIGUOUS,
    DELETED,
    DELETING,
    FAILED,
    SUCCEEDED,
    Run,
    is_gone,
    run_state,
)
from simpletfjob.runs.taskstate import (
    condition,
    last_failure,
    metadata_of,
    pods_by_job,
)

if TYPE_CHECKING:
    from simpletfjob.kube.watch import Event

# Seconds a failure waits for its second to pass on the server: one second, and half a
# second for the writes stamped with it to come through the watch.
TIE = 1.5
ENDS = (SUCCEEDED, FAILED, AMBIGUOUS, DELETING)  # the states `wait` ends in


class Store:
    """The objects of one resource as the list and the watch have told of them, by name;
    `last`, each object's last state, kept once it is gone."""

    def __init__(self, listed: Iterable[Mapping[str, Any]]) -> None:
        self.objects = {_name(o): o for o in listed}
        self.last = dict(self.objects)

    def apply(self, event: Event) -> None:
        if event.type == "RELIST":
            self.objects = {_name(o): o for o in event.objects}
            self.last.update(self.objects)
        elif event.type == "DELETED" and event.object is not None:
            self.objects.pop(_name(event.object), None)
        elif event.type in ("ADDED", "MODIFIED") and event.object is not None:
            self.objects[_name(event.object)] = event.object
            self.last[_name(event.object)] = event.object


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name"))


def _uid(obj: Mapping[str, Any]) -> str:
    return str(metadata_of(obj).get("uid") or "")


class Follower:
    """A run's Jobs and pods, brought up to date event by event, and judged."""

    def __init__(
        self,
        name: str,
        namespace: str,
        jobs: Iterable[Mapping[str, Any]],
        pods: Iterable[Mapping[str, Any]],
        expected: Iterable[str] = (),
    ) -> None:
        self.name = name
        self.namespace = namespace
        self.stores = {"jobs": Store(jobs), "pods": Store(pods)}
        self.expected = list(expected)
        self._expected = set(self.expected)
        self.restarts: dict[str, int] = {}  # the last count seen of each Job's task, by uid
        self.ended: dict[str, Mapping[str, Any]] = {}  # Job name -> the Job as seen ended
        self._keep_ends(self.stores["jobs"].objects.values())
        self.unknown = Counter(unknown_node(pod) for pod in self.stores["pods"].objects.values())
        self.unknown.pop("", None)

    def take(self, plural: str, event: Event) -> None:
        """One event of the Jobs' watch ('jobs') or the pods' ('pods')."""
        store = self.stores[plural]
        if plural == "pods":
            self._count_unknown(store.objects, event)
        store.apply(event)
        if plural == "jobs":
            self._keep_ends(event.objects if event.type == "RELIST" else [event.object])

    def _keep_ends(self, jobs: Iterable[Mapping[str, Any] | None]) -> None:
        for job in jobs:
            if job is None or is_gone(job):
                continue
            if condition(job, "Complete") or condition(job, "Failed"):
                self.ended[_name(job)] = job

    def judge(self, nodes: Mapping[str, str] | None = None) -> Run:
        """The run as `status` would judge these objects (run_state over every Job and pod),
        each Job seen ended judged so."""
        run = self._judge_whole(nodes)
        return self._failures_seen(run) if run.state == FAILED else run

    def _failures_seen(self, run: Run) -> Run:
        """A failed run whose failed tasks' pods no longer tell how they failed (the Job
        controller deletes an OnFailure pod at the backoff limit, before it marks the Job
        failed), with the exit codes those pods showed while they were there: its cause
        carries them (classify.py). Its lines say what they said."""
        tasks = list(run.tasks)
        seen_pods: dict[str, list[Mapping[str, Any]]] | None = None  # by Job, read once if asked
        changed = False
        for i, task in enumerate(tasks):
            if task.state != FAILED or not task.finished or task.exit_code is not None:
                continue
            job = self.stores["jobs"].objects.get(task.job) or self.ended.get(task.job)
            if job is None:
                continue
            if seen_pods is None:
                seen_pods = pods_by_job(self.stores["pods"].last.values())
            seen = last_failure(seen_pods.get(_uid(job), []))
            if seen.exit_code is not None:
                tasks[i] = replace(
                    task, exit_code=seen.exit_code, failure_reason=seen.reason,
                    failure_deleted=seen.deleted,
                )  # fmt: skip
                changed = True
        return replace(run, tasks=tuple(tasks)) if changed else run

    def _judge_whole(self, nodes: Mapping[str, str] | None) -> Run:
        """run_state over every Job and pod, each Job seen ended standing in for itself."""
        jobs = dict(self.stores["jobs"].objects)
        pods = self.stores["pods"].objects
        kept: dict[str, Mapping[str, Any]] = {}
        for name, job in self.ended.items():
            now = jobs.get(name)
            if now is None or (is_gone(now) and _uid(now) == _uid(job)):
                jobs[name] = job  # deleted since its end was seen: it ended so
                kept.update(self._pods_of(job))
        every = {**kept, **pods} if kept else pods
        run = run_state(
            self.name, self.namespace, jobs.values(), every.values(), self.expected, nodes
        )
        tasks = []
        for task in run.tasks:
            key = task.uid or task.job
            if task.restarts is not None:
                self.restarts[key] = task.restarts
            elif key in self.restarts:  # its pod is gone: the count seen while it was there
                task = replace(task, restarts=self.restarts[key])
            tasks.append(task)
        return replace(run, tasks=tuple(tasks))

    def _pods_of(self, job: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        """The pods last seen of a Job that is gone, gone with it or not."""
        mine = pods_by_job(self.stores["pods"].last.values()).get(_uid(job), [])
        return {_name(pod): pod for pod in mine}

    def remember(self, run: Run) -> None:
        """The tasks seen: one whose Job is deleted later is known to have existed."""
        for task in run.tasks:
            if task.task not in self._expected:
                self.expected.append(task.task)
                self._expected.add(task.task)

    def unknown_nodes(self) -> set[str]:
        """The nodes of the pods in phase Unknown (counted as the pods' events come)."""
        return {node for node, count in self.unknown.items() if node and count}

    def _count_unknown(self, pods: Mapping[str, Mapping[str, Any]], event: Event) -> None:
        """The pods in phase Unknown on each node, as the event changes them (before the store
        takes it)."""
        if event.type == "RELIST":
            self.unknown = Counter(unknown_node(pod) for pod in event.objects)
            return
        if event.object is None:
            return
        was = pods.get(_name(event.object))
        if was is not None:
            self.unknown[unknown_node(was)] -= 1
        if event.type in ("ADDED", "MODIFIED"):
            self.unknown[unknown_node(event.object)] += 1
        self.unknown.pop("", None)


def unknown_nodes(pods: Iterable[Mapping[str, Any]]) -> set[str]:
    """The nodes of pods in phase Unknown, whose condition says why."""
    return {node for node in map(unknown_node, pods) if node}


def unknown_node(pod: Mapping[str, Any]) -> str:
    """The node of a pod in phase Unknown; '' for any other pod."""
    node = (pod.get("spec") or {}).get("nodeName")
    return str(node) if node and (pod.get("status") or {}).get("phase") == "Unknown" else ""


def verdict(run: Run, settled: bool) -> Run | None:
    """The run's end as `wait` tells it, or None while it may still change (see the module)."""
    if run.state in (SUCCEEDED, AMBIGUOUS, DELETING):
        return run
    if run.state != FAILED:
        return None
    if settled or run.reason == DELETED:
        return run
    # No time to wait for, and the pod's own failure known (the Job's condition, which can
    # come first through the other watch, says only BackoffLimitExceeded).
    task = next((t for t in run.tasks if t.task == run.decided_by), None)
    return run if run.decided_at is None and task is not None and not task.reason_from_job else None
