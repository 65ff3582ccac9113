"""The run's fit: what a task of each role asks, the seating by room, and a refusal that says why.

    each role's pods, rendered per role (eligibility.role_needs_of)
        -> what one task asks (`role_asks`: hosts/requested.py's counting rules)
        -> a verdict per node, per role (hosts/selection.py with hosts/fit.py)
        -> the seating, each task where it fits beside those before it (`seat_run`)
        -> where that walk finds none, the search over seatings (hosts/packing.py)
        -> or a refusal in one line: what is short, and where (plan/refusal.py)

A run that cannot fit is refused here, before anything is written or sent, alike for
`render`, `apply` and `run`. With `-N n` the run keeps the tasks it has without the fit,
on n hosts. With `-N -1` the role that fills (`Framework.fills`) takes at least one task,
then the slots left where its tasks fit; a warning says how many did not. The search is
asked only for a run the walk could not seat.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from simpletfjob.errors import InputError, SelectionError
from simpletfjob.frameworks import Framework, Pin
from simpletfjob.hosts.fit import Ask, Fit, ordered
from simpletfjob.hosts.selection import (
    Rules,
    Verdict,
    breakdown,
    counted,
    eligible_hosts,
    fewer_hosts_hint,
    without_fit,
)
from simpletfjob.manifest.render import RoleNeeds
from simpletfjob.options.render import Options
from simpletfjob.plan.refusal import asked_text, plural, refusal
from simpletfjob.tasks import Seating, Slots

if TYPE_CHECKING:  # (the search is read only for a run the walk cannot seat)
    from simpletfjob.hosts.search import Packing


def role_asks(needs: Mapping[str, RoleNeeds], template: str) -> dict[str, Ask]:
    """What one task of each role asks of its node: every pod spec of its documents, summed.
    Each pod spec is counted as the scheduler counts a pod (hosts/requested.py); a
    quantity that is no quantity is an error here."""
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
    asked = "; ".join(f"{role}: {asked_text(ask)}" for role, ask in asks.items() if ask)
    return (
        f"the fit is not checked ({asked}): the hosts say nothing of what they have (host "
        "names, or nodes without status.allocatable); read the cluster, or give a saved "
        "`kubectl get nodes -o json` with --nodes-file"
    )


def seat_run(
    options: Options,
    fw: Framework,
    verdicts: Sequence[Verdict],
    rules: Rules,
    pins: Sequence[Pin],
    warnings: list[str],
) -> tuple[list[Verdict], Seating]:
    """The eligible hosts and the seating on them, each task where it fits; see the docstring."""
    run = _Run(options, fw, verdicts, rules, pins)
    asks = {role: ask for role, ask in rules.asks if ask}
    ruled_out = any(r.category == "fit" for v in verdicts for r in v.reasons)
    try:
        eligible = eligible_hosts(verdicts, options.num, pins, options.tasks_per_host)
    except SelectionError as e:
        if asks and ruled_out:
            raise _refused(run, e) from None
        if asks and e.fewer:
            raise _fewer_that_fit(run, e) from None
        raise
    if not asks:
        return eligible, _seat(run, eligible, None)
    fit = Fit([(v.node, v.usage) for v in eligible], asks)
    seats: Seating | None
    try:
        seats = _seat(run, eligible, fit)
    except SelectionError:
        if not (ruled_out or fit.refused):
            raise
        seats = None
    if seats is not None and (fit.refused or ruled_out) and options.num != -1:
        # -N n: the run it would be without the fit, or the search.
        _, without = _seat_without_fit(run)
        if any(len(places) > len(seats.get(role, ())) for role, places in without.items()):
            seats = None
    if seats is None:
        seats, fit = _searched(run, eligible)
    if options.num == -1 and fit.refused:
        left = _slots_left(seats, options.tasks_per_host, fit, asks)
        if left is not None:
            warnings.append(left)
    return eligible, seats


class _Run(NamedTuple):
    """What each way of seating a run reads: its options, framework, the nodes' verdicts, the
    rules they were judged by, and the hosts its roles must take."""

    options: Options
    fw: Framework
    verdicts: Sequence[Verdict]
    rules: Rules
    pins: Sequence[Pin]


def _fewer_that_fit(run: _Run, error: SelectionError) -> SelectionError:
    """-N's refusal for too few hosts, offering a layout of the tasks asked whose tasks fit
    what the hosts have free (each layout seated as the run would be), or saying none does."""
    assert error.fewer is not None
    hosts, tasks, per_host = error.fewer

    def fits(num: int, per: int) -> bool:
        try:
            seat_run(run.options.replace(num=num, tasks_per_host=per), *run[1:], [])
        except SelectionError:
            return False
        return True

    plain = fewer_hosts_hint(hosts, tasks, per_host)
    better = SelectionError(
        str(error).removesuffix(plain) + fewer_hosts_hint(hosts, tasks, per_host, fits)
    )
    better.verdicts, better.fewer = error.verdicts, error.fewer
    return better


def _searched(run: _Run, eligible: Sequence[Verdict]) -> tuple[Seating, Fit]:
    """The seating that the search finds (hosts/packing.py) where the walk found none, with
    the room it leaves; the refusal (plan/refusal.py) when it finds none.

    The run has the tasks it would have without the fit; with -N -1, the role that takes the
    slots left (`fills`) one task in the search, and then every slot left where it fits.
    """
    from simpletfjob.hosts.packing import pack

    options, fw, verdicts, rules, pins = run
    try:
        plain, without = _seat_without_fit(run)
    except SelectionError as e:
        e.verdicts = verdicts
        raise
    roles = fw.roles(options)
    want = {role: len(without.get(role, ())) for role in roles}
    if options.num == -1 and fw.fills in want:
        want[fw.fills] = 1
    asks = {role: ask for role, ask in rules.asks if ask}
    fit = Fit([(v.node, v.usage) for v in eligible], asks)
    packing = _packing(options, roles, eligible, fit, pins, want)
    packed = pack(packing)
    names = [v.node.name for v in eligible]
    if packed.seats is None:
        searched = (packing, packed, names, fit.resources)
        error = refusal(
            roles, want, asks, plain, options.tasks_per_host, options.num, searched=searched
        )
        error.verdicts = verdicts
        raise error
    may_take = lambda role, i: eligible[i].may_take(role)  # noqa: E731
    note = lambda: breakdown(verdicts)  # noqa: E731
    slots = Slots(names, roles, options.num, options.tasks_per_host, may_take, note, fit)
    position = {name: i for i, name in enumerate(names)}
    for pin in pins:
        for name in pin.hosts:
            slots.take(pin.role, position[name])
    for r, role in enumerate(roles):
        for node, counts in sorted(packed.seats.items()):
            for _ in range(counts[r]):
                slots.take(role, node)
    if options.num == -1 and fw.fills in want:
        slots.seat_rest(fw.fills)
        slots.placed[fw.fills].sort()  # indexed in host order, as the walk indexes them
    return slots.placed, fit


def _packing(
    options: Options,
    roles: Sequence[str],
    eligible: Sequence[Verdict],
    fit: Fit,
    pins: Sequence[Pin],
    want: Mapping[str, int],
) -> Packing:
    """The run as the search takes it: numbers per role and per node, in the seating's order."""
    from simpletfjob.hosts.search import UNKNOWN, Packing

    pinned: dict[int, list[int]] = {}
    position = {v.node.name: i for i, v in enumerate(eligible)}
    for pin in pins:
        for name in pin.hosts:
            pinned.setdefault(position[name], [0] * len(roles))[roles.index(pin.role)] += 1
    fixed = [sum(counts[r] for counts in pinned.values()) for r in range(len(roles))]
    asked = [dict(fit.asks.get(role, ())) for role in roles]
    return Packing(
        roles=tuple(roles),
        want=tuple(want[role] - fixed[r] for r, role in enumerate(roles)),
        per_host=options.tasks_per_host,
        hosts_used=None if options.num == -1 else options.num,
        rooms=[
            tuple(fit.left(i).get(resource, UNKNOWN) for resource in fit.resources)
            for i in range(len(eligible))
        ],
        asks=[tuple(ask.get(resource, 0) for resource in fit.resources) for ask in asked],
        may=[sum(1 << r for r, role in enumerate(roles) if v.may_take(role)) for v in eligible],
        pinned={node: tuple(counts) for node, counts in pinned.items()},
    )


