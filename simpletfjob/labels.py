"""Labels (and, for pod networking, namespaces) added to rendered documents as text.

The edits are made in the rendered text, beside the template's own lines, so its
formatting, comments and labels stay as they were. Positions come from the YAML
node tree that the check composes anyway. A label the template already sets is
left alone; if its value differs, the template wins and a warning says so.
"""

from __future__ import annotations

import bisect
import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from simpletfjob.errors import RenderCheckError
from simpletfjob.output import mapping_get

MANAGED_BY = "app.kubernetes.io/managed-by"
JOB_LABEL = "simpletfjob/job"
ROLE_LABEL = "simpletfjob/role"
INDEX_LABEL = "simpletfjob/index"

_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
_PLAIN_SAFE = re.compile(r"[A-Za-z][-A-Za-z0-9_./]*")
_YAML_WORDS = frozenset(
    [
        "y",
        "Y",
        "yes",
        "Yes",
        "YES",
        "n",
        "N",
        "no",
        "No",
        "NO",
        "true",
        "True",
        "TRUE",
        "false",
        "False",
        "FALSE",
        "on",
        "On",
        "ON",
        "off",
        "Off",
        "OFF",
        "null",
        "Null",
        "NULL",
    ]
)

# An entry to add: ("key", "value") or ("key", [nested entries]).
Entry = tuple[str, Any]


class Edit(NamedTuple):
    offset: int  # where in the text to insert
    text: str


def check_label_value(value: str, what: str) -> None:
    if len(value) > 63 or _LABEL_VALUE.fullmatch(value) is None:
        raise RenderCheckError(
            f"{what} {value!r} is not a valid label value (at most 63 characters: letters, "
            "digits, '-', '_' and '.', starting and ending with a letter or digit); use --name"
        )


@functools.lru_cache(maxsize=4096)
def scalar(value: str) -> str:
    """A label key or value as YAML: plain where that reads back as the same string."""
    if _PLAIN_SAFE.fullmatch(value) and value not in _YAML_WORDS:
        return value
    return json.dumps(value)


class TextEditor:
    """Collects insertions into one document text, positioned by composed YAML nodes.

    Marks' `index` counts characters from the start of the text, as str offsets do.
    """

    def __init__(self, text: str, where: str) -> None:
        self.text = text
        self.where = where
        self.edits: list[Edit] = []

    def line_after(self, index: int) -> int:
        """The offset of the line after the one holding `index` (the end of the text if none)."""
        newline = self.text.find("\n", index)
        return len(self.text) if newline < 0 else newline + 1

    def add(self, mapping: Any, entries: Sequence[Entry]) -> None:
        """Add entries to a mapping node, after its last one-line scalar entry when it has one."""
        if not entries:
            return
        if type(mapping).__name__ != "MappingNode":
            raise RenderCheckError(
                f"{self.where}: cannot add labels to a value that is not a mapping; use --no-labels"
            )
        if mapping.flow_style or not mapping.value:
            start = mapping.start_mark.index
            if self.text[start : start + 1] != "{":
                raise RenderCheckError(
                    f"{self.where}: cannot find where to add labels; use --no-labels"
                )
            text = ", ".join(_flow(e) for e in entries) + (", " if mapping.value else "")
            self.edits.append(Edit(start + 1, text))
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
        offset = self.line_after(after[-1].end_mark.index) if after else line_start
        if offset == len(self.text) and not self.text.endswith("\n"):
            self.edits.append(Edit(offset, "\n"))
        self.edits.append(Edit(offset, _block_text(entries, column)))

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
            if i % 2 == 1:  # inside a marker's text: step back to the text piece before it
                raise RenderCheckError(f"{self.where}: cannot add labels inside TF_CONFIG")
            at = edit.offset - starts[i]
            result[i] = result[i][:at] + edit.text + result[i][at:]
        return result


def _block_text(entries: Sequence[Entry], column: int) -> str:
    """Entries as block-style lines at `column`."""
    lines = []
    for key, value in entries:
        if isinstance(value, (list, tuple)):
            lines.append(f"{' ' * column}{scalar(key)}:\n")
            lines.append(_block_text(value, column + 2))
        else:
            lines.append(_block_line(key, value, column))
    return "".join(lines)


@functools.lru_cache(maxsize=4096)
def _block_line(key: str, value: str, column: int) -> str:
    # The same few label lines recur in every document of a run.
    return f"{' ' * column}{scalar(key)}: {scalar(value)}\n"


def _flow(entry: Entry) -> str:
    key, value = entry
    if isinstance(value, (list, tuple)):
        return f"{scalar(key)}: {{{', '.join(_flow(e) for e in value)}}}"
    return f"{scalar(key)}: {scalar(value)}"


def add_to_metadata(
    editor: TextEditor,
    owner: Any,
    labels: Mapping[str, str],
    namespace: str | None,
    conflict: Callable[[str, str, str], None],
) -> None:
    """Merge labels (and a namespace, if missing) into owner.metadata, creating what is absent."""
    metadata = mapping_get(owner, "metadata")
    if metadata is None:
        entries: list[Entry] = [("labels", list(labels.items()))] if labels else []
        if namespace:
            entries.insert(0, ("namespace", namespace))
        editor.add(owner, [("metadata", entries)] if entries else [])
        return
    entries = []
    if namespace and mapping_get(metadata, "namespace") is None:
        entries.append(("namespace", namespace))
    existing = mapping_get(metadata, "labels")
    if not labels:
        pass
    elif existing is None:
        entries.append(("labels", list(labels.items())))
    else:
        if type(existing).__name__ != "MappingNode":
            raise RenderCheckError(
                f"{editor.where}: metadata.labels is not a mapping; write labels: {{}} or use --no-labels"
            )
        theirs = {k.value: v.value for k, v in existing.value if type(v).__name__ == "ScalarNode"}
        missing = []
        for key, value in labels.items():
            if key not in theirs:
                missing.append((key, value))
            elif theirs[key] != value:
                conflict(key, theirs[key], value)
        editor.add(existing, missing)
    editor.add(metadata, entries)


def label_document(
    editor: TextEditor,
    document: Any,
    kind: str,
    labels: Mapping[str, str],
    namespace: str | None,
    conflict: Callable[[str, str, str], None],
) -> None:
    """Labels on the object, and for a Job on its pod template too."""
    add_to_metadata(editor, document, labels, namespace, conflict)
    if kind == "Job" and labels:
        template = mapping_get(mapping_get(document, "spec"), "template")
        if template is not None:
            add_to_metadata(editor, template, labels, None, conflict)
