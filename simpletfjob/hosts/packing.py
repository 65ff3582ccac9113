"""Packing: a seating of the run's tasks on its nodes, searched for when the walk finds none.

The walk (tasks.py's `Slots`) never goes back: a chief can take the only node a worker fits
on, and a run that fits is refused. Here the seatings themselves are looked at:

- **Tasks of one role are interchangeable.** A seating gives each node how many tasks of
  each role it takes (a multiset of roles), not which; slots and indices follow from it.
- **First a heuristic** (`_best_fit`): the roles whose task fits alone on the fewest nodes
  first; each task on the node in use where it fits most tightly, a node opened only when
  none in use has room for it or when the nodes -N still wants need every task left, and
  the node opened the one with room for the most tasks of the role.
- **Then the search** (search.py): node by node over the nodes that can matter, every
  seating that could hold the run, within a bound.
- **Alike nodes count once.** Of the nodes with the same room and the same roles only the
  first as many as a seating can use are looked at: a seating that uses another can
  move to one of those it leaves free.

A search that runs out of its `STEPS` says so (`Packed.exhausted`), and the run is refused
with that said, never as one that cannot fit; every run of up to 12 tasks is searched to
its end (tests/unit/test_seating.py). `shortage` says why a run has no seating.

Pure: numbers in, numbers out, in the scheduler's units (hosts/fit.py); an amount a node
does not say is `UNKNOWN`, more than any run asks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import combinations
from typing import NamedTuple

from simpletfjob.hosts.search import (
    Counts,
    Nodes,
    OutOfSteps,
    Packing,
    Search,
    demand,
    enough,
)

# The steps the search may take (search.py): the hardest runs of 12 tasks we know of take a
# tenth of them (tests/unit/test_seating.py); past them it stops, and says so.
STEPS = 1_000_000


class Packed(NamedTuple):
    """What the search found: node -> how many tasks of each role it takes beside the pinned
    (None: no seating); `exhausted` when the steps ran out before it could tell; `spent`,
    the steps it took."""

    seats: dict[int, Counts] | None
    exhausted: bool = False
    spent: int = 0


def pack(packing: Packing, steps: int | None = None) -> Packed:
    """A seating of the run, if there is one, within `steps` (default `STEPS`); see the
    module's docstring."""
    steps = STEPS if steps is None else steps
    nodes = _pinned(packing)
    if nodes is None:
        return Packed(None)
    if not any(packing.want):
        return Packed({} if enough(packing, nodes.used) else None)
    ids, packing, nodes = _alike_left_out(packing, nodes)
    if _alone_short(packing, nodes):
        return Packed(None)
    spent, found = 0, _best_fit(packing, nodes)
    if found is None:
        try:
            search = Search(packing, nodes, steps)
            found, spent = search.run(), steps - search.steps
        except OutOfSteps:
            return Packed(None, exhausted=True, spent=steps)
    return Packed(None if found is None else {ids[n]: c for n, c in found.items()}, spent=spent)


def _alike_left_out(packing: Packing, nodes: Nodes) -> tuple[list[int], Packing, Nodes]:
    """The run on fewer nodes: of the nodes alike (the same room and roles, interchangeable),
    only the first as many as a seating can use, and their places among the nodes given."""
    limit = packing.hosts_used
    most = sum(packing.want) if limit is None else limit - nodes.used
    seen: dict[tuple[Counts, int], int] = {}
    ids = []
    for node, room in enumerate(nodes.rooms):
        if node not in packing.pinned:
            kind = (room, packing.may[node])
            seen[kind] = count = seen.get(kind, 0) + 1
            if count > most:
                continue
        ids.append(node)
    if len(ids) == len(nodes.rooms):
        return ids, packing, nodes
    position = {node: i for i, node in enumerate(ids)}
    fewer = replace(
        packing,
        rooms=[packing.rooms[node] for node in ids],
        may=[packing.may[node] for node in ids],
        pinned={position[node]: counts for node, counts in packing.pinned.items()},
    )
    left = Nodes([nodes.rooms[n] for n in ids], [nodes.slots[n] for n in ids], nodes.used)
    return ids, fewer, left


def _pinned(packing: Packing) -> Nodes | None:
    """The nodes with the pinned tasks on them; None when those alone do not fit. A room is
    cut to what the run asks in all, so nodes that differ only beyond it are alike."""
    most = demand(packing.run, packing.asks)
    rooms = [
        tuple(min(have, cut) for have, cut in zip(room, most, strict=True))
        for room in packing.rooms
    ]
    slots = [packing.per_host] * len(rooms)
    for node, counts in packing.pinned.items():
        asked = demand(counts, packing.asks)
        rooms[node] = tuple(have - need for have, need in zip(rooms[node], asked, strict=True))
        slots[node] -= sum(counts)
        if slots[node] < 0 or min(rooms[node], default=0) < 0:
            return None
    return Nodes(rooms, slots, len(packing.pinned))


