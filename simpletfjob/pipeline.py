"""The flow, step by step: nodes -> selection -> roles and TF_CONFIG -> render -> output.

`run` takes a plain `Options` (filled by the CLI) and either writes every
document or raises a `SimpleTFJobError` having written nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simpletfjob import nodes as node_sources
from simpletfjob.errors import InputError, OutputError, RenderCheckError, UsageError
from simpletfjob.output import (
    DocumentId,
    check_unique,
    compose_documents,
    count_config_strings,
    identify,
    join_documents,
    normalize_task_text,
    write_atomic,
    write_stdout,
)
from simpletfjob.render import BUILTIN_VARIABLES, WHOLE_VALUE_MODES, CompiledTemplate
from simpletfjob.roles import ClusterSpec, Host, Task, assign_roles
from simpletfjob.selection import Rules, judge_nodes, parse_selector, take_hosts, unknown_exclusions
from simpletfjob.values import check_reserved

STDOUT = "-"


@dataclass
class Options:
    """Everything a run needs, as plain values; the CLI fills it, tests may too."""

    template: str
    num: int = -1
    exc: str | None = None
    psn: int = 1
    psf: str | None = None
    chief: bool = False
    evaluator: bool = False
    evaluator_in_cluster: bool = False
    port: int = 2222
    nodes: str | None = None
    nodes_file: str | None = None
    output: str | None = None
    values: dict[str, Any] = field(default_factory=dict)
    # Reading nodes from a cluster, and which of them may take a task.
    kubeconfig: str | None = None
    context: str | None = None
    selector: str | None = None
    gpus: int = 0
    address: str = "name"
    explain: bool = False


@dataclass
class Rendered:
    """One task's rendered text (split at the TF_CONFIG markers) and its documents' ids."""

    task: Task
    pieces: list[str]
    ids: list[DocumentId]


def warn(message: str) -> None:
    print(f"simpletfjob: warning: {message}", file=sys.stderr)


def run(options: Options) -> str:
    """Render and write the run; returns the one-line summary for stderr."""
    check_options(options)
    source, filename = load_template(options.template)
    output = output_path(options, filename)
    check_reserved(options.values, BUILTIN_VARIABLES)
    compiled = CompiledTemplate(source, filename, [*BUILTIN_VARIABLES, *options.values])

    nodes = read_nodes(options)
    check_node_options(options, nodes)
    excluded = read_exclusions(options.exc)
    for name in unknown_exclusions(nodes, excluded):
        warn(f"{options.exc}: {name!r} is not among the hosts")
    psf = read_psf(options.psf)
    verdicts = judge_nodes(nodes, excluded, eligibility_rules(options, compiled, nodes))
    tasks: list[Task] = []
    try:
        selected = take_hosts(verdicts, options.num, psf)
        tasks = assign_roles(
            [Host(n.name, node_sources.host_address(n, options.address)) for n in selected],
            psn=len(psf) if psf else options.psn,
            psf=psf,
            chief=options.chief,
            evaluator=options.evaluator,
            port=options.port,
        )
    finally:
        if options.explain:
            from simpletfjob.explain import explain_table

            print(explain_table(verdicts, tasks), file=sys.stderr)
    spec = ClusterSpec(tasks, include_evaluator=options.evaluator_in_cluster)
    rendered = render_and_check(compiled, tasks, spec, options.values)

    chunks = join_documents(compiled.fill(r.pieces, spec, r.task) for r in rendered)
    if output is None:
        write_stdout(chunks)
    else:
        write_atomic(output, chunks)
    return summary(tasks, "stdout" if output is None else str(output))


def check_options(options: Options) -> None:
    if options.num == 0 or options.num < -1:
        raise UsageError(f"-N must be a positive number of hosts, or -1 for all; got {options.num}")
    if options.psn < 0:
        raise UsageError(f"--psn must be 0 or more; got {options.psn}")
    if not 1 <= options.port <= 65535:
        raise UsageError(f"--port must be between 1 and 65535; got {options.port}")
    if options.nodes is not None and options.nodes_file is not None:
        raise UsageError("give --nodes or --nodes-file, not both")
    given = options.nodes is not None or options.nodes_file is not None
    if given and (options.kubeconfig is not None or options.context is not None):
        flag = "--kubeconfig" if options.kubeconfig is not None else "--context"
        raise UsageError(
            f"{flag} reads nodes from a cluster; it cannot go with --nodes or --nodes-file"
        )
    if options.gpus < 0:
        raise UsageError(f"--gpus must be 0 or more; got {options.gpus}")
    if options.address not in node_sources.ADDRESS_CHOICES:
        raise UsageError(f"--address must be one of {', '.join(node_sources.ADDRESS_CHOICES)}")
    if options.selector is not None:
        parse_selector(options.selector)  # a bad selector is a usage error before any network


def load_template(name: str) -> tuple[str, str]:
    """The template's text and the name to use for it in messages."""
    return node_sources.read_text(name, "template"), name


