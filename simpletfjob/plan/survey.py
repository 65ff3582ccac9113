"""`simpletfjob nodes`: a cluster's nodes judged as a render judges them, with what their pods take.

The nodes are read as a render reads them, and every pod in one cluster-wide list (a view
shows every node). The verdicts come from the same rules (hosts/selection.py):

- with `--template FILE`, its pods' tolerations, host ports and what a task of each
  role asks (plan/fit.py: `worker: nvidia.com/gpu 2 > 1 free`) are judged as a render
  of it would judge them (its header's --port and --tasks-per-host included, its
  variables from --set and -f as a render takes them);
- without one, every NoSchedule/NoExecute taint counts as untolerated, and the host
  ports in use are shown but decide nothing.

Every pod counts, a run's own too, and so do those Jobs pinned to a node have yet to make
(usage.py); a refusal to list Jobs is a warning.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import NamedTuple

from simpletfjob.errors import UsageError
from simpletfjob.frameworks import framework
from simpletfjob.hosts.cluster import Cluster
from simpletfjob.hosts.fit import Ask, ordered
from simpletfjob.hosts.nodes import Node, nodes_from_file
from simpletfjob.hosts.selection import Rules, Verdict, counted, judge_nodes, parse_selector
from simpletfjob.hosts.usage import NOBODY, Tally
from simpletfjob.kube.connection import Settings
from simpletfjob.kube.request import ApiError
from simpletfjob.manifest.render import RoleNeeds, compile_template
from simpletfjob.options.commands import NodesOptions
from simpletfjob.options.render import Options
from simpletfjob.plan.eligibility import check_node_options, role_needs_of, rules_for
from simpletfjob.plan.fit import role_asks
from simpletfjob.template.catalog import prepare_options


class Survey(NamedTuple):
    """Every node's verdict (with its usage when the pods were read), and whether they were."""

    verdicts: list[Verdict]
    read: bool  # whether the pods were read (not --no-usage, not refused)


def survey(options: NodesOptions, warn: Callable[[str], None]) -> Survey:
    """The verdicts of the cluster's nodes; see the module docstring."""
    render = render_options(options)
    needs: dict[str, RoleNeeds] = {}
    asks: dict[str, Ask] = {}
    if render is not None:
        fw = framework(render.framework)
        compiled = compile_template(render, fw)
        needs = role_needs_of(render, fw, compiled)
        asks = role_asks(needs, compiled.filename)
    others = tuple(ordered(r for ask in asks.values() for r, _ in ask))
    tally: Tally | None = None
    if options.nodes_file is not None:
        nodes = saved_nodes(options, render)
    else:
        settings = Settings(kubeconfig=options.kubeconfig, context=options.context)
        with Cluster(settings, warn, alternative="") as cluster:
            nodes = cluster.nodes(options.selector, options.gpu_resource)
            tally = read_tally(options, cluster, warn, others) if options.usage else None
    if render is None:
        # The server applies the selector to a live list; a saved list is filtered here.
        saved = options.nodes_file is not None
        selector = parse_selector(options.selector) if saved and options.selector else ()
        rules = Rules(min_gpus=options.gpus, selector=selector)
    else:
        check_ports = tally is not None
        rules = rules_for(render, needs, nodes, check_ports, asks)
    usage = None if tally is None else tally.node
    return Survey(judge_nodes(nodes, {}, rules, usage), tally is not None)


def saved_nodes(options: NodesOptions, render: Options | None) -> list[Node]:
    """The nodes of --nodes-file, read as a render reads them: a saved NodeList (no pods, so
    GPUs are judged by allocatable) or a host list (names only)."""
    assert options.nodes_file is not None
    if options.kubeconfig is not None or options.context is not None:
        flag = "--kubeconfig" if options.kubeconfig is not None else "--context"
        raise UsageError(f"{flag} reads nodes from a cluster; it cannot go with --nodes-file")
    nodes = nodes_from_file(options.nodes_file, options.gpu_resource)
    check_node_options(render or plain_render_options(options), nodes)
    return nodes


def render_options(options: NodesOptions) -> Options | None:
    """The options a render of --template would have (its header's defaults included), or None."""
    if options.template is None:
        if options.set_values or options.value_files:
            flag = "--set" if options.set_values else "-f/--values"
            raise UsageError(f"{flag} gives a template's variables: it needs --template FILE")
        return None
    given = plain_render_options(options).replace(
        set_values=options.set_values, value_files=options.value_files
    )
    return prepare_options(given, frozenset({"output"}))


