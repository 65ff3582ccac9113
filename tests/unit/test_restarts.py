"""runs/classify.py: each failure classified from the objects the cluster returns, and `run`'s
restart decision, a pure function of the cause, the restarts made and the options (no server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simpletfjob.options.restarts import format_exit_codes, parse_exit_codes
from simpletfjob.runs.classify import (
    DEADLINE,
    DISRUPTION,
    FINAL,
    GONE,
    NODE_LOST,
    PROGRAM,
    REFUSED,
    TASK_FAILED,
    UNDECIDED,
    Cause,
    Policy,
    decide,
    exit_class,
    node_lost,
    refused,
    run_failure,
    side_failure,
)
from simpletfjob.runs.state import run_state
from simpletfjob.runs.watch import TIE
from tests.conftest import assert_one_line_error, write
from tests.support.scenes import task_job as job
from tests.support.scenes import task_pod as pod

T0 = "2024-05-01T10:00:00Z"


def failed_run(**pod_kwargs: Any) -> Any:
    """A run whose worker 1 failed (backoffLimit 0) with the pod `pod_kwargs` describe."""
    chief = job("chief", 0, active=1)
    worker = job("worker", 1, failed=1, failed_reason="BackoffLimitExceeded")
    pods = [pod(chief, node="h1", phase="Running"), pod(worker, node="h2", **pod_kwargs)]
    return run_state("mnist", "default", [chief, worker], pods)


@pytest.mark.parametrize(
    ("pod_kwargs", "klass", "code", "text"),
    [
        ({"phase": "Failed", "exit_code": 1}, PROGRAM, 1, "worker-1 Failed: Error (exit 1)"),
        ({"phase": "Failed", "exit_code": 127}, PROGRAM, 127, "worker-1 Failed: Error (exit 127)"),
        ({"phase": "Failed", "exit_code": 128}, DISRUPTION, 128, "worker-1 Failed: Error (exit 128)"),
        ({"phase": "Failed", "exit_code": 143}, DISRUPTION, 143, "worker-1 Failed: Error (exit 143)"),
        (
            {"phase": "Failed", "exit_code": 137, "reason": "OOMKilled"},
            DISRUPTION, 137, "worker-1 Failed: OOMKilled",
        ),
        (
            {"phase": "Failed", "exit_code": 128, "reason": "ContainerCannotRun"},
            PROGRAM, 128, "worker-1 Failed: ContainerCannotRun (exit 128)",
        ),
    ],
)  # fmt: skip
def test_a_container_failure_is_classified_by_its_exit_code_and_reason(
    pod_kwargs: dict[str, Any], klass: str, code: int, text: str
) -> None:
    cause = run_failure(failed_run(**pod_kwargs))
    assert (cause.kind, cause.tasks, cause.klass, cause.exit_code) == (
        TASK_FAILED, ("worker-1",), klass, code,
    )  # fmt: skip
    assert str(cause) == text  # the words wait and run have always printed


def evicted_pod(of: dict[str, Any], reason: str) -> dict[str, Any]:
    """A pod the kubelet failed without running its container (evicted, refused)."""
    found = pod(of, node="h2", phase="Failed")
    found["status"] = {"phase": "Failed", "reason": reason, "message": "..."}
    return found


@pytest.mark.parametrize("reason", ["Evicted", "OutOfnvidia.com/gpu", "NodeAffinity", "Shutdown"])
def test_a_pod_the_node_evicted_or_refused_is_a_disruption(reason: str) -> None:
    chief = job("chief", 0, active=1)
    worker = job("worker", 1, failed=1, failed_reason="BackoffLimitExceeded")
    run = run_state("mnist", "default", [chief, worker], [evicted_pod(worker, reason)])
    cause = run_failure(run)
    assert (cause.klass, cause.exit_code, cause.reason) == (DISRUPTION, None, reason)
    if reason.startswith("OutOf") or reason == "NodeAffinity":  # refused when it came, by h2
        assert str(cause) == f"worker-1 refused by node h2: {reason}"
    else:
        assert str(cause) == f"worker-1 Failed: {reason}"


@pytest.mark.parametrize(
    ("deleted", "finished", "klass"),
    [
        ("2024-05-01T10:00:30Z", "2024-05-01T10:00:05Z", DISRUPTION),  # the delete stopped it
        ("2024-05-01T10:00:30Z", "2024-05-01T09:59:00Z", PROGRAM),  # failed, then cleaned up
        ("2024-05-01T10:00:30Z", "2024-05-01T10:00:00Z", PROGRAM),  # the same second: no proof
    ],
)
def test_a_pod_deleted_by_someone_else_is_a_disruption_if_the_delete_stopped_it(
    deleted: str, finished: str, klass: str
) -> None:
    chief = job("chief", 0, active=1)
    worker = job("worker", 1, failed=1, failed_reason="BackoffLimitExceeded")
    gone = pod(worker, node="h2", phase="Failed", exit_code=1, finished=finished)
    # As the API server writes a graceful delete asked at 10:00:00: when it is due, and the grace.
    gone["metadata"]["deletionTimestamp"] = deleted
    gone["metadata"]["deletionGracePeriodSeconds"] = 30
    cause = run_failure(run_state("mnist", "default", [chief, worker], [gone]))
    assert (cause.klass, cause.exit_code) == (klass, 1)


def test_a_deadline_is_its_own_class_whatever_the_stopped_pod_says() -> None:
    chief = job("chief", 0, failed=1, failed_reason="DeadlineExceeded")
    stopped = pod(chief, node="h1", phase="Failed", exit_code=143)
    cause = run_failure(run_state("mnist", "default", [chief], [stopped]))
    assert (cause.klass, cause.reason, str(cause)) == (
        DEADLINE, "DeadlineExceeded", "chief-0 Failed: DeadlineExceeded",
    )  # fmt: skip


def test_a_job_that_failed_with_its_pods_gone_counts_as_a_program_error() -> None:
    worker = job("worker", 0, failed=1, failed_reason="BackoffLimitExceeded")
    cause = run_failure(run_state("mnist", "default", [worker], []))
    assert (cause.klass, cause.exit_code, str(cause)) == (
        PROGRAM, None, "worker-0 Failed: BackoffLimitExceeded",
    )  # fmt: skip


def test_a_deleted_deciding_job_and_an_ambiguous_run_are_final() -> None:
    ps = job("ps", 0, active=1)
    gone = run_state("mnist", "default", [ps], [], expected=["worker-0"])
    cause = run_failure(gone)
    assert (cause.kind, cause.klass, cause.task) == (GONE, FINAL, "worker-0")
    first, copy = job("worker", 0, active=1), job("worker", 0, active=1)
    copy["metadata"]["name"] = "mnist-worker-0-copy"
    copy["metadata"]["uid"] = "other"
    both = run_state("mnist", "default", [first, copy], [])
    assert (run_failure(both).kind, run_failure(both).klass) == (UNDECIDED, FINAL)


def test_exit_codes_named_to_restart_are_disruptions_only_those() -> None:
    run = failed_run(phase="Failed", exit_code=3)
    assert run_failure(run, {3, 42}).klass == DISRUPTION
    assert run_failure(run, {4}).klass == PROGRAM
    assert run_failure(run).klass == PROGRAM


@given(code=st.integers(1, 255), named=st.frozensets(st.integers(1, 255), max_size=5))
def test_an_exit_code_is_a_program_error_below_128_unless_named(
    code: int, named: frozenset[int]
) -> None:
    expected = DISRUPTION if code >= 128 or code in named else PROGRAM
    assert exit_class(code, "Error", named) == expected


def test_refusals_and_lost_nodes_are_disruptions_naming_their_node() -> None:
    cause = refused("worker-1", "h3", "OutOfcpu")
    assert (cause.kind, cause.klass, cause.node, str(cause)) == (
        REFUSED, DISRUPTION, "h3", "worker-1 refused by node h3: OutOfcpu",
    )  # fmt: skip
    lost = node_lost(["worker-1", "ps-0"], "h3", "NotReady", "1m")
    assert (lost.kind, lost.klass, lost.node, lost.tasks) == (
        NODE_LOST, DISRUPTION, "h3", ("worker-1", "ps-0"),
    )  # fmt: skip
    assert str(lost) == "worker-1, ps-0 on node h3: NotReady for more than 1m"


# -- the decision ------------------------------------------------------------------------------


def cause(klass: str, code: int | None = 1) -> Cause:
    return Cause(TASK_FAILED, ("worker-1",), f"worker-1 Failed: Error (exit {code})", klass,
                 exit_code=code, reason="Error")  # fmt: skip


@given(
    klass=st.sampled_from([PROGRAM, DISRUPTION, DEADLINE, FINAL]),
    restart_on=st.sampled_from(["failure", "disruption"]),
    limit=st.integers(0, 5),
    made=st.integers(0, 5),
)
def test_a_restart_is_made_only_for_what_restart_on_names_and_within_the_budget(
    klass: str, restart_on: str, limit: int, made: int
) -> None:
    decision = decide(cause(klass), made, Policy(restart_on, limit))
    wanted = klass == DISRUPTION or (klass == PROGRAM and restart_on == "failure")
    assert decision.restart == (wanted and made < limit)
    assert decision.restart or decision.verdict.startswith("worker-1 ")


def test_a_program_error_under_restart_on_disruption_says_why_it_ends_the_run() -> None:
    decision = decide(cause(PROGRAM), 0, Policy("disruption", 3))
    assert not decision.restart
    assert decision.verdict == (
        "worker-1 exited 1 (a program error); --restart-on disruption restarts only disruptions"
    )


def test_the_verdict_says_no_restart_is_left_and_a_deadline_says_nothing_more() -> None:
    out = decide(cause(DISRUPTION, 137), 2, Policy("failure", 2))
    assert out.verdict == "worker-1 Failed: Error (exit 137); no restart left (2 of 2 made)"
    deadline = Cause(TASK_FAILED, ("chief-0",), "chief-0 Failed: DeadlineExceeded", DEADLINE)
    assert decide(deadline, 0, Policy("failure", 3)).verdict == "chief-0 Failed: DeadlineExceeded"
    assert decide(cause(PROGRAM), 0, Policy("disruption", 0)).verdict == (
        "worker-1 Failed: Error (exit 1)"  # no restart asked for: wait's words
    )


# -- --restart-exit-codes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "codes"),
    [("3", {3}), ("3,42", {3, 42}), ("3-5", {3, 4, 5}), ("3, 40-42", {3, 40, 41, 42}), ("", set())],
)
def test_restart_exit_codes_take_lists_and_ranges(text: str, codes: set[int]) -> None:
    assert parse_exit_codes(text) == codes


@pytest.mark.parametrize("text", ["0", "256", "5-3", "a", "3,", "-3", "3--5", "1" * 20, "\uff13"])
def test_restart_exit_codes_refuse_what_is_not_an_exit_code(text: str) -> None:
    with pytest.raises(ValueError, match=r"^must be exit codes from 1 to 255, as 3,42 or 3-5"):
        parse_exit_codes(text)


@given(st.frozensets(st.integers(1, 255)))
def test_restart_exit_codes_read_back_as_written(codes: frozenset[int]) -> None:
    assert parse_exit_codes(format_exit_codes(codes)) == codes


# -- what status shows -------------------------------------------------------------------------


def test_status_json_gives_each_task_its_exit_code_when_known() -> None:
    chief = job("chief", 0, succeeded=1, complete=True)
    worker = job("worker", 1, failed=1, failed_reason="BackoffLimitExceeded")
    ps = job("ps", 0, active=1)
    pods = [
        pod(chief, node="h1", phase="Succeeded"),
        pod(worker, node="h2", phase="Failed", exit_code=137, reason="OOMKilled"),
        pod(ps, node="h3", phase="Running"),
    ]
    data = run_state("mnist", "default", [chief, worker, ps], pods).as_dict()
    codes = {task["task"]: task["exitCode"] for task in data["tasks"]}
    assert codes == {"chief-0": 0, "ps-0": None, "worker-1": 137}


# -- roles the training does not depend on -------------------------------------------------------


def test_a_failed_evaluator_fails_no_run_and_is_a_cause_of_its_own() -> None:
    chief = job("chief", 0, active=1)
    evaluator = job("evaluator", 0, failed=1, failed_reason="BackoffLimitExceeded")
    pods = [
        pod(chief, node="h1", phase="Running"),
        pod(evaluator, node="h2", phase="Failed", exit_code=1),
    ]
    run = run_state("mnist", "default", [chief, evaluator], pods)
    assert run.state == "Running"
    cause = side_failure(run)
    assert cause is not None
    assert (cause.task, cause.klass, cause.alone, str(cause)) == (
        "evaluator-0", PROGRAM, True, "evaluator-0 Failed: Error (exit 1)",
    )  # fmt: skip
    # Once reported and left (its Job's uid), it is not a cause again.
    assert side_failure(run, left={run.tasks[-1].uid}) is None


def test_a_side_failure_told_by_its_job_alone_waits_a_moment_for_its_pods_exit() -> None:
    """The Jobs' watch can bring BackoffLimitExceeded before the pods' watch brings the exit."""
    chief = job("chief", 0, active=1)
    evaluator = job("evaluator", 0, failed=1, failed_reason="BackoffLimitExceeded")
    running = pod(chief, node="h1", phase="Running")
    by_job = run_state("mnist", "default", [chief, evaluator], [running])
    told: dict[str, float] = {}
    assert side_failure(by_job, told_by_job=told, now=100.0) is None
    assert side_failure(by_job, told_by_job=told, now=100.0 + TIE / 2) is None
    # The pod's exit comes: the failure is said by it.
    failed = pod(evaluator, node="h2", phase="Failed", exit_code=1)
    both = run_state("mnist", "default", [chief, evaluator], [running, failed])
    cause = side_failure(both, told_by_job=told, now=100.0 + TIE / 2)
    assert cause is not None and str(cause) == "evaluator-0 Failed: Error (exit 1)"
    # No news of the pod within TIE: the Job's word is taken.
    late = side_failure(by_job, told_by_job=told, now=100.0 + TIE)
    assert late is not None and str(late) == "evaluator-0 Failed: BackoffLimitExceeded"
    assert late.alone


def test_a_failed_worker_still_fails_the_run_and_is_no_side_failure() -> None:
    run = failed_run(phase="Failed", exit_code=1)
    assert run.state == "Failed" and side_failure(run) is None


def test_only_tensorflow_names_a_role_the_training_does_not_depend_on() -> None:
    from simpletfjob.frameworks import framework, independent_roles

    assert framework("tensorflow").independent == ("evaluator",)
    assert framework("pytorch").independent == framework("jax").independent == ()
    assert independent_roles() == {"evaluator"}


# -- <<restart>> -------------------------------------------------------------------------------


def test_restart_is_0_in_a_render_and_may_not_be_given_as_a_value(cli: Any, tmp_path: Path) -> None:
    write(
        tmp_path / "t.yaml",
        "kind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\nattempt: <<restart>>\n",
    )
    docs = cli("t.yaml", "--nodes", "a,b", "-o", "-", cwd=tmp_path).docs
    assert [d["attempt"] for d in docs] == [0, 0]
    given = cli("t.yaml", "--nodes", "a,b", "-o", "-", "--set", "restart=3", cwd=tmp_path)
    assert_one_line_error(given, 2, contains=["'restart' is set by simpletfjob"])
