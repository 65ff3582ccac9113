"""Roles: the tasks of the run (role, index, host, port) and each task's TF_CONFIG.

Assignment walks the host slots in order -- each selected host gives
`tasks_per_host` slots on ports port, port+1, ... -- and hands them out as
chief (if asked), the parameter servers, the workers, and last the evaluator
(if asked). Each role is indexed from 0 and the tasks come out in that order,
which is also the order of the documents.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from simpletfjob.errors import SelectionError, UsageError


class Host(NamedTuple):
    node: str  # the node name, for nodeName: and the exclusion file
    address: str  # what <<host>> and TF_CONFIG name: node name, InternalIP or hostname label


class Task:
    """One TensorFlow task; tasks are distinct objects, compared and hashed by identity."""

    __slots__ = ("host", "index", "node", "port", "role")

    def __init__(self, role: str, index: int, node: str, host: str, port: int) -> None:
        self.role = role
        self.index = index
        self.node = node  # the node name, for nodeName: and labels
        self.host = host  # the address TF_CONFIG and <<host>> use
        self.port = port

    def __repr__(self) -> str:
        return f"Task({self.role!r}, {self.index}, {self.node!r}, {self.host!r}, {self.port})"

    @property
    def endpoint(self) -> str:
        """host:port, with an IPv6 address in brackets as gRPC expects ([fd00::1]:2222)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def assign_roles(
    hosts: Sequence[Host],
    *,
    psn: int = 1,
    psf: Sequence[str] = (),
    chief: bool = False,
    evaluator: bool = False,
    port: int = 2222,
    tasks_per_host: int = 1,
) -> list[Task]:
    """Give every host slot a role; `psf` (node names) pins the ps to those hosts' first slots."""
    if tasks_per_host < 1:
        raise UsageError("--tasks-per-host must be at least 1")
    if port + tasks_per_host - 1 > 65535:
        raise UsageError(f"--port {port} with {tasks_per_host} tasks per host goes past port 65535")
    slots = [(h, port + k) for h in hosts for k in range(tasks_per_host)]
    if psf:
        first_slot: dict[str, int] = {}
        for i, (h, _) in enumerate(slots):
            first_slot.setdefault(h.node, i)
        ps_slots = [slots[first_slot[name]] for name in psf]
        taken = {first_slot[name] for name in psf}
        rest = [s for i, s in enumerate(slots) if i not in taken]
        chief_slots, rest = (rest[:1], rest[1:]) if chief else ([], rest)
    else:
        chief_slots, rest = (slots[:1], slots[1:]) if chief else ([], slots)
        ps_slots, rest = rest[:psn], rest[psn:]
    evaluator_slots, worker_slots = (rest[-1:], rest[:-1]) if evaluator else ([], rest)
    if not worker_slots:
        raise SelectionError(
            _no_worker_message(len(slots), len(chief_slots), len(ps_slots), evaluator)
        )
    tasks = []
    for role, role_slots in (
        ("chief", chief_slots),
        ("ps", ps_slots),
        ("worker", worker_slots),
        ("evaluator", evaluator_slots),
    ):
        tasks += [Task(role, i, h.node, h.address, p) for i, (h, p) in enumerate(role_slots)]
    return tasks


def _no_worker_message(slots: int, chiefs: int, ps: int, evaluator: bool) -> str:
    taken = [f"{ps} ps"] + (["1 chief"] if chiefs else []) + (["1 evaluator"] if evaluator else [])
    noun = "task" if slots == 1 else "tasks"
    return (
        f"no task is left for a worker: {slots} {noun} in all, taken by {' + '.join(taken)}; "
        "use more hosts (-N) or fewer parameter servers (--psn)"
    )


class ClusterSpec:
    """The `cluster` part of TF_CONFIG, built once, and each task's whole TF_CONFIG from it.

    Keys are sorted, as the original tool's JSON was: the cluster lists chief,
    (evaluator,) ps, worker, and the task gives index before type. The evaluator
    is left out of the cluster unless `include_evaluator`, as TensorFlow documents.
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        endpoints: Mapping[Task, str] | None = None,
        include_evaluator: bool = False,
    ) -> None:
        cluster: dict[str, list[str]] = {}
        for t in tasks:
            if t.role == "evaluator" and not include_evaluator:
                continue
            endpoint = endpoints[t] if endpoints is not None else t.endpoint
            cluster.setdefault(t.role, []).append(endpoint)
        self.cluster = {role: cluster[role] for role in sorted(cluster)}
        self._lists = {role: ",".join(map(json.dumps, eps)) for role, eps in self.cluster.items()}
        self._hosts: dict[str, str] = {}
        self._compact_prefix = (
            '{"cluster":{'
            + ",".join(f"{json.dumps(r)}:[{lst}]" for r, lst in self._lists.items())
            + '},"task":{"index":'
        )
        self._pretty_prefixes: dict[str, str] = {}

    def hosts(self, role: str) -> str:
        """Comma-separated host:port list of one role, for --ps_hosts/--worker_hosts style flags."""
        joined = self._hosts.get(role)
        if joined is None:
            joined = self._hosts[role] = ",".join(self.cluster.get(role, ()))
        return joined

    def config(self, task: Task) -> dict[str, object]:
        return {
            "cluster": {role: list(eps) for role, eps in self.cluster.items()},
            "task": {"type": task.role, "index": task.index},
        }

    def compact(self, task: Task) -> str:
        """TF_CONFIG on one line with no spaces, safe inside any YAML quoting or plain scalar."""
        return "".join(self.compact_parts(task))

    def compact_parts(self, task: Task) -> tuple[str, str]:
        """compact() as (the shared cluster part, this task's part), so the first is never copied."""
        return self._compact_prefix, f'{task.index},"type":{json.dumps(task.role)}}}}}'

    def pretty(self, task: Task, indent: str) -> str:
        """TF_CONFIG as indented lines, each starting with `indent`, ending with a newline.

        This is the original tool's layout: one line per role, hosts on that line.
        """
        return "".join(self.pretty_parts(task, indent))

    def pretty_parts(self, task: Task, indent: str) -> tuple[str, str]:
        prefix = self._pretty_prefixes.get(indent)
        if prefix is None:
            roles = ",\n".join(
                f"{indent}    {json.dumps(r)}: [{lst}]" for r, lst in self._lists.items()
            )
            prefix = f'{indent}{{\n{indent}  "cluster": {{\n{roles}\n{indent}  }},\n{indent}  "task": {{\n'
            self._pretty_prefixes[indent] = prefix
        return prefix, (
            f'{indent}    "index": {task.index},\n'
            f'{indent}    "type": {json.dumps(task.role)}\n{indent}  }}\n{indent}}}\n'
        )
