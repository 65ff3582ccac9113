"""The flow, step by step: nodes -> selection -> roles and TF_CONFIG -> render -> output.

`run` takes a plain `Options` (filled by the CLI) and either writes every
document or raises a `SimpleTFJobError` having written nothing.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

from simpletfjob import nodes as node_sources
from simpletfjob.errors import InputError, RenderCheckError, UsageError
from simpletfjob.labels import (
    INDEX_LABEL,
    JOB_LABEL,
    LABEL_VALUE_RULE,
    MANAGED_BY,
    ROLE_LABEL,
    Edit,
    LabelError,
    Labeller,
    TextEditor,
    check_label_value,
    is_label_value,
)
from simpletfjob.output import (
    Destination,
    DocumentId,
    check_directives,
    check_keys,
    check_name,
    check_unique,
    compose_documents,
    destination,
    identify,
    join_documents,
    normalize_task_text,
    refuse_inputs,
    write_to,
)
from simpletfjob.render import BUILTIN_VARIABLES, CompiledTemplate
from simpletfjob.roles import (
    ClusterSpec,
    Host,
    Task,
    check_endpoints,
    place_tasks,
    run_roles,
    tasks_at,
)
from simpletfjob.selection import (
    Rules,
    Verdict,
    breakdown,
    eligible_hosts,
    judge_nodes,
    parse_selector,
    unknown_exclusions,
)
from simpletfjob.streams import stream_fd
from simpletfjob.values import check_reserved

# What --address puts in TF_CONFIG, as messages name it.
ADDRESS_NAMES = {"internal-ip": "InternalIP", "hostname": f"{node_sources.HOSTNAME_LABEL} label"}


class Options(NamedTuple):
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
    values: Mapping[str, Any] = MappingProxyType({})
    value_files: tuple[str, ...] = ()  # already read into `values`; kept to protect them
    network: str = "host"
    namespace: str | None = None
    cluster_domain: str | None = None
    tasks_per_host: int = 1
    name: str | None = None
    labels: bool = True
    # The template's text when the caller has read it already (a built-in, or a file whose
    # header was taken off); None reads the file named by `template`.
    template_text: str | None = None
    validate: bool = False
    kube_version: str | None = None  # None: the newest schema kubernetes-validate has
    # Reading nodes from a cluster, and which of them may take a task.
    kubeconfig: str | None = None
    context: str | None = None
    selector: str | None = None
    gpus: int = 0
    address: str = "name"
    explain: bool = False


class Rendered:
    """One task's rendered text (split at the TF_CONFIG markers) and its documents' ids."""

    __slots__ = ("ids", "pieces", "service_ids", "services", "task")

    def __init__(self, task: Task, pieces: list[str], ids: list[DocumentId]) -> None:
        self.task = task
        self.pieces = pieces
        self.ids = ids
        self.services = ""  # pod networking: this task's Service document
        self.service_ids: list[DocumentId] = []

    def job(self) -> DocumentId:
        return next(i for i in self.ids if i.kind == "Job")


class Decoration:
    """What is added to every rendered document: labels, and a namespace where missing."""

    def __init__(self, job: str | None, namespace: str | None) -> None:
        self.job = job  # the simpletfjob/job label value; None with --no-labels
        self.namespace = namespace
        self.conflicts: dict[str, tuple[str, str]] = {}

    def labels(self, task: Task) -> dict[str, str]:
        if self.job is None:
            return {}
        return {
            MANAGED_BY: "simpletfjob",
            JOB_LABEL: self.job,
            ROLE_LABEL: task.role,
            INDEX_LABEL: str(task.index),
        }

    def conflict(self, key: str, theirs: str, ours: str) -> None:
        self.conflicts.setdefault(key, (theirs, ours))


def warn(message: str) -> None:
    print(f"simpletfjob: warning: {message}", file=sys.stderr)


def run(options: Options, warn: Callable[[str], None] = warn) -> str:
    """Render and write the run; returns the one-line summary for stderr.

    Warnings go to `warn` as they arise; the CLI holds them back until the run has
    succeeded, so that a failure is one line.
    """
    check_options(options)
    source, filename = load_template(options.template, options.template_text)
    output = output_destination(options, filename)
    check_reserved(options.values, BUILTIN_VARIABLES)
    compiled = CompiledTemplate(source, filename, [*BUILTIN_VARIABLES, *options.values])

    nodes = read_nodes(options, warn)
    check_node_options(options, nodes)
    excluded = read_exclusions(options.exc)
    for name in unknown_exclusions(nodes, excluded):
        warn(f"{options.exc}: {name!r} is not among the hosts")
    psf = read_psf(options.psf)
    rules = eligibility_rules(options, compiled, nodes)
    verdicts = judge_nodes(nodes, excluded, rules)
    tasks: list[Task] = []
    try:
        tasks = choose_tasks(options, verdicts, psf, per_role=bool(rules.role_tolerations))
    finally:
        if options.explain:
            from simpletfjob.explain import explain_table

            table = explain_table(verdicts, tasks, limited=options.num != -1)
            print(table, file=sys.stderr)
    decoration = Decoration(job_label(options, filename), namespace_to_add(options))
    spec = ClusterSpec(tasks, include_evaluator=options.evaluator_in_cluster)
    rendered = render_and_check(compiled, tasks, spec, options.values, decoration)
    if options.network == "pod":
        spec, rendered = use_pod_network(compiled, options, rendered, decoration)
    for key, (theirs, ours) in sorted(decoration.conflicts.items()):
        message = (
            f"the template sets label {key}={theirs}; keeping it (simpletfjob would set {ours!r})"
        )
        warn(compiled.public(message))
    checked = ""
    if options.validate or options.kube_version is not None:
        from simpletfjob.validate import validate_rendered

        version = validate_rendered(compiled, rendered, spec, options.kube_version, warn)
        checked = f"; valid for Kubernetes {version}"

    chunks = join_documents([*compiled.fill(r.pieces, spec, r.task), r.services] for r in rendered)
    write_to(output, chunks)
    return summary(tasks, output.shown) + checked


def job_label(options: Options, template: str) -> str | None:
    """The simpletfjob/job label: --name, or the template's file name without extension."""
    if not options.labels:
        return None
    name = options.name  # checked with the other options
    if name is None:
        name = template_stem(template)
        check_label_value(name, "the template's name")
    return name


