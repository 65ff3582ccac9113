"""The compiled template: the legacy `{{.x}}` syntax, where placed values land, each task's text.

Templates use jinja2 with `<< >>` for variables (so Helm and Argo `{{ }}` pass through),
`{% %}` for statements and `<# #>` for comments (so shell's `${#ARRAY[@]}` is no comment),
in the `sandbox` environment. A template of text and bare `<<NAME>>` alone is written out
without jinja, byte for byte as jinja would (bare.py).

A bare `<<NAME>>` of a value a framework places itself becomes a marker in the rendered
text. Each task's text is checked with the markers standing as themselves, and the YAML
scalar a marker stands in settles how the value's JSON is escaped there
(`CompiledTemplate.resolve`), so a large value is built once per run and never parsed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from simpletfjob.errors import TemplateError, number_problem
from simpletfjob.template.bare import bare_template, written_bare
from simpletfjob.template.markers import (
    MARK_CLOSE,
    MARK_OPEN,
    MARKER,
    Placement,
    classify_placement,
    place_parts,
    settle,
)
from simpletfjob.template.sandbox import (
    Bounds,
    RenderLimit,
    check_tags,
    error_line,
    make_environment,
)

if TYPE_CHECKING:
    from simpletfjob.frameworks import RunValues
    from simpletfjob.tasks import Task

T = TypeVar("T")

# A YAML merge key `<<: *anchor` is never a jinja expression: keep it literal.
_MERGE_KEY = re.compile(r"<<(?=[ \t]*:(?:[ \t]|$))", re.MULTILINE)

# Patterns for messages, compiled on first use through re's cache.
# Jinja expressions and statements, in a template line.
_EXPRESSION = r"(<<.*?>>|\{\{\s*\.\w+\s*\}\})"
_STATEMENT = r"\{%|<#|#>"
# A marker in a message, as itself or as repr() shows it.
_SHOWN_MARKER = r"(?:\ue000|\\ue000)(\d+)(?:\ue001|\\ue001)"


def translate_source(
    source: str,
    placed: Sequence[str] = (),
    legacy: Sequence[str] = (),
    blocks: Sequence[str] = (),
    filename: str = "<template>",
) -> tuple[str, list[Placement]]:
    """Rewrite legacy syntax and merge keys, and turn each bare placed value into a marker.
    `legacy` are the names the original tool wrote as `{{.name}}`. `blocks` are placed
    values that are lines of YAML (a framework's env entries): each must stand alone on its
    line, whose indentation the lines take (mode "lines"); elsewhere it is refused."""
    if legacy:
        names = "|".join(map(re.escape, legacy))
        source = re.sub(r"\{\{\s*\.(" + names + r")\s*\}\}", r"<<\1>>", source)
    source = _MERGE_KEY.sub("<< '<<' >>", source)
    lines = source.split("\n")
    placements: list[Placement] = []
    if not placed and not blocks:
        return "\n".join(lines), placements
    every = (*placed, *blocks)
    bare = re.compile(r"<<\s*(" + "|".join(map(re.escape, every)) + r")\s*>>")
    for number, line in enumerate(lines):
        if not any(name in line for name in every):
            continue
        pieces: list[str] = []
        pos = 0
        for match in bare.finditer(line):
            if match[1] in blocks:
                lead = line[: match.start()]
                if lead.strip() or line[match.end() :].strip() or "\t" in lead:
                    raise TemplateError(
                        f"{filename}:{number + 1}: <<{match[1]}>> must stand alone on its line, "
                        "indented as the env entries it becomes (under env:)"
                    )
                placement = Placement("lines", lead, number + 1, f"{lead}- ", name=match[1])
            else:
                guess = classify_placement(lines, number, match.start(), match.end())
                placement = guess._replace(name=match[1])
            marker = f"{MARK_OPEN}{len(placements)}{MARK_CLOSE}"
            placements.append(placement)
            if placement.mode in ("lines", "block", "line"):
                pieces = [marker]  # the marker stands for the whole line, indentation included
                pos = len(line)
                break
            pieces += [line[pos : match.start()], marker]
            pos = match.end()
        if pieces:
            lines[number] = "".join(pieces) + line[pos:]
    return "\n".join(lines), placements


class CompiledTemplate:
    """A template compiled once, rendered per task into text with markers for placed values."""

    def __init__(
        self,
        source: str,
        filename: str,
        known: Sequence[str],
        placed: Sequence[str] = (),
        legacy: Sequence[str] = (),
        blocks: Sequence[str] = (),
    ) -> None:
        for char in (MARK_OPEN, MARK_CLOSE):
            if char in source:
                raise TemplateError(
                    f"{filename}: contains U+{ord(char):04X}, which simpletfjob reserves"
                )
        self.filename = filename
        source = unix_newlines(source)
        text, self.placements = translate_source(source, placed, legacy, blocks, filename)
        self._bounds = Bounds(filename)
        self._text = text
        self._template: Any = None
        self._ast: Any = None  # walked again only to judge a nested --set (`value_paths`)
        try:
            check_tags(text, filename)
        except RenderLimit as e:
            raise TemplateError(_limit_message(e, filename)) from e
        # A template of text and bare `<<name>>` only is rendered without jinja (see `bare`).
        self._bare = bare_template(text, set(known))
        if self._bare is None:
            self._compile()
            # The names the template uses in expressions of its own (a placed value too).
            self.referenced = _check_defined_names(self._ast, filename, set(known))
        else:
            self.referenced = set(self._bare[1::2])
        self._paths: frozenset[tuple[str, ...]] | None = None
        self._index = {p: i for i, p in enumerate(self.placements)}
        self._source = source
        self._line_patterns: list[tuple[int, re.Pattern[str]]] | None = None
        # A header left out of the output is a jinja comment of as many lines.
        header = re.match(r"<#[^#]*?#>\n", self._source)
        self._header_lines = header[0].count("\n") if header else 0

    def _compile(self) -> None:
        env = make_environment()
        filename = self.filename
        try:
            ast = self._bounds.run(lambda: env.parse(self._text, filename=filename), "to compile")
            code = self._bounds.run(
                lambda: env.compile(ast, name=filename, filename=filename), "to compile"
            )
        except RenderLimit as e:
            raise TemplateError(_limit_message(e, filename)) from e
        except RecursionError as e:  # jinja's parser and code generator recurse per level
            raise TemplateError(
                f"{filename}: the template nests too deeply to compile (brackets, operators "
                "or blocks inside one another, thousands deep)"
            ) from e
        except Exception as e:  # jinja2.TemplateSyntaxError, named without importing jinja2 early
            raise _template_error(e, filename) from e
        self._ast = ast
        # The globals as a plain dict, not jinja's ChainMap over the environment's: each
        # render copies them into its context, and a ChainMap is copied key by key in Python.
        globals_ = dict(env.make_globals(None))
        self._template = env.template_class.from_code(env, code, globals_, None)

    def reads(self, path: Sequence[str]) -> bool:
        """Whether the template may read value `path` (`['gpus']`, or `['a', 'b']` for a.b):
        a top-level name it uses at all, or a nested one it reads, reads inside, or reads
        the value around whole (`a | tojson`, `a[key]`, `a.items()`; see `value_paths`)."""
        if not path or path[0] not in self.referenced:
            return False
        wanted = tuple(path)
        return len(wanted) == 1 or any(
            read[: len(wanted)] == wanted or wanted[: len(read)] == read
            for read in self.value_paths()
        )

    def value_paths(self) -> frozenset[tuple[str, ...]]:
        """Every value path the template reads: ('a',) for a whole, ('a', 'b') for `a.b` or
        `a['b']`; a computed step (`a[key]`) ends the path."""
        if self._paths is None:
            read = (
                _value_paths(self._ast) if self._bare is None else [(n,) for n in self.referenced]
            )
            self._paths = frozenset(read)
        return self._paths

    def writes_bare(self, names: Collection[str]) -> bool:
        """Whether the template only writes each of `names` out as it is (see `bare`)."""
        return self._bare is not None or written_bare(self._ast, names)

    def holds(self, text: str) -> bool:
        """Whether the template's own text holds `text`."""
        return text in self._source

    def render(self, context: Mapping[str, Any]) -> str:
        """One task's text; its work is bounded (see `sandbox`)."""
        try:
            return self._bounds.render(lambda: self._render(context))
        except MemoryError:  # within `bounded`: it says so, for the whole task
            raise
        except Exception as e:
            raise _template_error(e, self.filename) from e

    def _render(self, context: Mapping[str, Any]) -> str:
        if self._bare is not None:
            pieces = self._bare
            try:
                return "".join(p if i % 2 == 0 else str(context[p]) for i, p in enumerate(pieces))
            except RenderLimit:
                raise
            except Exception:  # a name not given, a str() that fails: jinja's render says how
                pass
        if self._template is None:
            self._compile()
        self._template.environment.start()
        text: str = self._template.render(context)
        return text

    def hold(self, length: int) -> None:
        """Count a task's text made without a render (a skeleton's) toward the bound on all."""
        try:
            self._bounds.hold(length)
        except RenderLimit as e:
            raise TemplateError(_limit_message(e, self.filename)) from e

    def bounded(self, work: Callable[[], T]) -> T:
        """`work()` (a task's render and checks) within the run's memory cap and CPU time."""
        try:
            return self._bounds.run(work)
        except RenderLimit as e:
            raise TemplateError(_limit_message(e, self.filename)) from e

    def split(self, text: str) -> list[str]:
        """Text and marker numbers, alternating: [text, '0', text, '1', text]."""
        return MARKER.split(text)

    def fill(self, pieces: Sequence[str], values: RunValues, task: Task) -> Iterator[str]:
        yield pieces[0]
        for i in range(1, len(pieces), 2):
            yield from place_parts(self.placements[int(pieces[i])], values, task)
            yield pieces[i + 1]

    def stand_in(self, pieces: Sequence[str]) -> tuple[str, list[int], list[int]]:
        """The text to check, and where each marker's stand-in starts in it and its length. A
        marker, private-use characters, stands as itself: valid inside any YAML scalar."""
        out = [pieces[0]]
        starts = []
        lengths = []
        position = len(pieces[0])
        for i in range(1, len(pieces), 2):
            placement = self.placements[int(pieces[i])]
            text = f"{placement.stand}{MARK_OPEN}{pieces[i]}{MARK_CLOSE}"
            starts.append(position)
            lengths.append(len(text))
            out += [text, pieces[i + 1]]
            position += len(text) + len(pieces[i + 1])
        return "".join(out), starts, lengths

    def resolve(
        self, pieces: Sequence[str], text: str, starts: Sequence[int], documents: Sequence[Any]
    ) -> tuple[list[str], list[tuple[int, str]]]:
        """Settle each marker's placement from the YAML scalar it stands in (`text` is
        stand_in(pieces), `documents` its node trees): the pieces with each marker naming its
        settled placement, and the quotes to insert (offsets in `text`) into plain scalars."""
        resolved = list(pieces)
        inserts: list[tuple[int, str]] = []
        quoted: set[int] = set()
        for i in range(1, len(pieces), 2):
            guess = self.placements[int(pieces[i])]
            if guess.mode == "lines":
                continue  # whole lines of YAML, written as they are
            at = starts[i // 2] + len(guess.stand)
            marker = f"{MARK_OPEN}{pieces[i]}{MARK_CLOSE}"
            placement = settle(guess, text, at, marker, documents, inserts, quoted, self.filename)
            number = self._index.get(placement)
            if number is None:
                number = self._index[placement] = len(self.placements)
                self.placements.append(placement)
            resolved[i] = str(number)
        return resolved, inserts

    def refuse_marker(self, text: str, what: str) -> None:
        """A placed value may not stand in `what`; the error names the template line."""
        match = MARKER.search(text)
        if match is not None:
            placement = self.placements[int(match[1])]
            raise TemplateError(
                f"{self.filename}:{placement.line}: <<{placement.name}>> cannot stand in {what}"
            )

    def template_line(self, rendered: str, near: int) -> int | None:
        """The number of the template line that renders as `rendered`, the nearest to `near`."""
        if self._line_patterns is None:
            self._line_patterns = []
            for number, line in enumerate(self._source.split("\n"), start=1):
                parts = re.split(_EXPRESSION, line.rstrip())
                if re.search(_STATEMENT, line) or not "".join(parts[::2]).strip():
                    continue
                pattern = ".*?".join(re.escape(part) for part in parts[::2])
                self._line_patterns.append((number, re.compile(pattern)))
        rendered = MARKER.sub(self._as_written, rendered).rstrip()
        found = [n for n, p in self._line_patterns if p.fullmatch(rendered)]
        return min(found, key=lambda n: abs(n - near)) if found else None

    def public(self, message: str, text: str = "", *lines: int) -> str:
        """A check's message with each marker shown as the template wrote it, naming the template
        line: the first of `lines` (from 0, in the task's `text`) that one renders as."""
        match = re.search(_SHOWN_MARKER, message)
        if match is None:
            rendered = text.split("\n")
            for line in lines:
                if 0 <= line < len(rendered) and rendered[line].strip():
                    found = self.template_line(rendered[line], line + 1 + self._header_lines)
                    if found is not None:
                        return f"{message} ({self.filename}:{found})"
            return message
        placement = self.placements[int(match[1])]
        shown = re.sub(_SHOWN_MARKER, self._as_written, message)
        return f"{shown} (<<{placement.name}>> at {self.filename}:{placement.line})"

    def _as_written(self, marker: re.Match[str]) -> str:
        """A marker as the template wrote it: `<<NAME>>`."""
        return f"<<{self.placements[int(marker[1])].name}>>"


def unix_newlines(text: str) -> str:
    """The text with its '\\r\\n' and '\\r' line endings as '\\n', as the placement rules and
    the header see lines."""
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


# The jinja filters (False) and tests (True) that ask whether a value is there.
_ASKING = {False: ("default", "d"), True: ("defined", "undefined")}


def _check_defined_names(ast: Any, filename: str, known: set[str]) -> set[str]:
    """Fail on the first name the template uses that no task will define, naming its line. A
    name it asks about (`x is defined`, `x | default(...)`) is left to the render."""
    from jinja2 import meta, nodes

    referenced: set[str] = meta.find_undeclared_variables(ast)
    unknown = referenced - known
    if unknown:  # asked about, they may be left out
        unknown -= {
            node.node.name
            for node in ast.find_all((nodes.Test, nodes.Filter))
            if node.name in _ASKING[type(node) is nodes.Test] and isinstance(node.node, nodes.Name)
        }
    if unknown:
        first = min(
            (n.lineno, n.name)
            for n in ast.find_all(nodes.Name)
            if n.name in unknown and n.ctx == "load"
        )
        raise TemplateError(
            f"{filename}:{first[0]}: {first[1]!r} is undefined; "
            f"give it with --set {first[1]}=VALUE or -f values.yaml, "
            f"or use one of: {', '.join(sorted(known, key=str.lower))}"
        )
    return referenced


def _value_paths(ast: Any) -> Iterator[tuple[str, ...]]:
    """The paths of the values read in a jinja tree (see `CompiledTemplate.value_paths`)."""
    from jinja2 import nodes

    stack = [ast]
    while stack:
        node = stack.pop()
        if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Getattr):
            # A method called on a value (`a.items()`, `a.b.get(k)`) reads it whole.
            stack += [node.node.node, *node.iter_child_nodes(exclude=("node",))]
            continue
        if not isinstance(node, (nodes.Name, nodes.Getattr, nodes.Getitem)):
            stack += node.iter_child_nodes()
            continue
        keys: list[str] = []
        while isinstance(node, (nodes.Getattr, nodes.Getitem)):
            if isinstance(node, nodes.Getattr):
                keys.append(node.attr)
            elif isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, (str, int)):
                keys.append(str(node.arg.value))
            else:  # a key the template computes: anything below this step may be read
                keys.clear()
                stack.append(node.arg)
            node = node.node
        if isinstance(node, nodes.Name):
            if node.ctx == "load":
                yield (node.name, *reversed(keys))
        else:
            stack.append(node)


