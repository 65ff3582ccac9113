"""follower: `wait`'s verdict, folded from events, agrees with `status`'s (run_state) on the end.

The events of a run are replayed in many orders, as the two watches can bring them: the
Jobs watch in the order the Job controller wrote (its time stamps never go back, and writes
in the same second come in any order), the pods watch interleaved with it at random.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from simpletfjob.kube.watch import Event
from simpletfjob.runs.objects import named_tasks
from simpletfjob.runs.state import Run, run_state
from simpletfjob.runs.watch import ENDS, Follower, verdict
from tests.support.kubeapi import job_status, make_job, make_pod


def stamp(second: int) -> str:
    return f"2024-05-01T10:00:{second:02d}Z"


def job(task: str, policy: str, **status: Any) -> dict[str, Any]:
    role, index = task.rsplit("-", 1)
    labels = {
        "app.kubernetes.io/managed-by": "simpletfjob",
        "simpletfjob/job": "mnist",
        "simpletfjob/role": role,
        "simpletfjob/index": index,
    }
    name = f"mnist-{task}"
    annotations = {"simpletfjob/success-policy": policy, "simpletfjob/name": name}
    tf = {"name": "tf", "image": "t", "command": ["python", "-c", "train()"], "args": ["-v"]}
    tf["env"] = [{"name": "TF_CONFIG", "value": json.dumps({"task": {"type": role}})}]
    template = {"spec": {"restartPolicy": "Never", "containers": [tf]}}
    return make_job(
        name,
        labels=labels,
        annotations=annotations,
        template=template,
        status=job_status(start=stamp(0), **status),
    )


def pod(of: dict[str, Any], phase: str, **status: Any) -> dict[str, Any]:
    name = f"{of['metadata']['name']}-p"
    containers = of["spec"]["template"]["spec"]["containers"]
    return make_pod(
        name, owner=of, node="h1", phase=phase, labels={"x": "y"}, containers=containers, **status
    )


# A task's end: None (still running), or (outcome, the second its Job recorded it).
End = tuple[str, int] | None


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[str, dict[str, End], list[tuple[str, Event]]]:
    """A run, each task's end, and the order in which the events of those ends come."""
    tasks = ["chief-0"] if draw(st.booleans()) else []
    tasks += [f"ps-{i}" for i in range(draw(st.integers(0, 1)))]
    tasks += [f"worker-{i}" for i in range(draw(st.integers(1, 3)))]
    policy = draw(st.sampled_from(["worker0", "all-workers"]))
    ends: dict[str, End] = {}
    for task in tasks:
        outcome = draw(st.sampled_from(["running", "complete", "failed"]))
        ends[task] = None if outcome == "running" else (outcome, draw(st.integers(1, 3)))
    job_events: list[tuple[int, int, tuple[str, Event]]] = []
    pod_events: list[tuple[str, Event]] = []
    for task, end in ends.items():
        if end is None:
            continue
        outcome, second = end
        if outcome == "complete":
            final = job(task, policy, succeeded=1, complete=True, finish=stamp(second))
            pod_events.append(("pods", Event("MODIFIED", pod(final, "Succeeded"))))
        else:
            final = job(task, policy, failed=1, failed_reason="BackoffLimitExceeded")
            final["status"]["conditions"][0]["lastTransitionTime"] = stamp(second)
            failed = pod(final, "Failed", exit_code=1, reason="Error")
            pod_events.append(("pods", Event("MODIFIED", failed)))
        # Writes in the same second come in any order; a later second after an earlier one.
        job_events.append((second, draw(st.integers(0, 99)), ("jobs", Event("MODIFIED", final))))
    ordered = [event for _, _, event in sorted(job_events, key=lambda e: (e[0], e[1]))]
    for event in pod_events:  # the pods' watch interleaves anywhere
        ordered.insert(draw(st.integers(0, len(ordered))), event)
    return policy, ends, ordered


def start(policy: str, ends: dict[str, End]) -> tuple[list[Any], list[Any]]:
    jobs = [job(task, policy, active=1) for task in ends]
    return jobs, [pod(j, "Running") for j in jobs]


