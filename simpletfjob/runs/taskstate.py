"""One task of a run, from its Job and pods as plain dicts; an elastic run's lost tasks (pure).

A task is, in this order: **Deleting** (its Job has a deletionTimestamp; the reason names the
finalizers); **Failed** or **Succeeded** by its Job's condition (a deadline's reason is
`DeadlineExceeded`, whatever its stopped pod said); **Unknown** when its pod is (its node
stopped reporting; the reason is the node's Ready condition); **Running**; Failed or Succeeded
as its ended pod says, before the Job controller counts it (not `finished`: only the Job's
condition ends a task and decides the run); else **Pending** (the pod's waiting reason, or
`no pod yet`).

Restarts (container restarts plus failed pods) are None when not known: under `OnFailure`
they are counted on the pods, and the Job controller deletes the pod at the backoff limit.

A Job whose `simpletfjob/name` annotation names another Job is a copy (`copied_from`), not
made by apply; an annotation that cannot be a name reads as NOT_A_NAME.

An elastic run (`--min-workers M`) trains on while M tasks of its elastic role remain
(torchrun's agents form a smaller world). A failed task of that role is **Lost** while at
least M others remain (the framework's `CommonRules.lost` says which); it fails nothing, and `run`
says it in one line and spends no restart on it. With fewer than M, the failures are the
run's. The rendezvous host (PyTorch's worker 0, which hosts the c10d store) is never lost.

This module takes tasks and counts, not a `Run` (state.py imports it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from simpletfjob.identity import INDEX_LABEL, LOST_ANNOTATION, NAME_ANNOTATION, ROLE_LABEL
from simpletfjob.tasks import MAX_TASKS

if TYPE_CHECKING:
    from simpletfjob.frameworks import Framework


PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"
UNKNOWN, DELETING, LOST = "Unknown", "Deleting", "Lost"
FINISHED = (SUCCEEDED, FAILED)

Object = Mapping[str, Any]


@dataclass(frozen=True)
class TaskStatus:
    """One task of a run, as `status` shows it."""

    task: str  # 'worker-1'
    role: str
    index: int
    job: str  # the Job's name
    node: str  # where its pod runs (or is pinned by nodeName); '' when not known
    state: str  # Pending, Running, Unknown, Succeeded, Failed or Deleting
    restarts: int | None  # container restarts plus failed pods; None when not known
    reason: str  # the last failure ('Error (exit 1)'), or why the pod is not running; '' if none
    created: datetime | None  # the Job's creationTimestamp
    reason_from_job: bool = False  # failed, and only the Job's condition says why (no pod did)
    copied_from: str = ""  # the name its simpletfjob/name annotation gives, when not its own
    uid: str = ""  # the Job's, as read: a delete of it carries it as a precondition
    started: datetime | None = None  # the Job's status.startTime
    ended: datetime | None = None  # its completionTime, or when its Failed condition came
    job_condition: str = ""  # 'Complete' or 'Failed' once its Job has one (the task has ended)
    failure: str = ""  # its pods' last failure ('Error (exit 1)'), whatever its state
    message: str = ""  # what a Pending task's pod (or its latest Warning event) says of `reason`
    # The last failure's parts, as the cluster gave them (runs/classify.py reads them):
    exit_code: int | None = None  # its container's exit code; None when no container ended
    failure_reason: str = ""  # the container's reason (Error, OOMKilled) or the pod's (Evicted)
    failure_deleted: bool = False  # the pod that failed was being deleted (by someone else)
    job_reason: str = ""  # its Job's Failed condition's reason (BackoffLimitExceeded, ...)

    @property
    def finished(self) -> bool:
        """Ended by its Job's condition (a Lost task's Job failed), not by a pod not yet counted."""
        return self.state in (*FINISHED, LOST) and bool(self.job_condition)

    @property
    def refused(self) -> bool:
        """Its last pod was refused by its node (OutOf..., NodeAffinity): it never ran."""
        why = self.failure_reason
        return self.exit_code is None and bool(self.node) and why.startswith(("OutOf", "NodeAff"))

    @property
    def ended_with(self) -> int | None:
        """0 once succeeded, its last failure's code once failed (None if no container gave one)."""
        if self.state == SUCCEEDED:
            return 0
        return self.exit_code if self.state == FAILED else None

    @property
    def applied(self) -> bool:
        """Made by apply, as far as can be told: not a copy (a Job without the annotation is)."""
        return not self.copied_from

    def as_dict(self) -> dict[str, Any]:
        keys = ("task", "role", "index", "job", "node", "state", "restarts", "reason")
        data = {key: getattr(self, key) for key in keys}
        data["exitCode"] = self.ended_with
        data["jobCondition"] = self.job_condition or None
        data["startTime"] = rfc3339(self.started)
        data["completionTime"] = rfc3339(self.ended)
        data["message"] = self.message or None
        return data

    @property
    def stuck(self) -> str:
        """A Pending task's reason with its message, when there is one ('' otherwise)."""
        return why(self.reason, self.message) if self.state == PENDING and self.message else ""


