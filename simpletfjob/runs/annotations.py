"""What a run's Jobs carry: the limits apply writes for the cluster to carry out, and the
annotations status and wait read back.

Written: `--deadline` as every Job's activeDeadlineSeconds (the Job controller fails each with
DeadlineExceeded); `--cleanup-after` as ttlSecondsAfterFinished on the deciding Job, which owns
the rest (so it is applied first, and the others get its uid as soon as it is known). The
TTL-after-finished controller is alpha before 1.21 and a server without its gate drops the field
silently, so the owner's dry run must keep it (`Owner.check`). `run`'s restarts and the progress
options are annotations (the latter on the deciding Job only).

Read back: anyone may `kubectl annotate` a Job, so each value is checked for what it can be
(a success policy, a count within its bound, the same on every Job); one that cannot be right
is flagged, naming the annotation and the Job, and not acted on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from simpletfjob.errors import ClusterError, UsageError
from simpletfjob.identity import (
    INDEX_LABEL,
    MAX_RESTARTS_ANNOTATION,
    MIN_WORKERS_ANNOTATION,
    MOST_RESTARTS,
    POLICY_ANNOTATION,
    PROGRESS_TASK_ANNOTATION,
    RESTARTS_ANNOTATION,
    RESTARTS_WITHOUT_ANNOTATION,
    ROLE_LABEL,
    SUCCESS_POLICIES,
)
from simpletfjob.kube.resources import JOBS
from simpletfjob.tasks import MAX_TASKS

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection
    from simpletfjob.runs.objects import Manifest


DEFAULT_POLICY = "worker0"


@dataclass(frozen=True)
class Restarts:
    """The whole-run restarts so far and their limit; `wrong` says why they cannot be known."""

    done: int = 0
    limit: int = 0
    wrong: str = ""  # then done and limit are 0: nothing is known of them
    in_a_row: int | None = None  # those in a row without progress; None: each counted (= done)


KEYS = (
    POLICY_ANNOTATION,
    MIN_WORKERS_ANNOTATION,
    MAX_RESTARTS_ANNOTATION,
    RESTARTS_ANNOTATION,
    RESTARTS_WITHOUT_ANNOTATION,
)

# What values_of read: for each of KEYS, each value given, with the Jobs that give it.
Found = Mapping[str, Mapping[str, list[str]]]


def _name_and_annotations(job: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    metadata = job.get("metadata")
    if not isinstance(metadata, (dict, Mapping)):
        return "", {}
    found = metadata.get("annotations")
    return str(metadata.get("name") or ""), found if isinstance(found, (dict, Mapping)) else {}


def values_of(jobs: Iterable[Mapping[str, Any]]) -> Found:
    """What the Jobs give each of KEYS, with the Jobs that give it: one pass for every reading."""
    found: dict[str, dict[str, list[str]]] = {key: {} for key in KEYS}
    for job in jobs:
        name, annotations = _name_and_annotations(job)
        for key in KEYS:
            if key in annotations:
                found[key].setdefault(str(annotations[key]), []).append(name)
    return found


def _values(jobs: Iterable[Mapping[str, Any]] | Found, key: str) -> Mapping[str, list[str]]:
    """Each value the Jobs give `key` (or what values_of found), with the Jobs that give it."""
    return (jobs if isinstance(jobs, Mapping) else values_of(jobs))[key]


def _disagree(key: str, found: Mapping[str, list[str]]) -> str:
    each = ", ".join(f"{_said(value)} on job {jobs[0]}" for value, jobs in found.items())
    return f"the Jobs disagree on {key}: {each}"


def _said(value: str) -> str:
    """A value as a message may quote it: short and on one line, else not at all."""
    return repr(value) if len(value) <= 24 and value.isprintable() else "a value too long to show"


def read_policy(jobs: Iterable[Mapping[str, Any]] | Found) -> tuple[str, str]:
    """The run's success policy and '', or the default and why what the Jobs say cannot be right."""
    found = {value: names for value, names in _values(jobs, POLICY_ANNOTATION).items() if value}
    for value, names in found.items():
        if value not in SUCCESS_POLICIES:
            return DEFAULT_POLICY, (
                f"{POLICY_ANNOTATION} on job {names[0]} is {_said(value)}, not a success "
                f"policy ({' or '.join(SUCCESS_POLICIES)})"
            )
    if len(found) > 1:
        return DEFAULT_POLICY, _disagree(POLICY_ANNOTATION, found)
    return next(iter(found), DEFAULT_POLICY), ""  # none: a run applied without one


