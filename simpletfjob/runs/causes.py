"""Why `run` restarts a run that `wait` would still be waiting on: a refused pod, a lost node.

A run fails, for `run`, when (besides a task's Job failing, which state.py judges):

- **a node refused a task's pod**: the kubelet admits a pod or fails it at once, with
  phase Failed and a reason such as `OutOfnvidia.com/gpu`, `OutOfcpu`, `NodeAffinity`,
  `NodePorts` or `NodeName`. The Job controller would only make another pod for the same
  node, which refuses it again;
- **a task's node has been NotReady, or gone, for longer than the grace**: the node as
  its Ready condition says (a node lifecycle controller sets it Unknown once the kubelet
  stops posting), or a 404. The time is counted from when this client first saw it so,
  on its own clock: the node's lastTransitionTime is the server's, and clocks differ.
  Tasks that have finished do not count: their node is no longer needed.

Reading a node needs `get` on nodes, cluster-wide. `run` asks before it starts
(permissions.py) and warns once when it may not; a refusal met all the same (no review
could be asked, or the right was taken away meanwhile) is said once, in the same words as
every refusal, and the nodes are not read again: node loss is then not watched.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from simpletfjob.runs.classify import Cause, node_lost, refused
from simpletfjob.runs.state import Run
from simpletfjob.runs.taskstate import Object, timestamp

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection

REFUSALS = ("NodeAffinity", "NodePorts", "NodeName", "UnexpectedAdmissionError")


def refusal(run: Run, pods: Iterable[Mapping[str, Any]]) -> Cause | None:
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


class NodeWatch:
    """The nodes of a run's unfinished tasks, read on each tick; a cause once one is lost too long."""

    def __init__(
        self,
        conn: Connection,
        grace: float,
        say: Callable[[str], None] = lambda line: None,
        watching: bool = True,
    ) -> None:
        self.conn = conn
        self.grace = grace
        self.say = say
        self.watching = watching  # False once reading nodes is known to be refused
        self.since: dict[str, float] = {}  # node -> when it was first seen NotReady or gone

    def check(self, run: Run) -> Cause | None:
        """The cause, 'worker-1 on node h3: NotReady for more than 1m', or None."""
        from simpletfjob.kube.outage import duration

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
                return node_lost(on[node], node, how, duration(self.grace))
        return None

    def _how(self, node: str) -> str | None:
        """'NotReady' or 'gone', or None when the node is Ready (or cannot be read: 403, said once)."""
        from simpletfjob.kube.refusals import refusal, status_of
        from simpletfjob.kube.request import Action, request
        from simpletfjob.kube.resources import NODES

        action = Action("get", NODES, None, node)
        answer = request(self.conn, action, passthrough=(403, 404))
        if answer.status == 404:
            return "gone"
        if answer.status == 403:
            self.watching = False  # only the pods can tell from now on
            reason, message, details = status_of(answer.data, answer.reason)
            line = refusal(self.conn.target, action, 403, reason, message, details)
            self.say(f"simpletfjob: warning: node loss not watched: {line}")
            return None
        return None if _ready(json.loads(answer.data)) else "NotReady"


def _ready(node: Mapping[str, Any]) -> bool:
    conditions: Sequence[Any] = (node.get("status") or {}).get("conditions") or ()
    return any(
        isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions
    )


def node_condition(node: Object | None, now: datetime | None = None) -> str:
    """How a node is, for a pod in phase Unknown on it: 'NotReady since 12:03' (UTC).

    From its Ready condition, as `kubectl get nodes` words it (False or Unknown: NotReady);
    the date is added when the change is more than a day old. None: 'unreachable'.
    """
    if node is None:
        return "unreachable"
    ready = next(
        (
            c
            for c in (node.get("status") or {}).get("conditions") or ()
            if isinstance(c, Mapping) and c.get("type") == "Ready"
        ),
        None,
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
