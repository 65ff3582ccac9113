"""Templates: finding a file or a built-in, reading its header, and applying the header's defaults.

A template may start with a header: a leading block of `#` comment lines
(so the file stays valid YAML for editors and linters). The first comment
line is the one-line description that `simpletfjob templates` shows. A line
`# simpletfjob:` starts a YAML mapping that runs to the end of the comment
block, read with each line's leading `#` and one space removed::

    # Train with MultiWorkerMirroredStrategy, one worker per host.
    #
    # Free text for the reader.
    #
    # simpletfjob:
    #   options:          # defaults for command-line options
    #     psn: 0
    #   values:           # defaults for template variables
    #     image: tensorflow/tensorflow:2.16.1-gpu

A template with such a header renders without it: the comment block is not
repeated in every task's output, and a `<<...>>` in its prose is not rendered.
A template without a `# simpletfjob:` line renders exactly as it is.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from simpletfjob.errors import InputError, OutputError, TemplateError, UsageError
from simpletfjob.frameworks import framework, reserved_variables
from simpletfjob.frameworks.pytorch import PyTorchOptions
from simpletfjob.frameworks.tensorflow import TensorFlowOptions
from simpletfjob.inputs import read_text
from simpletfjob.options.limits import LimitOptions
from simpletfjob.options.render import check_options, header_fields
from simpletfjob.options.table import (
    OptionGroup,
    check_value,
    options_of,
    problem,
    type_problem,
)
from simpletfjob.output import destination, write_to
from simpletfjob.template.compiled import unix_newlines
from simpletfjob.template.values import check_reserved_characters, collect_values, parse_set

if TYPE_CHECKING:
    from simpletfjob.options.render import Options

AnyOptions = TypeVar("AnyOptions", bound="Options")  # a render's options, or apply's

_HEADER_START = re.compile(r"#[ \t]*simpletfjob:[ \t]*(?:#.*)?")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BUILTIN_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")
SUFFIX = ".yaml"

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class Header(NamedTuple):
    """What a template's leading comment block says about it."""

    description: str = ""
    values: Mapping[str, Any] = _EMPTY
    options: Mapping[str, Any] = _EMPTY
    lines: int = 0  # how many leading lines the header takes; 0 when there is no `# simpletfjob:`


class TemplateSource(NamedTuple):
    """A template's text, the name to use for it in messages, and its header."""

    name: str
    text: str
    header: Header
    builtin: str | None = None  # the built-in's name, when it is one

    def render_text(self) -> str:
        """The text to compile: the header becomes an empty jinja comment, keeping line numbers."""
        if not self.header.lines:
            return self.text
        body = self.text.split("\n")[self.header.lines :]
        # trim_blocks drops the newline after `#>`, so the header leaves nothing in the output.
        return "<#" + "\n" * (self.header.lines - 1) + "#>\n" + "\n".join(body)


def _builtin_dir() -> Any:
    """The directory of built-in templates: inside the installed package, or beside a checkout."""
    import importlib.resources

    try:
        found = importlib.resources.files("simpletfjob.templates")
        if found.is_dir():
            return found
    except (ModuleNotFoundError, TypeError):
        pass
    # A source checkout (or an editable install, whose finder cannot map a namespace
    # subpackage): the templates live at the top of the repository.
    from pathlib import Path  # only on this path: it slows the cold start

    return Path(__file__).resolve().parents[2] / "templates"


def builtin_names() -> list[str]:
    return sorted(
        entry.name[: -len(SUFFIX)]
        for entry in _builtin_dir().iterdir()
        if entry.name.endswith(SUFFIX) and entry.is_file()
    )


def read_builtin(name: str) -> str:
    """The text of built-in template `name` (with or without `.yaml`)."""
    stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else name
    available = builtin_names()
    if stem not in available:
        raise InputError(
            f"no built-in template {name!r}; available: {', '.join(available)} "
            "(see simpletfjob templates)"
        )
    return str(_builtin_dir().joinpath(stem + SUFFIX).read_text(encoding="utf-8"))


def locate(name: str) -> TemplateSource:
    """The template TEMPLATE names: a file if one exists at that path, else a built-in name.
    A path that exists wins, so a local `tf1-flags` file shadows the built-in; a bare name
    (no `/`, no `.`) that is neither is an error listing the built-ins."""
    if not os.path.isfile(name) and _BUILTIN_NAME.fullmatch(name):
        available = builtin_names()
        if name in available:
            display = f"built-in {name}{SUFFIX}"
            text = read_builtin(name)
            return TemplateSource(display, text, parse_header(text, display), builtin=name)
        if not os.path.lexists(name):  # (a directory, a named pipe: read_text says which)
            raise InputError(
                f"template {name!r} is neither a file nor a built-in template; "
                f"built-ins: {', '.join(available)}"
            )
    text = unix_newlines(read_text(name, "template"))
    return TemplateSource(name, text, parse_header(text, name))