def read_min_workers(jobs: Iterable[Mapping[str, Any]] | Found) -> tuple[int | None, str]:
    """An elastic run's --min-workers and '', or None and why what the Jobs say cannot be right."""
    found = _values(jobs, MIN_WORKERS_ANNOTATION)
    if not found:
        return None, ""
    for value, names in found.items():
        count = _written_count(value, MAX_TASKS)
        if isinstance(count, str) or count < 1:
            wrong = count if isinstance(count, str) else "is 0, not a count of workers"
            return None, f"{MIN_WORKERS_ANNOTATION} on job {names[0]} {wrong}"
    if len(found) > 1:
        return None, _disagree(MIN_WORKERS_ANNOTATION, found)
    return int(next(iter(found))), ""


def _written_count(value: str, most: int) -> int | str:
    """A count written as `run` writes it ('3'), or what is wrong with it."""
    if not (value.isascii() and value.isdigit()):
        return f"is {_said(value)}, not a count"
    if len(value) > len(str(most)) or int(value) > most:  # no int() of 4300 digits
        return f"is more than {most:,}"
    return int(value)


def read_restarts(jobs: Iterable[Mapping[str, Any]] | Found) -> Restarts:
    """The restarts `run` recorded on the Jobs (see the module); Restarts() for a run it did not apply."""
    jobs = jobs if isinstance(jobs, Mapping) else values_of(jobs)
    if not _values(jobs, MAX_RESTARTS_ANNOTATION):
        return Restarts()
    read: dict[str, int] = {}
    for key in (MAX_RESTARTS_ANNOTATION, RESTARTS_ANNOTATION, RESTARTS_WITHOUT_ANNOTATION):
        found = _values(jobs, key)
        most = 10**6 if key == RESTARTS_ANNOTATION else MOST_RESTARTS  # (the limit bounds it)
        if not found and key == RESTARTS_WITHOUT_ANNOTATION:
            break
        if not found:
            return Restarts(wrong=f"the Jobs have {MAX_RESTARTS_ANNOTATION} but no {key}")
        for value, names in found.items():
            count = _written_count(value, most)
            if isinstance(count, str):
                return Restarts(wrong=f"{key} on job {names[0]} {count}")
        if len({_written_count(value, most) for value in found}) > 1:
            return Restarts(wrong=_disagree(key, found))
        read[key] = int(next(iter(found)))
    done, limit = read[RESTARTS_ANNOTATION], read[MAX_RESTARTS_ANNOTATION]
    in_a_row = read.get(RESTARTS_WITHOUT_ANNOTATION)
    counted, key = (done, RESTARTS_ANNOTATION) if in_a_row is None else (in_a_row, RESTARTS_WITHOUT_ANNOTATION)  # fmt: skip
    if counted > limit:
        return Restarts(wrong=f"{key} ({counted}) is more than {MAX_RESTARTS_ANNOTATION} ({limit})")
    if counted > done:
        return Restarts(wrong=f"{key} ({counted}) is more than {RESTARTS_ANNOTATION} ({done})")
    return Restarts(done, limit, in_a_row=in_a_row)


def deciding_job(wanted: Sequence[Manifest]) -> Manifest | None:
    """The Job of the task whose success is the run's: the framework's lead, else worker 0."""
    from simpletfjob.runs.objects import run_framework

    jobs = {task_name(m.body): m for m in wanted if m.resource is JOBS}
    fw = run_framework(m.body for m in wanted if m.resource is JOBS)
    first = fw.deciding(fw.default_policy, jobs)[:1]
    return jobs.get(first[0]) if first else None


