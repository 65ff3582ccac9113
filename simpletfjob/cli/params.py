"""click parameters and commands made from the option table (options/table.py, options/render.py).

`make_command()` gives a command one click parameter per field of its option group, checks
each value by its option's rule, and passes the set of options the command line gave (a
header's defaults fill in only the others). --help lists each option by the first sentence
of its help; the whole is on docs/commands/NAME.md, which the epilog names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

import click

from simpletfjob._version import __version__
from simpletfjob.cli.complete import choices, for_argument, for_option
from simpletfjob.options.table import (
    Argument,
    Field,
    Option,
    OptionGroup,
    ascii_int,
    check_value,
    fields,
)

CONTEXT = {"max_content_width": 100}

# What a command function receives: the values by field name, and the names the command
# line gave (not left at their defaults).
CommandFunction = Callable[[dict[str, Any], frozenset[str]], None]


class CommandContext(click.Context):
    """A context whose command, run as the default one (no command word), is named as the program."""

    @property
    def command_path(self) -> str:
        if self.info_name == "" and self.parent is not None:
            return self.parent.command_path
        return super().command_path


class ParseErrorsInContext(click.Command):
    """click's parsing, with parse errors that name their command.
    A parse error that click raises without its context ("requires an argument")
    gets it, for the `(see simpletfjob COMMAND --help)` hint."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            if e.ctx is None:
                e.ctx = ctx
            raise


class TableCommand(ParseErrorsInContext):
    """A command whose options come from option groups; --help lists each group under its heading."""

    context_class = CommandContext

    def __init__(self, *args: Any, sections: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sections = sections  # parameter name -> heading; the others go under "Options"
        for param in self.params:  # one line each in --help; the whole on the command's page
            if isinstance(param, click.Option) and param.help:
                param.help = first_sentence(param.help)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # Completing an option's value (`--set wor<TAB>`): the option is last, without its
        # value, and click's parser would stop there before it reads the arguments (the
        # template that --set's completion reads). The words before it are what is known.
        if ctx.resilient_parsing and args and self._takes_a_value(ctx, args[-1]):
            args = args[:-1]
        return super().parse_args(ctx, args)

    def _takes_a_value(self, ctx: click.Context, word: str) -> bool:
        for param in self.get_params(ctx):
            if isinstance(param, click.Option) and word in param.opts:
                return not param.is_flag and not param.count
        return False

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        by_section: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx) if isinstance(param, click.Option) else None
            if record is not None:
                section = self.sections.get(param.name or "", "Options")
                by_section.setdefault(section, []).append(record)
        for section, rows in by_section.items():
            with formatter.section(section):
                formatter.write_dl(rows)


if TYPE_CHECKING:
    _ParamType = click.ParamType[int, Any]
else:
    _ParamType = click.ParamType  # (generic only from click 8.2)


class Integer(_ParamType):
    """click's INT, but in ASCII digits (options/table.py's ascii_int), with its message."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return ascii_int(value)
        except ValueError:
            self.fail(f"{value!r} is not a valid integer.", param, ctx)


INTEGER = Integer()


def parameter(field: Field) -> click.Parameter:
    """The click parameter for one field of the table."""
    declared = field.declaration
    if isinstance(declared, Argument):
        return click.Argument(
            [field.name],
            nargs=-1 if declared.multiple else 1,
            required=declared.required,
            shell_complete=for_argument(field.name),
        )
    assert isinstance(declared, Option), field
    settings: dict[str, Any] = {
        "default": declared.default,
        "help": declared.help,
        "show_default": declared.show_default,
        "metavar": declared.metavar,
        "callback": _reader(declared),
    }
    flags = list(declared.flags)
    if declared.type is bool and declared.negatable:
        flags = [f"{flag}/--no-{flag[2:]}" for flag in flags]
    elif declared.type is bool:
        settings.update(is_flag=True, flag_value=not declared.default)  # a switch
    elif declared.bare is not None:
        settings.update(is_flag=False, flag_value=declared.bare)  # -E alone means -E exc
    elif declared.parse is not None:
        # click sees only text, the default written as a user would write it; _reader parses it.
        text = declared.format or str
        default = None if declared.default is None else text(declared.default)
        settings.update(type=click.STRING, default=default)
    elif declared.type is int:
        settings["type"] = INTEGER
    if declared.multiple:
        settings["multiple"] = True
    words = getattr(declared.rule, "choices", None)
    if words:
        settings["shell_complete"] = choices(words)
        if settings["metavar"] is None:
            settings["metavar"] = f"[{'|'.join(words)}]"
    elif for_option(field.name) is not None:
        settings["shell_complete"] = for_option(field.name)
    return click.Option([*flags, field.name], **settings)


def first_sentence(text: str) -> str:
    """An option's line in --help: the first sentence of its help (the whole is on its page)."""
    end = re.search(r"\.\s", text)
    return text[: end.start() + 1] if end else text