def describe_builtins() -> list[tuple[str, str]]:
    """(name, one-line description) for every built-in template."""
    return [
        (name, parse_header(read_builtin(name), f"built-in {name}{SUFFIX}").description)
        for name in builtin_names()
    ]


def parse_header(text: str, filename: str) -> Header:
    """Read the leading comment block; see the module docstring for its format."""
    lines = text.split("\n")
    block = 0
    while block < len(lines) and (not lines[block].strip() or lines[block].startswith("#")):
        block += 1
    description = ""
    start = None
    for number in range(block):
        line = lines[number]
        if _HEADER_START.fullmatch(line.strip()):
            start = number
            break
        if not description and line.lstrip("#").strip():
            description = line.lstrip("#").strip()
    if start is None:
        return Header(description=description)
    stripped = [_uncomment(line) for line in lines[start:block]]
    data, marks = _load_header_yaml("\n".join(stripped) + "\n", filename, start)
    settings = data.get("simpletfjob")
    if settings is None:
        return Header(description=description, lines=block)
    where = marks.get(("simpletfjob",), start + 1)
    if not isinstance(settings, dict):
        raise TemplateError(
            f"{filename}:{where}: the simpletfjob: header must be a mapping with "
            "'values:' and/or 'options:'"
        )
    for key in settings:
        if key not in ("values", "options"):
            raise TemplateError(
                f"{filename}:{marks.get(('simpletfjob', key), where)}: unknown header key "
                f"{key!r}; a simpletfjob: header has 'values:' and 'options:'"
            )
    values = _section(settings, "values", filename, marks, where)
    options = _section(settings, "options", filename, marks, where)
    return Header(
        description=description,
        values=_check_values(values, filename, marks),
        options=_check_options(options, filename, marks),
        lines=block,
    )


def _uncomment(line: str) -> str:
    body = line[1:] if line.startswith("#") else line
    return body[1:] if body.startswith(" ") else body


def _load_header_yaml(
    text: str, filename: str, offset: int
) -> tuple[dict[str, Any], dict[tuple[str, ...], int]]:
    """The header's data, and the template line of each key (by its path) for messages."""
    import yaml

    from simpletfjob import yamlload

    try:
        node, data = yamlload.load_node(text, unique=True)
    except yaml.YAMLError as e:
        raise TemplateError(
            yamlload.describe_error(e, filename, "the template header is not valid YAML", offset)
        ) from e
    check_reserved_characters(text, node, filename, offset)
    if node is None:
        data = {}
    marks: dict[tuple[str, ...], int] = {}
    _collect_marks(node, (), offset, marks)
    # The block starts with its `simpletfjob:` line, so it is a mapping whenever it parses.
    return data, marks


def _collect_marks(node: Any, path: tuple[str, ...], offset: int, marks: dict[Any, int]) -> None:
    if type(node).__name__ != "MappingNode" or len(path) > 2:
        return
    for key, value in node.value:
        if type(key).__name__ == "ScalarNode":
            here = (*path, key.value)
            marks[here] = offset + key.start_mark.line + 1
            _collect_marks(value, here, offset, marks)


def _section(
    settings: Mapping[str, Any], key: str, filename: str, marks: Mapping[Any, int], where: int
) -> dict[str, Any]:
    section = settings.get(key)
    if section is None:
        return {}
    if not isinstance(section, dict):
        line = marks.get(("simpletfjob", key), where)
        raise TemplateError(
            f"{filename}:{line}: '{key}:' in the template header must be a mapping, "
            f"not {type(section).__name__} {section!r}"
        )
    return section


def _check_values(
    values: dict[str, Any], filename: str, marks: Mapping[Any, int]
) -> dict[str, Any]:
    for key in values:
        line = marks.get(("simpletfjob", "values", str(key)), "?")
        if not isinstance(key, str) or not _VARIABLE.fullmatch(key):
            raise TemplateError(
                f"{filename}:{line}: {key!r} in the header's values is not a variable name"
            )
        if key in reserved_variables():
            raise TemplateError(
                f"{filename}:{line}: {key!r} is set by simpletfjob for each task and cannot "
                "have a default in the header"
            )
    return values


def _check_options(
    options: dict[str, Any], filename: str, marks: Mapping[Any, int]
) -> dict[str, Any]:
    """The header's option defaults, each checked by its option's declaration (options/table.py)."""
    table = header_fields()
    checked: dict[str, Any] = {}
    for key, value in options.items():
        line = marks.get(("simpletfjob", "options", str(key)), "?")
        field = table.get(str(key).replace("-", "_"))
        declared = field.option if field is not None else None
        if field is None or declared is None:
            allowed = ", ".join(sorted(name.replace("_", "-") for name in table))
            raise TemplateError(
                f"{filename}:{line}: unknown option {key!r} in the template header; "
                f"a header can set: {allowed}"
            )
        if declared.parse is not None and type(value) is str:
            # Written as on the command line (`port: auto`), read as the command line reads it.
            try:
                value = declared.parse(value)
            except ValueError as e:
                raise TemplateError(
                    f"{filename}:{line}: option {key!r} in the template header: {e}"
                ) from e
            found = problem(declared, value)
        else:
            found = type_problem(declared, value) or problem(declared, value)
        if found:
            raise TemplateError(f"{filename}:{line}: option {key!r} in the template header {found}")
        checked[field.name] = value
    return checked


