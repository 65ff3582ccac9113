"""The command line: the `simpletfjob` click group, its commands, and errors as one line and an exit code.

`simpletfjob TEMPLATE ...` is `simpletfjob render TEMPLATE ...`: when the first word is
neither a command nor a group option (--help, --version), the whole line goes to render. A
template named like a command is written `./NAME`.

A first bare word that is no command, file or built-in template but close to a command
is a mistyped command (`refuse_mistyped_command`), exit 2.

Each command is a module of this package with a `command` (made by params.py), imported
only when it runs or for --help, so one command's imports never slow another's start.

Exit status: 0 success, 1 a problem with the inputs, the cluster or the output, 2 a usage
error, 3 when `wait --timeout` passes, 130, 143 or 129 for SIGINT, SIGTERM or SIGHUP, 141
when the output's reader went away (`| head`), with no line of its own.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from importlib import import_module
from typing import TYPE_CHECKING, NoReturn

import click

from simpletfjob import streams
from simpletfjob.cli.complete import first_word
from simpletfjob.cli.params import (
    CONTEXT,
    CommandContext,
    ParseErrorsInContext,
    help_option,
    version_option,
)
from simpletfjob.errors import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_READER_GONE,
    Interrupted,
    ReaderGone,
    SimpleTFJobError,
    UsageError,
)

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

# The command words, in the order --help lists them; each is a module of this package.
COMMANDS = (
    "render",
    "templates",
    "init",
    "nodes",
    "apply",
    "run",
    "status",
    "wait",
    "logs",
    "delete",
    "diagnose",
    "queue",
)
DEFAULT = "render"  # what runs when the first word is not a command
# kubectl's words for reading objects: a pointer to status, never a template's name.
KUBECTL_VERBS = ("get", "list", "ls", "describe")
KUBECTL_NOUNS = ("runs", "run", "jobs", "job")  # `get runs`: the noun kubectl would want
# How alike (difflib's ratio) a word and a command must be for the word to be a mistyped
# command: stricter than click's, so that `mnist` is not taken for `init`.
CLOSE = 0.7
ABOUT = (
    "Turn one Kubernetes Job template into the Jobs of a distributed TensorFlow, PyTorch "
    "or JAX run, and run it: apply, follow, clean up."
)
EXAMPLES = ("templates", "tf2-multiworker --nodes h1,h2,h3 -o -", "run tf2-multiworker -N 2 -n ml")


class CommandGroup(ParseErrorsInContext, click.Group):
    """A group that runs DEFAULT when the command line does not start with a command word."""

    context_class = CommandContext

    def parse_args(self, context: click.Context, args: list[str]) -> list[str]:
        if not args and context.resilient_parsing:
            return super().parse_args(context, args)  # completing the first word: shell_complete
        own = {flag for param in self.get_params(context) for flag in param.opts}
        if not args:
            from simpletfjob.output import write_stdout

            write_stdout([context.get_help() + "\n"])
            context.exit()
        if args[0] in KUBECTL_VERBS and not context.resilient_parsing:
            refuse_kubectl_verb(context.command_path, args)
        if args[0] not in COMMANDS and args[0] not in own:
            refuse_mistyped_command(args[0])
            # An empty command word stands for the default command; it shows no word in its
            # usage and messages (CommandContext), as before there were commands.
            args = ["", *args]
        return super().parse_args(context, args)

    def get_command(self, context: click.Context, name: str) -> click.Command | None:
        if (name or DEFAULT) not in COMMANDS:
            return None
        found: click.Command = import_module(f"simpletfjob.cli.{name or DEFAULT}").command
        return found

    def list_commands(self, context: click.Context) -> list[str]:
        return list(COMMANDS)

    def shell_complete(self, context: click.Context, incomplete: str) -> list[CompletionItem]:
        """The first word: the command words, and what the default command takes there."""
        default = self.get_command(context, DEFAULT)
        assert default is not None
        return first_word(context, incomplete, list(COMMANDS), default)

    def format_usage(self, context: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage(context.command_path, f"[{DEFAULT}] [OPTIONS] [TEMPLATE]")
        formatter.write_usage(context.command_path, "COMMAND [ARGS]...", prefix="       ")

    def format_help(self, context: click.Context, formatter: click.HelpFormatter) -> None:
        """A short overview, as kubectl's and helm's: what it does, the commands one line each,
        and how to see a command's options (the render's are `render --help`'s)."""
        self.format_usage(context, formatter)
        formatter.write_paragraph()
        with formatter.indentation():
            formatter.write_text(ABOUT)
        self.format_commands(context, formatter)
        click.Command.format_options(self, context, formatter)
        program = context.command_path
        with formatter.section("Examples"):
            for example in EXAMPLES:
                formatter.write_text(f"{program} {example}")
        formatter.write_paragraph()
        formatter.write_text(
            f"Use \"{program} COMMAND --help\" for a command's options (the default command's: "
            f'"{program} render --help").'
        )


