"""follower: `wait`'s verdict, folded from events, agrees with `status`'s (run_state) on the end.

The events of a run are replayed in many orders, as the two watches can bring them: the
Jobs watch in the order the Job controller wrote (its time stamps never go back, and writes
in the same second come in any order), the pods watch interleaved with it at random.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simpletfjob.kube.watch import Event
from simpletfjob.runs.follower import ENDS, Follower, unknown_nodes, verdict
from simpletfjob.runs.objects import named_tasks, run_framework
from simpletfjob.runs.state import Run, describe, run_state
from simpletfjob.runs.watch import LEAN
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


def leaned(plural: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The object as `follow` keeps it: without what its containers run and their values."""
    kept = copy.deepcopy(obj)
    LEAN[plural](kept)
    return kept


def replay(policy: str, ends: dict[str, End], events: list[tuple[str, Event]]) -> Run | None:
    """What `wait` ends with: runs/watch.py's follow loop without a server, on the objects as
    it keeps them (LEAN), where `final` (status) judges them whole.

    A failure waits until its second has passed on the server: here, until every Job event
    stamped with that second or before has come (the Jobs watch brings them in that order).
    """
    jobs, pods = start(policy, ends)
    jobs, pods = [leaned("jobs", j) for j in jobs], [leaned("pods", p) for p in pods]
    events = [
        (plural, Event(e.type, e.object and leaned(plural, e.object))) for plural, e in events
    ]
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


