"""Why a run failed, said where the user looks, and the refusals and lost nodes `run` restarts on.

After `wait`'s and `status`'s verdict, the failing task's error and last log lines, and the
Warning events of its Job and pods:

    worker-1: its error:
    worker-1 | Traceback (most recent call last):
    worker-1 | ValueError: bad shape
    worker-1: the last 20 lines of its log (pod mnist-worker-1-x7k2p, container tensorflow):
    worker-1 | ...
    worker-1: Warning events of its Job and pods:
      BackoffLimitExceeded (x1) job/mnist-worker-1: Job has reached the specified backoff limit

The log is the newest pod's that ran, or in CrashLoopBackOff the instance that crashed
(`previous`); the error is looked for in the last SEARCHED lines (torchrun's box hides it).
With `restartPolicy: OnFailure` the Job controller deletes the pod at the backoff limit and
its logs with it, so `Keeper` reads each crashed container's last lines while the pod is there.
Events are matched to the Job by name and uid, and to its pods by uid or by the name the Job
controller gives them (`JOB-xxxxx`), so that a pod that is gone still matches. Nothing here
turns a verdict into an error: what cannot be read (RBAC, a pod gone) is one line saying why.

`run` also ends an attempt that `wait` would still wait on: a pod its node refused
(`OutOf...`, `NodeAffinity`: the Job controller would only make another pod for the same
node), and a node NotReady or gone past the grace, counted on this client's clock from when it
first saw it so (the server's clock may differ); finished tasks' nodes do not count. A refusal
to read nodes is said once, and node loss is then not watched.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from simpletfjob.errors import ClusterError
from simpletfjob.kube.request import Action, Deadline, request
from simpletfjob.kube.resources import EVENTS, NODES, PODS
from simpletfjob.runs.classify import REFUSALS, Cause, node_lost, refused, task_error
from simpletfjob.runs.state import DELETED, PENDING, Run, is_gone
from simpletfjob.runs.taskstate import (
    Object,
    TaskStatus,
    container_status,
    labels_of,
    metadata_of,
    one_line,
    pods_by_job,
    timestamp,
)

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection


SEARCHED = 200  # lines of the failing task's log its error is looked for in
READ_WITHIN = 10.0  # seconds for each read of an explanation: it must not hold the verdict long
GENERIC = ("", "ContainerCreating", "PodInitializing", "Pending", "no pod yet")


@dataclass(frozen=True)
class Kept:
    """The last lines of a container that crashed, read while its pod was there."""

    pod: str
    container: str
    lines: tuple[bytes, ...]


def _read_body(
    conn: Connection, action: Action, query: list[tuple[str, str | int]]
) -> tuple[bytes | None, str]:
    """The answer's body, or (None, why it could not be read), within READ_WITHIN."""
    from simpletfjob.kube.refusals import refusal_line, status_of

    try:
        answer = request(
            conn, action, query=query, deadline=Deadline.after(READ_WITHIN),
            passthrough=range(400, 600),
        )  # fmt: skip
    except ClusterError as e:
        return None, str(e)
    if answer.status >= 400:
        why, message, details = status_of(answer.data, answer.reason)
        return None, refusal_line(conn.target, action, answer.status, why, message, details)
    return answer.data, ""


def read_tail(
    conn: Connection, pod: str, container: str, tail: int, previous: bool
) -> tuple[list[bytes], str]:
    """The container's last `tail` lines, or ([], why they could not be read)."""
    action = Action("get", PODS, conn.namespace, pod, subresource="log")
    query: list[tuple[str, str | int]] = [("container", container), ("tailLines", tail)]
    if previous:
        query.append(("previous", "true"))
    data, why = _read_body(conn, action, query)
    if data is None:
        return [], why
    # Split at newlines only, as `kubectl logs` shows lines: a carriage return stays in its line.
    lines = data.removesuffix(b"\n").split(b"\n") if data else []
    return [line + b"\n" for line in lines], ""


def warning_events(conn: Connection) -> tuple[list[Object], str]:
    """The namespace's Warning events, oldest first, or ([], why they could not be read)."""
    data, why = _read_body(
        conn, Action("list", EVENTS, conn.namespace), [("fieldSelector", "type=Warning")]
    )
    if data is None:
        return [], why
    try:
        items = json.loads(data).get("items") or []
    except (ValueError, AttributeError):
        return [], f"{conn.target}: the event list is not JSON"
    events = [e for e in items if isinstance(e, Mapping) and e.get("type") == "Warning"]
    return sorted(events, key=event_time), ""


def event_time(event: Object) -> str:
    """When the event last came, to the second ('2026-11-26T08:00:00Z'), as all three of its
    times are comparable; its creationTimestamp when it has none."""
    for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
        value = event.get(key)
        if isinstance(value, str) and value:
            return value[:19] + "Z"
    return str(metadata_of(event).get("creationTimestamp") or "")


