"""Fit: what a task of each role asks of a node, against what the node has free.

A task asks, of each resource, what its pods request as the scheduler counts them
(requested.py: the containers summed, at least the largest init container, a limit
standing for a missing request, the pod's overhead), in the scheduler's units: cpu in
thousandths of a core, memory and storage in bytes, devices by count. A node has free
its allocatable less what its pods already request (usage.py, as `kubectl describe node`
counts them), or its allocatable alone where the pods were not read (a saved NodeList,
`--no-usage`). What is not known is not checked:

- a host from a plain list (`--nodes`, a file of names) has no resources known;
- nor has a node that lists no allocatable at all;
- cpu, memory or ephemeral-storage that a node does not list are not checked there;

but an extended resource (`nvidia.com/gpu`, `hugepages-2Mi`, any `vendor/name`) that a
node does not list is 0 there, as the scheduler counts it: that is a CPU-only node.

`Fit` keeps what the tasks seated so far take of each node, for the seating walk (tasks.py's
`Slots`); a role that asks for none of a device another role needs looks first at the nodes
where that device is not free. Pure functions over `Node` and `NodeUsage` values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from simpletfjob.errors import InputError
from simpletfjob.hosts.nodes import Node
from simpletfjob.quantity import scheduler_units, units_text

if TYPE_CHECKING:
    from simpletfjob.hosts.usage import NodeUsage  # (with `fractions`: only a run that reads pods)

# The resources every node lists; where a hand-written NodeList leaves one out, it is not checked.
STANDARD = ("cpu", "memory", "ephemeral-storage")

# What one task of a role asks: (resource, amount in the scheduler's units), each amount > 0,
# in `ordered` order.
Ask = tuple[tuple[str, int], ...]


def ordered(names: Iterable[str]) -> list[str]:
    """cpu, memory and ephemeral-storage first, in that order, then the others by name."""
    found = set(names)
    return [r for r in STANDARD if r in found] + sorted(found.difference(STANDARD))


def allocatable(node: Node, resource: str) -> int | None:
    """What the node has of the resource in the scheduler's units; None when it is not known."""
    listed = node.allocatable
    if not listed:
        return None
    value = listed.get(resource)
    if value is None:
        return None if resource in STANDARD else 0
    try:
        return scheduler_units(value, resource)
    except ValueError as e:
        raise InputError(
            f"{node.origin}, node {node.name!r}: status.allocatable[{resource!r}]: {e}"
        ) from e


def free(node: Node, usage: NodeUsage | None, resource: str) -> int | None:
    """Allocatable less what the node's pods request (allocatable alone: pods not read)."""
    have = allocatable(node, resource)
    if have is None or usage is None:
        return have
    return have - usage.used(resource)


class Short(NamedTuple):
    """A resource of which a node has less free than the tasks ask."""

    resource: str
    asked: int
    free: int

    def __str__(self) -> str:
        """'nvidia.com/gpu 2 > 1 free'."""
        asked, left = units_text(self.asked, self.resource), units_text(self.free, self.resource)
        return f"{self.resource} {asked} > {left} free"


def shortfall(node: Node, usage: NodeUsage | None, ask: Ask, count: int = 1) -> Short | None:
    """The first resource of which `count` tasks asking `ask` each find too little free."""
    for resource, each in ask:
        left = free(node, usage, resource)
        if left is not None and each * count > left:
            return Short(resource, each * count, max(left, 0))
    return None


def tasks_that_fit(node: Node, usage: NodeUsage | None, ask: Ask, most: int) -> int:
    """How many tasks asking `ask` each the node has room for, up to `most`."""
    lefts = ((free(node, usage, resource), each) for resource, each in ask)
    return min([most, *(max(left, 0) // each for left, each in lefts if left is not None)])


def ask_text(resource: str, amount: int) -> str:
    """'2 nvidia.com/gpu', '500m cpu', '2Gi memory'."""
    return f"{units_text(amount, resource)} {resource}"


class Fit:
    """The room the run's tasks leave on each host as they are seated (tasks.py's `Capacity`).
    `hosts` are the seating's hosts, in its order: each node with what its pods take (None:
    not read); `asks` each role's ask. A host's free amounts are read when first asked.
    `refused` holds the roles whose task was ever turned away for want of room."""

    def __init__(
        self, hosts: Sequence[tuple[Node, NodeUsage | None]], asks: Mapping[str, Ask]
    ) -> None:
        self.hosts = hosts
        self.asks = {role: ask for role, ask in asks.items() if ask}
        self.resources = ordered(r for ask in self.asks.values() for r, _ in ask)
        self._left: dict[int, dict[str, int]] = {}  # host -> resource -> free (the known ones)
        self._orders: dict[str, tuple[list[int], list[int]] | None] = {}
        self.refused: set[str] = set()

    def left(self, host: int) -> dict[str, int]:
        """What is free on the host now, of each resource whose amount is known there."""
        found = self._left.get(host)
        if found is None:
            node, usage = self.hosts[host]
            found = self._left[host] = {}
            for resource in self.resources:
                amount = free(node, usage, resource)
                if amount is not None:
                    found[resource] = amount
        return found

    def allows(self, role: str, host: int) -> bool:
        ask = self.asks.get(role)
        if not ask:
            return True
        left = self.left(host)
        for resource, each in ask:
            if resource in left and each > left[resource]:
                self.refused.add(role)
                return False
        return True

    def take(self, role: str, host: int) -> None:
        ask = self.asks.get(role)
        if ask:
            left = self.left(host)
            for resource, each in ask:
                if resource in left:
                    left[resource] -= each

    def order(self, role: str) -> tuple[list[int], list[int]] | None:
        """The hosts a role looks at first, and the others, when it asks for none of a device
        that another role asks for: first those that could not take one such task. None: in order."""
        if role in self._orders:
            return self._orders[role]
        mine = {resource for resource, _ in self.asks.get(role, ())}
        needed: dict[str, int] = {}  # a device others need -> the least one of their tasks asks
        for other, ask in self.asks.items():
            for resource, each in ask:
                # a device (vendor/name, an extended resource) that others need and it does not
                if other != role and "/" in resource and resource not in mine:
                    needed[resource] = min(needed.get(resource, each), each)
        found = None
        if needed:
            first: list[int] = []
            then: list[int] = []
            for host, (node, usage) in enumerate(self.hosts):
                useful = any(
                    (left := free(node, usage, resource)) is not None and left >= each
                    for resource, each in needed.items()
                )
                (then if useful else first).append(host)
            found = (first, then)
        self._orders[role] = found
        return found
