"""Selection: which nodes may take a task of each role, why the others may not, and -N.

Pure functions over `Node` values; the order of the input is kept throughout.
Which eligible node each task gets is the framework's seating (frameworks/).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from simpletfjob.errors import SelectionError, UsageError
from simpletfjob.hosts.fit import Ask, shortfall
from simpletfjob.hosts.nodes import Node, Taint
from simpletfjob.tasks import MAX_TASKS, Pin, layouts_for

if TYPE_CHECKING:
    from simpletfjob.hosts.requested import Port
    from simpletfjob.hosts.usage import NodeUsage

# Taints that rule a node out even when the template tolerates them: a task pinned
# to a node that is cordoned, not ready or unreachable never starts.
ALWAYS_COUNTED_TAINTS = frozenset(
    {
        "node.kubernetes.io/unschedulable",
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    }
)
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")

# The order in which `breakdown` reports the reasons a node was passed over.
REASON_ORDER = ("excluded", "NotReady", "cordoned", "tainted", "selector", "gpus", "ports", "fit")
# How the breakdown counts the nodes of a category, (one node, several): '3 without enough free GPUs' (free:
# what their pods leave, or allocatable when pods are not read), '1 port held'.
_SHOWN = {
    "gpus": ("without enough free GPUs", "without enough free GPUs"),
    "ports": ("port held", "ports held"),
    "fit": ("without room", "without room"),
}


def counted(n: int, one: str, several: str) -> str:
    """'1 GPU', '2 GPUs': a count and its noun, agreeing."""
    return f"{n} {one if n == 1 else several}"


class Reason(NamedTuple):
    category: str  # one of REASON_ORDER
    detail: str
    roles: tuple[str, ...] = ()  # the roles it rules the node out for, when not every role

    def __str__(self) -> str:
        if not self.roles or self.category == "fit":  # a fit's detail starts with its roles
            return self.detail
        return f"{self.detail} ({', '.join(self.roles)})"

    def applies_to(self, role: str) -> bool:
        return not self.roles or role in self.roles


class Verdict(NamedTuple):
    """A node and every reason it cannot take a task; a reason may hold for some roles only.
    `usage` is what its pods take, when they were read (None: not read)."""

    node: Node
    reasons: tuple[Reason, ...] = ()
    only_for: tuple[str, ...] = ()  # the roles that may use the node, when only some may
    usage: NodeUsage | None = None

    @property
    def free_gpus(self) -> int | None:
        """Allocatable GPUs less those its pods request; None when the pods were not read."""
        return None if self.usage is None else max(0, self.node.gpus - self.usage.requested)

    def may_take(self, role: str) -> bool:
        """Whether a task of this role may run on the node."""
        return not self.reasons or role in self.only_for

    @property
    def eligible(self) -> bool:
        """Some role of the run may use the node."""
        return not self.reasons or bool(self.only_for)

    @property
    def eligible_text(self) -> str:
        """What an ELIGIBLE column says of the node: 'yes', 'no', or 'only ps'."""
        if not self.eligible:
            return "no"
        return f"only {', '.join(self.only_for)}" if self.only_for else "yes"


class Requirement(NamedTuple):
    """One term of a label selector, as in `kubectl -l`."""

    key: str
    operator: str  # '=', '!=', 'in', 'notin', 'exists', '!'
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator == "exists":
            return present
        if self.operator == "!":
            return not present
        if self.operator in ("=", "in"):
            return present and value in self.values
        return not present or value not in self.values  # '!=' and 'notin'


Tolerations = tuple[Mapping[str, object], ...]


class Rules(NamedTuple):
    """What makes a node eligible besides not being excluded.

    `role_tolerations` and `role_ports`, when the pod spec differs by role, give each role
    its own, in role order (`tolerations` is then not used). `ports` are judged only where
    the pods were read; `min_gpus` counts free GPUs there, allocatable ones elsewhere. `asks`
    are what a task of each role asks of a node (hosts/fit.py), when the fit is checked.
    """

    tolerations: Tolerations = ()
    selector: tuple[Requirement, ...] = ()
    min_gpus: int = 0
    role_tolerations: tuple[tuple[str, Tolerations], ...] = ()
    ports: frozenset[Port] = frozenset()
    role_ports: tuple[tuple[str, frozenset[Port]], ...] = ()
    asks: tuple[tuple[str, Ask], ...] = ()
    fits: tuple[tuple[Ask, tuple[str, ...]], ...] = ()  # fit_groups(asks)

    @property
    def roles(self) -> tuple[str, ...]:
        """The run's roles, when some rule differs by role; () when every role is judged alike."""
        by_role = self.role_tolerations or self.role_ports
        if by_role:
            return tuple(role for role, _ in by_role)
        if len({ask for _, ask in self.asks}) > 1:
            return tuple(role for role, _ in self.asks)
        return ()