def replay(policy: str, ends: dict[str, End], events: list[tuple[str, Event]]) -> Run | None:
    """What `wait` ends with: runs/watch.py's follow loop without a server, where `final`
    (status) judges the same objects at once.

    A failure waits until its second has passed on the server: here, until every Job event
    stamped with that second or before has come (the Jobs watch brings them in that order).
    """
    jobs, pods = start(policy, ends)
    follower = Follower("mnist", "default", jobs, pods, [t for t in ends])
    run = follower.judge()
    if (found := verdict(run, settled=False)) is not None:
        return found
    for i, (plural, event) in enumerate(events):
        follower.take(plural, event)
        run = follower.judge()
        follower.remember(run)
        later = [second_of(e) for p, e in events[i + 1 :] if p == "jobs"]
        settled = run.decided_at is not None and all(s > run.decided_at.second for s in later)
        if (found := verdict(run, settled)) is not None:
            return found
    return verdict(follower.judge(), settled=True)


def second_of(event: Event) -> int:
    assert event.object is not None
    status = event.object["status"]
    when = status.get("completionTime") or status["conditions"][0]["lastTransitionTime"]
    return int(when[-3:-1])


def final(policy: str, ends: dict[str, End], events: list[tuple[str, Event]]) -> Run:
    """What `status` says once everything has happened: run_state on the objects as they end."""
    jobs, pods = start(policy, ends)
    now = {plural: {o["metadata"]["name"]: o for o in objects} for plural, objects in
           (("jobs", jobs), ("pods", pods))}  # fmt: skip
    for plural, event in events:
        assert event.object is not None
        now[plural][event.object["metadata"]["name"]] = copy.deepcopy(event.object)
    return run_state("mnist", "default", now["jobs"].values(), now["pods"].values())


@settings(max_examples=400, deadline=None)
@given(scenarios(), st.randoms(use_true_random=False))
def test_wait_and_status_agree_on_every_order_of_the_same_events(
    scenario: tuple[str, dict[str, End], list[tuple[str, Event]]], _: Any
) -> None:
    policy, ends, events = scenario
    told = replay(policy, ends, events)
    judged = final(policy, ends, events)
    if judged.state in ENDS:
        assert told is not None, f"wait never ended; status says {judged.state}"
        assert (told.state, told.decided_by) == (judged.state, judged.decided_by)
    else:
        assert told is None, f"wait said {told.state if told else ''}; status {judged.state}"


def test_a_failure_in_the_same_second_as_the_success_does_not_undo_it_whichever_comes_first() -> (
    None
):
    ends: dict[str, End] = {"worker-0": ("complete", 1), "worker-1": ("failed", 1)}
    jobs_ended = {
        "worker-0": job("worker-0", "worker0", succeeded=1, complete=True, finish=stamp(1)),
        "worker-1": job("worker-1", "worker0", failed=1, failed_reason="BackoffLimitExceeded"),
    }
    jobs_ended["worker-1"]["status"]["conditions"][0]["lastTransitionTime"] = stamp(1)
    for order in (["worker-0", "worker-1"], ["worker-1", "worker-0"]):
        events = [("jobs", Event("MODIFIED", jobs_ended[task])) for task in order]
        told = replay("worker0", ends, events)
        assert told is not None and (told.state, told.decided_by) == ("Succeeded", "worker-0")
        assert final("worker0", ends, events).state == "Succeeded"


def test_an_unsettled_failure_is_no_verdict_yet() -> None:
    jobs, pods = start("worker0", {"worker-0": None, "worker-1": None})
    failed = job("worker-1", "worker0", failed=1, failed_reason="BackoffLimitExceeded")
    follower = Follower("mnist", "default", [jobs[0], failed], pods)
    run = follower.judge()
    assert run.state == "Failed" and run.decided_at is not None
    assert verdict(run, settled=False) is None
    assert verdict(run, settled=True) == run


