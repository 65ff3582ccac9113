"""`simpletfjob run` on the real control plane, its pods run by the kubelet stand-in: a run
followed to its end, restarted whole on a failure (a failed Job, a lost node) up to its limit,
left running (or deleted) on an interrupt; and the limits the cluster carries out with no
client: --deadline (activeDeadlineSeconds) and --cleanup-after (ownerReferences and
ttlSecondsAfterFinished, carried out by the TTL controller and the garbage collector).

The tasks of these runs bind no port, so they may share this machine's network whatever
nodes they are on. Each test's nodes carry a label of their own, and `run` plans from the
cluster with -l: a restart plans again against the nodes as they are then.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_one_line_error, console_script, write
from tests.support.cluster import wait_for
from tests.support.control_plane import ControlPlane
from tests.support.kubelet import Kubelet
from tests.support.parallel import node_address
from tests.support.scenes import Runs, stand_in_nodes
from tests.support.templates import FAILING


@pytest.fixture
def runs(cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[Runs]:
    nodes, label = stand_in_nodes("rt", 3, label_key="rt")
    with Kubelet(kube, nodes, tmp_path / "kubelet") as kubelet:
        yield Runs(cli, kube, kubelet, namespace, tmp_path, label)


def test_a_worker_that_fails_restarts_the_whole_run_once_and_it_then_succeeds(runs: Runs) -> None:
    result = runs.run("--max-restarts", "1", mode="fail-once")
    assert result.code == 0, result.err
    restarts = [line for line in result.err.splitlines() if line.startswith("restarting")]
    assert len(restarts) == 1, result.err
    host = "(?:" + "|".join(re.escape(node_address(i)) for i in range(3)) + ")"
    assert re.fullmatch(
        r"restarting run rt \(1/1\) after a program error: worker-1 Failed: Error \(exit 1\); "
        rf"hosts now: {host}, {host}, {host}",
        restarts[0],
    ), restarts[0]
    assert result.err.splitlines()[-1] == "run rt succeeded: worker-0 Succeeded"
    # The deciding task's logs, prefixed, from both attempts; no other task's.
    lines = result.out.splitlines()
    assert lines.count("worker-0 | worker-0 started") == 2, result.out
    assert "worker-0 | worker-0 done" in lines
    assert all(line.startswith("worker-0 | ") for line in lines), result.out
    # The run as it is now: the second attempt, which records the restart.
    jobs = runs.jobs()
    annotations = jobs["rt-worker-0"]["metadata"]["annotations"]
    assert annotations["simpletfjob/restarts"] == "1"
    assert annotations["simpletfjob/max-restarts"] == "1"
    status = runs.cli("status", "rt", "--kubeconfig", runs.kubeconfig, "-o", "json")
    data = json.loads(status.out)
    assert (data["restarts"], data["maxRestarts"]) == (1, 1)
    table = runs.cli("status", "rt", "--kubeconfig", runs.kubeconfig)
    assert table.out.splitlines()[0].split(";")[0].endswith(", restarts 1/1"), table.out


def test_restarts_that_run_out_exit_1_with_the_last_cause(runs: Runs) -> None:
    result = runs.run("--max-restarts", "1", "--logs", "none", mode="fail-always")
    assert result.code == 1, result.err
    assert result.out == ""
    lines = result.err.splitlines()
    assert sum(line.startswith("restarting run rt (1/1)") for line in lines) == 1, result.err
    assert lines[-1] == (
        "simpletfjob: error: run 'rt' failed: worker-1 Failed: Error (exit 1); "
        "no restart left (1 of 1 made)"
    )


def test_without_restarts_a_failure_is_exit_1_and_wait_then_says_nothing_of_run(
    runs: Runs,
) -> None:
    result = runs.run("--logs", "none", mode="fail-always")
    assert result.code == 1, result.err
    assert result.err.splitlines()[-1] == (
        "simpletfjob: error: run 'rt' failed: worker-1 Failed: Error (exit 1)"
    )
    assert "restarting" not in result.err


def test_wait_on_a_run_with_restarts_left_says_that_run_restarts_it(runs: Runs) -> None:
    # The run's annotations as `run` writes them, on a run that `apply` made and `wait` follows.
    applied = runs.cli("apply", *runs.args("fail-always"))
    assert applied.code == 0, applied.err
    for name in runs.jobs():
        runs.kube.admin.merge_patch(
            f"/apis/batch/v1/namespaces/{runs.ns}/jobs/{name}",
            {
                "metadata": {
                    "annotations": {"simpletfjob/max-restarts": "3", "simpletfjob/restarts": "1"}
                }
            },
        )
    waited = runs.cli("wait", "rt", "--kubeconfig", runs.kubeconfig, "--timeout", "2m")
    assert waited.code == 1, waited.err
    assert waited.err.splitlines()[-1] == (
        "simpletfjob: error: run 'rt' failed: worker-1 Failed: Error (exit 1); 2 of its 3 "
        "restarts are left, which only simpletfjob run restarts (wait has no template to plan "
        "again from)"
    )


def test_a_node_that_stops_its_heartbeat_restarts_the_run_on_the_other_nodes(runs: Runs) -> None:
    lost: list[str] = []

    def lose_worker_1() -> None:
        pod = wait_for(lambda: runs.running("worker-1"), timeout=60, what="worker-1 running")
        lost.append(pod["spec"]["nodeName"])
        runs.kubelet.lose(lost[0])

    thread = threading.Thread(target=lose_worker_1, daemon=True)
    thread.start()
    result = runs.run(
        "-N", "2", "--psn", "0", "--max-restarts", "1", "--node-grace", "2s",
        "--cleanup", "none", seconds=10,
    )  # fmt: skip
    thread.join()
    assert result.code == 0, result.err
    address = runs.kubelet.nodes[lost[0]].address
    restart = [line for line in result.err.splitlines() if line.startswith("restarting")]
    assert len(restart) == 1, result.err
    assert restart[0].startswith(
        f"restarting run rt (1/1) after a disruption: worker-1 on node {lost[0]}: NotReady for more than 2s; "
        "hosts now: "
    ), restart[0]
    hosts = restart[0].split("hosts now: ")[1].split(", ")
    assert len(hosts) == 2 and address not in hosts, restart[0]
    nodes = {j["spec"]["template"]["spec"]["nodeName"] for j in runs.jobs().values()}
    assert len(nodes) == 2 and lost[0] not in nodes


def test_a_restart_that_cannot_be_placed_exits_1_with_the_placement_error(runs: Runs) -> None:
    def lose_worker_1() -> None:
        pod = wait_for(lambda: runs.running("worker-1"), timeout=60, what="worker-1 running")
        runs.kubelet.lose(pod["spec"]["nodeName"])

    thread = threading.Thread(target=lose_worker_1, daemon=True)
    thread.start()
    result = runs.run(
        "-N", "3", "--max-restarts", "2", "--node-grace", "1s", "--logs", "none", seconds=3600
    )
    thread.join()
    assert result.code == 1, result.err
    assert "restarting" not in result.err  # the line comes once the new plan has its hosts
    last = result.err.splitlines()[-1]
    assert last == (
        "simpletfjob: error: -N 3 asks for more hosts than are eligible "
        "(3 nodes: 2 eligible, 1 NotReady); 2 eligible hosts fit 2 tasks at 1 per host; "
        "for 3 tasks, give -N 1 --tasks-per-host 3"
    ), result.err
    assert runs.jobs() == {}  # the old run was deleted before the plan


def test_a_pod_that_a_node_refuses_fails_the_run_naming_the_node_and_why(
    runs: Runs, kube: ControlPlane
) -> None:
    full = sorted(runs.kubelet.nodes)[1]  # a pod there takes its 8 CPUs
    body = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hog"},
        "spec": {"nodeName": full, "restartPolicy": "Never", "containers": [{
            "name": "main", "image": "python", "command": ["python", "-c", "import time; time.sleep(600)"],
            "resources": {"requests": {"cpu": "8"}},
        }]},
    }  # fmt: skip
    kube.create(f"/api/v1/namespaces/{runs.ns}/pods", body)
    wait_for(
        lambda: (
            kube.admin.get(f"/api/v1/namespaces/{runs.ns}/pods/hog").get("status", {}).get("phase")
            == "Running"
        ),
        timeout=30,
        what="the hog running",
    )
    # --no-usage: the plan's fit does not see the hog, as a pod the plan could not know of
    # (one bound after it) would not be seen; the kubelet refuses what does not fit.
    result = runs.run("--logs", "none", "--no-usage", seconds=3600)
    assert result.code == 1, result.err
    last = result.err.splitlines()[-1]
    assert re.fullmatch(
        rf"simpletfjob: error: run 'rt' failed: (ps|worker)-\d "
        rf"refused by node {full}: OutOfcpu",
        last,
    ), result.err


def start_run(runs: Runs, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [console_script(), "run", *runs.args(seconds=3600), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_an_interrupt_leaves_the_run_running_and_says_how_to_wait_or_delete(runs: Runs) -> None:
    proc = start_run(runs, "-N", "2", "--psn", "0")
    try:
        wait_for(lambda: runs.running("worker-0"), timeout=60, what="worker-0 running")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert err.splitlines()[-1] == (
        f"simpletfjob: interrupted: run 'rt' is left running in namespace {runs.ns}; follow "
        f"it with simpletfjob wait rt -n {runs.ns}, or remove it with simpletfjob delete rt "
        f"-n {runs.ns}"
    )
    jobs = runs.jobs()
    assert set(jobs) == {"rt-worker-0", "rt-worker-1"}
    assert not any(j["metadata"].get("deletionTimestamp") for j in jobs.values())
    assert runs.running("worker-0") is not None


def test_on_interrupt_delete_deletes_the_run(runs: Runs) -> None:
    proc = start_run(runs, "-N", "2", "--psn", "0", "--on-interrupt", "delete")
    try:
        wait_for(lambda: runs.running("worker-0"), timeout=60, what="worker-0 running")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    assert err.splitlines()[-1] == (
        f"simpletfjob: interrupted: run 'rt' deleted (--on-interrupt delete): 2 Jobs in "
        f"namespace {runs.ns}; none of its Jobs and Services is left (the garbage collector "
        "stops their pods)"
    )
    assert runs.jobs() == {}  # as the line said, when it said it


def test_deadline_stops_every_task_and_status_wait_and_run_say_deadline_exceeded(
    runs: Runs,
) -> None:
    result = runs.run("--deadline", "3s", "--max-restarts", "2", "--logs", "none", seconds=3600)
    assert result.code == 1, result.err
    assert "restarting" not in result.err  # a deadline is not a failure a restart can help
    assert re.fullmatch(
        r"simpletfjob: error: run 'rt' failed: \w+-\d Failed: DeadlineExceeded",
        result.err.splitlines()[-1],
    ), result.err
    jobs = runs.jobs()
    assert {j["spec"]["activeDeadlineSeconds"] for j in jobs.values()} == {3}
    # The ps too: every Job stops, none is left running for the cleanup to delete.
    wait_for(
        lambda: all(
            any(c["type"] == "Failed" for c in j.get("status", {}).get("conditions") or [])
            for j in runs.jobs().values()
        ),
        timeout=30,
        what="every Job failed",
    )
    status = runs.cli("status", "rt", "--kubeconfig", runs.kubeconfig, "-o", "json")
    reasons = {t["task"]: t["reason"] for t in json.loads(status.out)["tasks"]}
    assert set(reasons.values()) == {"DeadlineExceeded"}, reasons
    waited = runs.cli("wait", "rt", "--kubeconfig", runs.kubeconfig, "--timeout", "30s")
    assert waited.code == 1
    assert waited.err.splitlines()[-1].endswith("Failed: DeadlineExceeded"), waited.err


def test_the_workers_that_end_just_after_worker_0_keep_their_jobs_and_logs(runs: Runs) -> None:
    """MultiWorkerMirroredStrategy (no ps): every worker ends a moment after worker 0, whose
    success decides the run. The cleanup gives them their grace: none is deleted."""
    runs.script.write_text(
        "import json, os, sys, time\n"
        "task = json.loads(os.environ['TF_CONFIG'])['task']\n"
        "name = f\"{task['type']}-{task['index']}\"\n"
        "print(name, 'started', flush=True)\n"
        "time.sleep(1 if name == 'worker-0' else 1.5)\n"
        "print(name, 'done', flush=True)\n"
    )
    result = runs.run("--psn", "0", "--logs", "all")
    assert result.code == 0, result.err
    assert not [line for line in result.err.splitlines() if line.endswith(" deleted")], result.err
    assert result.err.splitlines()[-1] == "run rt succeeded: worker-0 Succeeded"
    jobs = runs.jobs()
    assert set(jobs) == {"rt-worker-0", "rt-worker-1", "rt-worker-2"}
    assert all(job["status"].get("succeeded") == 1 for job in jobs.values()), jobs
    lines = result.out.splitlines()
    for worker in ("worker-0", "worker-1", "worker-2"):
        assert f"{worker} | {worker} done" in lines, result.out


RESOLVING = """\
import json, os, socket, sys, time
config = json.loads(os.environ["TF_CONFIG"])
peer = config["cluster"]["worker"][0].rsplit(":", 1)[0]
print("resolving", peer, flush=True)
while True:
    try:
        socket.getaddrinfo(peer, 2222)
        break
    except socket.gaierror:
        if sys.argv[2] == "fail":
            raise
        time.sleep(0.5)
