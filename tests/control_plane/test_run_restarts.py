"""`run`'s restarts by class, on the real control plane with the kubelet stand-in: a program
error (exit 1) ends the run under --restart-on disruption and is restarted under failure; a
container killed by a signal (137) and an exit code --restart-exit-codes names are
disruptions; each attempt's <<restart>> reaches the program; and the failing task's last
lines come before the restart and the verdict.

Worker 1 fails once, with the exit code the test gives, in the first attempt; every task
prints its attempt (<<restart>>) as it starts. The tasks bind no port.
"""

from __future__ import annotations

import json
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.control_plane import ControlPlane
from tests.support.kubelet import Kubelet
from tests.support.parallel import node_address
from tests.support.scenes import Scripted, stand_in_nodes
from tests.support.templates import RESTARTED as TEMPLATE

SCRIPT = """\
import json, os, pathlib, signal, sys, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
name = f"{task['type']}-{task['index']}"
markers, code, restart = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
who, seconds = sys.argv[4], float(sys.argv[5])
print(name, "attempt", restart, flush=True)
marker = markers / "failed"
if name == who and code and not marker.exists():
    marker.write_text("x")
    time.sleep(1)
    print(name, "failing with", code, flush=True)
    if code == 137:
        os.kill(os.getpid(), signal.SIGKILL)
    sys.exit(code)
# In an attempt where a task fails, the others outlast its failure (a loaded machine).
time.sleep(seconds if restart != "0" or not code else max(seconds, 10))
print(name, "done", flush=True)
"""


class Restarts(Scripted):
    def __init__(self, cli: Any, kube: ControlPlane, ns: str, tmp: Path, label: str) -> None:
        super().__init__(cli, kube, ns, tmp, label, name="rr", template=TEMPLATE, script=SCRIPT)

    def args(self, code: int, who: str = "worker-1", seconds: float = 2) -> list[str]:
        return [
            str(self.template), "-l", f"rr={self.label}", "--address", "internal-ip",
            "-N", "2", "--psn", "0", "--kubeconfig", self.kubeconfig,
            "--set", f"script={self.script}", "--set", f"markers={self.markers}",
            "--set", f"code={code}", "--set", f"who={who}", "--set", f"seconds={seconds}",
        ]  # fmt: skip

    def run(self, code: int, *args: str, who: str = "worker-1", seconds: float = 2) -> Any:
        return self.cli("run", *self.args(code, who, seconds), "--timeout", "3m", *args)

    def status(self) -> dict[str, Any]:
        result = self.cli("status", "rr", "--kubeconfig", self.kubeconfig, "-o", "json")
        assert result.code in (0, 1), result.err
        return dict(json.loads(result.out))


@pytest.fixture
def restarts(cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[Restarts]:
    nodes, label = stand_in_nodes("rr", 2, label_key="rr")
    with Kubelet(kube, nodes, tmp_path / "kubelet"):
        yield Restarts(cli, kube, namespace, tmp_path, label)


def restart_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("restarting run rr")]


def test_a_program_error_ends_the_run_under_restart_on_disruption_with_its_lines(
    restarts: Restarts,
) -> None:
    result = restarts.run(1, "--max-restarts", "2", "--restart-on", "disruption")
    assert result.code == 1, result.err
    assert restart_lines(result.err) == [], result.err
    lines = result.err.splitlines()
    assert lines[-1] == (
        "simpletfjob: error: run 'rr' failed: worker-1 exited 1 (a program error); "
        "--restart-on disruption restarts only disruptions"
    ), result.err
    # Before the verdict, what wait shows: the failing task's last lines.
    head = next(i for i, line in enumerate(lines) if line.startswith("worker-1: the last "))
    assert "worker-1 | worker-1 failing with 1" in lines[head:-1], result.err
    # No restart was made: the count did not move.
    data = restarts.status()
    assert (data["restarts"], data["maxRestarts"]) == (0, 2)
    codes = {task["task"]: task["exitCode"] for task in data["tasks"]}
    assert codes["worker-1"] == 1, data


def test_a_program_error_is_restarted_under_failure_and_restart_reaches_the_program(
    restarts: Restarts,
) -> None:
    result = restarts.run(1, "--max-restarts", "2", "--logs", "all")
    assert result.code == 0, result.err
    [line] = restart_lines(result.err)
    host = "(?:" + "|".join(re.escape(node_address(i)) for i in range(2)) + ")"
    assert re.fullmatch(
        r"restarting run rr \(1/2\) after a program error: worker-1 Failed: Error \(exit 1\); "
        rf"hosts now: {host}, {host}",
        line,
    ), line
    lines = result.err.splitlines()
    # The failing task's lines come before the restart's line.
    before = lines[: lines.index(line)]
    assert "worker-1 | worker-1 failing with 1" in before, result.err
    out = result.out.splitlines()
    for task in ("worker-0", "worker-1"):
        assert f"{task} | {task} attempt 0" in out, result.out
        assert f"{task} | {task} attempt 1" in out, result.out
    assert restarts.status()["restarts"] == 1