def test_a_restart_count_seen_while_following_outlives_the_pod_that_held_it() -> None:
    chief = job("chief-0", "worker0", active=1)
    chief["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    crashing = pod(chief, "Running", restarts=3)
    follower = Follower("mnist", "default", [chief], [crashing])
    assert follower.judge().tasks[0].restarts == 3
    # backoffLimit reached: the Job controller fails the Job and deletes the pod
    ended = copy.deepcopy(chief)
    ended["status"] = job_status(failed=1, failed_reason="BackoffLimitExceeded")
    follower.take("jobs", Event("MODIFIED", ended))
    follower.take("pods", Event("DELETED", crashing))
    run = follower.judge()
    assert (run.state, run.tasks[0].restarts) == ("Failed", 3)
    # status, which never saw the pod, does not know it
    assert run_state("mnist", "default", [ended], []).tasks[0].restarts is None


def deleted(obj: dict[str, Any]) -> list[Event]:
    """What a watch brings of an object deleted in the foreground: its deletionTimestamp, then
    its DELETED."""
    going = copy.deepcopy(obj)
    going["metadata"]["deletionTimestamp"] = stamp(2)
    going["metadata"]["finalizers"] = ["foregroundDeletion"]
    return [Event("MODIFIED", going), Event("DELETED", going)]


def test_a_job_seen_failed_then_deleted_stays_failed_with_its_pods_reason() -> None:
    """ttlSecondsAfterFinished 0: the TTL controller deletes the deciding Job (and the garbage
    collector its pod and the other Jobs) within the failure's second."""
    jobs, pods = start("worker0", {"worker-0": None, "worker-1": None})
    follower = Follower("mnist", "default", jobs, pods)
    failed = job("worker-0", "worker0", failed=1, failed_reason="BackoffLimitExceeded")
    crashed = pod(failed, "Failed", exit_code=1, reason="Error")
    follower.take("pods", Event("MODIFIED", crashed))
    follower.take("jobs", Event("MODIFIED", failed))
    for plural, obj in (("jobs", failed), ("pods", crashed), ("jobs", jobs[1]), ("pods", pods[1])):
        for event in deleted(obj):
            follower.take(plural, event)
    run = follower.judge()
    assert (run.state, run.decided_by, run.reason) == ("Failed", "worker-0", "Error (exit 1)")
    assert verdict(run, settled=True) == run
    assert run.outcome() == "worker-0 Failed: Error (exit 1)"


def test_a_job_deleted_before_its_end_was_seen_is_still_deleted() -> None:
    jobs, pods = start("worker0", {"worker-0": None, "worker-1": None})
    follower = Follower("mnist", "default", jobs, pods, ["worker-0", "worker-1"])
    for event in deleted(jobs[0]):
        follower.take("jobs", event)
    run = follower.judge()
    assert (run.state, run.decided_by, run.reason) == ("Failed", "worker-0", "deleted")


def framework_job(task: str, variables: dict[str, str]) -> dict[str, Any]:
    """A Job of a run whose framework variables are `variables` (as the server writes them)."""
    made = job(task, "worker0", active=1)
    container = made["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": k, "value": v} for k, v in variables.items()]
    return made


TF_CLUSTER = json.dumps({"cluster": {"chief": ["h0:1"], "worker": ["h1:1", "h2:1"]}})


def test_a_chief_whose_job_is_gone_before_the_first_list_fails_the_followed_run() -> None:
    """The chief decides a TensorFlow run: the workers' Jobs still name it,
    so a run whose chief's Job is gone (deleted, or removed after it ended) is not taken for
    one that worker 0 decides."""
    jobs = [framework_job(f"worker-{i}", {"TF_CONFIG": TF_CLUSTER}) for i in (0, 1)]
    jobs[0]["status"] = job_status(succeeded=1, complete=True)  # worker 0 has finished
    pods = [pod(j, "Running") for j in jobs]
    follower = Follower("mnist", "default", jobs, pods, named_tasks(jobs))
    run = follower.judge()
    assert (run.state, run.decided_by, run.reason) == ("Failed", "chief-0", "deleted")


def test_a_job_made_again_under_the_name_of_one_seen_ended_is_judged_as_it_is_now() -> None:
    jobs, pods = start("worker0", {"worker-0": None})
    follower = Follower("mnist", "default", jobs, pods)
    failed = job("worker-0", "worker0", failed=1, failed_reason="BackoffLimitExceeded")
    follower.take("jobs", Event("MODIFIED", failed))
    for event in deleted(failed):
        follower.take("jobs", event)
    again = job("worker-0", "worker0", active=1)
    again["metadata"]["uid"] = "another-uid"
    follower.take("jobs", Event("ADDED", again))
    assert follower.judge().state != "Failed"


def test_a_task_whose_node_is_unknown_is_told_as_its_node_is_read_at_each_judgement() -> None:
    jobs, pods = start("worker0", {"worker-0": None, "worker-1": None})
    pods[1]["status"]["phase"] = "Unknown"
    follower = Follower("mnist", "default", jobs, pods)
    assert follower.unknown_nodes() == {"h1"}
    assert follower.judge({}).tasks[1].reason == "node h1 unreachable"
    # the same objects, judged again once the node has been read
    again = follower.judge({"h1": "NotReady since 10:02"})
    assert (again.tasks[1].state, again.tasks[1].reason) == (
        "Unknown",
        "node h1 NotReady since 10:02",
    )
    assert again.tasks[0].state == "Running"
    back = copy.deepcopy(pods[1])
    back["status"]["phase"] = "Running"
    follower.take("pods", Event("MODIFIED", back))
    assert follower.unknown_nodes() == set()
    assert follower.judge({"h1": "NotReady since 10:02"}).tasks[1].state == "Running"