def list_task_pods(conn: Connection, task: TaskStatus) -> list[Object]:
    """The pods the Job controller made for the task's Job (its job-name label), oldest first."""
    from simpletfjob.kube.lists import list_objects

    pods = list_objects(conn, PODS, label_selector=f"job-name={task.job}").items
    return sorted(
        own_pods(pods, task), key=lambda p: str(metadata_of(p).get("creationTimestamp") or "")
    )


def own_pods(pods: Iterable[Object], task: TaskStatus) -> list[Object]:
    """The pods of the task's Job as it is now (by uid), not an earlier Job's of its name; all of
    them when its uid is not known."""
    if not task.uid:
        return list(pods)
    by_job = pods_by_job(pods)
    return [*by_job.get(task.uid, ()), *by_job.get(f"name:{task.job}", ())]


def task_events(
    events: Iterable[Object],
    task: TaskStatus,
    pods: Iterable[Object] = (),
    since: datetime | None = None,
) -> list[Object]:
    """The events of the task's Job and its pods, those gone too (by the name JOB-xxxxx); with
    `since` (the Job's creation), only from then on, as an earlier Job's pods were named alike."""
    uids = {str(metadata_of(p).get("uid")) for p in pods}
    named = re.compile(re.escape(task.job) + r"-[a-z0-9]{5}")
    found = []
    for event in events:
        about = event.get("involvedObject") or {}
        kind, name, uid = about.get("kind"), str(about.get("name") or ""), about.get("uid")
        job = kind == "Job" and name == task.job and (not task.uid or not uid or uid == task.uid)
        gone_pod = named.fullmatch(name) and not _came_before(event, since)
        if job or (kind == "Pod" and (uid in uids or gone_pod)):
            found.append(event)
    return found


def _came_before(event: Object, created: datetime | None) -> bool:
    """Whether the event last came before that time (to the second); False when either is not known."""
    when = timestamp(event_time(event))
    return created is not None and when is not None and when < created.replace(microsecond=0)


def event_lines(events: Iterable[Object]) -> list[str]:
    """'  BackoffLimitExceeded (x1) job/mnist-worker-1: Job has reached ...': one line for the
    events that say the same of the same object, their counts summed, in order of arrival."""
    counts: dict[tuple[str, str, str], int] = {}
    for event in events:
        about = event.get("involvedObject") or {}
        ref = f"{str(about.get('kind') or '').lower()}/{about.get('name')}"
        key = (str(event.get("reason")), ref, one_line(event.get("message")))
        count = event.get("count") or (event.get("series") or {}).get("count") or 1
        counts[key] = counts.get(key, 0) + (count if type(count) is int else 1)
    return [f"  {reason} (x{n}) {ref}: {message}" for (reason, ref, message), n in counts.items()]


class Keeper:
    """The last lines of each container seen crashing while `wait` follows the run, by Job,
    and the run's Jobs as last seen.

    `seen(jobs, pods)` gets each state `wait` judges: a crashed instance (`previous`) is read at
    once, in a thread, while its pod is still there. A pod object seen before (the same object:
    a watch's event brings a new one) is not looked at again.
    """

    def __init__(self, conn: Connection, tail: int) -> None:
        self.conn = conn
        self.tail = tail
        self.kept: dict[str, Kept] = {}  # by Job, as pods_by_job files its pods (its uid)
        self.read: set[tuple[str, str, str]] = set()  # (pod uid, container, crash)
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()
        self.looked: dict[int, Object] = {}  # id(pod) -> the pod, of the last `seen`
        self.jobs: Sequence[Object] = ()

    def seen(self, jobs: Sequence[Object], pods: Sequence[Object]) -> None:
        self.jobs = jobs  # the last seen: what their variables say of the tasks' addresses
        if self.tail <= 0:
            return
        looked, self.looked = self.looked, {id(pod): pod for pod in pods}
        for pod in pods:
            if looked.get(id(pod)) is pod:
                continue
            job = str(labels_of(pod).get("job-name") or "")
            metadata = metadata_of(pod)
            for status in (pod.get("status") or {}).get("containerStatuses") or ():
                crash = _crash(status)
                if not job or crash is None:
                    continue
                key = (str(metadata.get("uid")), str(status.get("name")), crash)
                if key in self.read:
                    continue
                self.read.add(key)
                # by its Job's uid: an earlier Job of the name (`run`'s) is not this one
                owner = next(iter(pods_by_job([pod])))
                args = (owner, str(metadata.get("name")), str(status.get("name")))
                thread = threading.Thread(target=self._keep, args=args, daemon=True)
                self.threads.append(thread)
                thread.start()

    def _keep(self, key: str, pod: str, container: str) -> None:
        lines, _ = read_tail(self.conn, pod, container, max(self.tail, SEARCHED), previous=True)
        if lines:
            with self.lock:
                self.kept[key] = Kept(pod, container, tuple(lines))

    def kept_for(self, task: TaskStatus) -> Kept | None:
        for thread in self.threads:
            thread.join(READ_WITHIN)
        with self.lock:
            return self.kept.get(task.uid) or self.kept.get(f"name:{task.job}")