def _limit_message(e: RenderLimit, filename: str) -> str:
    if e.message.startswith(f"{filename}:"):
        return e.message
    return f"{filename}:{e.lineno}: {e.message}" if e.lineno else f"{filename}: {e.message}"


def _template_error(e: Exception, filename: str) -> TemplateError:
    lineno = getattr(e, "lineno", None)
    if lineno is None:
        lineno = error_line(e, filename)
    where = f"{filename}:{lineno}" if lineno else filename
    number = number_problem(e)
    if number is not None:
        return TemplateError(f"{where}: {number}")
    kind = type(e).__name__
    message = getattr(e, "message", None) or str(e)
    if kind == "UndefinedError":
        name = re.fullmatch(r"'(\w+)' is undefined", message)
        hint = f"; give it with --set {name[1]}=VALUE or -f values.yaml" if name else ""
        return TemplateError(f"{where}: {message}{hint}")
    if kind in ("RenderLimit", "TemplateNotFound"):
        return TemplateError(f"{where}: {message}")
    if kind == "RecursionError":
        return TemplateError(
            f"{where}: the template recurses too deeply "
            "(a macro or a recursive loop that calls itself without end?)"
        )
    if kind in ("TemplateSyntaxError", "TemplateAssertionError"):  # (an unknown filter)
        return TemplateError(f"{where}: template syntax error: {message}")
    first_line = message.splitlines()[0] if message else kind
    return TemplateError(f"{where}: {kind}: {first_line}")
