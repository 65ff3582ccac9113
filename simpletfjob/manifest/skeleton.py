"""A role's skeleton: its text rendered and checked once, each task's values then written in.

Where the template only writes a role's differing values out as they are (template/bare.py),
a role of many tasks is rendered once with each such value standing as a token (a word
the template and the values do not hold), checked and labelled as any task's text is. Each
task's text is the skeleton's with its values written in: byte for byte its own render's
(tests/unit/test_skeleton.py), when also:

- every token stands inside a scalar value (not a key, an anchor, a tag or a
  comment), and not in one that holds a placed value (its escaping is settled from
  that scalar's text); the skeleton has no anchors or aliases;
- the labels and annotations added hold no token but those of the index label and of
  each document's own name; the template sets none of them itself (no conflict);
- each of the task's values is a string or a whole number written as
  `[A-Za-z0-9][A-Za-z0-9._-]*` (at most 253 characters): in any scalar, quoted, plain
  or block, it reads as part of the same scalar, so the documents keep their shape;
- each document's name, filled in, is a valid name (`check_name`) that YAML reads
  as a string written plain, as the token was; kinds and namespaces hold no token;
- the task is addressed by its node's name (no `--address`, whose check reads the
  task's node names).

Otherwise that task, or its role, is rendered task by task, with the same checks and
messages; so is a role of fewer than MIN_TASKS tasks, where the skeleton would not pay.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from simpletfjob.manifest.documents import (
    DocumentId,
    check_name,
    compose_documents,
    node_events,
    normalize_task_text,
)
from simpletfjob.manifest.textedit import reads_plain, scalar
from simpletfjob.tasks import Task
from simpletfjob.template.compiled import CompiledTemplate
from simpletfjob.template.markers import MARK_OPEN

MIN_TASKS = 4
# A value written where a token stood: part of any scalar, as the token was.
_SAFE_VALUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")

# render(task, context, index label's token) -> the task's pieces, its ids, any conflict.
RenderSkeleton = Callable[[Task, Mapping[str, Any], str], tuple[list[str], list[DocumentId], bool]]


class Skeleton:
    """One role's checked text, split at its tokens, and its documents' ids likewise."""

    def __init__(
        self,
        variables: Sequence[str],
        token: re.Pattern[str],
        pieces: Sequence[str],
        ids: Sequence[DocumentId],
    ) -> None:
        self.variables = variables
        self.token = token
        # Each text piece as [text, token number, text, ...]; markers' pieces as they are.
        self.pieces: list[list[str] | str] = [
            token.split(p) if i % 2 == 0 else p for i, p in enumerate(pieces)
        ]
        self.ids = [(i, token.split(i.name)) for i in ids]

    def fill(
        self, task: Task, context: Mapping[str, Any]
    ) -> tuple[list[str], list[DocumentId], list[str]] | None:
        """The task's pieces and ids, and the text written for each token (the index label's
        last); None where its values may not simply be written in."""
        written = []
        for name in self.variables:
            value = context[name]
            kind = type(value)
            text = value if kind is str else str(value) if kind is int else None
            if text is None or _SAFE_VALUE.fullmatch(text) is None:
                return None
            written.append(text)
        written.append(scalar(str(task.index)))  # the index label, as the labeller writes it
        ids = []
        for doc_id, parts in self.ids:
            if len(parts) > 1:
                name = _filled(parts, written)
                if not reads_plain(name) or not _valid_name(doc_id.kind, name):
                    return None
                doc_id = doc_id._replace(name=name)
            ids.append(doc_id)
        pieces = [_filled(p, written) if type(p) is list else p for p in self.pieces]
        return pieces, ids, written  # type: ignore[return-value]


def _filled(parts: Sequence[str], written: Sequence[str]) -> str:
    if len(parts) == 1:
        return parts[0]
    out = [parts[0]]
    for i in range(1, len(parts), 2):
        out += [written[int(parts[i])], parts[i + 1]]
    return "".join(out)


def _valid_name(kind: str, name: str) -> bool:
    from simpletfjob.errors import RenderCheckError

    try:
        check_name(kind, name, None, "")
    except RenderCheckError:
        return False
    return True


class Skeletons:
    """Each role's skeleton, made when its first task comes; a role without one is None."""

    def __init__(
        self,
        compiled: CompiledTemplate,
        tasks: Sequence[Task],
        context_of: Callable[[Task], Mapping[str, Any]],
        given: Mapping[str, Any],
        render: RenderSkeleton,
        annotates: bool,
    ) -> None:
        self.compiled = compiled
        self.given = given
        self.render = render
        self.annotates = annotates  # each document gets its own name as an annotation
        self.context_of = context_of  # a task's variables (render.task_context)
        self.roles: dict[str, list[Task]] = {}
        for task in tasks:
            self.roles.setdefault(task.role, []).append(task)
        self.made: dict[str, Skeleton | None] = {}

    def fill(
        self, task: Task, context: Mapping[str, Any]
    ) -> tuple[Skeleton, tuple[list[str], list[DocumentId], list[str]]] | None:
        """The role's skeleton, and the task's pieces, ids and written values from it (as
        Skeleton.fill); None: render it on its own."""
        if task.role not in self.made:
            self.made[task.role] = self._make(self.roles[task.role])
        skeleton = self.made[task.role]
        filled = None if skeleton is None else skeleton.fill(task, context)
        return None if filled is None or skeleton is None else (skeleton, filled)

    def _make(self, members: Sequence[Task]) -> Skeleton | None:
        if len(members) < MIN_TASKS or any(t.host != t.node for t in members):
            return None
        first_task = members[0]
        first = self.context_of(first_task)
        # A value the template never names cannot change its text. Each task's variables
        # are made and dropped in turn: only which of them differ is kept.
        alike = {n for n in first if n in self.compiled.referenced}
        for task in members[1:]:
            context = self.context_of(task)
            alike -= {n for n in alike if type(context[n]) is not type(first[n])}
            alike -= {n for n in alike if context[n] != first[n]}
        variables = [n for n in first if n in self.compiled.referenced and n not in alike]
        if not self.compiled.writes_bare(variables):
            return None
        nonce = "z" + os.urandom(4).hex()
        constants = [v for k, v in first.items() if k not in variables]
        if self.compiled.holds(nonce) or nonce in repr([self.given, constants]):
            return None  # as good as never: 2**32 to one
        tokens = [f"{nonce}{n:02d}q" for n in range(len(variables) + 1)]
        context = {**self.given, **first, **dict(zip(variables, tokens, strict=False))}
        try:
            return self.compiled.bounded(
                lambda: self._checked(first_task, context, variables, tokens, nonce)
            )
        except Exception:  # the render or a check fails: each task's own says how
            return None

    def _checked(
        self,
        task: Task,
        context: Mapping[str, Any],
        variables: Sequence[str],
        tokens: Sequence[str],
        nonce: str,
    ) -> Skeleton | None:
        compiled = self.compiled
        token = re.compile(f"{nonce}(\\d\\d)q")
        text = normalize_task_text(compiled.render({**self.given, **context}))
        checked, _, _ = compiled.stand_in(compiled.split(text))
        found = [m.start() for m in token.finditer(checked)]
        if found:
            documents = compose_documents(checked, 1, "skeleton", compiled.filename)
            if not _inside_values(documents, checked, found, len(tokens[0])):
                return None
        if any(e.anchor is not None or e.alias for e in node_events(checked)):
            return None
        pieces, ids, conflicts = self.render(task, context, tokens[-1])
        if conflicts or any(token.search(i.kind) or token.search(i.namespace) for i in ids):
            return None
        if any(token.search(i.name) and not reads_plain(i.name) for i in ids):
            return None
        # The labeller copies nothing that holds a token: the only ones it adds are the
        # index label's and those of each document's name, as an annotation.
        named = sum(len(token.findall(i.name)) for i in ids) if self.annotates else 0
        before = len(found)
        index = f"{len(tokens) - 1:02d}"
        after = sum(1 for text in pieces[::2] for m in token.finditer(text) if m[1] != index)
        if after != before + named:
            return None
        return Skeleton(variables, token, pieces, ids)


def _inside_values(documents: Sequence[Any], text: str, found: Sequence[int], length: int) -> bool:
    """Whether each token (at `found`) lies inside a scalar value that holds no marker."""
    spans = []
    stack = list(documents)
    while stack:
        node = stack.pop()
        if node.id == "scalar":
            spans.append((node.start_mark.index, node.end_mark.index))
        elif node.id == "mapping":
            stack += [v for _, v in node.value]  # keys are not values
        else:
            stack += node.value
    spans.sort()
    starts = [s for s, _ in spans]
    for at in found:
        i = bisect.bisect_right(starts, at) - 1
        if i < 0:
            return False
        start, end = spans[i]
        if not at + length <= end or MARK_OPEN in text[start:end]:
            return False
    return True
