"""The order apply sends a run's objects in (apply.py): groups that go one after the other.

Each group's writes are all answered before the next group's go, and the lines are said
in the render's order whatever the group:

1. the owner of `--cleanup-after` (limits.py), alone: the others name its uid;
2. the Services: their pods' DNS names exist before any task starts;
3. the Jobs whose success is the run's (the framework's `deciding`: TensorFlow's chief,
   else worker 0, or every worker under `all-workers`);
4. the other Jobs.

With the deciding Jobs first, no apply, cut short or running beside another, leaves Jobs of
the run without the Jobs that decide it: a run whose deciding Job is missing while another
task's Job is there had that Job deleted (state.py: Failed, `deleted`), and one where only
deciding Jobs are there, none of them ended, is one still being applied (apply.py applies
the rest, as the interrupt's line says to).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from simpletfjob.identity import INDEX_LABEL, ROLE_LABEL
from simpletfjob.kube.resources import JOBS
from simpletfjob.runs.manifests import Manifest

if TYPE_CHECKING:
    from simpletfjob.runs.state import Run


def groups(wanted: Sequence[Manifest], owner_first: bool) -> list[list[int]]:
    """The manifests' indices in the groups above, each group in the render's order."""
    found: list[list[int]] = []
    for i, m in enumerate(wanted):
        alone = owner_first and i <= 1
        if not found or alone or m.resource is not wanted[i - 1].resource:
            found.append([])
        found[-1].append(i)
    jobs = [i for i, m in enumerate(wanted) if m.resource is JOBS]
    leads = {jobs[n] for n in deciding_jobs([wanted[i].body for i in jobs])}
    split: list[list[int]] = []
    for group in found:
        first = [i for i in group if i in leads]
        rest = [i for i in group if i not in leads]
        split.extend(g for g in (first, rest) if g)
    return split


def deciding_jobs(jobs: Sequence[Mapping[str, Any]], named: Iterable[str] = ()) -> set[int]:
    """The indices, among a run's Job bodies, of those whose success is the run's; `named`:
    the run's other tasks (those its Jobs' variables name: one deciding may be missing)."""
    from simpletfjob.runs.annotations import read_min_workers, read_policy
    from simpletfjob.runs.objects import run_framework

    names = [task_name(job) for job in jobs]
    floor, _ = read_min_workers(jobs)
    fw = run_framework(jobs, elastic=floor is not None)
    policy, _ = read_policy(jobs)
    decide = set(fw.deciding(policy, [*(n for n in names if n), *named]))
    return {i for i, name in enumerate(names) if name and name in decide}


def task_name(job: Mapping[str, Any]) -> str:
    """'worker-1', as the Job's labels name its task; '' when they do not."""
    labels = (job.get("metadata") or {}).get("labels") or {}
    role, index = labels.get(ROLE_LABEL), labels.get(INDEX_LABEL)
    return f"{role}-{index}" if role and str(index).isdigit() else ""


def only_deciding(jobs: Sequence[Mapping[str, Any]], named: Iterable[str]) -> bool:
    """Whether every one of a run's Jobs (as listed) decides its success, of the tasks `named`."""
    return bool(jobs) and len(deciding_jobs(jobs, named)) == len(jobs)


def being_applied(ended: Run, jobs: Sequence[Mapping[str, Any]], named: Iterable[str]) -> bool:
    """Whether a run judged ended (state.py) is one an apply was still making, or had made when
    it was cut short: a deciding Job missing (reason `deleted`), only deciding Jobs there, and
    none of them ended. Whatever else left a run so looks the same: a worker deleted while
    the run went on where every Job decides (`all-workers`, PyTorch's and JAX's default, with
    workers only), or a cleanup or a delete cut short after the other Jobs were gone."""
    from simpletfjob.runs.state import DELETED

    finished = any(task.finished for task in ended.tasks)
    return ended.reason == DELETED and not finished and only_deciding(jobs, named)
