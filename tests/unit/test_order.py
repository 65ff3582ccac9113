"""The groups apply sends a run's objects in (runs/judge.py): the owner alone, the Services,
the Jobs that decide the run, then the other Jobs; each group in the render's order."""

from __future__ import annotations

from typing import Any

from simpletfjob.identity import INDEX_LABEL, POLICY_ANNOTATION, ROLE_LABEL
from simpletfjob.kube.resources import JOBS, SERVICES
from simpletfjob.runs.judge import groups, only_deciding
from simpletfjob.runs.objects import Manifest


def job(task: str, policy: str | None = None, env: dict[str, str] | None = None) -> Manifest:
    role, _, index = task.rpartition("-")
    body: dict[str, Any] = {
        "metadata": {"name": f"r-{task}", "labels": {ROLE_LABEL: role, INDEX_LABEL: index}},
        "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}},
    }
    if policy:
        body["metadata"]["annotations"] = {POLICY_ANNOTATION: policy}
    if env:
        container = body["spec"]["template"]["spec"]["containers"][0]
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return Manifest(JOBS, body, f"Job 'r-{task}'")


def service(name: str) -> Manifest:
    return Manifest(SERVICES, {"metadata": {"name": name}}, f"Service {name!r}")


def names(wanted: list[Manifest], owner_first: bool = False) -> list[list[str]]:
    return [[wanted[i].name for i in group] for group in groups(wanted, owner_first)]


def test_worker_0_goes_before_the_other_jobs_after_the_services() -> None:
    wanted = [service("r-ps-0"), job("ps-0"), job("worker-0"), job("worker-1")]
    assert names(wanted) == [["r-ps-0"], ["r-worker-0"], ["r-ps-0", "r-worker-1"]]


def test_the_chief_decides_when_there_is_one_whatever_the_policy() -> None:
    wanted = [job("chief-0", "all-workers"), job("ps-0", "all-workers")]
    wanted += [job("worker-0", "all-workers"), job("evaluator-0", "all-workers")]
    assert names(wanted) == [["r-chief-0"], ["r-ps-0", "r-worker-0", "r-evaluator-0"]]


def test_under_all_workers_every_worker_goes_first() -> None:
    wanted = [job("ps-0", "all-workers"), job("worker-0", "all-workers")]
    wanted += [job("worker-1", "all-workers"), job("evaluator-0", "all-workers")]
    assert names(wanted) == [["r-worker-0", "r-worker-1"], ["r-ps-0", "r-evaluator-0"]]


def test_a_run_whose_jobs_all_decide_is_one_group() -> None:
    nodes = {"PET_NNODES": "2"}  # PyTorch: every worker decides, as render says by default
    wanted = [job("worker-0", "all-workers", nodes), job("worker-1", "all-workers", nodes)]
    assert names(wanted) == [["r-worker-0", "r-worker-1"]]


def test_the_owner_of_cleanup_after_still_goes_alone_and_first() -> None:
    # annotations.py moves the deciding Job first: it owns the rest.
    wanted = [job("worker-0"), service("r-ps-0"), job("ps-0"), job("worker-1")]
    assert names(wanted, owner_first=True) == [
        ["r-worker-0"],
        ["r-ps-0"],
        ["r-ps-0", "r-worker-1"],
    ]


def test_only_deciding_jobs_there_is_a_run_still_being_applied() -> None:
    policy = "all-workers"
    named = ["ps-0", "worker-0", "worker-1", "worker-2"]
    some = [job("worker-0", policy).body, job("worker-2", policy).body]
    assert only_deciding(some, named)
    beside = [*some, job("ps-0", policy).body]
    assert not only_deciding(beside, named)
    # A chief the others name decides: workers without it are what is left of a run.
    assert not only_deciding([job("worker-0").body], ["chief-0", "worker-0"])
    assert not only_deciding([], named)
