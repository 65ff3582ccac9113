"""Render: the jinja2 environment, the legacy `{{.x}}` syntax, where TF_CONFIG lands, and per-task rendering.

Templates use jinja2 with `<< >>` for variables (so Helm and Argo `{{ }}` pass
through untouched), `{% %}` for statements and `<# #>` for comments (so shell
text such as `${#ARRAY[@]}` is not taken for a comment). The environment is
sandboxed and strict: an undefined name is an error naming it and its line.

A bare `<<TF_CONFIG>>` is placed according to where it stands (see
`classify_placement`) so that every document is valid YAML and its value is a
string that `json.loads` turns into the task's TF_CONFIG. The template is
compiled once; each bare placement becomes a marker in the rendered text that is
filled in at the end, so the large cluster JSON is built once and never parsed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from simpletfjob.errors import TemplateError

if TYPE_CHECKING:
    import jinja2

    from simpletfjob.roles import ClusterSpec, Task

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

# Placement modes whose text is one whole YAML scalar, so the check can find it.
WHOLE_VALUE_MODES = frozenset({"block", "line", "squote", "dquote", "scalar"})


class Placement(NamedTuple):
    """Where one bare <<TF_CONFIG>> stands, and so how its text is written.

    block:  alone on a line under `key: >` or `key: |`: indented JSON lines.
    line:   alone on a line after a bare `key:`: one single-quoted line.
    squote: inside '...';  dquote: inside "..." (escaped).
    scalar: the whole unquoted value (`value: <<TF_CONFIG>>`): single-quoted.
    raw:    inside other text: compact JSON with no spaces, as is.
    """

    mode: str
    indent: str
    line: int


def classify_placement(lines: Sequence[str], number: int, start: int, end: int) -> Placement:
    """Decide how the <<TF_CONFIG>> at lines[number][start:end] is written."""
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
            return Placement("block", " " * indent, number + 1)
        bare = _BARE_KEY.match(previous) if previous is not None else None
        if bare is not None:
            parent = len(bare["lead"].expandtabs())
            indent = own if own > parent else parent + 2
            return Placement("line", " " * indent, number + 1)
        return Placement("line", " " * own, number + 1)
    if before.endswith("'") and after.startswith("'"):
        return Placement("squote", "", number + 1)
    if before.endswith('"') and after.startswith('"'):
        return Placement("dquote", "", number + 1)
    starts_value = re.search(r"(?:^|[:\-?][ \t]|[\[{,])[ \t]*$", before) is not None
    ends_value = re.match(r"[ \t]*(?:$|[ \t]#|[,\]}])", after) is not None
    if starts_value and ends_value:
        return Placement("scalar", "", number + 1)
    return Placement("raw", "", number + 1)


def _previous_content_line(lines: Sequence[str], number: int) -> str | None:
    for candidate in reversed(lines[:number]):
        if candidate.strip() and not _STATEMENT_LINE.match(candidate):
            return candidate
    return None


def place(placement: Placement, spec: ClusterSpec, task: Task) -> str:
    """The text that stands where the placement's marker is."""
    return "".join(place_parts(placement, spec, task))


_ESCAPED: dict[tuple[str, str], str] = {}


def _escape(mode: str, text: str) -> str:
    """Quote-escape for 'squote'/'dquote' placements, cached: the cluster part repeats per task."""
    key = (mode, text)
    escaped = _ESCAPED.get(key)
    if escaped is None:
        if mode == "squote":
            escaped = text.replace("'", "''")
        else:
            escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        if len(_ESCAPED) > 64:
            _ESCAPED.clear()
        _ESCAPED[key] = escaped
    return escaped


def place_parts(placement: Placement, spec: ClusterSpec, task: Task) -> tuple[str, ...]:
    """place() in parts; the large cluster part is one shared string for every task."""
    mode = placement.mode
    if mode == "block":
        return spec.pretty_parts(task, placement.indent)
    prefix, suffix = spec.compact_parts(task)
    if mode == "line":
        return f"{placement.indent}'", prefix, f"{suffix}'"
    if mode == "scalar":
        return "'", prefix, f"{suffix}'"
    if mode in ("squote", "dquote"):
        return _escape(mode, prefix), _escape(mode, suffix)
    return prefix, suffix


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
        # Windows line endings would hide a line's end from the placement rules; YAML
        # does not care, so the output uses '\n' throughout.
        text, self.placements = translate_source(source.replace("\r\n", "\n"))
        env = make_environment()
        try:
            ast = env.parse(text, filename=filename)
            code = env.compile(ast, name=filename, filename=filename)
        except Exception as e:  # jinja2.TemplateSyntaxError, named without importing jinja2 early
            raise _template_error(e, filename) from e
        self.referenced = _check_names(ast, filename, set(known))
        self.uses_tf_config = "TF_CONFIG" in self.referenced
        self._template = env.template_class.from_code(env, code, env.make_globals(None), None)

    def render(self, context: Mapping[str, Any]) -> str:
        try:
            return self._template.render(context)
        except Exception as e:
            raise _template_error(e, self.filename) from e

    def split(self, text: str) -> list[str]:
        """Text and marker numbers, alternating: [text, '0', text, '1', text]."""
        return _MARKER.split(text)

    def fill(self, pieces: Sequence[str], spec: ClusterSpec, task: Task) -> Iterator[str]:
        yield pieces[0]
        for i in range(1, len(pieces), 2):
            yield from place_parts(self.placements[int(pieces[i])], spec, task)
            yield pieces[i + 1]


def make_environment() -> jinja2.Environment:
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    return SandboxedEnvironment(
        variable_start_string="<<",
        variable_end_string=">>",
        block_start_string="{%",
        block_end_string="%}",
        comment_start_string="<#",
        comment_end_string="#>",
        # A statement alone on its line leaves no blank line or stray indentation behind.
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=StrictUndefined,
        autoescape=False,
    )


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


def _template_error(e: Exception, filename: str) -> TemplateError:
    lineno = getattr(e, "lineno", None)
    if lineno is None:
        import traceback

        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == filename]
        lineno = frames[-1].lineno if frames else None
    where = f"{filename}:{lineno}" if lineno else filename
    kind = type(e).__name__
    message = getattr(e, "message", None) or str(e)
    if kind == "UndefinedError":
        return TemplateError(f"{where}: {message}")
    if kind == "TemplateSyntaxError":
        return TemplateError(f"{where}: template syntax error: {message}")
    first_line = message.splitlines()[0] if message else kind
    return TemplateError(f"{where}: {kind}: {first_line}")