def namespace_to_add(options: Options) -> str | None:
    """The namespace given to documents that set none: --namespace, or 'default' with pod networking."""
    if options.namespace is not None:
        return options.namespace
    return "default" if options.network == "pod" else None


def use_pod_network(
    compiled: CompiledTemplate,
    options: Options,
    rendered: list[Rendered],
    decoration: Decoration,
) -> tuple[ClusterSpec, list[Rendered]]:
    """Address every task by its Service's DNS name, and add the Services."""
    from simpletfjob.network import dns_name, service_document

    jobs = []  # each task's Job and the namespace its Service and DNS name use
    for r in rendered:
        if not any(i.kind == "Job" for i in r.ids):
            raise RenderCheckError(
                f"--network pod: the documents of {r.task.role} {r.task.index} have no Job to give a Service"
            )
        job = r.job()
        namespace = job.namespace or decoration.namespace or "default"
        if options.namespace is not None and namespace != options.namespace:
            raise UsageError(
                f"Job {job.name!r} sets namespace {namespace!r} but --namespace is {options.namespace!r}"
            )
        check_name("Service", job.name, None, f"the Service of {r.task.role} {r.task.index}")
        jobs.append((job.name, namespace))
    endpoints = {
        r.task: f"{dns_name(name, namespace, options.cluster_domain)}:{r.task.port}"
        for r, (name, namespace) in zip(rendered, jobs, strict=True)
    }
    spec = ClusterSpec(
        [r.task for r in rendered], endpoints, include_evaluator=options.evaluator_in_cluster
    )
    if compiled.referenced & {"TF_CONFIG", "ps_hosts", "worker_hosts", "chief_hosts"}:
        # These stand in the text as rendered, so render again with the Service addresses.
        again = render_and_check(
            compiled, [r.task for r in rendered], spec, options.values, decoration
        )
        if [r.ids for r in again] != [r.ids for r in rendered]:
            raise RenderCheckError("--network pod: Job names must not depend on the host lists")
        rendered = again
    for r, (name, namespace) in zip(rendered, jobs, strict=True):
        labels = {k: v for k, v in decoration.labels(r.task).items() if k != INDEX_LABEL}
        r.services = "---\n" + service_document(name, namespace, r.task, labels)
        r.service_ids = [DocumentId("Service", namespace, name)]
    check_unique(enumerate((r.service_ids[0] for r in rendered), start=1))
    return spec, rendered


