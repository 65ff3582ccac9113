"""Rendering a run: each task's text rendered, checked and labelled, before anything is written.

Each task's text is checked with every placed value standing as its marker; the
scalar it stands in settles how the real value is escaped there (template/compiled.py), so
that value is never parsed. A template that uses a placed value in an
expression of its own gets the real text in its render, and is checked with it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NamedTuple

from simpletfjob.errors import RenderCheckError, TemplateError
from simpletfjob.frameworks import TASK_VARIABLES, Framework, RunValues
from simpletfjob.identity import NAME_VALUE
from simpletfjob.inputs import read_text
from simpletfjob.manifest.decoration import Decoration
from simpletfjob.manifest.documents import (
    DocumentId,
    check_directives,
    check_keys,
    check_unique,
    compose_documents,
    identify,
    normalize_task_text,
)
from simpletfjob.manifest.labels import LabelError, Labeller
from simpletfjob.manifest.podspec import (
    pod_host_ports,
    pod_node_names,
    pod_resources,
    pod_tolerations,
)
from simpletfjob.manifest.skeleton import Skeleton, Skeletons
from simpletfjob.manifest.textedit import Edit, TextEditor
from simpletfjob.tasks import Task
from simpletfjob.template.compiled import CompiledTemplate
from simpletfjob.template.values import check_reserved

if TYPE_CHECKING:
    from simpletfjob.options.render import Options

# A host port and its protocol (usage.Port).
Port = tuple[int, str]


@dataclass(eq=False, slots=True)
class Rendered:
    """One task's rendered text (split at the placed values' markers) and its documents' ids;
    for a task filled in from its role's skeleton, the skeleton and the text written for each
    of its tokens (manifest/parsed.py reads the task's object from them)."""

    task: Task
    pieces: list[str]
    ids: list[DocumentId]
    filled: tuple[Skeleton, list[str]] | None = None


def task_context(task: Task, values: RunValues, num_tasks: int, restart: int = 0) -> dict[str, Any]:
    """The variables of one task's render: those every task gets, and the framework's.
    `restart` is the run's restart count: 0 for render and apply, the attempt's for `run`."""
    return {
        "host": task.host,
        "node": task.node,
        "port": task.port,
        "num_tasks": num_tasks,
        "restart": restart,
        **values.variables(task),
    }


def render_tasks(
    compiled: CompiledTemplate,
    tasks: Sequence[Task],
    values: RunValues,
    given: Mapping[str, Any],
    decoration: Decoration,
    restart: int = 0,
) -> list[Rendered]:
    """Render every task, check every document and add labels; nothing is written here.
    A role of many tasks is rendered once, as a skeleton that each task's values fill
    in, where that gives each task the text of its own render (see `skeleton`)."""
    rendered = []
    number = 1
    ids: list[tuple[int, DocumentId]] = []
    count = len(tasks)

    def context_of(task: Task) -> dict[str, Any]:
        # Made when needed, not held: a framework's placed value read in an expression is a
        # string as long as the cluster, for every task.
        return task_context(task, values, count, restart)

    def render_skeleton(
        task: Task, context: Mapping[str, Any], index_text: str
    ) -> tuple[list[str], list[DocumentId], bool]:
        # The same decoration, its index label the token, with conflicts of its own.
        shown = replace(decoration, index_text=index_text, conflicts={})
        pieces, task_ids = render_task(
            compiled, task, values, given, shown, 1, count, restart, context
        )
        return pieces, task_ids, bool(shown.conflicts)

    skeletons = Skeletons(
        compiled, tasks, context_of, given, render_skeleton, bool(decoration.annotations("x"))
    )
    for task in tasks:
        context = context_of(task)
        filled = skeletons.fill(task, context)
        made: tuple[Skeleton, list[str]] | None = None
        if filled is not None:
            skeleton, (pieces, task_ids, written) = filled
            made = (skeleton, written)
            compiled.hold(sum(map(len, pieces)))
        else:
            # Rendering and checking one task is bounded as one piece of work (see `sandbox`).
            work = functools.partial(
                render_task, compiled, task, values, given, decoration, number, count, restart,
                context,
            )  # fmt: skip
            pieces, task_ids = compiled.bounded(work)
        ids += [(number + i, doc_id) for i, doc_id in enumerate(task_ids)]
        number += len(task_ids)
        rendered.append(Rendered(task, pieces, task_ids, made))
    check_unique(ids)
    return rendered


def render_task(
    compiled: CompiledTemplate,
    task: Task,
    values: RunValues,
    given: Mapping[str, Any],
    decoration: Decoration,
    number: int,
    count: int,
    restart: int = 0,
    context: Mapping[str, Any] | None = None,
) -> tuple[list[str], list[DocumentId]]:
    """One task's text, checked and labelled, in pieces, and its documents' ids.
    `context` is the task's own variables (`task_context`), when they are known."""
    if context is None:
        context = task_context(task, values, count, restart)
    context = {**given, **context}
    text = normalize_task_text(compiled.render(context))
    pieces = compiled.split(text)
    checked, starts, lengths = compiled.stand_in(pieces)
    where = f"{task.role} {task.index} on {task.node}"
    documents, task_ids, shared = check_documents(compiled, checked, number, where)
    if task.host != task.node:
        check_node_names(compiled, task, documents, checked, number, where)
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
                annotations = decoration.annotations(doc_id.name)
                labeller.label(document, doc_id.kind, labels, namespace, annotations)
        except LabelError as e:
            raise RenderCheckError(compiled.public(str(e), checked, e.line)) from e
    return editor.apply_to(pieces, lengths), task_ids


def check_node_names(
    compiled: CompiledTemplate,
    task: Task,
    documents: Sequence[Any],
    text: str,
    number: int,
    where: str,
) -> None:
    """Refuse a pod pinned to the task's address (--address) rather than to its node's name.
    Templates written for node names say `nodeName: <<host>>`; with --address internal-ip
    or hostname, <<host>> is no node's name and the pod could never start."""

    for node in pod_node_names(documents):
        if node.value == task.host:
            line = node.start_mark.line
            raise RenderCheckError(
                compiled.public(
                    f"document {number} ({where}): nodeName is {task.host!r}, the task's "
                    f"address (<<host>>), not its node's name {task.node!r}; "
                    "write nodeName: <<node>>",
                    text,
                    line,
                )
            )


def check_documents(
    compiled: CompiledTemplate, text: str, number: int, where: str
) -> tuple[list[Any], list[DocumentId], bool]:
    """One task's documents, composed, identified and checked; messages name template lines.
    Also returns whether aliases make a mapping or list stand in several places."""
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
        cause = e.__cause__
        marks = [getattr(cause, m, None) for m in ("problem_mark", "context_mark")]
        lines = [m.line for m in marks if m is not None] or [getattr(e, "line", -1)]
        public = compiled.public(str(e), text, *lines)
        if public != str(e):
            raise RenderCheckError(public) from e
        raise
    for doc_id in ids:
        compiled.refuse_marker(" ".join(doc_id), "a document's kind, name or namespace")
    return documents, ids, shared


class RoleNeeds(NamedTuple):
    """What one role's pods ask of a node, read from the template rendered for that role."""

    tolerations: tuple[dict[str, str], ...]
    host_network: bool
    fixed: frozenset[Port]  # host ports whatever --port is
    # (offset from the task's port, protocol): the ports that follow <<port>>
    following: frozenset[Port]
    # The namespaces its documents name ('' for a document that names none).
    namespaces: frozenset[str]
    # Its pod specs, reduced to what their requests are counted from (podspec.pod_resources).
    pods: tuple[dict[str, Any], ...] = ()

    def ports(self, port: int | None, tasks_per_host: int) -> frozenset[Port]:
        """The host ports a node needs free for this role's tasks on it; None: only the fixed ones."""
        if port is None:
            return self.fixed
        moving = {
            (port + offset + slot, protocol)
            for offset, protocol in self.following
            for slot in range(tasks_per_host)
        }
        return self.fixed | moving


def role_needs(
    compiled: CompiledTemplate, fw: Framework, options: Options, role: str, port: int
) -> RoleNeeds:
    """One role's tolerations, host networking, host ports and pods' resources, from its task 0
    rendered at `port`.

    On the host network a task listens on its own port (the one its cluster address names),
    whether the template declares it or not. A declared host port that moves with the port
    (rendered again one port further) follows <<port>>, as the built-in templates' do;
    one that does not is fixed.
    """

    documents = _placeholder_documents(compiled, fw, options, role, port)
    held = pod_host_ports(documents)
    following: set[Port] = {(0, "TCP")} if held.host_network else set()
    fixed: set[Port] = set()
    if held.ports:
        other = port + 1 if port < 65535 else port - 1
        again = pod_host_ports(_placeholder_documents(compiled, fw, options, role, other))
        if len(again.ports) != len(held.ports):
            again = held  # the port changes the pods' shape: take them as they are
        for (number, protocol), (moved, _) in zip(held.ports, again.ports, strict=True):
            if moved - number == other - port:
                following.add((number - port, protocol))
            else:
                fixed.add((number, protocol))
    return RoleNeeds(
        pod_tolerations(documents),
        held.host_network,
        frozenset(fixed),
        frozenset(following),
        frozenset(_namespace(d, i) for i, d in enumerate(documents, start=1)),
        pod_resources(documents),
    )


def _namespace(document: Any, number: int) -> str:
    """The namespace a document names; '' for none, or when it is malformed (its real render says so)."""
    try:
        return identify(document, number, "placeholder render").namespace
    except RenderCheckError:
        return ""


def _placeholder_documents(
    compiled: CompiledTemplate, fw: Framework, options: Options, role: str, port: int
) -> list[Any]:
    """One role's documents (YAML node trees), rendered as its task 0 on a placeholder host."""
    task = Task(role, 0, "node-0", "node-0", port)
    values = fw.values([task], None, options, compiled.referenced)
    context = {**options.values, **task_context(task, values, 1, options.restart)}

    def documents() -> list[Any]:
        text = normalize_task_text(compiled.render(context))
        checked, _, _ = compiled.stand_in(compiled.split(text))
        return compose_documents(checked, 1, f"{role} 0, placeholder render", compiled.filename)

    return compiled.bounded(documents)


def compile_template(options: Any, fw: Framework) -> CompiledTemplate:
    """The template, read and compiled, its variables checked against the framework's.
    Each --set must name a value the template reads (values.check_sets_read)."""

    source = options.template_text  # None: not read yet
    if source is None:
        source = read_text(options.template, "template")
    reserved = (*TASK_VARIABLES, *fw.variables)
    check_reserved(options.values, reserved)
    # The run's name is there for a template that reads it and is given none (plan.name_run).
    known = [*reserved, *options.values, NAME_VALUE]
    try:
        compiled = CompiledTemplate(
            source, options.template, known, fw.placed, fw.legacy, fw.blocks
        )
    except TemplateError as e:
        raise other_framework(e, fw) from e
    if options.set_values:  # no walk at all without --set
        from simpletfjob.options.table import options_of
        from simpletfjob.template.values import check_sets_read

        flags = {flag for _, declared in options_of(type(options)) for flag in declared.spellings()}
        check_sets_read(
            options.set_values,
            compiled.reads,
            compiled.referenced,
            compiled.value_paths,
            reserved,
            flags,
        )
    return compiled


def other_framework(error: TemplateError, fw: Framework) -> TemplateError:
    """An undefined name that another framework sets says which (`<<TORCH_ENV>>` in a TensorFlow run)."""
    import re

    from simpletfjob.frameworks import FRAMEWORKS, framework

    found = re.match(r"(.*?'(\w+)' is undefined);", str(error))
    owner = next(
        (n for n in FRAMEWORKS if found and n != fw.name and found[2] in framework(n).variables),
        None,
    )
    if found is None or owner is None:
        return error
    return TemplateError(
        f"{found[1]} for framework {fw.name}: it is {owner}'s; give --framework {owner}, "
        f"or framework: {owner} in the template header's options"
    )


def gpus_requested(compiled: CompiledTemplate, fw: Framework, options: Any) -> int:
    """`--nproc-per-node gpu`: the GPUs worker 0's container asks for, from its placeholder render.
    The container is the one whose env carries the framework's variables, else the
    first; every task is taken to ask as many (torchrun's world size needs one count)."""
    from simpletfjob.manifest.podspec import container_gpus
    from simpletfjob.options.rules import AUTO_PORT

    role = fw.roles(options)[0]
    port = fw.default_port if options.port is AUTO_PORT else options.port
    documents = _placeholder_documents(compiled, fw, options.replace(nproc_per_node=1), role, port)
    asked = container_gpus(documents, options.gpu_resource, fw.env_names)
    if asked is None:
        raise RenderCheckError(
            f"--nproc-per-node gpu: the task's container asks for no {options.gpu_resource} "
            "(in resources.limits or requests); give --nproc-per-node N"
        )
    if asked.gpus is None:
        value = asked.text if asked.text in ("a list", "a mapping") else repr(asked.text)
        raise RenderCheckError(
            f"--nproc-per-node gpu: the task's container asks for {options.gpu_resource} "
            f"{value} (in resources.{asked.kind}), which is not a number of GPUs (a whole "
            "number, at least 1); give --nproc-per-node N, or a whole number of GPUs"
        )
    return asked.gpus
