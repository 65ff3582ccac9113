"""What `apply` and `run` add to a run's manifests for the cluster to carry out with no client.

- **--deadline D**: `activeDeadlineSeconds: D` on every Job, the parameter servers' too, so
  that the whole run stops once D has passed (the Job controller fails each Job with
  reason `DeadlineExceeded`).
- **--cleanup-after D**: the Job of the task that decides success (the chief, else worker
  0) owns the run's other Jobs and its Services (`ownerReferences` with that Job's uid),
  and gets `ttlSecondsAfterFinished: D`. Once it has finished and D has passed, the TTL
  controller deletes it, and the garbage collector the rest. Its uid exists only once it
  has been created, so it is applied first (`order`), and the others are given the
  reference as soon as it is known (`Owner.applied`). The TTL-after-finished controller
  is beta from 1.21 and GA from 1.23; from 1.12 to 1.20 it is alpha, off unless the
  TTLAfterFinished feature gate is on, and an API server without the gate drops
  `ttlSecondsAfterFinished` silently. So the server's dry run of the owner, made before
  anything is applied, must keep the field (`Owner.check`): else the run is refused, as
  a cleanup that would never happen.
- **Restarts** (`run --max-restarts N`): the limit, the count so far and those in a row
  without progress (budget.py), as annotations on every Job (`status` shows `restarts 1/3`;
  annotations.read_restarts reads them).
- **Progress** (`--progress-task`, `--progress-pattern`, `--stall-timeout`, and `run`'s best
  step before the attempt): annotations on the deciding Job (`marks`), which runs/reporting.py
  reads; a --progress-task that the run does not have is refused first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from simpletfjob.errors import ClusterError, UsageError
from simpletfjob.identity import (
    MAX_RESTARTS_ANNOTATION,
    PROGRESS_TASK_ANNOTATION,
    RESTARTS_ANNOTATION,
    RESTARTS_WITHOUT_ANNOTATION,
)
from simpletfjob.kube.resources import JOBS

if TYPE_CHECKING:
    from simpletfjob.kube.connection import Connection
    from simpletfjob.runs.objects import Manifest


def deciding_job(wanted: Sequence[Manifest]) -> Manifest | None:
    """The Job of the task whose success is the run's: the framework's lead (TensorFlow's chief),
    else worker 0 (the first of the deciding workers, whatever the success policy)."""
    from simpletfjob.runs.judge import task_name
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
    """Write the limits into the manifests (in place); with cleanup_after, the owner to apply first.

    `restarts` are (done, limit, in a row without progress); `marks`, the deciding Job's.

    The returned `Owner` has reordered `wanted` (its Job first); give its `applied` to
    apply_manifests, which calls it for each object applied.
    """
    for m in wanted:
        if m.resource is not JOBS:
            continue
        if deadline is not None:
            m.body.setdefault("spec", {})["activeDeadlineSeconds"] = max(1, int(-(-deadline // 1)))
        if restarts is not None:
            annotations = m.body.setdefault("metadata", {}).setdefault("annotations", {})
            annotations[RESTARTS_ANNOTATION] = str(restarts[0])
            annotations[MAX_RESTARTS_ANNOTATION] = str(restarts[1])
            annotations[RESTARTS_WITHOUT_ANNOTATION] = str(restarts[2])
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
    from simpletfjob.runs.judge import task_name

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
        """Refuse a server that drops ttlSecondsAfterFinished: `judged` holds its dry run of
        each object, by key (an object it could not judge yet is not there)."""
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
