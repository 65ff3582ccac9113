"""`wait`: a run followed to its verdict and cleaned up; the rights `run` and `wait` need, asked first.

A run found going on is followed (ending.py) to its verdict: Ambiguous or Deleting give no
verdict and clean nothing up; --timeout gives TimedOut (exit 3); a failure is explained (its
bundle, error, last lines and events) before the cleanup takes its pods. `wait`, `status -w`,
`logs -f` and `run` end with the same lines, so a script reads the same verdict whichever.

`run` and `wait` may stay with a run for hours, so a missing right would be met half-way (a
restart that cannot delete, a cleanup refused once the run has ended). Every verb they will
use is asked at once (kube/access.py): what the command cannot do without is refused in one
line naming the Role that allows it; what it can do without is one warning each (`node loss
not watched`, `logs not streamed`); a server that cannot answer the reviews changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from simpletfjob.errors import ClusterError, Interrupted
from simpletfjob.errors import RunFailed as RunFailed
from simpletfjob.errors import TimedOut as TimedOut
from simpletfjob.kube.resources import JOBS, NODES, PODS, SERVICES, Action, Resource
from simpletfjob.runs.ending import (
    End,
    explain_failure,
    failed_line,
    follow_to_end,
    let_finish,
    succeeded_line,
    undecided,
    unresolved_hint,
)
from simpletfjob.runs.state import Run, changes
from simpletfjob.runs.watch import ENDS

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection
    from simpletfjob.kube.request import Deadline
    from simpletfjob.options.runs import RunOptions
    from simpletfjob.runs.taskstate import Object


Say = Callable[[str], None]


def wait_for_run(
    conn: Connection,
    name: str,
    *,
    timeout: float | None,
    cleanup: str,
    tail: int,
    context: str | None,
    say: Say,
    grace: float,
    progress: Callable[[Run], None] | None = None,
    diagnose_on_failure: str | None = None,
    stall: float | None = None,
    keep: list[object] | None = None,
) -> Run:
    """Follow run NAME to its end, saying each task's changes, then clean up; the run, succeeded.

    After a success the tasks that end by themselves get `grace` seconds (--cleanup-grace).
    The reporting task's progress is followed (reporting.Feed): a stall fails the run. The
    rights are asked once the run is found going on; one already ended is cleaned up at once.
    Raises RunFailed (failed, or no verdict), TimedOut, or the cluster's error. `keep` holds the
    Jobs and pods last seen, let go once the verdict is said: freeing them takes a while.
    """
    from simpletfjob.kube.outage import StillAway, riding_out
    from simpletfjob.options.rules import format_duration
    from simpletfjob.runs.diagnose import OnFailure
    from simpletfjob.runs.objects import scope_flags
    from simpletfjob.runs.reporting import Feed, verdict_of
    from simpletfjob.runs.watch import clean_up

    deadline, until = timed(timeout)
    with riding_out(conn, deadline, say, until) as ride:
        shown: list[Run] = []
        bundles = OnFailure(conn, diagnose_on_failure, say)
        keeper = bundles.keeper(tail)  # with a directory, it keeps each task's log
        feed = Feed(conn, stall=stall, shown=progress, say=say)

        def show(run: Run) -> None:
            if not shown and run.state not in ENDS:
                check_wait(conn, cleanup)  # it goes on: what it will rely on, asked now
            for line in changes(shown[0] if shown else None, run):
                say(line)
            shown[:] = [run]
            feed.show(run)

        def seen(jobs: Sequence[Object], pods: Sequence[Object]) -> None:
            if keep is not None:
                keep[:] = [jobs, pods]
            keeper.seen(jobs, pods)
            feed.seen(jobs, pods)

        try:
            ending = follow_to_end(conn, name, deadline, on_change=show, seen=seen, check=feed.check, tick=feed.tick)  # fmt: skip
        except BaseException:
            feed.close()
            raise
        feed.finish(noted=ending.end in (End.SUCCEEDED, End.FAILED))  # its last progress
        last = ending.run
        if ending.end == End.UNDECIDED:
            assert last is not None
            raise RunFailed(undecided(last, context), run=last, cause=ending.cause)
        if ending.end == End.TIMED_OUT or last is None:
            assert timeout is not None  # without one, following ends only when the run does
            state = f" ({last.state})" if last is not None else ""
            away = f"; {ride.note()}" if ride.away else ""
            hint = unresolved_hint(last, keeper.jobs) if last is not None else ""
            raise TimedOut(
                f"run {name!r} did not end within {format_duration(timeout)}"
                f"{state}{away}{hint}{stuck_and_next(last, name, scope_flags(conn))}"
            ) from ending.problem
        ended = "succeeded" if ending.succeeded else "failed"
        failed = "" if ending.succeeded else failed_line(last, verdict_of(ending.cause))
        judged = replace(last, progress=feed.latest())  # status.json as `status -o json` has it
        said = "" if ending.succeeded else bundles.write(judged, ending.cause, failed)
        # read before the cleanup, which takes pods with it
        for line in explain_failure(conn, last, ending.cause, tail, keeper):
            say(line)
        bundles.close()
        try:
            if ending.succeeded and cleanup != "none":
                last = let_finish(conn, last, grace, deadline, say)
            clean_up(conn, last, cleanup, say)
        except Interrupted as e:  # the verdict is known: it is the news, with what is undone
            verdict = succeeded_line(last) if ending.succeeded else failed + said
            done = f": {e.progress}" if e.progress else ""
            e.detail = (
                f"{verdict}; its cleanup (--cleanup {cleanup}) was cut short{done}; finish it "
                f"with simpletfjob wait {name} {scope_flags(conn)}"
                + (" --cleanup all" if cleanup == "all" else "")
            )
            raise
        except StillAway as e:  # (only with a timeout: without one, the ride never ends so)
            raise cleanup_failed(last, ended, cleanup, e, timeout) from e
        except ClusterError as e:
            raise cleanup_failed(last, ended, cleanup, e, None) from e
    if not ending.succeeded:
        raise RunFailed(failed + said, run=last, cause=ending.cause, bundle=bundles.path)
    return last


def timed(timeout: float | None) -> tuple[Deadline | None, str]:
    """The --timeout's deadline, and what an outage is ridden out until (kube/outage.py)."""
    from simpletfjob.kube.request import Deadline
    from simpletfjob.options.rules import format_duration

    if timeout is None:
        return None, "it is back (no --timeout)"
    return Deadline.after(timeout), f"the --timeout ({format_duration(timeout)})"


