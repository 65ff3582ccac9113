"""Which nodes may take a run's tasks: the nodes read, each role's needs, their pods' usage, a verdict each.

    nodes (--nodes, --nodes-file, or a cluster) -> what each role's pods need (tolerations,
    host ports, the resources a task asks; from the template rendered per role) -> what
    the nodes' pods take (read from the cluster one of two ways, see hosts/cluster.py)
    -> a verdict per node

and, once the tasks are seated, the port `--port auto` chooses. The plan calls these
in order; hosts/selection.py holds the rules themselves, hosts/usage.py the counting.

Pods are read only from a cluster, without --no-usage, and only when the run needs them
(--gpus, host ports, the fit, --port auto, --explain on GPU nodes). The fit is checked
wherever the nodes say what they have, against allocatable alone where pods are not read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from simpletfjob.errors import SelectionError, UsageError
from simpletfjob.frameworks import Framework, Pin
from simpletfjob.hosts import nodes as node_sources
from simpletfjob.hosts.fit import Ask, ordered
from simpletfjob.hosts.selection import (
    Rules,
    Verdict,
    fit_groups,
    judge_node,
    judge_nodes,
    parse_selector,
    port_text,
)
from simpletfjob.inputs import read_text
from simpletfjob.manifest.render import Port, RoleNeeds, role_needs
from simpletfjob.options.render import Options
from simpletfjob.options.rules import AUTO_PORT, DEFAULT_PORT
from simpletfjob.plan.fit import role_asks
from simpletfjob.tasks import Seating, Task
from simpletfjob.template.compiled import CompiledTemplate

if TYPE_CHECKING:
    from simpletfjob.hosts.cluster import Cluster
    from simpletfjob.hosts.usage import NodeUsage, Own

# -N against the eligible nodes, below which reading each candidate node's pods beats one
# cluster-wide list: a node's pods are a small share of the cluster's, and a request's
# own cost is a few dozen pods' worth.
PER_NODE_SHARE = 8


@dataclass(frozen=True)
class Hosts:
    """The hosts a run may use, as the plan read them."""

    nodes: Sequence[node_sources.Node]
    excluded: Mapping[str, None]  # -E's names
    pins: Sequence[Pin]  # hosts the framework pins a role to (--psf)
    cluster: Cluster | None  # where the nodes came from; None for --nodes or --nodes-file


class Judged(NamedTuple):
    """Every node's verdict, and what was learnt on the way."""

    verdicts: list[Verdict]
    rules: Rules
    needs: Mapping[str, RoleNeeds]  # each role's, when the template was rendered per role
    read: str  # how pods were read: '' (not), 'list' or 'per node'


def open_cluster(options: Options, warn: Callable[[str], None]) -> Cluster | None:
    """A connection to the cluster, when the hosts come from one (no --nodes, no --nodes-file)."""
    if options.nodes is not None or options.nodes_file is not None:
        return None
    from simpletfjob.hosts.cluster import Cluster
    from simpletfjob.kube.connection import Settings

    return Cluster(Settings(kubeconfig=options.kubeconfig, context=options.context), warn)


def read_nodes(options: Options, cluster: Cluster | None) -> list[node_sources.Node]:
    if options.nodes is not None:
        return node_sources.nodes_from_option(options.nodes)
    if options.nodes_file is not None:
        return node_sources.nodes_from_file(options.nodes_file, options.gpu_resource)
    assert cluster is not None
    return cluster.nodes(options.selector, options.gpu_resource)


def check_node_options(options: Options, nodes: Sequence[node_sources.Node]) -> None:
    """Options that read node labels, GPUs or addresses need nodes that have them."""
    if not nodes or not all(n.plain for n in nodes):
        return
    needs = [
        flag
        for flag, used in (
            ("--selector", options.selector is not None),
            ("--gpus", options.gpus > 0),
            ("--gpu-resource", options.gpu_resource != node_sources.GPU_RESOURCE),
            (f"--address {options.address}", options.address != "name"),
        )
        if used
    ]
    if needs:
        source = "--nodes" if options.nodes is not None else f"nodes file {options.nodes_file!r}"
        raise UsageError(
            f"{needs[0]} needs node objects, but {source} gives only host names; "
            "read the cluster, or give a saved `kubectl get nodes -o json` with --nodes-file"
        )


def read_exclusions(path: str | None) -> dict[str, None]:
    """The names in the exclusion file, in its order, once each."""
    if path is None:
        return {}
    text = read_text(path, "exclusion file")
    return dict.fromkeys(name for name, _ in node_sources.parse_host_lines(text, path))


def role_needs_of(
    options: Options, fw: Framework, compiled: CompiledTemplate
) -> dict[str, RoleNeeds]:
    """Each role's needs, from the template rendered once per role (at the framework's port for --port auto)."""
    port = fw.default_port if options.port is AUTO_PORT else options.port
    return {role: role_needs(compiled, fw, options, role, port) for role in fw.roles(options)}


