"""`simpletfjob templates`: the built-in templates, one line each."""

from __future__ import annotations

from typing import Any

from simpletfjob.cli.params import make_command


@make_command("templates", None, short_help="List the built-in templates.")
def command(values: dict[str, Any], given: frozenset[str]) -> None:
    """List the built-in templates, with what each is for.

    Render one with `simpletfjob NAME --nodes H1,H2,...`, or copy it to edit
    with `simpletfjob init NAME`.
    """
    from simpletfjob.output import write_stdout
    from simpletfjob.template.catalog import describe_builtins

    rows = describe_builtins()
    width = max((len(name) for name, _ in rows), default=0)
    write_stdout([f"{name:<{width}}  {description}".rstrip() + "\n" for name, description in rows])
