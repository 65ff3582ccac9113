"""Why a run failed, said by `wait` and `status` (the failing task's last log lines and the
Warning events of its Job and pods), a stuck task's reason, the times of tasks and runs, and
`status --watch`: on the real control plane, with the kubelet stand-in running the pods."""

from __future__ import annotations

import errno
import json
import os
import re
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import Result, bundle_files, write
from tests.support.cluster import wait_for
from tests.support.control_plane import ControlPlane
from tests.support.kubelet import Kubelet
from tests.support.scenes import stand_in_nodes
from tests.support.templates import FAILING as TEMPLATE

# the Job controller may say it more than once
BACKOFF = r"  BackoffLimitExceeded \(x\d+\) job/fl-worker-1: Job has reached the specified backoff"


class FailRun:
    """A run of the template on the kubelet's three nodes, and the commands a user runs on it."""

    def __init__(self, cli: Any, kube: ControlPlane, kubelet: Kubelet, ns: str, tmp: Path) -> None:
        self.cli, self.kube, self.kubelet, self.ns, self.tmp = cli, kube, kubelet, ns, tmp
        self.template = write(tmp / "fl.yaml", TEMPLATE)
        self.kubeconfig = str(kube.kubeconfig(tmp / "kc", namespace=ns))

    def apply(
        self,
        *,
        lines: int = 30,
        fail: tuple[str, ...] = (),
        restart: str = "Never",
        backoff: int = 0,
        widgets: int = 0,
        sleep: float = 0,
    ) -> None:
        result = self.cli(
            "apply", str(self.template), "--nodes", ",".join(self.kubelet.nodes),
            "--kubeconfig", self.kubeconfig,
            "--set", f"lines={lines}", "--set", f"fail={list(fail)!r}",
            "--set", f"restart_policy={restart}", "--set", f"backoff={backoff}",
            "--set", f"widgets={widgets}", "--set", f"sleep={sleep}",
            "--success-policy", "all-workers",
        )  # fmt: skip
        assert result.code == 0, result.err

    def run(self, command: str, *args: str) -> Result:
        return self.cli(command, "fl", "--kubeconfig", self.kubeconfig, *args)  # type: ignore[no-any-return]

    def pods(self, job: str) -> list[dict[str, Any]]:
        return self.kube.pods(self.ns, f"job-name={job}")


@pytest.fixture
def run(cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[FailRun]:
    nodes, _ = stand_in_nodes("fl", 3)
    with Kubelet(kube, nodes, tmp_path / "kubelet") as kubelet:
        yield FailRun(cli, kube, kubelet, namespace, tmp_path)


def after_verdict(err: str) -> list[str]:
    """The lines wait prints once the failed task's change line is out, the error line last.

    (Its pod's failure comes first, `worker-1 Failed (exit 1)`, then its Job's.)
    """
    lines = err.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("worker-1 Failed: "))
    return lines[start + 1 :]


def test_wait_on_failure_shows_the_last_lines_and_the_events_then_the_verdict_last(
    run: FailRun,
) -> None:
    run.apply(fail=("worker-1",))
    result = run.run("wait", "--timeout", "90s")
    assert result.code == 1, result.err
    assert not result.out
    lines = result.err.splitlines()
    assert lines[-1] == "simpletfjob: error: run 'fl' failed: worker-1 Failed: Error (exit 1)"
    shown = [line for line in lines if line.startswith("worker-1 | ")]
    # the last 20 of 30 lines, and the line it gave up with
    assert shown == [
        *(f"worker-1 | worker-1 line {i}" for i in range(11, 30)),
        "worker-1 | worker-1 giving up",
    ]
    told = after_verdict(result.err)
    assert told[0].startswith("worker-1: the last 20 lines of its log (pod fl-worker-1-")
    events = told.index("worker-1: Warning events of its Job and pods:")
    assert re.match(BACKOFF, told[events + 1]), told
    # fewer lines when asked, none with 0
    again = run.run("wait", "--tail-on-failure", "2")
    assert [line for line in again.err.splitlines() if " | " in line] == [
        "worker-1 | worker-1 line 29",
        "worker-1 | worker-1 giving up",
    ]
    quiet = run.run("wait", "--tail-on-failure", "0")
    assert not [line for line in quiet.err.splitlines() if " | " in line]
    assert "BackoffLimitExceeded" in quiet.err
    assert quiet.code == 1


