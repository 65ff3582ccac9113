"""The Python API on the real control plane, its pods run by the kubelet stand-in: apply, status,
logs, wait, get, runs and delete as a notebook calls them; a failed run's Outcome; `Client.run`
through one restart; TimedOut; and nothing printed on the way.

The runs are test_run.py's (its template and task program): tasks that bind no port, on three
nodes with a label of the test's own, planned from the cluster with `selector`.
"""

from __future__ import annotations

import contextlib
import logging
import re
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import simpletfjob
from tests.conftest import write
from tests.support.control_plane import ControlPlane
from tests.support.kubelet import Kubelet
from tests.support.scenes import stand_in_nodes
from tests.support.templates import RUN as TEMPLATE
from tests.support.templates import RUN_SCRIPT as SCRIPT


class Session:
    """A Client on the test's namespace, and what a run of the test's template needs."""

    def __init__(
        self, kube: ControlPlane, kubelet: Kubelet, ns: str, tmp: Path, label: str
    ) -> None:
        self.kube, self.kubelet, self.ns = kube, kubelet, ns
        self.template = write(tmp / "rt.yaml", TEMPLATE)
        self.script = write(tmp / "task.py", SCRIPT)
        self.markers = tmp / "markers"
        self.markers.mkdir()
        # The namespace comes from the kubeconfig's context, as the CLI finds it.
        self.client = simpletfjob.Client(kubeconfig=kube.kubeconfig(tmp / "kc", namespace=ns))
        self.placement = {"selector": f"rt={label}", "address": "internal-ip"}

    def values(self, mode: str = "ok", seconds: float = 3) -> dict[str, Any]:
        return {
            "script": str(self.script),
            "markers": str(self.markers),
            "mode": mode,
            "seconds": seconds,
        }

    def apply(self, mode: str = "ok", seconds: float = 3, **options: Any) -> simpletfjob.Run:
        return self.client.apply(
            self.template, values=self.values(mode, seconds), **self.placement, **options
        )


