"""The command line: click options -> an `Options` object -> the pipeline; errors -> one line, an exit code.

Exit status: 0 success, 1 a problem with the inputs, the cluster or the output,
2 a usage error (unknown option, bad option value, contradicting options).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from simpletfjob import __version__
from simpletfjob.errors import EXIT_ERROR, SimpleTFJobError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.command(context_settings=CONTEXT)
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
@click.option(
    "--chief", is_flag=True, help="Add one chief task (ParameterServerStrategy, Estimator)."
)
@click.option("--evaluator", is_flag=True, help="Add one evaluator task, on the last host.")
@click.option(
    "--evaluator-in-cluster",
    is_flag=True,
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
@click.version_option(__version__, "--version", prog_name="simpletfjob")
def render_command(
    template: str | None, set_values: Sequence[str], exc: str | None, **options: Any
) -> None:
    """Render TEMPLATE once per TensorFlow task into one multi-document Job stream.

    \b
    Variables: <<type>> <<index>> <<host>> <<node>> <<port>> <<TF_CONFIG>>
    <<ps_hosts>> <<worker_hosts>> <<chief_hosts>> <<num_tasks>>, and --set values.
    The original tool's {{.type}} {{.index}} {{.host}} {{.TF_CONFIG}} work too.

    \b
    Example:
      simpletfjob mnist.yaml -N 3 -E -o - | kubectl apply -f -
    """
    from simpletfjob.pipeline import Options, run
    from simpletfjob.values import merge, parse_set

    if template is None:
        if exc is not None and exc.endswith((".yaml", ".yml")):
            raise click.UsageError(
                f"-E took {exc!r} as the exclusion file; put -E after the template, or write -E exc"
            )
        raise click.UsageError("missing the TEMPLATE argument")
    values: dict[str, Any] = {}
    for item in set_values:
        values = merge(values, parse_set(item))
    summary = run(Options(template=template, exc=exc, values=values, **options))
    click.echo(summary, err=True)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: never a traceback, always one line on stderr for a failure."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        render_command.main(args, prog_name="simpletfjob", standalone_mode=False)
    except SimpleTFJobError as e:
        _fail(str(e), e.exit_code)
    except click.ClickException as e:
        hint = " (see simpletfjob --help)" if isinstance(e, click.UsageError) else ""
        _fail(e.format_message() + hint, e.exit_code)
    except click.exceptions.Abort:
        _fail("aborted", EXIT_ERROR)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except Exception as e:  # a bug: still one line, and a way to see the traceback
        if os.environ.get("SIMPLETFJOB_DEBUG"):
            raise
        _fail(
            f"internal error: {type(e).__name__}: {e} (set SIMPLETFJOB_DEBUG=1 for details)",
            EXIT_ERROR,
        )
    sys.exit(0)


def _fail(message: str, code: int) -> None:
    first = message.strip().splitlines()[0] if message.strip() else "failed"
    print(f"simpletfjob: error: {first}", file=sys.stderr)
    sys.exit(code)
