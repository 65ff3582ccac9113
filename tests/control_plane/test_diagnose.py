"""`simpletfjob diagnose RUN` on the real control plane, with the kubelet stand-in running a run
that failed: worker-1 raised (after printing its token), the ps crashed once and runs again
in place, worker-0 succeeded and its pod was deleted since. One run, read by every test."""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from simpletfjob.cli import main
from tests.conftest import assert_one_line_error, bundle_files, write
from tests.support.cluster import wait_for
from tests.support.control_plane import ControlPlane
from tests.support.kubelet import Kubelet
from tests.support.runs import docs_rbac
from tests.support.scenes import stand_in_nodes
from tests.support.templates import DIAGNOSED as TEMPLATE

TOKEN = "tok-3f9a1c77e2b4"
SCRIPT = """\
import json, os, pathlib, sys, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
name = f"{task['type']}-{task['index']}"
markers = pathlib.Path(sys.argv[1])
for i in range(30):
    print(name, "line", i, flush=True)
if task["type"] == "ps":
    if not (markers / "crashed").exists():
        (markers / "crashed").touch()
        print(name, "crashing", flush=True)
        sys.exit(3)
    time.sleep(3600)
if name == "worker-1":
    print("connecting with", os.environ["Api_Token"], flush=True)
    raise ValueError("bad batch at step 30")
"""


class Failed(NamedTuple):
    plane: ControlPlane
    ns: str
    kubeconfig: str
    nodes: list[str]


def _job_is(plane: ControlPlane, ns: str, job: str, condition: str) -> bool:
    found = plane.admin.get(f"/apis/batch/v1/namespaces/{ns}/jobs/{job}")
    conditions = found.get("status", {}).get("conditions") or []
    return any(c["type"] == condition and c["status"] == "True" for c in conditions)


def _ps_runs_again(plane: ControlPlane, ns: str) -> bool:
    """The ps runs again in place, and has printed its 30 lines (a loaded machine may start
    the program a while after the container: its log is empty until then)."""
    pods = plane.pods(ns, "job-name=dg-ps-0")
    statuses = [s for p in pods for s in p.get("status", {}).get("containerStatuses") or []]
    if not any(s.get("restartCount") == 1 and "running" in s.get("state", {}) for s in statuses):
        return False
    name = pods[0]["metadata"]["name"]
    log = plane.admin.get(f"/api/v1/namespaces/{ns}/pods/{name}/log", container="tf")
    return isinstance(log, str) and log.count("\n") >= 30


@pytest.fixture(scope="module")
def failed(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Failed]:
    tmp = tmp_path_factory.mktemp("diagnose")
    ns = control_plane.create_namespace()
    nodes, _ = stand_in_nodes("dg", 3)
    with Kubelet(control_plane, nodes, tmp / "kubelet") as kubelet:
        kubeconfig = str(control_plane.kubeconfig(tmp / "kc", namespace=ns))
        (tmp / "markers").mkdir()
        with pytest.raises(SystemExit) as applied:
            main([
                "apply", str(write(tmp / "dg.yaml", TEMPLATE)), "--nodes", ",".join(kubelet.nodes),
                "--kubeconfig", kubeconfig, "--network", "pod", "--success-policy", "all-workers",
                "--set", f"script={write(tmp / 'task.py', SCRIPT)}",
                "--set", f"markers={tmp / 'markers'}", "--set", f"token={TOKEN}",
            ])  # fmt: skip
        assert applied.value.code == 0
        plane = control_plane
        wait_for(lambda: _job_is(plane, ns, "dg-worker-1", "Failed"), 90, "worker-1 to fail")
        wait_for(lambda: _job_is(plane, ns, "dg-worker-0", "Complete"), 90, "worker-0 to end")
        wait_for(lambda: _ps_runs_again(plane, ns), 90, "the ps to run again, its lines out")
        (pod,) = plane.pods(ns, "job-name=dg-worker-0")
        plane.admin.delete(f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}")
        wait_for(lambda: not plane.pods(ns, "job-name=dg-worker-0"), 60, "worker-0's pod gone")
        yield Failed(plane, ns, kubeconfig, list(kubelet.nodes))


