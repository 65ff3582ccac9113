"""runs/state.py and runs/taskstate.py: each task's state and the run's, from Jobs and pods as the API server returns them."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simpletfjob.cli.status import age
from simpletfjob.frameworks import framework
from simpletfjob.runs.state import (
    DELETED,
    Run,
    changes,
    describe,
    run_state,
    task_of,
)
from simpletfjob.runs.taskstate import node_condition
from simpletfjob.runs.watch import group_runs
from tests.conftest import EXAMPLES
from tests.support.kubeapi import job_status
from tests.support.scenes import task_job as job
from tests.support.scenes import task_pod as pod

T0 = "2024-05-01T10:00:00Z"
LATER = "2024-05-01T10:05:00Z"
EARLIER = "2024-05-01T09:59:59Z"


def state(jobs: list[dict[str, Any]], pods: Sequence[dict[str, Any]] = (), **kw: Any) -> Run:
    return run_state("mnist", "default", jobs, pods, **kw)


# -- one task ----------------------------------------------------------------------------------


def test_a_task_is_named_by_its_role_and_index_and_runs_where_its_pod_runs() -> None:
    worker = job("worker", 1, node="h2")
    task = task_of(worker, [pod(worker, node="h9", phase="Running")])
    assert (task.task, task.role, task.index, task.job) == (
        "worker-1",
        "worker",
        1,
        "mnist-worker-1",
    )
    assert (task.state, task.node, task.restarts, task.reason) == ("Running", "h9", 0, "")


def test_a_task_without_a_pod_is_pending_on_the_node_its_template_pins() -> None:
    task = task_of(job("ps", 0, node="h1"), [])
    assert (task.state, task.node, task.reason) == ("Pending", "h1", "no pod yet")


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"node": "h1", "phase": "Pending", "waiting": "ImagePullBackOff"}, "ImagePullBackOff"),
        ({"node": "h1", "phase": "Pending"}, "ContainerCreating"),
        ({"phase": "Pending"}, "Unschedulable"),
    ],
)
def test_a_pending_task_says_why_its_pod_does_not_run(kwargs: dict[str, Any], reason: str) -> None:
    worker = job("worker", 0)
    task = task_of(worker, [pod(worker, **kwargs)])
    assert (task.state, task.reason) == ("Pending", reason)


def test_restarts_count_container_restarts_and_failed_pods_with_the_last_failure() -> None:
    worker = job("worker", 0, active=1, failed=2)
    pods = [
        pod(worker, "a", node="h1", phase="Failed", exit_code=1),
        pod(worker, "b", node="h1", phase="Failed", exit_code=137, finished=LATER),
        pod(worker, "c", node="h1", phase="Running", restarts=3),
    ]
    task = task_of(worker, pods)
    assert task.restarts == 3 + 2
    assert (task.state, task.reason) == ("Running", "OOMKilled")  # the later failure
    assert describe(task) == "worker-0 Running on h1 after 5 restarts (last: OOMKilled)"


def test_failed_pods_that_are_gone_still_count_through_the_job() -> None:
    task = task_of(job("worker", 0, active=1, failed=4), [])
    assert task.restarts == 4


def test_a_failed_run_is_judged_beside_a_job_whose_name_is_not_a_string() -> None:
    failed = job("worker", 0, failed=1, failed_reason="BackoffLimitExceeded")
    odd = job("worker", 1, active=1)
    odd["metadata"]["name"] = ["x"]  # not a name a server gives: judged, never a crash
    run = state([failed, odd])
    assert (run.state, run.decided_by) == ("Failed", "worker-0")


def test_the_logs_tasks_skip_a_job_being_deleted_and_bear_odd_metadata() -> None:
    """logs' view of the run's tasks (runs/logsources.py) reads a Job and its pods as the judge
    does: a Job being deleted is no task, and metadata that is not a map is read as empty."""
    from simpletfjob.runs.logsources import pods_gone, tasks_of

    first, second, going = job("worker", 0, active=1), job("worker", 1), job("worker", 2)
    going["metadata"]["deletionTimestamp"] = "2026-11-29T10:00:00Z"
    later, earlier = pod(first, node="h1"), pod(first, node="h1")
    later["metadata"].update(name="later", creationTimestamp="2026-11-29T10:00:02Z")
    earlier["metadata"].update(name="earlier", creationTimestamp="2026-11-29T10:00:01Z")
    tasks = tasks_of([first, second, going], [later, earlier])
    assert list(tasks) == ["worker-0", "worker-1"]
    assert [p["metadata"]["name"] for p in tasks["worker-0"]] == ["earlier", "later"]
    odd = job("worker", 3)
    odd["metadata"] = ["not", "a", "map"]  # not what a server sends: read, never a crash
    assert "worker-0" in tasks_of([first, odd], [later])
    assert pods_gone([odd], {}) <= {""}


def test_a_failed_job_is_failed_with_its_last_pod_failure_else_its_condition() -> None:
    worker = job("worker", 1, failed=1, failed_reason="BackoffLimitExceeded")
    failed = task_of(worker, [pod(worker, node="h1", phase="Failed", exit_code=1)])
    assert (failed.state, failed.reason) == ("Failed", "Error (exit 1)")
    assert describe(failed) == "worker-1 Failed: Error (exit 1)"
    alone = task_of(worker, [])
    assert (alone.state, alone.reason) == ("Failed", "BackoffLimitExceeded")
    assert alone.reason_from_job and not failed.reason_from_job


def test_a_succeeded_pod_says_so_but_only_its_complete_job_ends_the_task() -> None:
    worker = job("worker", 0, active=1)
    task = task_of(worker, [pod(worker, node="h1", phase="Succeeded")])
    assert (task.state, task.node, task.finished, task.job_condition) == (
        "Succeeded", "h1", False, "",
    )  # fmt: skip
    assert describe(task) == "worker-0 Succeeded"
    jobs = [job("ps", 0, active=1), worker]
    running = state(jobs, [pod(jobs[0], node="h1"), pod(worker, node="h1", phase="Succeeded")])
    assert (running.state, running.decided_by) == ("Running", "")  # not yet decided


@pytest.mark.parametrize(
    ("kwargs", "line"),
    [
        ({"exit_code": 1}, "worker-1 Failed (exit 1)"),
        ({"exit_code": 137, "reason": "OOMKilled"}, "worker-1 Failed (OOMKilled)"),
        ({"exit_code": 128, "reason": "ContainerCannotRun"}, "worker-1 Failed (ContainerCannotRun, exit 128)"),
    ],
)  # fmt: skip
def test_a_pod_that_failed_before_its_job_did_says_what_the_pod_says(
    kwargs: dict[str, Any], line: str
) -> None:
    worker = job("worker", 1, active=1)
    failed = pod(worker, node="h1", phase="Failed", **kwargs)
    task = task_of(worker, [failed])
    assert (task.state, task.finished, task.restarts) == ("Failed", False, 1)
    assert describe(task) == line
    # it decides nothing: the Job may still retry
    run = state([job("worker", 0, active=1), worker], [failed])
    assert (run.state, run.decided_by) == ("Pending", "")
    # then the Job fails: the task has ended, and the run with it
    ended = job("worker", 1, failed=1, failed_reason="BackoffLimitExceeded")
    task = task_of(ended, [failed])
    assert (task.state, task.finished, task.job_condition) == ("Failed", True, "Failed")
    assert state([job("worker", 0, active=1), ended], [failed]).state == "Failed"


def test_a_pod_the_node_refused_before_the_job_counted_it_says_why() -> None:
    worker = job("worker", 1, active=1)
    refused = pod(worker, node="h1", phase="Failed", reason="OutOfcpu")
    refused["status"] = {"phase": "Failed", "reason": "OutOfcpu", "message": "no cpu"}
    assert describe(task_of(worker, [refused])) == "worker-1 Failed (OutOfcpu)"


def test_a_new_attempt_waiting_after_a_failure_says_so_as_a_running_one_does() -> None:
    worker = job("worker", 1, active=1, failed=1)
    failed = pod(worker, "a", node="h1", phase="Failed", exit_code=1)
    again = pod(worker, "b", node="h1", phase="Pending")
    again["status"] = {"phase": "Pending"}  # made, not yet scheduled: no reason of its own
    task = task_of(worker, [failed, again])
    assert (task.state, task.reason, task.restarts) == ("Pending", "Error (exit 1)", 1)
    assert describe(task) == "worker-1 Pending after 1 restart (last: Error (exit 1))"
    waiting = pod(worker, "b", node="h1", phase="Pending", waiting="ContainerCreating")
    assert describe(task_of(worker, [failed, waiting])) == "worker-1 Pending: ContainerCreating"


def test_restarts_in_place_are_not_known_once_the_pod_that_held_them_is_gone() -> None:
    chief = job("chief", 0, restart="OnFailure", active=1)
    crashing = pod(chief, node="h1", phase="Running", restarts=3)
    assert task_of(chief, [crashing]).restarts == 3
    # backoffLimit reached: the Job controller deletes the pod and counts it failed
    ended = job("chief", 0, restart="OnFailure", failed=1, failed_reason="BackoffLimitExceeded")
    assert task_of(ended, [crashing]).restarts == 4  # the pod still there, being deleted
    gone = task_of(ended, [])
    assert (gone.restarts, gone.state, gone.reason) == (None, "Failed", "BackoffLimitExceeded")
    assert gone.as_dict()["restarts"] is None
    assert state([ended]).as_dict()["tasks"][0]["restarts"] is None
    # under Never the Job counts every failed pod: the count is known without them
    assert (
        task_of(job("chief", 0, failed=3, failed_reason="BackoffLimitExceeded"), []).restarts == 3
    )
    running = task_of(job("chief", 0, restart="OnFailure", active=1), [])
    assert running.restarts is None  # counted active, but not listed (deleted by hand)
    # a Job controller that failed the Job without counting the pod it deleted: still unknown
    uncounted = job("chief", 0, restart="OnFailure", failed_reason="BackoffLimitExceeded")
    assert task_of(uncounted, []).restarts is None
    assert describe(replace(gone, state="Running", reason="Error (exit 1)")) == (
        "chief-0 Running (last: Error (exit 1))"
    )


def test_a_complete_job_is_succeeded() -> None:
    worker = job("worker", 0, succeeded=1, complete=True)
    task = task_of(worker, [pod(worker, node="h1", phase="Succeeded")])
    assert (task.state, task.reason) == ("Succeeded", "")
    assert describe(task) == "worker-0 Succeeded"


# -- the run ------------------------------------------------------------------------------------


def ps_worker_run(**worker0: Any) -> list[dict[str, Any]]:
    return [
        job("ps", 0, active=1),
        job("worker", 0, **(worker0 or {"active": 1})),
        job("worker", 1, active=1),
    ]


def test_tasks_come_in_role_order_and_the_json_has_the_documented_keys() -> None:
    jobs = [job("evaluator", 0), job("worker", 10), job("worker", 2), job("ps", 0), job("chief", 0)]
    run = state(jobs)
    assert [t.task for t in run.tasks] == [
        "chief-0",
        "ps-0",
        "worker-2",
        "worker-10",
        "evaluator-0",
    ]
    data = run.as_dict()
    assert list(data) == [
        "name", "namespace", "state", "successPolicy", "restarts", "maxRestarts",
        "restartsWithoutProgress", "startTime", "completionTime", "tasks", "progress",
    ]  # fmt: skip
    assert (data["restarts"], data["maxRestarts"]) == (0, 0)  # not applied by `run`
    assert list(data["tasks"][0]) == [
        "task", "role", "index", "job", "node", "state", "restarts", "reason", "exitCode",
        "jobCondition", "startTime", "completionTime", "message",
    ]  # fmt: skip


def test_a_run_is_pending_until_a_pod_runs_then_running() -> None:
    jobs = ps_worker_run()
    assert state(jobs).state == "Pending"
    assert state(jobs, [pod(jobs[0], node="h1", phase="Running")]).state == "Running"


def test_worker0_decides_success_by_default() -> None:
    run = state(ps_worker_run(succeeded=1, complete=True))
    assert (run.state, run.decided_by, run.policy) == ("Succeeded", "worker-0", "worker0")
    assert run.outcome() == "worker-0 Succeeded"


def test_all_workers_waits_for_every_worker() -> None:
    jobs = [
        job("ps", 0, active=1, policy="all-workers"),
        job("worker", 0, succeeded=1, complete=True, policy="all-workers"),
        job("worker", 1, active=1, policy="all-workers"),
    ]
    assert (state(jobs).state, state(jobs).policy) == ("Pending", "all-workers")
    jobs[2] = job("worker", 1, succeeded=1, complete=True, finish=LATER, policy="all-workers")
    run = state(jobs)
    assert (run.state, run.decided_by) == ("Succeeded", "worker-1")  # the last to finish
    # The success line states the rule, not one worker's name.
    assert run.outcome() == "all 2 workers succeeded"


def test_the_chief_decides_when_there_is_one() -> None:
    jobs = [job("chief", 0, active=1), job("worker", 0, succeeded=1, complete=True)]
    assert state(jobs).state == "Pending"
    jobs[0] = job("chief", 0, succeeded=1, complete=True)
    assert state(jobs).decided_by == "chief-0"


def test_ps_and_evaluator_never_decide_success() -> None:
    jobs = [
        job("ps", 0, succeeded=1, complete=True),
        job("worker", 0, active=1),
        job("evaluator", 0, succeeded=1, complete=True),
    ]
    assert state(jobs).state == "Pending"


def test_any_failed_job_fails_the_run_even_a_ps() -> None:
    jobs = ps_worker_run()
    jobs[0] = job("ps", 0, failed=1, failed_reason="BackoffLimitExceeded")
    run = state(jobs)
    assert (run.state, run.decided_by, run.reason) == ("Failed", "ps-0", "BackoffLimitExceeded")
    assert run.outcome() == "ps-0 Failed: BackoffLimitExceeded"


def test_the_first_failure_is_the_one_named() -> None:
    jobs = [
        job("worker", 0, failed=1, failed_reason="BackoffLimitExceeded", finish=LATER),
        job("worker", 1, failed=1, failed_reason="DeadlineExceeded", finish=T0),
    ]
    assert state(jobs).decided_by == "worker-1"


def test_a_failure_after_the_run_succeeded_does_not_undo_it() -> None:
    jobs = [
        job("worker", 0, succeeded=1, complete=True, finish=T0),
        job("worker", 1, failed=1, failed_reason="BackoffLimitExceeded", finish=LATER),
    ]
    assert state(jobs).state == "Succeeded"
    jobs[1] = job("worker", 1, failed=1, failed_reason="BackoffLimitExceeded", finish=T0)
    assert state(jobs).state == "Succeeded"  # at the same time: success wins the tie
    jobs[1] = job("worker", 1, failed=1, failed_reason="BackoffLimitExceeded", finish=EARLIER)
    assert (state(jobs).state, state(jobs).decided_by) == ("Failed", "worker-1")  # a second before


def test_jobs_cleanup_removed_are_not_listed_and_do_not_change_the_state() -> None:
    # after wait: worker 0 complete, the running ps and worker 1 deleted
    run = state([job("worker", 0, succeeded=1, complete=True)])
    assert ([t.task for t in run.tasks], run.state) == (["worker-0"], "Succeeded")
    failed = state([job("worker", 1, failed=1, failed_reason="BackoffLimitExceeded")])
    assert failed.state == "Failed" and failed.decided_by == "worker-1"


def test_a_deciding_job_gone_before_it_finished_fails_the_run_as_deleted() -> None:
    run = state([job("ps", 0, active=1), job("worker", 1, active=1)])
    assert (run.state, run.decided_by, run.reason) == ("Failed", "worker-0", DELETED)
    assert run.outcome() == (
        "worker-0's Job is gone and its end was not seen "
        "(deleted, or removed by ttlSecondsAfterFinished)"
    )
    # wait knows the chief was there: its Job being gone fails the run, the workers do not decide
    later = state([job("worker", 0, succeeded=1, complete=True)], expected=["chief-0", "worker-0"])
    assert (later.state, later.decided_by, later.reason) == ("Failed", "chief-0", DELETED)


def test_a_job_being_deleted_counts_as_gone() -> None:
    jobs = ps_worker_run()
    jobs[1]["metadata"]["deletionTimestamp"] = LATER
    run = state(jobs)
    assert "worker-0" not in [t.task for t in run.tasks]
    assert (run.state, run.reason) == ("Failed", DELETED)


def a_copy(of: dict[str, Any], name: str) -> dict[str, Any]:
    """What kubectl get -o json | kubectl create makes under another name: labels and annotations kept."""
    copied = copy.deepcopy(of)
    copied["metadata"]["name"] = name
    copied["metadata"]["uid"] = f"uid-{name}"
    return copied


def test_a_task_that_two_jobs_claim_makes_the_run_ambiguous_and_names_them() -> None:
    worker0 = job("worker", 0)
    worker0["metadata"]["annotations"] = {"simpletfjob/name": "mnist-worker-0"}
    copied = a_copy(worker0, "mnist-worker-0-copy")
    copied["status"] = job_status(succeeded=1, complete=True)
    run = state([job("ps", 0), worker0, copied])
    assert run.state == "Ambiguous" and not run.finished
    (claim,) = run.claims
    assert (claim.task, claim.jobs, claim.copies) == (
        "worker-0",
        ("mnist-worker-0", "mnist-worker-0-copy"),
        ("mnist-worker-0-copy",),
    )
    assert run.outcome() == (
        "worker-0 is claimed by 2 Jobs: mnist-worker-0, mnist-worker-0-copy (a copy)"
    )
    assert run.as_dict()["claims"] == [
        {
            "task": "worker-0",
            "jobs": ["mnist-worker-0", "mnist-worker-0-copy"],
            "copies": ["mnist-worker-0-copy"],
        }
    ]
    by_job = {t.job: t for t in run.tasks}
    assert by_job["mnist-worker-0"].applied and not by_job["mnist-worker-0-copy"].applied
    assert by_job["mnist-worker-0-copy"].copied_from == "mnist-worker-0"
    # Jobs from an older version have no annotation: neither is known to be a copy
    plain = state([job("worker", 0), a_copy(job("worker", 0), "other")])
    assert plain.state == "Ambiguous" and plain.claims[0].copies == ()
    assert "claims" not in state([job("worker", 0)]).as_dict()


def annotated(jobs: list[dict[str, Any]], **values: str) -> list[dict[str, Any]]:
    """The Jobs with these annotations (restarts=..., max_restarts=..., policy=...)."""
    keys = {"restarts": "restarts", "max_restarts": "max-restarts", "policy": "success-policy"}
    keys["without"] = "restarts-without-progress"
    for one in jobs:
        found = one["metadata"].setdefault("annotations", {})
        found.update({f"simpletfjob/{keys[k]}": v for k, v in values.items()})
    return jobs


def test_restart_annotations_are_read_as_bounded_counts() -> None:
    run = state(annotated(ps_worker_run(), restarts="1", max_restarts="3"))
    assert (run.restarts, run.wrong_restarts) == ((1, 3), "")
    assert "annotationErrors" not in run.as_dict()
    assert state(ps_worker_run()).restarts == (0, 0)  # not applied by `run`


def test_restarts_in_a_row_without_progress_are_what_the_limit_bounds() -> None:
    # A run whose progress gave its budget back: 5 made in all under --max-restarts 3.
    run = state(annotated(ps_worker_run(), restarts="5", max_restarts="3", without="1"))
    assert (run.restarts, run.in_a_row, run.wrong_restarts) == ((5, 3), 1, "")
    data = run.as_dict()
    assert (data["restarts"], data["maxRestarts"], data["restartsWithoutProgress"]) == (5, 3, 1)
    # Without the count in a row (a run applied before), every restart counted.
    run = state(annotated(ps_worker_run(), restarts="2", max_restarts="3"))
    assert (run.restarts, run.in_a_row) == ((2, 3), 2)
    for without, wrong in (
        (
            "4",
            "simpletfjob/restarts-without-progress (4) is more than simpletfjob/max-restarts (3)",
        ),
        ("3", "simpletfjob/restarts-without-progress (3) is more than simpletfjob/restarts (2)"),
        ("x", "simpletfjob/restarts-without-progress on job mnist-ps-0 is 'x', not a count"),
    ):
        run = state(annotated(ps_worker_run(), restarts="2", max_restarts="3", without=without))
        assert (run.restarts, run.wrong_restarts) == ((0, 0), wrong)


@pytest.mark.parametrize(
    ("restarts", "limit", "wrong"),
    [
        ("5", "2", "simpletfjob/restarts (5) is more than simpletfjob/max-restarts (2)"),
        ("0", "9" * 23, "simpletfjob/max-restarts on job mnist-ps-0 is more than 1,000"),
        ("0", "1001", "simpletfjob/max-restarts on job mnist-ps-0 is more than 1,000"),
        ("0", "9" * 5000, "simpletfjob/max-restarts on job mnist-ps-0 is more than 1,000"),
        ("1", "\u00b2", "simpletfjob/max-restarts on job mnist-ps-0 is '\u00b2', not a count"),
        ("-1", "3", "simpletfjob/restarts on job mnist-ps-0 is '-1', not a count"),
        (" 1", "3", "simpletfjob/restarts on job mnist-ps-0 is ' 1', not a count"),
        ("x" * 30, "3", "simpletfjob/restarts on job mnist-ps-0 is a value too long to show, not a count"),
    ],
)  # fmt: skip
def test_restart_annotations_that_cannot_be_right_are_flagged_not_printed(
    restarts: str, limit: str, wrong: str
) -> None:
    run = state(annotated(ps_worker_run(), restarts=restarts, max_restarts=limit))
    assert (run.restarts, run.wrong_restarts) == ((0, 0), wrong)
    data = run.as_dict()
    assert (data["restarts"], data["maxRestarts"], data["annotationErrors"]) == (
        None,
        None,
        [wrong],
    )


def test_jobs_that_disagree_on_their_restarts_are_flagged() -> None:
    jobs = annotated(ps_worker_run(), restarts="1", max_restarts="3")
    annotated(jobs[2:], restarts="2")
    assert state(jobs).wrong_restarts == (
        "the Jobs disagree on simpletfjob/restarts: '1' on job mnist-ps-0, '2' on job mnist-worker-1"
    )
    jobs = annotated(ps_worker_run(), restarts="0", max_restarts="3")
    annotated(jobs[1:2], max_restarts="9" * 23)
    failed = annotated(jobs[1:2], max_restarts="9" * 23)[0]
    failed["status"] = job_status(failed=1, failed_reason="BackoffLimitExceeded")
    run = state(jobs)
    assert run.wrong_restarts == "simpletfjob/max-restarts on job mnist-worker-0 is more than 1,000"
    from simpletfjob.runs.ending import failed_line

    assert failed_line(run) == (
        "run 'mnist' failed: worker-0 Failed: BackoffLimitExceeded; the restarts it has left are "
        "not known: simpletfjob/max-restarts on job mnist-worker-0 is more than 1,000"
    )


@pytest.mark.parametrize(
    ("policies", "wrong"),
    [
        (["any", "any", "any"], "simpletfjob/success-policy on job mnist-ps-0 is 'any', not a success policy (worker0 or all-workers)"),
        (["worker0", "all-workers", "worker0"], "the Jobs disagree on simpletfjob/success-policy: 'worker0' on job mnist-ps-0, 'all-workers' on job mnist-worker-0"),
    ],
)  # fmt: skip
def test_a_success_policy_that_cannot_be_right_leaves_the_run_undecided(
    policies: list[str], wrong: str
) -> None:
    jobs = ps_worker_run(succeeded=1, complete=True)
    for one, policy in zip(jobs, policies, strict=True):
        annotated([one], policy=policy)
    run = state(jobs)
    assert (run.state, run.wrong_policy, run.outcome()) == ("Ambiguous", wrong, wrong)
    data = run.as_dict()
    assert (data["successPolicy"], data["annotationErrors"]) == (None, [wrong])
    from simpletfjob.runs.ending import undecided

    assert undecided(run, None) == (
        f"run 'mnist' cannot be decided: {wrong}; set it right (kubectl annotate job -l "
        "simpletfjob/job=mnist simpletfjob/success-policy=POLICY --overwrite -n default, with "
        "the policy the run was rendered with) and wait again; nothing was cleaned up"
    )


def test_an_index_label_that_cannot_be_a_task_index_names_the_task_by_its_job() -> None:
    huge = job("worker", 0, policy="all-workers")
    huge["metadata"]["name"] = "mnist-worker-x"
    huge["metadata"]["labels"]["simpletfjob/index"] = "9" * 63
    # judged at once: all-workers does not wait for 10**63 workers to be listed
    run = state([job("worker", 0, policy="all-workers", active=1), huge])
    assert sorted(t.task for t in run.tasks) == ["mnist-worker-x", "worker-0"]
    assert run.state == "Pending"


def test_a_deciding_job_whose_labels_were_edited_leaves_the_run_undecided() -> None:
    """worker-0's index label edited by hand: its task is named by its Job and worker-0 is
    missing, but that Job may be it, so the run is not Failed (wait would delete it all)."""
    jobs = ps_worker_run()
    jobs[1]["metadata"]["labels"]["simpletfjob/index"] = "zero"
    run = state(jobs)
    said = "job mnist-worker-0's role and index labels name no task"
    assert (run.state, run.outcome()) == ("Ambiguous", said)
    from simpletfjob.runs.ending import undecided

    assert undecided(run, None) == (
        f"run 'mnist' cannot be decided: {said}; set it right (kubectl label job JOB "
        "simpletfjob/role=ROLE simpletfjob/index=INDEX --overwrite -n default) and wait again; "
        "nothing was cleaned up"
    )
    del jobs[1]["metadata"]["labels"]["simpletfjob/role"]  # a role label gone alike
    jobs[1]["metadata"]["labels"]["simpletfjob/index"] = "0"
    assert state(jobs).state == "Ambiguous"
    assert state([jobs[0], jobs[2]]).state == "Failed"  # with no such Job, worker-0 is gone


def test_a_name_annotation_that_cannot_be_a_name_is_not_repeated() -> None:
    worker0 = job("worker", 0)
    copied = a_copy(worker0, "mnist-worker-0-copy")
    copied["metadata"]["annotations"] = {"simpletfjob/name": "x" * 300 + "\x1b[2J"}
    run = state([worker0, copied])
    by_job = {t.job: t for t in run.tasks}
    assert by_job["mnist-worker-0-copy"].copied_from == "<invalid>"
    assert not by_job["mnist-worker-0-copy"].applied


def test_a_run_whose_jobs_are_all_being_deleted_is_deleting_with_what_holds_it() -> None:
    jobs = ps_worker_run()
    for j in jobs:
        j["metadata"]["deletionTimestamp"] = LATER
        j["metadata"]["finalizers"] = ["foregroundDeletion"]
    jobs[0]["metadata"]["finalizers"].insert(0, "example.com/hold")
    run = state(jobs)
    assert run.state == "Deleting" and not run.finished
    assert {(t.state, t.reason) for t in run.tasks} == {
        ("Deleting", "held by foregroundDeletion"),
        ("Deleting", "held by example.com/hold, foregroundDeletion"),
    }
    assert run.outcome() == (
        "3 Jobs being deleted, held by example.com/hold (1 Job), foregroundDeletion (3 Jobs)"
    )
    assert run.as_dict()["deleting"] == {
        "jobs": 3,
        "finalizers": {"example.com/hold": 1, "foregroundDeletion": 3},
    }
    for j in jobs:
        j["metadata"].pop("finalizers")
    assert state(jobs).outcome() == "3 Jobs being deleted, held by no finalizer"
    assert list(group_runs(jobs)) == ["mnist"]  # the runs table lists it


def test_a_pod_in_phase_unknown_shows_its_nodes_condition() -> None:
    worker = job("worker", 0, node="h3")
    lost = pod(worker, node="h3", phase="Unknown")
    task = task_of(worker, [lost], {"h3": "NotReady since 12:03"})
    assert (task.state, task.reason) == ("Unknown", "node h3 NotReady since 12:03")
    assert task_of(worker, [lost]).reason == "node h3 unreachable"
    assert describe(task) == "worker-0 Unknown: node h3 NotReady since 12:03"
    assert state([worker], [lost]).state == "Unknown"
    assert state([worker, job("ps", 0)], [lost]).state == "Unknown"


def test_a_nodes_condition_reads_as_kubectl_words_it() -> None:
    now = datetime(2026, 11, 26, 12, 30, tzinfo=timezone.utc)

    def node(status: str, since: str) -> dict[str, Any]:
        ready = {"type": "Ready", "status": status, "lastTransitionTime": since}
        return {"status": {"conditions": [{"type": "MemoryPressure"}, ready]}}

    assert node_condition(node("False", "2026-11-26T12:03:09Z"), now) == "NotReady since 12:03"
    assert node_condition(node("Unknown", "2026-11-24T08:00:00Z"), now) == (
        "NotReady since 2026-11-24 08:00"
    )
    assert node_condition(node("True", "2026-11-26T12:29:00Z"), now) == "Ready since 12:29"
    assert node_condition({"status": {}}, now) == "has no Ready condition"
    assert node_condition(None) == "unreachable"


def test_all_workers_counts_a_missing_worker_below_the_last_as_deleted() -> None:
    jobs = [
        job("worker", 0, succeeded=1, complete=True, policy="all-workers"),
        job("worker", 2, succeeded=1, complete=True, policy="all-workers"),
    ]
    run = state(jobs)
    assert (run.state, run.decided_by, run.reason) == ("Failed", "worker-1", DELETED)
    assert framework("tensorflow").deciding("all-workers", ["ps-0", "worker-0", "worker-2"]) == [
        "worker-0", "worker-1", "worker-2",
    ]  # fmt: skip
    assert framework("tensorflow").deciding("worker0", ["chief-0", "worker-0"]) == ["chief-0"]


def test_pods_go_to_their_job_by_controller_uid() -> None:
    a, b = job("worker", 0), job("worker", 1)
    run = state([a, b], [pod(b, node="h2", phase="Running")])
    assert [(t.task, t.state, t.node) for t in run.tasks] == [
        ("worker-0", "Pending", ""),
        ("worker-1", "Running", "h2"),
    ]


def test_runs_are_grouped_by_their_label() -> None:
    jobs = [job("worker", 0, run="b"), job("worker", 0, run="a"), job("ps", 0, run="a")]
    assert {name: len(js) for name, js in group_runs(jobs).items()} == {"a": 2, "b": 1}
    assert list(group_runs(jobs)) == ["a", "b"]


def test_changes_print_each_task_that_changed_once() -> None:
    jobs = ps_worker_run()
    first = state(jobs)
    assert changes(None, first) == [
        "ps-0 Pending: no pod yet",
        "worker-0 Pending: no pod yet",
        "worker-1 Pending: no pod yet",
    ]
    running = state(jobs, [pod(jobs[1], node="h100", phase="Running")])
    assert changes(first, running) == ["worker-0 Running on h100"]
    assert changes(running, running) == []
    gone = state(jobs[1:], [pod(jobs[1], node="h100", phase="Running")])
    assert changes(running, gone) == ["ps-0 deleted"]


def test_a_state_is_told_once_when_its_detail_goes() -> None:
    jobs = ps_worker_run()
    first = state(jobs)
    made_pod = pod(jobs[1], phase="Pending")
    made_pod["status"] = {"phase": "Pending"}  # just made: no kubelet or scheduler has said more
    made = state(jobs, [made_pod])
    assert [t.reason for t in made.tasks] == ["no pod yet", "", "no pod yet"]
    # `worker-0 Pending: no pod yet`, then its pod made: still Pending, nothing new to tell
    assert changes(first, made) == []
    # a detail that comes is told, and so is a new state
    waiting = state(jobs, [pod(jobs[1], node="h100", phase="Pending", waiting="ErrImagePull")])
    assert changes(made, waiting) == ["worker-0 Pending: ErrImagePull"]
    running = state(jobs, [pod(jobs[1], node="h100", phase="Running")])
    assert changes(made, running) == ["worker-0 Running on h100"]


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(5, "5s"), (119, "119s"), (200, "3m20s"), (600, "10m"), (3 * 3600 + 1200, "3h20m"),
     (20 * 3600, "20h"), (3 * 86400 + 4 * 3600, "3d4h"), (30 * 86400, "30d"), (800 * 86400, "2y")],
)  # fmt: skip
def test_ages_read_as_kubectl_prints_them(seconds: int, shown: str) -> None:
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert age(now - timedelta(seconds=seconds), now) == shown
    assert age(None) == "<unknown>"


# -- the rules together, on any mix of roles and outcomes -------------------------------------

OUTCOMES = ("pending", "running", "complete", "failed")


@st.composite
def runs(draw: st.DrawFn) -> tuple[str, dict[str, str]]:
    """A success policy and each task's outcome: maybe a chief, 0-2 ps, 1-4 workers, maybe an evaluator."""
    tasks = ["chief-0"] if draw(st.booleans()) else []
    tasks += [f"ps-{i}" for i in range(draw(st.integers(0, 2)))]
    tasks += [f"worker-{i}" for i in range(draw(st.integers(1, 4)))]
    tasks += ["evaluator-0"] if draw(st.booleans()) else []
    outcomes = {task: draw(st.sampled_from(OUTCOMES)) for task in tasks}
    return draw(st.sampled_from(["worker0", "all-workers"])), outcomes


