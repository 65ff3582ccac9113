"""The options of `nodes` and `init`, the commands besides the render that act on no run.

Apart from the render's groups (render.py), so that a render does not build them.
"""

from __future__ import annotations

from simpletfjob.options.render import (
    ClusterOptions,
    NodeChoiceOptions,
    NodeOptions,
    ValueOptions,
    output_format,
)
from simpletfjob.options.table import OptionGroup, argument, option


class NodesOptions(NodeChoiceOptions, NodeOptions, ClusterOptions, ValueOptions):
    """`simpletfjob nodes`: what the nodes have free, which a render could use (--nodes-file alone of NodeOptions)."""

    template: str | None = option(
        "--template",
        default=None,
        metavar="FILE",
        help="Judge the nodes for this template's run. Its tolerations, host ports and each role's "
        "asks, as its render would.",
    )
    output: str = output_format("table", "wide", "json", help="How to print the nodes.")


class InitOptions(OptionGroup):
    """`simpletfjob init NAME`: which built-in to copy, and where."""

    name: str = argument()
    output: str | None = option(
        "-o",
        "--output",
        default=None,
        metavar="FILE|DIR|-",
        help="Where to write; '-' is stdout. The default is ./NAME.yaml; a directory gets DIR/NAME.yaml.",
    )
    force: bool = option("--force", default=False, help="Overwrite FILE if it exists.")
