"""What a node has in use: its pods' requests and host ports, counted as `kubectl describe node` counts them.

The rules (kubectl's `PodRequestsAndLimits`, which the scheduler's fit check also follows):

- only non-terminated pods count: every phase but Succeeded and Failed, so a
  scheduled Pending pod and an Unknown one (its node lost) count;
- a pod asks for the sum of its containers' requests, plus its sidecars'
  (init containers with `restartPolicy: Always`, which run beside them); but at
  least as much as its largest regular init container together with the
  sidecars started before it; plus its `overhead` (a RuntimeClass's cost);
- a container with a limit and no request asks for its limit, as the API server
  defaults it;
- a host port is held by a container's `hostPort`, or on a `hostNetwork` pod by
  every container port; the pod's sidecars hold theirs too, as they keep running.

Two more rules, for what a node's pod list does not show yet, or no longer shows as
someone else's:

- an active Job (no Complete or Failed condition, not suspended, not being deleted) whose
  pod template pins a node holds that template's requests and host ports there once per
  pod it still wants (`parallelism`, default 1, at most the completions to come) beyond its
  live ones: two runs applied back to back do not both take the same GPUs and port;
- the run's own pods do not count against it, but only while its Job exists and is not
  being deleted (a stopping pod of a deleted run holds its port and GPUs until it is gone);
  when the Jobs cannot be listed, while the pod has a controlling Job and is not being deleted.

Each resource is counted on its own, so only those a run asks about are added up. Pure
functions over the JSON of v1 Pods and batch/v1 Jobs, fed by cluster.py.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from types import MappingProxyType
from typing import Any, NamedTuple

from simpletfjob.errors import InputError
from simpletfjob.hosts.requested import (
    ZERO,
    Port,
    held_ports,
    list_at,
    mapping_at,
    pod_request,
    pod_units,
)
from simpletfjob.inputs import describe_value

# The field selector that leaves out terminated pods, as `kubectl describe node` lists them.
NOT_TERMINATED = "status.phase!=Succeeded,status.phase!=Failed"
TERMINATED_PHASES = frozenset({"Succeeded", "Failed"})


# ---- one pod --------------------------------------------------------------------------------


class PodUse(NamedTuple):
    """What one pod takes on its node, as the rules count it."""

    namespace: str
    name: str
    node: str  # '' when not scheduled
    phase: str
    job: str | None  # its simpletfjob/job label, for leaving a run's own pods out
    requested: Fraction  # of the one resource asked about
    ports: tuple[Port, ...]  # the host ports it holds
    owner: str | None = None  # the uid of the Job that controls it
    deleting: bool = False  # it has a deletionTimestamp: stopping, but not gone
    # Of the other resources a run's fit asks about (`others` of pod_use), in the scheduler's units.
    others: tuple[int, ...] = ()

    @property
    def live(self) -> bool:
        """Not terminated and not being deleted: a pod its Job controller counts as active."""
        return self.phase not in TERMINATED_PHASES and not self.deleting

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def counts(self) -> bool:
        """Scheduled and not terminated: it takes room on its node."""
        return bool(self.node) and self.phase not in TERMINATED_PHASES


def _controller(metadata: dict[str, Any], where: str) -> str | None:
    """The uid of the Job its ownerReferences name as controller, if any."""
    for ref in list_at(metadata.get("ownerReferences"), where, "metadata.ownerReferences"):
        if type(ref) is dict and ref.get("controller") is True and ref.get("kind") == "Job":
            uid = ref.get("uid")
            return uid if type(uid) is str else None
    return None


def pod_use(
    obj: Any, resource: str, job_label: str, origin: str, others: Sequence[str] = ()
) -> PodUse:
    """One pod of a list, read for what it takes; `origin` names the list item in messages.
    `others` are the resources besides `resource` that a run's fit asks about (hosts/fit.py)."""
    if type(obj) is not dict:
        raise InputError(f"{origin}: a pod must be a mapping, not {describe_value(obj)}")
    metadata = mapping_at(obj.get("metadata"), origin, "metadata")
    namespace, name = metadata.get("namespace") or "", metadata.get("name")
    if type(name) is not str or type(namespace) is not str:
        raise InputError(f"{origin}: metadata.name and metadata.namespace must be strings")
    where = f"{origin}, pod {namespace}/{name}"
    spec = mapping_at(obj.get("spec"), where, "spec")
    status = mapping_at(obj.get("status"), where, "status")
    labels = mapping_at(metadata.get("labels"), where, "metadata.labels")
    node, phase, job = spec.get("nodeName") or "", status.get("phase") or "", labels.get(job_label)
    if type(node) is not str or type(phase) is not str:
        raise InputError(f"{where}: spec.nodeName and status.phase must be strings")
    return PodUse(
        namespace,
        name,
        node,
        phase,
        job if type(job) is str else None,
        pod_request(spec, resource, where),
        held_ports(spec, where),
        _controller(metadata, where),
        metadata.get("deletionTimestamp") is not None,
        tuple(pod_units(spec, others, where)) if others else (),
    )


