"""Markers: where a placed value stands in a template, and how its text is written there.

The template's lines give a first guess (`classify_placement`); each task's
rendered YAML then settles it (`settle`), from the scalar the value's marker
stands in: a block scalar gets indented JSON lines, a quoted scalar JSON escaped
for its quotes, a plain scalar compact JSON (quoted whole in flow context).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from simpletfjob.errors import TemplateError

if TYPE_CHECKING:
    from simpletfjob.frameworks import RunValues
    from simpletfjob.tasks import Task

# Private-use characters frame the markers; a template or value may not contain them.
MARK_OPEN, MARK_CLOSE = "\ue000", "\ue001"
RESERVED_CHARACTERS = (MARK_OPEN, MARK_CLOSE)
MARKER = re.compile(f"{MARK_OPEN}(\\d+){MARK_CLOSE}")
_BLOCK_HEADER = re.compile(
    r"^(?P<lead>[ \t]*(?:-[ \t]+)*)(?:(?P<key>[^#\s][^#]*?)[ \t]*:[ \t]+)?"
    r"(?P<style>[|>])(?P<flags>[-+0-9]*)[ \t]*(?:#.*)?$"
)
_BARE_KEY = re.compile(r"^(?P<lead>[ \t]*(?:-[ \t]+)*)[^#\s][^#]*?[ \t]*:[ \t]*(?:#.*)?$")
_STATEMENT_LINE = re.compile(r"^[ \t]*(\{%.*%\}|<#.*#>)[ \t]*$")
# A comment starts before this point of the line: '#' at its start or after a space.
_COMMENT_BEFORE = r"(?:^|[ \t])#"
# A node's anchor and tag, before its content.
_PROPERTIES = re.compile(r"(?:[&!][^ \t\n]*[ \t\n]+)*")
_STRING_TAGS = ("tag:yaml.org,2002:str", "!")


def scalar_at(documents: Sequence[Any], index: int) -> tuple[Any, bool, bool] | None:
    """The scalar node whose text holds `index`: (node, in a flow collection, is a key)."""
    node = None
    for document in documents:
        if document.start_mark.index > index:
            break
        node = document
    in_flow = is_key = False
    while node is not None:
        if node.id == "scalar":
            if node.start_mark.index <= index < node.end_mark.index:
                return node, in_flow, is_key
            return None
        # An alias's node lies where its anchor is, so only the anchor's place holds `index`.
        if node.id == "mapping":
            parts = ((part, i == 0) for pair in node.value for i, part in enumerate(pair))
        else:
            parts = ((item, False) for item in node.value)
        inner = None
        for part, key in parts:
            if part.start_mark.index <= index < part.end_mark.index:
                inner, is_key = part, key
                break
        in_flow = bool(node.flow_style)
        node = inner
    return None


class Placement(NamedTuple):
    """Where one bare placed value (`<<NAME>>`) stands, and so how its text is written.

    The template's lines give a first guess (`classify_placement`); each task's rendered
    YAML settles it (`CompiledTemplate.resolve`), keeping only the guess's layout. `mode`:
    "block", the original tool's indented JSON lines under `key: >` or `|`; "line", a marker
    alone on a line; "lines", a framework's YAML lines (env entries) at `indent`, standing
    in the checks as one sequence entry; any other writes compact JSON, escaped for `quote`,
    between `open` and `close`.
    """

    mode: str
    indent: str
    line: int
    stand: str = ""  # where the marker stands for its whole line: that line's indentation
    quote: str = ""  # "'" or '"': the JSON is inside a scalar quoted so, and escaped for it
    open: str = ""
    close: str = ""
    name: str = ""  # the placed value's name


def classify_placement(lines: Sequence[str], number: int, start: int, end: int) -> Placement:
    """A first guess at how the placed value at lines[number][start:end] is written."""
    line = lines[number]
    before, after = line[:start], line[end:]
    if not before.strip() and not after.strip():
        own = len(before.expandtabs())
        previous = _previous_content_line(lines, number)
        header = _BLOCK_HEADER.match(previous) if previous is not None else None
        if header is not None:
            parent = len(header["lead"].expandtabs())
            digits = "".join(c for c in header["flags"] if c.isdigit())
            if digits:
                indent = parent + int(digits)
            else:
                indent = own if own > parent else parent + 2
            # The JSON's own layout keeps the original tool's indentation; the line itself
            # may stand less indented under `- |`, deeper than the dash, with more lines after.
            lead = header["lead"].expandtabs()
            owner = parent if header["key"] or "-" not in lead else len(lead.rstrip()) - 1
            stand = own if own > owner and not digits else indent
            return Placement("block", " " * indent, number + 1, " " * stand)
        bare = _BARE_KEY.match(previous) if previous is not None else None
        if bare is not None:
            parent = len(bare["lead"].expandtabs())
            indent = own if own > parent else parent + 2
            return Placement("line", " " * indent, number + 1, " " * indent, open="'", close="'")
        return Placement("line", " " * own, number + 1, " " * own, open="'", close="'")
    if before.endswith("'") and after.startswith("'"):
        return Placement("inline", "", number + 1, quote="'")
    if before.endswith('"') and after.startswith('"'):
        return Placement("inline", "", number + 1, quote='"')
    starts_value = re.search(r"(?:^|[:\-?][ \t]|[\[{,])[ \t]*$", before) is not None
    ends_value = re.match(r"[ \t]*(?:$|[ \t]#|[,\]}])", after) is not None
    if starts_value and ends_value:
        return Placement("inline", "", number + 1, open="'", close="'")
    return Placement("inline", "", number + 1)


def _previous_content_line(lines: Sequence[str], number: int) -> str | None:
    for candidate in reversed(lines[:number]):
        if candidate.strip() and not _STATEMENT_LINE.match(candidate):
            return candidate
    return None


_ESCAPED: dict[tuple[str, str], str] = {}


def _escape(quote: str, text: str) -> str:
    """Escape for a single- or double-quoted scalar, cached: the cluster part repeats per task."""
    key = (quote, text)
    escaped = _ESCAPED.get(key)
    if escaped is None:
        if quote == "'":
            escaped = text.replace("'", "''")
        else:
            escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        if len(_ESCAPED) > 64:
            _ESCAPED.clear()
        _ESCAPED[key] = escaped
    return escaped


def place_parts(placement: Placement, values: RunValues, task: Task) -> tuple[str, ...]:
    """The text that stands where the placement's marker is, in parts.
    The large part the framework shares between tasks is one string, never copied."""
    if placement.mode in ("block", "lines"):
        return values.block_parts(placement.name, task, placement.indent)
    prefix, suffix = values.compact_parts(placement.name, task)
    if placement.quote:
        prefix, suffix = _escape(placement.quote, prefix), _escape(placement.quote, suffix)
    lead = placement.indent + placement.open
    if placement.close:
        suffix += placement.close
    return (lead, prefix, suffix) if lead else (prefix, suffix)


def settle(
    guess: Placement,
    text: str,
    at: int,
    marker: str,
    documents: Sequence[Any],
    inserts: list[tuple[int, str]],
    quoted: set[int],
    filename: str,
) -> Placement:
    """How a marker is written, from the scalar it stands in; a new quote or two may go in `inserts`."""
    indent = guess.stand
    found = scalar_at(documents, at)
    if found is None:
        line_start = text.rfind("\n", 0, at) + 1
        if re.search(_COMMENT_BEFORE, text[line_start:at]):
            return Placement("raw", indent, guess.line, name=guess.name)
        raise TemplateError(
            f"{filename}:{guess.line}: <<{guess.name}>> must stand in a value "
            "(a quoted, plain or block scalar) or a comment"
        )
    node, in_flow, is_key = found
    if is_key:
        raise TemplateError(
            f"{filename}:{guess.line}: <<{guess.name}>> stands in a mapping key; "
            "it can only be (part of) a value"
        )
    if type(node.tag) is str and node.tag not in _STRING_TAGS:
        raise TemplateError(
            f"{filename}:{guess.line}: <<{guess.name}>> stands in a value tagged "
            f"{node.tag}; {guess.name} is a string"
        )
    style = node.style
    if style in ("|", ">"):
        if guess.mode == "block" and node.value.rstrip("\n") == marker:
            return guess
        return Placement("raw", indent, guess.line, name=guess.name)
    if style in ("'", '"'):
        return Placement("quoted", indent, guess.line, quote=style, name=guess.name)
    # A plain scalar: compact JSON has no spaces, so no ': ' or ' #' that would end it,
    # but it starts with '{' and holds ',[]{}', which flow context reads as structure.
    start = node.start_mark.index
    properties = _PROPERTIES.match(text, start)
    if properties is not None:
        start = properties.end()
    end = node.end_mark.index
    if not in_flow and start != at and id(node) not in quoted:
        return Placement("raw", indent, guess.line, name=guess.name)
    if id(node) not in quoted:
        # Quote the whole scalar once; a marker at its start or end writes that quote itself.
        # A later marker in a scalar quoted so (`<<NAME>><<NAME>>`) is quoted
        # with it, not written raw, or the closing quote would be lost.
        quoted.add(id(node))
        if text[start] != MARK_OPEN:
            inserts.append((start, "'"))
        inserts += [(j, "'") for j in range(start, end) if text[j] == "'"]
        if text[end - 1] != MARK_CLOSE:
            inserts.append((end, "'"))
    return Placement(
        "quoted",
        indent,
        guess.line,
        quote="'",
        open="'" if start == at else "",
        close="'" if end == at + len(marker) else "",
        name=guess.name,
    )