def add_limits(
    wanted: list[Manifest],
    *,
    deadline: float | None,
    cleanup_after: float | None,
    restarts: tuple[int, int, int] | None = None,
    marks: Sequence[tuple[str, str]] = (),
) -> Owner | None:
    """Write the limits into the manifests (in place); with cleanup_after, the `Owner`, whose Job
    is moved first and whose `applied` apply_planned calls for each object applied.

    `restarts` are (done, limit, in a row without progress); `marks`, the deciding Job's.
    """
    for m in wanted:
        if m.resource is not JOBS:
            continue
        if deadline is not None:
            m.body.setdefault("spec", {})["activeDeadlineSeconds"] = max(1, int(-(-deadline // 1)))
        if restarts is not None:
            annotations = m.body.setdefault("metadata", {}).setdefault("annotations", {})
            keys = (RESTARTS_ANNOTATION, MAX_RESTARTS_ANNOTATION, RESTARTS_WITHOUT_ANNOTATION)
            annotations.update(zip(keys, map(str, restarts), strict=True))
    if marks:
        _mark(wanted, dict(marks))
    if cleanup_after is None:
        return None
    owner = deciding_job(wanted)
    if owner is None:
        return None
    owner.body.setdefault("spec", {})["ttlSecondsAfterFinished"] = int(-(-cleanup_after // 1))
    wanted.remove(owner)
    wanted.insert(0, owner)
    return Owner(owner, wanted[1:])


def _mark(wanted: Sequence[Manifest], marks: Mapping[str, str]) -> None:
    tasks = [task_name(m.body) for m in wanted if m.resource is JOBS]
    chosen = marks.get(PROGRESS_TASK_ANNOTATION)
    if chosen and chosen not in tasks:
        raise UsageError(
            f"--progress-task names {chosen!r}, which the run does not have; its tasks are "
            f"{', '.join(tasks)}"
        )
    job = deciding_job(wanted)
    if job is not None:
        job.body.setdefault("metadata", {}).setdefault("annotations", {}).update(marks)


class Owner:
    """The deciding Job, and the objects that get its ownerReference once its uid is known."""

    def __init__(self, owner: Manifest, owned: Sequence[Manifest]) -> None:
        self.owner = owner
        self.owned = owned
        self.server = "the API server"  # as messages name it, once `known` has asked it

    def known(self, conn: Connection) -> None:
        """An owner that exists already (the same run applied again) gives its uid at once."""
        from simpletfjob.kube.objects import get

        self.server = str(conn.target)
        live = get(conn, JOBS, self.owner.name, missing_ok=True)
        if live is not None:
            self._refer(live)

    def check(self, judged: Mapping[tuple[str, str], Mapping[str, Any]]) -> None:
        """Refuse a server whose dry run of the owner (in `judged`) drops ttlSecondsAfterFinished."""
        answer = judged.get(self.owner.key)
        if answer is None or "ttlSecondsAfterFinished" in (answer.get("spec") or {}):
            return
        raise ClusterError(
            f"{self.server}: the API server drops ttlSecondsAfterFinished from "
            f"{self.owner.ref} (its dry run), so --cleanup-after would never be carried out: "
            "its TTLAfterFinished feature gate is off (Kubernetes 1.12 to 1.20 need it on); "
            "nothing was applied; leave --cleanup-after out, and delete the run with "
            "simpletfjob delete once it has ended"
        )

    def applied(self, m: Manifest, obj: Mapping[str, Any]) -> None:
        if m is self.owner:
            self._refer(obj)

    def _refer(self, obj: Mapping[str, Any]) -> None:
        uid = (obj.get("metadata") or {}).get("uid")
        if not uid:
            return
        reference = {
            "apiVersion": JOBS.api_version,
            "kind": JOBS.kind,
            "name": self.owner.name,
            "uid": uid,
            # Not a controller: the Job controller adopts by controllerRef, and the Jobs it
            # owns are the GC's to delete, not its own.
            "blockOwnerDeletion": False,
        }
        for m in self.owned:
            m.body.setdefault("metadata", {})["ownerReferences"] = [reference]


def task_name(job: Mapping[str, Any]) -> str:
    """'worker-1', as the Job's labels name its task; '' when they do not."""
    labels = (job.get("metadata") or {}).get("labels") or {}
    role, index = labels.get(ROLE_LABEL), labels.get(INDEX_LABEL)
    return f"{role}-{index}" if role and str(index).isdigit() else ""