# ---- one Job --------------------------------------------------------------------------------


class JobUse(NamedTuple):
    """A Job, as the counting rules see it: which run it is, and what its pods to come take."""

    namespace: str
    name: str
    uid: str
    job: str | None  # its simpletfjob/job label
    live: bool  # not being deleted
    active: bool  # live, not finished and not suspended: it makes pods
    node: str  # the node its pod template pins ('' when none)
    wanted: int  # how many pods it wants running at once
    requested: Fraction  # of the one resource asked about, per pod
    ports: tuple[Port, ...]  # the host ports each pod holds
    others: tuple[int, ...] = ()  # of the other resources, per pod (PodUse.others)

    @property
    def ref(self) -> str:
        """How a port it holds names it: it has no pod yet to name."""
        return f"{self.namespace}/{self.name} (Job, pod not created yet)"


def _whole_number(value: Any, where: str, field: str, default: int) -> int:
    if value is None:
        return default
    if type(value) is not int or value < 0:
        raise InputError(f"{where}: {field} must be a whole number, not {describe_value(value)}")
    return value


def job_use(
    obj: Any, resource: str, job_label: str, origin: str, others: Sequence[str] = ()
) -> JobUse:
    """One Job of a list, read for the pods it has yet to make; `origin` names the list item."""
    if type(obj) is not dict:
        raise InputError(f"{origin}: a job must be a mapping, not {describe_value(obj)}")
    metadata = mapping_at(obj.get("metadata"), origin, "metadata")
    namespace, name = metadata.get("namespace") or "", metadata.get("name")
    uid = metadata.get("uid") or ""
    if type(name) is not str or type(namespace) is not str or type(uid) is not str:
        raise InputError(f"{origin}: metadata.name, namespace and uid must be strings")
    where = f"{origin}, job {namespace}/{name}"
    labels = mapping_at(metadata.get("labels"), where, "metadata.labels")
    job = labels.get(job_label)
    spec = mapping_at(obj.get("spec"), where, "spec")
    status = mapping_at(obj.get("status"), where, "status")
    template = mapping_at(spec.get("template"), where, "spec.template")
    pod_spec = mapping_at(template.get("spec"), where, "spec.template.spec")
    node = pod_spec.get("nodeName") or ""
    if type(node) is not str:
        raise InputError(f"{where}: spec.template.spec.nodeName must be a string")
    finished = any(
        type(c) is dict and c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in list_at(status.get("conditions"), where, "status.conditions")
    )
    live = metadata.get("deletionTimestamp") is None
    active = live and not finished and spec.get("suspend") is not True
    wanted = _whole_number(spec.get("parallelism"), where, "spec.parallelism", 1)
    completions = spec.get("completions")
    if completions is not None:
        done = _whole_number(status.get("succeeded"), where, "status.succeeded", 0)
        left = _whole_number(completions, where, "spec.completions", 1) - done
        wanted = max(0, min(wanted, left))
    pinned = active and bool(node) and wanted > 0
    return JobUse(
        namespace,
        name,
        uid,
        job if type(job) is str else None,
        live,
        active,
        node,
        wanted,
        pod_request(pod_spec, resource, where) if pinned else ZERO,
        held_ports(pod_spec, where) if pinned else (),
        tuple(pod_units(pod_spec, others, where)) if pinned and others else (),
    )


# ---- a node ---------------------------------------------------------------------------------


class NodeUsage(NamedTuple):
    """What a node's counted pods take: the resource asked about, how many pods, and host ports;
    and the other resources a run's fit asks about, in the scheduler's units (none: 0)."""

    requested: int
    pods: int
    ports: Mapping[Port, str]  # each held port -> the pod holding it ('ns/name'; the first by name)
    amounts: Mapping[str, int] = MappingProxyType({})

    def used(self, resource: str) -> int:
        """What the pods request of one of the fit's resources, in the scheduler's units."""
        return self.amounts.get(resource, 0)

    @property
    def port_numbers(self) -> list[int]:
        """The held host ports' numbers, sorted, each once."""
        return sorted({number for number, _ in self.ports})


