"""Documents: checking each rendered document before anything is written.

The check composes each task's text (libyaml's parser, no Python objects for the
values) with every placed value standing as a short marker; the real value is
written by construction in the same place, escaped for the scalar the marker
stood in, so megabytes of JSON are never parsed. It proves the text is YAML,
reads each document's kind, namespace and name, and refuses what kubectl would
refuse: no kind or name, names that are not DNS labels, a duplicate key, two
documents with one kind, namespace and name.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from simpletfjob.errors import RenderCheckError

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1035_LABEL = r"[a-z]([-a-z0-9]*[a-z0-9])?"  # compiled on first use: a Service's name
_LEADING_SEPARATOR = re.compile(r"\A(?:[ \t]*(?:#[^\n]*)?\n)*---[ \t]*(?:#[^\n]*)?\n")
_TRAILING_SEPARATOR = re.compile(r"\n---[ \t]*\n?\Z")


class DocumentId(NamedTuple):
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name!r}"


def normalize_task_text(text: str) -> str:
    """One task's text, without a leading or trailing '---', ending in a newline."""
    text = _LEADING_SEPARATOR.sub("", text, count=1)
    text = _TRAILING_SEPARATOR.sub("\n", text)
    return text if text.endswith("\n") else text + "\n"


def compose_documents(text: str, first_number: int, where: str, source: str = "") -> list[Any]:
    """Parse one task's text (one or more documents) into YAML node trees.
    Composing, with no Python objects built for the values, is enough to prove the text is
    YAML and to read kinds, names and where placed values stand. Aliases are bounded as for
    every YAML input (`yamlload`); `source` is the template, for that message."""
    import yaml

    from simpletfjob.yamlload import LimitError, check_aliases, mark_and_problem, may_alias

    documents: list[Any] = []
    aliased = may_alias(text)
    try:
        for document in yaml.compose_all(text, Loader=_check_loader()):
            if aliased:
                check_aliases(document)
            documents.append(document)
    except LimitError as e:
        line = f", line {e.problem_mark.line + 1} of the rendered text" if e.problem_mark else ""
        raise RenderCheckError(
            f"{source + ': ' if source else ''}document {first_number + len(documents)} "
            f"({where}){line}: {e.problem}"
        ) from e
    except yaml.YAMLError as e:
        number = first_number + len(documents)
        mark, problem = mark_and_problem(e)
        if mark is None:
            raise RenderCheckError(
                f"document {number} ({where}) is not valid YAML: {problem}"
            ) from e
        lines = text.split("\n")
        shown = lines[mark.line].strip() if mark.line < len(lines) else ""
        if len(shown) > 60:
            shown = shown[:57] + "..."
        raise RenderCheckError(
            f"document {number} ({where}) is not valid YAML at line {mark.line + 1}, "
            f"column {mark.column + 1}: {problem}: {shown!r}"
        ) from e
    return documents


class NodeEvent(NamedTuple):
    """A node as the parser met it: its anchor, where it starts and ends, and if it is an alias."""

    anchor: str | None
    start: int
    end: int
    alias: bool


def node_events(text: str) -> list[NodeEvent]:
    """Every node of the text in document order, each alias where it is written.
    The composed tree has one node for an anchor and all its aliases; these
    events tell the places apart (composing visits them in the same order)."""
    import yaml

    events = []
    for event in yaml.parse(text, Loader=_check_loader()):
        if isinstance(event, yaml.NodeEvent):  # scalars, collection starts and aliases
            alias = isinstance(event, yaml.AliasEvent)
            start, end = event.start_mark, event.end_mark
            events.append(NodeEvent(event.anchor, start.index, end.index, alias))  # type: ignore[union-attr]
    return events


_STR = "tag:yaml.org,2002:str"


@functools.cache
def _check_loader() -> Any:
    """libyaml's parser with tag resolution left to `scalar_string`: the check needs the tags
    of only a few scalars (kind, name, namespace)."""
    import yaml

    try:
        from yaml._yaml import CParser as parser
    except ImportError:  # PyYAML built without libyaml: slower, same result
        from yaml.loader import Loader as parser  # type: ignore[assignment]

    class CheckLoader(parser, yaml.resolver.BaseResolver):
        # The composer calls these for every node; no check reads a node's tag, so they
        # are C callables taking the same arguments, their tags never read.
        resolve = slice
        descend_resolver = slice  # type: ignore[assignment]
        ascend_resolver = tuple  # type: ignore[assignment]

    return CheckLoader