def _how_many(room: Counts, ask: Counts, slots: int) -> int:
    """How many tasks asking `ask` each fit in `room`, up to `slots`."""
    fits = (have // each for have, each in zip(room, ask, strict=True) if each)
    return max(0, min(slots, min(fits, default=slots)))


def _alone_short(packing: Packing, nodes: Nodes) -> bool:
    """Whether some role's tasks alone do not fit: more than the nodes a seating may use have
    room for, each as if no other task were there."""
    limit = packing.hosts_used
    most = len(nodes.rooms) if limit is None else limit - nodes.used
    for role, count in enumerate(packing.want):
        if not count:
            continue
        ask, bit = packing.asks[role], 1 << role
        rooms = [
            _how_many(room, ask, slots) if packing.may[node] & bit else 0
            for node, (room, slots) in enumerate(zip(nodes.rooms, nodes.slots, strict=True))
        ]
        pinned = sum(rooms[node] for node in packing.pinned)
        others = sorted(
            (r for node, r in enumerate(rooms) if node not in packing.pinned), reverse=True
        )
        if pinned + sum(others[: max(most, 0)]) < count:
            return True
    return False


def _best_fit(packing: Packing, nodes: Nodes) -> dict[int, Counts] | None:
    """The heuristic's seating, or None when it finds none (there may still be one)."""
    roles, limit = len(packing.roles), packing.hosts_used
    rooms, slots = [list(room) for room in nodes.rooms], list(nodes.slots)
    seats: dict[int, list[int]] = {node: [0] * roles for node in packing.pinned}
    in_use = sorted(packing.pinned)
    used, left = nodes.used, sum(packing.want)

    def room_for(role: int, node: int) -> int:
        if not packing.may[node] >> role & 1:
            return 0
        return _how_many(tuple(rooms[node]), packing.asks[role], slots[node])

    # The nodes not in use, for each role: those with room for the most of its tasks first.
    unused = [n for n in range(len(rooms)) if n not in seats]
    first = {}
    for role in range(roles):
        if packing.want[role]:
            most = [(room_for(role, n), n) for n in unused]
            first[role] = [n for room, n in sorted(most, key=lambda m: -m[0]) if room]
    # The roles whose task fits alone on the fewest nodes first: the scarce ones.
    for role in sorted(first, key=lambda role: (len(first[role]), role)):
        ask, opening = packing.asks[role], iter(first[role])
        for _ in range(packing.want[role]):
            node = None
            if limit is None or not packing.exact or limit - used < left:
                # (else every task left must open a node of its own)
                # The tightest: room for the fewest more of the role once it is there.
                fitting = [(more, n) for n in in_use if (more := room_for(role, n))]
                node = min(fitting)[1] if fitting else None
            if node is None:
                if limit is not None and used >= limit:
                    return None
                node = next((n for n in opening if n not in seats), None)
                if node is None:
                    return None
                seats[node] = [0] * roles
                in_use.append(node)
                used += 1
            seats[node][role] += 1
            slots[node] -= 1
            rooms[node] = [have - each for have, each in zip(rooms[node], ask, strict=True)]
            left -= 1
            if not slots[node]:
                in_use.remove(node)
    if not enough(packing, used):
        return None
    return {node: tuple(counts) for node, counts in sorted(seats.items()) if any(counts)}


class Shortage(NamedTuple):
    """Why a run has no seating: the fewest of its roles whose tasks have none among
    themselves (on at most -N nodes), and what they are short of: the one resource of
    which they have none, or every resource they ask (none alone is short, together they
    are), or () when they are short of slots on the nodes they may use."""

    roles: tuple[int, ...]
    resources: tuple[int, ...]


def shortage(packing: Packing, steps: int | None = None) -> tuple[Shortage | None, bool]:
    """See `Shortage`, for a run that has no seating; None when no part of the run alone is
    short (with -N: its tasks fit on fewer nodes, not on exactly -N) or none was found
    within the steps, and whether the steps ran out."""
    budget = [STEPS // 4 if steps is None else steps]  # (only the refusal's words wait on it)
    nodes = _pinned(packing)
    if nodes is not None:  # (alike nodes left out once, for every part of the run)
        packing = _alike_left_out(packing, nodes)[1]

    def none_for(want: Counts, asks: Sequence[Counts]) -> bool | None:
        """Whether there is no seating of these tasks; None: the steps ran out."""
        found = pack(replace(packing, want=want, asks=asks, exact=False), max(budget[0], 0))
        budget[0] -= found.spent + 1
        return None if found.exhausted else found.seats is None

    roles = [r for r, count in enumerate(packing.want) if count]
    resources = range(len(packing.asks[0]) if packing.asks else 0)
    untold = False  # a part of the run the steps could not tell about
    for size in range(1, len(roles) + 1):
        for chosen in combinations(roles, size):
            want = tuple(c if r in chosen else 0 for r, c in enumerate(packing.want))
            none = none_for(want, packing.asks)
            untold |= none is None
            if not none:
                continue
            asked = tuple(j for j in resources if any(packing.asks[r][j] for r in chosen))
            if none_for(want, [tuple(0 for _ in ask) for ask in packing.asks]):
                return Shortage(chosen, ()), False
            for j in asked:
                alone = [tuple(a * (i == j) for i, a in enumerate(ask)) for ask in packing.asks]
                if none_for(want, alone):
                    return Shortage(chosen, (j,)), False
            return Shortage(chosen, asked), False
    return None, untold
