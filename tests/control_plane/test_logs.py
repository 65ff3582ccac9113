"""`simpletfjob logs` on the real control plane, with the kubelet stand-in running the run's pods.

The template's container is a small Python program that reads its TF_CONFIG and prints
lines, so what `logs` shows is what the pods really wrote, through pods/log.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simpletfjob.kube.connection import Settings, connect
from simpletfjob.kube.podlog import Again, follow_log
from simpletfjob.runs.logsources import END, LogRequest, Merger, Source
from tests.conftest import Result, assert_one_line_error, console_script, write
from tests.support.cluster import wait_for
from tests.support.control_plane import ControlPlane
from tests.support.kubelet import Kubelet
from tests.support.logruns import prefixed
from tests.support.runs import docs_rbac
from tests.support.scenes import stand_in_nodes
from tests.support.templates import LOGGED as TEMPLATE


class LogsRun:
    """A run of the template on the kubelet's three nodes, and the commands a user runs on it."""

    def __init__(self, cli: Any, kube: ControlPlane, kubelet: Kubelet, ns: str, tmp: Path) -> None:
        self.cli, self.kube, self.kubelet, self.ns, self.tmp = cli, kube, kubelet, ns, tmp
        self.template = write(tmp / "lg.yaml", TEMPLATE)
        self.kubeconfig = str(kube.kubeconfig(tmp / "kc", namespace=ns))
        (tmp / "markers").mkdir()

    def apply(
        self, *, lines: int = 15, crash: tuple[str, ...] = (), restart: str = "Never"
    ) -> None:
        result = self.cli(
            "apply", str(self.template), "--nodes", ",".join(self.kubelet.nodes),
            "--kubeconfig", self.kubeconfig,
            "--set", f"lines={lines}", "--set", f"crash={list(crash)!r}",
            "--set", f"restart_policy={restart}", "--set", f"backoff={3 if crash else 0}",
            "--set", f"marker={str(self.tmp / 'markers')!r}",
        )  # fmt: skip
        assert result.code == 0, result.err

    def logs(self, *args: str) -> Result:
        return self.cli("logs", "lg", "--kubeconfig", self.kubeconfig, *args)  # type: ignore[no-any-return]

    def job_done(self, name: str) -> bool:
        job = self.kube.admin.get(f"/apis/batch/v1/namespaces/{self.ns}/jobs/{name}")
        return any(
            c["type"] in ("Complete", "Failed") and c["status"] == "True"
            for c in job.get("status", {}).get("conditions") or []
        )