def _reader(declared: Option) -> Callable[[click.Context, click.Parameter, Any], Any]:
    # The option's own parse (a duration) turns the text into its value; then the rule is
    # checked as click reads the value, so that a bad value is reported before any file is
    # read, in the same words as in a template header (options/table.py's Rule).
    def read(context: click.Context, param: click.Parameter, value: Any) -> Any:
        if context.resilient_parsing:
            return value
        if declared.parse is not None and value is not None:
            try:
                value = declared.parse(value)
            except ValueError as e:
                raise click.BadParameter(str(e), context, param) from e
        check_value(declared, value)
        return value

    return read


def make_command(
    name: str,
    group: type[OptionGroup] | None,
    *,
    short_help: str,
    extra: Sequence[click.Parameter] = (),
    omit: Collection[str] = (),
) -> Callable[[CommandFunction], click.Command]:
    """Make FUNCTION(values, given) the click command NAME, with GROUP's options and --help.
    Its docstring is its --help; `short_help` is its line in `simpletfjob --help`. The
    fields named in `omit` are not on its command line (they keep their defaults)."""

    def decorate(function: CommandFunction) -> click.Command:
        table = [
            f
            for f in (fields(group) if group else ())
            if f.declaration is not None and f.name not in omit
        ]

        def callback(**values: Any) -> None:
            from click.core import ParameterSource

            context = click.get_current_context()
            given = frozenset(
                key
                for key in values
                if context.get_parameter_source(key) is not ParameterSource.DEFAULT
            )
            function(values, given)

        return TableCommand(
            name,
            callback=callback,
            params=[*(parameter(f) for f in table), *extra, help_option()],
            help=function.__doc__,
            short_help=short_help,
            epilog=f"Every option in full, and how {name} behaves: docs/commands/{name}.md",
            context_settings=CONTEXT,
            add_help_option=False,
            sections={f.name: f.section for f in table},
        )

    return decorate


# click's own --help and --version write with click.echo, which turns a broken pipe
# into a silent exit 1 and other write errors into tracebacks; these write through
# output.write_stdout, which reports every failure as one line.


def _eager(flags: list[str], text: Callable[[click.Context], str], help: str) -> click.Option:
    def show(context: click.Context, _: click.Parameter, value: bool) -> None:
        if value and not context.resilient_parsing:
            from simpletfjob.output import write_stdout

            write_stdout([text(context)])
            context.exit()

    return click.Option(
        flags, is_flag=True, expose_value=False, is_eager=True, callback=show, help=help
    )


def help_option() -> click.Option:
    return _eager(["-h", "--help"], lambda c: c.get_help() + "\n", "Show this message and exit.")


def version_option() -> click.Option:
    return _eager(
        ["--version"],
        lambda _: f"simpletfjob, version {__version__}\n",
        "Show the version and exit.",
    )
