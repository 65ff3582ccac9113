"""A queue's entries as data: their names, what each Lease holds, their order, and expiry. Pure.

An entry is a Lease named `simpletfjob-queue-<queue>-<number>` (six digits, more once past
999999), labelled with the queue's name: the server's AlreadyExists on a name taken is what
orders them, so the lowest live number is the head. The queue's lock is the Lease
`simpletfjob-queue-<queue>.lock` (a dot: no entry's name can be it); its holder is the
entry being admitted.

Expiry is judged as client-go's leader election judges a lease: by how long this client has
seen the Lease unchanged (the same resourceVersion), on its own monotonic clock, never by
comparing the Lease's renewTime with this machine's clock.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from simpletfjob.quantity import units_text

PREFIX = "simpletfjob-queue-"
QUEUE_LABEL = "simpletfjob/queue"
RUN = "simpletfjob/queue-run"  # annotations: the run's name and namespace, and what it asks
NAMESPACE = "simpletfjob/queue-namespace"
ASKS = "simpletfjob/queue-asks"
DIGITS = 6


def entry_name(queue: str, number: int) -> str:
    """`simpletfjob-queue-team-000042`."""
    return f"{PREFIX}{queue}-{number:0{DIGITS}d}"


def lock_name(queue: str) -> str:
    return f"{PREFIX}{queue}.lock"


def number_of(queue: str, name: str) -> int | None:
    """The entry's number, from its name; None for a name that is no entry of the queue."""
    rest = name.removeprefix(f"{PREFIX}{queue}-") if name.startswith(PREFIX) else ""
    return int(rest) if len(rest) >= DIGITS and rest.isascii() and rest.isdigit() else None


TIMES = "×"


@dataclass(frozen=True)
class Ask:
    """What a run asks for, for one role: its tasks, and each task's requests (as quantities)."""

    role: str
    tasks: int
    requests: Mapping[str, str] = field(default_factory=dict)

    def text(self, role: bool = True) -> str:
        """'2 worker × cpu 10', '1 chief × (cpu 2, memory 1Gi)', '1 ps'; without the role
        (the run's only one), '2 × cpu 10'."""
        each = ", ".join(f"{r} {q}" for r, q in self.requests.items())
        if len(self.requests) > 1:
            each = f"({each})"
        who = f"{self.tasks} {self.role}" if role else str(self.tasks)
        return who + (f" {TIMES} {each}" if each else "" if role else f" {self.role}")


def asks_of(
    roles: Iterable[str], asks: Sequence[tuple[str, Sequence[tuple[str, int]]]]
) -> list[Ask]:
    """Each role's Ask, from the plan's tasks' roles and what one task of each asks (its fit)."""
    counts: dict[str, int] = {}
    for role in roles:
        counts[role] = counts.get(role, 0) + 1
    per_role = dict(asks)
    return [
        Ask(role, n, {r: units_text(a, r) for r, a in per_role.get(role, ())})
        for role, n in counts.items()
    ]


@dataclass(frozen=True)
class Entry:
    """One waiting run, as its Lease says."""

    name: str
    number: int
    run: str
    namespace: str
    since: str  # the Lease's creationTimestamp, as Kubernetes writes it
    asks: tuple[Ask, ...]
    version: str  # resourceVersion
    lease: float  # seconds its client lets pass between renewals, at most

    def as_dict(self, position: int, state: str) -> dict[str, Any]:
        """As `queue NAME -o json` gives it."""
        asks = [asdict(a) for a in self.asks]
        return {"position": position, "run": self.run, "namespace": self.namespace,
                "since": self.since, "asks": asks, "state": state}  # fmt: skip


def lease_body(
    name: str, queue: str, holder: str, seconds: int, annotations: Mapping[str, str]
) -> dict[str, Any]:
    """A Lease of the queue (an entry, or its lock), held by `holder` from now."""
    now = micro_time()
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "labels": {QUEUE_LABEL: queue},
            "annotations": dict(annotations),
        },
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": seconds,
            "acquireTime": now,
            "renewTime": now,
        },
    }


def entry_annotations(run: str, namespace: str, asks: Sequence[Ask]) -> dict[str, str]:
    listed = json.dumps([asdict(a) for a in asks], separators=(",", ":"))
    return {RUN: run, NAMESPACE: namespace, ASKS: listed}


