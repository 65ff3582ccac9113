"""How state.run_state reads a run's objects: each Job's task, the pods of each Job, and the
run's annotations.

`Reading` reads everything afresh: `status` judges one list, once. `Kept` (follower.py's, for
`wait`, `run`, `status -w` and `logs -f`) keeps what it read of each object, by the object's
identity, so that an event about one task of a thousand reads that task again, not the
thousand: a watch's event brings a new object, never the old one changed, so an object seen
before has not changed. What it keeps holds the objects themselves (an identity is never
another object's), and only those of the last reading: nothing grows as a run goes on.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from simpletfjob.runs.annotations import Found, Said, gathered, said_by, values_of
from simpletfjob.runs.taskstate import Object, TaskStatus, metadata_of, pods_by_job, task_of


class Reading:
    """Every object read afresh."""

    def tasks(
        self,
        jobs: Sequence[Object],
        by_job: Mapping[str, list[Object]],
        nodes: Mapping[str, str] | None,
    ) -> list[TaskStatus]:
        """Each Job's task, with its pods (by its uid, else by its name's job-name label)."""
        return [task_of(job, pods_of(by_job, *ids_of(job)), nodes) for job in jobs]

    def by_job(self, pods: Iterable[Object]) -> dict[str, list[Object]]:
        return pods_by_job(pods)

    def values(self, jobs: Iterable[Object]) -> Found:
        return values_of(jobs)


def ids_of(job: Object) -> tuple[str, str]:
    """A Job's uid and name, as its pods are found by (str(None) where one is missing)."""
    metadata = metadata_of(job)
    return str(metadata.get("uid")), str(metadata.get("name"))


def pods_of(by_job: Mapping[str, Sequence[Object]], uid: str, name: str) -> Sequence[Object]:
    """A Job's pods: those it owns (by its uid), else those its name's job-name label names."""
    return by_job.get(uid) or by_job.get(f"name:{name}") or []


class Kept(Reading):
    """What was read of each object, kept by its identity (see the module)."""

    def __init__(self) -> None:
        # a Job's uid -> (the Job, its pods, the nodes' news) the task was judged from, the task
        self.judged: dict[str, tuple[tuple[Object, tuple[Object, ...], dict[str, str]], TaskStatus]]
        self.judged = {}
        self.ids: dict[int, tuple[Object, tuple[str, str]]] = {}  # id(Job) -> its uid and name
        self.owners: dict[int, tuple[Object, str]] = {}  # id(pod) -> its Job's key (pods_by_job)
        self.said: dict[int, tuple[Object, Said]] = {}  # id(Job) -> its annotations read

    def tasks(
        self,
        jobs: Sequence[Object],
        by_job: Mapping[str, list[Object]],
        nodes: Mapping[str, str] | None,
    ) -> list[TaskStatus]:
        ids: dict[int, tuple[Object, tuple[str, str]]] = {}
        found = []
        news = dict(nodes) if nodes else {}
        for job in jobs:
            kept = self.ids.get(id(job))
            uid, name = kept[1] if kept is not None and kept[0] is job else ids_of(job)
            ids[id(job)] = (job, (uid, name))
            pods = pods_of(by_job, uid, name)
            key = uid if uid not in ("None", "") else name
            was = self.judged.get(key)
            if was is not None and _same(was[0], job, pods, news):
                found.append(was[1])
                continue
            task = task_of(job, pods, nodes)
            self.judged[key] = ((job, tuple(pods), news), task)
            found.append(task)
        self.ids = ids
        return found

    def by_job(self, pods: Iterable[Object]) -> dict[str, list[Object]]:
        owners: dict[int, tuple[Object, str]] = {}
        found: dict[str, list[Object]] = {}
        for pod in pods:
            kept = self.owners.get(id(pod))
            if kept is not None and kept[0] is pod:
                key = kept[1]
            else:
                key = next(iter(pods_by_job([pod])))
            owners[id(pod)] = (pod, key)
            found.setdefault(key, []).append(pod)
        self.owners = owners
        return found

    def values(self, jobs: Iterable[Object]) -> Found:
        said: dict[int, tuple[Object, Said]] = {}
        for job in jobs:
            kept = self.said.get(id(job))
            said[id(job)] = kept if kept is not None and kept[0] is job else (job, said_by(job))
        self.said = said
        return gathered(read for _, read in said.values())


def _same(
    before: tuple[Object, tuple[Object, ...], dict[str, str]],
    job: Object,
    pods: Sequence[Object],
    nodes: Mapping[str, str],
) -> bool:
    """Whether a task was judged from these very objects, and the same news of the nodes."""
    was_job, was_pods, was_nodes = before
    if was_job is not job or len(was_pods) != len(pods) or was_nodes != nodes:
        return False
    return all(a is b for a, b in zip(was_pods, pods, strict=True))


# What of a container no reader of a run reads: what it runs and its variables' values, but
# for a Job the values of the frameworks' own variables, from which its run's tasks and
# framework are read (objects.named_tasks: a deciding Job that is gone is still named by the
# others). A pod's are all cut (the container holding a framework's variables is found by
# their names, which stay). At 1000 TensorFlow tasks, each pod's cluster spec names every
# host: 12 KB a pod.
_UNREAD = ("command", "args")
_CONTAINERS = ("containers", "initContainers", "ephemeralContainers")


def lean_job(job: dict[str, Any]) -> None:
    """Cut in place, from a Job as it is read, what no reader of a run reads: its pod
    template's containers' command and args, and its variables' values but the frameworks'."""
    spec = job.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    if isinstance(template, dict):
        _lean(template, _placed())


def lean_pod(pod: dict[str, Any]) -> None:
    """Cut in place, from a pod as it is read, what no reader of a run reads: each container's
    command, args and env values. The objects a run is judged from are kept for as long as it
    is followed; every one of them is cut alike, so two readings of one object still compare
    equal exactly when the rest of them does."""
    _lean(pod, frozenset())


@functools.cache
def _placed() -> frozenset[str]:
    """The names of every framework's own variables (frameworks' env_names)."""
    from simpletfjob.frameworks import FRAMEWORKS, framework

    return frozenset(name for fw in FRAMEWORKS for name in framework(fw).env_names)


def _lean(pod: dict[str, Any], keep: frozenset[str]) -> None:
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    for key in _CONTAINERS:
        containers = spec.get(key)
        for container in containers if isinstance(containers, list) else ():
            if not isinstance(container, dict):
                continue
            for word in _UNREAD:
                container.pop(word, None)
            env = container.get("env")
            for variable in env if isinstance(env, list) else ():
                if isinstance(variable, dict) and variable.get("name") not in keep:
                    variable.pop("value", None)