@pytest.fixture
def session(kube: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[Session]:
    nodes, label = stand_in_nodes("api", 3, label_key="rt", label_prefix="api-")
    with Kubelet(kube, nodes, tmp_path / "kubelet") as kubelet:
        yield Session(kube, kubelet, namespace, tmp_path, label)


def test_a_whole_session_works_and_prints_nothing(
    session: Session, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="simpletfjob")
    run = session.apply(seconds=2)
    assert (run.name, run.namespace) == ("rt", session.ns)
    assert session.client.get("rt") == run
    assert session.client.runs() == [run]

    status = run.status()
    assert (status.name, status.namespace) == ("rt", session.ns)
    assert [t.name for t in status.tasks] == ["ps-0", "worker-0", "worker-1"]
    assert [(t.role, t.index) for t in status.tasks] == [("ps", 0), ("worker", 0), ("worker", 1)]
    assert status.state in ("Pending", "Running")
    assert (status.restarts, status.max_restarts) == (0, 0)

    outcome = run.wait(timeout=120)
    assert (outcome.state, outcome.succeeded, outcome.cause) == ("Succeeded", True, None)
    assert outcome.message == "run rt succeeded: worker-0 Succeeded"
    assert outcome.restarts == 0

    ended = run.status()
    assert ended.state == "Succeeded" and ended.finished
    tasks = {t.name: t for t in ended.tasks}
    assert "ps-0" not in tasks  # wait's cleanup took what still ran
    worker = tasks["worker-0"]
    assert (worker.state, worker.exit_code, worker.reason) == ("Succeeded", 0, None)
    assert worker.node is not None and worker.node.startswith("api-")

    lines = list(run.logs("worker-0"))
    assert [(line.task, line.text) for line in lines] == [
        ("worker-0", "worker-0 started"),
        ("worker-0", "worker-0 done"),
    ]
    last = list(run.logs(tail=1))
    assert [(line.task, line.text) for line in last if line.task == "worker-0"] == [
        ("worker-0", "worker-0 done")
    ]

    run.delete(wait=True)
    with pytest.raises(simpletfjob.NoRunError, match=f"no run 'rt' in namespace '{session.ns}'"):
        session.client.get("rt")
    assert session.client.runs() == []

    assert capfd.readouterr() == ("", "")
    said = [r.getMessage() for r in caplog.records if r.name == "simpletfjob"]
    assert any(line.startswith("applied run rt in namespace") for line in said), said
    assert 'job.batch "rt-worker-0" deleted' in said
    # the command's last line, as `simpletfjob delete rt --wait` says it (the workers wait's
    # cleanup left: worker-0, and worker-1 if it had finished)
    assert re.fullmatch(
        rf"deleted run rt in namespace {session.ns} \((\d) objects?: \1 jobs?, 0 services\)"
        " and its Jobs are gone",
        said[-1],
    ), said


def test_a_failed_run_is_an_outcome_with_its_cause(session: Session) -> None:
    run = session.apply(mode="fail-always")
    outcome = run.wait(timeout=120)
    assert (outcome.state, outcome.succeeded) == (simpletfjob.State.FAILED, False)
    cause = outcome.cause
    assert cause is not None
    assert (cause.kind, cause.tasks, cause.exit_code, cause.category) == (
        simpletfjob.CauseKind.TASK_FAILED,
        ("worker-1",),
        1,
        "program error",
    )
    assert cause.node is not None and cause.node.startswith("api-")
    assert str(cause) == cause.text == "worker-1 Failed: Error (exit 1)"
    assert outcome.message == "run 'rt' failed: worker-1 Failed: Error (exit 1)"
    failed = {t.name: t for t in run.status().tasks}["worker-1"]
    assert (failed.state, failed.exit_code, failed.reason) == ("Failed", 1, "Error (exit 1)")
    assert failed.state is simpletfjob.State.FAILED
    # its bundle, at the verdict and by hand
    bundles = session.markers.parent / "bundles"
    bundles.mkdir()
    again = run.wait(cleanup="none", diagnose_on_failure=bundles)
    assert again.bundle is not None and again.bundle.parent == bundles, again
    assert again.message == f"{outcome.message}; bundle: {again.bundle}"
    assert outcome.bundle is None
    assert run.diagnose(bundles / "by-hand.tgz") == bundles / "by-hand.tgz"
    for path in (again.bundle, bundles / "by-hand.tgz"):
        with tarfile.open(path) as tar:
            assert tar.getnames()[0] == "rt/summary.txt"
    with pytest.raises(simpletfjob.UsageError, match="must be an existing directory"):
        run.wait(diagnose_on_failure=bundles / "nope")


def test_a_timeout_raises_timed_out_and_leaves_the_run(session: Session) -> None:
    run = session.apply(seconds=120)
    began = time.monotonic()
    with pytest.raises(simpletfjob.TimedOut, match=r"run 'rt' did not end within 2s") as raised:
        run.wait(timeout="2s")
    assert raised.value.exit_code == 3
    assert time.monotonic() - began < 60
    assert run.status().state in ("Pending", "Running")
    run.delete()


def test_client_run_goes_through_one_restart(
    session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="simpletfjob")
    outcome = session.client.run(
        session.template, values=session.values("fail-once"), max_restarts=1, timeout="3m",
        **session.placement,
    )  # fmt: skip
    assert (outcome.state, outcome.succeeded, outcome.restarts) == ("Succeeded", True, 1)
    said = [r.getMessage() for r in caplog.records if r.name == "simpletfjob"]
    # what apply did, counted as the command counts it
    assert f"applied run rt in namespace {session.ns} (3 created)" in said, said
    status = session.client.get("rt").status()
    assert (status.restarts, status.max_restarts) == (1, 1)


def test_client_run_out_of_restarts_is_a_failed_outcome(session: Session) -> None:
    bundles = session.markers.parent / "bundles"
    bundles.mkdir()
    outcome = session.client.run(
        session.template, values=session.values("fail-always"), max_restarts=1, timeout="3m",
        diagnose_on_failure=bundles, **session.placement,
    )  # fmt: skip
    # a bundle of each failure: the restarted attempt's, and the last
    assert outcome.bundle is not None and outcome.bundle.name.startswith("rt-diagnose-")
    assert sorted(p.name.split("-diagnose-")[0] for p in bundles.iterdir()) == [
        "rt",
        "rt-attempt-1",
    ]
    assert (outcome.state, outcome.succeeded, outcome.restarts) == ("Failed", False, 1)
    assert (outcome.name, outcome.namespace) == ("rt", session.ns)
    # the cause is why it failed; the message, the CLI's line, also why it was not restarted
    assert outcome.cause is not None and outcome.cause.kind == "task failed"
    assert outcome.cause.tasks == ("worker-1",) and outcome.cause.exit_code == 1
    assert str(outcome.cause) == "worker-1 Failed: Error (exit 1)"
    assert outcome.message == (
        "run 'rt' failed: worker-1 Failed: Error (exit 1); no restart left (1 of 1 made); "
        f"bundle: {outcome.bundle}"
    )


def _reading_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "simpletfjob-logs"]


