"""The search over seatings: node by node, each taking a multiset of roles that fits there or
none, for a run that the walk and the heuristic (packing.py) could not seat.

Depth first, every failed state remembered, and a state cut as soon as the nodes left cannot
hold what is left (slots, each resource, nodes for -N). Each multiset is tried only on the
first nodes where it fits, as many as a seating can use: a seating that puts it on a later
node could move it to one of those. Past its steps the search stops (`OutOfSteps`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import NamedTuple

# A node's room in a resource it does not list (cpu in a hand-written NodeList): never short.
UNKNOWN = 1 << 100

Counts = tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class Packing:
    """A run to seat: per role (in `roles`' order) and per node (in the seating's order).

    `want` is how many tasks of each role to seat besides the `pinned` ones (the --psf
    hosts' parameter servers); `hosts_used` is -N, pinned nodes counted (None: any; with
    `exact` False, at most); `may[node]` has bit r set when role r may use the node.
    """

    roles: tuple[str, ...]
    want: Counts
    per_host: int
    hosts_used: int | None
    rooms: Sequence[Counts]
    asks: Sequence[Counts]
    may: Sequence[int]
    pinned: Mapping[int, Counts] = field(default_factory=dict)
    exact: bool = True

    @property
    def run(self) -> Counts:
        """The run's tasks of each role, the pinned ones with the others."""
        found = list(self.want)
        for counts in self.pinned.values():
            found = [a + b for a, b in zip(found, counts, strict=True)]
        return tuple(found)


class OutOfSteps(Exception):
    """The search took every step it had, and could not tell."""


class Nodes(NamedTuple):
    """Each node's room and free slots once the pinned tasks are on it, and how many are in use."""

    rooms: list[Counts]
    slots: list[int]
    used: int


def enough(packing: Packing, used: int) -> bool:
    """Whether a seating with `used` nodes in use, every task seated, meets -N."""
    limit = packing.hosts_used
    return limit is None or used == limit or (not packing.exact and used < limit)


def demand(counts: Counts, asks: Sequence[Counts]) -> Counts:
    """What these tasks ask in all, of each resource."""
    resources = len(asks[0]) if asks else 0
    return tuple(
        sum(c * ask[r] for c, ask in zip(counts, asks, strict=True)) for r in range(resources)
    )