@functools.cache
def resolver() -> Any:
    import yaml

    return yaml.resolver.Resolver()


def _plain_tag(value: str) -> str:
    """The tag YAML gives an unquoted scalar: str, int, bool, null..."""
    import yaml

    return str(resolver().resolve(yaml.ScalarNode, value, (True, False)))


_NULL = "tag:yaml.org,2002:null"
_NODE_KINDS = {"MappingNode": "mapping", "SequenceNode": "list", "ScalarNode": "scalar"}


def mapping_get(node: Any, key: str) -> Any:
    """The value node under `key` in a mapping node, or None; a key taken through a merge key
    (`<<: *base`) counts, with YAML's precedence."""
    if type(node).__name__ != "MappingNode":
        return None
    for mapping in merged_mappings(node):
        for k, v in mapping.value:
            if k.value == key and type(k).__name__ == "ScalarNode":
                return v
    return None


def merged_mappings(node: Any) -> Iterator[Any]:
    """A mapping node, then the mappings it merges in, in precedence order, each once."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        mapping = stack.pop()
        if id(mapping) in seen:
            continue
        seen.add(id(mapping))
        yield mapping
        sources = []  # the mappings it merges in, in precedence order
        for k, v in mapping.value:
            if is_merge_key(k):
                items = v.value if type(v).__name__ == "SequenceNode" else [v]
                sources += [m for m in items if type(m).__name__ == "MappingNode"]
        stack += reversed(sources)


def is_merge_key(node: Any) -> bool:
    """`<<` written plain: YAML's merge key (a quoted '<<' is an ordinary key)."""
    return node.value == "<<" and not node.style and type(node).__name__ == "ScalarNode"


def scalar_string(node: Any) -> str | None:
    """The value of a scalar node that YAML reads as a string (not 123, true or null)."""
    if node is None or type(node).__name__ != "ScalarNode":
        return None
    if not node.style and _plain_tag(node.value) != _STR:
        return None
    return str(node.value)


def identify(document: Any, number: int, where: str) -> DocumentId:
    """The kind, namespace and name of a composed document, checking that kubectl can apply it."""
    node_kind = type(document).__name__
    if node_kind == "ScalarNode" and not document.style and _plain_tag(document.value) == _NULL:
        raise RenderCheckError(f"document {number} ({where}) is empty")
    if node_kind != "MappingNode":
        raise RenderCheckError(
            f"document {number} ({where}) is a YAML {_NODE_KINDS.get(node_kind, node_kind)}, "
            "not a mapping"
        )
    kind_node = mapping_get(document, "kind")
    kind = scalar_string(kind_node)
    if kind is None and type(kind_node).__name__ == "ScalarNode" and kind_node.value:
        raise RenderCheckError(
            f"document {number} ({where}): kind {kind_node.value} is not a string; quote it"
        )
    if not kind:
        raise RenderCheckError(f"document {number} ({where}) has no 'kind'")
    metadata = mapping_get(document, "metadata")
    if metadata is not None and type(metadata).__name__ != "MappingNode":
        scalar = type(metadata).__name__ == "ScalarNode"
        if not (scalar and not metadata.style and _plain_tag(metadata.value) == _NULL):
            shown = repr(metadata.value) if scalar else "a list"
            raise RenderCheckError(
                f"document {number} ({where}, {kind}): metadata must be a mapping, not {shown}"
            )
    name_node = mapping_get(metadata, "name")
    name = scalar_string(name_node)
    if name_node is not None and name is None and type(name_node).__name__ == "ScalarNode":
        raise RenderCheckError(
            f"document {number} ({where}, {kind}): metadata.name {name_node.value} is not a string; quote it"
        )
    if not name:
        raise RenderCheckError(f"document {number} ({where}, {kind}) has no metadata.name")
    namespace_node = mapping_get(metadata, "namespace")
    namespace = scalar_string(namespace_node)
    # A null namespace is as good as none; 1 or true is neither a namespace nor none.
    if (
        namespace is None
        and type(namespace_node).__name__ == "ScalarNode"
        and _plain_tag(namespace_node.value) != _NULL
    ):
        raise RenderCheckError(
            f"document {number} ({where}, {kind}): metadata.namespace "
            f"{namespace_node.value} is not a string; quote it"
        )
    check_name(kind, name, number, where)
    return DocumentId(kind, namespace or "", name)