def refuse_kubectl_verb(program: str, args: Sequence[str]) -> None:
    """`get`, `list`, `ls`, `describe RUN`: a usage error that gives the status command to run."""
    import shlex

    verb, rest = args[0], list(args[1:])
    if verb == "get" and rest[:1] and rest[0] in KUBECTL_NOUNS:
        rest = rest[1:]
    elif verb == "get" and rest[:1] and rest[0].split("/")[0] in KUBECTL_NOUNS:
        rest = [rest[0].split("/", 1)[1], *rest[1:]]  # get run/mnist
    instead = shlex.join([*program.split(), "status", *rest])
    if verb == "describe":
        if not rest:
            instead += " RUN"
        raise UsageError(f"no such command {verb!r}; to show a run, use: {instead}")
    raise UsageError(f"no such command {verb!r}; to list runs, use: {instead}")


def refuse_mistyped_command(word: str) -> None:
    """A bare word that names no file or built-in but is close to a command is a usage error.
    Anything else is left to render, as a template: a file, a path, a built-in's name,
    or a word like no command (its message is the missing template's)."""
    bare = word.replace("-", "")
    if not (bare.isascii() and bare.isalnum() and word[0].isalnum()) or os.path.lexists(word):
        return
    from simpletfjob.template.catalog import builtin_names  # the render imports it anyway

    if word in builtin_names():
        return
    import difflib

    close = difflib.get_close_matches(word.lower(), list(COMMANDS), n=1, cutoff=CLOSE)
    if not close:
        return
    raise UsageError(f"no such command or template {word!r}; did you mean {close[0]!r}?")


group = CommandGroup(
    "simpletfjob",
    params=[version_option(), help_option()],
    context_settings=CONTEXT,
    add_help_option=False,
    no_args_is_help=False,
)


PROGRAM = "simpletfjob"
# The kubectl plugin's name as the user types it: kubectl runs `kubectl-simpletfjob` for
# `kubectl simpletfjob ...`, so usage lines and hints read `kubectl simpletfjob status ...`.
KUBECTL_PLUGIN = "kubectl simpletfjob"
# Shell completion answers to this variable whichever name the program runs under.
COMPLETE_VAR = "_SIMPLETFJOB_COMPLETE"