def output_path(options: Options, template: str) -> Path | None:
    """Where to write: None for stdout; refuse to overwrite any input file."""
    if options.output == STDOUT:
        return None
    if options.output is None:
        source = Path(template)
        stem = source.name.rsplit(".", 1)[0] if "." in source.name else source.name
        path = source.parent / f"{stem}_tfjob.yaml"
    else:
        path = Path(options.output)
    inputs = [
        ("template", template),
        ("exclusion file", options.exc),
        ("--psf file", options.psf),
        ("nodes file", options.nodes_file),
    ]
    for what, other in inputs:
        if other is not None and _same_file(path, Path(other)):
            raise OutputError(f"output {str(path)!r} is the {what}; choose another -o")
    return path


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def read_nodes(options: Options) -> list[node_sources.Node]:
    if options.nodes is not None:
        return node_sources.nodes_from_option(options.nodes)
    if options.nodes_file is not None:
        return node_sources.nodes_from_file(options.nodes_file)
    from simpletfjob.cluster import ClusterSettings, read_cluster_nodes

    return read_cluster_nodes(
        ClusterSettings(
            kubeconfig=options.kubeconfig, context=options.context, selector=options.selector
        )
    )


def check_node_options(options: Options, nodes: Sequence[node_sources.Node]) -> None:
    """Options that read node labels, GPUs or addresses need nodes that have them."""
    if not nodes or not all(n.plain for n in nodes):
        return
    needs = [
        flag
        for flag, used in (
            ("--selector", options.selector is not None),
            ("--gpus", options.gpus > 0),
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


def eligibility_rules(
    options: Options, compiled: CompiledTemplate, nodes: Sequence[node_sources.Node]
) -> Rules:
    """The template's tolerations (only if some node has a taint), --gpus, and --selector for a saved list."""
    tolerations = template_tolerations(compiled, options) if any(n.taints for n in nodes) else ()
    # The server applies the selector to a live list; a saved list is filtered here.
    from_file = options.nodes_file is not None
    selector = parse_selector(options.selector) if from_file and options.selector else ()
    return Rules(tolerations=tolerations, selector=selector, min_gpus=options.gpus)


def template_tolerations(
    compiled: CompiledTemplate, options: Options
) -> tuple[dict[str, str], ...]:
    """The tolerations of the template's pod specs, from one render with placeholder values."""
    from simpletfjob.podspec import pod_tolerations

    task = Task("worker", 0, "node-0", "node-0", options.port)
    spec = ClusterSpec([task])
    context = {**options.values, **task_context(task, spec, 1)}
    if compiled.uses_tf_config:
        context["TF_CONFIG"] = spec.compact(task)
    pieces = compiled.split(normalize_task_text(compiled.render(context)))
    text = "".join(compiled.fill(pieces, spec, task))
    return pod_tolerations(compose_documents(text, 1, "worker 0, placeholder render"))


def read_exclusions(path: str | None) -> set[str]:
    if path is None:
        return set()
    text = node_sources.read_text(path, "exclusion file")
    return {name for name, _ in node_sources.parse_host_lines(text, path)}


def read_psf(path: str | None) -> list[str]:
    if path is None:
        return []
    text = node_sources.read_text(path, "--psf file")
    entries = node_sources.parse_host_lines(text, path)
    if not entries:
        raise InputError(f"--psf file {path!r} lists no hosts")
    return node_sources.check_host_names(entries)


def task_context(task: Task, spec: ClusterSpec, num_tasks: int) -> dict[str, Any]:
    return {
        "type": task.role,
        "index": task.index,
        "host": task.host,
        "node": task.node,
        "port": task.port,
        "ps_hosts": spec.hosts("ps"),
        "worker_hosts": spec.hosts("worker"),
        "chief_hosts": spec.hosts("chief"),
        "num_tasks": num_tasks,
    }


def stub_spec(tasks: Sequence[Task]) -> ClusterSpec:
    """A small cluster of the same roles, for checking placement without the real JSON."""
    stubs = {t.role: Task(t.role, 0, "stub", "stub", 1) for t in tasks}
    return ClusterSpec(list(stubs.values()), include_evaluator=True)


def render_and_check(
    compiled: CompiledTemplate,
    tasks: Sequence[Task],
    spec: ClusterSpec,
    values: Mapping[str, Any],
) -> list[Rendered]:
    """Render every task and check every document; nothing is written here."""
    stub = stub_spec(tasks)
    # A template that uses TF_CONFIG in an expression of its own gets the real JSON
    # in its text, so its documents are checked with it; bare placements use the stub.
    text_spec = spec if compiled.uses_tf_config else stub
    rendered = []
    number = 1
    ids: list[tuple[int, DocumentId]] = []
    for task in tasks:
        context = {**values, **task_context(task, spec, len(tasks))}
        if compiled.uses_tf_config:
            context["TF_CONFIG"] = text_spec.compact(task)
        text = normalize_task_text(compiled.render(context))
        pieces = compiled.split(text)
        checked = "".join(compiled.fill(pieces, stub, task))
        where = f"{task.role} {task.index} on {task.node}"
        documents = compose_documents(checked, number, where)
        task_ids = [identify(d, number + i, where) for i, d in enumerate(documents)]
        check_placements(compiled, pieces, documents, stub.config(task), where, number)
        ids += [(number + i, doc_id) for i, doc_id in enumerate(task_ids)]
        number += len(documents)
        rendered.append(Rendered(task, pieces, task_ids))
    check_unique(ids)
    return rendered


def check_placements(
    compiled: CompiledTemplate,
    pieces: Sequence[str],
    documents: Sequence[Any],
    config: Mapping[str, Any],
    where: str,
    number: int,
) -> None:
    """Each bare TF_CONFIG that stands as a whole value must read back as this task's config."""
    placed = [compiled.placements[int(p)] for p in pieces[1::2]]
    whole = [p for p in placed if p.mode in WHOLE_VALUE_MODES]
    if not whole:
        return
    found = sum(count_config_strings(d, config) for d in documents)
    if found < len(whole):
        line = whole[0].line
        raise RenderCheckError(
            f"document {number} ({where}): the TF_CONFIG at {compiled.filename}:{line} "
            "does not come out as one JSON string value; put it alone on a line under "
            "'value: |', or quote it: value: '<<TF_CONFIG>>'"
        )


def summary(tasks: Sequence[Task], destination: str) -> str:
    """'3 tasks -> out.yaml: 1 ps (h10), 2 worker (h100, h14)'."""
    groups: dict[str, list[str]] = {}
    shared_hosts = len({t.host for t in tasks}) < len(tasks)
    for t in tasks:
        groups.setdefault(t.role, []).append(t.endpoint if shared_hosts else t.host)
    parts = []
    for role, hosts in groups.items():
        shown = ", ".join(hosts[:4]) + (f", ... {len(hosts) - 4} more" if len(hosts) > 4 else "")
        parts.append(f"{len(hosts)} {role} ({shown})")
    noun = "task" if len(tasks) == 1 else "tasks"
    return f"simpletfjob: wrote {len(tasks)} {noun} to {destination}: " + ", ".join(parts)