# The options of each framework's own group: given for another framework, they are a usage error.
FRAMEWORK_GROUPS: dict[str, type[OptionGroup]] = {
    "tensorflow": TensorFlowOptions,
    "pytorch": PyTorchOptions,
}


def framework_defaults(
    name: str, given: Iterable[str], header: Mapping[str, Any], options: Any
) -> dict[str, Any]:
    """The framework's defaults for what neither the command line nor the header set.
    Another framework's option (--psn for pytorch), on the command line or in the header, is
    a usage error that names the framework."""
    explicit = set(given)
    own = FRAMEWORK_GROUPS.get(name)
    foreign = [g for g in FRAMEWORK_GROUPS.values() if g is not own]
    for field, declared in (pair for group in foreign for pair in options_of(group)):
        if field.name in explicit:
            check_value(declared, getattr(options, field.name))
            raise UsageError(f"{declared.shown} does not apply to framework {name}")
        if field.name in header:
            raise UsageError(
                f"option {field.name.replace('_', '-')!r} in the template header does not "
                f"apply to framework {name}"
            )
    fw = framework(name)
    defaults: dict[str, Any] = {}
    if "port" not in explicit and "port" not in header:
        defaults["port"] = fw.default_port
    if "success_policy" not in explicit:
        defaults["success_policy"] = fw.default_policy
    return defaults


def write_copy(name: str, output: str | None, force: bool) -> str:
    """`simpletfjob init`: copy a built-in to edit; returns the summary line for stderr.
    OUTPUT may be a file, '-' (stdout), an open stream such as /dev/stdout, or an
    existing directory, which gets DIR/NAME.yaml as `cp` would give it."""

    stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else name
    text = read_builtin(stem)
    target = output if output is not None else f"{stem}{SUFFIX}"
    if target != "-" and os.path.isdir(target):
        target = os.path.join(target, f"{stem}{SUFFIX}")
    dest = destination(target)
    if dest.fd is None and os.path.lexists(target) and not force and not _is_stream(target):
        raise OutputError(
            f"{str(target)!r} already exists; give --force to overwrite it, or -o another file"
        )
    write_to(dest, [text])
    if dest.path is None or _is_stream(target):
        return f"simpletfjob: wrote the built-in template {stem} to {dest.shown}"
    return (
        f"simpletfjob: wrote {target}, a copy of the built-in template {stem}; "
        f"edit it, then: simpletfjob {target} --nodes H1,H2,..."
    )


def _is_stream(path: str) -> bool:
    """A device or a FIFO (/dev/null, a named pipe): written in place, never 'overwritten'."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def prepare_options(
    options: AnyOptions, given: Iterable[str], values: Mapping[str, Any] | None = None
) -> AnyOptions:
    """A command's options, ready to plan: the one way the CLI and the Python API make them.

    `given` are the fields set explicitly. apply's and run's options (a run's limits) are
    checked first, before the template or a cluster is read. The template's header gives
    defaults under the options given; values layer as header < -f files < `values` (the
    API's) < --set; the framework gives the defaults of --port and --success-policy and
    refuses another's options (`framework_defaults`); then the rules of a run's limits.
    """
    given = set(given)
    if limited := isinstance(options, LimitOptions):
        check_options(options)
    sets = ([dict(values)] if values else []) + [parse_set(i) for i in options.set_values]
    prepared = _with_header(options, given, sets)
    if getattr(prepared, "queue", "") is None:
        for name in sorted({"queue_namespace", "queue_lease"} & given):
            flag = "--" + name.replace("_", "-")
            raise UsageError(f"{flag} is for a run in a queue: give --queue NAME too")
    if limited:  # once the framework's default policy is known
        from simpletfjob.options.runs import cleanup_has_an_owner

        cleanup_has_an_owner(prepared)
    return prepared


def _with_header(
    options: AnyOptions, given: Iterable[str], sets: Sequence[Mapping[str, Any]]
) -> AnyOptions:
    source = locate(options.template)
    # The limits a header sets are apply's and run's; a render has no field for them.
    header = {k: v for k, v in source.header.options.items() if hasattr(options, k)}
    settings = {k: v for k, v in header.items() if k not in given}  # the command line's win
    chosen = settings.get("framework", options.framework)
    settings.update(framework_defaults(chosen, given, header, options))
    if source.builtin is not None and options.output is None:
        suffix = framework(chosen).output_suffix
        settings["output"] = f"{source.builtin}{suffix}.yaml"  # in the current directory
    values, given_values = collect_values(source.header.values, options.value_files, sets)
    return options.replace(
        template=source.name,
        template_text=source.render_text(),
        builtin=source.builtin,
        values=values,
        given_values=given_values,
        **settings,
    )