def main(
    argv: Sequence[str] | None = None,
    prog_name: str = PROGRAM,
    env: streams.Environment | None = None,
) -> None:
    """Entry point: never a traceback, always one line on stderr for a failure.
    `env` is what the run knows of its process (streams.Environment): the console
    script's, or a fresh one (main() may be called again in one process)."""
    args = list(sys.argv[1:] if argv is None else argv)
    streams.env = env if env is not None else streams.Environment()
    try:
        group.main(args, prog_name=prog_name, complete_var=COMPLETE_VAR, standalone_mode=False)
    except SimpleTFJobError as e:
        _fail(str(e), e.exit_code)
    except click.ClickException as e:
        hint = ""
        if isinstance(e, click.UsageError):
            # The command the error is about, as the user ran it ("simpletfjob" for a render
            # without its command word).
            path = e.ctx.command_path if e.ctx is not None else prog_name
            hint = f" (see {path} --help)"
            if args and args[0] in COMMANDS and os.path.isfile(args[0]):
                # The user may have meant the file: a command word always wins.
                hint = f" (see {path} --help; to render the file {args[0]!r}, write ./{args[0]})"
        _fail(e.format_message() + hint, e.exit_code)
    except Interrupted as e:
        _interrupted(e)
        sys.exit(e.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        # Without console_main's signal handlers (main() called in-process), click
        # has turned Ctrl-C into Abort.
        _interrupted(Interrupted(130))
        sys.exit(130)
    except BrokenPipeError as e:  # click's own writes (completion), the reader of stdout gone
        if not _reader_gone(1):
            _internal_error(e)
        sys.exit(EXIT_READER_GONE)
    except Exception as e:  # a bug: still one line, and a way to see the traceback
        _internal_error(e)
    sys.exit(EXIT_OK)


def _internal_error(e: Exception) -> NoReturn:
    if os.environ.get("SIMPLETFJOB_DEBUG"):
        raise e
    _fail(
        f"internal error: {type(e).__name__}: {e} (set SIMPLETFJOB_DEBUG=1 for details)",
        EXIT_ERROR,
    )


def _reader_gone(fd: int) -> bool:
    """Whether `fd` is a pipe or socket whose reader has gone (poll says POLLERR or POLLHUP)."""
    import select

    try:
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll(2)
        return False


def _fail(message: str, code: int) -> NoReturn:
    first = message.strip().splitlines()[0] if message.strip() else "failed"
    streams.say(f"simpletfjob: error: {first}")
    sys.exit(code)


def _interrupted(stop: Interrupted) -> None:
    # The user stopped the run: what it had changed on a cluster, and how to go on, follows
    # on the same line. For a reader that went away, only what it leaves there is said.
    if stop.detail:
        streams.say(f"simpletfjob: interrupted: {stop.detail}")
    elif not isinstance(stop, ReaderGone):
        streams.say("simpletfjob: interrupted")


def console_main(prog_name: str = PROGRAM) -> NoReturn:
    """The console script and `python -m simpletfjob`: main(), and its exit status.
    First the process's own setup (streams.py), which tests calling main() in-process skip;
    then the process ends as any Python program does (streams.leave first)."""
    try:
        streams.install_signal_handlers()
        env = streams.Environment(closed_at_start=streams.guard_standard_streams())
        main(prog_name=prog_name, env=env)
        code = EXIT_OK
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (EXIT_OK if e.code is None else EXIT_ERROR)
    except Interrupted as e:  # arrived outside main()'s handlers, while it was reporting
        code = e.exit_code
        with contextlib.suppress(Interrupted):
            _interrupted(e)
    try:
        code = streams.leave(code)
    except Interrupted:  # a signal just before leave() took over: the command's status stands
        code = streams.leave(code)
    sys.exit(code)


def kubectl_main() -> None:
    """The kubectl plugin `kubectl-simpletfjob`: `kubectl simpletfjob ARGS` is `simpletfjob ARGS`.
    The same commands, options, messages and exit codes; only the program name in usage
    lines and `--help` hints reads as the user typed it."""
    console_main(KUBECTL_PLUGIN)


def kubectl_complete_main() -> None:
    """`kubectl_complete-simpletfjob`: what kubectl runs for `kubectl simpletfjob ...<TAB>`.
    kubectl passes the words after `kubectl simpletfjob`, the last one being completed
    (possibly empty); the candidates come one a line, then `:DIRECTIVE` (cobra's)."""
    from simpletfjob.cli.complete import kubectl_complete
    from simpletfjob.output import write_stdout

    lines = kubectl_complete(group, sys.argv[1:], KUBECTL_PLUGIN, COMPLETE_VAR)
    try:
        write_stdout([line + "\n" for line in lines])  # (straight to the descriptor)
    except SimpleTFJobError:
        pass
    except ReaderGone as e:
        sys.exit(e.exit_code)
    sys.exit(EXIT_OK)