_SELECTOR_TERM = (  # compiled on first use: only -l needs it
    r"\s*(?:(?P<not>!)\s*(?P<nkey>[\w./-]+)"
    r"|(?P<key>[\w./-]+)\s*(?:(?P<op>==|=|!=)\s*(?P<value>[\w.-]*)"
    r"|\s+(?P<setop>in|notin)\s*\((?P<values>[^)]*)\))?)\s*(?:,|$)"
)


def parse_selector(text: str) -> tuple[Requirement, ...]:
    """Parse a label selector ('a=b,c!=d,e in (x,y),!f') as kubectl does."""
    requirements = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = re.compile(_SELECTOR_TERM).match(text, pos)
        if match is None or match.end() == pos:
            raise UsageError(
                f"--selector {text!r}: cannot parse the label selector at {text[pos:]!r}"
            )
        if match["not"]:
            requirements.append(Requirement(match["nkey"], "!"))
        elif match["op"]:
            op = "=" if match["op"] in ("=", "==") else "!="
            requirements.append(Requirement(match["key"], op, (match["value"],)))
        elif match["setop"]:
            values = tuple(v.strip() for v in match["values"].split(",") if v.strip())
            requirements.append(Requirement(match["key"], match["setop"], values))
        else:
            requirements.append(Requirement(match["key"], "exists"))
        pos = match.end()
    return tuple(requirements)


def tolerates(toleration: Mapping[str, object], taint: Taint) -> bool:
    """The Kubernetes rule for whether one toleration matches one taint."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if not key:
        return operator == "Exists"
    if key != taint.key:
        return False
    return operator == "Exists" or (toleration.get("value") or "") == taint.value


def judge_node(
    node: Node, excluded: Collection[str], rules: Rules, usage: NodeUsage | None = None
) -> Verdict:
    """Every reason this node cannot take a task; none means eligible.
    `usage` is what the node's pods take; None when they were not read."""
    reasons = []
    if node.name in excluded:
        reasons.append(Reason("excluded", "excluded (exc file)"))
    if not node.ready:
        reasons.append(Reason("NotReady", "NotReady"))
    if node.unschedulable:
        reasons.append(Reason("cordoned", "cordoned"))
    for taint in node.taints:
        if taint.effect not in _BLOCKING_EFFECTS:
            continue
        if taint.key in ALWAYS_COUNTED_TAINTS:
            category = "cordoned" if taint.key.endswith("unschedulable") else "NotReady"
            if not any(r.category == category for r in reasons):
                reasons.append(Reason(category, f"taint {taint}"))
        elif rules.role_tolerations:
            blocked = tuple(
                role
                for role, tolerations in rules.role_tolerations
                if not any(tolerates(t, taint) for t in tolerations)
            )
            if blocked:
                every = len(blocked) == len(rules.role_tolerations)
                reasons.append(Reason("tainted", f"taint {taint}", () if every else blocked))
        elif not any(tolerates(t, taint) for t in rules.tolerations):
            reasons.append(Reason("tainted", f"taint {taint}"))
    if rules.selector and not all(r.matches(node.labels) for r in rules.selector):
        reasons.append(Reason("selector", "labels do not match --selector"))
    if rules.min_gpus:
        if usage is None and node.gpus < rules.min_gpus:
            reasons.append(
                Reason("gpus", f"{counted(node.gpus, 'GPU', 'GPUs')} < {rules.min_gpus}")
            )
        elif usage is not None and node.gpus - usage.requested < rules.min_gpus:
            free = max(0, node.gpus - usage.requested)
            of = counted(node.gpus, "GPU", "GPUs")  # '3/8 GPUs': 3 of 8 GPUs
            reasons.append(Reason("gpus", f"{free}/{of} free < {rules.min_gpus}"))
    if usage is not None and usage.ports:
        reasons += _port_reasons(usage, rules)
    if rules.fits and node.allocatable:
        reasons += _fit_reasons(node, usage, rules)
    verdict = Verdict(node, tuple(reasons), usage=usage)
    return _with_roles(verdict, rules) if reasons else verdict


def _with_roles(verdict: Verdict, rules: Rules) -> Verdict:
    """The verdict, saying which roles may still use the node when its reasons hold for some only."""
    if not verdict.reasons or not rules.roles:
        return verdict._replace(only_for=()) if verdict.only_for else verdict
    reasons = verdict.reasons
    only_for = tuple(role for role in rules.roles if not any(r.applies_to(role) for r in reasons))
    return verdict._replace(only_for=only_for)