def test_status_of_a_failed_run_explains_it_on_stderr(run: FailRun) -> None:
    run.apply(lines=3, fail=("worker-1",))
    wait_for(lambda: run.run("status", "-o", "json").out.count('"Failed"') >= 2, 60, "the fail")
    # The Job controller records its event apart from the Job's condition, maybe a moment later.
    events = f"/api/v1/namespaces/{run.ns}/events"
    wait_for(
        lambda: [e for e in run.kube.admin.get(events)["items"] if e.get("reason") == "BackoffLimitExceeded"],
        30, "the Job controller's BackoffLimitExceeded event",
    )  # fmt: skip
    result = run.run("status")
    assert result.code == 0, result.err
    assert result.out.startswith("run fl in ")
    assert [line for line in result.err.splitlines() if " | " in line] == [
        *(f"worker-1 | worker-1 line {i}" for i in range(3)),
        "worker-1 | worker-1 giving up",
    ]
    assert re.search(BACKOFF, result.err), result.err
    # -o json keeps stderr for errors only
    assert not run.run("status", "-o", "json").err


def test_a_task_refused_by_its_node_shows_the_refusal(run: FailRun) -> None:
    run.apply(widgets=1)  # no node has any example.com/widget
    result = run.run("wait", "--timeout", "60s")
    assert result.code == 1, result.err
    last = result.err.splitlines()[-1]
    assert last.startswith("simpletfjob: error: run 'fl' failed: "), last
    task = last.split("failed: ", 1)[1].split()[0]
    assert f"{task}: no log: its container never started" in result.err
    refusals = [
        line for line in result.err.splitlines() if "OutOfexample.com/widget (x1) pod/" in line
    ]
    assert refusals, result.err


def test_an_on_failure_task_whose_pod_is_deleted_shows_the_lines_wait_kept(
    run: FailRun, cli: Any
) -> None:
    run.apply(lines=25, fail=("worker-1",), restart="OnFailure", backoff=2, sleep=2)
    result = run.run("wait", "--timeout", "90s")
    assert result.code == 1, result.err
    # the Job controller deleted the pod once the backoff limit was reached
    wait_for(lambda: not run.pods("fl-worker-1"), 30, "worker 1's pod to go")
    told = after_verdict(result.err)
    # the Job controller deletes the pod before it marks the Job failed: gone, or going
    assert any(
        re.match(
            r"worker-1: its pod is (gone|being deleted); the last 20 lines of its container "
            r"when it crashed, kept by wait \(pod fl-worker-1-",
            line,
        )
        for line in told
    ), result.err
    assert [line for line in told if line.startswith("worker-1 | ")] == [
        *(f"worker-1 | worker-1 line {i}" for i in range(6, 25)),
        "worker-1 | worker-1 giving up",
    ]
    # each back-off the stand-in records as an event of its own: one line, the counts summed
    backoffs = [line for line in told if line.startswith("  BackOff ")]
    assert len(backoffs) == 1, result.err
    assert re.match(r"  BackOff \(x[2-9]\) pod/fl-worker-1-\w{5}: Back-off restarting", backoffs[0])
    assert result.err.splitlines()[-1].startswith("simpletfjob: error: run 'fl' failed: worker-1")
    # a wait that starts after the pod is gone says so, and shows the events
    later = run.run("wait")
    assert later.code == 1
    assert "worker-1: its pod is gone; its logs went with it" in later.err.splitlines()
    assert re.search(BACKOFF, later.err), later.err
    # its restarts in place went with its pod too: status shows no count rather than a wrong one
    row = next(x for x in run.run("status").out.splitlines() if x.startswith("worker-1 "))
    assert row.split()[2:4] == ["Failed", "-"]
    tasks = json.loads(run.run("status", "-o", "json").out)["tasks"]
    assert next(t for t in tasks if t["task"] == "worker-1")["restarts"] is None


