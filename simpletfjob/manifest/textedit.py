"""Text edits: entries inserted into a rendered text beside what is there, positioned by YAML marks.

Labels and namespaces are added as lines (or flow entries) next to the
template's own, so its formatting and comments stay as they were. Marks'
`index` counts characters from the start of the text, as str offsets do.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from simpletfjob.errors import RenderCheckError
from simpletfjob.manifest.documents import is_merge_key, scalar_string

_PLAIN_SAFE = re.compile(r"[A-Za-z][-A-Za-z0-9_./]*")
# Where a flow mapping's entries start: after its anchor and tag, if any, and its '{'.
# Compiled on first use (re caches it): most templates' metadata is block style.
_FLOW_START = r"(?:[&!][^ \t\n{]*\s+)*\{"
# The words YAML 1.1 reads as a boolean or null, in the spellings its resolver takes.
_YAML_WORDS = {"y", "Y", "n", "N"} | {
    spelling
    for word in ("yes", "no", "true", "false", "on", "off", "null")
    for spelling in (word, word.capitalize(), word.upper())
}

# An entry to add: ("key", "value") or ("key", [nested entries]).
KeyValue = tuple[str, Any]


class Edit(NamedTuple):
    offset: int  # where in the text to insert
    text: str
    end: int | None = None  # replace the text up to here (an alias written out)


class Raw(str):
    """A value written as it is: YAML text already (a flow mapping, or a number copied over)."""

    __slots__ = ()


def reads_plain(text: str) -> bool:
    """Whether `text` written unquoted reads back as the same string."""
    return _PLAIN_SAFE.fullmatch(text) is not None and text not in _YAML_WORDS


def scalar(value: str) -> str:
    """A label key or value as YAML: plain where that reads back as the same string."""
    return value if reads_plain(value) else json.dumps(value)


class TextEditor:
    """Collects insertions into one document text, positioned by composed YAML nodes."""

    def __init__(self, text: str, where: str) -> None:
        self.text = text
        self.where = where
        self.edits: list[Edit] = []

    def add(self, mapping: Any, entries: Sequence[KeyValue]) -> None:
        """Add entries to a mapping node, after its last one-line scalar entry when it has one."""
        if not entries:
            return
        if type(mapping).__name__ != "MappingNode":
            raise RenderCheckError(
                f"{self.where}: cannot add labels to a value that is not a mapping; use --no-labels"
            )
        if mapping.flow_style or not mapping.value:
            brace = re.compile(_FLOW_START).match(self.text, mapping.start_mark.index)
            if brace is None:
                raise RenderCheckError(
                    f"{self.where}: cannot find where to add labels; use --no-labels"
                )
            text = ", ".join(flow_entry(e) for e in entries) + (", " if mapping.value else "")
            self.edits.append(Edit(brace.end(), text))
            return
        first_key = mapping.value[0][0]
        column = first_key.start_mark.column
        line_start = first_key.start_mark.index - column
        if self.text[line_start : line_start + column].strip():
            raise RenderCheckError(
                f"{self.where}: cannot find where to add labels; use --no-labels"
            )
        # An alias's node lies elsewhere in the text: only values written here count.
        first, last = mapping.start_mark.index, mapping.end_mark.index
        after = [
            v
            for _, v in mapping.value
            if type(v).__name__ == "ScalarNode"
            and v.style in (None, "", "'", '"')
            and v.start_mark.line == v.end_mark.line
            and first <= v.start_mark.index <= last
        ]
        offset = line_start
        if after:  # the start of the line after the last one, or the end of the text
            newline = self.text.find("\n", after[-1].end_mark.index)
            offset = len(self.text) if newline < 0 else newline + 1
        if offset == len(self.text) and not self.text.endswith("\n"):
            self.edits.append(Edit(offset, "\n"))
        self.edits.append(Edit(offset, _block_text(entries, column)))

    def replace(self, start: int, end: int, text: str) -> None:
        """Write `text` in place of text[start:end] (an alias token)."""
        self.edits.append(Edit(start, text, end))

    def apply_to(self, pieces: list[str], stand_in_lengths: Sequence[int]) -> list[str]:
        """Apply the edits to the marker-split pieces whose stand-in text they were made in."""
        if not self.edits:
            return pieces
        # Offsets in the filled text -> (piece, offset in piece); edits never fall in a marker.
        starts = []
        position = 0
        for i, piece in enumerate(pieces):
            starts.append(position)
            position += len(piece) if i % 2 == 0 else stand_in_lengths[i // 2]
        result = list(pieces)
        for edit in sorted(self.edits, key=lambda e: e.offset, reverse=True):
            i = bisect.bisect_right(starts, edit.offset) - 1
            if i % 2 == 1 and edit.offset == starts[i] and edit.end is None:
                i -= 1  # at a marker's start: the end of the text before it
            if i % 2 == 1:
                raise RenderCheckError(
                    f"{self.where}: cannot add labels inside a value that simpletfjob places"
                )
            at = edit.offset - starts[i]
            after = at if edit.end is None else at + edit.end - edit.offset
            result[i] = result[i][:at] + edit.text + result[i][after:]
        return result


def _block_text(entries: Sequence[KeyValue], column: int) -> str:
    """Entries as block-style lines at `column`."""
    lines = []
    for key, value in entries:
        if isinstance(value, (list, tuple)):
            lines += [f"{' ' * column}{scalar(key)}:\n", _block_text(value, column + 2)]
        else:
            shown = value if isinstance(value, Raw) else scalar(value)
            lines.append(f"{' ' * column}{scalar(key)}: {shown}\n")
    return "".join(lines)


def flow_entry(entry: KeyValue) -> str:
    """One entry as flow-style text: `key: value` or `key: {...}`."""
    key, value = entry
    if isinstance(value, (list, tuple)):
        return f"{scalar(key)}: {{{', '.join(flow_entry(e) for e in value)}}}"
    if isinstance(value, Raw):
        return f"{scalar(key)}: {value}"
    return f"{scalar(key)}: {scalar(value)}"


def flow_copy(node: Any, budget: list[int] | None = None, depth: int = 0) -> str | None:
    """A node as flow YAML that reads back the same, or None (a tag, too large or too deep)."""
    budget = [65536] if budget is None else budget
    if depth > 64 or budget[0] < 0:
        return None
    value = node.value
    if type(value) is str:
        if type(node.tag) is str:  # an explicit tag
            return None
        string = scalar_string(node)
        text = value if string is None else _quoted(string)
    elif node.id == "mapping":
        parts = []
        for k, v in value:
            key = "<<" if is_merge_key(k) else flow_copy(k, budget, depth + 1)
            copied = flow_copy(v, budget, depth + 1)
            if key is None or copied is None:
                return None
            parts.append(f"{key}: {copied}")
        text = "{" + ", ".join(parts) + "}"
    else:
        items = [flow_copy(item, budget, depth + 1) for item in value]
        if None in items:
            return None
        text = "[" + ", ".join(str(i) for i in items) + "]"
    budget[0] -= len(text)
    return text if budget[0] >= 0 else None


# What a double-quoted YAML scalar cannot hold as it is, though JSON can.
_YAML_UNPRINTABLE = "[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]"  # compiled on first use


def _quoted(text: str) -> str:
    """A string as a YAML flow scalar: plain where that reads back the same, else double-quoted."""
    if reads_plain(text):
        return text
    quoted = json.dumps(text, ensure_ascii=False)
    return re.sub(_YAML_UNPRINTABLE, lambda m: f"\\u{ord(m[0]):04x}", quoted)
