"""What is added to every rendered document of a run: labels, the run's annotations, and a
namespace where a document has none."""

from __future__ import annotations

from simpletfjob.identity import (
    INDEX_LABEL,
    JOB_LABEL,
    MANAGED_BY,
    MANAGER,
    MIN_WORKERS_ANNOTATION,
    NAME_ANNOTATION,
    POLICY_ANNOTATION,
    ROLE_LABEL,
)
from simpletfjob.tasks import Task


class Decoration:
    """What is added to every rendered document: labels, the run's annotations, and a namespace where missing."""

    def __init__(
        self,
        job: str | None,
        namespace: str | None,
        policy: str | None = None,
        min_workers: int | None = None,
    ) -> None:
        self.job = job  # the simpletfjob/job label value; None with --no-labels
        self.namespace = namespace
        self.policy = policy  # the success policy, with the labels (runs/state.py reads it)
        self.min_workers = min_workers  # an elastic run's --min-workers (runs/state.py reads it)
        self.conflicts: dict[str, tuple[str, str]] = {}
        self.index_text: str | None = None  # a role's skeleton: its index label's token

    def for_skeleton(self, index_text: str) -> Decoration:
        """The same decoration, for a role's skeleton: its index label is `index_text`."""
        copy = Decoration(self.job, self.namespace, self.policy, self.min_workers)
        copy.index_text = index_text
        return copy

    def annotations(self, name: str = "") -> dict[str, str]:
        """The run's success policy (and --min-workers), and the document's own name (when it has one)."""
        if self.job is None or self.policy is None:
            return {}
        own = {NAME_ANNOTATION: name} if name else {}
        if self.min_workers is not None:
            own = {MIN_WORKERS_ANNOTATION: str(self.min_workers), **own}
        return {POLICY_ANNOTATION: self.policy, **own}

    def labels(self, task: Task) -> dict[str, str]:
        if self.job is None:
            return {}
        return {
            MANAGED_BY: MANAGER,
            JOB_LABEL: self.job,
            ROLE_LABEL: task.role,
            INDEX_LABEL: str(task.index) if self.index_text is None else self.index_text,
        }

    def conflict(self, key: str, theirs: str, ours: str) -> None:
        self.conflicts.setdefault(key, (theirs, ours))
