"""`status` and `wait` against a real control plane, where the real Job controller does its work.

A run is rendered by the CLI and its documents applied with kube/objects.apply; the tests
play the kubelet (run_pods, set_pod_status) and the Job controller marks Jobs complete or
failed as it would in a cluster.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import assert_one_line_error, console_script
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
    result = cli("wait", "tfrun", "--kubeconfig", str(kubeconfig), "--timeout", "60s")
    joined(kubelet)
    assert result.code == 0, result.err
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

    def play() -> None:
        worker0 = pod_of(kube, namespace, "tfrun-worker-0")
        kube.set_pod_status(namespace, worker0, "Succeeded")  # a worker alone decides nothing
        wait_for(lambda: jobs(kube, namespace)["tfrun-worker-0"]["status"].get("succeeded"), 30)
        kube.set_pod_status(namespace, pod_of(kube, namespace, "tfrun-chief-0"), "Succeeded")

    kubelet = meanwhile(play)
    result = cli("wait", "tfrun", "--kubeconfig", str(kubeconfig), "--timeout", "60s")
    joined(kubelet)
    assert result.code == 0, result.err
    lines = result.err.splitlines()
    # Both rows are shown; when both Jobs' ends come in one batch of events (a loaded machine),
    # the rows come in role order, chief first, so only the verdict says who decided.
    assert "worker-0 Succeeded" in lines and "chief-0 Succeeded" in lines, result.err
    assert lines[-2:] == [
        "job.batch/tfrun-worker-1 deleted",
        "run tfrun succeeded: chief-0 Succeeded",
    ]


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


def test_the_console_scripts_wait_reads_both_watches_in_its_one_thread(
    cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """No thread stays blocked on a watch's socket, for the process's end to wake at the
    verdict (simpletfjob/kube/turns.py); it still sees each change, and the verdict."""
    if not Path("/proc/self/task").is_dir():
        pytest.skip("no /proc here to count a process's threads")
    kubeconfig = create_run(cli, kube, namespace, tmp_path, "-N", "3")
    run_all_pods(kube, namespace, 3)
    wait = subprocess.Popen(
        [console_script(), "wait", "tfrun", "--kubeconfig", str(kubeconfig), "--timeout", "60s"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip

    def threads() -> int:
        try:
            return len(list(Path(f"/proc/{wait.pid}/task").iterdir()))
        except FileNotFoundError:  # it has ended: poll() says so
            return 0

    try:
        assert wait.stderr is not None
        assert " Running on " in wait.stderr.readline()  # listed: its watches open next
        wait_for(lambda: wait.poll() is not None or threads() == 1, 30, "wait in one thread")
        time.sleep(1)  # following: its watches open, read in turns
        assert wait.poll() is None and threads() == 1
        kube.set_pod_status(namespace, pod_of(kube, namespace, "tfrun-worker-0"), "Succeeded")
        err = wait.communicate(timeout=60)[1]
    finally:
        if wait.poll() is None:
            wait.kill()
            wait.communicate()
    assert wait.returncode == 0, err
    assert err.splitlines()[-1] == "run tfrun succeeded: worker-0 Succeeded"
