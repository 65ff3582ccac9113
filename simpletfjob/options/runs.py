"""The options of the commands that act on a run on the cluster: apply, run, status, wait, delete.

They build on render.py's groups: apply and run take every option of a render (but -o)
and its limits (LimitOptions), and the others only which cluster and namespace.
"""

from __future__ import annotations

import re
from typing import Any

from simpletfjob.errors import UsageError
from simpletfjob.identity import MOST_RESTARTS
from simpletfjob.options.limits import LimitOptions
from simpletfjob.options.render import (
    ConnectionOptions,
    Options,
    nodes_or_nodes_file,
    output_format,
    ports_fit,
    timeout,
)
from simpletfjob.options.restarts import RestartOptions
from simpletfjob.options.rules import format_duration, parse_duration
from simpletfjob.options.table import (
    Must,
    OneOf,
    argument,
    between,
    option,
)


class DryRun(OneOf):
    """kubectl's --dry-run words; only the server can judge a run against the one it holds."""

    def __call__(self, value: Any) -> str | None:
        if value == "client":
            return (
                "must be none or server, not 'client'; to see the documents, use simpletfjob render"
            )
        return super().__call__(value)


class ApplyOptions(Options, LimitOptions):
    """`simpletfjob apply TEMPLATE`: a render's options, and how to apply the run."""

    section = "Apply options"

    replace_run: bool = option(
        "--replace",
        default=False,
        help="Delete the run if it exists (propagation Foreground), wait until its Jobs and "
        "Services are gone, then apply: how to change a run's pod templates, or run it again. "
        "Nothing is deleted unless the server's dry run accepts every delete and every new "
        "object first.",
    )
    force_conflicts: bool = option(
        "--force-conflicts",
        default=False,
        help="Take over fields that another field manager owns (server-side apply force), "
        "as kubectl apply --server-side --force-conflicts does.",
    )
    dry_run: str = option(
        "--dry-run",
        default="none",
        metavar="[none|server]",
        rule=DryRun("none", "server"),
        help="server: the server judges every object, and nothing is changed.",
    )
    timeout: float = timeout(300.0, "How long --replace waits for the old run to go.")


def labels_on(options: Options) -> None:
    if not options.labels:
        raise UsageError(
            "--no-labels cannot go with apply: the labels are what make the Jobs one run; "
            "render with --no-labels and apply with kubectl instead"
        )


def replace_is_real(options: Options) -> None:
    if isinstance(options, ApplyOptions) and options.replace_run and options.dry_run == "server":
        raise UsageError(
            "--replace cannot go with --dry-run=server: the server cannot judge the new objects "
            "while the old ones are still there"
        )


def cleanup_has_an_owner(options: Options) -> None:
    if (
        isinstance(options, LimitOptions)
        and options.cleanup_after is not None
        and options.success_policy == "all-workers"
    ):
        raise UsageError(
            "--cleanup-after needs one task that decides the run (the chief, or worker 0); "
            "under --success-policy all-workers no single task does"
        )


# An apply reads nodes from the cluster it applies to, or takes them from a host list:
# --kubeconfig and --context choose the cluster either way.
ApplyOptions._rules = (nodes_or_nodes_file, ports_fit, labels_on, replace_is_real)
# Checked once the framework's default policy is known (after the template's header).
LIMIT_RULES = (cleanup_has_an_owner,)


class DeleteOptions(ConnectionOptions):
    """`simpletfjob delete RUN`: which run, and whether to wait until its Jobs are gone."""

    section = "Delete options"

    run: str = argument()
    wait: bool = option("--wait", default=False, help="Return once the run's Jobs are gone.")
    timeout: float = timeout(300.0, "How long --wait waits.")
    ignore_not_found: bool = option(
        "--ignore-not-found",
        default=False,
        help="A run that does not exist is no error: exit 0 and print nothing, as kubectl "
        "delete --ignore-not-found does (for a cleanup step that may find nothing to do).",
    )


CLEANUP_CHOICES = ("running", "all", "none")


def failure_tail() -> Any:
    """--tail-on-failure N, for wait and status: how much of the failing task's log to show."""
    return option(
        "--tail-on-failure",
        default=20,
        type=int,
        show_default=True,
        metavar="N",
        rule=Must("0 or more", lambda value: value >= 0),
        help="When the run has failed, show the failing task's last N log lines on stderr, "
        "with the Warning events of its Job and pods; 0 shows no lines.",
    )


class StatusOptions(ConnectionOptions):
    """`simpletfjob status [RUN]`: one run's tasks, or every run in the namespace."""

    run: str | None = argument(required=False)
    output: str = output_format(
        "table",
        "json",
        "yaml",
        "name",
        default="table",
        help="How to print: a table, JSON or YAML; name: one job.batch/NAME line per Job of "
        "the run (of every run, without RUN), as kubectl get -o name prints them.",
    )
    watch: bool = option(
        "-w",
        "--watch",
        default=False,
        help="After the table, print a task's row again whenever it changes, as kubectl get "
        "-w does, until the run ends; exit as wait does (0 succeeded, 1 failed). Needs RUN.",
    )
    tail_on_failure: int = failure_tail()
    all_namespaces: bool = option(
        "-A",
        "--all-namespaces",
        default=False,
        help="Every run in every namespace, with a NAMESPACE column first, as kubectl get -A "
        "lists them. Not with RUN.",
    )

    def check(self) -> None:
        """What the options cannot say together."""
        if self.all_namespaces and self.run is not None:
            # kubectl: "a resource cannot be retrieved by name across all namespaces"
            raise UsageError(
                "-A/--all-namespaces cannot go with RUN: a run is read by name in one "
                "namespace (use -n NS)"
            )
        if self.watch and self.run is None:
            raise UsageError("-w/--watch needs RUN: it follows one run")
        if self.watch and self.output != "table":
            raise UsageError("-w/--watch prints a table: it cannot go with -o " + self.output)