def check_options(options: Options) -> None:
    if options.num == 0 or options.num < -1:
        raise UsageError(f"-N must be a positive number of hosts, or -1 for all; got {options.num}")
    if options.psn < 0:
        raise UsageError(f"--psn must be 0 or more; got {options.psn}")
    if not 1 <= options.port <= 65535:
        raise UsageError(f"--port must be between 1 and 65535; got {options.port}")
    if options.nodes is not None and options.nodes_file is not None:
        raise UsageError("give --nodes or --nodes-file, not both")
    if options.network not in ("host", "pod"):
        raise UsageError(f"--network must be host or pod; got {options.network!r}")
    if options.tasks_per_host < 1:
        raise UsageError(f"--tasks-per-host must be at least 1; got {options.tasks_per_host}")
    if options.port + options.tasks_per_host - 1 > 65535:
        raise UsageError(
            f"--port {options.port} with {options.tasks_per_host} tasks per host goes past port 65535"
        )
    for what, value in (
        ("--namespace", options.namespace),
        ("--cluster-domain", options.cluster_domain),
    ):
        if value is not None and not node_sources.is_node_name(value):
            raise UsageError(f"{what} {value!r} is not a valid DNS name")
    if options.namespace is not None and (len(options.namespace) > 63 or "." in options.namespace):
        raise UsageError(
            f"--namespace {options.namespace!r} is not a valid namespace (a DNS label)"
        )
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
    if options.name == "":
        raise UsageError("--name must not be empty")
    if options.name is not None and not is_label_value(options.name):
        # The name is the simpletfjob/job label, so it follows the rule for label values.
        raise UsageError(f"--name {options.name!r} is not a valid label value ({LABEL_VALUE_RULE})")


def load_template(name: str, text: str | None = None) -> tuple[str, str]:
    """The template's text and the name to use for it in messages."""
    if text is not None:
        return text, name
    return node_sources.read_text(name, "template"), name


def template_stem(template: str) -> str:
    """'dir/mnist.yaml' -> 'mnist'."""
    base = os.path.basename(template)
    return base.rsplit(".", 1)[0] if "." in base else base


def output_destination(options: Options, template: str) -> Destination:
    """Where to write, refusing any destination that is one of the run's input files."""
    if options.output is None:
        if stream_fd(template) is not None:
            raise UsageError(
                f"the template is read from {template}, so there is no directory to write "
                "beside it; give -o FILE, or -o - for stdout"
            )
        output = os.path.join(os.path.dirname(template), default_output_name(template))
    else:
        output = options.output
    dest = destination(output, directory_hint=default_output_name(template))
    refuse_inputs(dest, run_inputs(options, template))
    return dest


def default_output_name(template: str) -> str:
    """'dir/mnist.yaml' -> 'mnist_tfjob.yaml', as the original tool named it."""
    return f"{template_stem(template)}_tfjob.yaml"


def run_inputs(options: Options, template: str) -> list[tuple[str, str | None]]:
    """Every file the run may read, as (what, path), for `refuse_inputs`."""
    return [
        ("template", template),
        ("exclusion file", options.exc),
        ("--psf file", options.psf),
        ("nodes file", options.nodes_file),
        *(("values file", f) for f in options.value_files),
        *kubeconfig_inputs(options.kubeconfig, os.environ),
    ]


