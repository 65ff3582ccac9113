"""Which run of a container `logs` reads: the current one, or the one that crashed before it."""

from __future__ import annotations

from typing import Any

from simpletfjob.runs.logs import LogRequest
from simpletfjob.runs.logsources import Selection, Source, sources_now


def pod(state: dict[str, Any], restarts: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "mnist-worker-0-abcde", "creationTimestamp": "2026-11-26T10:00:00Z"},
        "spec": {"nodeName": "h1", "containers": [{"name": "tf", "env": []}]},
        "status": {
            "phase": "Running",
            "containerStatuses": [{"name": "tf", "restartCount": restarts, "state": state}],
        },
    }


def test_a_running_container_is_read_as_its_current_run() -> None:
    said: list[str] = []
    found = sources_now(
        {"worker-0": [pod({"running": {}}, 2)]}, ["worker-0"], Selection(), False, said.append
    )
    assert found == [(Source("worker-0", "mnist-worker-0-abcde", "tf", "worker-0", 2), True)]
    assert said == []


def test_a_container_waiting_to_start_again_is_read_as_the_run_that_crashed() -> None:
    waiting = {"waiting": {"reason": "CrashLoopBackOff"}}
    found = sources_now(
        {"worker-0": [pod(waiting, 1)]}, ["worker-0"], Selection(), False, lambda _: None
    )
    assert found == [
        (Source("worker-0", "mnist-worker-0-abcde", "tf", "worker-0", 0, earlier=True), True)
    ]
    # that run has ended: it is read whole, as the previous container, and not followed
    query = LogRequest(follow=True, tail=10).query("tf", whole=True, earlier=True)
    assert query == [("container", "tf"), ("previous", "true")]


def test_a_container_not_started_has_nothing_to_read_and_says_why() -> None:
    said: list[str] = []
    waiting = {"waiting": {"reason": "ErrImagePull"}}
    found = sources_now(
        {"worker-0": [pod(waiting, 0)]}, ["worker-0"], Selection(), False, said.append
    )
    assert [readable for _, readable in found] == [False]
    assert said == ["worker-0: waiting to start: ErrImagePull"]


def _job(task: str, cluster: dict[str, list[str]], **status: Any) -> dict[str, Any]:
    """A Job of run f9 as the server has it, its TF_CONFIG naming every task."""
    import json

    from tests.support.recorded import job

    made = job(task, name=f"f9-{task}", **status)
    role, index = task.rsplit("-", 1)
    config = {"cluster": cluster, "task": {"type": role, "index": int(index)}}
    container = made["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "TF_CONFIG", "value": json.dumps(config)}]
    return made


def test_a_task_the_cleanup_deleted_is_told_as_deleted_not_as_unknown() -> None:
    """worker-1 failed and decided the run; wait's cleanup deleted worker-0, which still ran.
    worker-1's TF_CONFIG still names it."""
    import pytest

    from simpletfjob.errors import SimpleTFJobError, UsageError
    from simpletfjob.runs.logsources import gone_tasks, tasks_asked

    cluster = {"worker": ["h1:2222", "h2:2222"]}
    jobs = [_job("worker-1", cluster, failed=1, failed_reason="BackoffLimitExceeded")]
    gone = gone_tasks("f9", jobs, [], ["worker-1"])
    line = "worker-0's Job was deleted by the cleanup after the verdict; its logs went with it"
    assert gone == {"worker-0": line}
    with pytest.raises(SimpleTFJobError) as raised:
        tasks_asked(["worker-1"], ["worker-0"], [], "f9", gone)
    assert str(raised.value) == line and not isinstance(raised.value, UsageError)
    said: list[str] = []
    assert tasks_asked(["worker-1"], ["worker-0", "worker-1"], [], "f9", gone, said.append) == [
        "worker-1"
    ]
    assert said == [line]
    with pytest.raises(UsageError, match="run 'f9' has no task 'worker-7'; its tasks are worker-1"):
        tasks_asked(["worker-1"], ["worker-7"], [], "f9", gone)
    with pytest.raises(UsageError, match="run 'f9' has no role 'Worker'; its roles are ps, worker"):
        tasks_asked(["ps-0", "worker-1"], [], ["worker", "Worker"], "f9", gone)
    assert tasks_asked(["ps-0", "worker-1"], [], ["worker"], "f9") == ["worker-1"]
    assert tasks_asked(["ps-0", "worker-1"], [], ["chief"], "f9") == []  # a role; none now
    # A run that has not ended lost its Job otherwise: by hand, or a TTL.
    running = [_job("worker-1", cluster, active=1)]
    assert gone_tasks("f9", running, [], ["worker-1"]) == {
        "worker-0": "worker-0's Job is gone (deleted, or removed by ttlSecondsAfterFinished); "
        "its logs went with it"
    }
    assert gone_tasks("f9", jobs, [], ["worker-0", "worker-1"]) == {}
