"""`simpletfjob.Client` and `Run`: the commands on runs, from Python, over the runs/ functions the CLI calls.

    client = simpletfjob.Client(namespace="ml")        # as kubectl: $KUBECONFIG, ~/.kube/config
    run = client.apply("mnist.yaml", num=3)            # `simpletfjob apply mnist.yaml -N 3 -n ml`
    run.status().state; run.wait(timeout="1h")        # `status mnist`, `wait mnist --timeout 1h`
    for line in run.logs(follow=True): ...             # `logs mnist -f`
    run.delete(wait=True)                              # `delete mnist --wait`
    client.run("mnist.yaml", max_restarts=2)           # `run mnist.yaml --max-restarts 2`

Each call connects as the command would (a kubeconfig read, a client made) and closes
the connection when it returns. Progress lines (a task's changes, what was applied or
deleted) go to the `simpletfjob` logger at INFO, warnings at WARNING; nothing is printed.
A run that ends Failed is an `Outcome` with `succeeded` False; --timeout passing raises
`TimedOut`; everything else the CLI would refuse raises its `simpletfjob.Error`.
Ctrl-C (KeyboardInterrupt) is not caught: it leaves the run as it is, as `wait` does.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simpletfjob.api import report
from simpletfjob.api.calls import checked
from simpletfjob.api.results import LogLine, Outcome, RunStatus

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection
    from simpletfjob.options.table import OptionGroup

# Fields that apply() and run() set from the Client, or do not take (no -o, no --explain table;
# run's --logs chooses what to print, and the API prints nothing).
_CLIENT_FIELDS = ("kubeconfig", "context", "namespace")
_APPLY_TAKEN = ("template", "output", "explain", *_CLIENT_FIELDS)
# --on-interrupt is the command's: in Python, Ctrl-C (KeyboardInterrupt) goes through, and
# leaves the run as it is.
_RUN_TAKEN = (*_APPLY_TAKEN, "logs", "on_interrupt")


def _checked(group: type[OptionGroup], caller: str, **keywords: Any) -> dict[str, Any]:
    """Keywords that are not None, read and checked as the command line's options are."""
    from simpletfjob.options.keywords import from_keywords

    given = {key: value for key, value in keywords.items() if value is not None}
    return from_keywords(group, given, caller=caller)