class LineError(RenderCheckError):
    """A refusal of a task's text; `line` (from 0, in the task's text) is where."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


def check_directives(text: str, first_number: int, where: str) -> None:
    """Refuse a %YAML or %TAG directive in one task's text: kubectl reads each part of a
    stream split at '---' on its own, and in ours a directive would follow the previous
    task's document with no '...', which YAML does not allow."""
    if not (text.startswith("%") or "\n%" in text):
        return
    import yaml

    number = first_number - 1
    for event in yaml.parse(text, Loader=_check_loader()):
        if isinstance(event, yaml.DocumentStartEvent):
            number += 1
            if event.version or event.tags:
                directive = "%YAML" if event.version else "%TAG"
                raise LineError(
                    f"document {number} ({where}) starts with a {directive} directive, which "
                    "kubectl cannot read in a stream it splits at '---' lines; remove it",
                    event.start_mark.line if event.start_mark is not None else -1,
                )


def check_keys(documents: Sequence[Any], first_number: int, where: str, aliases: bool) -> bool:
    """Refuse a mapping that has a key twice, anywhere, as kubectl does; True if aliases share one.
    Keys compare by their text, as in Kubernetes' decoder, so `a` and `"a"` clash. With
    `aliases` each node is visited once, keeping the walk linear however aliases nest."""
    import yaml

    shared = False
    for offset, document in enumerate(documents):
        seen: set[int] = set()
        stack = [document]
        while stack:
            node = stack.pop()
            if not isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
                continue
            if aliases:
                if id(node) in seen:
                    shared = True
                    continue
                seen.add(id(node))
            if isinstance(node, yaml.SequenceNode):
                stack += node.value
                continue
            texts = [k.value for k, _ in node.value if type(k.value) is str]  # (JSON has no other)
            if len(set(texts)) != len(texts):
                _duplicate(node.value, first_number + offset, where)
            stack += [v for _, v in node.value]
    return shared


def _duplicate(entries: Sequence[tuple[Any, Any]], number: int, where: str) -> None:
    first: dict[str, int] = {}
    for key, _ in entries:
        if type(key.value) is not str:
            continue
        line = key.start_mark.line
        if key.value in first:
            raise LineError(
                f"document {number} ({where}): mapping key {key.value!r} is defined twice, "
                f"at lines {first[key.value] + 1} and {line + 1}; kubectl refuses a duplicate key",
                line,
            )
        first[key.value] = line


def check_name(kind: str, name: str, number: int | None, where: str) -> None:
    """Job and Service names must be DNS-1123 labels of at most 63 characters (a Job's name is
    its pods' job-name label); a Service's, a DNS label, also starts with a letter."""
    if kind not in ("Job", "Service"):
        return
    what = f"document {number} ({where})" if number is not None else where
    pattern = re.compile(_DNS1035_LABEL) if kind == "Service" else _DNS1123_LABEL
    rule = "RFC 1035: start with a letter" if kind == "Service" else "RFC 1123"
    if len(name) > 63:
        raise RenderCheckError(
            f"{what}: {kind} name {name!r} is {len(name)} characters; the limit is 63"
        )
    if pattern.fullmatch(name) is None:
        raise RenderCheckError(
            f"{what}: {kind} name {name!r} is not a valid DNS label "
            f"({rule}; lowercase letters, digits and '-')"
        )


def check_unique(ids: Iterable[tuple[int, DocumentId]]) -> None:
    """No two documents may share a kind, namespace and name: the second would replace the first."""
    seen: dict[DocumentId, int] = {}
    for number, doc_id in ids:
        if doc_id in seen:
            raise RenderCheckError(
                f"documents {seen[doc_id]} and {number} are both {doc_id}; "
                "make metadata.name depend on <<type>> and <<index>>"
            )
        seen[doc_id] = number
