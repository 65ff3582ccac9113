"""`run`: from a template to a finished run, through failures and restarts.

It asks the server first what the run needs (wait.py), applies, and follows as `wait` does
(task changes on stderr, the chosen tasks' logs on stdout). On success, wait's cleanup. On a
failure (classify.py), --diagnose-on-failure's bundle and the failing task's lines; then, with
restarts left, the whole run is deleted and planned again against the cluster as it is now
(a lost or busy node left out), else exit 1 with the cause. Only a task the training does not
depend on restarts alone, and an elastic run lets a lost worker go (interventions.py).

A failure restarting cannot help ends it at once: DeadlineExceeded, a deciding Job deleted,
a task claimed twice, a lost node whose pods the user may not delete. An interrupt leaves the
run as it is and says what is true in its phase (interventions.py); --on-interrupt delete
deletes it once the writes in flight have settled.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from simpletfjob.errors import ClusterError, Interrupted
from simpletfjob.kube.outage import still_away
from simpletfjob.kube.request import Deadline
from simpletfjob.kube.resources import JOBS, PODS, SERVICES
from simpletfjob.runs.classify import NODE_LOST, Cause, Decision, Policy, decide, side_failure
from simpletfjob.runs.diagnose import OnFailure
from simpletfjob.runs.ending import (
    End,
    Ending,
    explain_failure,
    failed_line,
    follow_to_end,
    succeeded_line,
    unresolved_hint,
)
from simpletfjob.runs.failure import Keeper, NodeWatch, refused_cause
from simpletfjob.runs.interventions import (
    APPLYING,
    DRAINING,
    ENDED,
    FOLLOWING,
    GOING,
    REPLANNING,
    RESTARTING,
    Aside,
    Where,
    delete_task,
    interrupted,
    let_go,
    losable,
)
from simpletfjob.runs.objects import P, Plan
from simpletfjob.runs.progress import Budget
from simpletfjob.runs.queue import queued
from simpletfjob.runs.reporting import Feed
from simpletfjob.runs.state import SUCCEEDED, Run, changes
from simpletfjob.runs.taskstate import lost_lines
from simpletfjob.runs.wait import RunFailed, TimedOut, cleanup_failed, timed
from simpletfjob.streams import stop_main

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection
    from simpletfjob.options.runs import RunOptions
    from simpletfjob.runs.logs import Printer
    from simpletfjob.runs.objects import Manifest
    from simpletfjob.runs.taskstate import Object
    from simpletfjob.runs.wait import Access

Say = Callable[[str], None]


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
    replan: Callable[[int], P] | None = None,
    restarted: Callable[[int], None] | None = None,
    waiting: Callable[[str], None] | None = None,
) -> Run:
    """Plan, apply and follow until the run succeeds (returned), restarting it as the options allow.

    `progress` is given the run each time it is judged. `replan(n)` plans restart n (its
    template's <<restart>>; without it, `make_plan()`). `restarted(n)` is told each whole-run
    restart. Raises RunFailed (exit 1), TimedOut (exit 3), or the placement's SelectionError.
    """
    from simpletfjob.kube.outage import riding_out
    from simpletfjob.options.rules import format_duration

    deadline, until = timed(options.timeout)
    from simpletfjob.runs.logsources import check_log_tasks

    try:
        # An outage from the start (planning reads the nodes) is ridden out until the --timeout.
        with riding_out(conn, deadline, say, until):
            planned = make_plan()
            assert planned.job is not None  # labels are on: the options' rules refused --no-labels
            check_log_tasks(options.logs, planned)
            access = _check_access(conn, planned, options, say)
    except ClusterError as e:
        if not still_away(e) or options.timeout is None:
            raise
        raise TimedOut(
            f"the run did not start within {format_duration(options.timeout)}: {e}"
        ) from e
    name = planned.job
    if not access.logs:
        printer = None
    nodes = NodeWatch(conn, options.node_grace, say, watching=access.nodes)
    bundles = OnFailure(conn, options.diagnose_on_failure, say)
    policy = Policy(options.restart_on, options.max_restarts, options.restart_exit_codes)
    restarts = 0
    budget = Budget()  # restarts in a row without progress (progress.py): what the limit bounds
    aside = Aside()  # tasks the training does not depend on, restarted alone
    where = Where(most=options.max_restarts)
    quiet = threading.Event()  # set once run_to_end is left: its log threads say no more
    feed: Feed | None = None  # the attempt's progress stream (reporting.py), closed when left
    try:
        with riding_out(conn, deadline, say, until):
            while True:
                where.phase = APPLYING
                send = partial(_apply, conn, options=options, restarts=restarts, first=restarts == 0, applied=applied, budget=budget)  # fmt: skip
                planned = queued(conn, options, planned, replan, restarts, send, waiting, deadline)
                where.phase = FOLLOWING
                logs = _stream_logs(conn, name, planned, options, printer, say, quiet)
                keeper = bundles.keeper(options.tail_on_failure)
                feed = Feed(conn, stall=options.stall_timeout, chosen=options.progress_task, pattern=options.progress_pattern, shown=progress, budget=budget, say=say)  # fmt: skip
                ending: Ending | None = None
                while True:  # until the run ends; a task it does not depend on, alone
                    before = ending.run if ending is not None else None
                    ending = _follow(
                        conn, name, nodes, deadline, say, policy, keeper, aside, before, feed
                    )
                    last, cause = ending.run, ending.cause
                    if last is None or cause is None or not cause.alone:
                        break
                    decision = decide(cause, feed.spent().in_a_row + aside.made, policy)
                    for line in explain_failure(conn, last, cause, options.tail_on_failure, keeper):
                        say(line)
                    if not decision.restart:
                        say(f"{decision.verdict}; run {name} goes on without {cause.task}")
                        aside.left.update(t.uid for t in last.tasks if t.task == cause.task)
                        continue
                    aside.made += 1
                    spent = restarts + aside.made
                    alone = f"{cause}; {cause.task} of run {name} restarted alone"
                    seen = replace(last, progress=feed.latest())
                    said = bundles.write(seen, cause, alone, restarts + 1, cause.task)
                    say(
                        f"restarting {cause.task} of run {name} alone ({spent}/"
                        f"{options.max_restarts}) after {cause.kind_words}: {cause}{said}"
                    )
                    delete_task(conn, last, cause.task, deadline)
                    _apply(conn, planned, options, restarts, first=False, applied=applied, budget=budget)  # fmt: skip
                budget = feed.spent()  # given back once this attempt passed the best before it
                feed.finish(noted=ending.end != End.TIMED_OUT and last is not None)
                if ending.end == End.TIMED_OUT or last is None:
                    state = f" ({last.state}){unresolved_hint(last, keeper.jobs)}" if last else ""
                    assert options.timeout is not None
                    raise TimedOut(
                        f"run {name!r} did not end within {format_duration(options.timeout)}"
                        f"{state}; it is left as it is"
                    )
                if ending.succeeded:
                    where.phase, where.run, where.verdict = ENDED, last, succeeded_line(last)
                    _finish(conn, last, options, say, logs, where, deadline)
                    return last
                assert cause is not None  # Failed or Undecided: with its cause
                decision = decide(cause, budget.in_a_row + aside.made, policy)
                # A lost node's pods must be deleted before the run can be (see _delete).
                if decision.restart and cause.kind == NODE_LOST and not access.pod_deletes:
                    decision = Decision(
                        False,
                        f"{cause}; not restarted: its pods on that node cannot be deleted "
                        f"(cannot delete pods in namespace {conn.namespace})",
                    )
                # the bundle first: an interrupt may delete the run (--on-interrupt delete)
                verdict = failed_line(last, decision.verdict or f"{cause}; restarted")
                attempt = restarts + 1 if decision.restart else None  # counted from 1
                seen = replace(last, progress=feed.latest(), in_a_row=budget.in_a_row)
                said = bundles.write(seen, cause, verdict, attempt)
                for line in explain_failure(conn, last, cause, options.tail_on_failure, keeper):
                    say(line)
                if not decision.restart:
                    where.phase, where.run, where.verdict = ENDED, last, verdict + said
                    _finish(conn, last, options, say, logs, where, deadline)
                    raise RunFailed(where.verdict, run=last, cause=cause, bundle=bundles.path)
                restarts += 1
                budget = budget.restarted(feed.best())
                spent = budget.in_a_row + aside.made
                if restarted is not None:
                    restarted(restarts)
                where.phase, where.restart, where.cause = RESTARTING, restarts, str(cause)
                lost = {cause.node} if cause.kind == NODE_LOST else set()
                _delete(conn, name, deadline, lost, where)
                where.phase = REPLANNING
                if options.queue is None:  # against the cluster as it is now (--queue: at its turn)
                    planned = replan(restarts) if replan is not None else make_plan()
                hosts = ", ".join(dict.fromkeys(task.host for task in planned.tasks))
                now = f"back in queue {options.queue}" if options.queue else f"hosts now: {hosts}"
                count = f"{spent}/{options.max_restarts}"
                if budget.in_a_row != budget.restarts:  # progress gave some back (progress.py)
                    count += f" in a row without progress; {budget.restarts} in all"
                say(
                    f"restarting run {name} ({count}) after "
                    f"{cause.kind_words}: {cause}; {now}{said}"
                )
    except Interrupted as e:
        delete = options.on_interrupt == "delete"
        if delete:
            bundles.finish()
        interrupted(conn, name, where, options.cleanup, delete, say, e)
        raise
    except ClusterError as e:
        # --timeout passed while the server was away (applying, deleting): exit 3.
        if not still_away(e) or options.timeout is None:
            raise
        raise TimedOut(
            f"run {name!r} did not end within {format_duration(options.timeout)}: {e}"
        ) from e
    finally:
        quiet.set()
        bundles.close()
        if feed is not None:
            feed.close()


def _check_access(conn: Connection, planned: Plan, options: RunOptions, say: Say) -> Access:
    """What the run will need, asked before anything is applied (wait.py)."""
    from simpletfjob.runs.wait import check_run

    services = any(d.kind == "Service" for d in planned.documents)
    try:
        return check_run(conn, options, services, say)
    except Interrupted as e:
        e.detail = e.detail or (
            f"nothing of run {planned.job!r} was applied to namespace {conn.namespace}"
        )
        raise


def _apply(
    conn: Connection,
    planned: P,
    options: RunOptions,
    restarts: int,
    *,
    first: bool,
    applied: Callable[[P, Sequence[tuple[Manifest, str]]], None],
    budget: Budget,
) -> None:
    from simpletfjob.runs.apply import Choices, apply_planned
    from simpletfjob.runs.reporting import best_marks

    choices = Choices.of(options, first=first)
    choices = replace(choices, marks=choices.marks + best_marks(budget, options.progress_task))
    # the summary says it all; a restart says it in its one line
    done = apply_planned(
        conn,
        planned,
        choices,
        lambda line: None,
        restarts=(restarts, options.max_restarts, budget.in_a_row),
    )
    if first:
        applied(planned, done)


def _follow(
    conn: Connection,
    name: str,
    nodes: NodeWatch,
    deadline: Deadline | None,
    say: Say,
    policy: Policy,
    keeper: Keeper,
    aside: Aside,
    before: Run | None,
    feed: Feed,
) -> Ending:
    """Follow the run to its end (ending.py), with `run`'s own ends: a refused pod, a side
    task's failure, a lost node (each a Failed Ending, its cause naming it).

    `before` is the run as last said (a task restarted alone): only what changed since is said.
    """
    nodes.since.clear()  # a new attempt: its nodes are counted from now
    tick = max(0.5, min(nodes.grace / 2, 10.0))
    pods: list[Object] = []
    next_check = 0.0
    last: list[Run | None] = [before]
    letting_go: set[str] = set()
    told_by_job: dict[str, float] = {}  # side failures seen by their Job's condition alone

    def seen(jobs: Sequence[Object], now: Sequence[Object]) -> None:
        pods[:] = now
        keeper.seen(jobs, now)
        feed.seen(jobs, now)  # the reporting task's log (reporting.py)

    def show(run: Run) -> None:
        was = last[0].tasks if last[0] is not None else None
        for line in lost_lines(changes(last[0], run), was, run.tasks, run.min_workers):
            say(line)
        last[0] = run
        feed.show(run)

    def check(run: Run) -> Cause | None:
        nonlocal next_check
        cause = refused_cause(run, pods)
        if cause is None:
            cause = side_failure(
                run, policy.exit_codes, aside.left, told_by_job=told_by_job, now=time.monotonic()
            )
        if cause is None and time.monotonic() >= next_check:
            next_check = time.monotonic() + tick
            cause = nodes.check(run)
        if cause is not None and losable(run, cause):  # an elastic run trains on
            if not letting_go.issuperset(cause.tasks):
                let_go(conn, run, cause, pods)
                letting_go.update(cause.tasks)
            return None
        if cause is None:
            cause = feed.check(run)  # a stall
        return cause

    ending = follow_to_end(
        conn,
        name,
        deadline,
        on_change=show,
        check=check,
        seen=seen,
        tick=tick,
        exit_codes=policy.exit_codes,
    )
    if ending.run is None and before is not None:
        return replace(ending, run=before)
    return ending


def _delete(
    conn: Connection, name: str, deadline: Deadline | None, lost: set[str], where: Where
) -> None:
    """Delete the whole run (Background) and wait until its Jobs, Services and pods are gone.

    Background frees each Job's name at once (Foreground keeps each Job until the garbage
    collector has deleted its pods, one Job after another). The old pods are waited for: one
    still stopping holds its port and GPUs. Pods on a lost node are deleted with grace 0, as
    `kubectl delete --force`: no kubelet there will confirm they stopped.
    """
    from simpletfjob.kube.lists import list_objects
    from simpletfjob.kube.objects import delete
    from simpletfjob.runs.delete import delete_run, wait_until_gone
    from simpletfjob.runs.objects import list_run, run_selector

    delete_run(conn, list_run(conn, name), "Background", lambda line: None)
    where.phase = GOING
    if lost:
        for pod in list_objects(conn, PODS, label_selector=run_selector(name)).items:
            if (pod.get("spec") or {}).get("nodeName") in lost:
                pod_name = str((pod.get("metadata") or {}).get("name"))
                delete(conn, PODS, pod_name, grace=0)
    timeout = deadline.remaining() if deadline is not None else 3600.0
    try:
        wait_until_gone(conn, name, max(timeout, 1.0), (JOBS, SERVICES, PODS))
    except ClusterError as e:
        if deadline is not None and deadline.remaining() <= 0:
            raise TimedOut(f"restarting run {name!r}: {e}") from e
        raise


def _finish(
    conn: Connection, run: Run, options: RunOptions, say: Say, logs: Any, where: Where,
    deadline: Deadline | None,
) -> None:  # fmt: skip
    """wait's cleanup (after a success, once --cleanup-grace is over: ending.let_finish),
    then the logs read out (a finished task's stream ends by itself)."""
    from simpletfjob.runs.ending import let_finish
    from simpletfjob.runs.watch import clean_up

    ended = "succeeded" if run.state == SUCCEEDED else "failed"
    try:
        if run.state == SUCCEEDED and options.cleanup != "none":
            run = where.run = let_finish(conn, run, options.cleanup_grace, deadline, say)
        clean_up(conn, run, options.cleanup, say)
        where.phase = DRAINING
    except ClusterError as e:
        timeout = options.timeout if still_away(e) else None  # as wait says it, exit 3
        raise cleanup_failed(run, ended, options.cleanup, e, timeout) from e
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

    Once `quiet` is set (`run_to_end` has left), the thread prints nothing more: in a process
    that goes on (the Python API), no line may come after a finished `run`.
    """
    if printer is None or options.logs == "none":
        return None
    from simpletfjob.runs.logs import LogRequest, follow_logs
    from simpletfjob.runs.logsources import Selection, log_tasks

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
            # run's own lines tell each task's state and a failure: no pod is told there
            request_ = LogRequest(follow=True)
            follow_logs(conn, name, selection, request_, quiet_printer, note, podless=False)
        except Exception as e:  # the run goes on without its logs
            note(f"logs: {e}")
        except Interrupted as e:  # stdout's reader went away: the command stops, as on SIGPIPE
            stop_main(e)

    thread = threading.Thread(target=stream, daemon=True)
    thread.start()
    return thread