@pytest.mark.parametrize(
    ("variables", "framework", "tasks"),
    [
        ({"TF_CONFIG": TF_CLUSTER}, "tensorflow", ["chief-0", "worker-0", "worker-1"]),
        ({"PET_NNODES": "1:3", "RANK": "0"}, "pytorch", ["worker-0", "worker-1", "worker-2"]),
        ({"JAX_NUM_PROCESSES": "2"}, "jax", ["worker-0", "worker-1"]),
    ],
    ids=["tensorflow", "pytorch", "jax"],
)
def test_a_followed_job_keeps_the_framework_variables_that_name_the_run_s_tasks(
    variables: dict[str, str], framework: str, tasks: list[str]
) -> None:
    """follow keeps Jobs without their variables' values (LEAN) but the frameworks' own: the
    run's tasks, and its framework, are read from them as from the whole Job."""
    whole = framework_job("worker-0", {**variables, "DEBUG": "1"})
    kept = leaned("jobs", whole)
    assert named_tasks([kept]) == named_tasks([whole]) == tasks
    assert run_framework([kept]).name == run_framework([whole]).name == framework
    env = kept["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env[-1] == {"name": "DEBUG"}


def test_a_chief_whose_job_is_gone_before_the_first_list_fails_the_followed_run() -> None:
    """The chief decides a TensorFlow run: the workers' Jobs, as follow keeps them, still name it,
    so a run whose chief's Job is gone (deleted, or removed after it ended) is not taken for
    one that worker 0 decides."""
    jobs = [leaned("jobs", framework_job(f"worker-{i}", {"TF_CONFIG": TF_CLUSTER})) for i in (0, 1)]
    jobs[0]["status"] = job_status(succeeded=1, complete=True)  # worker 0 has finished
    pods = [leaned("pods", pod(j, "Running")) for j in jobs]
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


def test_an_event_about_one_task_of_many_judges_that_task_again_not_every_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """wait judged the whole run again on every event: at 1000 tasks, most of its reaction. Each
    object's owner and annotations are read again only for the objects the events brought."""
    import simpletfjob.runs.reading as reading_module
    import simpletfjob.runs.tally as tally_module

    tasks = ["ps-0", *(f"worker-{i}" for i in range(300))]
    jobs, pods = start("worker0", dict.fromkeys(tasks))
    follower = Follower("mnist", "default", jobs, pods, tasks)
    follower.judge()
    judged: list[str] = []
    read: list[str] = []

    def counted(original: Any, into: list[str], many: bool = False) -> Any:
        def reading(first: Any, *args: Any) -> Any:
            objects = list(first) if many else [first]
            into.extend(o["metadata"]["name"] for o in objects)
            return original(objects if many else first, *args)

        return reading

    task_of, said_by, pods_by_job = (
        reading_module.task_of, reading_module.said_by, reading_module.pods_by_job
    )  # fmt: skip
    for module in (reading_module, tally_module):  # the whole judgement's, and the counts'
        monkeypatch.setattr(module, "task_of", counted(task_of, judged))
        monkeypatch.setattr(module, "said_by", counted(said_by, read))
        monkeypatch.setattr(module, "pods_by_job", counted(pods_by_job, read, many=True))
    failed = job("worker-7", "worker0", failed=1, failed_reason="BackoffLimitExceeded")
    follower.take("pods", Event("MODIFIED", pod(failed, "Failed", exit_code=1, reason="Error")))
    follower.take("jobs", Event("MODIFIED", failed))
    run = follower.judge()
    assert judged == ["mnist-worker-7"]
    assert sorted(read) == ["mnist-worker-7", "mnist-worker-7-p"]  # the Job, then its pod
    # and it is the judgement of every object afresh
    now = run_state(
        "mnist", "default", follower.stores["jobs"].objects.values(),
        follower.stores["pods"].objects.values(), tasks,
    )  # fmt: skip
    assert run == now
    assert next(t for t in run.tasks if t.task == "worker-7").state == "Failed"
    judged.clear()
    read.clear()
    assert follower.judge() == now and judged == read == []  # nothing changed: nothing read
    # A watch's bookmark (a resourceVersion only) changes nothing either.
    for plural in ("jobs", "pods"):
        follower.take(plural, Event("BOOKMARK", {"metadata": {"resourceVersion": "99"}}))
    assert follower.judge() == now and judged == read == []


class Whole(Follower):
    """The follower as it was: every judgement from every object (run_state)."""

    def judge(self, nodes: Any = None) -> Run:
        return self.judge_all(nodes)


TASKS = ("chief-0", "ps-0", "worker-0", "worker-1", "worker-2", "evaluator-0")
Action = tuple[Any, ...]


def actions() -> st.SearchStrategy[Action]:
    """What may happen to a run's objects, as one watch event (or a list read again)."""
    task = st.integers(0, len(TASKS) - 1)
    second = st.integers(0, 3)  # 0: a time the server did not write
    news = st.one_of(
        st.tuples(
            st.just("job"),
            task,
            st.sampled_from(["active", "complete", "failed", "deadline"]),
            second,
        ),
        st.tuples(
            st.just("pod"),
            task,
            st.sampled_from("ab"),
            st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown"]),
            st.sampled_from(["h1", "h2"]),
            st.integers(0, 2),
        ),
    )
    rare = st.one_of(  # what the counts leave to the whole judgement, mostly
        st.tuples(st.just("pod-deleted"), task, st.sampled_from("ab")),
        st.tuples(st.just("pod-orphan"), task, st.sampled_from("ab")),
        st.tuples(st.just("gone"), task),
        st.tuples(st.just("job-deleted"), task),
        st.tuples(st.just("again"), task),
        st.tuples(st.just("copy"), task),
        st.tuples(
            st.just("annotate"),
            task,
            st.sampled_from(
                [
                    ("simpletfjob/success-policy", "all-workers"),
                    ("simpletfjob/success-policy", "x"),
                    ("simpletfjob/min-workers", "1"),
                    ("simpletfjob/restarts", "1"),
                ]
            ),
        ),
        st.tuples(st.just("relist")),
    )
    return st.one_of(*[news] * 7, rare)


class Cluster:
    """A run's Jobs and pods as the API server holds them, and the events their changes make."""

    def __init__(self, tasks: list[str], policy: str, phase: str) -> None:
        self.policy = policy
        self.jobs = {t: job(t, policy, active=1) for t in tasks}
        self.pods = {f"{t}-a": pod(self.jobs[t], phase) for t in tasks}
        self.made = 0

    def event(self, action: Action) -> list[tuple[str, Event]]:
        kind, task = action[0], TASKS[action[1]] if len(action) > 1 else ""
        was = self.jobs.get(task)
        if kind == "relist":
            return [("jobs", Event("RELIST", None, tuple(copy.deepcopy(list(self.jobs.values()))))),
                    ("pods", Event("RELIST", None, tuple(copy.deepcopy(list(self.pods.values())))))]  # fmt: skip
        if kind == "job" and was is not None:
            status = {"active": {"active": 1}, "complete": {"succeeded": 1, "complete": True,
                      "finish": stamp(action[3])}, "failed": {"failed": 1, "failed_reason":
                      "BackoffLimitExceeded"}, "deadline": {"failed": 1, "failed_reason":
                      "DeadlineExceeded"}}[action[2]]  # fmt: skip
            new = copy.deepcopy(was)
            new["status"] = job_status(start=stamp(0), **status)
            for c in new["status"].get("conditions", []):
                c["lastTransitionTime"] = stamp(action[3]) if action[3] else None
            if not action[3]:
                new["status"].pop("completionTime", None)
            return self._job(task, "MODIFIED", new)
        if kind == "gone" and was is not None:
            new = copy.deepcopy(was)
            new["metadata"]["deletionTimestamp"] = stamp(3)
            new["metadata"]["finalizers"] = ["foregroundDeletion"]
            return self._job(task, "MODIFIED", new)
        if kind == "job-deleted" and was is not None:
            del self.jobs[task]
            return [("jobs", Event("DELETED", copy.deepcopy(was)))]
        if kind == "again" and was is None:
            self.made += 1
            new = job(task, self.policy, active=1)
            new["metadata"]["uid"] += f"-{self.made}"
            return self._job(task, "ADDED", new)
        if kind == "copy" and was is not None:
            new = copy.deepcopy(was)
            new["metadata"]["name"] += "-copy"
            new["metadata"]["uid"] += "-copy"
            self.jobs[task + "-copy"] = new
            return [("jobs", Event("ADDED", copy.deepcopy(new)))]
        if kind == "annotate" and was is not None:
            new = copy.deepcopy(was)
            key, value = action[2]
            new["metadata"]["annotations"][key] = value
            return self._job(task, "MODIFIED", new)
        name = f"{task}-{action[2]}" if len(action) > 2 else ""
        if kind == "pod" and was is not None:
            _, _, _, phase, node, restarts = action
            extra: dict[str, Any] = {"restarts": restarts}
            if phase == "Failed":
                extra.update(exit_code=1, reason="Error")
            made = make_pod(f"{was['metadata']['name']}-{action[2]}", owner=was, node=node,
                            phase=phase, labels={"x": "y"}, **extra)  # fmt: skip
            kind = "MODIFIED" if name in self.pods else "ADDED"
            self.pods[name] = made
            return [("pods", Event(kind, copy.deepcopy(made)))]
        if kind == "pod-orphan" and name in self.pods:
            new = copy.deepcopy(self.pods[name])
            new["metadata"].pop("ownerReferences", None)
            self.pods[name] = new
            return [("pods", Event("MODIFIED", copy.deepcopy(new)))]
        if kind == "pod-deleted" and name in self.pods:
            return [("pods", Event("DELETED", copy.deepcopy(self.pods.pop(name))))]
        return []

    def _job(self, task: str, kind: str, new: dict[str, Any]) -> list[tuple[str, Event]]:
        self.jobs[task] = new
        return [("jobs", Event(kind, copy.deepcopy(new)))]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(TASKS), min_size=1, max_size=5, unique=True),
    st.sampled_from(["worker0", "all-workers"]),
    st.booleans(),
    st.sampled_from(["Pending", "Running"]),
    st.lists(actions(), max_size=40),
)
def test_the_counts_judge_every_event_as_the_whole_run_is_judged(
    tasks: list[str], policy: str, expect: bool, phase: str, happenings: list[Action]
) -> None:
    """wait's follower keeps the run's counts task by task (runs/tally.py): after every event,
    its run (each line, the state, who decided it and why) and its verdict are those of the
    whole judgement of the same objects (run_state over every Job and pod)."""
    cluster = Cluster(tasks, policy, phase)
    jobs, pods = list(cluster.jobs.values()), list(cluster.pods.values())
    expected = list(tasks) if expect else []
    counted = Follower("mnist", "default", copy.deepcopy(jobs), copy.deepcopy(pods), expected)
    whole = Whole("mnist", "default", copy.deepcopy(jobs), copy.deepcopy(pods), expected)
    known: dict[str, str] = {}  # the nodes read, as watch.NodeReader keeps them
    for action in [None, *happenings]:
        for plural, event in cluster.event(action) if action is not None else []:
            counted.take(plural, event)
            whole.take(plural, copy.deepcopy(event))
        unknown = unknown_nodes(whole.stores["pods"].objects.values())
        assert counted.unknown_nodes() == unknown
        known.update((node, "NotReady since 10:00") for node in unknown)
        nodes = dict(known)
        run, judged = counted.judge(nodes), whole.judge(nodes)
        assert [describe(t) for t in run.tasks] == [describe(t) for t in judged.tasks]
        assert run == judged, action
        for settled in (False, True):
            assert verdict(run, settled) == verdict(judged, settled)
        counted.remember(run)
        whole.remember(judged)
        assert counted.expected == whole.expected