class Search:
    """The search over seatings, node by node; see the module's docstring."""

    def __init__(self, packing: Packing, nodes: Nodes, steps: int) -> None:
        self.packing = packing
        self.steps = steps
        self.rooms, self.slots = nodes.rooms, nodes.slots
        self.used = nodes.used
        self.multisets = self._multisets()
        self.index = {m: k for k, m in enumerate(self.multisets)}
        self.demands = [demand(m, packing.asks) for m in self.multisets]
        # The nodes looked at, in order (the pinned first), each with the multisets it may take.
        self.order = self._relevant()
        self.pinned = sum(1 for node, _ in self.order if node in packing.pinned)
        self.free_slots = suffix([self.slots[node] for node, _ in self.order])
        resources = len(packing.asks[0]) if packing.asks else 0
        self.free_room = [
            suffix([min(self.rooms[node][r], UNKNOWN) for node, _ in self.order])
            for r in range(resources)
        ]
        self.failed: set[tuple[int, Counts, int]] = set()

    def spend(self, steps: int) -> None:
        self.steps -= steps
        if self.steps < 0:
            raise OutOfSteps

    def _multisets(self) -> list[Counts]:
        """Every multiset of roles a node might take, the largest first."""
        found: list[Counts] = []

        def grow(prefix: Counts, room: int) -> None:
            role = len(prefix)
            if role == len(self.packing.want):
                if any(prefix):
                    found.append(prefix)
                    self.spend(1)
                return
            for count in range(min(self.packing.want[role], room), -1, -1):
                grow((*prefix, count), room - count)

        grow((), self.packing.per_host)
        found.sort(key=lambda m: -sum(m))  # (stable: more of the earlier roles first)
        return found

    def _fitting(self, node: int) -> list[int]:
        """The multisets that fit on the node, grown a role at a time while they fit."""
        packing, room, may = self.packing, self.rooms[node], self.packing.may[node]
        found: list[int] = []

        def grow(role: int, prefix: Counts, asked: Counts, slots: int) -> None:
            self.spend(1)
            if role == len(packing.want):
                if any(prefix):
                    found.append(self.index[prefix])
                return
            ask, count = packing.asks[role], 0
            most = min(packing.want[role], slots) if may >> role & 1 else 0
            while True:
                grow(role + 1, (*prefix, count), asked, slots - count)
                count += 1
                asked = tuple(a + b for a, b in zip(asked, ask, strict=True))
                if count > most or any(a > b for a, b in zip(asked, room, strict=True)):
                    return

        grow(0, (), tuple(0 for _ in room), self.slots[node])
        return found

    def _relevant(self) -> list[tuple[int, list[int]]]:
        """The nodes worth a look, each with the multisets it may take (see the docstring)."""
        packing = self.packing
        order = [(node, self._fitting(node)) for node in sorted(packing.pinned)]
        limit = packing.hosts_used
        cap = sum(packing.want) if limit is None else limit - self.used
        wanted = [max(cap, 0)] * len(self.multisets)
        # The least multisets still wanted: a node that fits none of them fits none wanted
        # (a node that fits a multiset fits each part of it).
        least = self._least(wanted)
        floor = self._floor(least)
        for node, room in enumerate(self.rooms):
            if not least:
                break
            self.spend(1)
            if node in packing.pinned or any(
                have < need for have, need in zip(room, floor, strict=True)
            ):
                continue  # (short of what every least multiset asks of some resource)
            self.spend(len(least))
            if not any(self._fits(node, k) for k in least):
                continue
            mine = [k for k in self._fitting(node) if wanted[k]]
            for k in mine:
                wanted[k] -= 1
            if not all(wanted[k] for k in mine):
                least = self._least(wanted)
                floor = self._floor(least)
            order.append((node, mine))
        return order

    def _floor(self, least: Sequence[int]) -> Counts:
        """The least that any of these multisets asks of each resource."""
        if not least:
            return ()
        return tuple(
            min(amounts) for amounts in zip(*(self.demands[k] for k in least), strict=True)
        )

    def _least(self, wanted: Sequence[int]) -> list[int]:
        """The multisets still wanted none of whose parts one task smaller is."""
        found = []
        for k, m in enumerate(self.multisets):
            self.spend(1)
            if wanted[k] and not any(
                wanted[self.index[smaller]]
                for r, c in enumerate(m)
                if c and any(smaller := (*m[:r], c - 1, *m[r + 1 :]))
            ):
                found.append(k)
        return found

    def _fits(self, node: int, k: int) -> bool:
        m, may = self.multisets[k], self.packing.may[node]
        return (
            sum(m) <= self.slots[node]
            and all(not c or may >> r & 1 for r, c in enumerate(m))
            and all(
                need <= have for need, have in zip(self.demands[k], self.rooms[node], strict=True)
            )
        )

    def run(self) -> dict[int, Counts] | None:
        """Depth first over the nodes in `order`; a frame is a state (the next node, the tasks
        left, the nodes in use), what those tasks ask, and the choices still to try there."""
        left = self.packing.want
        start = (0, left, self.used)
        asked = demand(left, self.packing.asks)
        if not self._viable(start, asked):
            return None
        stack = [(start, asked, self._choices(start, asked))]
        path: list[int] = []  # the multiset each node took, -1 for none
        while stack:
            state, _, choices = stack[-1]
            step = next(choices, None)
            if step is None:
                self.failed.add(state)
                stack.pop()
                if path:
                    path.pop()
                continue
            k, after, still = step
            if not any(after[1]) and enough(self.packing, after[2]):
                path.append(k)
                return {
                    node: self.multisets[k]
                    for (node, _), k in zip(self.order, path, strict=False)
                    if k >= 0
                }
            if after in self.failed or not self._viable(after, still):
                continue
            path.append(k)
            stack.append((after, still, self._choices(after, still)))
        return None

    def _choices(
        self, state: tuple[int, Counts, int], asked: Counts
    ) -> Iterator[tuple[int, tuple[int, Counts, int], Counts]]:
        """The states after node i takes each multiset it may that is within what is left,
        then after it takes none (-1), each with what its tasks left ask."""
        i, left, used = state
        node, mine = self.order[i]
        opens = node not in self.packing.pinned
        for k in mine:
            self.spend(1)
            m = self.multisets[k]
            rest = tuple(have - c for c, have in zip(m, left, strict=True))
            if min(rest) >= 0:
                still = tuple(a - d for a, d in zip(asked, self.demands[k], strict=True))
                yield k, (i + 1, rest, used + opens), still
        yield -1, (i + 1, left, used), asked

    def _viable(self, state: tuple[int, Counts, int], asked: Counts) -> bool:
        """Whether the nodes from i on could still hold what is left (a bound, not a proof)."""
        i, left, used = state
        if i == len(self.order):
            return False
        tasks, limit = sum(left), self.packing.hosts_used
        if limit is not None:
            to_open = limit - used
            unpinned_left = len(self.order) - max(i, self.pinned)
            if to_open < 0 or (to_open == 0 and i >= self.pinned and tasks):
                return False
            if self.packing.exact and (to_open > tasks or to_open > unpinned_left):
                return False
        if tasks > self.free_slots[i]:
            return False
        return all(need <= room[i] for need, room in zip(asked, self.free_room, strict=True))


def suffix(values: Sequence[int]) -> list[int]:
    """sums[i] = sum(values[i:]), with a 0 after the last."""
    return list(accumulate(reversed(values), initial=0))[::-1]
