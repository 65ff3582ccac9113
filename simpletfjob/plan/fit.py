"""The run's fit: what a task of each role asks, the seating by room, and a refusal that says why.

    each role's pods, rendered per role (eligibility.role_needs_of)
        -> what one task asks (`role_asks`: hosts/requested.py's counting rules)
        -> a verdict per node, per role (hosts/selection.py with hosts/fit.py)
        -> the seating, each task where it fits beside those before it (`seat_run`)
        -> or a refusal in one line: the role, the resource, what it asks, where it could go

A run that cannot fit is refused here, before anything is written or sent, so that
`render`, `apply` and `run` (each restart plans again) refuse it alike. With `-N n` the
run must be the run it would be without the fit: every slot of its n hosts that a role
would take must take a task that fits there. With `-N -1` the workers take the slots
where they fit, and a warning says how many did not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from simpletfjob.errors import InputError, SelectionError
from simpletfjob.frameworks import Framework, Pin
from simpletfjob.hosts.fit import Ask, Fit, ask_text, free, ordered, tasks_that_fit
from simpletfjob.hosts.selection import (
    Rules,
    Verdict,
    breakdown,
    counted,
    eligible_hosts,
    without_fit,
)
from simpletfjob.manifest.render import RoleNeeds
from simpletfjob.options.render import Options
from simpletfjob.quantity import units_text
from simpletfjob.tasks import Seating

# How many of the nodes that could take a role a refusal names.
SHOWN_NODES = 5


def role_asks(needs: Mapping[str, RoleNeeds], template: str) -> dict[str, Ask]:
    """What one task of each role asks of its node: every pod spec of its documents, summed.

    Each pod spec is counted as the scheduler counts a pod (hosts/requested.py): the
    containers summed, at least the largest init container, a limit standing for a
    missing request, the overhead. A quantity that is no quantity is an error here.
    """
    from simpletfjob.hosts.requested import pod_units  # with `fractions`: only when fitting

    asks: dict[str, Ask] = {}
    for role, need in needs.items():
        names = ordered(
            {
                *(
                    name
                    for pod in need.pods
                    for field in ("containers", "initContainers")
                    for container in pod[field]
                    for listed in container["resources"].values()
                    if type(listed) is dict
                    for name in listed
                ),
                *(name for pod in need.pods for name in pod.get("overhead", ())),
            }
        )
        totals = [0] * len(names)
        for pod in need.pods:
            try:
                amounts = pod_units(pod, names, f"{template}: the pod spec of {role} 0")
            except InputError as e:
                raise InputError(f"{e}; the run's fit reads what each task asks") from e
            totals = [a + b for a, b in zip(totals, amounts, strict=True)]
        asks[role] = tuple((n, a) for n, a in zip(names, totals, strict=True) if a > 0)
    return asks


def unchecked(asks: Mapping[str, Ask]) -> str | None:
    """What --explain says when the roles ask for resources but the hosts are names only."""
    if not any(asks.values()):
        return None
    asked = "; ".join(f"{role}: {_asked(ask)}" for role, ask in asks.items() if ask)
    return (
        f"the fit is not checked ({asked}): the hosts say nothing of what they have (host "
        "names, or nodes without status.allocatable); read the cluster, or give a saved "
        "`kubectl get nodes -o json` with --nodes-file"
    )


def asked_resources(rules: Rules) -> tuple[str, ...]:
    """Every resource some role of the run asks for: what the nodes' pods are counted for."""
    return tuple(ordered(resource for _, ask in rules.asks for resource, _ in ask))


def seat_run(
    options: Options,
    fw: Framework,
    verdicts: Sequence[Verdict],
    rules: Rules,
    pins: Sequence[Pin],
    warnings: list[str],
) -> tuple[list[Verdict], Seating]:
    """The eligible hosts and the seating on them, each task where it fits; see the docstring."""
    asks = {role: ask for role, ask in rules.asks if ask}
    fit = None
    try:
        eligible = eligible_hosts(verdicts, options.num, pins, options.tasks_per_host)
        if asks:
            fit = Fit([(v.node, v.usage) for v in eligible], asks)
        seats = _seat(options, fw, verdicts, eligible, rules, pins, fit)
    except SelectionError as e:
        ruled_out = any(r.category == "fit" for v in verdicts for r in v.reasons)
        if asks and (ruled_out or (fit is not None and fit.refused)):
            raise refusal(options, fw, verdicts, rules, pins, {}, e) from None
        raise
    if fit is not None and fit.refused:
        if options.num != -1:
            _, without = _seat_without_fit(options, fw, verdicts, rules, pins)
            got = {role: len(places) for role, places in seats.items()}
            if any(len(places) > got.get(role, 0) for role, places in without.items()):
                raise refusal(options, fw, verdicts, rules, pins, got, None)
        elif (left := _slots_left(seats, options.tasks_per_host, fit, asks)) is not None:
            warnings.append(left)
    return eligible, seats