class Client:
    """A cluster and a namespace, chosen as kubectl and the CLI choose them.
    `kubeconfig` is --kubeconfig (default: $KUBECONFIG, ~/.kube/config, then in-cluster),
    `context` --context (default: the current one), `namespace` -n (default: the
    context's, else `default`). Nothing is read until a call needs the cluster."""

    @checked
    def __init__(
        self,
        kubeconfig: str | os.PathLike[str] | None = None,
        context: str | None = None,
        namespace: str | None = None,
    ) -> None:
        from simpletfjob.options.render import ConnectionOptions

        path = os.fspath(kubeconfig) if kubeconfig is not None else None
        _checked(
            ConnectionOptions, "Client()", kubeconfig=path, context=context, namespace=namespace
        )
        self.kubeconfig = path
        self.context = context
        self.namespace = namespace

    def __repr__(self) -> str:
        return (
            f"Client(kubeconfig={self.kubeconfig!r}, context={self.context!r}, "
            f"namespace={self.namespace!r})"
        )

    @checked
    def connect(self, purpose: str) -> Connection:
        """A connection, as a command's (close it, or use it in a `with`)."""
        return self._connect_to(self.namespace, purpose)

    def _connect_to(self, namespace: str | None, purpose: str) -> Connection:
        from simpletfjob.runs.objects import connect_for

        where = (self.kubeconfig, self.context, namespace)
        return connect_for(*where, purpose=purpose, warn=report.warn)

    @checked
    def apply(
        self,
        template: str | os.PathLike[str],
        *,
        num: int = -1,
        values: Mapping[str, Any] | None = None,
        name: str | None = None,
        nodes: str | Sequence[str] | None = None,
        **options: Any,
    ) -> Run:
        """`simpletfjob apply TEMPLATE`: render as `render()` does and apply the run; the Run applied.

        Options as render()'s, and apply's: `replace_run` (--replace), `force_conflicts`,
        `dry_run="server"` (the command line's "client" has no Run to return: use render()),
        `timeout`, `deadline`, `cleanup_after`; `queue` (with `queue_namespace`,
        `queue_lease`) waits in that queue, and applies at the run's turn.
        """
        from simpletfjob.api.render import log_warnings, prepared_options
        from simpletfjob.kube.connection import Settings
        from simpletfjob.options.runs import ApplyOptions
        from simpletfjob.plan import plan
        from simpletfjob.runs.apply import Choices, apply_run
        from simpletfjob.runs.queue import apply_queued

        prepared: ApplyOptions = prepared_options(
            ApplyOptions,
            template,
            nodes=nodes,
            num=num,
            values=values,
            options={**options, **({"name": name} if name is not None else {})},
            caller="apply()",
            taken=_APPLY_TAKEN,
            fixed=self._fields(),
        )
        if prepared.dry_run == "client":
            from simpletfjob.errors import UsageError

            raise UsageError(
                "apply(dry_run='client') sends nothing and makes no run; render() gives the "
                "documents, and dry_run='server' has the server judge them"
            )
        cluster = Settings(
            kubeconfig=self.kubeconfig, context=self.context, namespace=self.namespace
        )
        if prepared.queue is not None:  # applied at its turn (runs/queue.py)
            applied = apply_queued(cluster, prepared, plan, report.say, report.say, report.warn)
        else:
            applied = apply_run(
                cluster,
                lambda namespace: plan(prepared.replace(namespace=namespace)),
                Choices.of(prepared),
                report=report.say,
                warn=report.warn,
            )
        log_warnings(applied.planned)
        assert applied.planned.job is not None  # apply refuses --no-labels
        verb = "would apply" if prepared.dry_run == "server" else "applied"
        report.say(
            f"{verb} run {applied.planned.job} in namespace {applied.namespace} "
            f"({applied.counts()})"
        )
        return Run(self, applied.planned.job, applied.namespace)

    @checked
    def get(self, name: str) -> Run:
        """Run NAME in the namespace; NoRunError (`no run 'x' in namespace 'ml'`) when it has none."""
        from simpletfjob.runs.objects import check_run_name, find_run

        check_run_name(name)
        with self.connect("read runs from") as conn:
            found = find_run(conn, name)
        return Run(self, found.name, found.namespace)

    @checked
    def runs(self) -> list[Run]:
        """Every run in the namespace, by name (those whose Jobs are there)."""
        from simpletfjob.runs.objects import run_names

        with self.connect("read runs from") as conn:
            return [Run(self, name, conn.namespace) for name in run_names(conn)]

    @checked
    def run(
        self,
        template: str | os.PathLike[str],
        *,
        max_restarts: int = 0,
        timeout: float | str | None = None,
        num: int = -1,
        values: Mapping[str, Any] | None = None,
        name: str | None = None,
        nodes: str | Sequence[str] | None = None,
        diagnose_on_failure: str | os.PathLike[str] | None = None,
        **options: Any,
    ) -> Outcome:
        """`simpletfjob run TEMPLATE`: apply, follow to the end, restart the whole run on failure.

        `max_restarts`, `timeout` (seconds, or "30m"), `node_grace`, `cleanup`,
        `replace_run`, `deadline`, `cleanup_after`, `queue` (as apply()'s) and the render's
        options, as the CLI takes them. Returns the Outcome (a failure too, with its cause and
        the restarts made, and with `diagnose_on_failure`, a directory, the `bundle` written
        there); raises TimedOut when `timeout` passes first. No log is printed
        (read them with `Run.logs`).
        """
        from simpletfjob.api.render import log_warnings, prepared_options
        from simpletfjob.api.results import outcome
        from simpletfjob.errors import RunFailed
        from simpletfjob.options.runs import RunOptions
        from simpletfjob.plan import plan
        from simpletfjob.runs.apply import applied_counts
        from simpletfjob.runs.ending import succeeded_line
        from simpletfjob.runs.queue import empty_nodes
        from simpletfjob.runs.run import run_to_end

        given: dict[str, Any] = {"max_restarts": max_restarts, **options}
        if timeout is not None:
            given["timeout"] = timeout
        if name is not None:
            given["name"] = name
        if diagnose_on_failure is not None:
            given["diagnose_on_failure"] = os.fspath(diagnose_on_failure)
        prepared: RunOptions = prepared_options(
            RunOptions,
            template,
            nodes=nodes,
            num=num,
            values=values,
            options=given,
            caller="run()",
            taken=_RUN_TAKEN,
            fixed={**self._fields(), "logs": "none"},
        )
        restarts = 0

        def restarted(spent: int) -> None:
            nonlocal restarts
            restarts = spent

        with self.connect("run the run on") as conn:
            planning = prepared.replace(namespace=conn.namespace)

            def planned(restart: int = 0, empty: bool = False) -> Any:
                made = plan(empty_nodes(planning) if empty else planning.replace(restart=restart))
                log_warnings(made)
                return made

            def applied(made: Any, done: Sequence[tuple[Any, str]]) -> None:
                counts = applied_counts(done)
                report.say(f"applied run {made.job} in namespace {conn.namespace} ({counts})")

            try:
                ended = run_to_end(
                    conn,
                    lambda: planned(empty=prepared.queue is not None),  # (runs/queue.py)
                    planning,
                    say=report.say,
                    applied=applied,
                    printer=None,
                    replan=planned if prepared.queue is not None else None,
                    restarted=restarted,
                    waiting=report.say,
                )
            except RunFailed as e:
                if e.run is None:
                    raise
                return outcome(e.run, str(e), cause=e.cause, restarts=restarts, bundle=e.bundle)
        return outcome(ended, succeeded_line(ended), restarts=restarts)

    def _fields(self) -> dict[str, Any]:
        return {"kubeconfig": self.kubeconfig, "context": self.context, "namespace": self.namespace}