def rfc3339(when: datetime | None) -> str | None:
    """A time as the API server writes it ('2026-11-26T08:00:00Z'), in UTC; None stays None."""
    if when is None:
        return None
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def timestamp(value: Any) -> datetime | None:
    """An RFC 3339 time as the API server writes it ('2026-11-26T08:00:00Z'); None if absent or odd."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def metadata_of(obj: Object) -> Mapping[str, Any]:
    metadata = obj.get("metadata")  # a dict, as JSON gives it, is told at once
    return metadata if isinstance(metadata, (dict, Mapping)) else {}


def labels_of(obj: Object) -> Mapping[str, Any]:
    labels = metadata_of(obj).get("labels")
    return labels if isinstance(labels, (dict, Mapping)) else {}


def condition(job: Object, kind: str) -> Mapping[str, Any] | None:
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
    for ref in metadata_of(pod).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("kind") == "Job" and ref.get("controller"):
            return str(ref.get("uid"))
    return None


def pods_by_job(pods: Iterable[Object]) -> dict[str, list[Object]]:
    """The pods of each Job, by the Job's uid (its controller reference), else by name (job-name label)."""
    found: dict[str, list[Object]] = {}
    for pod in pods:
        key = _owner_uid(pod) or f"name:{labels_of(pod).get('job-name', '')}"
        found.setdefault(key, []).append(pod)
    return found


def job_pods(job: Object, by_job: Mapping[str, list[Object]]) -> list[Object]:
    metadata = metadata_of(job)
    return by_job.get(str(metadata.get("uid")), []) or by_job.get(
        f"name:{metadata.get('name')}", []
    )


def container_status(pod: Object, container: str) -> Mapping[str, Any]:
    """The pod's status of its container `container` ({} while it has none)."""
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        if isinstance(status, Mapping) and status.get("name") == container:
            return status
    return {}


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


@dataclass(frozen=True)
class Failure:
    """A container's or a pod's failure: when, in words, and its parts."""

    when: datetime | None = None
    words: str = ""  # 'Error (exit 1)', 'OOMKilled', 'Evicted'
    exit_code: int | None = None
    reason: str = ""  # 'Error', 'OOMKilled', 'ContainerCannotRun', or the pod's ('Evicted')
    deleted: bool = False  # its pod was being deleted


def last_failure(pods: Sequence[Object]) -> Failure:
    """The latest container or pod failure among the pods."""
    latest = Failure()
    for pod in pods:
        deleted = _deleted_at(pod)
        for container in _containers(pod):
            for where in ("state", "lastState"):
                term = (container.get(where) or {}).get("terminated")
                if isinstance(term, Mapping) and term.get("exitCode") not in (0, None):
                    when = timestamp(term.get("finishedAt"))
                    if latest.when is None or (when is not None and when >= latest.when):
                        code = term.get("exitCode")
                        latest = Failure(
                            when,
                            _termination(term),
                            code if type(code) is int else None,
                            str(term.get("reason") or "Error"),
                            where == "state" and _deleted_first(deleted, when),
                        )
        status = pod.get("status") or {}
        if status.get("phase") == "Failed" and not latest.words:  # evicted, deadline: no container
            reason = str(status.get("reason") or "Failed")
            latest = Failure(None, reason, None, reason, deleted is not None)
    return latest


def _deleted_at(pod: Object) -> datetime | None:
    """When the pod's delete was asked for: its deletionTimestamp less its grace; None if not."""
    metadata = metadata_of(pod)
    when = timestamp(metadata.get("deletionTimestamp"))
    grace = metadata.get("deletionGracePeriodSeconds")
    if when is None or type(grace) is not int:
        return when
    return when - timedelta(seconds=grace)


