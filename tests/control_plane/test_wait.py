"""`status` and `wait` against a real control plane, where the real Job controller does its work.

A run is rendered by the CLI and its documents applied with kube/objects.apply; the tests
play the kubelet (run_pods, set_pod_status) and the Job controller marks Jobs complete or
failed as it would in a cluster.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import assert_one_line_error
from tests.support.cluster import wait_for
from tests.support.control_plane import ControlPlane
from tests.support.controlled import (
    NODES,
    create_run,
    jobs,
    joined,
    meanwhile,
    pod_of,
    run_all_pods,
)


def test_a_ps_worker_run_succeeds_through_worker0_then_wait_deletes_the_running_ps(
    cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    kubeconfig = create_run(cli, kube, namespace, tmp_path, "-N", "3")

    def play() -> None:
        run_all_pods(kube, namespace, 3)
        worker0 = pod_of(kube, namespace, "tfrun-worker-0")
        kube.set_pod_status(namespace, worker0, "Succeeded")

    kubelet = meanwhile(play)
    began = time.monotonic()
    # a ps never ends by itself, nor do the workers of a run with one: no grace is waited out
    result = cli(
        "wait", "tfrun", "--kubeconfig", str(kubeconfig), "--timeout", "60s",
        "--cleanup-grace", "2m",
    )  # fmt: skip
    joined(kubelet)
    assert result.code == 0, result.err
    assert time.monotonic() - began < 60
    lines = result.err.splitlines()
    assert f"ps-0 Running on {NODES[0]}" in lines
    # worker-0 runs and succeeds at once: its Running row shows unless both come in one batch
    assert "worker-0 Succeeded" in lines, result.err
    assert lines[-3:] == [
        "job.batch/tfrun-ps-0 deleted",
        "job.batch/tfrun-worker-1 deleted",
        "run tfrun succeeded: worker-0 Succeeded",
    ]
    assert set(jobs(kube, namespace)) == {"tfrun-worker-0"}
    # the finished worker's pod stays for kubectl logs; the ps's is being deleted
    (pod,) = kube.pods(namespace, "job-name=tfrun-worker-0")
    assert pod["status"]["phase"] == "Succeeded" and "deletionTimestamp" not in pod["metadata"]
    wait_for(
        lambda: all(
            p["metadata"].get("deletionTimestamp")
            for p in kube.pods(namespace, "job-name=tfrun-ps-0")
        ),
        30,
        "the garbage collector to delete the ps pod (Background propagation)",
    )
    status = cli("status", "tfrun", "--kubeconfig", str(kubeconfig), "-o", "json")
    data = yaml.safe_load(status.out)
    assert data["state"] == "Succeeded"
    assert [t["task"] for t in data["tasks"]] == ["worker-0"]


def test_a_run_with_a_chief_succeeds_when_the_chief_does(
    cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    kubeconfig = create_run(cli, kube, namespace, tmp_path, "-N", "3", "--chief", "--psn", "0")
    during_grace: list[set[str]] = []

    def play() -> None:
        worker0 = pod_of(kube, namespace, "tfrun-worker-0")
        kube.set_pod_status(namespace, worker0, "Succeeded")  # a worker alone decides nothing
        wait_for(lambda: jobs(kube, namespace)["tfrun-worker-0"]["status"].get("succeeded"), 30)
        kube.set_pod_status(namespace, pod_of(kube, namespace, "tfrun-chief-0"), "Succeeded")
        wait_for(lambda: jobs(kube, namespace)["tfrun-chief-0"]["status"].get("succeeded"), 30)
        time.sleep(1.5)
        during_grace.append(set(jobs(kube, namespace)))

    kubelet = meanwhile(play)
    # worker-1 never ends: under MultiWorkerMirroredStrategy (no ps) it is given its grace
    # to end with the chief, then deleted
    result = cli(
        "wait", "tfrun", "--kubeconfig", str(kubeconfig), "--timeout", "60s",
        "--cleanup-grace", "5s",
    )  # fmt: skip
    joined(kubelet)
    assert result.code == 0, result.err
    assert "tfrun-worker-1" in during_grace[0]
    lines = result.err.splitlines()
    # Both rows are shown; when both Jobs' ends come in one batch of events (a loaded machine),
    # the rows come in role order, chief first, so only the verdict says who decided.
    assert "worker-0 Succeeded" in lines and "chief-0 Succeeded" in lines, result.err
    assert lines[-2:] == [
        "job.batch/tfrun-worker-1 deleted",
        "run tfrun succeeded: chief-0 Succeeded",
    ]


def test_after_a_success_the_workers_of_a_collective_are_given_their_grace_to_end(
    cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """MultiWorkerMirroredStrategy (no ps): every worker ends with worker 0, a moment later.
    Their Jobs and logs stay; the grace ends as soon as the last of them has ended."""
    kubeconfig = create_run(cli, kube, namespace, tmp_path, "-N", "3", "--psn", "0")

    def play() -> None:
        run_all_pods(kube, namespace, 3)
        kube.set_pod_status(namespace, pod_of(kube, namespace, "tfrun-worker-0"), "Succeeded")
        wait_for(lambda: jobs(kube, namespace)["tfrun-worker-0"]["status"].get("succeeded"), 30)
        time.sleep(1)
        for worker in ("tfrun-worker-1", "tfrun-worker-2"):
            kube.set_pod_status(namespace, pod_of(kube, namespace, worker), "Succeeded")

    kubelet = meanwhile(play)
    began = time.monotonic()
    result = cli(
        "wait", "tfrun", "--kubeconfig", str(kubeconfig), "--timeout", "2m",
        "--cleanup-grace", "2m",
    )  # fmt: skip
    joined(kubelet)
    assert result.code == 0, result.err
    assert time.monotonic() - began < 60  # not the whole grace
    lines = result.err.splitlines()
    assert "worker-1 Succeeded" in lines and "worker-2 Succeeded" in lines, result.err
    assert not [line for line in lines if line.endswith(" deleted")], result.err
    assert lines[-1] == "run tfrun succeeded: worker-0 Succeeded"
    assert set(jobs(kube, namespace)) == {"tfrun-worker-0", "tfrun-worker-1", "tfrun-worker-2"}
    for job in jobs(kube, namespace).values():
        assert job["status"].get("succeeded") == 1, job["status"]


def test_all_workers_waits_for_the_last_worker(
    cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    kubeconfig = create_run(
        cli, kube, namespace, tmp_path, "-N", "2", "--psn", "0", "--success-policy", "all-workers"
    )

    def play() -> None:
        kube.set_pod_status(namespace, pod_of(kube, namespace, "tfrun-worker-0"), "Succeeded")
        wait_for(lambda: jobs(kube, namespace)["tfrun-worker-0"]["status"].get("succeeded"), 30)
        kube.set_pod_status(namespace, pod_of(kube, namespace, "tfrun-worker-1"), "Succeeded")

    kubelet = meanwhile(play)
    result = cli("wait", "tfrun", "--kubeconfig", str(kubeconfig), "--timeout", "60s")
    joined(kubelet)
    assert result.code == 0, result.err
    lines = result.err.splitlines()
    assert lines.index("worker-0 Succeeded") < lines.index("worker-1 Succeeded")
    assert lines[-1] == "run tfrun succeeded: all 2 workers succeeded"
    assert set(jobs(kube, namespace)) == {"tfrun-worker-0", "tfrun-worker-1"}  # nothing to delete


def test_a_worker_past_its_backoff_limit_fails_the_run_and_wait_names_it(
    cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    kubeconfig = create_run(cli, kube, namespace, tmp_path, "-N", "3")

    def play() -> None:
        run_all_pods(kube, namespace, 3)
        worker1 = pod_of(kube, namespace, "tfrun-worker-1")
        kube.set_pod_status(namespace, worker1, "Failed", exit_code=2)

    kubelet = meanwhile(play)
    result = cli("wait", "tfrun", "--kubeconfig", str(kubeconfig), "--timeout", "60s")
    joined(kubelet)
    assert result.code == 1
    lines = result.err.splitlines()
    assert "worker-1 Failed: Error (exit 2)" in lines
    assert lines[-1] == "simpletfjob: error: run 'tfrun' failed: worker-1 Failed: Error (exit 2)"
    failed = jobs(kube, namespace)["tfrun-worker-1"]["status"]["conditions"][0]
    assert (failed["type"], failed["reason"]) == ("Failed", "BackoffLimitExceeded")
    assert set(jobs(kube, namespace)) == {"tfrun-worker-1"}  # the others still ran: deleted


def test_wait_times_out_with_exit_3_and_leaves_the_run(
    cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    kubeconfig = create_run(cli, kube, namespace, tmp_path, "-N", "3")
    result = cli("wait", "tfrun", "--kubeconfig", str(kubeconfig), "--timeout", "2s")
    assert result.code == 3
    assert result.err.splitlines()[-1].startswith(
        "simpletfjob: error: run 'tfrun' did not end within 2s ("
    )
    assert len(jobs(kube, namespace)) == 3


def test_a_running_run_whose_tasks_reach_each_other_by_node_name_times_out_saying_so(
    cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """A node's name resolves inside a pod only where the cluster's DNS knows it: tasks that
    wait for each other at names that do not resolve run until the timeout."""
    kubeconfig = create_run(cli, kube, namespace, tmp_path, "-N", "3")
    run_all_pods(kube, namespace, 3)
    result = cli("wait", "tfrun", "--kubeconfig", str(kubeconfig), "--timeout", "3s")
    assert result.code == 3, result.err
    assert result.err.splitlines()[-1].startswith(
        "simpletfjob: error: run 'tfrun' did not end within 3s (Running); its tasks reach each "
        f"other at their nodes' names ({', '.join(NODES[:3])}): where their pods cannot resolve "
        "those, they wait for each other until stopped; --address internal-ip gives them the "
        "nodes' InternalIP; it is left as it is; see: "
    ), result.err


def test_a_user_limited_by_rbac_is_told_which_verb_on_which_resource(
    cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    create_run(cli, kube, namespace, tmp_path, "-N", "3")
    carol = str(kube.kubeconfig(tmp_path / "carol", "carol", namespace))
    kube.grant("carol", ["list", "watch"], ["jobs"], namespace, api_group="batch")
    assert_one_line_error(
        cli("status", "tfrun", "--kubeconfig", carol),
        1,
        contains=[f"cannot list pods in namespace {namespace}"],
    )
    kube.grant("carol", ["list", "watch"], ["pods", "services"], namespace)
    status = cli("status", "tfrun", "--kubeconfig", carol)
    assert status.code == 0 and status.out.startswith(f"run tfrun in {namespace}: Pending, 3 tasks")
    kube.set_pod_status(namespace, pod_of(kube, namespace, "tfrun-worker-0"), "Succeeded")
    wait_for(lambda: jobs(kube, namespace)["tfrun-worker-0"]["status"].get("succeeded"), 30)
    refused = cli("wait", "tfrun", "--kubeconfig", carol)
    assert refused.code == 1
    assert refused.err.splitlines()[-1].startswith(
        "simpletfjob: error: run 'tfrun' succeeded: worker-0 Succeeded; but its cleanup"
    )
    assert refused.err.splitlines()[-1].endswith(
        f"cannot delete jobs in namespace {namespace} (403 Forbidden, to delete job 'tfrun-ps-0'); "
        "it needs a Role with verb 'delete' on 'jobs' in API group 'batch'"
    )
    kube.grant("carol", ["delete"], ["jobs"], namespace, api_group="batch")
    kube.grant("carol", ["delete"], ["services"], namespace)
    done = cli("wait", "tfrun", "--kubeconfig", carol)
    assert done.code == 0, done.err
    assert set(jobs(kube, namespace)) == {"tfrun-worker-0"}


@pytest.fixture(autouse=True)
def _no_kubeconfig_from_home(kube_env: Path) -> None:
    """Only the kubeconfig each test writes."""
