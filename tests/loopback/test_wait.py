"""`wait` against the loopback API server: its verdicts, cleanup, timeouts, faults and RBAC.

The loopback server has no Job controller: these tests write the Jobs' status as it
would, and the pods' as a kubelet would. What the real controller does is in
tests/control_plane/test_wait.py; `status` is in test_status.py.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_one_line_error, console_script
from tests.support.cluster import wait_for
from tests.support.kubeapi import KubeAPI, job_status, make_job, write_kubeconfig
from tests.support.scenes import (
    NS,
    UNSCHEDULED,
    finish_job,
    labels,
    lists,
    load_run,
    run_pod,
    when_watching,
)


@pytest.fixture
def names(kubeapi: KubeAPI) -> Iterator[Callable[[str], set[str]]]:
    yield lambda resource: {o["metadata"]["name"] for o in kubeapi.objects(resource, NS)}


def test_wait_follows_the_run_to_success_then_deletes_what_still_runs(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str, names: Callable[[str], set[str]]
) -> None:
    load_run(kubeapi)
    run_pod(kubeapi, "mnist-ps-0", "h10")

    def play() -> None:
        run_pod(kubeapi, "mnist-worker-0", "h100")
        run_pod(kubeapi, "mnist-worker-1", "h14")
        time.sleep(0.2)
        run_pod(kubeapi, "mnist-worker-0", "h100", "Succeeded")
        finish_job(kubeapi, "mnist-worker-0")

    changer = when_watching(kubeapi, play)
    result = cli("wait", "mnist", "--kubeconfig", kubeconfig, "--timeout", "30s")
    changer.join()
    assert result.code == 0, result.err
    assert result.out == ""
    lines = result.err.splitlines()
    assert lines[:3] == [
        "ps-0 Running on h10",
        "worker-0 Pending: Unschedulable",
        "worker-1 Pending: Unschedulable",
    ]
    assert "worker-0 Running on h100" in lines and "worker-0 Succeeded" in lines
    assert lines[-5:] == [
        "job.batch/mnist-ps-0 deleted",
        "job.batch/mnist-worker-1 deleted",
        "service/mnist-ps-0 deleted",
        "service/mnist-worker-1 deleted",
        "run mnist succeeded: worker-0 Succeeded",
    ]
    assert names("jobs") == names("services") == {"mnist-worker-0"}
    # Background propagation: the deleted Jobs' pods terminate (an orphan would not); the
    # finished pod stays for its logs
    pods = {p["metadata"]["name"]: p["metadata"] for p in kubeapi.objects("pods", NS)}
    assert {name for name, meta in pods.items() if "deletionTimestamp" not in meta} == {
        "mnist-worker-0-x"
    }
    # one list of each at start, then only watches
    assert (lists(kubeapi, "jobs"), lists(kubeapi, "pods")) == (1, 1)


def test_wait_exits_1_naming_the_failed_task_and_cleans_up(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str, names: Callable[[str], set[str]]
) -> None:
    load_run(kubeapi)

    def play() -> None:
        run_pod(kubeapi, "mnist-worker-1", "h14", "Failed", exit_code=1)
        finish_job(kubeapi, "mnist-worker-1", ok=False)

    changer = when_watching(kubeapi, play)
    result = cli("wait", "mnist", "--kubeconfig", kubeconfig)
    changer.join()
    assert result.code == 1
    lines = result.err.splitlines()
    assert "worker-1 Failed: Error (exit 1)" in lines
    assert lines[-1] == ("simpletfjob: error: run 'mnist' failed: worker-1 Failed: Error (exit 1)")
    assert names("jobs") == {"mnist-worker-1"}


@pytest.mark.parametrize(
    ("cleanup", "left"),
    [("all", set()), ("none", {"mnist-ps-0", "mnist-worker-0", "mnist-worker-1"})],
)
def test_a_run_that_has_ended_returns_at_once_with_its_cleanup(
    cli: Any,
    kubeapi: KubeAPI,
    kubeconfig: str,
    names: Callable[[str], set[str]],
    cleanup: str,
    left: set[str],
) -> None:
    load_run(kubeapi)
    finish_job(kubeapi, "mnist-worker-0")
    result = cli("wait", "mnist", "--cleanup", cleanup, "--kubeconfig", kubeconfig)
    assert result.code == 0, result.err
    assert not kubeapi.requests_for("jobs", "watch") and not kubeapi.requests_for("pods", "watch")
    assert names("jobs") == names("services") == left


def test_wait_times_out_with_exit_3_and_leaves_the_run(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str, names: Callable[[str], set[str]]
) -> None:
    load_run(kubeapi)
    started = time.monotonic()
    result = cli("wait", "mnist", "--timeout", "1s", "--kubeconfig", kubeconfig)
    assert 0.9 <= time.monotonic() - started < 10
    assert result.code == 3
    assert result.err.splitlines()[-1] == (
        f"simpletfjob: error: run 'mnist' did not end within 1s (Pending); ps-0, worker-0 and "
        f"worker-1 Pending: {UNSCHEDULED}; it is left as it is; see: simpletfjob status mnist "
        "-n ml; simpletfjob logs mnist ps-0 -n ml"
    )
    assert len(names("jobs")) == 3 and len(names("services")) == 3


def test_worker0s_job_deleted_before_it_finished_fails_the_run_as_deleted(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str
) -> None:
    load_run(kubeapi, tasks=(("worker", 0), ("worker", 1)))
    changer = when_watching(kubeapi, lambda: kubeapi.delete("jobs", "mnist-worker-0", namespace=NS))
    result = cli("wait", "mnist", "--cleanup", "none", "--kubeconfig", kubeconfig)
    changer.join()
    assert result.code == 1
    assert "worker-0 deleted" in result.err.splitlines()
    assert result.err.splitlines()[-1] == (
        "simpletfjob: error: run 'mnist' failed: worker-0's Job is gone and its end was not seen "
        "(deleted, or removed by ttlSecondsAfterFinished)"
    )


@pytest.mark.parametrize(
    "faults",
    [
        {"resource": "jobs", "verb": "watch", "watch_drop_after": 1, "watch_drops": 3},
        {"resource": "pods", "verb": "watch", "watch_drop_after": 0, "watch_reset": True},
        {"resource": "jobs", "verb": "watch", "watch_gone_first": 1},
        {"resource": "pods", "verb": "watch", "watch_expire_first": 1},
        {"resource": "jobs", "verb": "watch", "fail_first": 2},
    ],
    ids=["dropped", "reset", "410", "410-event", "5xx"],
)
def test_wait_rides_out_dropped_watches_410_and_5xx(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str, faults: dict[str, Any]
) -> None:
    load_run(kubeapi)
    kubeapi.add_faults(**faults)

    def play() -> None:
        run_pod(kubeapi, "mnist-worker-0", "h100")
        for job in ("mnist-ps-0", "mnist-worker-1"):  # events before the one that ends the run
            kubeapi.patch(
                "jobs",
                job,
                {"status": job_status(active=1, start="2024-05-01T10:01:00Z")},
                namespace=NS,
                subresource="status",
            )
            time.sleep(0.1)
        time.sleep(0.3)
        run_pod(kubeapi, "mnist-worker-0", "h100", "Succeeded")
        time.sleep(0.3)
        finish_job(kubeapi, "mnist-worker-0")

    changer = when_watching(kubeapi, play)
    result = cli("wait", "mnist", "--kubeconfig", kubeconfig, "--timeout", "30s")
    changer.join()
    assert result.code == 0, result.err
    assert result.err.splitlines()[-1] == "run mnist succeeded: worker-0 Succeeded"
    assert len(kubeapi.requests_for(faults["resource"], "watch")) >= 2  # the fault was met
    relisted = 1 if faults.get("watch_gone_first") or faults.get("watch_expire_first") else 0
    assert lists(kubeapi, faults["resource"]) == 1 + relisted


def test_wait_refused_by_rbac_names_the_verb_and_resource(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    load_run(kubeapi)
    finish_job(kubeapi, "mnist-worker-0")
    kubeapi.add_user("ci", "ci-token")
    kubeapi.grant("ci", ["list", "watch"], ["jobs", "pods", "services"], namespace=NS)
    kubeconfig = write_kubeconfig(tmp_path / "ci", kubeapi.url, token="ci-token", namespace=NS)
    result = cli("wait", "mnist", "--kubeconfig", str(kubeconfig))
    line = assert_one_line_error(
        CapturedLast(result), 1, contains=["cannot delete jobs in namespace ml"]
    )
    assert "ci" in line
    # The run's end is not lost with the cleanup: the one line says it first.
    assert line.startswith(
        "simpletfjob: error: run 'mnist' succeeded: worker-0 Succeeded; "
        "but its cleanup (--cleanup running) failed: "
    )


class CapturedLast:
    """A run's result with only its last stderr line: wait prints task lines before failing."""

    def __init__(self, result: Any) -> None:
        self.code, self.out = result.code, result.out
        self.err = result.err.splitlines()[-1] + "\n"