EMPTY = NodeUsage(0, 0, {})


class Own(NamedTuple):
    """The run being placed: its pods do not count against it (a re-render sees its own room).
    A pod is the run's own while its Job exists and is not being deleted: `jobs` holds the
    uids of the run's Jobs that do. Without them (None: the Jobs were not listed), while it
    has a controlling Job and is not being deleted itself."""

    job: str | None  # the simpletfjob/job label; None: every pod counts
    namespaces: frozenset[str]
    jobs: frozenset[str] | None = None

    def owns(self, pod: PodUse) -> bool:
        if self.job is None or pod.job != self.job or pod.namespace not in self.namespaces:
            return False
        if self.jobs is None:
            return pod.owner is not None and not pod.deleting
        return pod.owner in self.jobs

    def owns_job(self, job: JobUse) -> bool:
        return self.job is not None and job.job == self.job and job.namespace in self.namespaces

    def knowing(self, jobs: Iterable[JobUse]) -> Own:
        """This run, knowing the cluster's Jobs: its own are those that live."""
        return self._replace(jobs=frozenset(j.uid for j in jobs if j.live and self.owns_job(j)))


def pinned_jobs(jobs: Iterable[JobUse], own: Own) -> dict[str, list[JobUse]]:
    """The Jobs that may hold room for pods they have yet to make, by the node they pin."""
    found: dict[str, list[JobUse]] = {}
    for job in jobs:
        if job.active and job.node and job.wanted and not own.owns_job(job):
            found.setdefault(job.node, []).append(job)
    return found


NOBODY = Own(None, frozenset())


class Tally:
    """Pods added one at a time (a page at a time), summed per node; with the pods that the
    `pinned` Jobs (by node, from `pinned_jobs`) have yet to make."""

    def __init__(
        self,
        own: Own = NOBODY,
        pinned: Mapping[str, list[JobUse]] | None = None,
        others: Sequence[str] = (),
    ) -> None:
        self.own = own
        self.pinned = pinned or {}
        self.others = tuple(others)  # the resources of PodUse.others, by name
        self._others: dict[str, list[int]] = {}
        self._requested: dict[str, Fraction] = {}
        self._pods: dict[str, int] = {}
        self._ports: dict[str, dict[Port, str]] = {}
        self._live: dict[str, int] = {}  # a Job's uid -> its live pods seen

    def add(self, pod: PodUse) -> None:
        if not pod.counts:
            return
        if pod.owner is not None and self.pinned and pod.live:
            self._live[pod.owner] = self._live.get(pod.owner, 0) + 1
        if self.own.owns(pod):
            return
        node = pod.node
        self._pods[node] = self._pods.get(node, 0) + 1
        if pod.requested:
            self._requested[node] = self._requested.get(node, Fraction(0)) + pod.requested
        if pod.others and any(pod.others):
            summed = self._others.setdefault(node, [0] * len(pod.others))
            for k, amount in enumerate(pod.others):
                summed[k] += amount
        if pod.ports:
            self._hold_in(self._ports.setdefault(node, {}), pod.ports, pod.ref)

    def add_all(self, pods: Iterable[PodUse]) -> Tally:
        for pod in pods:
            self.add(pod)
        return self

    def node(self, name: str) -> NodeUsage:
        """What the counted pods, and the pods to come, take on that node (nothing, if none)."""
        requested = self._requested.get(name, ZERO)
        ports = self._ports.get(name, {})
        others = list(self._others.get(name, ()))
        pending = False
        for job in self.pinned.get(name, ()):
            missing = job.wanted - self._live.get(job.uid, 0)
            if missing > 0:
                pending = True
                requested += missing * job.requested
                if job.others:
                    others = [
                        a + missing * b
                        for a, b in zip(others or [0] * len(job.others), job.others, strict=True)
                    ]
                if job.ports:
                    ports = dict(ports)
                    self._hold_in(ports, job.ports, job.ref)
        if name not in self._pods and not pending:
            return EMPTY
        amounts = {r: a for r, a in zip(self.others, others, strict=False) if a}
        # A count of devices: a fraction of one rounds up, as it occupies one.
        return NodeUsage(math.ceil(requested), self._pods.get(name, 0), ports, amounts)

    @staticmethod
    def _hold_in(held: dict[Port, str], ports: Iterable[Port], ref: str) -> None:
        for port in ports:
            other = held.get(port)
            if other is None or ref < other:  # the same holder whatever the list's order
                held[port] = ref
