"""`simpletfjob init NAME`: a copy of a built-in template, to edit."""

from __future__ import annotations

from typing import Any

from simpletfjob.cli.params import make_command
from simpletfjob.options.commands import InitOptions
from simpletfjob.streams import say


@make_command("init", InitOptions, short_help="Write a copy of a built-in template, to edit.")
def command(values: dict[str, Any], given: frozenset[str]) -> None:
    """Write a copy of the built-in template NAME, to edit and render as your own."""
    from simpletfjob.template.catalog import write_copy

    options = InitOptions(**values)
    say(write_copy(options.name, options.output, options.force))