def kubeconfig_inputs(
    kubeconfig: str | None, environ: Mapping[str, str]
) -> list[tuple[str, str | None]]:
    """Every kubeconfig a run could read, found as `cluster.kubeconfig_paths` finds them.

    All of them, whether or not this run asks a cluster, and without importing the
    cluster module (an offline render must not pay for it): job YAML written over
    credentials is never what anyone meant.
    """
    found: list[tuple[str, str | None]] = []
    if kubeconfig is not None:
        found.append(("kubeconfig", os.path.expanduser(kubeconfig)))
    for path in environ.get("KUBECONFIG", "").split(os.pathsep):
        if path:
            found.append(("kubeconfig in $KUBECONFIG", os.path.expanduser(path)))
    home = environ.get("HOME") or os.path.expanduser("~")
    found.append(("default kubeconfig", os.path.join(home, ".kube", "config")))
    return found


def read_nodes(options: Options, warn: Callable[[str], None] = warn) -> list[node_sources.Node]:
    if options.nodes is not None:
        return node_sources.nodes_from_option(options.nodes)
    if options.nodes_file is not None:
        return node_sources.nodes_from_file(options.nodes_file)
    from simpletfjob.cluster import ClusterSettings, read_cluster_nodes

    return read_cluster_nodes(
        ClusterSettings(
            kubeconfig=options.kubeconfig,
            context=options.context,
            selector=options.selector,
            warn=warn,
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


def roles_of(options: Options) -> tuple[str, ...]:
    """The roles this run has, in the order they are handed out."""
    has_ps = bool(options.psf) or options.psn > 0
    return run_roles(chief=options.chief, ps=has_ps, evaluator=options.evaluator)


def eligibility_rules(
    options: Options, compiled: CompiledTemplate, nodes: Sequence[node_sources.Node]
) -> Rules:
    """Each role's tolerations (only if some node has a taint), --gpus, and --selector for a saved list."""
    tolerations: tuple[dict[str, str], ...] = ()
    by_role: tuple[tuple[str, tuple[dict[str, str], ...]], ...] = ()
    if any(n.taints for n in nodes):
        by_role = tuple(
            (role, template_tolerations(compiled, options, role)) for role in roles_of(options)
        )
        if all(t == by_role[0][1] for _, t in by_role):
            tolerations, by_role = by_role[0][1], ()  # the usual case: one verdict per node
    # The server applies the selector to a live list; a saved list is filtered here.
    from_file = options.nodes_file is not None
    selector = parse_selector(options.selector) if from_file and options.selector else ()
    return Rules(
        tolerations=tolerations,
        selector=selector,
        min_gpus=options.gpus,
        role_tolerations=by_role,
    )


def template_tolerations(
    compiled: CompiledTemplate, options: Options, role: str
) -> tuple[dict[str, str], ...]:
    """The tolerations of one role's pod specs, from one render with placeholder values."""
    from simpletfjob.podspec import pod_tolerations

    task = Task(role, 0, "node-0", "node-0", options.port)
    spec = ClusterSpec([task])
    context = {**options.values, **task_context(task, spec, 1)}
    if compiled.uses_tf_config:
        context["TF_CONFIG"] = spec.compact(task)

    def tolerations() -> tuple[dict[str, str], ...]:
        text = normalize_task_text(compiled.render(context))
        checked, _, _ = compiled.stand_in(compiled.split(text))
        where = f"{role} 0, placeholder render"
        return pod_tolerations(compose_documents(checked, 1, where, compiled.filename))

    return compiled.bounded(tolerations)


def choose_tasks(
    options: Options, verdicts: Sequence[Verdict], psf: Sequence[str], per_role: bool
) -> list[Task]:
    """Seat the run's tasks on the eligible nodes, each role on nodes it may use."""
    eligible = eligible_hosts(verdicts, options.num, psf)
    names = [v.node.name for v in eligible]
    seats = place_tasks(
        names,
        num=options.num,
        psn=options.psn,
        psf=psf,
        chief=options.chief,
        evaluator=options.evaluator,
        tasks_per_host=options.tasks_per_host,
        may_take=(lambda role, i: eligible[i].may_take(role)) if per_role else None,
        note=lambda: breakdown(verdicts),
    )

    def host(i: int) -> Host:
        return Host(names[i], node_sources.host_address(eligible[i].node, options.address))

    tasks = tasks_at(seats, host, options.port)
    if options.address != "name" and options.network == "host":
        check_endpoints(tasks, ADDRESS_NAMES[options.address])
    return tasks


def read_exclusions(path: str | None) -> dict[str, None]:
    """The names in the exclusion file, in its order, once each."""
    if path is None:
        return {}
    text = node_sources.read_text(path, "exclusion file")
    return dict.fromkeys(name for name, _ in node_sources.parse_host_lines(text, path))


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


def render_and_check(
    compiled: CompiledTemplate,
    tasks: Sequence[Task],
    spec: ClusterSpec,
    values: Mapping[str, Any],
    decoration: Decoration,
) -> list[Rendered]:
    """Render every task, check every document and add labels; nothing is written here.

    Each task's text is checked with every bare TF_CONFIG standing as its marker;
    the scalar it stands in settles how the real JSON is escaped, so the JSON
    itself is never parsed. A template that uses TF_CONFIG in an expression of
    its own gets the real JSON in its text, and is checked with it.
    """
    rendered = []
    number = 1
    ids: list[tuple[int, DocumentId]] = []
    for task in tasks:
        # Rendering and checking one task is bounded as one piece of work (see `sandbox`).
        work = functools.partial(
            render_task, compiled, task, spec, values, decoration, number, len(tasks)
        )
        pieces, task_ids = compiled.bounded(work)
        ids += [(number + i, doc_id) for i, doc_id in enumerate(task_ids)]
        number += len(task_ids)
        rendered.append(Rendered(task, pieces, task_ids))
    check_unique(ids)
    return rendered


def render_task(
    compiled: CompiledTemplate,
    task: Task,
    spec: ClusterSpec,
    values: Mapping[str, Any],
    decoration: Decoration,
    number: int,
    count: int,
) -> tuple[list[str], list[DocumentId]]:
    """One task's text, checked and labelled, in pieces, and its documents' ids."""
    context = {**values, **task_context(task, spec, count)}
    if compiled.uses_tf_config:
        context["TF_CONFIG"] = spec.compact(task)
    text = normalize_task_text(compiled.render(context))
    pieces = compiled.split(text)
    checked, starts, lengths = compiled.stand_in(pieces)
    where = f"{task.role} {task.index} on {task.node}"
    documents, task_ids, shared = check_documents(compiled, checked, number, where)
    editor = TextEditor(checked, f"document {number} ({where})")
    if len(pieces) > 1:
        pieces, quotes = compiled.resolve(pieces, checked, starts, documents)
        editor.edits += [Edit(offset, quote) for offset, quote in quotes]
    if decoration.job is not None or decoration.namespace is not None:
        labels = decoration.labels(task)
        anchors = shared or "<<" in checked  # merge keys need no alias: `<<: {a: b}`
        labeller = Labeller(editor, documents, anchors, decoration.conflict)
        try:
            for document, doc_id in zip(documents, task_ids, strict=True):
                namespace = None if doc_id.namespace else decoration.namespace
                labeller.label(document, doc_id.kind, labels, namespace)
        except LabelError as e:
            raise RenderCheckError(compiled.public(str(e), checked, e.line)) from e
    return editor.apply_to(pieces, lengths), task_ids


def check_documents(
    compiled: CompiledTemplate, text: str, number: int, where: str
) -> tuple[list[Any], list[DocumentId], bool]:
    """One task's documents, composed, identified and checked; messages name template lines.

    Also returns whether aliases make a mapping or list stand in several places.
    """
    try:
        documents = compose_documents(text, number, where, compiled.filename)
        check_directives(text, number, where)
        if not documents:
            raise RenderCheckError(
                f"document {number} ({where}) is empty: the template renders no YAML document"
            )
        ids = [identify(d, number + i, where) for i, d in enumerate(documents)]
        shared = check_keys(documents, number, where, "*" in text)
    except RenderCheckError as e:
        marks = [getattr(e.__cause__, m, None) for m in ("problem_mark", "context_mark")]
        lines = [m.line for m in marks if m is not None] or [getattr(e, "line", -1)]
        public = compiled.public(str(e), text, *lines)
        if public != str(e):
            raise RenderCheckError(public) from e
        raise
    for doc_id in ids:
        compiled.refuse_marker(" ".join(doc_id), "a document's kind, name or namespace")
    return documents, ids, shared


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
