"""A run's Jobs and pods as recorded events, folded as watch.follow folds them (no server, no
clock): for the tests of the one follower's Ending and of the Python API's results."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from simpletfjob.kube.watch import Event
from simpletfjob.runs.state import Run
from simpletfjob.runs.watch import Follower
from tests.support.kubeapi import job_status, make_job, make_pod


def job(task: str, name: str = "", **status: Any) -> dict[str, Any]:
    role, index = task.rsplit("-", 1)
    name = name or f"mnist-{task}"
    labels = {
        "app.kubernetes.io/managed-by": "simpletfjob",
        "simpletfjob/job": "mnist",
        "simpletfjob/role": role,
        "simpletfjob/index": index,
    }
    annotations = {"simpletfjob/success-policy": "worker0", "simpletfjob/name": name}
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "tf", "image": "t"}]}}
    return make_job(
        name,
        labels=labels,
        annotations=annotations,
        template=template,
        status=job_status(**status),
    )


def pod(of: dict[str, Any], phase: str, node: str = "h1", **status: Any) -> dict[str, Any]:
    labels = {"job-name": of["metadata"]["name"]}
    name = f"{of['metadata']['name']}-p"
    return make_pod(name, owner=of, node=node, phase=phase, labels=labels, **status)


def states(
    jobs: list[dict[str, Any]], pods: list[dict[str, Any]], events: list[tuple[str, Event]]
) -> Iterator[Run]:
    """The run judged from the lists, then again after each event, as watch.follow judges it."""
    follower = Follower("mnist", "default", jobs, pods, [])
    run = follower.judge()
    follower.remember(run)
    yield run
    for plural, event in events:
        follower.take(plural, event)
        run = follower.judge()
        follower.remember(run)
        yield run


def running() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    jobs = [job(task, active=1) for task in ("worker-0", "worker-1")]
    return jobs, [pod(j, "Running") for j in jobs]
