"""Render: the legacy `{{.x}}` syntax, where TF_CONFIG lands, and per-task rendering.

Templates use jinja2 with `<< >>` for variables (so Helm and Argo `{{ }}` pass
through untouched), `{% %}` for statements and `<# #>` for comments (so shell
text such as `${#ARRAY[@]}` is not taken for a comment). The environment
(`sandbox`) is sandboxed, strict and bounded: an undefined name is an error
naming it and its line, and a runaway loop or allocation stops in one line.

A bare `<<TF_CONFIG>>` becomes a marker in the rendered text. Each task's text
is checked with the markers standing as themselves, and the YAML scalar a marker
stands in (quoted, plain or block; in flow or block context) settles how the
JSON is escaped there (see `CompiledTemplate.resolve`), so that every document
is valid YAML and the JSON reads back with `json.loads` as the task's TF_CONFIG.
The template is compiled once and the markers are filled in at the end, so the
large cluster JSON is built once and never parsed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from simpletfjob.errors import TemplateError
from simpletfjob.sandbox import Bounds, RenderLimit, check_tags, make_environment

if TYPE_CHECKING:
    from simpletfjob.roles import ClusterSpec, Task

T = TypeVar("T")

# The variables every task gets; --set values may not reuse these names.
BUILTIN_VARIABLES = (
    "type",
    "index",
    "host",
    "node",
    "port",
    "TF_CONFIG",
    "ps_hosts",
    "worker_hosts",
    "chief_hosts",
    "num_tasks",
)

# The original tool's Go-template variables, rendered as the new syntax.
_LEGACY = re.compile(r"\{\{\s*\.(type|index|host|TF_CONFIG)\s*\}\}")
# A YAML merge key `<<: *anchor` is never a jinja expression: keep it literal.
_MERGE_KEY = re.compile(r"<<(?=[ \t]*:(?:[ \t]|$))", re.MULTILINE)
_TF_CONFIG = re.compile(r"<<\s*TF_CONFIG\s*>>")
_BLOCK_HEADER = re.compile(
    r"^(?P<lead>[ \t]*(?:-[ \t]+)*)(?:(?P<key>[^#\s][^#]*?)[ \t]*:[ \t]+)?"
    r"(?P<style>[|>])(?P<flags>[-+0-9]*)[ \t]*(?:#.*)?$"
)
_BARE_KEY = re.compile(r"^(?P<lead>[ \t]*(?:-[ \t]+)*)[^#\s][^#]*?[ \t]*:[ \t]*(?:#.*)?$")
_STATEMENT_LINE = re.compile(r"^[ \t]*(\{%.*%\}|<#.*#>)[ \t]*$")

# Private-use characters frame the markers; a template or value may not contain them.
_MARK_OPEN, _MARK_CLOSE = "\ue000", "\ue001"
RESERVED_CHARACTERS = (_MARK_OPEN, _MARK_CLOSE)
_MARKER = re.compile(f"{_MARK_OPEN}(\\d+){_MARK_CLOSE}")
# Patterns for rare paths (messages, comments) are compiled on first use, through re's
# cache, so that the cold start does not pay for them.
# Jinja expressions and statements, in a template line.
_EXPRESSION = r"(<<.*?>>|\{\{\s*\.\w+\s*\}\})"
_STATEMENT = r"\{%|<#|#>"
# A marker in a message, as itself or as repr() shows it.
_SHOWN_MARKER = r"(?:\ue000|\\ue000)(\d+)(?:\ue001|\\ue001)"
# A comment starts before this point of the line: '#' at its start or after a space.
_COMMENT_BEFORE = r"(?:^|[ \t])#"
# A node's anchor and tag, before its content.
_PROPERTIES = re.compile(r"(?:[&!][^ \t\n]*[ \t\n]+)*")
_STRING_TAGS = ("tag:yaml.org,2002:str", "!")


def _scalar_at(documents: Sequence[Any], index: int) -> tuple[Any, bool, bool] | None:
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
        inner = None
        if node.id == "mapping":
            for key, value in node.value:
                if key.start_mark.index <= index < key.end_mark.index:
                    inner, is_key = key, True
                    break
                if value.start_mark.index <= index < value.end_mark.index:
                    inner, is_key = value, False
                    break
        else:
            for item in node.value:
                if item.start_mark.index <= index < item.end_mark.index:
                    inner, is_key = item, False
                    break
        in_flow = bool(node.flow_style)
        node = inner
    return None


class Placement(NamedTuple):
    """Where one bare <<TF_CONFIG>> stands, and so how its text is written.

    The template's lines give a first guess (`classify_placement`); each task's
    rendered YAML then settles it (`CompiledTemplate.resolve`). `mode` is "block"
    for the original tool's indented JSON lines under `key: >` or `key: |`, and
    "line" for a marker alone on a line (both stand for the whole line); any
    other mode writes compact JSON, escaped for `quote`, between `open` and
    `close`. Only the guess's layout (whole line or not, indentation) is kept
    by the settling; the rest is what `fill` writes for a marker never settled.
    """

    mode: str
    indent: str
    line: int
    stand: str = ""  # where the marker stands for its whole line: that line's indentation
    quote: str = ""  # "'" or '"': the JSON is inside a scalar quoted so, and escaped for it
    open: str = ""
    close: str = ""


def classify_placement(lines: Sequence[str], number: int, start: int, end: int) -> Placement:
    """A first guess at how the <<TF_CONFIG>> at lines[number][start:end] is written."""
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


def place_parts(placement: Placement, spec: ClusterSpec, task: Task) -> tuple[str, ...]:
    """The text that stands where the placement's marker is, in parts.

    The large cluster part is one shared string for every task, never copied.
    """
    if placement.mode == "block":
        return spec.pretty_parts(task, placement.indent)
    prefix, suffix = spec.compact_parts(task)
    if placement.quote:
        prefix, suffix = _escape(placement.quote, prefix), _escape(placement.quote, suffix)
    lead = placement.indent + placement.open
    if placement.close:
        suffix += placement.close
    return (lead, prefix, suffix) if lead else (prefix, suffix)


def translate_source(source: str) -> tuple[str, list[Placement]]:
    """Rewrite legacy syntax and merge keys, and turn each bare <<TF_CONFIG>> into a marker."""
    source = _LEGACY.sub(r"<<\1>>", source)
    source = _MERGE_KEY.sub("<< '<<' >>", source)
    lines = source.split("\n")
    placements: list[Placement] = []
    for number, line in enumerate(lines):
        if "TF_CONFIG" not in line:
            continue
        pieces: list[str] = []
        pos = 0
        matched = False
        for match in _TF_CONFIG.finditer(line):
            matched = True
            placement = classify_placement(lines, number, match.start(), match.end())
            marker = f"{_MARK_OPEN}{len(placements)}{_MARK_CLOSE}"
            placements.append(placement)
            if placement.mode in ("block", "line"):
                pieces = [marker]  # the marker stands for the whole line, indentation included
                pos = len(line)
                break
            pieces += [line[pos : match.start()], marker]
            pos = match.end()
        if matched:
            lines[number] = "".join(pieces) + line[pos:]
    return "\n".join(lines), placements


class CompiledTemplate:
    """A template compiled once, rendered per task into text with TF_CONFIG markers."""

    def __init__(self, source: str, filename: str, known: Sequence[str]) -> None:
        for char in (_MARK_OPEN, _MARK_CLOSE):
            if char in source:
                raise TemplateError(
                    f"{filename}: contains U+{ord(char):04X}, which simpletfjob reserves"
                )
        self.filename = filename
        source = unix_newlines(source)
        text, self.placements = translate_source(source)
        env = make_environment()
        self._environment = env
        self._bounds = Bounds(filename)
        try:
            check_tags(text, filename)
            ast = self._bounds.run(lambda: env.parse(text, filename=filename), "to compile")
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
        self.referenced = _check_names(ast, filename, set(known))
        self.uses_tf_config = "TF_CONFIG" in self.referenced
        self._template = env.template_class.from_code(env, code, env.make_globals(None), None)
        self._index = {p: i for i, p in enumerate(self.placements)}
        self._source = source
        self._line_patterns: list[tuple[int, re.Pattern[str]]] | None = None
        # A header left out of the output is a jinja comment of as many lines.
        header = re.match(r"<#[^#]*?#>\n", self._source)
        self._header_lines = header[0].count("\n") if header else 0

    def render(self, context: Mapping[str, Any]) -> str:
        """One task's text; its work is bounded (see `sandbox`)."""
        try:
            return self._bounds.render(self._environment, lambda: self._template.render(context))
        except MemoryError:  # within `bounded`: it says so, for the whole task
            raise
        except Exception as e:
            raise _template_error(e, self.filename) from e

    def bounded(self, work: Callable[[], T]) -> T:
        """`work()` (a task's render and checks) within the run's memory cap and CPU time."""
        try:
            return self._bounds.run(work)
        except RenderLimit as e:
            raise TemplateError(_limit_message(e, self.filename)) from e

    def split(self, text: str) -> list[str]:
        """Text and marker numbers, alternating: [text, '0', text, '1', text]."""
        return _MARKER.split(text)

    def fill(self, pieces: Sequence[str], spec: ClusterSpec, task: Task) -> Iterator[str]:
        yield pieces[0]
        for i in range(1, len(pieces), 2):
            yield from place_parts(self.placements[int(pieces[i])], spec, task)
            yield pieces[i + 1]

    def stand_in(self, pieces: Sequence[str]) -> tuple[str, list[int], list[int]]:
        """The text to check, and where each marker's stand-in starts in it and its length.

        A marker stands as itself (indented, where it stands for a whole line): a
        word of private-use characters is valid inside any YAML scalar, quoted or
        plain, flow or block, so the check sees the template's own structure.
        """
        out = [pieces[0]]
        starts = []
        lengths = []
        position = len(pieces[0])
        for i in range(1, len(pieces), 2):
            placement = self.placements[int(pieces[i])]
            text = f"{placement.stand}{_MARK_OPEN}{pieces[i]}{_MARK_CLOSE}"
            starts.append(position)
            lengths.append(len(text))
            out += [text, pieces[i + 1]]
            position += len(text) + len(pieces[i + 1])
        return "".join(out), starts, lengths

    def resolve(
        self, pieces: Sequence[str], text: str, starts: Sequence[int], documents: Sequence[Any]
    ) -> tuple[list[str], list[tuple[int, str]]]:
        """Settle each marker's placement from the YAML scalar it stands in.

        `text` is stand_in(pieces) and `documents` its composed node trees. Returns
        the pieces with each marker naming its settled placement, and the quotes to
        insert into the text (offsets in `text`) where a plain scalar must be quoted.
        """
        resolved = list(pieces)
        inserts: list[tuple[int, str]] = []
        quoted: set[int] = set()
        for i in range(1, len(pieces), 2):
            guess = self.placements[int(pieces[i])]
            at = starts[i // 2] + len(guess.stand)
            marker = f"{_MARK_OPEN}{pieces[i]}{_MARK_CLOSE}"
            placement = self._settle(guess, text, at, marker, documents, inserts, quoted)
            number = self._index.get(placement)
            if number is None:
                number = self._index[placement] = len(self.placements)
                self.placements.append(placement)
            resolved[i] = str(number)
        return resolved, inserts

    def _settle(
        self,
        guess: Placement,
        text: str,
        at: int,
        marker: str,
        documents: Sequence[Any],
        inserts: list[tuple[int, str]],
        quoted: set[int],
    ) -> Placement:
        indent = guess.stand
        found = _scalar_at(documents, at)
        if found is None:
            line_start = text.rfind("\n", 0, at) + 1
            if re.search(_COMMENT_BEFORE, text[line_start:at]):
                return Placement("raw", indent, guess.line)
            raise TemplateError(
                f"{self.filename}:{guess.line}: <<TF_CONFIG>> must stand in a value "
                "(a quoted, plain or block scalar) or a comment"
            )
        node, in_flow, is_key = found
        if is_key:
            raise TemplateError(
                f"{self.filename}:{guess.line}: <<TF_CONFIG>> stands in a mapping key; "
                "it can only be (part of) a value"
            )
        if type(node.tag) is str and node.tag not in _STRING_TAGS:
            raise TemplateError(
                f"{self.filename}:{guess.line}: <<TF_CONFIG>> stands in a value tagged "
                f"{node.tag}; TF_CONFIG is a string"
            )
        style = node.style
        if style in ("|", ">"):
            if guess.mode == "block" and node.value.rstrip("\n") == marker:
                return guess
            return Placement("raw", indent, guess.line)
        if style in ("'", '"'):
            return Placement("quoted", indent, guess.line, quote=style)
        # A plain scalar: compact JSON has no spaces, so no ': ' or ' #' that would end it,
        # but it starts with '{' and holds ',[]{}', which flow context reads as structure.
        start = node.start_mark.index
        properties = _PROPERTIES.match(text, start)
        if properties is not None:
            start = properties.end()
        end = node.end_mark.index
        if not in_flow and start != at and id(node) not in quoted:
            return Placement("raw", indent, guess.line)
        if id(node) not in quoted:
            # Quote the whole scalar once; a marker at its start or end writes that quote itself.
            # A later marker in a scalar quoted so (`<<TF_CONFIG>><<TF_CONFIG>>`) is quoted
            # with it, not written raw, or the closing quote would be lost.
            quoted.add(id(node))
            if text[start] != _MARK_OPEN:
                inserts.append((start, "'"))
            inserts += [(j, "'") for j in range(start, end) if text[j] == "'"]
            if text[end - 1] != _MARK_CLOSE:
                inserts.append((end, "'"))
        return Placement(
            "quoted",
            indent,
            guess.line,
            quote="'",
            open="'" if start == at else "",
            close="'" if end == at + len(marker) else "",
        )

    def refuse_marker(self, text: str, what: str) -> None:
        """TF_CONFIG may not stand in `what`; the error names the template line."""
        match = _MARKER.search(text)
        if match is not None:
            line = self.placements[int(match[1])].line
            raise TemplateError(f"{self.filename}:{line}: <<TF_CONFIG>> cannot stand in {what}")

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
        rendered = _MARKER.sub("<<TF_CONFIG>>", rendered).rstrip()
        found = [n for n, p in self._line_patterns if p.fullmatch(rendered)]
        return min(found, key=lambda n: abs(n - near)) if found else None

    def public(self, message: str, text: str = "", *lines: int) -> str:
        """A check's message with each marker shown as the template wrote it, naming the template line.

        `lines` (from 0) are where in `text`, the task's text, the message points:
        the first that a template line renders as is named.
        """
        match = re.search(_SHOWN_MARKER, message)
        if match is None:
            rendered = text.split("\n")
            for line in lines:
                if 0 <= line < len(rendered) and rendered[line].strip():
                    found = self.template_line(rendered[line], line + 1 + self._header_lines)
                    if found is not None:
                        return f"{message} ({self.filename}:{found})"
            return message
        line = self.placements[int(match[1])].line
        shown = re.sub(_SHOWN_MARKER, "<<TF_CONFIG>>", message)
        return f"{shown} (<<TF_CONFIG>> at {self.filename}:{line})"


def unix_newlines(text: str) -> str:
    """The text with its Windows ('\\r\\n') and old Mac ('\\r') line endings as '\\n'.

    YAML reads all three as line breaks, but the placement rules and the header
    see lines by '\\n': so a template's lines end the same however it was saved,
    and the output uses '\\n' throughout.
    """
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _check_names(ast: Any, filename: str, known: set[str]) -> set[str]:
    """Fail on the first name the template uses that no task will define, naming its line."""
    from jinja2 import meta, nodes

    referenced: set[str] = meta.find_undeclared_variables(ast)
    unknown = referenced - known
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


def _limit_message(e: RenderLimit, filename: str) -> str:
    if e.message.startswith(f"{filename}:"):
        return e.message
    return f"{filename}:{e.lineno}: {e.message}" if e.lineno else f"{filename}: {e.message}"


def _template_error(e: Exception, filename: str) -> TemplateError:
    lineno = getattr(e, "lineno", None)
    if lineno is None:
        import traceback

        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == filename]
        lineno = frames[-1].lineno if frames else None
    where = f"{filename}:{lineno}" if lineno else filename
    kind = type(e).__name__
    message = getattr(e, "message", None) or str(e)
    if kind in ("UndefinedError", "RenderLimit", "TemplateNotFound"):
        return TemplateError(f"{where}: {message}")
    if kind == "RecursionError":
        return TemplateError(
            f"{where}: the template recurses too deeply "
            "(a macro or a recursive loop that calls itself without end?)"
        )
    if kind == "TemplateSyntaxError":
        return TemplateError(f"{where}: template syntax error: {message}")
    first_line = message.splitlines()[0] if message else kind
    return TemplateError(f"{where}: {kind}: {first_line}")