def build(policy: str, outcomes: dict[str, str]) -> list[dict[str, Any]]:
    jobs = []
    for task, outcome in outcomes.items():
        role, index = task.rsplit("-", 1)
        status: dict[str, Any] = {
            "pending": {"active": 1},
            "running": {"active": 1},
            "complete": {"succeeded": 1, "complete": True},
            "failed": {"failed": 1, "failed_reason": "BackoffLimitExceeded"},
        }[outcome]
        jobs.append(job(role, int(index), policy=policy, **status))
    return jobs


@given(runs())
def test_the_run_state_follows_the_rules_for_any_run(run: tuple[str, dict[str, str]]) -> None:
    policy, outcomes = run
    jobs = build(policy, outcomes)
    pods = [
        pod(j, node="h1", phase="Running")
        for j, outcome in zip(jobs, outcomes.values(), strict=True)
        if outcome == "running"
    ]
    result = state(jobs, pods)
    workers = [t for t in outcomes if t.startswith("worker-")]
    if "chief-0" in outcomes:
        deciders = ["chief-0"]
    else:
        deciders = ["worker-0"] if policy == "worker0" else workers
    if all(outcomes[d] == "complete" for d in deciders):
        expected = "Succeeded"  # every Job here ends at the same second: success wins the tie
    elif any(o == "failed" for t, o in outcomes.items() if not t.startswith("evaluator-")):
        expected = "Failed"  # an evaluator's failure fails nothing: the training does not need it
    elif "running" in outcomes.values():
        expected = "Running"
    else:
        expected = "Pending"
    assert result.state == expected
    assert [t.state for t in result.tasks] == [
        {"pending": "Pending", "running": "Running", "complete": "Succeeded", "failed": "Failed"}[
            outcomes[t.task]
        ]
        for t in result.tasks
    ]
    # A ps or evaluator never decides success: finishing them all changes nothing
    others = {
        t: ("complete" if t.split("-")[0] in ("ps", "evaluator") and o != "failed" else o)
        for t, o in outcomes.items()
    }
    if result.state != "Failed":
        assert (state(build(policy, others), pods).state == "Succeeded") == (
            expected == "Succeeded"
        )