def test_the_events_of_an_earlier_jobs_pods_of_the_same_name_are_not_the_tasks(
    run: FailRun, kube: ControlPlane
) -> None:
    """`run` restarts a run under the same Job names, and the Job controller names their pods
    alike (JOB-xxxxx): an earlier attempt's pod, gone, is not this attempt's."""
    kube.admin.post(
        f"/api/v1/namespaces/{run.ns}/events",
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "fl-worker-1-old00.backoff"},
            "involvedObject": {
                "apiVersion": "v1", "kind": "Pod", "name": "fl-worker-1-old00",
                "namespace": run.ns, "uid": "an-earlier-attempts-pod",
            },
            "reason": "BackOff",
            "message": "Back-off restarting failed container",
            "type": "Warning",
            "count": 3,
            "firstTimestamp": "2020-01-01T00:00:00Z",
            "lastTimestamp": "2020-01-01T00:01:00Z",
            "source": {"component": "kubelet", "host": "h1"},
        },
    )  # fmt: skip
    run.apply(lines=2, fail=("worker-1",))
    result = run.run("wait", "--timeout", "90s")
    assert result.code == 1, result.err
    told = after_verdict(result.err)
    assert any(re.match(BACKOFF, line) for line in told), result.err
    assert "fl-worker-1-old00" not in result.err


def test_events_that_may_not_be_read_leave_the_verdict_as_it_is(
    run: FailRun, kube: ControlPlane, cli: Any
) -> None:
    run.apply(lines=2, fail=("worker-1",))
    kube.grant("alice", ["list", "watch", "get", "delete"], ["jobs"], run.ns, api_group="batch")
    kube.grant("alice", ["list", "watch", "get"], ["pods"], run.ns)
    kube.grant("alice", ["list", "delete"], ["services"], run.ns)
    kubeconfig = kube.kubeconfig(run.tmp / "alice", "alice", run.ns)
    result = cli("wait", "fl", "--kubeconfig", str(kubeconfig), "--timeout", "60s")
    assert result.code == 1, result.err
    lines = result.err.splitlines()
    assert lines[-1] == "simpletfjob: error: run 'fl' failed: worker-1 Failed: Error (exit 1)"
    assert any(
        line.startswith("worker-1: its log could not be read: ") and "pods/log" in line
        for line in lines
    ), result.err
    assert any(
        line.startswith("worker-1: the events could not be read: ") and "events" in line
        for line in lines
    ), result.err