def cleanup_failed(
    run: Run, ended: str, cleanup: str, e: ClusterError, timeout: float | None
) -> ClusterError | TimedOut:
    """`wait`'s and `run`'s error for a cleanup cut short once the verdict is known, the verdict
    first: TimedOut (exit 3) when `timeout` passed with the server away, else a ClusterError."""
    from simpletfjob.options.rules import format_duration

    head = f"run {run.name!r} {ended}: {run.outcome()}; but its cleanup (--cleanup {cleanup})"
    if timeout is None:
        return ClusterError(f"{head} failed: {e}")
    return TimedOut(f"{head} did not finish within {format_duration(timeout)}: {e}")


def stuck_and_next(run: Run | None, name: str, scope: str) -> str:
    """What a timed-out run's Pending tasks say, and the commands to look further ('; worker-0
    Pending: ...; it is left as it is; see: simpletfjob status mnist -n ml; simpletfjob logs ...')."""
    from simpletfjob.runs.taskstate import stuck_lines

    tasks = [] if run is None else [t for t in run.tasks if not t.finished]
    stuck = stuck_lines(tasks)
    told = "".join(f"; {line}" for line in stuck[:2])
    if len(stuck) > 2:
        told += f" (and {len(stuck) - 2} more)"
    task = next((t.task for t in tasks if t.stuck), tasks[0].task if tasks else "TASK")
    return (
        f"{told}; it is left as it is; see: simpletfjob status {name} {scope}; "
        f"simpletfjob logs {name} {task} {scope}"
    )