def test_a_deleted_chief_is_known_from_the_other_jobs_tf_config(cli: Any) -> None:
    """Once the chief's Job is gone, worker 0 finishing must not pass for the run's success."""
    from simpletfjob.runs.objects import named_tasks

    rendered = cli(str(EXAMPLES / "mnist.yaml"), "--nodes", "a,b,c,d", "--chief", "-o", "-")
    assert rendered.code == 0, rendered.err
    jobs = [d for d in rendered.docs if d["kind"] == "Job"]
    assert named_tasks(jobs) == ["chief-0", "ps-0", "worker-0", "worker-1"]
    left = [d for d in jobs if d["metadata"]["name"] != "mnist-chief-0"]
    for document in left:
        if document["metadata"]["name"] == "mnist-worker-0":
            document["status"] = job_status(succeeded=1, complete=True)
    run = state(left, expected=named_tasks(left))
    assert (run.state, run.decided_by, run.reason) == ("Failed", "chief-0", DELETED)
    # what the Jobs alone would say, without the names TF_CONFIG gives
    assert state(left).state == "Succeeded"


@pytest.mark.parametrize(
    "env",
    [
        [],
        [{"name": "TF_CONFIG", "value": "not json"}],
        [{"name": "TF_CONFIG", "value": '["a list"]'}],
        [{"name": "TF_CONFIG", "value": '{"cluster": "a string"}'}],
        [{"name": "OTHER", "value": '{"cluster": {"worker": ["a:1"]}}'}],
        ["not a mapping"],
    ],
)
def test_jobs_without_a_readable_cluster_name_no_tasks(env: list[Any]) -> None:
    from simpletfjob.runs.objects import named_tasks

    document = job("worker", 0)
    document["spec"]["template"]["spec"]["containers"][0]["env"] = env
    assert named_tasks([document]) == []


def test_the_restarts_left_are_counted_without_those_progress_gave_back() -> None:
    """wait's failed line: 5 restarts made, 1 of them in a row without progress, of 3: 2 left."""
    from simpletfjob.runs.ending import failed_line

    for without, left in (("1", "; 2 of its 3 restarts are left"), ("3", "")):
        jobs = annotated(ps_worker_run(), restarts="5", max_restarts="3", without=without)
        failed = jobs[1]
        failed["status"] = job_status(failed=1, failed_reason="BackoffLimitExceeded")
        line = failed_line(state(jobs))
        assert line.startswith(f"run 'mnist' failed: worker-0 Failed: BackoffLimitExceeded{left}")
        assert (";" in line) == bool(left), line