def test_a_container_killed_by_a_signal_is_a_disruption_restarted_under_disruption(
    restarts: Restarts,
) -> None:
    result = restarts.run(137, "--max-restarts", "1", "--restart-on", "disruption")
    assert result.code == 0, result.err
    [line] = restart_lines(result.err)
    assert line.startswith(
        "restarting run rr (1/1) after a disruption: worker-1 Failed: Error (exit 137); "
    ), line


def test_restart_exit_codes_make_an_exit_code_a_disruption(restarts: Restarts) -> None:
    result = restarts.run(
        3, "--max-restarts", "1", "--restart-on", "disruption", "--restart-exit-codes", "3,40-42"
    )
    assert result.code == 0, result.err
    [line] = restart_lines(result.err)
    assert line.startswith(
        "restarting run rr (1/1) after a disruption: worker-1 Failed: Error (exit 3); "
    ), line


def test_an_evaluator_that_fails_is_restarted_alone_and_the_run_goes_on(
    restarts: Restarts, tmp_path: Path
) -> None:
    bundles = tmp_path / "bundles"
    bundles.mkdir()
    result = restarts.run(
        1, "--evaluator", "--tasks-per-host", "2", "--max-restarts", "1",
        "--diagnose-on-failure", str(bundles), who="evaluator-0", seconds=20,
    )  # fmt: skip
    assert result.code == 0, result.err
    assert restart_lines(result.err) == [], result.err  # the run itself was not restarted
    lines = result.err.splitlines()
    [alone] = [line for line in lines if line.startswith("restarting evaluator-0")]
    # a task restarted alone is an attempt of its own: its bundle, before it is deleted
    (bundle,) = bundles.iterdir()
    assert bundle.name.startswith("rr-attempt-1-evaluator-0-diagnose-"), bundle
    assert alone == (
        "restarting evaluator-0 of run rr alone (1/1) after a program error: "
        f"evaluator-0 Failed: Error (exit 1); bundle: {bundle}"
    ), result.err
    with tarfile.open(bundle) as tar:
        summary = tar.extractfile("rr/summary.txt").read().decode()  # type: ignore[union-attr]
    assert "first failure: evaluator-0, exit code 1, reason Error: a program error" in summary
    assert "evaluator-0 failing with 1" in summary
    assert "evaluator-0 | evaluator-0 failing with 1" in lines[: lines.index(alone)], result.err
    assert lines[-1] == "run rr succeeded: worker-0 Succeeded", result.err


def test_wait_does_not_fail_a_run_whose_evaluator_failed(restarts: Restarts) -> None:
    applied = restarts.cli(
        "apply", *restarts.args(1, who="evaluator-0", seconds=8), "--evaluator",
        "--tasks-per-host", "2",
    )  # fmt: skip
    assert applied.code == 0, applied.err
    waited = restarts.cli("wait", "rr", "--kubeconfig", restarts.kubeconfig, "--timeout", "2m")
    assert waited.code == 0, waited.err
    lines = waited.err.splitlines()
    assert "evaluator-0 Failed: Error (exit 1)" in lines, waited.err
    assert lines[-1] == "run rr succeeded: worker-0 Succeeded", waited.err


def test_an_evaluator_not_restarted_is_said_and_the_run_goes_on(restarts: Restarts) -> None:
    result = restarts.run(
        1, "--evaluator", "--tasks-per-host", "2", "--max-restarts", "1",
        "--restart-on", "disruption", who="evaluator-0", seconds=12,
    )  # fmt: skip
    assert result.code == 0, result.err
    lines = result.err.splitlines()
    assert not [line for line in lines if line.startswith("restarting")], result.err
    assert (
        "evaluator-0 exited 1 (a program error); --restart-on disruption restarts only "
        "disruptions; run rr goes on without evaluator-0"
    ) in lines, result.err
    assert lines[-1] == "run rr succeeded: worker-0 Succeeded", result.err
    data = restarts.status()
    assert data["restarts"] == 0
    codes = {task["task"]: task["exitCode"] for task in data["tasks"]}
    assert codes["evaluator-0"] == 1, data
