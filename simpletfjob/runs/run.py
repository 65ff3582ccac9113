"""`run`: from a template to a finished run, through failures, with one command that stays with it.

    plan -> what the run will need, asked of the server (permissions.py): refused in one
            line, or a warning for each thing it can do without (node loss not watched)
         -> apply -> follow as `wait` does (task changes on stderr, the deciding task's
            logs on stdout)
         -> succeeded: wait's cleanup, done
         -> failed (causes.py): restarts left? delete the whole run (Foreground, until its
            Jobs and Services are gone), plan again against the cluster as it is now, apply,
            follow again; else exit 1 with the cause

The whole run restarts, never one task: with the host's network every task's cluster spec
lists every task's address, so when one host changes, every task changes. A restart plans again from
the same options, so a lost or busy node is left out and GPUs and ports are counted
again; one that cannot be placed now ends the run with the placement error.

A failure that restarting cannot help ends it at once: the run's --deadline
(DeadlineExceeded), a deciding Job deleted meanwhile, a task claimed by several Jobs; and a
lost node when the user may not delete pods (its pods there must go before the run can).

An interruption (SIGINT, SIGTERM, SIGHUP) leaves the run as it is and says what is true in the
phase it came in (interrupt.py): applied how far, running, being deleted for a restart, or
ended (the verdict, and what of the cleanup was left undone). --on-interrupt delete deletes it
once the writes in flight are settled, and says so once nothing of it is left; after the
verdict, it deletes only what the cleanup would.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from simpletfjob.errors import ClusterError, Interrupted
from simpletfjob.kube.request import Deadline
from simpletfjob.kube.resources import JOBS, PODS, SERVICES
from simpletfjob.runs.causes import NodeWatch, refusal
from simpletfjob.runs.interrupt import (
    APPLYING,
    DRAINING,
    ENDED,
    FOLLOWING,
    GOING,
    REPLANNING,
    RESTARTING,
    Where,
    interrupted,
)
from simpletfjob.runs.state import AMBIGUOUS, DELETING, FAILED, SUCCEEDED, Run, changes
from simpletfjob.runs.wait import UNRESTARTABLE, RunFailed, TimedOut, succeeded_line

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection
    from simpletfjob.options.runs import RunOptions
    from simpletfjob.runs.logs import Printer
    from simpletfjob.runs.manifests import Manifest
    from simpletfjob.runs.permissions import Access
    from simpletfjob.runs.taskstate import Object

Say = Callable[[str], None]


class PlannedTask(Protocol):
    @property
    def role(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def host(self) -> str: ...


class PlannedDocument(Protocol):
    @property
    def text(self) -> str: ...
    @property
    def id(self) -> object: ...
    @property
    def kind(self) -> str: ...


class Plan(Protocol):
    """What `run` reads of a plan (plan.Plan, which only the commands import)."""

    @property
    def job(self) -> str | None: ...
    @property
    def tasks(self) -> Sequence[PlannedTask]: ...
    @property
    def documents(self) -> Sequence[PlannedDocument]: ...
    @property
    def rename(self) -> str | None: ...


P = TypeVar("P", bound=Plan)


LOG_DRAIN = 10.0  # seconds the logs are given to be read out once the run has ended


def run_to_end(
    conn: Connection,
    make_plan: Callable[[], P],
    options: RunOptions,
    *,
    say: Say,
    applied: Callable[[P, Sequence[tuple[Manifest, str]]], None],
    printer: Printer | None,
    progress: Callable[[Run], None] | None = None,
) -> Run:
    """Plan, apply and follow until the run succeeds (returned), restarting it as the options allow.

    `progress` is given the run each time it is judged (the command's status line).

    Raises RunFailed (exit 1), TimedOut (exit 3), or the placement's SelectionError.
    """
    from simpletfjob.kube.outage import riding_out
    from simpletfjob.options.table import format_duration

    deadline = None if options.timeout is None else Deadline.after(options.timeout)
    until = (
        "it is back (no --timeout)"
        if options.timeout is None
        else f"the --timeout ({format_duration(options.timeout)})"
    )
    try:
        # The plan reads the nodes, the check asks the server: an outage from the start is
        # ridden out as later ones are, until the --timeout.
        with riding_out(conn, deadline, say, until):
            planned = make_plan()
            assert planned.job is not None  # labels are on: the options' rules refused --no-labels
            check_log_tasks(options.logs, planned)
            access = _check_access(conn, planned, options, say)
    except ClusterError as e:
        if not _still_away(e) or options.timeout is None:
            raise
        raise TimedOut(
            f"the run did not start within {format_duration(options.timeout)}: {e}"
        ) from e
    name = planned.job
    if not access.logs:
        printer = None
    nodes = NodeWatch(conn, options.node_grace, say, watching=access.nodes)
    restarts = 0
    where = Where(most=options.max_restarts)
    quiet = threading.Event()  # set once run_to_end is left: its log threads say no more
    try:
        with riding_out(conn, deadline, say, until):
            while True:
                where.phase = APPLYING
                _apply(conn, planned, options, restarts, first=restarts == 0, applied=applied)
                where.phase = FOLLOWING
                logs = _stream_logs(conn, name, planned, options, printer, say, quiet)
                last, cause = _follow(conn, name, nodes, deadline, say, progress)
                if last is None or (cause is None and last.state != SUCCEEDED):
                    state = f" ({last.state})" if last is not None else ""
                    assert options.timeout is not None
                    raise TimedOut(
                        f"run {name!r} did not end within {format_duration(options.timeout)}"
                        f"{state}; it is left as it is"
                    )
                if cause is None:
                    where.phase, where.run, where.verdict = ENDED, last, succeeded_line(last)
                    _finish(conn, last, options, say, logs, where)
                    return last
                # A lost node's pods must be deleted before the run can be (see _delete).
                stuck = bool(_lost(cause, last)) and not access.pod_deletes
                if stuck or not _restartable(last, cause) or restarts >= options.max_restarts:
                    left = (
                        f"; no restart left ({restarts} of {options.max_restarts} made)"
                        if options.max_restarts and _restartable(last, cause)
                        else ""
                    )
                    if stuck and restarts < options.max_restarts and _restartable(last, cause):
                        left = (
                            f"; not restarted: its pods on that node cannot be deleted (cannot "
                            f"delete pods in namespace {conn.namespace})"
                        )
                    where.phase, where.run = ENDED, last
                    where.verdict = f"run {name!r} failed: {cause}{left}"
                    _finish(conn, last, options, say, logs, where)
                    raise RunFailed(where.verdict)
                restarts += 1
                where.phase, where.restart, where.cause = RESTARTING, restarts, cause
                _delete(conn, name, deadline, set(_lost(cause, last)), where)
                where.phase = REPLANNING
                planned = make_plan()  # against the cluster as it is now
                hosts = ", ".join(dict.fromkeys(task.host for task in planned.tasks))
                say(
                    f"restarting run {name} ({restarts}/{options.max_restarts}): {cause}; "
                    f"hosts now: {hosts}"
                )
    except Interrupted as e:
        delete = options.on_interrupt == "delete"
        interrupted(conn, name, where, options.cleanup, delete, say, e)
        raise
    except ClusterError as e:
        # --timeout passed while the server was away, before the run had ended (applying,
        # deleting for a restart): as for a timeout while following, exit 3.
        if not _still_away(e) or options.timeout is None:
            raise
        raise TimedOut(
            f"run {name!r} did not end within {format_duration(options.timeout)}: {e}"
        ) from e
    finally:
        quiet.set()


def _still_away(error: BaseException) -> bool:
    """The error is the ride's deadline passing with the server away, or carries it."""
    from simpletfjob.kube.outage import StillAway

    return isinstance(error, StillAway) or isinstance(error.__cause__, StillAway)


def _check_access(conn: Connection, planned: Plan, options: RunOptions, say: Say) -> Access:
    """What the run will need, asked before anything is applied (permissions.py)."""
    from simpletfjob.runs.permissions import check_run

    services = any(d.kind == "Service" for d in planned.documents)
    try:
        return check_run(conn, options, services, say)
    except Interrupted as e:
        e.detail = e.detail or (
            f"nothing of run {planned.job!r} was applied to namespace {conn.namespace}"
        )
        raise


def _restartable(run: Run, cause: str) -> bool:
    if run.state in (AMBIGUOUS, DELETING):
        return False
    return not (run.state == FAILED and cause == run.outcome() and run.reason in UNRESTARTABLE)


def _apply(
    conn: Connection,
    planned: P,
    options: RunOptions,
    restarts: int,
    *,
    first: bool,
    applied: Callable[[P, Sequence[tuple[Manifest, str]]], None],
) -> None:
    from simpletfjob.runs.apply import Choices, apply_planned

    choices = Choices(
        replace=options.replace_run and first,
        timeout=options.timeout if options.timeout is not None else 300.0,
        force=options.force_conflicts,
        deadline=options.deadline,
        cleanup_after=options.cleanup_after,
    )
    # the summary says it all; a restart says it in its one line
    done = apply_planned(
        conn, planned, choices, lambda line: None, restarts=(restarts, options.max_restarts)
    )
    if first:
        applied(planned, done)


def _follow(
    conn: Connection,
    name: str,
    nodes: NodeWatch,
    deadline: Deadline | None,
    say: Say,
    progress: Callable[[Run], None] | None = None,
) -> tuple[Run | None, str | None]:
    """Follow the run to its end: (the run, None) when it succeeded, (the run, the cause) when
    it failed; the cause None and the run not succeeded (or None) when the deadline passed."""
    from simpletfjob.runs.watch import follow

    nodes.since.clear()  # a new attempt: its nodes are counted from now
    tick = max(0.5, min(nodes.grace / 2, 10.0))
    pods: list[Object] = []
    next_check = 0.0

    def seen(_: Sequence[Object], now: Sequence[Object]) -> None:
        pods[:] = now

    last: Run | None = None
    try:
        for run in follow(conn, name, deadline, seen, tick=tick):
            for line in changes(last, run):
                say(line)
            last = run
            if progress is not None:
                progress(run)
            if run.state == SUCCEEDED:
                return run, None
            if run.state in (FAILED, AMBIGUOUS, DELETING):
                return run, run.outcome()
            cause = refusal(run, pods)
            if cause is None and time.monotonic() >= next_check:
                next_check = time.monotonic() + tick
                cause = nodes.check(run)
            if cause is not None:
                return run, cause
    except ClusterError:
        if deadline is None or deadline.remaining() > 0:
            raise
    return last, None


def _lost(cause: str, run: Run) -> list[str]:
    """The nodes a node cause names (`... on node h3: NotReady ...`), whose pods no kubelet stops."""
    return [t.node for t in run.tasks if t.node and f" on node {t.node}: " in cause]


def _delete(
    conn: Connection, name: str, deadline: Deadline | None, lost: set[str], where: Where
) -> None:
    """Delete the whole run (Foreground) and wait until its Jobs and Services are gone.

    The pods on a lost node are deleted at once (grace 0, as kubectl delete --force): no
    kubelet there will confirm that they stopped, and the Jobs would wait for them forever.
    """
    from simpletfjob.kube.lists import list_objects
    from simpletfjob.kube.objects import delete
    from simpletfjob.runs.delete import delete_run, wait_until_gone
    from simpletfjob.runs.objects import list_run, run_selector

    delete_run(conn, list_run(conn, name), "Foreground", lambda line: None)
    where.phase = GOING
    if lost:
        for pod in list_objects(conn, PODS, label_selector=run_selector(name)).items:
            if (pod.get("spec") or {}).get("nodeName") in lost:
                pod_name = str((pod.get("metadata") or {}).get("name"))
                delete(conn, PODS, pod_name, grace=0)
    timeout = deadline.remaining() if deadline is not None else 3600.0
    try:
        wait_until_gone(conn, name, max(timeout, 1.0), (JOBS, SERVICES))
    except ClusterError as e:
        if deadline is not None and deadline.remaining() <= 0:
            raise TimedOut(f"restarting run {name!r}: {e}") from e
        raise


def _finish(
    conn: Connection, run: Run, options: RunOptions, say: Say, logs: Any, where: Where
) -> None:
    """wait's cleanup, then the logs read out (a finished task's stream ends by itself)."""
    from simpletfjob.options.table import format_duration
    from simpletfjob.runs.watch import clean_up

    ended = "succeeded" if run.state == SUCCEEDED else "failed"
    try:
        clean_up(conn, run, options.cleanup, say)
        where.phase = DRAINING
    except ClusterError as e:
        if _still_away(e) and options.timeout is not None:  # as wait says it, exit 3
            raise TimedOut(
                f"run {run.name!r} {ended}: {run.outcome()}; but its cleanup (--cleanup "
                f"{options.cleanup}) did not finish within {format_duration(options.timeout)}: {e}"
            ) from e
        raise ClusterError(
            f"run {run.name!r} {ended}: {run.outcome()}; but its cleanup "
            f"(--cleanup {options.cleanup}) failed: {e}"
        ) from e
    finally:
        if isinstance(logs, threading.Thread) and where.phase == DRAINING:
            logs.join(LOG_DRAIN)


def _stream_logs(
    conn: Connection,
    name: str,
    planned: Plan,
    options: RunOptions,
    printer: Printer | None,
    say: Say,
    quiet: threading.Event,
) -> threading.Thread | None:
    """Stream the chosen tasks' logs to the printer, in a thread, until the run ends or goes.

    Once `quiet` is set (`run_to_end` has returned or raised), the thread prints and says
    nothing more: in a process that goes on (the Python API, a test), no line of a finished
    `run` may come after it.
    """
    if printer is None or options.logs == "none":
        return None
    from simpletfjob.runs.logs import LogRequest, follow_logs
    from simpletfjob.runs.logsources import Selection

    selection = Selection(tasks=tuple(log_tasks(options.logs, planned)))

    def note(line: str) -> None:
        if not quiet.is_set():
            say(line)

    def write(data: bytes) -> None:
        if not quiet.is_set():
            printer.write(data)

    quiet_printer = copy.copy(printer)
    quiet_printer.write = write

    def stream() -> None:
        try:
            follow_logs(conn, name, selection, LogRequest(follow=True), quiet_printer, note)
        except Exception as e:  # the run goes on without its logs
            note(f"logs: {e}")

    thread = threading.Thread(target=stream, daemon=True)
    thread.start()
    return thread


def log_tasks(chosen: str, planned: Plan) -> list[str]:
    """The tasks whose logs --logs names: [] for all; by default the one that decides success."""
    names = [f"{t.role}-{t.index}" for t in planned.tasks]
    if chosen in ("all", "none"):
        return []
    if not chosen:
        return ["chief-0" if "chief-0" in names else "worker-0"]
    return chosen.split(",")


def check_log_tasks(chosen: str, planned: Plan) -> None:
    """A task --logs names that the plan lacks is a usage error, before anything is applied."""
    from simpletfjob.errors import UsageError

    names = [f"{t.role}-{t.index}" for t in planned.tasks]
    unknown = [task for task in log_tasks(chosen, planned) if task not in names]
    if chosen and unknown:  # (the default, worker-0, is there: the plan's checks saw to it)
        raise UsageError(
            f"--logs names {unknown[0]!r}, which the run does not have; its tasks are "
            f"{', '.join(names)}"
        )
