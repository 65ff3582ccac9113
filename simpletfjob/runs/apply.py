"""apply: a run's objects sent by server-side apply, once the server has judged every one.

Nothing is changed until every object has passed the server's dry run (its own, or its shape's:
judge.py), so a refusal (RBAC, validation, a field-manager conflict) or a run that differs from
the render changes nothing; with --replace, nothing is deleted until the deletes and the new
objects have both passed. What can still fail half-way (a quota, a webhook judging one task's
values) is reported with what was applied and what was not. "Differs" is judged as `kubectl
diff` does, against the dry run, so server-filled fields do not count; a changed pod template
(immutable) or an object the render lacks makes the run differ.

`--dry-run=client` (preview_run) only reads: each object gets kubectl's client dry-run line
(`created`, `configured`, `unchanged`, with --replace `deleted` first), judged by `holds`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Generic

from simpletfjob.errors import ClusterError, Interrupted, SimpleTFJobError
from simpletfjob.identity import (
    PROGRESS_PATTERN_ANNOTATION,
    PROGRESS_TASK_ANNOTATION,
    STALL_TIMEOUT_ANNOTATION,
)
from simpletfjob.kube.inflight import Sending, Write, cut_short, in_order
from simpletfjob.kube.objects import Applied, apply, get
from simpletfjob.kube.request import ApplyConflict
from simpletfjob.kube.resources import JOBS, SERVICES
from simpletfjob.runs.annotations import Owner, add_limits
from simpletfjob.runs.delete import check_replace, delete_run, wait_until_gone
from simpletfjob.runs.judge import (
    Expected,
    being_applied,
    conflicts_line,
    dry_runs,
    groups,
    judge_all,
    maybe_there,
    names_held,
)
from simpletfjob.runs.objects import (
    Manifest,
    P,
    Plan,
    RunObjects,
    belongs_to,
    connect_for,
    list_run,
    manifests,
    named_tasks,
    not_ours,
    object_name,
    scope_flags,
    some,
)
from simpletfjob.runs.state import is_gone, run_state

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection, Settings
    from simpletfjob.options.runs import ApplyOptions, RunOptions


Report = Callable[[str], None]
Warn = Report | None  # where the warning that TLS is not checked goes (None: stderr)


class RunDiffers(SimpleTFJobError):
    """The run exists and differs from the render; --replace would replace it."""


@dataclass(frozen=True)
class Choices:
    """How apply goes: --replace, --dry-run=server, --timeout (for --replace), --force-conflicts."""

    replace: bool = False
    dry_run: bool = False
    timeout: float = 0.0
    force: bool = False
    deadline: float | None = None
    cleanup_after: float | None = None
    marks: tuple[tuple[str, str], ...] = ()  # the deciding Job's progress annotations

    @classmethod
    def of(cls, options: ApplyOptions | RunOptions, *, first: bool = True) -> Choices:
        """The choices apply's or run's options make (`first`: run's first attempt, the only one
        --replace applies to; run's --replace waits 300 s at most without --timeout). The deciding
        Job's marks carry the progress options (--stall-timeout: seconds)."""
        timeout, stall = getattr(options, "timeout", None), getattr(options, "stall_timeout", None)
        marks = (
            (PROGRESS_TASK_ANNOTATION, options.progress_task),
            (PROGRESS_PATTERN_ANNOTATION, options.progress_pattern),
            (STALL_TIMEOUT_ANNOTATION, "" if stall is None else f"{stall:g}"),
        )
        return cls(
            replace=options.replace_run and first,
            dry_run=getattr(options, "dry_run", None) == "server",
            timeout=timeout if timeout is not None else 300.0,
            force=options.force_conflicts,
            deadline=options.deadline,
            cleanup_after=options.cleanup_after,
            marks=tuple((key, value) for key, value in marks if value),
        )


def outcome_counts(outcomes: Counter[str]) -> str:
    """'4 deleted, 2 created, 1 unchanged'."""
    words = ("deleted", "created", "configured", "unchanged")
    return ", ".join(f"{outcomes[w]} {w}" for w in words if outcomes[w])


def applied_counts(done: Sequence[tuple[Manifest, str]]) -> str:
    """What apply_planned did, as `outcome_counts` words it: '2 created, 1 unchanged'."""
    return outcome_counts(Counter(outcome for _, outcome in done))


@dataclass(frozen=True)
class AppliedRun(Generic[P]):
    """A run applied: its plan, the namespace it went to, and how many objects had each outcome."""

    planned: P
    namespace: str
    outcomes: Counter[str]  # 'created', 'configured', 'unchanged' (a preview: 'deleted' too)

    def counts(self) -> str:
        """'2 created, 1 unchanged'."""
        return outcome_counts(self.outcomes)


def apply_run(
    cluster: Settings, plan: Callable[[str], P], choices: Choices, report: Report, warn: Warn = None
) -> AppliedRun[P]:
    """Connect as kubectl would, plan the run for its namespace (its DNS names), and apply it."""
    where = (cluster.kubeconfig, cluster.context, cluster.namespace, "apply the run to", warn)
    with connect_for(*where) as conn:
        planned = plan(conn.namespace)
        done = apply_planned(conn, planned, choices, report)
    return AppliedRun(planned, conn.namespace, Counter(outcome for _, outcome in done))


def apply_planned(
    conn: Connection,
    planned: Plan,
    choices: Choices,
    report: Report,
    restarts: tuple[int, int, int] | None = None,
) -> list[tuple[Manifest, str]]:
    """A plan's documents checked (`manifests`), given the run's limits, and applied in order;
    each object's outcome ('created', ...), as reported. `restarts` (done, most, in a row without
    progress) are recorded for `run --max-restarts`.

    The owner (--cleanup-after's Job, applied alone first) checks the server's dry run of each
    object, by key, before anything is changed, and gets each object as the server returned it.
    With --replace, an existing run is checked, deleted (Foreground) and waited for until its
    Jobs and Services are gone, up to the timeout. An object of the run the list missed but
    found when its name is checked was made by another apply of the run, and counts as the
    run's. A name taken offers the plan's `rename`.
    """
    assert planned.job is not None  # a plan to apply has its labels (the options say so)
    wanted, owner = _wanted(conn, planned, choices, restarts)
    if owner is not None:
        owner.known(conn)
    run, rename = planned.job, planned.rename
    replace, dry_run, force = choices.replace, choices.dry_run, choices.force
    beside = f", or {rename} to start another run beside it" if rename else ""
    namespace = conn.namespace
    scope = scope_flags(conn)
    old = list_run(conn, run)
    live = {(resource.plural, object_name(obj)): obj for resource, obj in old.objects()}
    where = f"run {run!r} in namespace {namespace}"
    going = [r.ref(object_name(obj)) for r, obj in old.objects() if is_gone(obj)]
    if going and not replace:
        raise ClusterError(
            f"{where} is being deleted ({some(going)} still there); wait for it "
            f"(simpletfjob delete {run} {scope} --wait) and apply again"
        )
    if old.jobs and not replace:
        # An ended run whose unfinished tasks a cleanup removed: applying it would start those
        # again beside the finished ones (unless it is an apply under way: being_applied).
        named = named_tasks(old.jobs)
        ended = run_state(run, namespace, old.jobs, (), named)
        starting = [m.ref for m in wanted if m.resource is JOBS and m.key not in live]
        if ended.finished and starting and not being_applied(ended, old.jobs, named):
            raise ClusterError(
                f"{where} has ended ({ended.outcome()}); applying it again would start "
                f"{some(starting)} beside what is left of it; give --replace to run it "
                f"again{beside}"
            )
    if replace and not old.empty:
        unlisted = [m for m in wanted if m.key not in live]
        _check_free_names(conn, run, unlisted, live, replace=True, rename=rename)
        made = check_replace(conn, old, wanted, force=force)
        if owner is not None:
            owner.check(made)
        _replace(conn, old, choices.timeout, report, scope)
        return _apply_all(conn, run, wanted, {}, made, report, scope, owner, force, replaced=True)
    if not dry_run:  # the names others hold, from one list; one dry run of each shape (judge.py)
        unlisted = [m for m in wanted if m.key not in live]
        _check_free_names(conn, run, names_held(conn, unlisted), live, replace, rename)
    # --dry-run=server: every object judged by the server
    answers, carried = dry_runs(conn, wanted, live, force=force, sampled=not dry_run)
    # An object the lists did not have that its dry run found (or could not judge) is read,
    # and judged again if another apply of the run made it.
    found = [i for i, (m, a) in enumerate(answers) if m.key not in live and maybe_there(a)]
    if found:
        ours = _check_free_names(conn, run, [answers[i][0] for i in found], live, replace, rename)
        again = [i for i in found if answers[i][0].key in ours]
        rejudged, _ = dry_runs(conn, [answers[i][0] for i in again], live, force=force)
        for i, answer in zip(again, rejudged, strict=True):
            answers[i] = answer
    judged = judge_all(answers)
    differences = [f"{m.ref} ({why})" for m, (_, why) in judged if why]
    rendered = {m.key for m in wanted}
    differences += [
        f"{resource.ref(object_name(obj))} (not in this render)"
        for resource, obj in old.objects()
        if (resource.plural, object_name(obj)) not in rendered
    ]
    if differences:
        raise RunDiffers(
            f"{where} already exists and differs from this render: {some(differences)}; "
            f"give --replace to delete it and apply this render{beside}"
        )
    # each object as the server's dry run has it (its own, or its sample's, derived)
    judged_objects = {m.key: a.object for m, (a, _) in judged if a is not None}
    expected = Expected(judged_objects, carried)
    if owner is not None:
        owner.check(expected)
    if dry_run:
        outcomes = [(m, applied.outcome) for m, (applied, _) in judged if applied is not None]
        for m, outcome in outcomes:
            report(f"{m.ref} {outcome} (server dry run)")
        return outcomes
    return _apply_all(conn, run, wanted, live, expected, report, scope, owner, force)


def _wanted(
    conn: Connection, planned: Plan, choices: Choices, restarts: tuple[int, int, int] | None = None
) -> tuple[list[Manifest], Owner | None]:
    """The plan's documents as checked manifests (refused in one line, if at all), with limits."""
    assert planned.job is not None
    documents = ((d, f"document {i} ({d.id})") for i, d in enumerate(planned.documents, start=1))
    wanted = manifests(documents, planned.job, conn.namespace)
    owner = add_limits(
        wanted, deadline=choices.deadline, cleanup_after=choices.cleanup_after, restarts=restarts,
        marks=choices.marks,
    )  # fmt: skip
    return wanted, owner


def _check_free_names(
    conn: Connection,
    run: str,
    unlisted: Sequence[Manifest],
    live: dict[tuple[str, str], dict[str, Any]],
    replace: bool,
    rename: str | None,
) -> set[tuple[str, str]]:
    """Read the objects the run's list did not have: one not the run's stops the apply; one of the
    run's (made since by another apply) joins `live`, unless --replace applies over
    it. Their keys."""
    reads = [partial(get, conn, m.resource, m.name, missing_ok=True) for m in unlisted]
    ours: set[tuple[str, str]] = set()
    with closing(in_order(reads, conn.settings.in_flight)) as found:
        for m, other in zip(unlisted, found, strict=True):
            if isinstance(other, Exception):
                raise other
            if other is not None and belongs_to(other, run):
                if not replace:  # (--replace applies over it, after the rest is gone)
                    live[m.key] = other  # another apply of this run made it since the list
                    ours.add(m.key)
            elif other is not None:
                raise ClusterError(not_ours(m.ref, other, conn.namespace, rename))
    return ours


def _replace(conn: Connection, old: RunObjects, timeout: float, report: Report, scope: str) -> None:
    """Delete the old run, every check passed, and wait until its Jobs and Services are gone."""
    run = old.name
    try:
        done = delete_run(conn, old, "Foreground", report)
    except Interrupted as e:
        e.detail = (
            f"{e.detail.split(';')[0]}; nothing of this render was applied: apply again with "
            f"--replace, or remove the run with simpletfjob delete {run} {scope}"
        )
        raise
    if done.replaced:
        raise ClusterError(
            f"{some(done.replaced)} replaced since listed, left alone; the old run {run!r} "
            "was deleted (--replace), and nothing of this render was applied, so as not to "
            "apply over what took the name"
        )
    # The Services too: one the garbage collector still holds cannot be applied again.
    try:
        wait_until_gone(conn, run, timeout, (JOBS, SERVICES), report)
    except Interrupted as e:
        e.detail = (
            f"the old run {run!r} was deleted (--replace), and nothing of this render was "
            "applied; apply again (a plain apply, once it is gone)"
        )
        raise
    except ClusterError as e:
        raise ClusterError(
            f"{e}; the old run is being deleted (--replace), and nothing of this render was applied"
        ) from e


def _apply_all(
    conn: Connection,
    run: str,
    wanted: Sequence[Manifest],
    live: Mapping[tuple[str, str], dict[str, Any]],
    expected: Mapping[tuple[str, str], dict[str, Any]],
    report: Report,
    scope: str,
    owner: Owner | None,
    force: bool,
    *,
    replaced: bool = False,
) -> list[tuple[Manifest, str]]:
    """Apply each manifest for real, in groups (`groups`), `in_flight` at a time; the lines are
    said in the render's order. A failure stops the sending, waits for the writes out and counts
    those that landed; it and an interruption say what was applied, what was not, and the ways
    on. No object is read first: the dry runs judged every name, and `expected` one made
    meanwhile by another apply of the run."""
    done: list[tuple[Manifest, str]] = []
    writes = [
        Write(m.ref, partial(_apply_one, conn, m, live, expected, force=force)) for m in wanted
    ]
    ready: dict[int, Applied] = {}  # answers taken, not yet said (one before them is not)

    def say(i: int) -> None:  # out of `ready` only once in `done`: an interrupt finds it
        m, applied = wanted[i], ready[i]
        if owner is not None:
            owner.applied(m, applied.object)
        done.append((m, applied.outcome))
        del ready[i]
        report(f"{m.ref} {applied.outcome}")

    sending: Sending[Applied] | None = None  # the writes whose requests are out, if any
    at: list[int] = []  # the group being sent: the writes' indices
    try:
        for at in groups(wanted, owner is not None):
            sending = Sending([writes[i] for i in at], conn.settings.in_flight)
            for n, (_, applied) in enumerate(sending):
                ready[at[n]] = applied
                while len(done) in ready:
                    say(len(done))
            sending = None
    except ClusterError as e:
        failed = wanted[at[sending.taken]] if sending is not None else wanted[len(done)]
        landed = sending.settle(conn.settings.deadline) if sending else []
        for write in landed:
            ready[writes.index(write)] = write.result()
        for i in sorted(ready):
            say(i)
        said = str(e)
        if isinstance(e, ApplyConflict):  # a manager that wrote after the dry run
            said = conflicts_line([(failed, e)], halfway=bool(done))
        if not done and replaced:
            said = f"{said}; the old run {run!r} was deleted (--replace), and nothing of this render was applied"
        if done:
            keys = {m.key for m, _ in done}
            left = some([m.ref for m in wanted if m.key not in keys])
            said = (
                f"{said}; applied {len(done)} of {len(wanted)} objects of run {run!r} (listed "
                f"above), not {left}; remove the run with simpletfjob delete {run} {scope}"
            )
        raise ClusterError(said) from e
    except Interrupted as e:
        of = f" of run {run!r} in namespace {conn.namespace}"
        # The answers taken but not said (one before them had none yet) are counted as done.
        reported = {m.ref for m, _ in done}
        out = [*(writes[i] for i in sorted(ready)), *(sending.out() if sending else ())]
        out = list({id(w): w for w in out if w.what not in reported}.values())
        e.progress = cut_short("applied", len(done), len(wanted), of, out or None, e)
        e.detail = (
            f"{e.progress}; apply again to finish it, or remove it with "
            f"simpletfjob delete {run} {scope}"
        )
        raise
    return done


def _apply_one(
    conn: Connection,
    m: Manifest,
    live: Mapping[tuple[str, str], dict[str, Any]],
    expected: Mapping[tuple[str, str], dict[str, Any]],
    *,
    force: bool,
) -> Applied:
    return apply(
        conn, m.resource, m.body, namespace=conn.namespace, live=live.get(m.key), force=force,
        expected=partial(expected.get, m.key),  # derived only if it is needed
    )  # fmt: skip


@dataclass(frozen=True)
class Preview(AppliedRun[P]):
    """A run as apply would send it, none sent: as AppliedRun, with the objects in their order."""

    objects: list[dict[str, Any]]


def preview_run(
    cluster: Settings, plan: Callable[[str], P], choices: Choices, report: Report
) -> Preview[P]:
    """Connect, plan the run for its namespace, and say what apply would do; nothing is sent."""
    where = (cluster.kubeconfig, cluster.context, cluster.namespace, "apply the run to")
    with connect_for(*where) as conn:
        planned = plan(conn.namespace)
        assert planned.job is not None  # a plan to apply has its labels (the options say so)
        wanted, _ = _wanted(conn, planned, choices)
        old = list_run(conn, planned.job)
    outcomes: Counter[str] = Counter()
    live = {(resource.plural, object_name(obj)): obj for resource, obj in old.objects()}
    if choices.replace:
        for resource, obj in old.objects():
            report(f"{resource.ref(object_name(obj))} deleted (dry run)")
            outcomes["deleted"] += 1
        live = {}
    for m in wanted:
        there = live.get(m.key)
        # a listed object has no apiVersion and kind of its own: its list has them
        fields = {k: v for k, v in m.body.items() if k not in ("apiVersion", "kind")}
        outcome = (
            "created" if there is None else "unchanged" if holds(there, fields) else "configured"
        )
        report(f"{m.ref} {outcome} (dry run)")
        outcomes[outcome] += 1
    return Preview(planned, conn.namespace, outcomes, [m.body for m in wanted])


def holds(live: Any, wanted: Any) -> bool:
    """Whether `live` has every field `wanted` sets, with its value: an apply would change nothing."""
    if isinstance(wanted, dict):
        return isinstance(live, dict) and all(
            key in live and holds(live[key], value) for key, value in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(live, list)
            and len(live) == len(wanted)
            and all(holds(a, b) for a, b in zip(live, wanted, strict=True))
        )
    return bool(live == wanted)
