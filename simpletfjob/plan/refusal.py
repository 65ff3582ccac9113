"""A run that cannot fit, refused in one line that is true: what is short, and where.

The line names the first of these that holds, each a fact no seating can get round:

- a role whose tasks alone do not fit on the nodes it may use (`_short_role`): the
  resource that seats the fewest of them, what each asks, the nodes where one fits;
- a resource of which the run's tasks ask more in all than the nodes have free
  (`_short_together`);
- the fewest roles whose tasks have no seating among themselves (`packing.shortage`):
  the resource they are short of (or the resources, together, or the slots), what each
  task asks, and the nodes they may use with what each has free;
- with -N, that the tasks fit on fewer nodes but not on exactly -N.

A search that ran out of steps before it could tell says so, with the run's size, and
never that the run does not fit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from simpletfjob.errors import SelectionError
from simpletfjob.hosts.fit import Ask, ask_text, free, ordered, tasks_that_fit
from simpletfjob.hosts.selection import Verdict, counted, roles_text
from simpletfjob.quantity import units_text

if TYPE_CHECKING:  # (read only for a run that no seating holds)
    from simpletfjob.hosts.packing import Packed
    from simpletfjob.hosts.search import Packing

# How many of the nodes that could take a role a refusal names.
SHOWN_NODES = 5


def refusal(
    roles: Sequence[str],
    want: Mapping[str, int],
    asks: Mapping[str, Ask],
    plain: Sequence[Verdict],
    per_host: int,
    num: int,
    *,
    searched: tuple[Packing, Packed, Sequence[str], Sequence[str]] | None = None,
    error: SelectionError | None = None,
) -> SelectionError:
    """Why the run cannot fit, in one line; see the module's docstring.

    `want` is how many tasks of each role the run has (the role that fills counts one);
    `plain` the verdicts without the fit; `searched` the search that found no seating;
    `error` the seating's own refusal when there was no search.
    """
    found: SelectionError | None = None
    for role in roles:
        ask, count = asks.get(role, ()), want.get(role, 0)
        if ask and count:
            found = _short_role(role, count, ask, plain, per_host, num)
            if found is not None:
                return found
    found = _short_together(want, asks, plain, num)
    if found is None and searched is not None:
        found = _no_seating(*searched)
    if found is None:
        line = "the run's tasks do not fit beside one another on the nodes they may use"
        found = SelectionError(f"{line} ({error})" if error is not None else line)
    return found


def _most_free(found: SelectionError, resource: str, nodes: Iterable[tuple[int | None]]) -> None:
    """Note on `found` the most of `resource` free on one of the nodes (None: unbounded)."""
    known = [n for (n,) in nodes if n is not None]
    if known:
        found.most_free = (resource, units_text(max(0, max(known)), resource))


def _no_seating(
    packing: Packing, packed: Packed, names: Sequence[str], resources: Sequence[str]
) -> SelectionError:
    """The fewest roles whose tasks have no seating among themselves, and what they are
    short of where; or the bound that ran out."""
    from simpletfjob.hosts.packing import shortage

    run = packing.run
    short, untold = shortage(packing)
    if short is None and packed.exhausted:
        size = f"{counted(sum(run), 'task', 'tasks')} on {counted(len(names), 'node', 'nodes')}"
        return SelectionError(f"no seating found within the search bound ({size})")
    chosen = tuple(r for r, n in enumerate(run) if n)
    every = tuple(j for j in range(len(resources)) if any(packing.asks[r][j] for r in chosen))
    chosen, what = short if short is not None else (chosen, every)
    who = roles_text(
        [_each(packing.roles[r], run[r], packing.asks[r], what, resources) for r in chosen]
    )
    limit = packing.hosts_used
    where = (
        "on the nodes they may use" if limit is None else f"on -N {limit} of the nodes they may use"
    )
    usable = [i for i, bits in enumerate(packing.may) if bits & sum(1 << r for r in chosen)]
    if short is None and not untold:  # every part of the run fits, on fewer nodes than -N
        return SelectionError(
            f"no seating of the run's {who} uses exactly -N {limit} nodes; they fit on fewer "
            f"of the nodes they may use ({_some_names(names[i] for i in usable)})"
        )
    if not what:
        return SelectionError(
            f"no seating gives {who} a slot each {where} ({_some_names(names[i] for i in usable)}; "
            f"--tasks-per-host {packing.per_host})"
        )
    kinds = " and ".join(resources[j] for j in what)
    shown = [f"{names[i]}: {_amounts(packing.rooms[i], what, resources)} free" for i in usable]
    found = SelectionError(
        f"no seating gives {who} the {kinds} they ask {where} "
        f"({_some_names(shown, '; ' if len(what) > 1 else ', ')})"
    )
    if len(what) == 1:
        _most_free(found, resources[what[0]], ((packing.rooms[i][what[0]],) for i in usable))
    return found


def _each(
    role: str, count: int, ask: Sequence[int], what: Sequence[int], resources: Sequence[str]
) -> str:
    """'1 ps (2 cpu)', '2 workers (1 cpu, 1 nvidia.com/gpu each)'; '2 workers' for no resource."""
    if not what:
        return _roles(role, count)
    asked = ", ".join(ask_text(resources[j], ask[j]) for j in what if ask[j])
    asked = asked or "no " + " or ".join(resources[j] for j in what)
    return f"{_roles(role, count)} ({asked}{' each' if count > 1 else ''})"


def _amounts(amounts: Sequence[int], what: Sequence[int], resources: Sequence[str]) -> str:
    """'2 cpu', or '1 cpu, 1 nvidia.com/gpu': these resources of a task's ask or a node's room."""
    if len(what) == 1:
        return units_text(amounts[what[0]], resources[what[0]])
    return ", ".join(ask_text(resources[j], amounts[j]) for j in what)


def _short_role(
    role: str, count: int, ask: Ask, plain: Sequence[Verdict], per_host: int, num: int
) -> SelectionError | None:
    """`count` tasks of the role, each asking `ask`, against the nodes it may use, when fewer
    fit: the resource that seats the fewest, and the nodes where a task fits whole."""
    candidates = [v for v in plain if v.eligible and v.may_take(role)]

    def seats(rooms: Sequence[int]) -> int:
        ordered_rooms = sorted(rooms, reverse=True)
        return sum(ordered_rooms if num == -1 else ordered_rooms[:num])

    whole = [tasks_that_fit(v.node, v.usage, ask, per_host) for v in candidates]
    capacity = seats(whole)
    if capacity >= count:
        return None
    by_resource = {
        resource: [
            tasks_that_fit(v.node, v.usage, ((resource, each),), per_host) for v in candidates
        ]
        for resource, each in ask
    }
    resource, each = min(ask, key=lambda item: seats(by_resource[item[0]]))
    asks = f"{_roles(role, count)} {'asks' if count == 1 else 'ask'} {ask_text(resource, each)}"
    asks += " each" if count > 1 else ""
    amount = units_text(each, resource)
    fitting = [v for v, n in zip(candidates, whole, strict=True) if n > 0]
    rest = ""
    if [n > 0 for n in whole] != [n > 0 for n in by_resource[resource]]:
        rest = f" beside the rest of what {'an' if role[0] in 'aeiou' else 'a'} {role} asks"
    if not fitting:
        found = SelectionError(f"{asks}; no node has {amount} free{rest}")
    elif per_host == 1:
        has = "node has" if len(fitting) == 1 else "nodes have"
        names = _some_names(v.node.name for v in fitting)
        found = SelectionError(f"{asks}; only {len(fitting)} {has} {amount} free{rest} ({names})")
    else:
        shown = []
        for v in fitting:
            left = free(v.node, v.usage, resource)
            shown.append(f"{v.node.name}: {'room' if left is None else units_text(left, resource)}")
        on = "" if num == -1 else f" on -N {num} {'host' if num == 1 else 'hosts'}"
        found = SelectionError(
            f"{asks}; only {capacity} fit{on} ({_some_names(s + ' free' for s in shown)})"
        )
    _most_free(found, resource, ((free(v.node, v.usage, resource),) for v in candidates))
    return found


def _short_together(
    wanted: Mapping[str, int], asks: Mapping[str, Ask], plain: Sequence[Verdict], num: int
) -> SelectionError | None:
    """A resource of which the run's tasks ask more in all than the nodes they may use (the
    `num` with the most free, with -N) have free."""
    for resource in ordered(r for ask in asks.values() for r, _ in ask):
        parts = [
            (role, wanted[role], each)
            for role, ask in asks.items()
            for r, each in ask
            if r == resource and wanted.get(role)
        ]
        demand = sum(n * each for _, n, each in parts)
        usable = [v for v in plain if any(v.eligible and v.may_take(role) for role, _, _ in parts)]
        known = [(free(v.node, v.usage, resource), v.node.name) for v in usable]
        if not usable or any(left is None for left, _ in known):
            continue
        most = sorted(known, key=lambda k: -(k[0] or 0))[: len(known) if num == -1 else num]
        supply = sum(max(left or 0, 0) for left, _ in most)
        if demand > supply:
            each_text = ", ".join(
                f"{_roles(role, n)} x {units_text(each, resource)}" for role, n, each in parts
            )
            where = f"the {counted(len(most), 'node', 'nodes')} they may use"
            if num != -1:
                where = f"on -N {num} {'host' if num == 1 else 'hosts'}, the most"
            found = SelectionError(
                f"the run's tasks ask {ask_text(resource, demand)} in all ({each_text}); "
                f"{where} free is {units_text(supply, resource)} "
                f"({_some_names(name for _, name in most)})"
            )
            _most_free(found, resource, ((left,) for left, _ in known))
            return found
    return None


def plural(role: str) -> str:
    """'workers'; a role already plural in form stays as it is (TensorFlow's parameter servers)."""
    return role if role.endswith("s") else f"{role}s"


def _roles(role: str, count: int) -> str:
    """'1 worker', '3 workers', '2 ps'."""
    return f"{count} {role if count == 1 else plural(role)}"


def asked_text(ask: Ask) -> str:
    return ", ".join(ask_text(resource, amount) for resource, amount in ask)


def _some_names(names: Iterable[str], between: str = ", ") -> str:
    """The first few names, and how many more."""
    listed = list(names)
    more = len(listed) - SHOWN_NODES
    return between.join(listed[:SHOWN_NODES]) + (f" and {more} more" if more > 0 else "")