def _slots_left(seats: Seating, per_host: int, fit: Fit, asks: Mapping[str, Ask]) -> str | None:
    """-N -1: the slots of the hosts in use that no task had room for, and whose tasks."""
    on: dict[int, int] = {}
    for places in seats.values():
        for host, _ in places:
            on[host] = on.get(host, 0) + 1
    tasks, left = sum(on.values()), sum(per_host - n for n in on.values())
    if not left:
        return None
    whose = " and ".join(f"{_plural(r)} ({_asked(asks[r])} each)" for r in sorted(fit.refused))
    return (
        f"-N -1: the run got {counted(tasks, 'task', 'tasks')}; {counted(left, 'slot', 'slots')} "
        f"of --tasks-per-host {per_host} on its nodes had no room for {whose}"
    )


def _seat(
    options: Options,
    fw: Framework,
    verdicts: Sequence[Verdict],
    eligible: Sequence[Verdict],
    rules: Rules,
    pins: Sequence[Pin],
    fit: Fit | None,
) -> Seating:
    names = [v.node.name for v in eligible]
    may_take: Callable[[str, int], bool] | None = None
    if rules.roles:
        may_take = lambda role, i: eligible[i].may_take(role)  # noqa: E731
    return fw.seat(names, options, pins, may_take, lambda: breakdown(verdicts), fit)


def _seat_without_fit(
    options: Options,
    fw: Framework,
    verdicts: Sequence[Verdict],
    rules: Rules,
    pins: Sequence[Pin],
) -> tuple[list[Verdict], Seating]:
    """The run as it would be if the fit were not checked: how many tasks of each role it wants."""
    plain_rules = rules._replace(asks=(), fits=())
    plain = without_fit(verdicts, rules)
    eligible = eligible_hosts(plain, options.num, pins, options.tasks_per_host)
    return plain, _seat(options, fw, plain, eligible, plain_rules, pins, None)


def refusal(
    options: Options,
    fw: Framework,
    verdicts: Sequence[Verdict],
    rules: Rules,
    pins: Sequence[Pin],
    got: Mapping[str, int],
    error: SelectionError | None,
) -> SelectionError:
    """Why the run cannot fit, in one line: the first role, in seating order, whose tasks do not
    all fit, the resource it is short of, what each task asks, and the nodes that have it free.

    The run's size is the one it would have without the fit; a run that would not seat even
    then is refused for that reason instead (`error`, or the seating's own). `got` is how many
    tasks of each role the seating by fit placed (none when it failed).
    """
    try:
        plain, wanted_seats = _seat_without_fit(options, fw, verdicts, rules, pins)
    except SelectionError as e:
        e.verdicts = verdicts
        return e
    wanted = {role: len(places) for role, places in wanted_seats.items() if places}
    asks = dict(rules.asks)
    per_host, num = options.tasks_per_host, options.num
    found: SelectionError | None = None
    for role in fw.roles(options):
        ask, count = asks.get(role, ()), wanted.get(role, 0)
        if ask and count:
            found = _short_role(role, count, ask, plain, per_host, num)
            if found is not None:
                break
    if found is None:
        found = _short_together(wanted, asks, plain, num)
    if found is None:
        placed = ", ".join(
            f"{got.get(role, 0)} of {_roles(role, n)}"
            for role, n in wanted.items()
            if asks.get(role)
        )
        line = "the run's tasks do not fit beside one another on the nodes they may use"
        found = SelectionError(f"{line}: {placed} fit" if got else f"{line} ({error})")
    found.verdicts = verdicts
    return found


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
        return SelectionError(f"{asks}; no node has {amount} free{rest}")
    if per_host == 1:
        has = "node has" if len(fitting) == 1 else "nodes have"
        names = _names(v.node.name for v in fitting)
        return SelectionError(f"{asks}; only {len(fitting)} {has} {amount} free{rest} ({names})")
    shown = []
    for v in fitting:
        left = free(v.node, v.usage, resource)
        shown.append(f"{v.node.name}: {'room' if left is None else units_text(left, resource)}")
    on = "" if num == -1 else f" on -N {num} {'host' if num == 1 else 'hosts'}"
    return SelectionError(f"{asks}; only {capacity} fit{on} ({_names(s + ' free' for s in shown)})")


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
            return SelectionError(
                f"the run's tasks ask {ask_text(resource, demand)} in all ({each_text}); "
                f"{where} free is {units_text(supply, resource)} "
                f"({_names(name for _, name in most)})"
            )
    return None


def _plural(role: str) -> str:
    """'workers'; a role already plural in form stays as it is (TensorFlow's parameter servers)."""
    return role if role.endswith("s") else f"{role}s"


def _roles(role: str, count: int) -> str:
    """'1 worker', '3 workers', '2 ps'."""
    return f"{count} {role if count == 1 else _plural(role)}"


def _asked(ask: Ask) -> str:
    return ", ".join(ask_text(resource, amount) for resource, amount in ask)


def _names(names: Iterable[str]) -> str:
    """The first few names, and how many more."""
    listed = list(names)
    more = len(listed) - SHOWN_NODES
    return ", ".join(listed[:SHOWN_NODES]) + (f" and {more} more" if more > 0 else "")