def micro_time() -> str:
    """Now, as a Lease's MicroTime: `2024-05-01T12:00:00.000000Z`."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def entries_of(queue: str, leases: Iterable[Mapping[str, Any]]) -> list[Entry]:
    """The queue's entries among its Leases, in order (by number); a Lease that is none is left out."""
    found = []
    for lease in leases:
        metadata = lease.get("metadata") or {}
        number = number_of(queue, str(metadata.get("name", "")))
        if number is None:
            continue
        notes = metadata.get("annotations") or {}
        found.append(
            Entry(
                name=metadata["name"],
                number=number,
                run=str(notes.get(RUN, "")),
                namespace=str(notes.get(NAMESPACE, "")),
                since=str(metadata.get("creationTimestamp", "")),
                asks=_asks(notes.get(ASKS)),
                version=str(metadata.get("resourceVersion", "")),
                lease=float((lease.get("spec") or {}).get("leaseDurationSeconds") or 0),
            )
        )
    return sorted(found, key=lambda e: e.number)


def _asks(text: object) -> tuple[Ask, ...]:
    """What an entry's annotation says it asks; nothing, when it cannot be read."""
    try:
        asks = tuple(Ask(**ask) for ask in json.loads(str(text)))
    except (ValueError, TypeError):
        return ()
    return asks if all(isinstance(a.requests, dict) for a in asks) else ()


def holder_of(lease: Mapping[str, Any] | None) -> str:
    """Who holds a Lease ('' when no one does)."""
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def listing(queue: str, leases: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`queue NAME -o json`: the queue's entries in order, each with its position and its state:
    Admitting while it holds the queue's lock, else Waiting."""
    lock = next((x for x in leases if x["metadata"]["name"] == lock_name(queue)), None)
    states = {True: "Admitting", False: "Waiting"}
    entries = enumerate(entries_of(queue, leases), start=1)
    return [e.as_dict(i, states[holder_of(lock) == e.name]) for i, e in entries]


def place_in(
    leases: Sequence[Mapping[str, Any]], run: str, namespace: str
) -> dict[str, Any] | None:
    """Where a run waits among the Leases of every queue: {name, position, of}; None if nowhere."""
    for queue in sorted({str(x["metadata"]["labels"].get(QUEUE_LABEL)) for x in leases}):
        ours = [x for x in leases if x["metadata"]["labels"].get(QUEUE_LABEL) == queue]
        entries = entries_of(queue, ours)
        for i, entry in enumerate(entries, start=1):
            if (entry.run, entry.namespace) == (run, namespace):
                return {"name": queue, "position": i, "of": len(entries)}
    return None


class Seen:
    """When this client first saw each Lease as it is now: client-go's observedTime.

    A Lease seen with another resourceVersion than before was renewed (or changed), and its
    time starts again; one not renewed for its lease duration, by this client's own clock,
    has expired. A client that has just come has seen nothing for long, so it judges no
    Lease expired before a whole lease duration has passed for it.
    """

    def __init__(self) -> None:
        self.since: dict[str, tuple[str, float]] = {}

    def saw(self, name: str, version: str, now: float) -> None:
        if self.since.get(name, ("", 0.0))[0] != version:
            self.since[name] = (version, now)

    def forget(self, name: str) -> None:
        self.since.pop(name, None)

    def expired(self, name: str, version: str, lease: float, now: float) -> bool:
        """Whether the Lease, seen now at `version`, has gone unchanged for `lease` seconds."""
        self.saw(name, version, now)
        return now - self.since[name][1] >= lease


def ordinal(n: int) -> str:
    """'1st', '2nd', '3rd', '4th', '11th', '22nd'."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def waiting_line(
    queue: str,
    position: int,
    of: int,
    asks: Sequence[Ask],
    nodes: int,
    why: str = "",
    most_free: tuple[str, str] | None = None,
) -> str:
    """`waiting in queue "team": 2nd of 3; needs 2 × cpu 10 on 1 node`; at the head, what it is
    short of (`, the most free on one node is cpu 2`), or else why it waits."""
    line = f'waiting in queue "{queue}": {ordinal(position)} of {of}'
    needs = ", ".join(a.text(role=len(asks) > 1) for a in asks)
    if needs:
        line += f"; needs {needs} on {nodes} {'node' if nodes == 1 else 'nodes'}"
    if most_free is not None:
        return f"{line}, the most free on one node is {most_free[0]} {most_free[1]}"
    return f"{line}; {why}" if why else line
