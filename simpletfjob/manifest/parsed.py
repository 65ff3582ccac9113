"""A task's object, as YAML reads its text, made from its role's skeleton read once.

apply sends objects, and building each task's object from its parse is most of what apply
spends before its first request at a thousand tasks. A role rendered once as a skeleton
(manifest/skeleton.py) is parsed once too, with each task value and placed value standing
as a token, and the strings that hold tokens noted. A task's object is a copy of it with
those strings made again from the task's values:

- a task's value (its node, port, index...) is written as `[A-Za-z0-9][A-Za-z0-9._-]*`,
  which no scalar style escapes or folds: it reads as itself where its token stood; a plain
  scalar is then read as YAML resolves its whole text (`2222` a number, `true` a boolean);
  the index label, written as `scalar()` writes it, reads as the index;
- a placed value written on one line (quoted, a plain scalar quoted for it, raw inside a
  plain or block scalar, or in a comment) reads as the value itself, its escaping for the
  scalar's quotes undone by reading it; only a value of printable ASCII without blanks is
  taken so (no line break, tab, '#' first or ':' last that a plain scalar would read
  otherwise);
- a placed value written as indented lines under a block scalar that holds only them
  (`key: >` or `|`) reads as YAML reads a block scalar's lines, from the indentation its
  token's lines show: without it, each line break kept (`|`, or next to a line that starts
  with a blank) or, in a folded scalar, read as a space. Its token stands as two lines, so
  that how the scalar joins them shows which. Every line must be printable ASCII and not
  blank, the first starting with the indentation then a non-blank (so that the indentation
  is found the same way). The part of the value every task shares is read once.

Anything else (a token in a key, tag or anchor, a merge key or a key given twice, a task
of several documents or not from a skeleton...) is `(False, None)`: the caller parses the
text. tests/unit/test_parsed.py holds this to the parse of the text, object for object.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import threading
from collections.abc import Sequence
from typing import Any, NamedTuple

from simpletfjob.frameworks import RunValues
from simpletfjob.manifest.documents import resolver
from simpletfjob.manifest.skeleton import Skeleton
from simpletfjob.tasks import Task
from simpletfjob.template.compiled import CompiledTemplate
from simpletfjob.template.markers import Placement

# What one line of a placed value may hold, taken as it reads: printable ASCII.
_LINE = re.compile(r"[\x20-\x7e]*")
# A value written on one line: printable ASCII without blanks.
_WORD = re.compile(r"[\x21-\x7e]+")
_STRING = "tag:yaml.org,2002:str"


class _Block:
    """What a block scalar's indented lines read as, from a given indentation, in either style."""

    def __init__(self, text: str, indent: str) -> None:
        self.text = text
        self.lines = text.split("\n")[:-1]  # the text ends with a line break
        self.sound = (
            text.endswith("\n")
            and all(line.startswith(indent) and line.strip() for line in self.lines)
            and all(_LINE.fullmatch(line) for line in self.lines)
        )
        self._read: dict[tuple[int, bool], str] = {}

    def read(self, cut: int, folded: bool) -> str:
        """The lines without their first `cut` columns, joined as a folded or literal scalar
        joins them (no line break after the last)."""
        key = (cut, folded)
        found = self._read.get(key)
        if found is None:
            contents = [line[cut:] for line in self.lines]
            if not folded:
                found = "\n".join(contents)
            else:
                out = [contents[0]] if contents else []
                for before, after in itertools.pairwise(contents):
                    out += [_folded(before, after), after]
                found = "".join(out)
            self._read[key] = found
        return found


def _folded(before: str, after: str) -> str:
    """How a folded block scalar reads the line break between two lines that are not blank."""
    return "\n" if before[:1] in (" ", "\t") or after[:1] in (" ", "\t") else " "


class _Slot(NamedTuple):
    """A string of the skeleton's object that holds tokens, and how a task's is made."""

    path: tuple[Any, ...]  # the keys and indexes from the document to its container
    key: Any  # its key or index there
    parts: list[Any]  # [text, (kind, number), text, ...]: 'v' a variable, 'p' a placed value
    plain: bool  # a plain scalar: read as YAML resolves its text (a number, true...)
    block: int = -1  # a placed value whose lines are the whole scalar (then parts is unused)
    cut: int = 0  # ... the columns of indentation its lines lose
    folded: bool = False  # ... whether a line break between two lines not blank reads as a space
    after: str = ""  # ... the line breaks that chomping keeps after them


class _Read(NamedTuple):
    """A role's skeleton read once: its object, where the tokens are, and its placed values."""

    obj: Any
    slots: list[_Slot]
    placed: list[Placement]