class Run:
    """A run on the cluster: its Jobs and Services labelled `simpletfjob/job=NAME` in a namespace."""

    @checked
    def __init__(self, client: Client, name: str, namespace: str) -> None:
        self.client = client
        self.name = name
        self.namespace = namespace

    def __repr__(self) -> str:
        return f"Run({self.name!r}, namespace={self.namespace!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Run) and (other.name, other.namespace) == (
            self.name,
            self.namespace,
        )

    def __hash__(self) -> int:
        return hash((self.name, self.namespace))

    def _connect(self, purpose: str) -> Connection:
        return self.client._connect_to(self.namespace, purpose)

    @checked
    def status(self) -> RunStatus:
        """`simpletfjob status NAME`: its state (Queued in a queue) and each task's; NoRunError if gone."""
        from simpletfjob.api.results import RunStatus, State, run_status
        from simpletfjob.runs.ending import read_status
        from simpletfjob.runs.objects import NoRunError
        from simpletfjob.runs.queue import place_of

        with self._connect("read runs from") as conn:
            try:
                found, notes = read_status(conn, self.name, None)
            except NoRunError:  # no Jobs: waiting in a queue, perhaps (runs/queue.py)
                if (place := place_of(conn, self.name, None)) is None:
                    raise
                queued = (self.name, self.namespace, State.QUEUED, None, None, (), "Queued")
                return RunStatus(*queued, None, None, queue=place)
        for note in notes:
            report.say(note)
        return run_status(found)

    @checked
    def wait(
        self,
        timeout: float | str | None = None,
        *,
        cleanup: str = "running",
        cleanup_grace: float | str = 10.0,
        tail_on_failure: int = 20,
        diagnose_on_failure: str | os.PathLike[str] | None = None,
        stall_timeout: float | str | None = None,
    ) -> Outcome:
        """`simpletfjob wait NAME`: follow the run to its end, then clean up as wait does.

        `timeout` in seconds or as "30m" (None: as long as it takes); `cleanup` is --cleanup
        (running: delete what still runs; all; none), after `cleanup_grace` (seconds or "10s")
        for the tasks that end by themselves, once the run has succeeded. A run that fails, or cannot be
        decided, is an Outcome with `succeeded` False (its failing task's last lines and
        events are logged; with `diagnose_on_failure`, a directory, the `bundle` written there);
        TimedOut when `timeout` passes first (the run left as it is). `stall_timeout` (seconds
        or "2m") is --stall-timeout: a run whose reporting task shows no new step that long
        fails (None: the run's own, as `run` noted it).
        """
        from simpletfjob.api.results import outcome
        from simpletfjob.errors import RunFailed
        from simpletfjob.options.runs import WaitOptions
        from simpletfjob.runs.ending import succeeded_line
        from simpletfjob.runs.wait import wait_for_run

        checked = _checked(
            WaitOptions, "wait()", timeout=timeout, cleanup=cleanup,
            cleanup_grace=cleanup_grace, tail_on_failure=tail_on_failure,
            diagnose_on_failure=None if diagnose_on_failure is None else os.fspath(diagnose_on_failure),
            stall_timeout=stall_timeout,
        )  # fmt: skip
        with self._connect("wait for a run on") as conn:
            try:
                ended = wait_for_run(
                    conn,
                    self.name,
                    timeout=checked.get("timeout"),
                    cleanup=checked["cleanup"],
                    tail=checked["tail_on_failure"],
                    context=self.client.context,
                    say=report.say,
                    grace=checked["cleanup_grace"],
                    diagnose_on_failure=checked.get("diagnose_on_failure"),
                    stall=checked.get("stall_timeout"),
                )
            except RunFailed as e:
                if e.run is None:
                    raise
                return outcome(e.run, str(e), cause=e.cause, bundle=e.bundle)
        return outcome(ended, succeeded_line(ended))

    @checked
    def diagnose(self, path: str | os.PathLike[str] | None = None) -> Path:
        """`simpletfjob diagnose NAME [-o PATH]`: write its bundle (default: NAME-diagnose-TIME.tar.gz
        in the current directory); its path. NoRunError when there is no such run, and no file."""
        from datetime import datetime, timezone

        from simpletfjob.runs.diagnose import bundle_path, diagnose
        from simpletfjob.runs.objects import pointing_elsewhere

        now = datetime.now(timezone.utc)
        written = bundle_path(self.name, None if path is None else os.fspath(path), now)
        with self._connect("diagnose a run on") as conn, pointing_elsewhere(conn):
            diagnose(conn, self.name, written, now)
        return Path(written)

    @checked
    def logs(
        self,
        task: str | Sequence[str] | None = None,
        *,
        follow: bool = False,
        tail: int | None = None,
        since: float | str | None = None,
        role: str | Sequence[str] | None = None,
        container: str | None = None,
        all_containers: bool = False,
        previous: bool = False,
        timestamps: bool = False,
    ) -> Iterator[LogLine]:
        """`simpletfjob logs NAME [TASK...]`: its tasks' log lines, merged as they come.

        `task` is one task ('worker-0') or several, None for all; `tail` lines from the
        end of each log (None: all of it, as kubectl logs), `since` seconds or "5m".
        With `follow`, lines come as they are written, pods made later included, until
        the run ends (as `logs -f`); leaving the loop early stops the reading.
        A task with nothing to show yet is logged, not an error.
        """
        from simpletfjob.options.runs import LogsOptions
        from simpletfjob.runs.logs import LogRequest
        from simpletfjob.runs.logsources import Selection

        tasks = (task,) if isinstance(task, str) else tuple(task or ())
        roles = (role,) if isinstance(role, str) else tuple(role or ())
        checked = _checked(
            LogsOptions, "logs()", tail=tail, since=since, roles=roles, container=container
        )
        if container and all_containers:
            from simpletfjob.errors import UsageError

            raise UsageError("-c/--container cannot go with --all-containers")
        selection = Selection(tasks, roles, container, all_containers)
        request = LogRequest(
            checked.get("tail"), checked.get("since"), timestamps, previous, follow
        )
        return _run_log_lines(self, selection, request)

    @checked
    def delete(self, wait: bool = False, *, timeout: float | str = 300.0) -> None:
        """`simpletfjob delete NAME`: delete its Jobs and Services (Background); with `wait`, return
        once its Jobs are gone (within `timeout`). NoRunError when there is no such run."""
        from simpletfjob.options.runs import DeleteOptions
        from simpletfjob.runs.delete import delete_named, deleted_line

        checked = _checked(DeleteOptions, "delete()", timeout=timeout)
        with self._connect("delete a run from") as conn:
            found = delete_named(
                conn, self.name, wait=wait, timeout=checked["timeout"], ignore_not_found=False,
                report=report.say,
            )  # fmt: skip
        if found is not None:
            report.say(deleted_line(*found, waited=wait))


