"""A followed run's judgement kept up to date task by task (follower.py's): pure.

state.run_state judges a run from every one of its Jobs and pods. `wait` judges it again on
every event, and at 1000 tasks a pass over the thousand was most of its reaction. A `Tally`
starts from such a judgement (`reset`) and keeps, beside each task's line, the run's counts:
the tasks running (or whose pod has succeeded before its Job counts it), those Unknown, the
finished failures of roles the run depends on, and the deciding tasks that have succeeded.
An event about one task (`news`) marks that task; `judge` judges the marked tasks again from
their Job and pods, moves the counts, and decides the run from them, with the rules of
run_state, in the same order:

    a failure (the earliest, in role order within its second), unless every deciding task
    had succeeded by then (success wins a tie) -> Failed; every deciding task succeeded ->
    Succeeded (the last to finish); a deciding task gone -> Failed (deleted); any task
    running -> Running; any Unknown -> Unknown; else Pending.

Only the deciding moment reads more than the marked tasks: the deciding tasks' completion
times, once, when the last of them has succeeded.

What the counts cannot tell is left to the whole judgement: `judge` says None, and
follower.py calls run_state, then `reset`. That is a Job added, deleted or being deleted;
a list read again (410); a pod that changes owner; a Job whose run annotations, labels,
uid, creation time or pod template change (the success policy, the framework, a task's
name and place in role order come from them); news of a node that was not known; a run
that is Ambiguous or Deleting, an elastic run (its lost tasks depend on every failure),
or one whose Jobs seen ended stand in for Jobs that are gone. tests/unit/test_follower.py
feeds random events to both and holds every judgement to be the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from simpletfjob.frameworks import framework as framework_named
from simpletfjob.runs.annotations import Said, said_by
from simpletfjob.runs.reading import ids_of
from simpletfjob.runs.state import (
    AMBIGUOUS,
    DELETED,
    DELETING,
    FAILED,
    NEVER,
    PENDING,
    RUNNING,
    SUCCEEDED,
    UNKNOWN,
    Run,
    completed_at,
    failed_at,
    independent,
    is_gone,
)
from simpletfjob.runs.taskstate import (
    Object,
    TaskStatus,
    in_role_order,
    labels_of,
    metadata_of,
    pods_by_job,
    task_of,
)

if TYPE_CHECKING:
    from simpletfjob.kube.watch import Event


def owner_key(pod: Object) -> str:
    """The key pods_by_job files a pod under: its Job's uid, else 'name:' its job-name label."""
    return next(iter(pods_by_job([pod])))


def _shape(job: Object) -> tuple[object, ...]:
    """What of a Job, besides its status, makes its task and the run's rules (see the module)."""
    metadata = metadata_of(job)
    return (
        dict(labels_of(job)),
        metadata.get("uid"),
        metadata.get("creationTimestamp"),
        (job.get("spec") or {}).get("template"),
    )