def test_a_failed_run_s_bundle_holds_every_part(failed: Failed, cli: Any, tmp_path: Path) -> None:
    result = cli("diagnose", "dg", "--kubeconfig", failed.kubeconfig, cwd=tmp_path)
    assert result.code == 0, result.err
    assert re.fullmatch(r"dg-diagnose-\d{8}T\d{6}Z\.tar\.gz\n", result.out), result.out
    files = bundle_files(tmp_path / result.out.strip())
    names = [name.removeprefix("dg/") for name in files]
    assert names[0] == "summary.txt", files["dg/summary.txt"]
    assert sorted(names) == sorted([
        "summary.txt", "status.json", "tasks/ps-0.log", "tasks/ps-0.previous.log",
        "tasks/worker-1.log", "events.txt", *(f"nodes/{n}.json" for n in failed.nodes),
        "manifests.yaml",
    ])  # fmt: skip
    status = cli("status", "dg", "-o", "json", "--kubeconfig", failed.kubeconfig)
    assert json.loads(files["dg/status.json"]) == json.loads(status.out)
    ps = files["dg/tasks/ps-0.log"].splitlines()
    assert ps == [f"ps-0 line {i}" for i in range(30)]  # the container that runs now
    assert files["dg/tasks/ps-0.previous.log"].splitlines()[-1] == "ps-0 crashing"
    worker = files["dg/tasks/worker-1.log"].splitlines()
    assert worker[:30] == [f"worker-1 line {i}" for i in range(30)]
    assert worker[-1] == "ValueError: bad batch at step 30"
    events = files["dg/events.txt"].splitlines()
    assert any(
        re.search(r" Warning BackoffLimitExceeded \(x\d+\) job/dg-worker-1: ", e) for e in events
    )
    assert any(re.search(r" pod/dg-worker-0-\w{5}: ", e) for e in events), events  # pod gone
    assert [e[:20] for e in events] == sorted(e[:20] for e in events)  # oldest first
    for node in failed.nodes:
        shown = json.loads(files[f"dg/nodes/{node}.json"])
        assert {c["type"]: c["status"] for c in shown["conditions"]}["Ready"] == "True"
        assert shown["allocatable"]["cpu"] == "8"
        ours = [p for p in shown["pods"] if p["namespace"] == failed.ns]
        assert [p["requests"] for p in ours if p["phase"] == "Running"] in (
            [],
            [{"cpu": "250m", "memory": "64Mi"}],
        )
    docs = list(yaml.safe_load_all(files["dg/manifests.yaml"]))
    assert sorted((d["kind"], d["metadata"]["name"]) for d in docs) == sorted(
        (kind, f"dg-{task}")
        for kind in ("Job", "Service")
        for task in ("ps-0", "worker-0", "worker-1")
    )
    assert not any("managedFields" in d["metadata"] for d in docs)
    summary = files["dg/summary.txt"].splitlines()
    assert summary[:4] == [
        "run: dg", f"namespace: {failed.ns}", "state: Failed",
        "verdict: run 'dg' failed: worker-1 Failed: Error (exit 1)",
    ]  # fmt: skip
    assert "first failure: worker-1, exit code 1, reason Error: a program error" in summary
    error = summary.index("worker-1's error, from tasks/worker-1.log:")
    assert summary[error + 1] == "  Traceback (most recent call last):"
    assert (
        summary[summary.index("worker-1's last 20 lines:") - 1]
        == "  ValueError: bad batch at step 30"
    )
    assert "restarts of the whole run: 0 of 0 (run --max-restarts)" in summary
    table = summary[summary.index("tasks:") + 1 :]
    assert re.match(r"  ps-0 +\S+ +Running +1\b", table[1]), table
    assert re.match(r"  worker-1 +\S+ +Failed +1 +Error \(exit 1\)", table[3]), table
    versions = next(line for line in summary if line.startswith("versions: "))
    assert re.fullmatch(r"versions: simpletfjob \S+; server v1\.20\.\d+", versions), versions
    assert "  worker-0: its pod is gone; its logs went with it" in summary