def _deleted_first(deleted: datetime | None, finished: datetime | None) -> bool:
    """The delete came before the container ended (it stopped it), not after (a failed pod's
    cleanup); the same second proves nothing (ttlSecondsAfterFinished 0 deletes within it)."""
    if deleted is None:
        return False
    return finished is None or deleted < finished


def waiting_why(pod: Object, container: str | None = None) -> tuple[str, str]:
    """(reason, message) of a pod that does not run: a container's waiting state (that
    container's, if named), else its PodScheduled=False condition; ('', '') if neither says."""
    for status in _containers(pod):
        if container is not None and status.get("name") != container:
            continue
        waiting = (status.get("state") or {}).get("waiting")
        if isinstance(waiting, Mapping) and waiting.get("reason"):
            return str(waiting["reason"]), one_line(waiting.get("message"))
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if (
            isinstance(condition, Mapping)
            and condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
        ):
            return str(condition.get("reason") or "Unschedulable"), one_line(
                condition.get("message")
            )
    return "", ""


def stuck_lines(tasks: Iterable[TaskStatus]) -> list[str]:
    """'ps-0 and worker-0 Pending: Unschedulable: 0/3 nodes are available: ...': the tasks
    that say the same grouped, in the tasks' order."""
    said: dict[str, list[str]] = {}
    for task in tasks:
        if task.stuck:
            said.setdefault(f"{task.state}: {task.stuck}", []).append(task.task)
    return [
        f"{' and '.join([', '.join(names[:-1]), names[-1]] if len(names) > 1 else names)} {text}"
        for text, names in said.items()
    ]


def one_line(text: Any) -> str:
    """A server's message as one line: its lines joined, blanks squeezed."""
    return " ".join(str(text or "").split())


def why(reason: str, message: str) -> str:
    """'ImagePullBackOff: Back-off pulling image "x"', or the reason alone."""
    return f"{reason}: {message}" if reason and message and message != reason else reason


def _current(pods: Sequence[Object]) -> Object | None:
    """The pod that stands for the task now: the newest that has not finished, else the newest."""

    def key(pod: Object) -> tuple[bool, str]:
        phase = (pod.get("status") or {}).get("phase")
        return phase not in FINISHED, str(metadata_of(pod).get("creationTimestamp") or "")

    return max(pods, key=key, default=None)


def task_of(
    job: Object, pods: Sequence[Object], nodes: Mapping[str, str] | None = None
) -> TaskStatus:
    """The task of one Job, given its pods; `nodes`: node_condition of Unknown pods' nodes."""
    metadata = metadata_of(job)
    labels = labels_of(job)
    name = str(metadata.get("name") or "")
    role = str(labels.get(ROLE_LABEL) or "")
    index = _index(labels.get(INDEX_LABEL))
    live = [p for p in pods if not metadata_of(p).get("deletionTimestamp")] or list(pods)
    pod = _current(live)
    spec = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    node = str(((pod or {}).get("spec") or {}).get("nodeName") or spec.get("nodeName") or "")
    restarts = _restarts(job, pods, spec)
    last = last_failure(pods)
    failure = last.words
    failed = condition(job, "Failed")
    complete = condition(job, "Complete")
    phase = ((pod or {}).get("status") or {}).get("phase")
    message = ""
    if failed is not None:
        state, reason = FAILED, failure or str(failed.get("reason") or "Failed")
        if failed.get("reason") == "DeadlineExceeded":  # its pods were stopped: not their fault
            reason = "DeadlineExceeded"
    elif complete is not None:
        state, reason = SUCCEEDED, ""
    elif phase == "Unknown":
        # Its node stopped reporting: the pod may run or not; the node's condition says why.
        state, reason = UNKNOWN, f"node {node} {(nodes or {}).get(node, 'unreachable')}"
    elif phase == "Running":
        state, reason = RUNNING, failure
    elif phase == "Succeeded":  # its Job active until the Job controller counts the pod
        state, reason = SUCCEEDED, ""
    elif phase == "Failed" and pod is not None:  # the Job then retries, or fails
        last = last_failure([pod])
        state, reason = FAILED, last.words
    else:
        waiting, message = waiting_why(pod) if pod is not None else ("", "")
        state, reason = PENDING, waiting or failure
        if pod is None and not reason:
            reason = "no pod yet"
    let_go = (metadata.get("annotations") or {}).get(LOST_ANNOTATION)
    if let_go and failed is None and complete is None:  # run let it go (interventions.py)
        state, reason, failed = FAILED, str(let_go), {"reason": "Lost"}
    if metadata.get("deletionTimestamp"):  # what keeps it: 'held by foregroundDeletion'
        held = finalizers(job)
        state, reason = DELETING, f"held by {', '.join(held)}" if held else "being deleted"
    task = f"{role}-{index}" if role and index >= 0 else name
    created = timestamp(metadata.get("creationTimestamp"))
    from_job = failed is not None and not failure
    own = (metadata.get("annotations") or {}).get(NAME_ANNOTATION)
    copied = "" if not own or own == name else name_or_invalid(own)
    uid = str(metadata.get("uid") or "")
    status = job.get("status") or {}
    started = timestamp(status.get("startTime"))
    ended = timestamp(status.get("completionTime"))
    if ended is None and failed is not None:
        ended = timestamp(failed.get("lastTransitionTime"))
    ended_by = "Failed" if failed is not None else "Complete" if complete is not None else ""
    said = message if state == PENDING else ""
    return TaskStatus(
        task, role, index, name, node, state, restarts, reason, created, from_job, copied, uid,
        started, ended, ended_by, failure, said, last.exit_code, last.reason, last.deleted,
        str(failed.get("reason") or "") if failed is not None else "",
    )  # fmt: skip


