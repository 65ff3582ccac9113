"""runs/taskstate.py and the run's state under --min-workers: a worker lost while M remain is not the run's failure."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from simpletfjob.runs.annotations import read_min_workers
from simpletfjob.runs.state import Run, changes, describe, run_state
from simpletfjob.runs.taskstate import lost_lines
from tests.support.kubeapi import job_status, make_job

T0 = "2024-05-01T10:00:00Z"
LATER = "2024-05-01T10:05:00Z"
GONE = {"failed": 1, "failed_reason": "BackoffLimitExceeded"}
DONE = {"succeeded": 1, "complete": True}


def worker(index: int, floor: str | None = "2", **status: Any) -> dict[str, Any]:
    annotations = {"simpletfjob/success-policy": "all-workers"}
    if floor is not None:
        annotations["simpletfjob/min-workers"] = floor
    labels = {
        "app.kubernetes.io/managed-by": "simpletfjob",
        "simpletfjob/job": "elastic",
        "simpletfjob/role": "worker",
        "simpletfjob/index": str(index),
    }
    return make_job(
        f"elastic-worker-{index}",
        labels=labels,
        annotations=annotations,
        template={"spec": {"restartPolicy": "Never", "containers": [{"name": "t", "image": "t"}]}},
        status=job_status(**status) if status else None,
    )


def state(*jobs: dict[str, Any]) -> Run:
    return run_state("elastic", "default", jobs, [])


def test_a_worker_lost_while_m_remain_is_lost_and_the_others_decide_success() -> None:
    run = state(worker(0, active=1), worker(1, active=1), worker(2, **GONE))
    assert run.state == "Pending"  # not Failed: training goes on (no pod listed: not Running)
    assert [t.state for t in run.tasks][2] == "Lost"
    assert describe(run.tasks[2]) == "worker-2 Lost: BackoffLimitExceeded"
    assert run.tasks[2].finished  # it has ended: wait's cleanup keeps its Job, as a failed one's
    assert run.as_dict()["minWorkers"] == 2
    run = state(worker(0, **DONE), worker(1, **DONE, finish=LATER), worker(2, **GONE))
    assert (run.state, run.decided_by) == ("Succeeded", "worker-1")
    assert run.outcome() == "all 2 workers succeeded (1 lost; min 2)"


def test_fewer_than_m_left_fails_the_run_by_its_first_failure() -> None:
    jobs = [
        worker(0, active=1),
        worker(1, **GONE, finish=T0),
        worker(2, failed=1, failed_reason="DeadlineExceeded", finish=LATER),
    ]
    run = state(*jobs)
    assert (run.state, run.decided_by, run.reason) == ("Failed", "worker-1", "BackoffLimitExceeded")
    assert "Lost" not in [t.state for t in run.tasks]
    # M equal to the workers: the first loss is the run's failure
    run = state(worker(0, "3", active=1), worker(1, "3", active=1), worker(2, "3", **GONE))
    assert (run.state, run.decided_by) == ("Failed", "worker-2")


def test_worker_0_hosts_the_rendezvous_and_is_never_lost() -> None:
    run = state(worker(0, **GONE), worker(1, active=1), worker(2, active=1))
    assert (run.state, run.decided_by) == ("Failed", "worker-0")


def test_without_min_workers_a_lost_worker_fails_the_run_as_before() -> None:
    run = state(worker(0, None, **DONE), worker(1, None, **DONE), worker(2, None, **GONE))
    assert (run.state, run.decided_by) == ("Failed", "worker-2")
    assert "minWorkers" not in run.as_dict()


def test_a_min_workers_annotation_that_cannot_be_right_decides_nothing() -> None:
    run = state(worker(0, "2", active=1), worker(1, "3", active=1), worker(2, "3", **GONE))
    assert run.state == "Ambiguous"
    assert "the Jobs disagree on simpletfjob/min-workers" in run.outcome()
    assert read_min_workers([worker(0, "0")]) == (
        None,
        "simpletfjob/min-workers on job elastic-worker-0 is 0, not a count of workers",
    )
    assert read_min_workers([worker(0, "two")])[1].endswith("is 'two', not a count")
    assert read_min_workers([worker(0, None)]) == (None, "")


def said(before: Run, after: Run) -> list[str]:
    """What `run` says of the change from one state of the run to the next."""
    return lost_lines(changes(before, after), before.tasks, after.tasks, after.min_workers)


def test_run_says_a_newly_lost_worker_in_one_line_with_the_workers_left() -> None:
    before = state(worker(0, active=1), worker(1, active=1), worker(2, active=1))
    after = state(worker(0, active=1), worker(1, active=1), worker(2, **GONE))
    lines = said(before, after)
    assert lines == [
        "worker-2 lost (BackoffLimitExceeded); training goes on with 2 of 3 workers (min 2)"
    ]
    exited = replace(after.tasks[2], exit_code=137)
    after = replace(after, tasks=(*after.tasks[:2], exited))
    assert said(before, after) == [
        "worker-2 lost (exit 137); training goes on with 2 of 3 workers (min 2)"
    ]
    assert said(after, after) == []  # said once
    later = state(worker(0, active=1), worker(1, active=1), worker(2, **GONE, finish=LATER))
    later = replace(later, tasks=(*later.tasks[:2], replace(later.tasks[2], reason="Gone")))
    assert changes(after, later) == ["worker-2 Lost: Gone"]
    assert said(after, later) == []  # and nothing more of it


def test_which_tasks_an_elastic_run_may_lose_is_the_frameworks_rule() -> None:
    from simpletfjob.errors import UsageError
    from simpletfjob.frameworks import framework

    torch, tf = framework("pytorch"), framework("tensorflow")
    three = {"worker-0", "worker-1", "worker-2"}
    assert torch.lost({"worker-2"}, three, 2) == {"worker-2"}
    assert torch.lost({"worker-0"}, three, 2) == frozenset()  # the rendezvous host
    assert torch.lost({"worker-1", "worker-2"}, three, 2) == frozenset()  # fewer than M left
    assert torch.lost({"worker-2"}, three, None) == frozenset()  # not elastic
    assert tf.lost({"worker-2"}, three, 2) == frozenset()  # no elastic runs
    torch.check_floor(3, ["worker"] * 3)
    with pytest.raises(UsageError) as raised:
        torch.check_floor(4, ["worker"] * 3)
    assert str(raised.value) == (
        "--min-workers 4 is more than the run's 3 workers; give at most 3, or more hosts"
    )


def let_go(job: dict[str, Any], why: str) -> dict[str, Any]:
    """The Job as `run` leaves a worker it let go (runs/interventions.py)."""
    job["metadata"].setdefault("annotations", {})["simpletfjob/lost"] = why
    job["spec"]["parallelism"] = 0
    return job


def test_a_worker_let_go_is_lost_with_its_reason_and_the_others_decide_success() -> None:
    why = "node h3 NotReady for more than 2s"
    run = state(worker(0, active=1), worker(1, active=1), let_go(worker(2, active=1), why))
    assert [t.state for t in run.tasks] == ["Pending", "Pending", "Lost"]
    assert describe(run.tasks[2]) == f"worker-2 Lost: {why}"
    assert run.tasks[2].finished
    run = state(worker(0, **DONE), worker(1, **DONE), let_go(worker(2), why))
    assert run.state == "Succeeded"
    assert run.outcome() == "all 2 workers succeeded (1 lost; min 2)"


@pytest.mark.parametrize(
    ("cause", "floor", "let_go_of"),
    [
        ("refused", "2", True),
        ("node", "2", True),
        ("node", "3", False),  # fewer than M would remain: the run's failure
        ("refused", None, False),  # not elastic
    ],
)
def test_which_refusals_and_lost_nodes_an_elastic_run_trains_on_without(
    cause: str, floor: str | None, let_go_of: bool
) -> None:
    from simpletfjob.runs.classify import node_lost, refused
    from simpletfjob.runs.interventions import losable, reason

    run = state(*(worker(i, floor, active=1) for i in range(3)))
    made = (
        refused("worker-2", "h3", "OutOfcpu")
        if cause == "refused"
        else node_lost(["worker-2"], "h3", "NotReady", "2s")
    )
    assert losable(run, made) is let_go_of
    words = {"refused": "refused by node h3: OutOfcpu", "node": "node h3 NotReady for more than 2s"}
    assert reason(made) == words[cause]


def test_the_rendezvous_host_is_never_let_go() -> None:
    from simpletfjob.runs.classify import node_lost
    from simpletfjob.runs.interventions import losable

    run = state(*(worker(i, active=1) for i in range(3)))
    assert not losable(run, node_lost(["worker-0"], "h1", "NotReady", "2s"))
    assert not losable(run, node_lost(["worker-1", "worker-2"], "h2", "NotReady", "2s"))
    assert losable(run, node_lost(["worker-1"], "h2", "NotReady", "2s"))