FOLLOW = "to follow the run"
APPLY = "to apply the run"
RESTART = "to restart the run"


@dataclass(frozen=True)
class Need:
    """One verb on one resource (in the run's namespace unless cluster-wide), and what for."""

    verb: str
    resource: Resource
    why: str
    subresource: str = ""

    def action(self, namespace: str = "") -> Action:
        where = namespace if self.resource.namespaced else None
        return Action(self.verb, self.resource, where, subresource=self.subresource)

    @property
    def words(self) -> str:
        """'delete jobs', 'get pods/log'."""
        return f"{self.verb} {self.action().rbac_resource}"


@dataclass(frozen=True)
class Access:
    """What `run` may do beyond what it needs: each False was said in one warning line."""

    nodes: bool = True  # get nodes: node loss is watched
    pod_deletes: bool = True  # delete pods: a run whose node is lost can be restarted
    logs: bool = True  # get pods/log: the tasks' logs are streamed


def run_needs(options: RunOptions, services: bool) -> list[Need]:
    """Every verb `run` uses in the run's namespace with these options (the plan's reads aside);
    `services`: the run has Services (pod networking), which it applies as it applies Jobs."""
    applied = (JOBS, SERVICES) if services else (JOBS,)
    needs = [
        *wait_needs("none"),  # following the run
        Need("list", SERVICES, APPLY),  # a run is its Jobs and its Services, listed as one
        *(Need(verb, r, APPLY) for r in applied for verb in ("get", "create", "patch")),
    ]
    if options.stall_timeout:  # a stall is judged from the reporting task's log
        needs.append(Need("get", PODS, "for --stall-timeout", subresource="log"))
    deleting = []
    if options.replace_run:
        deleting.append("for --replace")
    if options.max_restarts:
        deleting.append(RESTART)
    if options.cleanup != "none":
        deleting.append(f"for --cleanup {options.cleanup}")
    if options.on_interrupt == "delete":
        deleting.append("for --on-interrupt delete")
    for why in deleting:
        needs.append(Need("delete", JOBS, why))
        if services or why == "for --replace":  # (the run it replaces may have some)
            needs.append(Need("delete", SERVICES, why))
        if why in ("for --replace", RESTART):  # then it waits until the run is gone
            needs += [Need("watch", JOBS, why), Need("watch", SERVICES, why)]
    return needs


def wait_needs(cleanup: str) -> list[Need]:
    """Every verb `wait` relies on: following the run, and its cleanup."""
    needs = [Need(verb, r, FOLLOW) for r in (JOBS, PODS) for verb in ("list", "watch")]
    if cleanup != "none":
        why = f"for --cleanup {cleanup}"
        needs += [
            Need("list", SERVICES, why),
            Need("delete", JOBS, why),
            Need("delete", SERVICES, why),
        ]
    return needs