def _restarts(job: Object, pods: Sequence[Object], spec: Mapping[str, Any]) -> int | None:
    """Container restarts plus failed pods; None when a pod that held some of them is gone."""
    status = job.get("status") or {}
    in_place = sum(_server_count(c.get("restartCount")) for p in pods for c in _containers(p))
    failed_pods: int = sum((p.get("status") or {}).get("phase") == "Failed" for p in pods)
    restarts = in_place + max(failed_pods, _server_count(status.get("failed")))
    if spec.get("restartPolicy") == "Never":
        return restarts  # no restart in place: the Job's count of failed pods is all of them
    counted = sum(_server_count(status.get(key)) for key in ("active", "succeeded", "failed"))
    if not pods and (condition(job, "Failed") or condition(job, "Complete")):
        # Ended with no pod left: what restarted in place went with it, uncounted.
        return None
    return restarts if len(pods) >= counted else None


def _server_count(value: Any) -> int:
    """A count the server wrote; anything else (a string, a negative, a float) as 0."""
    return int(value) if type(value) is int and 0 <= value < 1 << 31 else 0


NOT_A_NAME = "<invalid>"  # as kubectl shows a value it cannot use


def name_or_invalid(value: Any) -> str:
    """An object's name read back from an annotation, if it can be one (a DNS subdomain), else NOT_A_NAME."""
    import re

    name = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
    if isinstance(value, str) and len(value) <= 253 and name.fullmatch(value) is not None:
        return value
    return NOT_A_NAME


def _index(label: Any) -> int:
    """A task's index label; -1 (the task is then named by its Job) when it cannot be one."""
    if not (isinstance(label, str) and label.isascii() and label.isdigit()):
        return -1
    return int(label) if len(label) <= len(str(MAX_TASKS)) and int(label) < MAX_TASKS else -1


def finalizers(job: Object) -> list[str]:
    found = metadata_of(job).get("finalizers")
    return [str(f) for f in found] if isinstance(found, list) else []


def in_role_order(roles: Sequence[str]) -> Callable[[TaskStatus], tuple[int, str, int, str]]:
    """A sort key for tasks: by the framework's role order (other roles after), then index."""

    ranks = {role: i for i, role in enumerate(roles)}

    def order(task: TaskStatus) -> tuple[int, str, int, str]:
        return ranks.get(task.role, len(roles)), task.role, task.index, task.job

    return order


def node_condition(node: Object | None, now: datetime | None = None) -> str:
    """How a node is, from its Ready condition as `kubectl get nodes` words it: 'NotReady since
    12:03' (UTC; the date too once a day old); None: 'unreachable'."""
    if node is None:
        return "unreachable"
    conditions = (node.get("status") or {}).get("conditions") or ()
    ready = next(
        (c for c in conditions if isinstance(c, Mapping) and c.get("type") == "Ready"), None
    )
    if ready is None:
        return "has no Ready condition"
    word = "Ready" if ready.get("status") == "True" else "NotReady"
    since = timestamp(ready.get("lastTransitionTime"))
    if since is None:
        return word
    since = since.astimezone(timezone.utc)
    now = now or datetime.now(timezone.utc)
    when = since.strftime("%H:%M" if now - since < timedelta(days=1) else "%Y-%m-%d %H:%M")
    return f"{word} since {when}"


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
