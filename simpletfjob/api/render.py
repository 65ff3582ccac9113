"""`simpletfjob.render()`: a run's documents, as `simpletfjob render TEMPLATE -o -` writes them."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from simpletfjob.api import report
from simpletfjob.api.calls import checked

if TYPE_CHECKING:
    from simpletfjob.options.render import Options
    from simpletfjob.plan import Plan

AnyOptions = TypeVar("AnyOptions", bound="Options")  # a render's, apply's or run's

# Fields that render() does not take as keywords: it returns the documents (no -o), and
# prints no --explain table (the verdicts are in the SelectionError).
RENDER_TAKEN = ("template", "output", "explain")


@checked
def render(
    template: str | os.PathLike[str],
    *,
    nodes: str | Sequence[str] | None = None,
    num: int = -1,
    values: Mapping[str, Any] | None = None,
    **options: Any,
) -> list[dict[str, Any]]:
    """The documents of a run, parsed, as `simpletfjob render TEMPLATE -o -` would write them.

    `template` is a file or a built-in's name, as the command line takes it. `nodes` is
    `--nodes` (a list of names, or "h1,h2"), `num` is `-N` (-1: every eligible host; a
    template header's `num` applies when it is left at -1). `values` are template
    variables, layered as helm layers a `-f` file, after the header's and `value_files`
    and before `set_values` (`--set`). Every other option goes by its long name with
    underscores (`psn=1`, `tasks_per_host=2`, `network="pod"`, `no_labels=True`), with the
    command line's checks and messages. Warnings go to the `simpletfjob` logger.

    Raises a `simpletfjob.Error` subclass: UsageError for an unknown keyword or a bad
    value, TemplateError, SelectionError, ... as the CLI would report them.
    """
    from simpletfjob.options.render import Options

    planned = plan_for(
        Options, template, nodes=nodes, num=num, values=values, options=options, caller="render()"
    )
    from simpletfjob.yamlload import load_all

    return [doc for doc in load_all("".join(planned.chunks())) if doc is not None]


def prepared_options(
    group: type[AnyOptions],
    template: str | os.PathLike[str],
    *,
    nodes: str | Sequence[str] | None,
    num: int,
    values: Mapping[str, Any] | None,
    options: Mapping[str, Any],
    caller: str,
    taken: Sequence[str] = RENDER_TAKEN,
    fixed: Mapping[str, Any] | None = None,
) -> AnyOptions:
    """The group's options, from keywords, prepared as the CLI prepares its own (prepare_options)."""
    from simpletfjob.options.keywords import from_keywords
    from simpletfjob.template.catalog import prepare_options

    keywords = dict(options)
    if nodes is not None:
        keywords["nodes"] = nodes if isinstance(nodes, str) else ",".join(nodes)
    if num != -1:
        keywords["num"] = num
    given = from_keywords(group, keywords, caller=caller, taken=taken)
    chosen = group(template=os.fspath(template), **given, **(fixed or {}))
    return prepare_options(chosen, given, values)


def plan_for(group: type[Options], template: str | os.PathLike[str], **keywords: Any) -> Plan:
    """The plan of a render, its warnings logged; `keywords` as `prepared_options` takes them."""
    from simpletfjob.plan import plan

    planned = plan(prepared_options(group, template, **keywords))
    log_warnings(planned)
    return planned


def log_warnings(planned: Plan) -> None:
    """The plan's warnings and notes, to the logger (the CLI writes them to stderr)."""
    for message in planned.warnings:
        report.warn(message)
    for note in planned.notes:
        report.say(note)
