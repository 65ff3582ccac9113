"""Shell completion: what click's completion protocol offers beside option names.

- the command words, with the default command's templates, at the first word;
- the choices of an option that takes one of a few words (`-o`, `--network`, `--cleanup`);
- the built-in template names where a template goes (and the shell's own file names);
- the runs of the namespace where a run goes (status, wait, delete), when a cluster
  answers within `RUN_TIMEOUT` seconds; otherwise nothing, and never a message.

Values are checked by each option's own rule when the command runs, as before, so that
a wrong one reads the same on the command line and in a template header; completion
only offers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

Completer = Callable[[click.Context, click.Parameter, str], list["CompletionItem"]]

RUN_TIMEOUT = 2.0  # seconds for the whole list of runs, connection included


def choices(words: Sequence[str]) -> Completer:
    """The words that start as typed."""

    def complete(_: click.Context, __: click.Parameter, incomplete: str) -> list[CompletionItem]:
        from click.shell_completion import CompletionItem

        return [CompletionItem(word) for word in words if word.startswith(incomplete)]

    return complete


def templates(_: click.Context, __: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The built-in templates that start as typed, and the files the shell finds."""
    from click.shell_completion import CompletionItem

    from simpletfjob.template.catalog import builtin_names

    found = [CompletionItem(name) for name in builtin_names() if name.startswith(incomplete)]
    return [*found, CompletionItem(incomplete, type="file")]


def runs(context: click.Context, _: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The runs in the namespace that --kubeconfig, --context and -n (so far) name."""
    from click.shell_completion import CompletionItem

    from simpletfjob.kube.connection import Settings, connect
    from simpletfjob.runs.objects import run_names

    settings = Settings(
        kubeconfig=context.params.get("kubeconfig"),
        context=context.params.get("context"),
        namespace=context.params.get("namespace"),
        connect_timeout=RUN_TIMEOUT,
        read_timeout=RUN_TIMEOUT,
        deadline=RUN_TIMEOUT,
        attempts=1,
    )
    try:
        with connect(settings) as conn:
            names = run_names(conn)
    except Exception:  # no cluster, no rights, too slow: completion offers nothing
        return []
    return [CompletionItem(name) for name in names if name.startswith(incomplete)]


def for_argument(name: str) -> Completer | None:
    """The completer of a command's positional argument, by its field's name."""
    return {"template": templates, "run": runs}.get(name)


def first_word(
    context: click.Context, incomplete: str, commands: Sequence[str], default: click.Command
) -> list[CompletionItem]:
    """The first word: a command, or what the default command takes (a template, an option)."""
    from click.shell_completion import CompletionItem

    inner = default.make_context("", [], parent=context, resilient_parsing=True)
    if incomplete.startswith("-"):
        return default.shell_complete(inner, incomplete)
    words = [CompletionItem(name) for name in commands if name.startswith(incomplete)]
    template = next(p for p in default.params if p.name == "template")
    return [*words, *template.shell_complete(inner, incomplete)]
