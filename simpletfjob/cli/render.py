"""`simpletfjob render TEMPLATE ...`, also run as `simpletfjob TEMPLATE ...` (the default command)."""

from __future__ import annotations

import sys
from typing import Any

import click

from simpletfjob.cli.table import make_command, version_option
from simpletfjob.options import Options


@make_command(
    "render",
    Options,
    short_help="Render TEMPLATE into the Jobs of a run (the default command).",
    extra=[version_option()],
)
def command(values: dict[str, Any], given: frozenset[str]) -> None:
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
    """
    from simpletfjob.catalog import prepare_options
    from simpletfjob.pipeline import run
    from simpletfjob.values import parse_set

    if values["template"] is None:
        exc = values["exc"]
        context = click.get_current_context()
        if exc is not None and exc.endswith((".yaml", ".yml")):
            raise click.UsageError(
                f"-E took {exc!r} as the exclusion file; put -E after the template, or write -E exc",
                context,
            )
        raise click.UsageError("missing the TEMPLATE argument", context)
    options = Options(**values)
    sets = [parse_set(item) for item in options.set_values]
    summary = run(prepare_options(options, given, sets))
    print(summary, file=sys.stderr)