class Reader:
    """Tasks' objects from their roles' skeletons, each read once; a block value's shared
    part read once too (both kept by identity)."""

    def __init__(self) -> None:
        self._roles: dict[tuple[int, type[Any]], tuple[Skeleton, _Read | None]] = {}
        self._blocks: dict[int, tuple[str, _Block]] = {}
        self._lock = threading.Lock()

    def document(
        self,
        skeleton: Skeleton,
        written: Sequence[str],
        compiled: CompiledTemplate,
        values: RunValues,
        task: Task,
        loader: type[Any],
    ) -> tuple[bool, Any]:
        """(True, the object `yamlload.load` reads from the text of a task that its role's
        skeleton filled in with `written`), or (False, None) where that is not sure."""
        with self._lock:
            key = (id(skeleton), loader)  # a loader of its own reads scalars its own way
            kept = self._roles.get(key)
            if kept is None or kept[0] is not skeleton:
                if len(self._roles) > 16:
                    self._roles.clear()
                kept = self._roles[key] = (skeleton, _tokenized(skeleton, compiled, loader))
        read = kept[1]
        if read is None:
            return False, None
        readings: list[Any] = []
        for placement in read.placed:
            if placement.mode == "block":
                shared, own = values.block_parts(placement.name, task, placement.indent)
                indent = placement.indent
                first = self._block(shared, indent) if shared else _Block(own, indent)
                tail = _Block(own, indent) if shared else None
                if not first.sound or (tail is not None and not tail.sound):
                    return False, None
                if not first.lines or first.lines[0][len(indent)] in " \t":
                    return False, None  # its indentation would be found otherwise
                readings.append((first, tail))
            else:
                shared, own = values.compact_parts(placement.name, task)
                value = shared + own
                if not _WORD.fullmatch(value) or value[0] == "#" or value[-1] == ":":
                    return False, None
                readings.append(value)
        index = written[-1]  # the index label, written as scalar() writes it: plain or JSON
        variables = [*written[:-1], json.loads(index) if index[:1] == '"' else index]
        obj = _copy(read.obj)
        for slot in read.slots:
            if slot.block >= 0:
                first, tail = readings[slot.block]
                value = first.read(slot.cut, slot.folded)
                if tail is not None and tail.lines:
                    between = "\n"
                    if slot.folded:
                        between = _folded(first.lines[-1][slot.cut :], tail.lines[0][slot.cut :])
                    value += between + tail.read(slot.cut, slot.folded)
                value += slot.after
            else:
                parts = slot.parts
                out = [parts[0]]
                for i in range(1, len(parts), 2):
                    kind, number = parts[i]
                    out += [variables[number] if kind == "v" else readings[number], parts[i + 1]]
                value = "".join(out)
            made: Any = value
            if slot.plain:
                made = _resolved(value, loader)
                if made is _UNSURE:
                    return False, None
            container = obj
            for step in slot.path:
                container = container[step]
            container[slot.key] = made
        return True, obj

    def _block(self, text: str, indent: str) -> _Block:
        with self._lock:
            kept = self._blocks.get(id(text))
            if kept is None or kept[0] is not text:
                if len(self._blocks) > 4:
                    self._blocks.clear()
                kept = self._blocks[id(text)] = (text, _Block(text, indent))
            return kept[1]


_UNSURE = object()

# The deepest nesting read from a skeleton: each task's copy (_copy) recurses once a level.
DEEPEST = 100


def _resolved(value: str, loader: type[Any]) -> Any:
    """A plain scalar's text as the loader reads it: a string, or what its resolved tag makes."""
    import yaml

    tag = resolver().resolve(yaml.ScalarNode, value, (True, False))
    if tag == _STRING:
        return value
    try:
        return loader("").construct_object(yaml.ScalarNode(tag, value))
    except Exception:  # a constructor's own check: leave it to the parse, which says it
        return _UNSURE


