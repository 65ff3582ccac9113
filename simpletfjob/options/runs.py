"""The options of the commands that act on a run on the cluster: apply, run, status, wait, logs,
delete, diagnose.

They build on render.py's groups: apply and run take every option of a render (but -o)
and its limits (LimitOptions), and the others only which cluster and namespace.
"""

from __future__ import annotations

import os
import re
from typing import Any

from simpletfjob.errors import UsageError
from simpletfjob.identity import MOST_RESTARTS
from simpletfjob.options.limits import LimitOptions
from simpletfjob.options.progress import ProgressOptions, StallOptions, stall_timeout
from simpletfjob.options.queue import QUEUE_NAME, QueueOptions, queue_namespace
from simpletfjob.options.render import (
    ClusterOptions,
    ConnectionOptions,
    Options,
    nodes_or_nodes_file,
    output_format,
    ports_fit,
    timeout,
)
from simpletfjob.options.restarts import RestartOptions
from simpletfjob.options.rules import duration, namespace_name
from simpletfjob.options.table import Must, OneOf, argument, between, option


class ApplyOptions(Options, LimitOptions, ProgressOptions, QueueOptions):
    """`simpletfjob apply TEMPLATE`: a render's options, and how to apply the run."""

    section = "Apply options"

    replace_run: bool = option(
        "--replace",
        default=False,
        help="Delete the run first if it exists. Propagation Foreground, and wait until its Jobs "
        "and Services are gone, then apply: how to change a run's pod templates, or run it again. "
        "Nothing is deleted unless the server's dry run accepts every delete and every new object "
        "first.",
    )
    force_conflicts: bool = option(
        "--force-conflicts",
        default=False,
        help="Take over fields another manager owns. Server-side apply's force, as kubectl apply "
        "--server-side --force-conflicts does.",
    )
    dry_run: str = option(
        "--dry-run",
        default="none",
        rule=OneOf("none", "server", "client"),
        help="A dry run, that changes nothing. server: the server judges every object, and nothing "
        "is changed; client: print the objects apply would send, and send nothing (only reads "
        "reach the server).",
    )
    timeout: float | None = timeout(
        None,
        "How long --replace waits for the old run to go (default 5m), and --queue for the "
        "run's turn (default: as long as it takes; then exit 3, nothing applied).",
    )


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


class DeleteOptions(ConnectionOptions):
    """`simpletfjob delete RUN`: which run, and whether to wait until its Jobs are gone."""

    section = "Delete options"

    run: str = argument()
    wait: bool = option("--wait", default=False, help="Return once the run's Jobs are gone.")
    timeout: float = timeout(300.0, "How long --wait waits.")
    ignore_not_found: bool = option(
        "--ignore-not-found",
        default=False,
        help="A run that is not there is no error. Exit 0 and print nothing, as kubectl delete "
        "--ignore-not-found does (for a cleanup step that may find nothing to do).",
    )


CLEANUP_CHOICES = ("running", "all", "none")


def failure_tail() -> Any:
    """--tail-on-failure N, for wait and status."""
    return option(
        "--tail-on-failure",
        default=20,
        type=int,
        show_default=True,
        metavar="N",
        rule=Must("0 or more", lambda value: value >= 0),
        help="Log lines to show of the failing task. When the run has failed, its last N log "
        "lines on stderr, with the Warning events of its Job and pods; 0 shows no lines.",
    )


def cleanup_grace() -> Any:
    """--cleanup-grace D, for wait and run."""
    return duration(
        "--cleanup-grace",
        default=10.0,
        show_default=True,
        help="How long finishing tasks get to end before the cleanup. After a success, the "
        "tasks that end by themselves (the workers of MultiWorkerMirroredStrategy, torchrun and "
        "JAX) are given this long before --cleanup deletes what still runs; it ends as soon as "
        "they have. A run with a parameter server waits for none. 0 deletes at once.",
    )