def _crash(status: Mapping[str, Any]) -> str | None:
    """What tells a crash of this container apart from the next ('restart 2'), or None."""
    last = (status.get("lastState") or {}).get("terminated")
    if not isinstance(last, Mapping) or last.get("exitCode") in (0, None):
        return None
    state = status.get("state") or {}
    if int(status.get("restartCount") or 0) > 0 or "waiting" in state:
        return str(last.get("finishedAt") or last.get("containerID") or status.get("restartCount"))
    return None


def explanation(
    conn: Connection, run: Run, tail: int, keeper: Keeper | None = None, failed: str | None = None
) -> list[str]:
    """The lines that say why the run failed (see the module), or why task `failed` did, whether
    or not it decided the run (`run`'s restarts); [] for a run or task that has not."""
    name = run.decided_by if failed is None else failed
    task = next((t for t in run.tasks if t.task == name), None)
    if task is None or run.reason == DELETED:
        return []
    try:
        pods = list_task_pods(conn, task)
        pods_note = ""
    except ClusterError as e:
        pods, pods_note = [], f"{task.task}: its pods could not be read: {e}"
    lines: list[str] = []
    if tail > 0:
        lines += [pods_note] if pods_note else _log_lines(conn, task, pods, tail, keeper)
    events, why = warning_events(conn)
    if why:
        lines.append(f"{task.task}: the events could not be read: {why}")
    else:
        mine = task_events(events, task, pods, since=task.created)
        if mine:
            lines.append(f"{task.task}: Warning events of its Job and pods:")
            lines += event_lines(mine)
    return lines


def _log_lines(
    conn: Connection, task: TaskStatus, pods: Sequence[Object], tail: int, keeper: Keeper | None
) -> list[str]:
    from simpletfjob.runs.logsources import container_state, framework_container

    kept = keeper.kept_for(task) if keeper is not None else None
    pod = _failing_pod(pods)
    going = pod is not None and is_gone(pod)
    if pod is None or (going and kept is not None):
        # gone, or being deleted (the Job controller deletes it at the backoff limit)
        word = "is being deleted" if going else "is gone"
        if kept is None:
            return [f"{task.task}: its pod {word}; its logs went with it"]
        return quoted(
            task.task, f"{task.task}: its pod {word}; {_kept_head(kept, tail)}", kept.lines, tail
        )
    name = str(metadata_of(pod).get("name"))
    container = framework_container(pod)
    state, restarts, reason = container_state(pod, container)
    if state in ("", "failed") or (
        state == "waiting" and not restarts and reason != "CrashLoopBackOff"
    ):
        why = reason or str((pod.get("status") or {}).get("reason") or "")
        return [f"{task.task}: no log: its container never started (pod {name}: {why})"]
    # waiting to start again, or started again after a crash: the instance that crashed
    previous = state == "waiting" or (
        state == "running" and _crash(container_status(pod, container)) is not None
    )
    lines, why = read_tail(conn, name, container, max(tail, SEARCHED), previous)
    if (why or not lines) and kept is not None:
        said = f"its log could not be read ({why})" if why else "its log is empty"
        return quoted(task.task, f"{task.task}: {said}; {_kept_head(kept, tail)}", kept.lines, tail)
    if why:
        return [f"{task.task}: its log could not be read: {why}"]
    if not lines:
        return [f"{task.task}: its log is empty (pod {name}, container {container})"]
    n = min(tail, len(lines))
    head = f"{task.task}: the last {n} lines of its log (pod {name}, container {container}):"
    return quoted(task.task, head, lines, tail)


def quoted(task: str, head: str, lines: Sequence[bytes], tail: int) -> list[str]:
    """A failed task's log lines as shown: its error (classify.task_error), unless `head` and the
    last `tail` lines hold it all, then those lines."""
    text = [line.decode("utf-8", "surrogateescape") for line in lines]
    last = [f"{task} | {line.rstrip()}" for line in text[max(0, len(text) - tail) :]]
    error = [f"{task} | {line.rstrip()}" for line in task_error(text)]
    said = [f"{task}: its error:", *error] if not set(error) <= set(last) else []
    return [*said, head, *last]