def fit_groups(asks: Sequence[tuple[str, Ask]]) -> tuple[tuple[Ask, tuple[str, ...]], ...]:
    """Rules.fits: each distinct ask that asks for something, and the roles that ask it."""
    by_ask: dict[Ask, list[str]] = {}
    for role, ask in asks:
        by_ask.setdefault(ask, []).append(role)
    return tuple((ask, tuple(roles)) for ask, roles in by_ask.items() if ask)


def _fit_reasons(node: Node, usage: NodeUsage | None, rules: Rules) -> list[Reason]:
    """'worker: nvidia.com/gpu 2 > 1 free': what the roles whose task does not fit are short
    of; roles short of the same share one reason ('ps, worker: cpu 2 > 1 free')."""
    found: dict[str, list[str]] = {}
    for ask, roles in rules.fits:
        short = shortfall(node, usage, ask)
        if short is not None:
            found.setdefault(str(short), []).extend(roles)
    reasons = []
    order = [role for role, _ in rules.asks]
    for detail, named in found.items():
        named.sort(key=order.index)
        every = len(named) == len(order)
        reasons.append(
            Reason("fit", f"{', '.join(named)}: {detail}", () if every else tuple(named))
        )
    return reasons


def without_fit(verdicts: Sequence[Verdict], rules: Rules) -> list[Verdict]:
    """The verdicts as they would be if the fit were not checked (`rules` without its asks)."""
    plain = rules._replace(asks=(), fits=())
    return [
        _with_roles(v._replace(reasons=tuple(r for r in v.reasons if r.category != "fit")), plain)
        for v in verdicts
    ]


def _port_reasons(usage: NodeUsage, rules: Rules) -> list[Reason]:
    """`port 2222 held by ml/other-worker-3`, for the roles whose pods need that port."""
    by_role = rules.role_ports or (("", rules.ports),)
    found: dict[str, list[str]] = {}  # detail -> the roles it rules the node out for
    for role, ports in by_role:
        held = sorted(p for p in ports if p in usage.ports)
        if held:
            found.setdefault(held_text(held, usage), []).append(role)
    return [
        Reason("ports", detail, () if len(roles) == len(by_role) else tuple(roles))
        for detail, roles in found.items()
    ]


def port_text(port: Port) -> str:
    """'2222', or '53/UDP' for a port of another protocol than TCP."""
    number, protocol = port
    return str(number) if protocol == "TCP" else f"{number}/{protocol}"


def held_text(held: Sequence[Port], usage: NodeUsage) -> str:
    """'port 2222 held by ml/other-worker-3', and how many more are held."""
    text = f"port {port_text(held[0])} held by {usage.ports[held[0]]}"
    more = len(held) - 1
    return text + (f" (and {more} more port{'s' if more > 1 else ''})" if more else "")


def judge_nodes(
    nodes: Sequence[Node],
    excluded: Collection[str],
    rules: Rules,
    usage: Callable[[str], NodeUsage | None] | None = None,
) -> list[Verdict]:
    """Each node's verdict; `usage(name)` is what its pods take (None: not read)."""
    return [judge_node(n, excluded, rules, usage(n.name) if usage else None) for n in nodes]


def breakdown(verdicts: Sequence[Verdict]) -> str:
    """'12 nodes: 7 eligible, 3 NotReady, 1 cordoned, 1 excluded': each node counted once.
    Eligible nodes that only some roles may use are counted again in brackets:
    '7 eligible (2 only for ps)'."""
    counts: Counter[str] = Counter()
    partial: Counter[tuple[str, ...]] = Counter()
    for v in verdicts:
        if v.eligible:
            counts["eligible"] += 1
            if v.only_for:
                partial[v.only_for] += 1
        else:
            counts[v.reasons[0].category] += 1
    eligible = f"{counts['eligible']} eligible"
    if partial:
        groups = (f"{n} only for {roles_text(roles)}" for roles, n in partial.items())
        eligible += f" ({', '.join(groups)})"
    parts = [eligible]
    parts += [counted(counts[c], *_SHOWN.get(c, (c, c))) for c in REASON_ORDER if counts[c]]
    return f"{counted(len(verdicts), 'node', 'nodes')}: " + ", ".join(parts)


def left_out_for_usage(verdicts: Sequence[Verdict], min_gpus: int) -> dict[str, list[str]]:
    """The nodes that only what their pods hold kept out of the run, by why: 'port 2222 held',
    'too few free GPUs'; each node under its first such reason, as `breakdown` counts.

    A node short of GPUs counts only if it has enough allocatable: it is its pods that take them.
    """
    found: dict[str, list[str]] = {}
    for v in verdicts:
        if v.eligible or v.usage is None:
            continue
        if any(r.category not in ("gpus", "ports") for r in v.reasons):
            continue
        if any(r.category == "gpus" for r in v.reasons) and v.node.gpus < min_gpus:
            continue
        first = min(v.reasons, key=lambda r: REASON_ORDER.index(r.category))
        why = "too few free GPUs" if first.category == "gpus" else _held_port(first.detail)
        found.setdefault(why, []).append(v.node.name)
    return found