def check_shared_ports(
    tasks: Sequence[Task], needs: Mapping[str, RoleNeeds], tasks_per_host: int
) -> None:
    """Refuse two of the run's tasks on one node whose pods would hold the same host port.
    With --tasks-per-host, a host port the template fixes (`hostPort: 2222`) is the same for
    each task on a node, and the kubelet would refuse every pod after the first."""
    held: dict[tuple[str, Port], Task] = {}
    for task in tasks:
        need = needs.get(task.role)
        if need is None:
            continue
        ports = need.fixed | {(task.port + offset, protocol) for offset, protocol in need.following}
        for port in sorted(ports):
            other = held.setdefault((task.node, port), task)
            if other is not task:
                raise SelectionError(
                    f"--tasks-per-host {tasks_per_host}: {other.role} {other.index} and "
                    f"{task.role} {task.index} on node {task.node!r} would both hold host port "
                    f"{port_text(port)}; declare it in the template as <<port>>, which moves "
                    "with each task's port, or give each task a node of its own"
                )


def rules_for(
    options: Options,
    needs: Mapping[str, RoleNeeds],
    nodes: Sequence[node_sources.Node],
    check_ports: bool,
    asks: Mapping[str, Ask] | None = None,
) -> Rules:
    """Each role's tolerations (only if some node has a taint), host ports, --gpus, what a task
    asks (`asks`, when some role asks for something), and --selector for a saved list."""
    tolerations: tuple[dict[str, str], ...] = ()
    by_role: tuple[tuple[str, tuple[dict[str, str], ...]], ...] = ()
    if needs and any(n.taints for n in nodes):
        by_role = tuple((role, need.tolerations) for role, need in needs.items())
        if all(t == by_role[0][1] for _, t in by_role):
            tolerations, by_role = by_role[0][1], ()  # the usual case: one verdict per node
    ports: frozenset[tuple[int, str]] = frozenset()
    role_ports: tuple[tuple[str, frozenset[tuple[int, str]]], ...] = ()
    if check_ports:
        # --port auto: only the ports that stay put decide; the port comes after the nodes.
        port = None if options.port is AUTO_PORT else options.port
        role_ports = tuple(
            (role, need.ports(port, options.tasks_per_host)) for role, need in needs.items()
        )
        if all(p == role_ports[0][1] for _, p in role_ports):
            ports, role_ports = role_ports[0][1], ()
    # The server applies the selector to a live list; a saved list is filtered here.
    saved = options.nodes_file is not None
    selector = parse_selector(options.selector) if saved and options.selector else ()
    return Rules(
        tolerations=tolerations,
        selector=selector,
        min_gpus=options.gpus,
        role_tolerations=by_role,
        ports=ports,
        role_ports=role_ports,
        asks=tuple(asks.items()) if asks and any(asks.values()) else (),
        fits=fit_groups(tuple(asks.items())) if asks else (),
    )


def fit_known(nodes: Sequence[node_sources.Node]) -> bool:
    """Whether some node says what it has (a cluster's, a saved NodeList's): the fit is checked."""
    return any(n.allocatable for n in nodes)


def judge(
    options: Options,
    hosts: Hosts,
    needs_of: Callable[[], dict[str, RoleNeeds]],
    job: str | None,
    warn: Callable[[str], None],
    template: str = "template",
) -> Judged:
    """Every node's verdict, its pods read when the run needs them; see the module docstring.
    `needs_of()` gives each role's needs (the template rendered once per role, see
    `role_needs_of`); it is called only when a node has taints, the nodes say what they
    have (the fit), or the pods are read. `template` names the template in messages."""
    nodes, excluded, cluster = hosts.nodes, hosts.excluded, hosts.cluster
    reads_pods = cluster is not None and options.usage
    fits = fit_known(nodes)
    needs: dict[str, RoleNeeds] = {}
    if any(n.taints for n in nodes) or reads_pods or fits:
        needs = needs_of()
    asks = role_asks(needs, template) if fits else {}
    uses_ports = any(need.fixed or need.following for need in needs.values())
    rules = rules_for(options, needs, nodes, check_ports=reads_pods and uses_ports, asks=asks)
    wanted = reads_pods and (
        options.gpus > 0
        or uses_ports
        or bool(rules.asks)
        or (options.explain and any(n.gpus for n in nodes))
    )
    if not wanted:
        return Judged(judge_nodes(nodes, excluded, rules), rules, needs, "")
    assert cluster is not None
    from simpletfjob.hosts.usage import Own  # with `fractions`: only a run that reads pods

    # The namespace of the run's pods that name none: --namespace, else as the run goes.
    default = options.namespace or ("default" if options.network == "pod" else cluster.namespace)
    namespaces = {ns or default for need in needs.values() for ns in need.namespaces}
    own = Own(job, frozenset(namespaces))
    from simpletfjob.kube.request import ApiError  # loaded already: the nodes came through it

    required = options.gpus > 0 or options.port is AUTO_PORT
    try:
        usage, read = read_usage(options, hosts, cluster, rules, own, warn)
    except ApiError as e:
        if required or e.status != 403:
            raise
        lost = [
            *(["host ports"] if uses_ports else []),
            *(["free resources (the fit is judged by allocatable)"] if rules.asks else []),
        ]
        lost = lost or ["free GPUs"]
        warn(f"cannot list pods: {' and '.join(lost)} not checked ({cluster.denial(e)})")
        return Judged(judge_nodes(nodes, excluded, rules), rules, needs, "")
    return Judged(judge_nodes(nodes, excluded, rules, usage), rules, needs, read)