@pytest.fixture
def run(cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[LogsRun]:
    nodes, _ = stand_in_nodes("lg", 3)
    with Kubelet(kube, nodes, tmp_path / "kubelet") as kubelet:
        yield LogsRun(cli, kube, kubelet, namespace, tmp_path)


def test_logs_of_every_task_are_prefixed_and_cut_to_ten_lines_each(run: LogsRun) -> None:
    run.apply()
    wait_for(lambda: run.job_done("lg-worker-0") and run.job_done("lg-worker-1"), 60, "workers")
    wait_for(lambda: "ps-0 line 14" in run.logs("ps-0").out, 30, "the ps to print")
    result = run.logs()
    assert result.code == 0, result.err
    by_task = prefixed(result.out)
    assert set(by_task) == {"ps-0", "worker-0", "worker-1"}
    for task, lines in by_task.items():
        assert lines == [f"{task} line {i}" for i in range(5, 15)]
    # padded as stern pads: every prefix as wide as the longest task name
    assert all(line.index("|") == len("worker-0 ") for line in result.out.splitlines())


def test_one_task_shows_all_its_lines_without_a_prefix(run: LogsRun) -> None:
    run.apply()
    wait_for(lambda: run.job_done("lg-worker-1"), 60, "worker 1")
    result = run.logs("worker-1")
    assert result.code == 0, result.err
    assert result.out.splitlines() == [f"worker-1 line {i}" for i in range(15)]
    tail = run.logs("worker-1", "--tail", "2", "--prefix")
    assert tail.out.splitlines() == ["worker-1 | worker-1 line 13", "worker-1 | worker-1 line 14"]
    stamped = run.logs("worker-1", "--tail", "1", "--timestamps").out.split(" ", 1)
    assert stamped[0].endswith("Z") and stamped[1] == "worker-1 line 14\n"


def test_role_selects_tasks_and_an_unknown_task_is_a_usage_error(run: LogsRun) -> None:
    run.apply(lines=3)
    wait_for(lambda: run.job_done("lg-worker-0") and run.job_done("lg-worker-1"), 60, "workers")
    result = run.logs("--role", "worker")
    assert set(prefixed(result.out)) == {"worker-0", "worker-1"}
    assert_one_line_error(run.logs("worker-7"), 2, contains=["no task 'worker-7'", "worker-0"])


def test_a_task_whose_job_the_cleanup_deleted_is_said_so_not_unknown(run: LogsRun) -> None:
    """The run's Jobs still name the ps that wait's cleanup deleted (their TF_CONFIG)."""
    run.apply(lines=3)
    waited = run.cli("wait", "lg", "--kubeconfig", run.kubeconfig, "--timeout", "60s")
    assert waited.code == 0, waited.err
    assert "job.batch/lg-ps-0 deleted" in waited.err.splitlines()
    gone = "ps-0's Job was deleted by the cleanup after the verdict; its logs went with it"
    assert_one_line_error(run.logs("ps-0"), 1, f"^simpletfjob: error: {gone}$")
    both = run.logs("ps-0", "worker-0")
    assert both.code == 0, both.err
    assert prefixed(both.out) == {"worker-0": [f"worker-0 line {i}" for i in range(3)]}
    assert both.err.splitlines() == [gone]
    # a task no Job names is still one the run does not have
    assert_one_line_error(run.logs("ps-1"), 2, contains=["no task 'ps-1'"])


def test_follow_of_a_finished_run_says_a_pod_that_is_gone_is_gone(run: LogsRun) -> None:
    run.apply(lines=3)
    wait_for(lambda: run.job_done("lg-worker-0") and run.job_done("lg-worker-1"), 60, "workers")
    (pod,) = run.kube.pods(run.ns, "job-name=lg-worker-1")
    run.kube.admin.delete(f"/api/v1/namespaces/{run.ns}/pods/{pod['metadata']['name']}")
    wait_for(lambda: not run.kube.pods(run.ns, "job-name=lg-worker-1"), 30, "the pod gone")
    followed = run.logs("-f", "--role", "worker")
    assert followed.code == 0, followed.err
    lines = followed.err.splitlines()
    assert "worker-1: its pod is gone; its logs went with it" in lines, followed.err
    assert not [line for line in lines if line.endswith("no pod yet")], followed.err


def test_previous_shows_the_crashed_container_of_a_task_that_restarted(run: LogsRun) -> None:
    run.apply(lines=2, crash=("worker-1",), restart="OnFailure")
    wait_for(lambda: run.job_done("lg-worker-1"), 60, "worker 1")
    now = run.logs("worker-1")
    assert now.out.splitlines() == ["worker-1 line 0", "worker-1 line 1"]
    previous = run.logs("worker-1", "--previous")
    assert previous.code == 0, previous.err
    assert previous.out.splitlines() == ["worker-1 line 0", "worker-1 line 1", "worker-1 crashing"]


def test_follow_streams_every_task_across_a_restart_and_exits_as_wait_does(
    run: LogsRun, cli: Any
) -> None:
    nodes = list(run.kubelet.nodes.values())
    for node in nodes:
        node.beating = False  # nothing starts until the follower is following
    run.apply(lines=3, crash=("worker-0",), restart="OnFailure")
    done: list[Result] = []
    follower = threading.Thread(target=lambda: done.append(run.logs("-f", "--role", "worker")))
    follower.start()
    time.sleep(1.0)
    for node in nodes:
        node.beating = True
    follower.join(timeout=90)
    assert done, "logs -f did not end"
    result = done[0]
    assert result.code == 0, result.err
    by_task = prefixed(result.out)
    # both instances of worker 0: the one that crashed, then the one that finished, whether
    # the follower saw the first one run, or only once it had been started again
    assert by_task["worker-0"] == [
        *(f"worker-0 line {i}" for i in range(3)),
        "worker-0 crashing",
        *(f"worker-0 line {i}" for i in range(3)),
    ]
    assert by_task["worker-1"] == [f"worker-1 line {i}" for i in range(3)]
    assert "run lg succeeded" in result.err


def test_follow_picks_up_a_task_that_starts_later_and_ends_despite_a_running_ps(
    run: LogsRun, kube: ControlPlane
) -> None:
    lost = next(iter(run.kubelet.nodes))  # ps-0's node: its pod waits until the node is back
    run.kubelet.nodes[lost].beating = False
    run.apply(lines=2)
    done: list[Result] = []
    follower = threading.Thread(target=lambda: done.append(run.logs("-f")))
    follower.start()
    follower.join(timeout=60)
    assert done, "logs -f did not end"
    result = done[0]
    assert result.code == 0, result.err
    assert "ps-0: waiting to start: ContainerCreating" in result.err.splitlines()
    assert prefixed(result.out)["worker-0"] == ["worker-0 line 0", "worker-0 line 1"]


def test_a_user_who_may_not_read_logs_gets_the_rbac_line(
    run: LogsRun, kube: ControlPlane, cli: Any
) -> None:
    run.apply(lines=1)
    wait_for(lambda: run.job_done("lg-worker-0"), 60, "worker 0")
    kube.grant("alice", ["list", "watch", "get"], ["jobs"], run.ns, api_group="batch")
    kube.grant("alice", ["list", "watch", "get"], ["pods"], run.ns)
    kubeconfig = kube.kubeconfig(run.tmp / "alice", "alice", run.ns)
    result = cli("logs", "lg", "worker-0", "--kubeconfig", str(kubeconfig))
    assert_one_line_error(
        result, 1, contains=["user 'alice' cannot get pods/log in namespace", "'pods/log'"]
    )


def test_the_docs_role_is_enough_for_logs_and_logs_f(
    run: LogsRun, kube: ControlPlane, cli: Any
) -> None:
    """A user given only the Role that docs/rbac.md gives reads and follows a run's logs."""
    role = docs_rbac("Role")
    for rule in role["rules"]:
        (group,) = rule["apiGroups"]
        kube.grant("carol", rule["verbs"], rule["resources"], run.ns, api_group=group)
    kubeconfig = str(kube.kubeconfig(run.tmp / "carol", "carol", run.ns))
    run.apply(lines=2)
    wait_for(lambda: run.job_done("lg-worker-0"), 60, "worker 0")
    shown = cli("logs", "lg", "worker-0", "--kubeconfig", kubeconfig)
    assert shown.code == 0, shown.err
    assert shown.out.splitlines() == ["worker-0 line 0", "worker-0 line 1"]
    followed = cli("logs", "lg", "--role", "worker", "-f", "--kubeconfig", kubeconfig)
    assert followed.code == 0, followed.err
    assert prefixed(followed.out)["worker-0"] == ["worker-0 line 0", "worker-0 line 1"]


def test_an_interrupt_ends_logs_f_quietly_with_130(run: LogsRun) -> None:
    for node in run.kubelet.nodes.values():
        node.beating = False  # no pod starts: the run goes on until interrupted
    run.apply(lines=1)
    proc = subprocess.Popen(
        [console_script(), "logs", "lg", "-f", "--kubeconfig", run.kubeconfig],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    first = proc.stderr.readline()  # a task with nothing to show yet: following has begun
    assert "waiting to start" in first or "no pod yet" in first, first
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "interrupted" not in err and "Traceback" not in err, err


def test_a_log_read_on_after_its_end_ends_when_its_pod_is_gone(run: LogsRun) -> None:
    """A followed log whose answer ended whole is read on once more (kube/podlog.py); when its
    pod was deleted meanwhile (the Job controller at a backoff limit), that is its end, not a
    log that could not be read."""
    run.apply(lines=3)
    wait_for(lambda: run.job_done("lg-worker-0"), 60, "worker 0")
    (pod,) = run.kube.pods(run.ns, "job-name=lg-worker-0")
    name = pod["metadata"]["name"]
    asked: list[bool] = []

    def again(broke: bool) -> Again:
        asked.append(broke)
        run.kube.admin.delete(f"/api/v1/namespaces/{run.ns}/pods/{name}")
        wait_for(lambda: not run.kube.pods(run.ns, "job-name=lg-worker-0"), 30, "the pod gone")
        return Again(previous=False, follow=False)

    conn = connect(Settings(kubeconfig=run.kubeconfig))
    query = [("container", "tf"), ("follow", "true")]
    batches = follow_log(conn, name, query, keep_stamps=False, again=again)
    read = [line for batch in batches for line in batch]
    assert read == [f"worker-0 line {i}\n".encode() for i in range(3)]
    assert asked == [False]


def test_a_pod_deleted_before_its_log_is_read_is_said_gone_not_unread(run: LogsRun) -> None:
    """A stream opened for a pod that was deleted since the pods were read (404) is the task's
    pod gone, as for a pod gone when listed: noted once, or not at all where the caller tells
    it itself (`run`), and no stream that could not be read."""
    conn = connect(Settings(kubeconfig=run.kubeconfig))
    source = Source("worker-0", "lg-worker-0-gone0", "tf", "worker-0")
    for podless, said in (
        (True, ["worker-0: its pod is gone; its logs went with it"]),
        (False, []),
    ):
        notes: list[str] = []
        merger = Merger(conn, LogRequest(follow=True), notes.append)
        merger.podless = podless
        merger.start(source)
        while merger.busy():
            item = merger.next(1.0)
            assert item is None or item[1] is END, item
        assert notes == said
        assert merger.failed == []