def test_a_watch_refused_by_rbac_is_one_line_naming_it(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    load_run(kubeapi)
    kubeapi.add_user("ci", "ci-token")
    kubeapi.grant("ci", ["list", "watch"], ["jobs"], namespace=NS)
    kubeapi.grant("ci", ["list"], ["pods"], namespace=NS)
    kubeconfig = write_kubeconfig(tmp_path / "ci", kubeapi.url, token="ci-token", namespace=NS)
    result = cli("wait", "mnist", "--kubeconfig", str(kubeconfig), "--timeout", "20s")
    assert result.code == 1
    assert "Traceback" not in result.err
    assert result.err.splitlines()[-1].startswith("simpletfjob: error: ")
    assert "cannot watch pods in namespace ml" in result.err.splitlines()[-1]


@pytest.mark.parametrize("command", ["status", "wait", "delete"])
@pytest.mark.parametrize("name", ["a b", "x-", "x" * 64, ""])
def test_a_run_name_that_is_no_label_value_is_a_usage_error(
    cli: Any, kube_env: Path, command: str, name: str
) -> None:
    result = cli(command, name, "--kubeconfig", "/nonexistent")  # refused before it is read
    assert_one_line_error(result, 2, contains=[f"RUN {name!r} is not a valid run name"])


def test_the_timeout_bounds_the_first_lists_too(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str, names: Callable[[str], set[str]]
) -> None:
    load_run(kubeapi)
    kubeapi.add_faults(resource="pods", verb="list", delay=5.0)
    started = time.monotonic()
    result = cli("wait", "mnist", "--timeout", "1s", "--kubeconfig", kubeconfig)
    assert time.monotonic() - started < 4
    assert_one_line_error(
        result,
        3,
        r"^simpletfjob: error: run 'mnist' did not end within 1s; it is left as it is; "
        r"see: simpletfjob status mnist -n ml; simpletfjob logs mnist TASK -n ml$",
    )
    assert len(names("jobs")) == 3


def test_ctrl_c_stops_wait_with_one_line_and_leaves_the_run(
    kubeapi: KubeAPI, kubeconfig: str, names: Callable[[str], set[str]]
) -> None:
    load_run(kubeapi)
    process = subprocess.Popen(
        [console_script(), "wait", "mnist", "--kubeconfig", kubeconfig],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_for(
        lambda: kubeapi.requests_for("jobs", "watch") and kubeapi.requests_for("pods", "watch"),
        20,
        "wait to watch",
    )
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=20)
    assert process.returncode == 130
    assert (out, err.decode().splitlines()[-1]) == (b"", "simpletfjob: interrupted")
    assert "Traceback" not in err.decode()
    assert len(names("jobs")) == 3


def test_wait_timeout_0s_checks_once_and_tells_an_ended_run_as_ended(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str, names: Callable[[str], set[str]]
) -> None:
    # As `kubectl wait --timeout 0s`: the state now, not a timeout before the first look.
    load_run(kubeapi)
    kubeapi.add_faults(resource="pods", verb="list", delay=0.3)
    finish_job(kubeapi, "mnist-worker-0")
    result = cli("wait", "mnist", "--timeout", "0s", "--kubeconfig", kubeconfig)
    assert result.code == 0, result.err
    assert result.err.splitlines()[-1] == "run mnist succeeded: worker-0 Succeeded"
    assert names("jobs") == {"mnist-worker-0"}  # the cleanup ran too


def test_wait_timeout_0s_on_a_run_still_going_is_exit_3_at_once(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str, names: Callable[[str], set[str]]
) -> None:
    load_run(kubeapi)
    started = time.monotonic()
    result = cli("wait", "mnist", "--timeout", "0s", "--kubeconfig", kubeconfig)
    assert time.monotonic() - started < 5
    assert result.code == 3
    assert result.err.splitlines()[-1] == (
        f"simpletfjob: error: run 'mnist' did not end within 0s (Pending); ps-0, worker-0 and "
        f"worker-1 Pending: {UNSCHEDULED}; it is left as it is; see: simpletfjob status mnist "
        "-n ml; simpletfjob logs mnist ps-0 -n ml"
    )
    assert len(names("jobs")) == 3


def test_wait_with_the_longest_timeout_waits_as_any_other(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str
) -> None:
    # Go's longest duration, the most --timeout takes: one second more overflowed a lock's timeout.
    load_run(kubeapi)
    changer = when_watching(kubeapi, lambda: finish_job(kubeapi, "mnist-worker-0"))
    result = cli("wait", "mnist", "--timeout", "2562047h47m16.854s", "--kubeconfig", kubeconfig)
    changer.join()
    assert result.code == 0, result.err
    assert result.err.splitlines()[-1] == "run mnist succeeded: worker-0 Succeeded"


def test_wait_cleanup_leaves_a_copy_that_apply_did_not_make(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str, names: Callable[[str], set[str]]
) -> None:
    """A Job whose simpletfjob/name annotation names another Job was copied under a new name
    (with the run's labels): it is not the run's to delete, even with --cleanup all."""
    load_run(kubeapi, tasks=(("worker", 0), ("worker", 1)))
    copied = make_job(
        "mnist-ps-0-copy",
        NS,
        labels=labels("mnist", "ps", 0),
        annotations={"simpletfjob/success-policy": "worker0", "simpletfjob/name": "mnist-ps-0"},
    )
    kubeapi.load("jobs", [copied])
    finish_job(kubeapi, "mnist-worker-0")
    result = cli("wait", "mnist", "--kubeconfig", kubeconfig, "--cleanup", "all")
    assert result.code == 0, result.err
    lines = result.err.splitlines()
    assert (
        "job.batch/mnist-ps-0-copy left: not made by apply (its simpletfjob/name annotation "
        "names 'mnist-ps-0', a copy)"
    ) in lines
    assert "job.batch/mnist-worker-0 deleted" in lines
    assert names("jobs") == {"mnist-ps-0-copy"}


def test_wait_refuses_a_task_two_jobs_claim_when_neither_says_which_is_a_copy(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str, names: Callable[[str], set[str]]
) -> None:
    """Jobs applied by an older version have no simpletfjob/name: the user picks the one to keep."""
    load_run(kubeapi)
    twin = make_job(
        "mnist-worker-0-twin",
        NS,
        labels=labels("mnist", "worker", 0),
        annotations={"simpletfjob/success-policy": "worker0"},
    )
    kubeapi.load("jobs", [twin])
    finish_job(kubeapi, "mnist-worker-0-twin")
    result = cli("wait", "mnist", "--kubeconfig", kubeconfig, "--timeout", "0s")
    assert result.code == 1
    assert result.err.splitlines()[-1] == (
        "simpletfjob: error: run 'mnist' cannot be decided: worker-0 is claimed by 2 Jobs: "
        "mnist-worker-0, mnist-worker-0-twin; delete what is not the run's (kubectl delete job "
        "NAME -n ml, for all of mnist-worker-0, mnist-worker-0-twin but one) and wait again; "
        "nothing was cleaned up"
    )
    assert names("jobs") == {
        "mnist-ps-0",
        "mnist-worker-0",
        "mnist-worker-1",
        "mnist-worker-0-twin",
    }
    every = cli("status", "--kubeconfig", kubeconfig)
    assert every.out.splitlines()[1].split()[:6] == ["mnist", "4", "3", "1", "0", "Ambiguous"]


def test_wait_says_its_verdict_before_it_closes_its_connection(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the deciding event, the verdict first: closing the connection (its watches cut, its
    pool emptied) comes after the line a script waits for."""
    import simpletfjob.streams
    from simpletfjob.kube.connection import Connection

    said: list[str] = []
    say, close = simpletfjob.streams.say, Connection.close
    monkeypatch.setattr(simpletfjob.streams, "say", lambda line: (said.append(line), say(line)))
    monkeypatch.setattr(Connection, "close", lambda conn: (said.append("closed"), close(conn)))
    load_run(kubeapi)
    finish_job(kubeapi, "mnist-worker-0")
    result = cli("wait", "mnist", "--cleanup", "none", "--kubeconfig", kubeconfig)
    assert result.code == 0, result.err
    assert said[-2:] == ["run mnist succeeded: worker-0 Succeeded", "closed"]


def test_wait_for_run_leaves_the_last_jobs_and_pods_seen_to_the_caller(
    kubeapi: KubeAPI, kubeconfig: str
) -> None:
    """`keep` holds the run's objects as they were judged last, so that `wait` says its verdict
    before a large run's objects are freed: the Jobs with the deciding one ended."""
    from simpletfjob.runs.objects import connect_for
    from simpletfjob.runs.wait import wait_for_run

    load_run(kubeapi)
    run_pod(kubeapi, "mnist-worker-0", "h100", "Succeeded")
    finish_job(kubeapi, "mnist-worker-0")
    kept: list[object] = []
    said: list[str] = []
    with connect_for(kubeconfig, None, None, purpose="wait for a run on") as conn:
        run = wait_for_run(
            conn, "mnist", timeout=30, cleanup="none", tail=0, context=None,
            say=said.append, grace=0, keep=kept,
        )  # fmt: skip
    assert run.state == "Succeeded"
    jobs, pods = kept
    assert sorted(j["metadata"]["name"] for j in jobs) == [
        "mnist-ps-0", "mnist-worker-0", "mnist-worker-1"
    ]  # fmt: skip
    ended = next(j for j in jobs if j["metadata"]["name"] == "mnist-worker-0")
    assert any(c["type"] == "Complete" for c in ended["status"]["conditions"])
    phases = {p["metadata"]["name"]: p["status"]["phase"] for p in pods}
    assert sorted(phases) == ["mnist-ps-0-x", "mnist-worker-0-x", "mnist-worker-1-x"]
    assert phases["mnist-worker-0-x"] == "Succeeded"