def _kept_head(kept: Kept, tail: int) -> str:
    return (
        f"the last {min(tail, len(kept.lines))} lines of its container when it crashed, kept "
        f"by wait (pod {kept.pod}, container {kept.container}):"
    )


def _failing_pod(pods: Sequence[Object]) -> Object | None:
    """The newest pod that failed (phase Failed, or a container that exited non-zero), else the newest."""
    live = [p for p in pods if not is_gone(p)] or list(pods)

    def failed(pod: Object) -> bool:
        status = pod.get("status") or {}
        if status.get("phase") == "Failed":
            return True
        for c in status.get("containerStatuses") or ():
            for where in ("state", "lastState"):
                term = (c.get(where) or {}).get("terminated") or {}
                if term.get("exitCode") not in (0, None):
                    return True
        return False

    failing = [p for p in live if failed(p)]
    chosen = failing or live
    return chosen[-1] if chosen else None


def stuck_reasons(conn: Connection, run: Run) -> tuple[Run, str]:
    """The run with each Pending task whose pod says nothing better given its latest Warning
    event's reason (`FailedMount` behind `ContainerCreating`), and a note if events could not be
    read; no request unless a task is so."""
    stuck = [t for t in run.tasks if t.state == PENDING and t.reason in GENERIC]
    if not stuck:
        return run, ""
    events, why = warning_events(conn)
    if why:
        return run, f"the events could not be read: {why}"
    better: dict[str, TaskStatus] = {}
    for task in stuck:
        mine = task_events(events, task)
        if mine:
            latest = mine[-1]
            better[task.task] = replace(
                task,
                reason=str(latest.get("reason") or task.reason),
                message=one_line(latest.get("message")),
            )
    if not better:
        return run, ""
    tasks = tuple(better.get(t.task, t) for t in run.tasks)
    return replace(run, tasks=tasks), ""


def refused_cause(run: Run, pods: Iterable[Mapping[str, Any]]) -> Cause | None:
    """'worker-1 refused by node h3: OutOfnvidia.com/gpu', for the first refused pod in role order."""
    tasks = {task.job: task.task for task in run.tasks if not task.finished}
    found: dict[str, Cause] = {}
    for pod in pods:
        status = pod.get("status") or {}
        reason = str(status.get("reason") or "")
        if status.get("phase") != "Failed" or not (
            reason.startswith("OutOf") or reason in REFUSALS
        ):
            continue
        job = str(((pod.get("metadata") or {}).get("labels") or {}).get("job-name") or "")
        if job in tasks:
            node = (pod.get("spec") or {}).get("nodeName") or "?"
            found.setdefault(tasks[job], refused(tasks[job], node, reason))
    order = [task.task for task in run.tasks]
    return found[min(found, key=order.index)] if found else None


@dataclass(eq=False)
class NodeWatch:
    """The nodes of a run's unfinished tasks, read on each tick; a cause once one is lost too long."""

    conn: Connection
    grace: float
    say: Callable[[str], None] = lambda line: None
    watching: bool = True  # False once reading nodes is known to be refused
    since: dict[str, float] = field(default_factory=dict)  # node -> first seen NotReady or gone

    def check(self, run: Run) -> Cause | None:
        """The cause, 'worker-1 on node h3: NotReady for more than 1m', or None."""
        from simpletfjob.kube.outage import go_duration

        if not self.watching:
            return None
        on: dict[str, list[str]] = {}
        for task in run.tasks:
            if task.node and not task.finished:
                on.setdefault(task.node, []).append(task.task)
        now = time.monotonic()
        for node in sorted(on):
            how = self._how(node)
            if not self.watching:
                return None
            if how is None:
                self.since.pop(node, None)
                continue
            first = self.since.setdefault(node, now)
            if now - first >= self.grace:
                return node_lost(on[node], node, how, go_duration(self.grace))
        return None

    def _how(self, node: str) -> str | None:
        """'NotReady' or 'gone', or None when the node is Ready (or cannot be read: 403, said once)."""
        from simpletfjob.kube.refusals import refusal_line, status_of

        action = Action("get", NODES, None, node)
        answer = request(self.conn, action, passthrough=(403, 404))
        if answer.status == 404:
            return "gone"
        if answer.status == 403:
            self.watching = False  # only the pods can tell from now on
            reason, message, details = status_of(answer.data, answer.reason)
            line = refusal_line(self.conn.target, action, 403, reason, message, details)
            self.say(f"simpletfjob: warning: node loss not watched: {line}")
            return None
        return None if _ready(json.loads(answer.data)) else "NotReady"


def _ready(node: Mapping[str, Any]) -> bool:
    conditions: Sequence[Any] = (node.get("status") or {}).get("conditions") or ()
    return any(
        isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions
    )
