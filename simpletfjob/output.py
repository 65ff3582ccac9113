"""Output: checking the rendered documents, joining them, and writing them atomically.

Every document is checked before the first byte is written. The check parses
each task's document with TF_CONFIG standing in as a small config of the same
shape; the real TF_CONFIG is written by construction in the same place and
style, so megabytes of cluster JSON are never parsed again.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simpletfjob.errors import OutputError, RenderCheckError

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_LEADING_SEPARATOR = re.compile(r"\A(?:[ \t]*(?:#[^\n]*)?\n)*---[ \t]*(?:#[^\n]*)?\n")
_TRAILING_SEPARATOR = re.compile(r"\n---[ \t]*\n?\Z")


@dataclass(frozen=True)
class DocumentId:
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


def load_documents(text: str, first_number: int, where: str) -> list[Any]:
    """Parse one task's text (one or more documents) with the C loader when there is one."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    documents: list[Any] = []
    try:
        for document in yaml.load_all(text, Loader=loader):
            documents.append(document)
    except yaml.YAMLError as e:
        number = first_number + len(documents)
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
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


def identify(document: Any, number: int, where: str) -> DocumentId:
    """The kind, namespace and name of a rendered document, checking that kubectl can apply it."""
    if document is None:
        raise RenderCheckError(f"document {number} ({where}) is empty")
    if not isinstance(document, Mapping):
        raise RenderCheckError(
            f"document {number} ({where}) is a YAML {type(document).__name__}, not a mapping"
        )
    kind = document.get("kind")
    if not isinstance(kind, str) or not kind:
        raise RenderCheckError(f"document {number} ({where}) has no 'kind'")
    metadata = document.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or not name:
        raise RenderCheckError(f"document {number} ({where}, {kind}) has no metadata.name")
    namespace = metadata.get("namespace") if isinstance(metadata, Mapping) else None
    check_name(kind, name, number, where)
    return DocumentId(kind, str(namespace or ""), name)


def check_name(kind: str, name: str, number: int, where: str) -> None:
    """Job and Service names must be DNS-1123 labels of at most 63 characters.

    A Job's name becomes the value of its pods' job-name label, which is limited
    to 63 characters, and a Service's name becomes a DNS label (which, by the
    rule the API server applies to Services, also starts with a letter).
    """
    if kind not in ("Job", "Service"):
        return
    pattern = _DNS1035_LABEL if kind == "Service" else _DNS1123_LABEL
    rule = "RFC 1035: start with a letter" if kind == "Service" else "RFC 1123"
    if len(name) > 63:
        raise RenderCheckError(
            f"document {number} ({where}): {kind} name {name!r} is {len(name)} characters; "
            "the limit is 63"
        )
    if pattern.fullmatch(name) is None:
        raise RenderCheckError(
            f"document {number} ({where}): {kind} name {name!r} is not a valid DNS label "
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


def count_config_strings(document: Any, config: Mapping[str, Any]) -> int:
    """How many string values in a document are JSON equal to `config`."""
    count = 0
    stack = [document]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and item.lstrip().startswith("{"):
            with contextlib.suppress(ValueError):
                count += json.loads(item) == config
    return count


def join_documents(tasks: Iterable[Iterable[str]]) -> Iterator[str]:
    """The stream: each task's text, separated by '---' lines."""
    for i, chunks in enumerate(tasks):
        if i:
            yield "---\n"
        yield from chunks


def write_stdout(chunks: Iterable[str]) -> None:
    out = sys.stdout
    try:
        for chunk in chunks:
            out.write(chunk)
        out.flush()
    except BrokenPipeError:
        # The reader went away (| head): not our error. Keep Python from complaining at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def write_atomic(path: Path, chunks: Iterable[str]) -> None:
    """Write to a temporary file beside `path` and rename it into place: all or nothing."""
    try:
        _write_atomic(path, chunks)
    except OSError as e:
        raise OutputError(f"cannot write {str(path)!r}: {e.strerror or e}") from e


def _write_atomic(path: Path, chunks: Iterable[str]) -> None:
    if path.is_dir():
        raise OutputError(f"output {str(path)!r} is a directory")
    if not path.parent.is_dir():
        raise OutputError(
            f"cannot write {str(path)!r}: directory {str(path.parent)!r} does not exist"
        )
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, temp = tempfile.mkstemp(prefix=f".{path.name[:200]}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