def test_a_stuck_task_gives_its_latest_warning_event_as_reason(
    kube: ControlPlane, namespace: str, tmp_path: Path, cli: Any
) -> None:
    """No kubelet: the pods stay Pending on their nodes, and an event says why one is stuck."""
    template = write(tmp_path / "st.yaml", TEMPLATE.replace("fl-", "st-"))
    kubeconfig = str(kube.kubeconfig(tmp_path / "kc", namespace=namespace))
    applied = cli(
        "apply", str(template), "--nodes", "h1,h2,h3", "--kubeconfig", kubeconfig,
        "--set", "lines=1", "--set", "fail=[]", "--set", "restart_policy=Never", "--set", "backoff=0",
        "--set", "widgets=0", "--set", "sleep=0",
    )  # fmt: skip
    assert applied.code == 0, applied.err
    pods = wait_for(lambda: len(kube.pods(namespace, "job-name=st-worker-0")) == 1 and
                    kube.pods(namespace, "job-name=st-worker-0"), 30, "worker 0's pod")  # fmt: skip
    pod = pods[0]
    kube.admin.post(
        f"/api/v1/namespaces/{namespace}/events",
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{pod['metadata']['name']}.mount"},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod["metadata"]["name"],
                "namespace": namespace,
                "uid": pod["metadata"]["uid"],
            },
            "reason": "FailedMount",
            "message": 'MountVolume.SetUp failed for volume "data": not found',
            "type": "Warning",
            "count": 3,
            "firstTimestamp": "2026-01-01T00:00:00Z",
            "lastTimestamp": "2026-01-01T00:01:00Z",
            "source": {"component": "kubelet", "host": "h1"},
        },
    )
    # a container that cannot pull its image says so itself
    wait_for(lambda: kube.pods(namespace, "job-name=st-worker-1"), 30, "worker 1's pod")
    worker1 = kube.pods(namespace, "job-name=st-worker-1")[0]["metadata"]["name"]
    kube.admin.merge_patch(
        f"/api/v1/namespaces/{namespace}/pods/{worker1}/status",
        {"status": {"containerStatuses": [{
            "name": "tf", "image": "python", "imageID": "", "ready": False, "restartCount": 0,
            "state": {"waiting": {"reason": "ErrImagePull", "message": "not found"}},
        }]}},
    )  # fmt: skip
    status = cli("status", "st", "--kubeconfig", kubeconfig, "-o", "json")
    assert status.code == 0, status.err
    reasons = {t["task"]: (t["state"], t["reason"]) for t in json.loads(status.out)["tasks"]}
    assert reasons["worker-0"] == ("Pending", "FailedMount")
    assert reasons["worker-1"] == ("Pending", "ErrImagePull")


def rfc3339(value: Any) -> datetime:
    assert isinstance(value, str) and value.endswith("Z"), value
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_status_json_gives_the_start_and_end_of_each_task_and_of_the_run(run: FailRun) -> None:
    run.apply(lines=1, sleep=1)
    waited = run.run("wait", "--timeout", "60s", "--cleanup", "none")
    assert waited.code == 0, waited.err
    data = json.loads(run.run("status", "-o", "json").out)
    workers = [t for t in data["tasks"] if t["role"] == "worker"]
    for task in workers:
        assert rfc3339(task["startTime"]) < rfc3339(task["completionTime"])
    ps = next(t for t in data["tasks"] if t["role"] == "ps")
    rfc3339(ps["startTime"])
    assert ps["completionTime"] is None  # it still runs
    assert rfc3339(data["startTime"]) == min(rfc3339(t["startTime"]) for t in data["tasks"])
    # all-workers: the run ended when its last worker did
    assert rfc3339(data["completionTime"]) == max(rfc3339(t["completionTime"]) for t in workers)
    head = run.run("status").out.splitlines()[0]
    assert f"; started {data['startTime']}, ended {data['completionTime']} (" in head


def test_status_watch_prints_a_row_whenever_a_task_changes_until_the_run_ends(
    run: FailRun,
) -> None:
    run.apply(lines=1, sleep=3)
    result = run.run("status", "-w")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].startswith("run fl in ")
    assert lines[1].split() == ["TASK", "NODE", "STATE", "RESTARTS", "AGE", "REASON"]
    later = [line.split() for line in lines[2 + 3 :]]
    # each change a row of its own, in the first table's columns, and no header again
    assert any(row[0] == "worker-0" and row[2] == "Succeeded" for row in later), result.out
    assert any(row[0] == "worker-1" and row[2] == "Running" for row in later), result.out
    assert "TASK" not in " ".join(lines[2:])
    # all-workers: the rule decided, not one worker
    assert result.err.splitlines()[-1] == "run fl succeeded: all 2 workers succeeded"