"""


def resolving(runs: Runs, mode: str) -> tuple[Any, str]:
    """A run whose workers resolve worker 0's host, by its node's name (--address name): the
    stand-in's node names resolve nowhere. `fail`: a worker gives up with the resolver's
    words in its log; `retry`: it tries again, and the run goes on until --timeout."""
    runs.script.write_text(RESOLVING)
    result = runs.run(
        "--psn", "0", "--address", "name", "--logs", "none", "--timeout", "8s", mode=mode
    )
    nodes = ", ".join(sorted(runs.kubelet.nodes))
    return result, f"its tasks reach each other at their nodes' names ({nodes})"


def test_a_task_whose_log_says_a_node_name_did_not_resolve_is_told_to_take_the_ip(
    runs: Runs,
) -> None:
    result, names = resolving(runs, "fail")
    assert result.code == 1, result.err
    said = [line for line in result.err.splitlines() if "a name did not resolve" in line]
    assert said and re.fullmatch(
        rf"worker-\d: its log says a name did not resolve; {re.escape(names)}, which their "
        r"pods may not resolve: --address internal-ip gives them the nodes' InternalIP",
        said[0],
    ), result.err


def test_tasks_that_wait_for_a_node_name_to_resolve_time_out_saying_so(runs: Runs) -> None:
    result, names = resolving(runs, "retry")
    assert result.code == 3, result.err
    assert result.err.splitlines()[-1] == (
        f"simpletfjob: error: run 'rt' did not end within 8s (Running); {names}: where "
        "their pods cannot resolve those, they wait for each other until stopped; "
        "--address internal-ip gives them the nodes' InternalIP; it is left as it is"
    ), result.err


def test_cleanup_after_removes_the_parameter_servers_once_the_chief_is_done(runs: Runs) -> None:
    applied = runs.cli(
        "apply", *runs.args(seconds=1), "-N", "3", "--chief", "--cleanup-after", "2s"
    )
    assert applied.code == 0, applied.err
    jobs = runs.jobs()
    chief = jobs["rt-chief-0"]
    assert chief["spec"]["ttlSecondsAfterFinished"] == 2
    for name, job in jobs.items():
        if name != "rt-chief-0":
            [owner] = job["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"], owner["uid"]) == (
                "Job", "rt-chief-0", chief["metadata"]["uid"],
            )  # fmt: skip
    assert any(n.startswith("rt-ps-") for n in jobs)
    # No client runs: the chief finishes, the TTL controller deletes it after 2s, and the
    # garbage collector its dependents, the parameter server that would never end among them.
    wait_for(lambda: not runs.jobs() or None, timeout=90, what="the whole run gone")
    status = runs.cli("status", "rt", "--kubeconfig", runs.kubeconfig)
    assert status.code == 1
    assert "no run" in status.err.lower(), status.err


def test_cleanup_after_is_refused_under_all_workers(runs: Runs) -> None:
    result = runs.cli(
        "run", *runs.args(), "--cleanup-after", "1h", "--success-policy", "all-workers"
    )
    assert_one_line_error(result, 2, contains=["--cleanup-after", "all-workers"])
    assert runs.jobs() == {}


def test_a_failure_whose_pod_the_job_controller_deleted_is_told_once(
    cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """At the backoff limit the Job controller deletes the failing task's pod (OnFailure), while
    `run` follows that task's log. The failure is told once, with the lines wait kept: no
    follower's line that its logs went with its pod, and no stream of it said unread."""
    nodes, _ = stand_in_nodes("rf", 3)
    template = write(tmp_path / "fl.yaml", FAILING)
    kubeconfig = str(kube.kubeconfig(tmp_path / "kc", namespace=namespace))
    with Kubelet(kube, nodes, tmp_path / "kubelet"):
        result = cli(
            "run", str(template), "--nodes", ",".join(node.name for node in nodes),
            "--kubeconfig", kubeconfig, "--set", "lines=3", "--set", "fail=['worker-1']",
            "--set", "restart_policy=OnFailure", "--set", "backoff=1", "--set", "widgets=0",
            "--set", "sleep=0", "--success-policy", "all-workers", "--logs", "worker-1",
            "--timeout", "90s",
        )  # fmt: skip
    assert result.code == 1, result.err
    lines = result.err.splitlines()
    assert lines[-1].startswith("simpletfjob: error: run 'fl' failed: worker-1 Failed: "), lines
    told = [line for line in lines if line.startswith("worker-1: its pod ")]
    assert len(told) == 1, result.err
    assert re.match(
        r"worker-1: its pod is (gone|being deleted); the last \d+ lines of its container when "
        r"it crashed, kept by wait \(pod fl-worker-1-",
        told[0],
    ), result.err
    assert "went with it" not in result.err
    assert "not found" not in result.err
    assert "could not be read" not in result.err
    assert not [line for line in lines if line.startswith(("logs: ", "worker-1: no pod yet"))]
    # the follower printed its lines as they came
    assert "worker-1 | worker-1 giving up" in result.out.splitlines(), result.out