_END = object()


def _run_log_lines(run: Run, selection: Any, request: Any) -> Iterator[LogLine]:
    """The log lines, read in a thread (as the CLI reads them) and handed over here one by one.
    The generator's end (the loop left early, an exception, Ctrl-C) stops the reading and
    waits for its thread, closing the connection that its streams read from."""
    from simpletfjob.runs.logs import Cancelled, Printer, follow_logs, show_logs

    lines: queue.Queue[Any] = queue.Queue()
    cancel = threading.Event()

    class Collect(Printer):
        def render(self, source: Any, batch: Sequence[bytes]) -> bytes:
            text = b"".join(batch).decode("utf-8", "replace")
            for line in text.split("\n")[: -1 if text.endswith("\n") else None]:
                lines.put(LogLine(source.label, line.removesuffix("\r")))
            return b""

    printer = Collect(lambda _: None, prefix=False, color=False)

    def read() -> None:
        try:
            with run._connect("read the logs of a run on") as conn:
                if request.follow:
                    follow_logs(conn, run.name, selection, request, printer, report.say, cancel)
                else:
                    show_logs(conn, run.name, selection, request, printer, report.say)
            lines.put(_END)
        except Cancelled:
            lines.put(_END)
        except BaseException as e:  # raised in the caller's thread
            lines.put(e)

    thread = threading.Thread(target=read, name="simpletfjob-logs", daemon=True)
    thread.start()
    try:
        while True:
            try:
                item = lines.get(timeout=0.1)
            except queue.Empty:
                continue
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        cancel.set()
        thread.join(timeout=30)