def diagnose_on_failure() -> Any:
    """--diagnose-on-failure DIR, for wait and run."""
    return option(
        "--diagnose-on-failure",
        default=None,
        metavar="DIR",
        rule=Must("an existing directory", os.path.isdir),
        help="Write a bundle into DIR if the run fails. The bundle `diagnose` writes, before "
        "anything is deleted; the failure line names it (under run, one per restarted attempt).",
    )


class StatusOptions(ConnectionOptions):
    """`simpletfjob status [RUN]`: one run's tasks, or every run in the namespace."""

    run: str | None = argument(required=False)
    output: str = output_format(
        "table",
        "json",
        "yaml",
        "name",
        help="How to print. A table, JSON or YAML; name: one job.batch/NAME line per Job of the "
        "run (of every run, without RUN), as kubectl get -o name prints them.",
    )
    watch: bool = option(
        "-w",
        "--watch",
        default=False,
        help="Follow the run until it ends. After the table, print a task's row again whenever it "
        "changes, as kubectl get -w does; exit as wait does (0 succeeded, 1 failed). Needs RUN.",
    )
    tail_on_failure: int = failure_tail()
    all_namespaces: bool = option(
        "-A",
        "--all-namespaces",
        default=False,
        help="Every run in every namespace. With a NAMESPACE column first, as kubectl get -A lists them. Not with RUN.",
    )
    queue_namespace: str | None = queue_namespace()

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
        None, "Give up after this long (30s, 5m, 1h). Exit 3 and leave the run as it is."
    )
    cleanup: str = option(
        "--cleanup",
        default="running",
        show_default=True,
        rule=OneOf(*CLEANUP_CHOICES),
        help="What to delete when the run ends. The Jobs and Services of the tasks still not "
        "finished (running), the whole run (all), or nothing (none).",
    )
    cleanup_grace: float = cleanup_grace()
    tail_on_failure: int = failure_tail()
    diagnose_on_failure: str | None = diagnose_on_failure()
    stall_timeout: float | None = stall_timeout(
        "Fail the run when no new step comes this long. A stall: every task Running, and the "
        "reporting task shows no new step within this long of the moment all were Running or of "
        "its last one; exit 1, and --cleanup applies. The default: the run's own, as run noted "
        "it (--stall-timeout, or its template's header); else no stall check."
    )


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
        help="Only the tasks of this role (repeatable). Chief, ps, worker or evaluator, as the run's framework has them.",
    )
    follow: bool = option(
        "-f",
        "--follow",
        default=False,
        help="Follow the logs until the run ends. Every task's log, pods made later included; exit "
        "as wait does (0 succeeded, 1 failed).",
    )
    tail: int | None = option(
        "--tail",
        default=None,
        type=int,
        rule=Must("-1 or more", lambda value: value >= -1),
        help="Lines from the end of each log. All for one task, 10 per task for several; -1 for all.",
    )
    since: float | None = duration(
        "--since",
        default=None,
        help="Only lines newer than this (30s, 5m, 1h).",
    )
    timestamps: bool = option(
        "--timestamps", default=False, help="Start each line with the kubelet's timestamp."
    )
    previous: bool = option(
        "-p",
        "--previous",
        default=False,
        help="Each pod's last terminated container. The crash of a task that keeps restarting.",
    )
    container: str | None = option(
        "-c",
        "--container",
        default=None,
        metavar="NAME",
        help="This container. The default is the one that carries TF_CONFIG or the framework's env, else the first.",
    )
    all_containers: bool = option(
        "--all-containers", default=False, help="Every container of each pod."
    )
    prefix: bool | None = option(
        "--prefix",
        default=None,
        type=bool,
        negatable=True,
        help="Prefix each line with its task. The default: when more than one task is shown.",
    )
    color: str = option(
        "--color",
        default="auto",
        show_default=True,
        rule=OneOf("auto", "always", "never"),
        help="Colour each task's prefix. With auto, when stdout is a terminal.",
    )

    def check(self) -> None:
        """What the options cannot say together."""
        if self.container and self.all_containers:
            raise UsageError("-c/--container cannot go with --all-containers")


