"""Completing a run's name from the cluster: the runs of the namespace, or nothing in time."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from simpletfjob.cli import complete as completion
from tests.support.completion import complete, plain
from tests.support.kubeapi import KubeAPI, make_job, write_kubeconfig


def run_job(run: str, name: str, namespace: str) -> dict[str, object]:
    labels = {"app.kubernetes.io/managed-by": "simpletfjob", "simpletfjob/job": run}
    role, _, index = name.removeprefix(f"{run}-").rpartition("-")
    labels |= {"simpletfjob/role": role, "simpletfjob/index": index}
    return make_job(name, namespace, labels=labels)


@pytest.fixture
def runs(kubeapi: KubeAPI) -> KubeAPI:
    kubeapi.load(
        "jobs",
        [
            run_job("mnist", "mnist-worker-0", "ml"),
            run_job("mnist", "mnist-worker-1", "ml"),
            run_job("resnet", "resnet-worker-0", "ml"),
            run_job("other", "other-worker-0", "default"),
            make_job("not-ours", "ml", labels={"simpletfjob/job": "forged"}),
        ],
    )
    return kubeapi


@pytest.mark.parametrize("command", ["status", "wait", "logs", "delete", "diagnose"])
def test_the_runs_of_the_namespace_are_offered(
    runs: KubeAPI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
) -> None:
    config = write_kubeconfig(tmp_path / "kubeconfig", runs.url, namespace="ml")
    line = f"simpletfjob {command} --kubeconfig {config} "
    assert plain(complete(monkeypatch, capsys, line)) == ["mnist", "resnet"]
    assert plain(complete(monkeypatch, capsys, line + "mn")) == ["mnist"]
    other = f"simpletfjob {command} --kubeconfig {config} -n default "
    assert plain(complete(monkeypatch, capsys, other)) == ["other"]


def test_a_slow_cluster_offers_nothing_in_time(
    runs: KubeAPI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(completion, "RUN_TIMEOUT", 0.5)
    runs.add_faults(delay=3.0)
    config = write_kubeconfig(tmp_path / "kubeconfig", runs.url, namespace="ml")
    started = time.monotonic()
    assert complete(monkeypatch, capsys, f"simpletfjob status --kubeconfig {config} ") == []
    assert time.monotonic() - started < 2.5


def test_a_runs_tasks_are_offered_after_logs_run(
    runs: KubeAPI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    runs.load(
        "jobs", [run_job("mnist", "mnist-ps-0", "ml"), run_job("mnist", "mnist-worker-10", "ml")]
    )
    config = write_kubeconfig(tmp_path / "kubeconfig", runs.url, namespace="ml")
    line = f"simpletfjob logs --kubeconfig {config} mnist "
    assert plain(complete(monkeypatch, capsys, line)) == [
        "ps-0",
        "worker-0",
        "worker-1",
        "worker-10",
    ]
    assert plain(complete(monkeypatch, capsys, line + "worker-1")) == ["worker-1", "worker-10"]
    # one already given is not offered again
    assert plain(complete(monkeypatch, capsys, line + "ps-0 ")) == [
        "worker-0",
        "worker-1",
        "worker-10",
    ]
    assert complete(monkeypatch, capsys, f"simpletfjob logs --kubeconfig {config} nope ") == []


def test_the_clusters_namespaces_are_offered_after_n(
    runs: KubeAPI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = write_kubeconfig(tmp_path / "kubeconfig", runs.url, namespace="ml")
    found = plain(complete(monkeypatch, capsys, f"simpletfjob status --kubeconfig {config} -n "))
    assert {"default", "ml"} <= set(found) and found == sorted(found)
    assert plain(complete(monkeypatch, capsys, f"simpletfjob logs --kubeconfig {config} -n m")) == [
        "ml"
    ]