def check_run(conn: Connection, options: RunOptions, services: bool, say: Say) -> Access:
    """Refuse (ClusterError) what `run` cannot do without; warn of what it will not do."""
    optional = [Need("get", NODES, "to watch the run's nodes")]
    if options.logs != "none":
        optional.append(Need("get", PODS, "to stream the logs", subresource="log"))
    if options.max_restarts:
        optional.append(Need("delete", PODS, "to restart a run whose node is lost"))
    needs = run_needs(options, services)
    answers = _ask(conn, [*needs, *optional])
    if answers is None:
        return Access()
    _refuse(conn, [n for n in needs if not answers[n]], "run", "nothing was applied")
    missing = {n.words for n in optional if not answers[n]}
    ns = conn.namespace
    if "get nodes" in missing:
        say(
            "simpletfjob: warning: node loss not watched: cannot get nodes (a ClusterRole with "
            "verb 'get' on 'nodes' allows it); a task's node that is lost is not noticed"
        )
    if "get pods/log" in missing:
        say(
            f"simpletfjob: warning: logs not streamed: cannot get pods/log in namespace {ns} "
            "(a Role with verb 'get' on 'pods/log' allows it)"
        )
    if "delete pods" in missing and "get nodes" not in missing:
        say(
            "simpletfjob: warning: a run whose node is lost is not restarted: cannot delete "
            f"pods in namespace {ns}, and its pods on that node must be deleted first (a Role "
            "with verb 'delete' on 'pods' allows it)"
        )
    return Access(
        nodes="get nodes" not in missing,
        pod_deletes="delete pods" not in missing,
        logs="get pods/log" not in missing,
    )


def check_wait(conn: Connection, cleanup: str) -> None:
    """Refuse (ClusterError) a wait whose following or cleanup would be refused."""
    needs = wait_needs(cleanup)
    answers = _ask(conn, needs)
    if answers is not None:
        _refuse(conn, [n for n in needs if not answers[n]], "wait", "the run was not followed")


def _ask(conn: Connection, needs: Sequence[Need]) -> dict[Need, bool] | None:
    from simpletfjob.kube.access import allowed

    actions = list(dict.fromkeys(n.action(conn.namespace) for n in needs))
    answers = allowed(conn, actions)
    if answers is None:
        return None
    found = dict(zip(actions, answers, strict=True))
    return {n: found[n.action(conn.namespace)] for n in needs}


def _refuse(conn: Connection, missing: Sequence[Need], command: str, done: str) -> None:
    """One line naming every missing verb and resource, what for, and the rules that allow them."""
    if not missing:
        return
    from simpletfjob.kube.access import refused_user

    whys: dict[Need, list[str]] = {}
    for need in missing:
        reasons = whys.setdefault(Need(need.verb, need.resource, "", need.subresource), [])
        if need.why not in reasons:
            reasons.append(need.why)
    ns = conn.namespace

    def said(namespaced: bool) -> str:
        """'list jobs, watch jobs (to follow the run), delete jobs (for --cleanup running)'."""
        groups: dict[tuple[str, ...], list[str]] = {}
        for n, w in whys.items():
            if n.resource.namespaced == namespaced:
                groups.setdefault(tuple(w), []).append(n.words)
        return ", ".join(f"{', '.join(words)} ({', '.join(w)})" for w, words in groups.items())

    local, wide = said(True), said(False)
    what = local + (f" in namespace {ns}" if local else "")
    what += (" and " if local and wide else "") + wide
    user = refused_user(conn, [n.action(ns) for n in whys])
    who = f"user {user!r}" if user else "your user"
    rules = []
    for kind, namespaced in (("Role", True), ("ClusterRole", False)):
        by_resource: dict[tuple[str, str], list[str]] = {}
        for n in whys:
            if n.resource.namespaced == namespaced:
                rbac = n.action().rbac_resource
                by_resource.setdefault((rbac, n.resource.group), []).append(n.verb)
        if by_resource:
            rules.append(f"a {kind} with " + _and([_rule(*k, v) for k, v in by_resource.items()]))
    raise ClusterError(
        f"{conn.target}: {who} cannot {what}, which {command} needs, so {done}; it needs "
        f"{' and '.join(rules)}"
    )


def _and(items: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _rule(resource: str, group: str, verbs: Sequence[str]) -> str:
    """The rule for one resource: verbs 'list', 'watch' on 'jobs' in API group 'batch'."""
    listed = _and([f"'{v}'" for v in verbs])
    where = f" in API group '{group}'" if group else ""
    return f"verb{'s' if len(verbs) > 1 else ''} {listed} on '{resource}'{where}"