def lines_run(then: Any) -> int:
    """How many lines of simpletfjob's code `then()` runs."""
    import sys

    count = 0

    def trace(frame: Any, event: str, _: Any) -> Any:
        nonlocal count
        if "simpletfjob" not in frame.f_code.co_filename:
            return None
        count += event == "line"
        return trace

    sys.settrace(trace)
    try:
        then()
    finally:
        sys.settrace(None)
    return count


def test_an_event_about_one_task_is_judged_in_the_same_work_whatever_the_run_s_size() -> None:
    """wait's reaction at 1000 tasks: the run's verdict comes from its counts, kept task by task
    (runs/tally.py), not from a pass over every task and object on each event."""

    def one_event(size: int) -> int:
        tasks = ["chief-0", *(f"worker-{i}" for i in range(size))]
        jobs, pods = start("worker0", dict.fromkeys(tasks))
        follower = Follower("mnist", "default", jobs, pods, tasks)
        follower.remember(follower.judge())
        done = job("chief-0", "worker0", succeeded=1, complete=True, finish=stamp(1))
        follower.take("pods", Event("MODIFIED", pod(done, "Succeeded")))
        follower.take("jobs", Event("MODIFIED", done))

        def react() -> None:
            run = follower.judge()
            follower.remember(run)
            assert verdict(run, settled=False) == run and run.decided_by == "chief-0"

        return lines_run(react)

    assert one_event(50) == one_event(500)