class WaitOptions(ConnectionOptions):
    """`simpletfjob wait RUN`: follow a run to its end, then clean up."""

    run: str = argument()
    timeout: float | None = timeout(
        None, "Give up after this long (30s, 5m, 1h), exit 3 and leave the run as it is."
    )
    cleanup: str = option(
        "--cleanup",
        default="running",
        show_default=True,
        rule=OneOf(*CLEANUP_CHOICES),
        help="When the run ends: delete the Jobs and Services of the tasks still not finished "
        "(running), the whole run (all), or nothing (none).",
    )
    tail_on_failure: int = failure_tail()


class LogsOptions(ConnectionOptions):
    """`simpletfjob logs RUN [TASK...]`: the run's container logs, merged and prefixed by task."""

    section = "Logs options"

    run: str = argument()
    tasks: tuple[str, ...] = argument(required=False, multiple=True)
    roles: tuple[str, ...] = option(
        "--role",
        default=(),
        multiple=True,
        metavar="ROLE",
        help="Only the tasks of this role (chief, ps, worker, evaluator); may be repeated.",
    )
    follow: bool = option(
        "-f",
        "--follow",
        default=False,
        help="Stream every task's log, pods made later included, until the run ends; exit "
        "as wait does (0 succeeded, 1 failed).",
    )
    tail: int | None = option(
        "--tail",
        default=None,
        type=int,
        rule=Must("-1 or more", lambda value: value >= -1),
        help="Lines from the end of each log: all for one task, 10 per task for several; "
        "-1 for all.",
    )
    since: float | None = option(
        "--since",
        default=None,
        type=float,
        parse=parse_duration,
        format=format_duration,
        metavar="DURATION",
        help="Only lines newer than this (30s, 5m, 1h).",
    )
    timestamps: bool = option(
        "--timestamps", default=False, help="Start each line with the kubelet's timestamp."
    )
    previous: bool = option(
        "-p",
        "--previous",
        default=False,
        help="Each pod's last terminated container: the crash of a task that keeps restarting.",
    )
    container: str | None = option(
        "-c",
        "--container",
        default=None,
        metavar="NAME",
        help="This container (default: the one that carries TF_CONFIG or the framework's env, else the first).",
    )
    all_containers: bool = option(
        "--all-containers", default=False, help="Every container of each pod."
    )
    prefix: bool | None = option(
        "--prefix",
        default=None,
        type=bool,
        negatable=True,
        help="Prefix each line with its task (default: when more than one task is shown).",
    )
    color: str = option(
        "--color",
        default="auto",
        show_default=True,
        rule=OneOf("auto", "always", "never"),
        help="Colour each task's prefix: auto when stdout is a terminal.",
    )

    def check(self) -> None:
        """What the options cannot say together."""
        if self.container and self.all_containers:
            raise UsageError("-c/--container cannot go with --all-containers")


class RunOptions(Options, LimitOptions, RestartOptions):
    """`simpletfjob run TEMPLATE`: a render's options, how to follow the run, and its restarts."""

    section = "Run options"

    max_restarts: int = option(
        "--max-restarts",
        default=0,
        show_default=True,
        metavar="N",
        rule=between(0, MOST_RESTARTS),  # status reads a larger count back as wrong
        help="Restart the whole run (delete it, plan again against the cluster as it is, "
        "apply) up to N times (at most 1000) when a task's Job fails, a node refuses a task's pod, or a "
        "task's node is NotReady or gone for longer than --node-grace, as --restart-on says; "
        "a task the training does not depend on (a TensorFlow evaluator) is restarted alone.",
    )
    node_grace: float = option(
        "--node-grace",
        default=60.0,
        type=float,
        parse=parse_duration,
        format=format_duration,
        metavar="DURATION",
        show_default=True,
        help="How long a task's node may be NotReady or gone before the run counts as failed.",
    )
    logs: str = option(
        "--logs",
        default="",
        metavar="all|none|TASK,...",
        rule=Must(
            "all, none or tasks such as chief-0,worker-1",
            lambda value: (
                bool(re.fullmatch(r"all|none|[a-z]+-\d+(,[a-z]+-\d+)*", value)) or value == ""
            ),
        ),
        help="Whose logs to stream to stdout, prefixed by task (default: the task that "
        "decides success, the chief or worker 0).",
    )
    on_interrupt: str = option(
        "--on-interrupt",
        default="leave",
        show_default=True,
        rule=OneOf("leave", "delete"),
        help="On SIGINT, SIGTERM or SIGHUP: leave the run as it is (and say what that is, "
        "and how to go on), or delete it, once the writes in flight are answered (once the "
        "run has ended, only what --cleanup deletes).",
    )
    cleanup: str = option(
        "--cleanup",
        default="running",
        show_default=True,
        rule=OneOf(*CLEANUP_CHOICES),
        help="When the run ends, as wait does: delete the Jobs and Services of the tasks "
        "still not finished (running), the whole run (all), or nothing (none).",
    )
    replace_run: bool = option(
        "--replace",
        default=False,
        help="Delete the run if it exists (propagation Foreground) and wait until it is "
        "gone before the first apply, as apply --replace does.",
    )
    force_conflicts: bool = option(
        "--force-conflicts",
        default=False,
        help="Take over fields that another field manager owns, as apply does.",
    )
    tail_on_failure: int = failure_tail()
    timeout: float | None = timeout(
        None,
        "Give up after this long (30s, 5m, 1h), restarts included: exit 3 and leave the run "
        "as it is.",
    )


RunOptions._rules = (nodes_or_nodes_file, ports_fit, labels_on)
