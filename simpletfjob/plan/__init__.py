"""The plan: from options to every document of a run, as data.

    nodes -> eligibility per role -> the framework's seating and values
          -> each task rendered and checked -> labels, namespaces, Services -> Plan

`plan(options)` reads its inputs (the template, host lists, NodeLists, values,
the cluster's nodes) and returns a `Plan`, or raises a `SimpleTFJobError`.
Nothing here writes a file or prints: the command that asked writes the
documents, applies them, or explains the verdicts, and prints the warnings.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from simpletfjob.errors import RenderCheckError, SelectionError, UsageError
from simpletfjob.frameworks import Framework, Pin, RunValues, framework
from simpletfjob.hosts import nodes as node_sources
from simpletfjob.hosts.fit import Ask
from simpletfjob.hosts.selection import (
    Verdict,
    left_out_for_usage,
    left_out_text,
    unknown_exclusions,
)
from simpletfjob.identity import (
    INDEX_LABEL,
    MIN_WORKERS_ANNOTATION,
    NAME_ANNOTATION,
    NAME_VALUE,
    POLICY_ANNOTATION,
    check_label_value,
)
from simpletfjob.kube.paths import kubeconfig_files
from simpletfjob.manifest.decoration import Decoration
from simpletfjob.manifest.documents import DocumentId, check_name, check_unique
from simpletfjob.manifest.network import service_dns_name, service_document
from simpletfjob.manifest.parsed import READER
from simpletfjob.manifest.render import (
    Rendered,
    compile_template,
    gpus_requested,
    render_tasks,
)
from simpletfjob.manifest.skeleton import Skeleton
from simpletfjob.options.render import Options, check_options
from simpletfjob.options.rules import AUTO_PORT
from simpletfjob.plan.eligibility import (
    Hosts,
    Judged,
    check_node_options,
    check_shared_ports,
    choose_port,
    fit_known,
    judge,
    open_cluster,
    read_exclusions,
    read_nodes,
    role_needs_of,
)
from simpletfjob.plan.fit import role_asks, seat_run, unchecked
from simpletfjob.tasks import Host, Task, check_endpoints, tasks_at
from simpletfjob.template.compiled import CompiledTemplate

# What --address puts in the cluster addresses, as messages name it.
ADDRESS_NAMES = {"internal-ip": "InternalIP", "hostname": f"{node_sources.HOSTNAME_LABEL} label"}
# A line that starts a document, and what may follow `---` on it for the line to be only that.
# Compiled on first use: a template of one document per task needs neither.
_DOCUMENT_START = r"(?m)^---(?=[ \t]|$)"
_BARE_SEPARATOR = r"---[ \t]*(?:#[^\n]*)?\n?"


@dataclass(eq=False, slots=True)
class Document:
    """One document of the run: its kind, namespace and name, its task, and its text.
    The text is kept split at the framework's placed values, which are filled in
    only when it is read (`chunks`), so that a large value is built once per run.
    `separator` is the line that comes before it in the stream."""

    id: DocumentId
    task: Task
    pieces: Sequence[str]
    template: CompiledTemplate | None
    values: RunValues | None
    separator: str = "---\n"
    filled: tuple[Skeleton, list[str]] | None = None  # the whole task, from its role's skeleton

    @property
    def kind(self) -> str:
        return self.id.kind

    @property
    def namespace(self) -> str:
        """The namespace the document names, '' when it names none."""
        return self.id.namespace

    @property
    def name(self) -> str:
        return self.id.name

    @property
    def where(self) -> str:
        """Which task it belongs to, as messages say it."""
        return f"{self.task.role} {self.task.index} on {self.task.node}"

    def chunks(self) -> Iterator[str]:
        if self.template is None or self.values is None:
            yield from self.pieces
        else:
            yield from self.template.fill(self.pieces, self.values, self.task)

    @property
    def text(self) -> str:
        return "".join(self.chunks())

    def body(self, loader: type[Any]) -> tuple[bool, Any]:
        """(True, the object `loader` reads from the text) where that is had from its role's
        skeleton, read once (manifest/parsed.py); else (False, None)."""
        if self.filled is None or self.template is None or self.values is None:
            return False, None
        skeleton, written = self.filled
        return READER.document(skeleton, written, self.template, self.values, self.task, loader)


class Plan(NamedTuple):
    """A run, planned: what the commands write, apply, explain or summarise."""

    tasks: list[Task]
    documents: list[Document]
    verdicts: list[Verdict]
    warnings: list[str]
    warned_before_selection: int  # warnings[:this] come before the verdicts, as they arose
    job: str | None  # the simpletfjob/job label; None with --no-labels
    validated: str | None  # the Kubernetes version of the schema checked against (--validate)
    notes: tuple[str, ...] = ()  # what the plan chose for the user, such as --port auto's port
    # How to name the run and its objects otherwise ('--name NAME', '--set name=NAME'); None
    # when the template spells its objects' names out.
    rename: str | None = None
    framework: str = "tensorflow"  # --framework, or the header's: runs/ asks it who decides
    asks: tuple[tuple[str, Ask], ...] = ()  # what one task of each role asks (fit.role_asks)

    def chunks(self) -> Iterator[str]:
        """The whole YAML stream, documents separated by '---' lines."""
        for i, document in enumerate(self.documents):
            if i:
                yield document.separator
            yield from document.chunks()


def plan(options: Options) -> Plan:
    """Plan the run the options describe; see the module docstring."""
    check_options(options)
    fw = framework(options.framework)
    compiled = compile_template(options, fw)
    warnings: list[str] = []

    options, job, rename = name_run(options, compiled)
    cluster = open_cluster(options, warnings.append)
    try:
        nodes = read_nodes(options, cluster)
        check_node_options(options, nodes)
        excluded = read_exclusions(options.exc)
        warnings += [
            f"{options.exc}: {n!r} is not among the hosts"
            for n in unknown_exclusions(nodes, excluded)
        ]
        pins = fw.pins(options)
        hosts = Hosts(nodes, excluded, pins, cluster)
        needs_of = partial(role_needs_of, options, fw, compiled)
        judged = judge(options, hosts, needs_of, job, warnings.append, compiled.filename)
    finally:
        if cluster is not None:
            cluster.close()
    before_selection = len(warnings)
    verdicts = judged.verdicts
    notes: list[str] = []
    if options.explain and not fit_known(nodes):
        notes += filter(None, [unchecked(role_asks(judged.needs or needs_of(), compiled.filename))])
    try:
        options, tasks = choose_tasks(options, fw, judged, pins, notes, warnings)
    except SelectionError as e:
        e.verdicts = verdicts  # for --explain, which shows them before the error
        raise
    if options.tasks_per_host > 1:
        needs = judged.needs or role_needs_of(options, fw, compiled)
        check_shared_ports(tasks, needs, options.tasks_per_host)
    if options.num == -1 and judged.read:
        # Every eligible host was asked for: say which ones what their pods hold kept out.
        left_out = left_out_for_usage(verdicts, judged.rules.min_gpus)
        if left_out:
            used = len({t.node for t in tasks})
            warnings.append(left_out_text(len(tasks), used, left_out))
    fw.check_floor(options.min_workers, (t.role for t in tasks))
    decoration = Decoration(
        job, namespace_to_add(options), options.success_policy, options.min_workers
    )
    options = fw.settle(options, lambda: gpus_requested(compiled, fw, options))
    values = fw.values(tasks, None, options, compiled.referenced)
    rendered = render_tasks(compiled, tasks, values, options.values, decoration, options.restart)
    services: list[Document] = []
    if options.network == "pod":
        values, rendered, services = use_pod_network(compiled, fw, options, rendered, decoration)
    annotations = (POLICY_ANNOTATION, NAME_ANNOTATION, MIN_WORKERS_ANNOTATION)
    for key, (theirs, ours) in sorted(decoration.conflicts.items()):
        what = "annotation" if key in annotations else "label"
        message = (
            f"the template sets {what} {key}={theirs}; keeping it (simpletfjob would set {ours!r})"
        )
        warnings.append(compiled.public(message))
    documents = split_documents(compiled, values, rendered, services)
    validated = None
    if options.validate or options.kube_version is not None:
        from simpletfjob.manifest.validate import validate_tasks

        tasks_text = ((d.text, [d.id], d.where) for d in documents)
        validated = validate_tasks(tasks_text, options.kube_version, warnings.append)
    return Plan(
        tasks, documents, verdicts, warnings, before_selection, job, validated, tuple(notes), rename,
        fw.name, judged.rules.asks,
    )  # fmt: skip


def template_stem(template: str) -> str:
    """'dir/mnist.yaml' -> 'mnist'."""
    base = os.path.basename(template)
    return base.rsplit(".", 1)[0] if "." in base else base


def default_output_name(template: str, name: str = "tensorflow") -> str:
    """'dir/mnist.yaml' -> 'mnist_tfjob.yaml', as the original tool named it ('_pytorchjob', '_jaxjob')."""
    return f"{template_stem(template)}{framework(name).output_suffix}.yaml"


def inputs(options: Options) -> Iterator[tuple[str, str | None]]:
    """Every file the run may read, as (what, path): the output may be none of them. The
    kubeconfig paths are worked out only if asked for (an existing output file)."""
    yield ("template", options.template)
    yield ("exclusion file", options.exc)
    yield from framework(options.framework).inputs(options)
    yield ("nodes file", options.nodes_file)
    yield from (("values file", f) for f in options.value_files)

    # Every kubeconfig, whether or not this run asks a cluster: job YAML written over
    # credentials is never what anyone meant.
    yield from ((f.what, f.path) for f in kubeconfig_files(options.kubeconfig, os.environ))


def name_run(
    options: Options, compiled: CompiledTemplate
) -> tuple[Options, str | None, str | None]:
    """The run's name, one for the run (its simpletfjob/job label) and its objects' names.

    As helm names a release: by --name; else by the value `name` from -f or --set, when the
    template reads it; else by the built-in's name or the template's file name. A template
    that reads `name` gets the run's name unless -f or --set give one. Returns the options,
    carrying the value; the label (None with --no-labels); and the option that names the
    run and its objects otherwise, for messages (None: nothing does).
    """
    name, values = options.name, options.values  # --name is checked with the other options
    reads = compiled.reads([NAME_VALUE])
    given = reads and NAME_VALUE in options.given_values
    if name is None and given and type(values[NAME_VALUE]) in (str, int):
        name = str(values[NAME_VALUE])
        what = f"the value {NAME_VALUE}"
    elif name is None:
        name = options.builtin or template_stem(compiled.filename)
        what = "the template's name"
    if options.labels and name != options.name:
        check_label_value(name, what)
    if reads and not given and (options.name is not None or NAME_VALUE not in values):
        options = options.replace(values={**values, NAME_VALUE: name})
    rename = (f"--set {NAME_VALUE}=NAME" if given else "--name NAME") if reads else None
    return options.replace(run_name=name), (name if options.labels else None), rename


def namespace_to_add(options: Options) -> str | None:
    """The namespace given to documents that set none: --namespace, or 'default' with pod networking."""
    if options.namespace is not None:
        return options.namespace
    return "default" if options.network == "pod" else None


def choose_tasks(
    options: Options,
    fw: Framework,
    judged: Judged,
    pins: Sequence[Pin],
    notes: list[str],
    warnings: list[str] | None = None,
) -> tuple[Options, list[Task]]:
    """Seat the run's tasks on the eligible nodes, each role on nodes it may use, each task
    where it fits (plan/fit.py).

    With --port auto the port is chosen once the nodes are (eligibility.choose_port):
    the options returned carry it, and `notes` says which it is.
    """
    eligible, seats = seat_run(
        options, fw, judged.verdicts, judged.rules, pins, [] if warnings is None else warnings
    )
    names = [v.node.name for v in eligible]
    if options.port is AUTO_PORT:
        port, note = choose_port(options, judged, seats, names.__getitem__, fw.default_port)
        options = options.replace(port=port)
        notes.append(note)

    def host(i: int) -> Host:
        return Host(names[i], node_sources.host_address(eligible[i].node, options.address))

    tasks = tasks_at(seats, fw.roles(options), host, options.port)
    if options.address != "name" and options.network == "host":
        check_endpoints(tasks, ADDRESS_NAMES[options.address])
    return options, tasks


def use_pod_network(
    compiled: CompiledTemplate,
    fw: Framework,
    options: Options,
    rendered: list[Rendered],
    decoration: Decoration,
) -> tuple[RunValues, list[Rendered], list[Document]]:
    """Address every task by its Service's DNS name, and give each task's Job a Service."""

    jobs = []  # each task's Job and the namespace its Service and DNS name use
    for r in rendered:
        job = next((i for i in r.ids if i.kind == "Job"), None)
        if job is None:
            raise RenderCheckError(
                f"--network pod: the documents of {r.task.role} {r.task.index} have no Job to give a Service"
            )
        namespace = job.namespace or decoration.namespace or "default"
        if options.namespace is not None and namespace != options.namespace:
            raise UsageError(
                f"Job {job.name!r} sets namespace {namespace!r} but --namespace is {options.namespace!r}"
            )
        check_name("Service", job.name, None, f"the Service of {r.task.role} {r.task.index}")
        jobs.append((job.name, namespace))
    tasks = [r.task for r in rendered]
    endpoints = {
        r.task: f"{service_dns_name(name, namespace, options.cluster_domain)}:{r.task.port}"
        for r, (name, namespace) in zip(rendered, jobs, strict=True)
    }
    values = fw.values(tasks, endpoints, options, compiled.referenced)
    if compiled.referenced & fw.addresses:
        # These stand in the text as rendered, so render again with the Service addresses.
        again = render_tasks(compiled, tasks, values, options.values, decoration, options.restart)
        if [r.ids for r in again] != [r.ids for r in rendered]:
            raise RenderCheckError("--network pod: Job names must not depend on the host lists")
        rendered = again
    services = []
    for r, (name, namespace) in zip(rendered, jobs, strict=True):
        labels = {k: v for k, v in decoration.labels(r.task).items() if k != INDEX_LABEL}
        text = service_document(
            name, namespace, r.task.port, fw.port_name, labels, decoration.annotations(name)
        )
        services.append(
            Document(DocumentId("Service", namespace, name), r.task, [text], None, None)
        )
    check_unique(enumerate((s.id for s in services), start=1))
    return values, rendered, services


def split_documents(
    compiled: CompiledTemplate,
    values: RunValues,
    rendered: Sequence[Rendered],
    services: Sequence[Document],
) -> list[Document]:
    """Each task's documents, its Service after them (pod networking), in task order."""
    after = {id(s.task): s for s in services}
    documents = []
    for r in rendered:
        filled = None
        if len(r.ids) == 1 and not any("---" in piece for piece in r.pieces[::2]):
            parts = [("", r.pieces)]  # one document and no '---' line in it: nothing to cut
            filled = r.filled
        else:
            parts = _split_at_document_starts(r.pieces)
        if len(parts) != len(r.ids):
            raise RenderCheckError(
                f"the documents of {r.task.role} {r.task.index} cannot be told apart; "
                "start each document with a line '---'"
            )
        for i, ((separator, pieces), doc_id) in enumerate(zip(parts, r.ids, strict=True)):
            documents.append(
                Document(
                    doc_id, r.task, pieces, compiled, values, separator if i else "---\n", filled
                )
            )
        if id(r.task) in after:
            documents.append(after[id(r.task)])
    return documents


def _split_at_document_starts(pieces: Sequence[str]) -> list[tuple[str, list[str]]]:
    """Marker-split text cut at its '---' lines: (that line, the document's pieces) each. A
    '---' that starts the document's content (`--- !tag`, `--- |`) stays in its text."""
    found: list[tuple[str, list[str]]] = [("", [])]
    last = len(pieces) - 1
    for i, piece in enumerate(pieces):
        if i % 2:
            found[-1][1].append(piece)
            continue
        cuts = [m.start() for m in re.finditer(_DOCUMENT_START, piece)] if "---" in piece else []
        start = 0
        for cut in cuts:
            found[-1][1].append(piece[start:cut])
            line = re.compile(_BARE_SEPARATOR).match(piece, cut)
            # A separator ends its line here, not in a placed value after this piece.
            if line is not None and (line[0].endswith("\n") or i == last):
                found.append((line[0], []))
                start = line.end()
            else:
                found.append(("", []))
                start = cut
        found[-1][1].append(piece[start:])
    return found
