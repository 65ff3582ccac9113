"""The command line: commands, each a module here; errors -> one line, an exit code.

Exit status: 0 success, 1 a problem with the inputs, the cluster or the output,
2 a usage error (unknown option, bad option value, contradicting options),
130, 143 or 129 when SIGINT, SIGTERM or SIGHUP stopped the run.

This package is the only one that imports click. Each command's options come
from the option table (options.py), made into click parameters by table.py.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from importlib import import_module

import click

from simpletfjob.cli.render import command as render_command
from simpletfjob.errors import EXIT_ERROR, EXIT_OK, Interrupted, SimpleTFJobError

# Words that name a command rather than a template when they come first.
COMMANDS = {"templates": "simpletfjob.cli.templates", "init": "simpletfjob.cli.init"}


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: never a traceback, always one line on stderr for a failure."""
    args = list(sys.argv[1:] if argv is None else argv)
    command, prog = render_command, "simpletfjob"
    if args and args[0] in COMMANDS:
        command, prog = import_module(COMMANDS[args[0]]).command, f"simpletfjob {args[0]}"
        args = args[1:]
    try:
        command.main(args, prog_name=prog, standalone_mode=False)
    except SimpleTFJobError as e:
        _fail(str(e), e.exit_code)
    except click.ClickException as e:
        hint = f" (see {prog} --help)" if isinstance(e, click.UsageError) else ""
        _fail(e.format_message() + hint, e.exit_code)
    except Interrupted as e:
        _interrupted(e.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        # Without console_main's signal handlers (main() called in-process), click
        # has turned Ctrl-C into Abort.
        _interrupted(130)
    except Exception as e:  # a bug: still one line, and a way to see the traceback
        if os.environ.get("SIMPLETFJOB_DEBUG"):
            raise
        _fail(
            f"internal error: {type(e).__name__}: {e} (set SIMPLETFJOB_DEBUG=1 for details)",
            EXIT_ERROR,
        )
    sys.exit(EXIT_OK)


def _fail(message: str, code: int) -> None:
    first = message.strip().splitlines()[0] if message.strip() else "failed"
    print(f"simpletfjob: error: {first}", file=sys.stderr)
    sys.exit(code)


def _interrupted(code: int) -> None:
    # Not an error in the input: the user (or a supervisor) stopped the run.
    print("simpletfjob: interrupted", file=sys.stderr)
    sys.exit(code)


def console_main() -> None:
    """The console script and `python -m simpletfjob`: main(), then a quick exit.

    First the process's own setup (see streams.py): closed standard descriptors
    get /dev/null, stderr drops what it cannot write, and SIGINT, SIGTERM and
    SIGHUP unwind as `Interrupted`. Tests call main() in-process without these.

    Everything is written and closed by the time main() returns, so the process
    leaves with os._exit rather than tearing down every module one by one, which
    costs a short render about a tenth of its time.
    """
    from simpletfjob import streams

    try:
        streams.install_signal_handlers()
        streams.guard_standard_streams()
        main()
        code = EXIT_OK
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (EXIT_OK if e.code is None else EXIT_ERROR)
    except Interrupted as e:  # arrived outside main()'s handlers, while it was reporting
        code = e.exit_code
        with contextlib.suppress(Interrupted):
            print("simpletfjob: interrupted", file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(
            OSError, ValueError, AttributeError
        ):  # a closed pipe takes nothing more
            stream.flush()
    os._exit(code)