def _held_port(detail: str) -> str:
    """'port 2222 held by ml/x (and 1 more port)' -> 'port 2222 held'."""
    return detail.split(" held by ", 1)[0] + " held"


def left_out_text(tasks: int, nodes: int, left_out: Mapping[str, Sequence[str]]) -> str:
    """The -N -1 warning: what the run got, and which nodes what their pods hold kept out."""
    count = sum(map(len, left_out.values()))
    groups = []
    for why, names in left_out.items():
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        groups.append(f"{len(names)} with {why} ({shown})")
    were = "was" if count == 1 else "were"
    return (
        f"-N -1: the run got {counted(tasks, 'task', 'tasks')} on "
        f"{counted(nodes, 'node', 'nodes')}; {counted(count, 'node', 'nodes')} otherwise "
        f"eligible {were} left out for what their pods hold: {', '.join(groups)}"
    )


def roles_text(roles: Sequence[str]) -> str:
    """('chief', 'ps', 'worker') -> 'chief, ps and worker'."""
    return " and ".join([", ".join(roles[:-1]), roles[-1]] if len(roles) > 1 else roles)


def eligible_hosts(
    verdicts: Sequence[Verdict], num: int, pins: Sequence[Pin] = (), tasks_per_host: int = 1
) -> list[Verdict]:
    """The nodes some role of the run may use, in order, once -N and the pinned hosts are checked.
    A pinned host (--psf) is judged for its role: it must be a node that role may use.
    When -N asks for more than there are, the error says how many tasks the eligible
    nodes hold and the --tasks-per-host that seats the tasks -N meant on them."""
    eligible = [v for v in verdicts if v.eligible]
    by_name = {v.node.name: v for v in verdicts} if pins else {}
    for pin in pins:
        for name in pin.hosts:
            verdict = by_name.get(name)
            if verdict is None:
                raise SelectionError(f"{pin.flag} host {name!r} is not among the hosts")
            if not verdict.may_take(pin.role):
                why = ", ".join(str(r) for r in verdict.reasons if r.applies_to(pin.role))
                raise SelectionError(f"{pin.flag} host {name!r} is not eligible: {why}")
    if num == -1 and not eligible:
        raise SelectionError(f"no host is eligible ({breakdown(verdicts)})")
    if num > len(eligible):
        error = SelectionError(
            f"-N {num} asks for more hosts than are eligible ({breakdown(verdicts)})"
            + fewer_hosts_hint(len(eligible), num * tasks_per_host, tasks_per_host)
        )
        error.fewer = (len(eligible), num * tasks_per_host, tasks_per_host)
        raise error
    for pin in pins:
        if num != -1 and len(pin.hosts) > num:
            named = counted(len(pin.hosts), "host", "hosts")
            raise SelectionError(f"{pin.flag} names {named} but -N is {num}")
    return eligible


def fewer_hosts_hint(
    hosts: int,
    tasks: int,
    tasks_per_host: int,
    fits: Callable[[int, int], bool] | None = None,
) -> str:
    """'; 1 eligible host fits 1 task at 1 per host; for 3 tasks, give -N 1 --tasks-per-host 3':
    a layout of exactly the tasks -N and --tasks-per-host ask for, or why there is none.

    `fits(num, per_host)` says whether a layout's tasks fit what the hosts have free (the
    plan asks the seating); the layout offered is the first that fits, on as many hosts as
    can be, and none is offered when none fits.
    """
    if not hosts:
        return ""
    fit = counted(hosts * tasks_per_host, "task", "tasks")
    hint = f"; {counted(hosts, 'eligible host fits', 'eligible hosts fit')} {fit} at {tasks_per_host} per host"
    layouts = layouts_for(hosts, tasks)
    if not layouts:
        return f"{hint}; no layout on them gives {tasks:,} tasks: a run has at most {MAX_TASKS:,}"
    for num, per_host in layouts:
        if fits is None or fits(num, per_host):
            return f"{hint}; for {tasks} tasks, give -N {num} --tasks-per-host {per_host}"
    return f"{hint}; no layout of {tasks} tasks on them fits what their nodes have free"


def unknown_exclusions(nodes: Sequence[Node], excluded: Iterable[str]) -> list[str]:
    """Names in the exclusion file that are not among the hosts (likely typos), in the file's order, once each."""
    names = {n.name for n in nodes}
    return [name for name in dict.fromkeys(excluded) if name not in names]