class Tally:
    """The run last judged, each task's line and the run's counts (see the module)."""

    def __init__(self) -> None:
        self.run: Run | None = None  # None: judge the whole run (run_state), then reset
        self.remembered = False  # the run's task names are known to follower.remember

    def reset(
        self,
        run: Run | None,
        jobs: Mapping[str, Object],
        pods: Mapping[str, Object],
        nodes: Mapping[str, str],
    ) -> None:
        """Start again from a whole judgement of the Jobs and pods (by name); None, or a run
        the counts cannot follow, leaves the next judgement to run_state too."""
        self.run = None
        self.remembered = False
        if run is None or run.state in (AMBIGUOUS, DELETING) or run.min_workers is not None:
            return
        if len(run.tasks) != len(jobs) or any(is_gone(job) for job in jobs.values()):
            return
        self.tasks = list(run.tasks)
        self.at = {task.job: i for i, task in enumerate(self.tasks)}  # a Job's name -> its line
        self.at_task = {task.task: i for i, task in enumerate(self.tasks)}  # a task -> its line
        if len(self.at) != len(jobs) or any(name not in jobs for name in self.at):
            return
        self.jobs = dict(jobs)  # the Jobs the lines were judged from
        self.said: dict[str, Said] = {name: said_by(job) for name, job in jobs.items()}
        self.shapes = {name: _shape(job) for name, job in jobs.items()}
        self.by_uid = {ids_of(job)[0]: name for name, job in jobs.items()}
        self.pods: dict[str, dict[str, Object]] = {}  # a Job's key -> its pods, in the list's order
        self.owner: dict[str, str] = {}  # a pod's name -> its key
        for name, pod in pods.items():
            key = owner_key(pod)
            self.pods.setdefault(key, {})[name] = pod
            self.owner[name] = key
        self.nodes = dict(nodes)
        self.marked: set[str] = set()
        fw = framework_named(run.framework)
        self.fw, self.order, self.aside = fw, in_role_order(fw.role_order), independent()
        self.expected = -1  # the deciding tasks are read on the next judgement
        self.running, self.unknown = 0, 0
        self.failed: set[str] = set()  # Jobs of finished failures of roles the run depends on
        self.done: set[str] = set()  # deciding tasks that have succeeded
        self.deciders: list[str] = []
        self.deciding: set[str] = set()
        for task in self.tasks:
            self._count(task, True)
        self.run = run

    def news(self, plural: str, event: Event, objects: Mapping[str, Object]) -> None:
        """An event of the Jobs' watch ('jobs') or the pods' ('pods'), before the store (by
        name: `objects`) takes it: the tasks it is about are marked."""
        if self.run is None or event.type == "BOOKMARK":  # a bookmark: a resourceVersion only
            return
        obj = event.object
        if event.type not in ("ADDED", "MODIFIED", "DELETED") or obj is None:
            self.run = None  # a list read again
            return
        name = str(metadata_of(obj).get("name"))
        if plural == "jobs":
            if event.type == "DELETED" or name not in self.at or name not in objects:
                self.run = None
            else:
                self.marked.add(name)
            return
        was = self.owner.get(name)
        if event.type == "DELETED":
            if was is not None:
                del self.pods[was][name]
                del self.owner[name]
                self._mark(was)
            return
        key = owner_key(obj)
        if was is not None and was != key:
            self.run = None  # it changed owner: the order of its new Job's pods is the list's
            return
        self.pods.setdefault(key, {})[name] = obj
        self.owner[name] = key
        self._mark(key)

    def _mark(self, key: str) -> None:
        job = self.by_uid.get(key)
        if job is not None:
            self.marked.add(job)
        if key.startswith("name:") and key[5:] in self.at:
            self.marked.add(key[5:])

    def judge(
        self,
        jobs: Mapping[str, Object],
        nodes: Mapping[str, str],
        expected: Sequence[str],
        restarts: dict[str, int],
    ) -> Run | None:
        """The run now, from the marked tasks and the counts; None when only the whole
        judgement can tell (see the module). `restarts` is follower.py's memory of each
        task's count, kept as it keeps it."""
        if self.run is None or nodes != self.nodes:
            return None
        for name in self.marked:
            job = jobs[name]
            if is_gone(job) or said_by(job) != self.said[name] or _shape(job) != self.shapes[name]:
                return None
        for name in self.marked:
            job = jobs[name]
            uid, own = ids_of(job)
            pods = self.pods.get(uid) or self.pods.get(f"name:{own}") or {}  # as pods_of finds them
            task = task_of(job, list(pods.values()), nodes)
            key = task.uid or task.job
            if task.restarts is not None:
                restarts[key] = task.restarts
            elif key in restarts:  # its pod is gone: the count seen while it was there
                task = replace(task, restarts=restarts[key])
            i = self.at[name]
            old = self.tasks[i]
            if (task.task, task.role, task.index, task.job) != (
                old.task,
                old.role,
                old.index,
                old.job,
            ):
                return None
            self._count(old, False)
            self._count(task, True)
            self.tasks[i] = task
            self.jobs[name] = job
        self.marked.clear()
        self.expect(expected)
        if not self.deciders:
            return None
        state, by, reason, at = self._decide()
        run = replace(
            self.run, tasks=tuple(self.tasks), state=state, decided_by=by, reason=reason,
            decided_at=at,
        )  # fmt: skip
        self.run = run
        return run

    def _count(self, task: TaskStatus, add: bool) -> None:
        step = 1 if add else -1
        if task.state == RUNNING or (task.state == SUCCEEDED and not task.finished):
            self.running += step
        if task.state == UNKNOWN:
            self.unknown += step
        if task.finished and task.state == FAILED and task.role not in self.aside:
            (self.failed.add if add else self.failed.discard)(task.job)
        if task.task in self.deciding and task.finished and task.state == SUCCEEDED:
            (self.done.add if add else self.done.discard)(task.task)

    def expect(self, expected: Sequence[str]) -> None:
        """The deciding tasks, as run_state reads them from the tasks and those expected
        (follower.py's list, which only grows), read again when more are expected."""
        if self.run is None or len(expected) == self.expected:
            return
        names = [task.task for task in self.tasks]
        self.deciders = self.fw.deciding(self.run.policy, [*names, *expected])
        self.deciding = set(self.deciders)
        self.missing = [d for d in self.deciders if d not in self.at_task]
        self.done = {
            t.task
            for t in self.tasks
            if t.task in self.deciding and t.finished and t.state == SUCCEEDED
        }
        self.expected = len(expected)

    def _decide(self) -> Decided:
        """The run's state, who decided it, why and when: run_state's rules, from the counts."""
        succeeded = not self.missing and len(self.done) == len(self.deciding)
        finished_at: dict[str, datetime] = {}
        success_time = NEVER
        if succeeded:
            for d in self.deciding:
                job = self.jobs[self.tasks[self.at_task[d]].job]
                finished_at[d] = completed_at(job) or NEVER
            success_time = max(finished_at.values(), default=NEVER)
        failures = sorted(
            (failed_at(self.jobs[name]) or NEVER, self.order(task), task)
            for name in self.failed
            for task in (self.tasks[self.at[name]],)
        )
        for when, _, first in failures:
            if not succeeded or when == NEVER or when < success_time:
                at = None if when == NEVER else when
                return _said(FAILED, first.task, first.reason, at)
        if succeeded:
            # the last to finish; in the same second (the API's resolution), the last in order
            last = max(enumerate(self.deciders), key=lambda d: (finished_at[d[1]], d[0]))[1]
            return _said(SUCCEEDED, last, "", None if success_time == NEVER else success_time)
        if self.missing:
            return _said(FAILED, self.missing[0], DELETED)
        if self.running:
            return _said(RUNNING)
        return _said(UNKNOWN if self.unknown else PENDING)


Decided = tuple[str, str, str, datetime | None]  # the state, who decided it, why, and when


def _said(state: str, by: str = "", reason: str = "", at: datetime | None = None) -> Decided:
    return state, by, reason, at
