"""Seating: the tasks of a run (role, index, host, port) and the walk that puts them on hosts.

Each eligible host gives `tasks_per_host` slots on ports port, port+1, ...;
`Slots` walks them in order, host by host and each host's ports in turn, and a
role takes the first free slot on a host it may use. Which roles there are, how
many tasks each has and in which order they are seated is a framework's policy
(frameworks/); this module knows only roles by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, NamedTuple

from simpletfjob.errors import SelectionError

# Every task's cluster spec lists every task, so the output grows as the square of the
# tasks (10,000 make about 5 GB): a larger run is refused before any work. Kubernetes
# supports at most 5000 nodes; read back from a cluster, a larger index is wrong.
MAX_TASKS = 10_000


class Host(NamedTuple):
    node: str  # the node name, for nodeName: and the exclusion file
    address: str  # what <<host>> and the cluster addresses name: node name, InternalIP or hostname


@dataclass(eq=False, slots=True)
class Task:
    """One task of a run; tasks are distinct objects, compared and hashed by identity."""

    role: str
    index: int
    node: str  # the node name, for nodeName: and labels
    host: str  # the address the cluster addresses and <<host>> use
    port: int

    @property
    def endpoint(self) -> str:
        """host:port, with an IPv6 address in brackets as gRPC expects ([fd00::1]:2222)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


class Pin(NamedTuple):
    """Hosts a role must take, named by an option (`--psf FILE`): each host's first slot."""

    role: str
    hosts: tuple[str, ...]
    flag: str