def test_logs_follow_to_the_end_and_a_loop_left_early_stops_reading(session: Session) -> None:
    run = session.apply(seconds=4)
    followed = [(line.task, line.text) for line in run.logs("worker-0", follow=True)]
    assert followed == [("worker-0", "worker-0 started"), ("worker-0", "worker-0 done")]
    assert run.status().state == "Succeeded"

    run.delete(wait=True)
    run = session.apply(seconds=60)
    lines = run.logs(follow=True)
    first = next(lines)
    assert first.text.endswith(" started")
    lines.close()  # the loop left early
    assert _reading_threads() == []
    run.delete(wait=True)


def test_an_option_the_run_commands_refuse_is_the_cli_error(session: Session) -> None:
    with pytest.raises(simpletfjob.UsageError, match="--no-labels cannot go with apply"):
        session.apply(no_labels=True)
    with pytest.raises(simpletfjob.UsageError, match="--max-restarts must be between 0 and 1000"):
        session.client.run(session.template, max_restarts=-1)
    with pytest.raises(simpletfjob.UsageError, match="unknown option 'namespace'"):
        session.apply(namespace="other")
    with pytest.raises(simpletfjob.UsageError, match="--cleanup must be running, all or none"):
        simpletfjob.Run(session.client, "rt", session.ns).wait(cleanup="some")
    with pytest.raises(simpletfjob.UsageError, match="RUN 'bad name' is not a valid run name"):
        session.client.get("bad name")  # checked before the server is asked


@contextlib.contextmanager
def _interrupted_after(seconds: float) -> Iterator[None]:
    """Ctrl-C in the test's (main) thread, as a notebook's interrupt button sends it.

    `_thread.interrupt_main()` raises only once the main thread runs Python again: a
    wait blocked with no timeout would hold it off. The block must raise it soon after.
    """
    import _thread
    import signal

    # A notebook's SIGINT is Python's own handler; interrupt_main does nothing where SIGINT is
    # ignored, as an earlier test in this worker (a console script's end, in-process) may leave it.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(seconds, _thread.interrupt_main)
    started = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            yield
    finally:
        timer.cancel()  # a block that ended first leaves no Ctrl-C for another test
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - started < seconds + 10


def _ours(thread: threading.Thread) -> bool:
    """A thread that simpletfjob started (not the kubelet stand-in's, nor the control plane's)."""
    target = getattr(thread, "_target", None)
    return thread.name == "simpletfjob-logs" or str(getattr(target, "__module__", "")).startswith(
        "simpletfjob"
    )


def _threads_settle(before: set[threading.Thread]) -> list[threading.Thread]:
    """simpletfjob's threads started since `before` that are still there after a while."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        left = [t for t in threading.enumerate() if t not in before and t.is_alive() and _ours(t)]
        if not left:
            return []
        time.sleep(0.2)
    return left


def test_ctrl_c_propagates_from_wait_and_logs_and_leaves_no_thread(session: Session) -> None:
    run = session.apply(seconds=120)
    before = set(threading.enumerate())
    with _interrupted_after(3):
        ended = run.wait()
        pytest.fail(f"wait ended before the interrupt: {ended!r}")  # (says how, if it does)
    assert _threads_settle(before) == []
    with _interrupted_after(3):
        for _ in run.logs(follow=True):
            pass
        pytest.fail("logs -f ended before the interrupt")
    assert _threads_settle(before) == []
    assert run.status().state == "Running"  # left as it is, as wait leaves it
    run.delete(wait=True)
