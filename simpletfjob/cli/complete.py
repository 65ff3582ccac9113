"""Shell completion: what click's completion protocol offers beside option names.

The command words at the first word; an option's choices; built-in templates and the
shell's file names where a template or a file goes; the runs, a run's tasks and the
namespaces from the cluster (within `RUN_TIMEOUT` seconds); the kubeconfig's contexts; and
after --set, the value names that the template named so far reads (`--set wor` offers
`workers=`). What cannot be read in time (no cluster, no rights, a template that does not
compile) offers nothing, silently. `kubectl_complete` answers kubectl's plugin completion
from the same completers. Completion only offers: values are checked when the command runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

    from simpletfjob.kube.connection import Connection

Completer = Callable[[click.Context, click.Parameter, str], list["CompletionItem"]]

RUN_TIMEOUT = 2.0  # seconds for the whole list of runs, connection included


def starting(words: Iterable[str], incomplete: str) -> list[CompletionItem]:
    """The words that start as typed, as candidates."""
    from click.shell_completion import CompletionItem

    return [CompletionItem(word) for word in words if word.startswith(incomplete)]


def choices(words: Sequence[str]) -> Completer:
    """The words that start as typed."""

    def complete(_: click.Context, __: click.Parameter, incomplete: str) -> list[CompletionItem]:
        return starting(words, incomplete)

    return complete


def templates(
    context: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """The built-in templates that start as typed, and the files the shell finds."""
    return [*builtins(context, param, incomplete), *files(context, param, incomplete)]


def _from_cluster(
    context: click.Context, incomplete: str, read: Callable[[Connection], Sequence[str]]
) -> list[CompletionItem]:
    """What `read` finds on the cluster that --kubeconfig, --context and -n (so far) name,
    within RUN_TIMEOUT seconds; nothing when it cannot."""
    from simpletfjob.kube.connection import Settings, connect

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
            names = read(conn)
    except Exception:  # no cluster, no rights, too slow: completion offers nothing
        return []
    return starting(names, incomplete)


def runs(context: click.Context, _: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The runs in the namespace that --kubeconfig, --context and -n (so far) name."""
    from simpletfjob.runs.objects import run_names

    return _from_cluster(context, incomplete, run_names)


def tasks(context: click.Context, _: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The tasks of the run already named (`logs RUN <TAB>`), but those already given."""
    from simpletfjob.runs.objects import task_names

    run = context.params.get("run")
    if not run:
        return []
    given = set(context.params.get("tasks") or ())
    return [
        item
        for item in _from_cluster(context, incomplete, lambda conn: task_names(conn, run))
        if item.value not in given
    ]


def namespaces(context: click.Context, _: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The cluster's namespaces."""
    from simpletfjob.runs.objects import namespace_names

    return _from_cluster(context, incomplete, namespace_names)


def contexts(context: click.Context, _: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The contexts of the kubeconfig files kubectl would read (--kubeconfig, $KUBECONFIG)."""
    import os

    from simpletfjob.kube.kubeconfig import read_kubeconfigs
    from simpletfjob.kube.paths import kubeconfig_paths

    try:
        paths = kubeconfig_paths(context.params.get("kubeconfig"), os.environ)
        names = sorted(read_kubeconfigs(paths or []).sections["contexts"])
    except Exception:  # no kubeconfig, or one that does not read: nothing to offer
        return []
    return starting(names, incomplete)


def value_names(
    context: click.Context, _: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """`--set NAME=`: the values the command line's template reads (`workers=`), as it is so far."""
    from click.shell_completion import CompletionItem

    template = context.params.get("template")
    if not template or "=" in incomplete:
        return []
    from click.core import ParameterSource

    given = context.get_parameter_source("framework") not in (None, ParameterSource.DEFAULT)
    try:
        names = template_value_names(template, context.params.get("framework") if given else None)
    except Exception:  # a template that cannot be read or compiled offers nothing
        return []
    return [CompletionItem(f"{name}=") for name in names if name.startswith(incomplete)]


def template_value_names(template: str, framework_name: str | None) -> list[str]:
    """The names a template reads that --set may give: its header's values and the names
    its text reads, but the tasks' and the frameworks' own variables."""
    from jinja2 import meta

    from simpletfjob.frameworks import framework as framework_of
    from simpletfjob.frameworks import reserved_variables
    from simpletfjob.template.catalog import locate
    from simpletfjob.template.compiled import translate_source, unix_newlines
    from simpletfjob.template.sandbox import make_environment

    source = locate(template)
    chosen = framework_name or source.header.options.get("framework") or "tensorflow"
    fw = framework_of(str(chosen))
    text, _ = translate_source(
        unix_newlines(source.render_text()), fw.placed, fw.legacy, fw.blocks, source.name
    )
    read = meta.find_undeclared_variables(make_environment().parse(text))
    names = (read | set(source.header.values)) - set(reserved_variables())
    return sorted(name for name in names if name.isidentifier())


def files(_: click.Context, __: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The shell's own file names, as kubectl's -f offers them (cobra's default directive)."""
    from click.shell_completion import CompletionItem

    return [CompletionItem(incomplete, type="file")]


def builtins(_: click.Context, __: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The built-in templates that start as typed (init copies only those)."""
    from simpletfjob.template.catalog import builtin_names

    return starting(builtin_names(), incomplete)


def for_argument(name: str) -> Completer | None:
    """The completer of a command's positional argument, by its field's name."""
    return {"template": templates, "name": builtins, "run": runs, "tasks": tasks}.get(name)


def for_option(name: str) -> Completer | None:
    """The completer of an option that takes no fixed choices, by its field's name."""
    return {
        "template": templates,  # nodes --template
        # the options that name a file: the shell's file names
        **dict.fromkeys(("value_files", "nodes_file", "kubeconfig", "psf", "exc", "output"), files),
        "namespace": namespaces,
        "context": contexts,
        "set_values": value_names,
    }.get(name)


def first_word(
    context: click.Context, incomplete: str, commands: Sequence[str], default: click.Command
) -> list[CompletionItem]:
    """The first word: a command, or what the default command takes (a template, an option)."""
    inner = default.make_context("", [], parent=context, resilient_parsing=True)
    if incomplete.startswith("-"):
        return default.shell_complete(inner, incomplete)
    words = starting(commands, incomplete)
    template = next(p for p in default.params if p.name == "template")
    return [*words, *template.shell_complete(inner, incomplete)]


# cobra's ShellCompDirective bits, as kubectl reads them from a plugin's completion
NO_SPACE = 2  # the candidate goes on (`workers=`): no space after it
NO_FILE_COMPLETION = 4  # offer no file names when nothing matches


def kubectl_complete(
    command: click.Command, words: Sequence[str], program: str, complete_var: str
) -> list[str]:
    """kubectl's plugin completion: `kubectl_complete-simpletfjob WORD... INCOMPLETE` prints
    the candidates for the last word, one a line, then `:DIRECTIVE` as cobra does (file
    names allowed where a template file may go, no space after `NAME=`)."""
    from click.shell_completion import ShellComplete

    args = list(words)
    incomplete = args.pop() if args else ""
    try:
        items = ShellComplete(command, {}, program, complete_var).get_completions(args, incomplete)
    except Exception:  # completion never fails aloud
        return [f":{NO_FILE_COMPLETION}"]
    values = [item.value for item in items if item.type == "plain"]
    directive = 0 if any(item.type in ("file", "dir") for item in items) else NO_FILE_COMPLETION
    if values and all(value.endswith("=") for value in values):
        directive |= NO_SPACE
    return [*values, f":{directive}"]