def plain_render_options(options: NodesOptions) -> Options:
    """A render's options that read the nodes as `nodes` reads them (its template aside)."""
    return Options(
        template=options.template or "",
        kubeconfig=options.kubeconfig,
        context=options.context,
        selector=options.selector,
        gpus=options.gpus,
        gpu_resource=options.gpu_resource,
        usage=options.usage,
        nodes=None,
        nodes_file=options.nodes_file,
        output="-",
    )


def read_tally(
    options: NodesOptions, cluster: Cluster, warn: Callable[[str], None], others: Sequence[str] = ()
) -> Tally | None:
    """Every non-terminated pod, summed per node; None, after a warning, when listing pods is
    refused and --gpus does not depend on it."""
    alternative = "give --no-usage to judge GPUs by allocatable alone" if options.gpus else ""
    resource = options.gpu_resource
    try:
        _, jobs, refused = cluster.run_jobs(resource, NOBODY, others)
        tally = cluster.usage(resource, NOBODY, alternative, jobs, others)
    except ApiError as e:
        if e.status != 403 or options.gpus:
            raise
        warn(f"cannot list pods: free GPUs and host ports not checked ({cluster.denial(e)})")
        return None
    if refused is not None:
        warn(f"cannot list jobs: the pods that Jobs have yet to make are not counted ({refused})")
    return tally


# ---- printing ------------------------------------------------------------------------------------


def table_rows(verdicts: Sequence[Verdict], wide: bool = False) -> list[list[str]]:
    """NAME ELIGIBLE REASON GPU(FREE/ALLOC) PODS; wide adds ADDRESSES, HOST PORTS and LABELS."""
    header = ["NAME", "ELIGIBLE", "REASON", "GPU(FREE/ALLOC)", "PODS"]
    if wide:
        header += ["ADDRESSES", "HOST PORTS", "LABELS"]
    rows = [header]
    for v in verdicts:
        free = v.node.gpus if v.free_gpus is None else v.free_gpus
        pods = "-" if v.usage is None else str(v.usage.pods)
        reasons = "; ".join(map(str, v.reasons)) or "-"
        row = [v.node.name, v.eligible_text, reasons, f"{free}/{v.node.gpus}", pods]
        if wide:
            addresses = ",".join(
                f"{kind}={a}" for kind, every in sorted(v.node.addresses.items()) for a in every
            )
            ports = "-" if v.usage is None else ",".join(map(str, v.usage.port_numbers))
            labels = ",".join(f"{k}={value}" for k, value in sorted(v.node.labels.items()))
            row += [addresses or "<none>", ports or "<none>", labels or "<none>"]
        rows.append(row)
    return rows


def as_json(verdicts: Sequence[Verdict]) -> str:
    """A JSON array, one object per node; `requested` and `pods` are null when the pods were not
    read. `addresses` maps each type to every address of it, in the node's order."""
    found = []
    for v in verdicts:
        usage = v.usage
        requested = None if usage is None else usage.requested
        found.append(
            {
                "name": v.node.name,
                "eligible": v.eligible,
                "reasons": [str(r) for r in v.reasons],
                "gpu": {
                    "allocatable": v.node.gpus,
                    "requested": requested,
                    "free": v.node.gpus if v.free_gpus is None else v.free_gpus,
                },
                "pods": None if usage is None else usage.pods,
                "hostPorts": [] if usage is None else usage.port_numbers,
                "addresses": {kind: list(a) for kind, a in sorted(v.node.addresses.items())},
            }
        )
    return json.dumps(found, indent=2) + "\n"


def survey_summary(result: Survey) -> str:
    """'12 nodes: 7 eligible, 23 GPUs free': the free GPUs of the eligible nodes only, those a
    run may have (a GPU node that only a tolerating template may use counts once it is
    eligible: with --tolerate)."""
    verdicts = result.verdicts
    eligible = sum(v.eligible for v in verdicts)
    free = sum(v.node.gpus if v.free_gpus is None else v.free_gpus for v in verdicts if v.eligible)
    how = "free" if result.read else "allocatable (pods not read)"
    nodes, gpus = counted(len(verdicts), "node", "nodes"), counted(free, "GPU", "GPUs")
    return f"{nodes}: {eligible} eligible, {gpus} {how}"