def tasks_per_host_for(hosts: int, tasks: int) -> int | None:
    """The --tasks-per-host that seats `tasks` on `hosts` hosts, when more than 1 and within MAX_TASKS.
    A node runs several tasks of a run on consecutive ports, which is what makes a
    run fit on one node (a kind or minikube cluster)."""
    if hosts < 1:
        return None
    per_host = -(-tasks // hosts)
    return per_host if per_host > 1 and hosts * per_host <= MAX_TASKS else None


def layouts_for(hosts: int, tasks: int) -> list[tuple[int, int]]:
    """Each -N and --tasks-per-host that gives exactly `tasks` tasks on at most `hosts` hosts,
    on as many hosts as can be first; none when a run cannot have that many (MAX_TASKS)."""
    if hosts < 1 or not 0 < tasks <= MAX_TASKS:
        return []
    return [(h, tasks // h) for h in range(min(hosts, tasks), 0, -1) if tasks % h == 0]


# Where each role's tasks go, in index order: (host position, slot) pairs; a task's
# port is port + slot.
Seating = dict[str, list[tuple[int, int]]]


def tasks_at(
    seats: Seating, roles: Iterable[str], host: Callable[[int], Host], port: int
) -> list[Task]:
    """The tasks, in role order; `host` is asked once for each host used, so only those need an address."""
    hosts: dict[int, Host] = {}
    tasks: list[Task] = []
    for role in roles:
        for index, (i, slot) in enumerate(seats.get(role, ())):
            h = hosts.get(i)
            if h is None:
                h = hosts[i] = host(i)
            tasks.append(Task(role, index, h.node, h.address, port + slot))
    return tasks


if TYPE_CHECKING:  # (a Protocol class costs a cold start more than its use is worth)
    from typing import Protocol

    class Capacity(Protocol):
        """What each host has room for as the tasks are seated (hosts/fit.py's `Fit`)."""

        def allows(self, role: str, host: int) -> bool:
            """A task of the role fits on the host beside the tasks seated there so far."""

        def take(self, role: str, host: int) -> None:
            """A task of the role is seated on the host."""

        def order(self, role: str) -> tuple[list[int], list[int]] | None:
            """The hosts the role looks at first and those it looks at then; None: in order."""


class Slots:
    """The free slots of every host, which hosts are in use, and the tasks seated so far.

    `num` is -N (-1: every host may come into use). `may_take(role, i)` says whether a task
    of that role may run on host i (None: any). `note` ends a message when the hosts fall
    short. `capacity` says whether a task fits on a host beside those seated there (None:
    every slot takes one), and in which order a role looks at the hosts.
    """

    def __init__(
        self,
        hosts: Sequence[str],
        roles: Sequence[str],
        num: int,
        tasks_per_host: int,
        may_take: Callable[[str, int], bool] | None,
        note: Callable[[], str] | None,
        capacity: Capacity | None = None,
    ) -> None:
        self.hosts = hosts
        self.capacity = capacity
        self.roles = roles
        self.num = num
        self.limit = len(hosts) if num == -1 else num  # how many hosts may be in use
        self.per_host = tasks_per_host
        self.may_take = may_take or (lambda role, host: True)
        self.note = note
        # Host i's free slots are lo[i] .. hi[i]-1: tasks take the first one, except
        # a role seated `last`, which takes the last.
        self.lo = [0] * len(hosts)
        self.hi = [tasks_per_host] * len(hosts)
        self.used = 0
        self.next_host = dict.fromkeys(roles, 0)  # no free slot for the role before it
        self.placed: Seating = {role: [] for role in roles}
        # (the rest role, the later role) once the rest passed over the later one's only choice
        self.kept_for: tuple[str, str] | None = None

    def in_use(self, host: int) -> bool:
        return self.lo[host] > 0 or self.hi[host] < self.per_host

    def take(self, role: str, host: int, last: bool = False) -> None:
        if self.capacity is not None:
            self.capacity.take(role, host)
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
            and (self.capacity is None or self.capacity.allows(role, host))
        )

    def _order(self, role: str) -> tuple[list[int], list[int]] | None:
        return None if self.capacity is None else self.capacity.order(role)

    def first_free(self, role: str) -> int | None:
        host = next((h for h in self._walk(role) if self.open_to(role, h)), None)
        if self._order(role) is None:
            # Slots are only ever taken, room only shrinks, and hosts only come into use, so a
            # host passed over once stays closed to the role: each role's walk moves forward.
            self.next_host[role] = len(self.hosts) if host is None else host
        return host

    def last_free(self, role: str) -> int | None:
        order = self._order(role)
        hosts: Iterable[int] = range(len(self.hosts) - 1, -1, -1)
        if order is not None:
            hosts = chain(reversed(order[0]), reversed(order[1]))
        return next((h for h in hosts if self.open_to(role, h)), None)

    def seat(self, role: str, count: int) -> None:
        """`count` tasks of the role, each in the first free slot it may use."""
        for _ in range(count):
            host = self.first_free(role)
            if host is None:
                raise self.shortage(role)
            self.take(role, host)

    def _walk(self, role: str) -> Iterable[int]:
        """The hosts in the role's order, each once."""
        order = self._order(role)
        return chain(*order) if order is not None else range(self.next_host[role], len(self.hosts))

    def seat_rest(self, role: str) -> None:
        """Every free slot the role may take, in order."""
        for host in self._walk(role):
            while self.open_to(role, host):
                self.take(role, host)

    def seat_rest_leaving_one(self, role: str, later: str) -> None:
        """seat_rest, passing over any slot whose taking would leave the `later` role none."""
        room = _Room(self, later)
        # A host passed over stays passed over, and a host taken to the full is closed.
        for host in self._walk(role):
            while self.open_to(role, host):
                if not room.allows(host):
                    self.kept_for = (role, later)
                    break
                room.taking(host)
                self.take(role, host)

    def breakdown(self) -> str:
        return f" ({self.note()})" if self.note is not None else ""

    def shortage(self, role: str) -> SelectionError:
        """Why no slot is left for this task, naming the hosts its role may use and their tasks."""
        index = len(self.placed[role])
        usable = [i for i in range(len(self.hosts)) if self.may_take(role, i)]
        a_role = f"an {role}" if role[0] in "aeiou" else f"a {role}"
        if not usable:
            return SelectionError(
                f"no eligible host may take {a_role}: each has a taint that the {role} pods "
                f"do not tolerate{self.breakdown()}"
            )
        names = ", ".join(self.hosts[i] for i in usable[:3]) + (", ..." if len(usable) > 3 else "")
        on_usable = set(usable)
        on_them = [
            f"{r} {index}"
            for r in self.roles
            for index, (host, _) in enumerate(self.placed[r])
            if host in on_usable
        ]
        taken = "taken"
        if on_them:
            more = f" and {len(on_them) - 3} more" if len(on_them) > 3 else ""
            taken += f" by {', '.join(on_them[:3])}{more}"
        if self.num != -1 and self.used >= self.limit:
            taken += f" or past -N {self.num}"
        if self.kept_for is not None and self.kept_for[0] == role:
            taken += f" or the {self.kept_for[1]}'s only choice"
        where = "are" if len(usable) > 1 else "is"
        return SelectionError(
            f"no host is left for {role} {index}: the {len(usable)} eligible "
            f"{hosts_noun(len(usable))} {a_role} may use ({names}) {where} {taken}{self.breakdown()}"
        )

    def spare(self) -> list[int]:
        """The hosts no task uses."""
        return [i for i in range(len(self.hosts)) if not self.in_use(i)]


class _Room:
    """With -N: whether a task may take a slot on a host and still leave the `later` role one."""

    def __init__(self, slots: Slots, later: str) -> None:
        self.slots = slots
        self.later = later
        self.free_in_use = 0  # free slots the later role may take on hosts in use
        self.unused = 0  # hosts not in use that the later role may take
        for host in range(len(slots.hosts)):
            if slots.may_take(later, host):
                if slots.in_use(host):
                    self.free_in_use += slots.hi[host] - slots.lo[host]
                else:
                    self.unused += 1

    def _after(self, host: int) -> tuple[int, int, int]:
        s = self.slots
        mine = s.may_take(self.later, host)
        if s.in_use(host):
            return self.free_in_use - mine, self.unused, s.used
        return self.free_in_use + mine * (s.per_host - 1), self.unused - mine, s.used + 1

    def allows(self, host: int) -> bool:
        free_in_use, unused, used = self._after(host)
        return free_in_use > 0 or (unused > 0 and used < self.slots.limit)

    def taking(self, host: int) -> None:
        self.free_in_use, self.unused, _ = self._after(host)


def hosts_noun(n: int) -> str:
    return "host" if n == 1 else "hosts"


def check_endpoints(tasks: Sequence[Task], address: str) -> None:
    """No two tasks listen at one host:port; `address` says what the hosts are, for the message.
    Two spellings of one IP address, or hostnames that differ only in case, are
    the same host."""
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
