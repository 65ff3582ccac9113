"""`simpletfjob nodes`: the cluster's nodes, judged as a render judges them, and what they have free."""

from __future__ import annotations

from typing import Any

from simpletfjob.cli.params import make_command
from simpletfjob.options.commands import NodesOptions

# A render's host options that a view of every node has no use for: it shows each node
# under its name, excludes none and tells why of each anyway.
NODES_OMIT = ("nodes", "exc", "address", "explain")


@make_command(
    "nodes",
    NodesOptions,
    short_help="Show the nodes: eligible or why not, free GPUs, pods.",
    omit=NODES_OMIT,
)
def command(values: dict[str, Any], given: frozenset[str]) -> None:
    """Show each node of the cluster as a render would judge it, with its free GPUs.

    Free GPUs are the allocatable ones less what the node's non-terminated pods
    request, counted as `kubectl describe node` counts them. With --template, the
    template's tolerations and host ports are judged as a render of it would judge
    them; without one, every taint counts as untolerated and the host ports in use
    are shown but decide nothing. --nodes-file reads the nodes from a file, as a
    render does (a saved NodeList has no pods: GPUs count by allocatable). A last
    line on stderr sums it up.

    \b
    Example:
      simpletfjob nodes --gpus 8 -o wide
    """
    from simpletfjob.cli.status import columns
    from simpletfjob.output import write_stdout
    from simpletfjob.plan.survey import as_json, survey, survey_summary, table_rows
    from simpletfjob.streams import say, warn

    options = NodesOptions(**values)
    result = survey(options, warn)
    if options.output == "json":
        write_stdout([as_json(result.verdicts)])
    else:
        header, *rows = table_rows(result.verdicts, wide=options.output == "wide")
        write_stdout(columns(header, rows))
    say(survey_summary(result))