class DiagnoseOptions(ConnectionOptions):
    """`simpletfjob diagnose RUN`: one bundle with what a bug report about the run needs."""

    section = "Diagnose options"

    run: str = argument()
    output: str | None = option(
        "-o",
        "--output",
        default=None,
        metavar="FILE",
        help="Write the bundle to FILE (default: RUN-diagnose-TIME.tar.gz in the current "
        "directory, TIME in UTC, such as 20261129T071500Z).",
    )


class RunOptions(
    Options, LimitOptions, ProgressOptions, StallOptions, RestartOptions, QueueOptions
):
    """`simpletfjob run TEMPLATE`: a render's options, how to follow the run, and its restarts."""

    section = "Run options"

    max_restarts: int = option(
        "--max-restarts",
        default=0,
        show_default=True,
        metavar="N",
        rule=between(0, MOST_RESTARTS),  # status reads a larger count back as wrong
        help="Restart the run whole up to N times. Delete it, plan it again against the cluster as "
        "it is, and apply it (at most 1000 times), when a task's Job fails, a node refuses a "
        "task's pod, or a task's node is NotReady or gone for longer than --node-grace, as "
        "--restart-on says; a task the training does not depend on (a TensorFlow evaluator) is "
        "restarted alone.",
    )
    node_grace: float = duration(
        "--node-grace",
        default=60.0,
        show_default=True,
        help="How long a task's node may be away. NotReady or gone for longer, it fails the run.",
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
        help="Whose logs to stream to stdout. Prefixed by task; the default is the task that "
        "decides success (the chief, or worker 0).",
    )
    on_interrupt: str = option(
        "--on-interrupt",
        default="leave",
        show_default=True,
        rule=OneOf("leave", "delete"),
        help="What an interrupt does to the run. On SIGINT, SIGTERM or SIGHUP: leave the run as it "
        "is (and say what that is, and how to go on), or delete it, once the writes in flight are "
        "answered (once the run has ended, only what --cleanup deletes).",
    )
    cleanup: str = option(
        "--cleanup",
        default="running",
        show_default=True,
        rule=OneOf(*CLEANUP_CHOICES),
        help="What to delete at the end, as wait does. The Jobs and Services of the tasks still "
        "not finished (running), the whole run (all), or nothing (none).",
    )
    cleanup_grace: float = cleanup_grace()
    replace_run: bool = option(
        "--replace",
        default=False,
        help="Delete the run first if it exists. As apply --replace does: propagation Foreground, "
        "and wait until it is gone before the first apply.",
    )
    force_conflicts: bool = option(
        "--force-conflicts",
        default=False,
        help="Take over fields another manager owns. As apply --force-conflicts does.",
    )
    tail_on_failure: int = failure_tail()
    diagnose_on_failure: str | None = diagnose_on_failure()
    timeout: float | None = timeout(
        None,
        "Give up after this long, restarts included. As 30s, 5m, 1h: exit 3 and leave the run as it is.",
    )


RunOptions._rules = (nodes_or_nodes_file, ports_fit, labels_on)


class QueueListOptions(ClusterOptions):
    """`simpletfjob queue NAME`: the runs waiting in a queue, in order."""

    name: str = argument()
    namespace: str | None = option(
        "-n",
        "--namespace",
        default=None,
        metavar="NS",
        rule=namespace_name,
        help="The queue's namespace (default: the context's, else default).",
    )
    output: str = output_format("table", "json", help="How to print: a table, or a JSON list.")

    def check(self) -> None:
        """The queue's name follows --queue's rule."""
        found = QUEUE_NAME(self.name)
        if found:
            raise UsageError(f"the queue's name {found}")