def _copy(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {k: _copy(v) for k, v in value.items()}
    if kind is list:
        return [_copy(v) for v in value]
    return value


def _tokenized(skeleton: Skeleton, compiled: CompiledTemplate, loader: type[Any]) -> _Read | None:
    """The skeleton's object with tokens where values go, and where they are; None where this
    module cannot be sure of a task's object (see its docstring)."""
    import yaml

    from simpletfjob.yamlload import load_node

    nonce = "zr" + os.urandom(5).hex()
    placed: list[Placement] = []
    out = []
    for piece in skeleton.pieces:
        if isinstance(piece, list):  # text, as [text, token number, text, ...]
            if any(nonce in part for part in piece[::2]):
                return None  # as good as never
            out.append(piece[0])
            for j in range(1, len(piece), 2):
                out += [f"{nonce}v{piece[j]}q", piece[j + 1]]
            continue
        placement = compiled.placements[int(piece)]
        number = len(placed)
        placed.append(placement)
        if placement.mode == "block":
            indent = placement.indent
            out.append(f"{indent}{nonce}b{number}xaq\n{indent}{nonce}b{number}xbq\n")
        elif placement.mode == "lines":
            return None  # YAML lines of the framework's: structure, not a value
        else:
            out.append(f"{placement.indent}{placement.open}{nonce}p{number}q{placement.close}")
    text = "".join(out)
    try:
        node, obj = load_node(text, loader)
    except (yaml.YAMLError, RecursionError):
        return None
    tokens = re.compile(f"{nonce}(?:v(\\d\\d)|p(\\d+)|b(\\d+)x([ab]))q")
    slots: list[_Slot] = []
    seen: set[int] = set()
    index_token = len(skeleton.variables)
    stack: list[tuple[Any, Any, tuple[Any, ...]]] = [(node, obj, ())]
    while stack:
        current, value, path = stack.pop()
        if len(path) > DEEPEST:
            return None  # copied by recursion for each task: left to the parse
        if isinstance(current, yaml.MappingNode):
            if type(value) is not dict or len(value) != len(current.value):
                return None  # a merge key, or a key given twice
            pairs = zip(current.value, value.items(), strict=True)
            children = [
                (v, item, k)
                for (knode, v), (k, item) in pairs
                if isinstance(knode, yaml.ScalarNode) and nonce not in knode.value
            ]
            if len(children) != len(current.value):
                return None  # a key that is not a scalar, or holds a token
        elif isinstance(current, yaml.SequenceNode):
            if type(value) is not list or len(value) != len(current.value):
                return None
            children = [
                (v, item, i) for i, (v, item) in enumerate(zip(current.value, value, strict=True))
            ]
        else:
            return None  # a document that is not a mapping: the parse says what it is
        for child, item, key in children:
            if not isinstance(child, yaml.ScalarNode):
                stack.append((child, item, (*path, key)))
                continue
            if nonce not in child.value:
                continue
            if type(item) is not str or text[child.start_mark.index] in "!&":
                return None  # a tag or an anchor: not a string, or not as written
            plain = not child.style  # None from PyYAML, "" from libyaml
            slot = _slot(tokens, item, (path, key), plain, index_token, seen)
            if slot is None:
                return None
            if slot.block >= 0:  # the columns its lines lose: their indentation less the lead's
                slot = slot._replace(cut=len(placed[slot.block].indent) + slot.cut)
            slots.append(slot)
    missing = [n for n in range(len(placed)) if n not in seen]
    if any(placed[n].mode != "raw" for n in missing):  # a raw value may be in a comment
        return None
    return _Read(obj, slots, placed)


def _slot(
    tokens: re.Pattern[str],
    value: str,
    where: tuple[tuple[Any, ...], Any],
    plain: bool,
    index_token: int,
    seen: set[int],
) -> _Slot | None:
    """How a task's string is made from the skeleton's `value`; None if it cannot be."""
    path, key = where
    found = list(tokens.finditer(value))
    blocks = [m for m in found if m[3] is not None]
    if blocks:
        number = int(blocks[0][3])
        if number in seen or len(found) != 2 or len(blocks) != 2 or plain:
            return None
        first, second = blocks
        lead, join = value[: first.start()], value[first.end() : first.end() + 1]
        after = value[second.end() :]
        if (first[4], second[4], int(second[3])) != ("a", "b", number) or lead.strip(" "):
            return None
        if join not in (" ", "\n") or value[first.end() + 1 : second.start()] != lead:
            return None
        if after.strip("\n"):
            return None
        seen.add(number)
        return _Slot(path, key, [], False, number, -len(lead), join == " ", after)
    parts: list[Any] = [value[: found[0].start()]] if found else [value]
    for i, m in enumerate(found):
        if m[1] is not None:
            number = int(m[1])
            if number == index_token:
                if value != m[0]:
                    return None  # the index label's value is written as a whole scalar
                return _Slot(path, key, ["", ("v", number), ""], False)
            parts.append(("v", number))
        else:
            number = int(m[2])
            if number in seen:
                return None
            seen.add(number)
            parts.append(("p", number))
        end = found[i + 1].start() if i + 1 < len(found) else len(value)
        parts.append(value[m.end() : end])
    return _Slot(path, key, parts, plain)


READER = Reader()  # for every run of the process: each skeleton's object is kept by identity