def read_usage(
    options: Options,
    hosts: Hosts,
    cluster: Cluster,
    rules: Rules,
    own: Own,
    warn: Callable[[str], None],
) -> tuple[Callable[[str], NodeUsage | None], str]:
    """What each node's pods take, read per node or in one list; and which way it was read.
    The cluster's Jobs are read first (usage.py); a refusal to list them is a warning, as
    the pods still say most of what is held."""
    nodes, excluded = hosts.nodes, hosts.excluded
    alternatives = []
    if options.gpus > 0:
        alternatives.append("give --no-usage to judge GPUs by allocatable alone")
    if options.port is AUTO_PORT:
        alternatives.append("give --port N")
    alternative = " or ".join(alternatives)
    resource = options.gpu_resource
    # Every resource some role asks for: what the nodes' pods are counted for.
    others = tuple(ordered(r for _, ask in rules.asks for r, _ in ask))
    own, jobs, refused = cluster.run_jobs(resource, own, others)
    # Said only once the pods are read: a refusal of those is the one error.
    later = refused and (
        "cannot list jobs: the pods that Jobs have yet to make are not counted, and a pod "
        f"is the run's own while it has a Job and is not stopping ({refused})"
    )
    eligible = [v.node for v in judge_nodes(nodes, excluded, rules) if v.eligible]
    # Per node only where the first -N eligible nodes are exactly what the seating takes:
    # every role judged alike, no pinned hosts, and no --explain (it shows every node).
    if (
        options.num != -1
        and not options.explain
        and not hosts.pins
        and not rules.roles
        and options.num * PER_NODE_SHARE <= len(eligible)
    ):
        by_name = {n.name: n for n in eligible}

        def has_room(name: str, usage: NodeUsage) -> bool:
            return judge_node(by_name[name], excluded, rules, usage).eligible

        read = cluster.usage_per_node(
            [n.name for n in eligible],
            resource,
            own,
            has_room,
            wanted=options.num,
            budget=max(4 * options.num, len(nodes) // 4),
            alternative=alternative,
            jobs=jobs,
            others=others,
        )
        if read is not None:
            if later:
                warn(later)
            return read.get, "per node"
    tally = cluster.usage(resource, own, alternative, jobs, others)
    if later:
        warn(later)
    return tally.node, "list"


def choose_port(
    options: Options,
    judged: Judged,
    seats: Seating,
    node_name: Callable[[int], str],
    lowest: int = DEFAULT_PORT,
) -> tuple[int, str]:
    """--port auto: the lowest port from `lowest` (the framework's default) up whose run
    (port .. port+tasks-per-host-1) is free on every chosen node, for the ports that follow
    <<port>>; and the line that says so."""
    by_node: dict[str, set[tuple[int, str]]] = {}  # node -> the (offset, protocol) its tasks need
    for role, places in seats.items():
        need = judged.needs.get(role)
        for host, _ in places:
            by_node.setdefault(node_name(host), set()).update(need.following if need else ())
    usage = {v.node.name: v.usage for v in judged.verdicts}
    blocked: dict[int, tuple[str, str, str]] = {}  # port -> (port text, holder, node), first seen
    for node, following in by_node.items():
        held = usage.get(node)
        if held is None or not following:
            continue
        for (number, protocol), holder in held.ports.items():
            for offset, wanted in following:
                if protocol == wanted:
                    for slot in range(options.tasks_per_host):
                        start = number - offset - slot
                        blocked.setdefault(start, (port_text((number, protocol)), holder, node))
    highest = (
        65535
        - options.tasks_per_host
        + 1
        - max((offset for f in by_node.values() for offset, _ in f), default=0)
    )
    port = lowest
    while port in blocked and port <= highest:
        port += 1
    if port > highest:
        raise SelectionError(
            f"--port auto: no port from {lowest} up is free on every chosen node; give --port N"
        )
    line = f"--port auto chose port {port}"
    if lowest in blocked:
        shown, holder, node = blocked[lowest]
        line += f" ({shown} is held by {holder} on {node})"
    return port, line
