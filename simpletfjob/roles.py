"""Roles: the tasks of the run (role, index, host, port) and each task's TF_CONFIG.

Seating walks the host slots in order -- each eligible host gives
`tasks_per_host` slots on ports port, port+1, ... -- and hands them out as
chief (if asked), the parameter servers, the workers, and last the evaluator
(if asked), each on a host its role may use (see `place_tasks`). Each role is
indexed from 0 and the tasks come out in that order, which is also the order
of the documents.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
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


ROLE_ORDER = ("chief", "ps", "worker", "evaluator")


# Where each role's tasks go, in index order: (host position, slot) pairs; a task's
# port is port + slot.
Seating = dict[str, list[tuple[int, int]]]


def run_roles(*, chief: bool, ps: bool, evaluator: bool) -> tuple[str, ...]:
    """The roles a run has, in the order they are handed out."""
    wanted = {"chief": chief, "ps": ps, "worker": True, "evaluator": evaluator}
    return tuple(role for role in ROLE_ORDER if wanted[role])


def assign_roles(
    hosts: Sequence[Host],
    *,
    num: int = -1,
    psn: int = 1,
    psf: Sequence[str] = (),
    chief: bool = False,
    evaluator: bool = False,
    port: int = 2222,
    tasks_per_host: int = 1,
    may_take: Callable[[str, int], bool] | None = None,
) -> list[Task]:
    """The run's tasks on these hosts, for callers that know every host's address; see `place_tasks`."""
    if port + tasks_per_host - 1 > 65535:
        raise UsageError(f"--port {port} with {tasks_per_host} tasks per host goes past port 65535")
    seats = place_tasks(
        [h.node for h in hosts],
        num=num,
        psn=psn,
        psf=psf,
        chief=chief,
        evaluator=evaluator,
        tasks_per_host=tasks_per_host,
        may_take=may_take,
    )
    return tasks_at(seats, hosts.__getitem__, port)


def tasks_at(seats: Seating, host: Callable[[int], Host], port: int) -> list[Task]:
    """The tasks, in role order; `host` is asked once for each host used, so only those need an address."""
    hosts: dict[int, Host] = {}
    tasks: list[Task] = []
    append = tasks.append  # a thousand hosts or more pass through here
    for role in ROLE_ORDER:
        for index, (i, slot) in enumerate(seats.get(role, ())):
            h = hosts.get(i)
            if h is None:
                h = hosts[i] = host(i)
            append(Task(role, index, h.node, h.address, port + slot))
    return tasks


def place_tasks(
    hosts: Sequence[str],
    *,
    num: int = -1,
    psn: int = 1,
    psf: Sequence[str] = (),
    chief: bool = False,
    evaluator: bool = False,
    tasks_per_host: int = 1,
    may_take: Callable[[str, int], bool] | None = None,
    note: Callable[[], str] | None = None,
) -> Seating:
    """Seat every task of the run on the hosts (node names, in order).

    Each host gives `tasks_per_host` slots; the slots are walked in order, host
    by host and each host's ports in turn. `may_take(role, i)` says whether a
    task of that role may run on host i (None: every role may use every host).
    The --psf hosts' first slots are the parameter servers, in the file's
    order. Then the chief, the other parameter servers, the workers and the
    evaluator each take the first free slot on a host their role may use. With
    `num` (-N) the run uses exactly `num` hosts: no task opens a host past
    that, and a worker passes over a slot whose taking would leave the
    evaluator none. With -1 the evaluator takes the last free slot it may use
    before the workers take every free slot they may use. `note` gives the
    nodes' breakdown, which ends the message when the hosts fall short.
    """
    if tasks_per_host < 1:
        raise UsageError("--tasks-per-host must be at least 1")
    count = len(hosts)
    limit = count if num == -1 else min(num, count)
    _check_size(limit, tasks_per_host)
    _check_capacity(limit * tasks_per_host, len(psf) or psn, bool(psf), chief, evaluator, num, note)
    seating = _Seating(hosts, num, tasks_per_host, may_take, note)
    return seating.seat(psn, psf, chief, evaluator)


# Every task's TF_CONFIG lists every task, so the output grows as the square of the
# tasks: 1000 tasks make about 50 MB, 10,000 about 5 GB. Past that a run would take
# minutes and fill a disk (`--port 1 --tasks-per-host 65535` on two hosts asks for
# 131,070 tasks and 200 GB), so it is refused before any work; Kubernetes itself
# supports clusters of at most 5000 nodes.
MAX_TASKS = 10_000


def _check_size(hosts: int, tasks_per_host: int) -> None:
    """Refuse a run of more tasks than MAX_TASKS, before any host is seated."""
    slots = hosts * tasks_per_host
    if slots <= MAX_TASKS:
        return
    per_host = f" x {tasks_per_host:,} tasks per host" if tasks_per_host > 1 else ""
    raise SelectionError(
        f"the run would have up to {slots:,} tasks ({hosts:,} hosts{per_host}); a run has at "
        f"most {MAX_TASKS:,}, since every task's TF_CONFIG lists every task; use -N or "
        "--tasks-per-host to ask for fewer (see Limits in the README)"
    )


def _check_capacity(
    slots: int,
    ps: int,
    pinned: bool,
    chief: bool,
    evaluator: bool,
    num: int,
    note: Callable[[], str] | None,
) -> None:
    """Too few slots for the chief, the parameter servers, one worker and the evaluator."""
    if pinned:
        chiefs = min(int(chief), slots - ps)
    else:
        chiefs = min(int(chief), slots)
        ps = min(ps, slots - chiefs)
    if slots - chiefs - ps - int(evaluator) >= 1:
        return
    taken = [f"{ps} ps"] + (["1 chief"] if chiefs else []) + (["1 evaluator"] if evaluator else [])
    noun = "task" if slots == 1 else "tasks"
    message = f"no task is left for a worker: {slots} {noun} in all, taken by {' + '.join(taken)}; "
    if num == -1 and note is not None:
        # -N -1 took every eligible host already: the count says why there are so few.
        message += f"use more hosts or fewer parameter servers (--psn) ({note()})"
    else:
        message += "use more hosts (-N) or fewer parameter servers (--psn)"
    raise SelectionError(message)


def _any_role(role: str, host: int) -> bool:
    return True


class _Seating:
    """The walk of `place_tasks`: free slots per host, and which hosts are in use."""

    def __init__(
        self,
        hosts: Sequence[str],
        num: int,
        tasks_per_host: int,
        may_take: Callable[[str, int], bool] | None,
        note: Callable[[], str] | None,
    ) -> None:
        self.hosts = hosts
        self.num = num
        self.limit = len(hosts) if num == -1 else num  # how many hosts may be in use
        self.per_host = tasks_per_host
        self.may_take = may_take or _any_role
        self.note = note
        # Host i's free slots are lo[i] .. hi[i]-1: tasks take the first one, except
        # the evaluator with -N -1, which takes the last.
        self.lo = [0] * len(hosts)
        self.hi = [tasks_per_host] * len(hosts)
        self.used = 0
        self.next_host = dict.fromkeys(ROLE_ORDER, 0)  # no free slot for the role before it
        self.placed: Seating = {role: [] for role in ROLE_ORDER}
        self.kept_for_evaluator = False  # a worker passed over a slot the evaluator needs

    def in_use(self, host: int) -> bool:
        return self.lo[host] > 0 or self.hi[host] < self.per_host

    def take(self, role: str, host: int, last: bool = False) -> None:
        if not self.in_use(host):
            self.used += 1
        if last:
            self.hi[host] -= 1
            slot = self.hi[host]
        else:
            slot = self.lo[host]
            self.lo[host] += 1
        self.placed[role].append((host, slot))

    def open_to(self, role: str, host: int) -> bool:
        """Host has a free slot that a task of this role may take now."""
        return (
            self.lo[host] < self.hi[host]
            and (self.used < self.limit or self.in_use(host))
            and self.may_take(role, host)
        )

    def first_free(self, role: str) -> int | None:
        # Slots are only ever taken, and hosts only come into use, so a host
        # passed over once stays closed to the role: each role's walk moves forward.
        host = self.next_host[role]
        while host < len(self.hosts) and not self.open_to(role, host):
            host += 1
        self.next_host[role] = host
        return host if host < len(self.hosts) else None

    def last_free(self, role: str) -> int | None:
        for host in range(len(self.hosts) - 1, -1, -1):
            if self.open_to(role, host):
                return host
        return None

    def seat(self, psn: int, psf: Sequence[str], chief: bool, evaluator: bool) -> Seating:
        position = {name: i for i, name in enumerate(self.hosts)}
        for name in psf:
            self.take("ps", position[name])
        for role, count in (("chief", int(chief)), ("ps", 0 if psf else psn)):
            for _ in range(count):
                host = self.first_free(role)
                if host is None:
                    raise self.shortage(role)
                self.take(role, host)
        limited = self.num != -1
        if evaluator:
            host = self.first_free("evaluator") if limited else self.last_free("evaluator")
            if host is None:
                raise self.shortage("evaluator")
            if not limited:
                self.take("evaluator", host, last=True)
        if limited and evaluator:
            self.seat_workers_leaving_the_evaluator_a_slot()
        else:
            self.seat_workers()
        if not self.placed["worker"]:
            raise self.shortage("worker")
        if limited and evaluator:
            host = self.first_free("evaluator")
            assert host is not None, "the workers leave the evaluator a slot"
            self.take("evaluator", host)
        if limited and self.used < self.limit:
            raise self.too_few_used(psn if not psf else 0)
        return self.placed

    def seat_workers(self) -> None:
        """Every free slot a worker may take, in order (this is most of the walk: kept tight)."""
        lo, hi, workers = self.lo, self.hi, self.placed["worker"]
        may_take = None if self.may_take is _any_role else self.may_take
        limited = self.num != -1
        for host in range(self.next_host["worker"], len(self.hosts)):
            if lo[host] == hi[host] or (may_take is not None and not may_take("worker", host)):
                continue
            if not (lo[host] > 0 or hi[host] < self.per_host):
                if limited and self.used >= self.limit:
                    continue
                self.used += 1
            for slot in range(lo[host], hi[host]):
                workers.append((host, slot))
            lo[host] = hi[host]

    def seat_workers_leaving_the_evaluator_a_slot(self) -> None:
        room = _EvaluatorRoom(self)
        host = self.first_free("worker")
        while host is not None:
            if room.allows(host):
                room.taking(host)
                self.take("worker", host)
            else:
                self.next_host["worker"] = host + 1  # stays closed: see first_free
                self.kept_for_evaluator = True
            host = self.first_free("worker")

    def breakdown(self) -> str:
        return f" ({self.note()})" if self.note is not None else ""

    def shortage(self, role: str) -> SelectionError:
        """Why no slot is left for this task, naming the hosts its role may use and their tasks."""
        index = len(self.placed[role])
        usable = [i for i in range(len(self.hosts)) if self.may_take(role, i)]
        a_role = f"an {role}" if role == "evaluator" else f"a {role}"
        if not usable:
            return SelectionError(
                f"no eligible host may take {a_role}: each has a taint that the {role} pods "
                f"do not tolerate{self.breakdown()}"
            )
        names = ", ".join(self.hosts[i] for i in usable[:3]) + (", ..." if len(usable) > 3 else "")
        on_usable = set(usable)
        on_them = [
            f"{r} {index}"
            for r in ROLE_ORDER
            for index, (host, _) in enumerate(self.placed[r])
            if host in on_usable
        ]
        taken = "taken"
        if on_them:
            more = f" and {len(on_them) - 3} more" if len(on_them) > 3 else ""
            taken += f" by {', '.join(on_them[:3])}{more}"
        if self.num != -1 and self.used >= self.limit:
            taken += f" or past -N {self.num}"
        if role == "worker" and self.kept_for_evaluator:
            taken += " or the evaluator's only choice"
        where = "are" if len(usable) > 1 else "is"
        return SelectionError(
            f"no host is left for {role} {index}: the {len(usable)} eligible "
            f"{_hosts(len(usable))} {a_role} may use ({names}) {where} {taken}{self.breakdown()}"
        )

    def too_few_used(self, psn: int) -> SelectionError:
        spare = [i for i in range(len(self.hosts)) if not self.in_use(i)]
        hint = ""
        if psn and any(self.may_take("ps", i) for i in spare):
            hint = "; --psf can put the parameter servers there"
        return SelectionError(
            f"-N {self.num} asks for more hosts than the tasks can use: {self.used} take "
            f"them all, and the other {len(spare)} eligible {_hosts(len(spare))} may not "
            f"take a worker{hint}{self.breakdown()}"
        )


class _EvaluatorRoom:
    """With -N: whether a worker may take a slot on a host and still leave the evaluator one."""

    def __init__(self, seating: _Seating) -> None:
        self.seating = seating
        self.free_in_use = 0  # free slots the evaluator may take on hosts in use
        self.unused = 0  # hosts not in use that the evaluator may take
        for host in range(len(seating.hosts)):
            if seating.may_take("evaluator", host):
                if seating.in_use(host):
                    self.free_in_use += seating.hi[host] - seating.lo[host]
                else:
                    self.unused += 1

    def _after(self, host: int) -> tuple[int, int, int]:
        s = self.seating
        mine = s.may_take("evaluator", host)
        if s.in_use(host):
            return self.free_in_use - mine, self.unused, s.used
        return self.free_in_use + mine * (s.per_host - 1), self.unused - mine, s.used + 1

    def allows(self, host: int) -> bool:
        free_in_use, unused, used = self._after(host)
        return free_in_use > 0 or (unused > 0 and used < self.seating.limit)

    def taking(self, host: int) -> None:
        self.free_in_use, self.unused, _ = self._after(host)


def _hosts(n: int) -> str:
    return "host" if n == 1 else "hosts"


def check_endpoints(tasks: Sequence[Task], address: str) -> None:
    """No two tasks listen at one host:port; `address` says what the hosts are, for the message.

    Two spellings of one IP address, or hostnames that differ only in case, are
    the same host.
    """
    import ipaddress  # only --address internal-ip and hostname come here

    def same_host(host: str) -> str:
        try:
            return ipaddress.ip_address(host).compressed
        except ValueError:
            return host.lower().rstrip(".")

    seen: dict[tuple[str, int], Task] = {}
    for task in tasks:
        other = seen.setdefault((same_host(task.host), task.port), task)
        if other is not task:
            shared = task.host if task.host == other.host else f"{other.host} and {task.host}"
            raise SelectionError(
                f"nodes {other.node!r} and {task.node!r} have the same {address} {shared}, so "
                f"{other.role} {other.index} and {task.role} {task.index} would both listen at "
                f"{task.endpoint}; exclude one of them (-E) or choose another --address"
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