def _refused(run: _Run, error: SelectionError) -> SelectionError:
    """The refusal when -N asks for more nodes than any task of the run fits on; or the run's
    own refusal, when it would not seat even without the fit."""
    options = run.options
    try:
        plain, without = _seat_without_fit(run)
    except SelectionError as e:
        e.verdicts = run.verdicts
        return e
    want = {role: len(places) for role, places in without.items() if places}
    roles = run.fw.roles(options)
    found = refusal(
        roles, want, dict(run.rules.asks), plain, options.tasks_per_host, options.num, error=error
    )
    found.verdicts = run.verdicts
    return found


def _slots_left(seats: Seating, per_host: int, fit: Fit, asks: Mapping[str, Ask]) -> str | None:
    """-N -1: the slots of the hosts in use that no task had room for, and whose tasks."""
    on = Counter(host for places in seats.values() for host, _ in places)
    tasks, left = sum(on.values()), sum(per_host - n for n in on.values())
    if not left:
        return None
    whose = " and ".join(f"{plural(r)} ({asked_text(asks[r])} each)" for r in sorted(fit.refused))
    return (
        f"-N -1: the run got {counted(tasks, 'task', 'tasks')}; {counted(left, 'slot', 'slots')} "
        f"of --tasks-per-host {per_host} on its nodes had no room for {whose}"
    )


def _seat(run: _Run, eligible: Sequence[Verdict], fit: Fit | None) -> Seating:
    names = [v.node.name for v in eligible]
    may_take: Callable[[str, int], bool] | None = None
    if run.rules.roles:
        may_take = lambda role, i: eligible[i].may_take(role)  # noqa: E731
    note = lambda: breakdown(run.verdicts)  # noqa: E731
    return run.fw.seat(names, run.options, run.pins, may_take, note, fit)


def _seat_without_fit(run: _Run) -> tuple[list[Verdict], Seating]:
    """The run as it would be if the fit were not checked: how many tasks of each role it wants."""
    plain = without_fit(run.verdicts, run.rules)
    eligible = eligible_hosts(plain, run.options.num, run.pins, run.options.tasks_per_host)
    plain_run = run._replace(verdicts=plain, rules=run.rules._replace(asks=(), fits=()))
    return plain, _seat(plain_run, eligible, None)
