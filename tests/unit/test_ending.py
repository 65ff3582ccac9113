"""ending: the one follower's Ending, over recorded events of a run (no server, no clock).

Each test records what the two watches bring (a list of Jobs and pods, then events),
folds them with the Follower as watch.follow does, and reads the states through
`ending_of`, as `wait`, `run`, `status -w` and `logs -f` all do.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from simpletfjob.errors import RunFailed
from simpletfjob.kube.watch import Event
from simpletfjob.runs.classify import REFUSED, TASK_FAILED, UNDECIDED, Cause
from simpletfjob.runs.ending import (
    End,
    Ending,
    ending_of,
    failed_line,
    finished_as,
    finishing,
    judged,
    names_to_resolve,
    outcome_line,
    unresolved_hint,
    unresolved_note,
)
from simpletfjob.runs.failure import refused_cause
from simpletfjob.runs.state import Run
from tests.support.recorded import job, pod, running, states


def test_a_run_whose_deciding_task_completes_succeeds_and_each_state_is_shown() -> None:
    jobs, pods = running()
    done = job("worker-0", succeeded=1, complete=True)
    events = [
        ("pods", Event("MODIFIED", pod(done, "Succeeded"))),
        ("jobs", Event("MODIFIED", done)),
    ]
    shown: list[str] = []

    ending = ending_of(states(jobs, pods, events), on_change=lambda run: shown.append(run.state))

    assert ending.end == End.SUCCEEDED and ending.succeeded and ending.cause is None
    assert ending.end == "Succeeded"  # a str
    assert ending.run is not None and ending.run.decided_by == "worker-0"
    assert shown[0] == "Running" and shown[-1] == "Succeeded"
    assert outcome_line(ending) == "run mnist succeeded: worker-0 Succeeded"


def test_a_failed_task_is_a_failed_ending_with_a_typed_cause() -> None:
    jobs, pods = running()
    failed = job("worker-1", failed=1, failed_reason="BackoffLimitExceeded")
    events = [
        ("pods", Event("MODIFIED", pod(failed, "Failed", exit_code=3, reason="Error"))),
        ("jobs", Event("MODIFIED", failed)),
    ]

    ending = ending_of(states(jobs, pods, events), exit_codes={3})

    assert ending.end == End.FAILED and not ending.succeeded
    cause = ending.cause
    assert cause is not None
    assert (cause.kind, cause.tasks, cause.node, cause.exit_code) == (
        TASK_FAILED,
        ("worker-1",),
        "h1",
        3,
    )
    assert cause.klass == "disruption"  # exit 3 is a --restart-exit-codes code
    assert str(cause) == "worker-1 Failed: Error (exit 3)"
    with pytest.raises(RunFailed) as raised:
        outcome_line(ending)
    assert str(raised.value) == "run 'mnist' failed: worker-1 Failed: Error (exit 3)"


def test_a_task_claimed_by_two_jobs_is_undecided() -> None:
    jobs, pods = running()
    copy_of = job("worker-1", name="mnist-worker-1-copy", active=1)
    events = [("jobs", Event("ADDED", copy_of))]

    ending = ending_of(states(jobs, pods, events))

    assert ending.end == End.UNDECIDED
    assert ending.cause is not None and ending.cause.kind == UNDECIDED
    assert ending.cause.tasks == ("worker-1",)


def test_a_check_ends_a_running_run_with_its_cause_as_runs_refusal_does() -> None:
    jobs, pods = running()
    refused = copy.deepcopy(pods[1])
    refused["status"] = {"phase": "Failed", "reason": "OutOfcpu", "message": "no room"}
    events = [("pods", Event("MODIFIED", refused))]
    latest: list[Any] = []

    def check(run: Run) -> Cause | None:
        return refused_cause(run, latest[-1])

    def runs() -> Iterator[Run]:
        latest.append(pods)
        for i, run in enumerate(states(jobs, pods, events)):
            latest.append([refused, pods[0]] if i else pods)
            yield run

    ending = ending_of(runs(), check=check)

    assert ending.end == End.FAILED
    assert ending.cause is not None and ending.cause.kind == REFUSED
    assert str(ending.cause) == "worker-1 refused by node h1: OutOfcpu"
    assert ending.run is not None and ending.run.state == "Running"


def test_states_that_stop_before_an_end_are_timed_out_with_the_last_state() -> None:
    jobs, pods = running()

    ending = ending_of(states(jobs, pods, []))

    assert ending.end == End.TIMED_OUT
    assert ending.run is not None and ending.run.state == "Running"
    assert ending_of(iter(())) == Ending(End.TIMED_OUT, None)


def test_judged_says_nothing_of_a_run_that_goes_on() -> None:
    jobs, pods = running()
    run = next(states(jobs, pods, []))
    assert judged(run) is None


def test_runs_verdict_stands_for_the_outcome_in_the_failed_line() -> None:
    jobs, pods = running()
    run = next(states(jobs, pods, []))
    words = "worker-1 exited 1 (a program error); --restart-on disruption restarts only disruptions"
    assert failed_line(run, words) == f"run 'mnist' failed: {words}"


def _succeeded(*others: str) -> Run:
    """A run whose worker 0 has succeeded, with these other tasks running."""
    done = job("worker-0", succeeded=1, complete=True)
    jobs = [done, *(job(task, active=1) for task in others)]
    pods = [pod(done, "Succeeded"), *(pod(j, "Running") for j in jobs[1:])]
    return list(states(jobs, pods, []))[-1]


def test_the_tasks_that_end_by_themselves_are_those_a_success_waits_for() -> None:
    """After a success, wait's cleanup gives the workers of a collective their grace to end;
    a ps never ends by itself, and a run with one (ParameterServerStrategy) waits for none."""
    collective = _succeeded("worker-1", "worker-2", "evaluator-0")
    assert collective.state == "Succeeded"
    assert [t.task for t in finishing(collective)] == ["worker-1", "worker-2"]
    assert finishing(_succeeded("ps-0", "worker-1")) == []
    jobs, pods = running()
    assert finishing(next(states(jobs, pods, []))) == []  # not a success: nothing to wait for


def test_a_task_that_ended_within_the_grace_is_taken_as_it_ended() -> None:
    run = _succeeded("worker-1")
    (task,) = finishing(run)
    assert finished_as(task, job("worker-1", active=1)) is None  # it goes on: wait on
    ended = finished_as(task, job("worker-1", succeeded=1, complete=True))
    assert ended is not None
    assert (ended.task, ended.state, ended.finished, ended.node) == (
        "worker-1", "Succeeded", True, "h1",
    )  # fmt: skip
    failed = finished_as(task, job("worker-1", failed=1, failed_reason="BackoffLimitExceeded"))
    assert failed is not None and (failed.state, failed.finished) == ("Failed", True)
    # Gone, or made anew under its name: nothing to wait for, and nothing to take from it.
    assert finished_as(task, None) is task
    again = job("worker-1", succeeded=1, complete=True)
    again["metadata"]["uid"] = "another"
    assert finished_as(task, again) is task


def _addressed(*endpoints: str, phase: str = "Running") -> tuple[list[dict[str, Any]], Run]:
    """A run of two workers on nodes h1 and h2, their TF_CONFIG naming these endpoints."""
    import json

    jobs = [job(f"worker-{i}", active=1) for i in range(2)]
    for i, made in enumerate(jobs):
        config = {"cluster": {"worker": list(endpoints)}, "task": {"type": "worker", "index": i}}
        container = made["spec"]["template"]["spec"]["containers"][0]
        container["env"] = [{"name": "TF_CONFIG", "value": json.dumps(config)}]
    pods = [pod(made, phase, node=f"h{i + 1}") for i, made in enumerate(jobs)]
    return jobs, next(states(jobs, pods, []))


def test_tasks_that_reach_each_other_by_node_name_are_told_to_take_the_internal_ip() -> None:
    """A node's name resolves inside a pod only where the cluster's DNS knows it: a run whose
    tasks wait for each other at names that do not resolve runs until its timeout."""
    jobs, run = _addressed("h1:2222", "h2:2222")
    assert names_to_resolve(run, jobs) == ["h1", "h2"]
    assert unresolved_hint(run, jobs) == (
        "; its tasks reach each other at their nodes' names (h1, h2): where their pods cannot "
        "resolve those, they wait for each other until stopped; --address internal-ip gives "
        "them the nodes' InternalIP"
    )
    log = [
        "worker-1: the last 2 lines of its log (pod mnist-worker-1-p, container tf):",
        "worker-1 | torch.distributed: [c10d] The hostname of the client socket cannot be "
        "retrieved (gai error: -2 - Name or service not known)",
        "worker-1 | RuntimeError: bad",
    ]
    assert unresolved_note("worker-1", log, run, jobs) == [
        "worker-1: its log says a name did not resolve; its tasks reach each other at their "
        "nodes' names (h1, h2), which their pods may not resolve: --address internal-ip gives "
        "them the nodes' InternalIP"
    ]
    assert unresolved_note("worker-1", log[:1] + log[2:], run, jobs) == []  # no such error
    # Addresses, or tasks that never ran, have nothing to resolve.
    ips, by_ip = _addressed("10.0.0.1:2222", "10.0.0.2:2222")
    assert names_to_resolve(by_ip, ips) == [] and unresolved_hint(by_ip, ips) == ""
    assert unresolved_note("worker-1", log, by_ip, ips) == []
    pending_jobs, pending = _addressed("h1:2222", "h2:2222", phase="Pending")
    assert unresolved_hint(pending, pending_jobs) == ""