def test_a_literal_token_is_redacted_in_the_manifests_and_in_a_log_line(
    failed: Failed, cli: Any, tmp_path: Path
) -> None:
    result = cli("diagnose", "dg", "--kubeconfig", failed.kubeconfig, cwd=tmp_path)
    assert result.code == 0, result.err
    files = bundle_files(tmp_path / result.out.strip())
    assert not [name for name, text in files.items() if TOKEN in text]
    (job,) = [
        d
        for d in yaml.safe_load_all(files["dg/manifests.yaml"])
        if (d["kind"], d["metadata"]["name"]) == ("Job", "dg-worker-1")
    ]
    env = {e["name"]: e for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["Api_Token"] == {"name": "Api_Token", "value": "<redacted>"}
    assert env["DB_PASSWORD"] == {
        "name": "DB_PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}},
    }
    assert "connecting with <redacted>" in files["dg/tasks/worker-1.log"].splitlines()


def test_a_user_without_the_right_to_events_or_nodes_gets_the_rest(
    failed: Failed, cli: Any, tmp_path: Path
) -> None:
    """docs/rbac.md's Role without its events rule, and no ClusterRole: no events.txt, no nodes."""
    for rule in docs_rbac("Role")["rules"]:
        if rule["resources"] != ["events"]:
            (group,) = rule["apiGroups"]
            failed.plane.grant(
                "carol", rule["verbs"], rule["resources"], failed.ns, api_group=group
            )
    kubeconfig = str(failed.plane.kubeconfig(tmp_path / "kc-carol", "carol", failed.ns))
    result = cli("diagnose", "dg", "--kubeconfig", kubeconfig, cwd=tmp_path)
    assert result.code == 0, result.err
    files = bundle_files(tmp_path / result.out.strip())
    names = sorted(name.removeprefix("dg/") for name in files)
    assert names == sorted([
        "summary.txt", "status.json", "tasks/ps-0.log", "tasks/ps-0.previous.log",
        "tasks/worker-1.log", "manifests.yaml",
    ])  # fmt: skip
    unread = files["dg/summary.txt"].split("could not be read:\n", 1)[1].splitlines()
    assert any(
        re.match(r"  events: .*user 'carol' cannot list events in namespace", u) for u in unread
    ), unread
    assert any(re.match(r"  nodes: .*user 'carol' cannot get nodes", u) for u in unread), unread


def test_a_run_that_does_not_exist_is_one_line_and_no_file(
    failed: Failed, cli: Any, tmp_path: Path
) -> None:
    result = cli("diagnose", "nope", "--kubeconfig", failed.kubeconfig, cwd=tmp_path)
    assert_one_line_error(result, 1, contains=[f"no run 'nope' in namespace '{failed.ns}'"])
    assert list(tmp_path.iterdir()) == []


def test_o_writes_the_bundle_there(failed: Failed, cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "kept" / "dg.tgz"
    path.parent.mkdir()
    result = cli("diagnose", "dg", "-o", str(path), "--kubeconfig", failed.kubeconfig)
    assert (result.code, result.out) == (0, f"{path}\n"), result.err
    assert next(iter(bundle_files(path))) == "dg/summary.txt"
    assert list(path.parent.iterdir()) == [path]


def test_nothing_is_left_on_an_error(
    failed: Failed, cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = cli(
        "diagnose", "dg", "-o", str(tmp_path / "no" / "b.tgz"), "--kubeconfig", failed.kubeconfig
    )
    assert_one_line_error(missing, 1, contains=["does not exist"])

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    result = cli("diagnose", "dg", "--kubeconfig", failed.kubeconfig, cwd=tmp_path)
    assert_one_line_error(result, 1, contains=["No space left on device"])
    assert list(tmp_path.iterdir()) == []
