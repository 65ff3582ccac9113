"""The command line: click options -> an `Options` object -> the pipeline; errors -> one line, an exit code.

Exit status: 0 success, 1 a problem with the inputs, the cluster or the output,
2 a usage error (unknown option, bad option value, contradicting options),
130, 143 or 129 when SIGINT, SIGTERM or SIGHUP stopped the run.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from simpletfjob import __version__
from simpletfjob.errors import EXIT_ERROR, EXIT_OK, Interrupted, SimpleTFJobError

# click's own --help and --version write with click.echo, which turns a broken pipe
# into a silent exit 1 and other write errors into tracebacks; these write through
# output.write_stdout, which reports every failure as one line.
CONTEXT = {"max_content_width": 100}


def _show_help(context: click.Context, _: click.Parameter, value: bool) -> None:
    if value and not context.resilient_parsing:
        from simpletfjob.output import write_stdout

        write_stdout([context.get_help() + "\n"])
        context.exit()


def _show_version(context: click.Context, _: click.Parameter, value: bool) -> None:
    if value and not context.resilient_parsing:
        from simpletfjob.output import write_stdout

        write_stdout([f"simpletfjob, version {__version__}\n"])
        context.exit()


help_option = click.option(
    "-h",
    "--help",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_help,
    help="Show this message and exit.",
)


@click.command(context_settings=CONTEXT, add_help_option=False)
@click.argument("template", required=False)
@click.option(
    "-N",
    "--num",
    type=int,
    default=-1,
    show_default=True,
    help="Hosts to use in total; -1 means all eligible hosts.",
)
@click.option(
    "-E",
    "--exc",
    is_flag=False,
    flag_value="exc",
    default=None,
    metavar="[FILE]",
    help="Exclude the hosts listed in FILE (one per line); given bare, FILE is ./exc.",
)
@click.option(
    "--psn",
    type=int,
    default=1,
    show_default=True,
    help="Parameter servers; 0 means none, as for all-reduce.",
)
@click.option(
    "--psf",
    metavar="FILE",
    help="Hosts that must be the parameter servers, one per line; overrides --psn.",
)
# Each flag has a --no- form so that the command line can turn off a template header's default.
@click.option("--chief/--no-chief", help="Add one chief task (ParameterServerStrategy, Estimator).")
@click.option("--evaluator/--no-evaluator", help="Add one evaluator task, on the last host.")
@click.option(
    "--evaluator-in-cluster/--no-evaluator-in-cluster",
    help="List the evaluator in TF_CONFIG's cluster too (TensorFlow leaves it out).",
)
@click.option(
    "--port", type=int, default=2222, show_default=True, help="TF server port in TF_CONFIG."
)
@click.option("--nodes", metavar="H1,H2,...", help="Use these hosts instead of asking a cluster.")
@click.option(
    "--nodes-file",
    metavar="FILE",
    help="Hosts from a file, one per line, or a saved `kubectl get nodes -o json|yaml`.",
)
@click.option(
    "--kubeconfig",
    metavar="FILE",
    help="Read nodes from this cluster (default: $KUBECONFIG, ~/.kube/config, then in-cluster).",
)
@click.option("--context", metavar="NAME", help="The kubeconfig context to use (default: current).")
@click.option(
    "-l",
    "--selector",
    metavar="LABELS",
    help="Only nodes with these labels, as kubectl -l: 'pool=gpu,zone in (a,b)'.",
)
@click.option(
    "--gpus",
    type=int,
    default=0,
    metavar="N",
    help="Only nodes with at least N allocatable nvidia.com/gpu.",
)
@click.option(
    "--address",
    type=click.Choice(["name", "internal-ip", "hostname"]),
    default="name",
    show_default=True,
    help="What TF_CONFIG and <<host>> name: the node name, its InternalIP, or its hostname label.",
)
@click.option(
    "--explain",
    is_flag=True,
    help="Print to stderr, per node, whether it is eligible, why not, and the task it gets.",
)
@click.option(
    "-o",
    "--output",
    metavar="FILE|-",
    help="Where to write; default <template dir>/<template stem>_tfjob.yaml; '-' is stdout.",
)
@click.option(
    "--set",
    "set_values",
    metavar="KEY=VALUE",
    multiple=True,
    help="A template variable (repeatable; dotted keys nest, as in helm).",
)
@click.option(
    "--network",
    type=click.Choice(["host", "pod"]),
    default="host",
    show_default=True,
    help="host: TF_CONFIG names hosts. pod: one headless Service per task, named by its DNS name.",
)
@click.option(
    "--namespace",
    metavar="NS",
    help="Namespace for documents that set none (default with --network pod: default).",
)
@click.option(
    "--cluster-domain",
    metavar="DOMAIN",
    help="With --network pod, use NAME.NAMESPACE.svc.DOMAIN (for example cluster.local).",
)
@click.option(
    "--tasks-per-host",
    type=int,
    default=1,
    show_default=True,
    help="Tasks on each selected host, on ports port, port+1, ...",
)
@click.option(
    "--name",
    metavar="NAME",
    help="Value of the simpletfjob/job label (default: the template's stem).",
)
@click.option(
    "--no-labels",
    "labels",
    flag_value=False,
    default=True,
    help="Do not add the app.kubernetes.io/managed-by and simpletfjob/* labels.",
)
@click.option(
    "-f",
    "--values",
    "value_files",
    metavar="FILE",
    multiple=True,
    help="Template variables from a YAML mapping (repeatable; later files win, --set wins over all).",
)
@click.option(
    "--validate",
    is_flag=True,
    help="Check every document against the Kubernetes schema before writing (offline).",
)
@click.option(
    "--kube-version",
    metavar="VERSION",
    help="Kubernetes version for --validate (implies it); default: the newest kubernetes-validate has.",
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_version,
    help="Show the version and exit.",
)
@help_option
def render_command(
    template: str | None,
    set_values: Sequence[str],
    value_files: Sequence[str],
    exc: str | None,
    **options: Any,
) -> None:
    """Render TEMPLATE once per TensorFlow task into one multi-document Job stream.

    TEMPLATE is a file, or the name of a built-in template; a file that exists
    wins (write ./NAME to render a file named like a built-in or a command).
    A template's header can give defaults for variables and for --psn, --chief,
    --evaluator, --evaluator-in-cluster, --port, -N, --tasks-per-host and
    --network; the command line wins.
    A built-in's default output is ./NAME_tfjob.yaml.

    \b
    Variables: <<type>> <<index>> <<host>> <<node>> <<port>> <<TF_CONFIG>>
    <<ps_hosts>> <<worker_hosts>> <<chief_hosts>> <<num_tasks>>, and --set values.
    The original tool's {{.type}} {{.index}} {{.host}} {{.TF_CONFIG}} work too.

    \b
    Example:
      simpletfjob mnist.yaml -N 3 -E -o - | kubectl apply -f -

    \b
    Other commands:
      simpletfjob templates                   list the built-in templates
      simpletfjob init NAME [-o FILE]         write a copy of a built-in to edit
    """
    from click.core import ParameterSource

    from simpletfjob.catalog import prepare_options
    from simpletfjob.pipeline import run
    from simpletfjob.values import parse_set

    if template is None:
        if exc is not None and exc.endswith((".yaml", ".yml")):
            raise click.UsageError(
                f"-E took {exc!r} as the exclusion file; put -E after the template, or write -E exc"
            )
        raise click.UsageError("missing the TEMPLATE argument")
    sets = [parse_set(item) for item in set_values]
    context = click.get_current_context()
    given = {
        name
        for name in options
        if context.get_parameter_source(name) is not ParameterSource.DEFAULT
    }
    # Warnings wait until the run has succeeded: a failure is one line, whatever came before.
    warnings: list[str] = []
    prepared = prepare_options(template, {**options, "exc": exc}, given, value_files, sets)
    summary = run(prepared, warnings.append)
    for message in warnings:
        _say(f"simpletfjob: warning: {message}")
    _say(summary)


@click.command("templates", context_settings=CONTEXT, add_help_option=False)
@help_option
def templates_command() -> None:
    """List the built-in templates, with what each is for.

    Render one with `simpletfjob NAME --nodes H1,H2,...`, or copy it to edit
    with `simpletfjob init NAME`.
    """
    from simpletfjob.catalog import describe_builtins
    from simpletfjob.output import write_stdout

    rows = describe_builtins()
    width = max((len(name) for name, _ in rows), default=0)
    write_stdout([f"{name:<{width}}  {description}".rstrip() + "\n" for name, description in rows])


@click.command("init", context_settings=CONTEXT, add_help_option=False)
@click.argument("name")
@click.option(
    "-o",
    "--output",
    metavar="FILE|DIR|-",
    help="Where to write; default ./NAME.yaml; a directory gets DIR/NAME.yaml; '-' is stdout.",
)
@click.option("--force", is_flag=True, help="Overwrite FILE if it exists.")
@help_option
def init_command(name: str, output: str | None, force: bool) -> None:
    """Write a copy of the built-in template NAME, to edit and render as your own."""
    from simpletfjob.catalog import write_copy

    _say(write_copy(name, output, force))


# Words that name a command rather than a template when they come first.
COMMANDS = {"templates": templates_command, "init": init_command}


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: never a traceback, always one line on stderr for a failure."""
    args = list(sys.argv[1:] if argv is None else argv)
    command, prog = render_command, "simpletfjob"
    if args and args[0] in COMMANDS:
        command, prog = COMMANDS[args[0]], f"simpletfjob {args[0]}"
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


def _say(line: str) -> None:
    """One line on stderr, whatever it quotes.

    A path or value quoted as it was given can hold a newline, which would make
    two lines, a terminal escape, or a character that reorders the text: control
    and format characters, line and paragraph separators and bytes that are not
    UTF-8 are shown escaped, as repr() shows them. Other characters stay as they are.
    """
    if not line.isprintable():
        import unicodedata

        line = "".join(repr(c)[1:-1] if unicodedata.category(c) in _ESCAPED else c for c in line)
    print(line, file=sys.stderr)


# Control, format, line and paragraph separator, and surrogate (undecodable byte) characters.
_ESCAPED = frozenset(["Cc", "Cf", "Zl", "Zp", "Cs"])


def _fail(message: str, code: int) -> None:
    first = message.strip().splitlines()[0] if message.strip() else "failed"
    _say(f"simpletfjob: error: {first}")
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
