"""What is added to every rendered document of a run: labels, the run's annotations, and a
namespace where a document has none."""

from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass(eq=False)
class Decoration:
    """What is added to every rendered document: labels, the run's annotations, and a namespace where missing."""

    job: str | None  # the simpletfjob/job label value; None with --no-labels
    namespace: str | None
    policy: str | None = None  # the success policy, with the labels (runs/state.py reads it)
    min_workers: int | None = None  # an elastic run's --min-workers (runs/state.py reads it)
    index_text: str | None = None  # a role's skeleton: its index label's token
    conflicts: dict[str, tuple[str, str]] = field(default_factory=dict)

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