def test_status_watch_exits_1_when_the_run_fails_and_says_why(run: FailRun) -> None:
    run.apply(lines=1, fail=("worker-1",), sleep=1)
    done: list[Result] = []
    watcher = threading.Thread(target=lambda: done.append(run.run("status", "--watch")))
    watcher.start()
    watcher.join(timeout=90)
    assert done, "status --watch did not end"
    result = done[0]
    assert result.code == 1, result.err
    assert any(line.split()[:3:2] == ["worker-1", "Failed"] for line in result.out.splitlines()[2:])
    assert "worker-1 | worker-1 giving up" in result.err.splitlines()
    assert result.err.splitlines()[-1] == (
        "simpletfjob: error: run 'fl' failed: worker-1 Failed: Error (exit 1)"
    )


def test_status_watch_needs_a_run(run: FailRun) -> None:
    result = run.cli("status", "-w", "--kubeconfig", run.kubeconfig)
    assert result.code == 2 and "-w/--watch needs RUN" in result.err


def test_diagnose_on_failure_keeps_the_log_of_a_deleted_pod_and_writes_before_the_cleanup(
    run: FailRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Job controller deletes a failed OnFailure pod at its backoff limit: the bundle has
    the log wait kept; --cleanup all deletes the run only once the bundle is written; and a
    bundle that cannot be written is a warning, the verdict and the cleanup as they are."""
    run.apply(lines=25, fail=("worker-1",), restart="OnFailure", backoff=1, sleep=1)
    kept, unwritten, last = (run.tmp / name for name in ("kept", "unwritten", "last"))
    for directory in (kept, unwritten, last):
        directory.mkdir()
    result = run.run(
        "wait", "--timeout", "90s", "--cleanup", "none", "--diagnose-on-failure", str(kept)
    )
    assert result.code == 1, result.err
    (path,) = kept.iterdir()
    assert re.fullmatch(r"fl-diagnose-\d{8}T\d{6}Z\.tar\.gz", path.name), path
    # (Error (exit 1), or BackoffLimitExceeded once the pod is gone)
    verdict = result.err.splitlines()[-1]
    assert verdict.startswith("simpletfjob: error: run 'fl' failed: worker-1 Failed: "), verdict
    assert verdict.endswith(f"; bundle: {path}") and verdict.count("; bundle: ") == 1, verdict
    wait_for(lambda: not run.pods("fl-worker-1"), 30, "worker 1's pod to go")
    files = bundle_files(path)
    logs = [files.get(f"fl/tasks/worker-1.{n}", "").splitlines() for n in ("log", "previous.log")]
    assert [f"worker-1 line {i}" for i in range(25)] + ["worker-1 giving up"] in logs, files.keys()
    summary = files["fl/summary.txt"].splitlines()
    assert any(line.startswith("first failure: worker-1") for line in summary), summary

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patched:
        patched.setattr(os, "fsync", full)
        failed = run.run("wait", "--cleanup", "none", "--diagnose-on-failure", str(unwritten))
    assert failed.code == 1, failed.err
    lines = failed.err.splitlines()
    assert lines[-1].startswith("simpletfjob: error: run 'fl' failed: worker-1 Failed: ")
    assert "bundle" not in lines[-1], lines[-1]
    warnings = [line for line in lines if line.startswith("simpletfjob: warning: the bundle")]
    assert len(warnings) == 1 and "No space left on device" in warnings[0], failed.err
    assert list(unwritten.iterdir()) == []

    cleaned = run.run("wait", "--cleanup", "all", "--diagnose-on-failure", str(last))
    assert cleaned.code == 1, cleaned.err
    (path,) = last.iterdir()
    docs = list(yaml.safe_load_all(bundle_files(path)["fl/manifests.yaml"]))
    assert sorted(d["metadata"]["name"] for d in docs if d["kind"] == "Job") == [
        "fl-ps-0", "fl-worker-0", "fl-worker-1",
    ]  # fmt: skip
    assert run.run("status").code == 1  # deleted, after the bundle
