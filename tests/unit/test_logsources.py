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
