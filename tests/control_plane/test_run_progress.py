"""A run's progress, stalls and the restart budget that follows progress, with real programs on
the kubelet stand-in and the real control plane (docs/runs.md#progress): `status` reads the
reporting task's log; a hung attempt is a stall (`run` restarts it, with no pod of it left
beside the next; `wait` fails it); an attempt that trains further gives its restart back.

The program (task.py) does what its mode says, attempt by attempt (<<restart>>); it writes
its markers under <<markers>>.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import bundle_files
from tests.support.control_plane import ControlPlane
from tests.support.kubelet import Kubelet
from tests.support.scenes import Scripted, stand_in_nodes
from tests.support.templates import PROGRESS as TEMPLATE

SCRIPT = """\
import json, os, pathlib, sys, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
name = f"{task['type']}-{task['index']}"
markers, mode, restart = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
(markers / f"pid-{restart}-{name}").write_text(str(os.getpid()))
if restart:  # no process of an attempt before this one may still run
    for old in markers.glob("pid-*"):
        if int(old.name.split("-")[1]) < restart:
            try:
                os.kill(int(old.read_text()), 0)
                (markers / "overlap").write_text(old.name)
            except ProcessLookupError:
                pass
def report(step, total=None, **metrics):
    print(json.dumps({"step": step, "total": total, **metrics}), flush=True)
if mode == "json":
    for step in range(1, 21):
        report(step, 20, loss=round(1 / step, 3))
        time.sleep(0.05)
    for _ in range(600):  # until the test lets it end
        if (markers / "go").exists():
            break
        time.sleep(0.1)
elif mode == "hang":
    report(1, 10)
    if restart == 0:
        time.sleep(3600)  # a hung all-reduce
elif mode == "silent":
    time.sleep(3600)
elif mode == "tqdm":
    from tqdm import tqdm
    for epoch in (1, 2):
        bar = tqdm(range(15), desc=f"Epoch {epoch}/2", file=sys.stderr, ascii=True)
        for i in bar:
            bar.set_postfix(loss=round(1 / (epoch * 15 + i), 4))
            time.sleep(0.02)
        bar.close()
elif mode == "pattern":
    for step in range(1, 4):
        print(f"it {step} of 10 loss={1 / step:.2f}", flush=True)
    print('{"step": 9}', flush=True)  # not read: the pattern is the only form
    for _ in range(600):
        if (markers / "go").exists():
            break
        time.sleep(0.1)
elif mode == "keras":  # a real fit, a line per epoch (verbose=2)
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    os.environ.pop("TF_CONFIG")  # one process: no distribution
    import keras
    import numpy as np
    x = np.random.default_rng(0).random((64, 4)).astype("float32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(x, x.sum(axis=1, keepdims=True), batch_size=16, epochs=3, verbose=2)
elif mode == "ckpt":  # resumes from its checkpoint, crashes after 3 new steps until step 12
    saved = markers / "checkpoint"
    start = int(saved.read_text()) if saved.exists() else 0
    for step in range(start + 1, start + 4):
        report(step, 12)
        saved.write_text(str(step))
        time.sleep(0.1)
    time.sleep(0.5)
    sys.exit(0 if start + 3 >= 12 else 3)
elif mode == "same":  # crashes at step 5 every time
    for step in range(1, 6):
        report(step, 12)
        time.sleep(0.05)
    time.sleep(0.5)
    sys.exit(3)
"""


class Progressing(Scripted):
    def __init__(self, cli: Any, kube: ControlPlane, ns: str, tmp: Path, label: str) -> None:
        super().__init__(cli, kube, ns, tmp, label, name="pg", template=TEMPLATE, script=SCRIPT)

    def args(self, mode: str, workers: int = 1) -> list[str]:
        return [
            str(self.template), "-l", f"pg={self.label}", "--address", "internal-ip",
            "-N", str(workers), "--psn", "0", "--kubeconfig", self.kubeconfig,
            "--set", f"script={self.script}", "--set", f"markers={self.markers}",
            "--set", f"mode={mode}",
        ]  # fmt: skip

    def keywords(self, mode: str) -> dict[str, Any]:
        """The args as the Python API's Client.run takes them."""
        return {
            "selector": f"pg={self.label}", "address": "internal-ip", "num": 1, "psn": 0,
            "values": {"script": str(self.script), "markers": str(self.markers), "mode": mode},
            "timeout": "2m",
        }  # fmt: skip

    def command(self, command: str, mode: str, *args: str, workers: int = 1) -> Any:
        return self.cli(command, *self.args(mode, workers), "--timeout", "2m", *args)

    def status(self) -> tuple[dict[str, Any], str]:
        found = self.cli("status", "pg", "--kubeconfig", self.kubeconfig, "-o", "json")
        assert found.code == 0, found.err
        table = self.cli("status", "pg", "--kubeconfig", self.kubeconfig)
        return dict(json.loads(found.out)), table.out

    def wait(self, *args: str) -> Any:
        return self.cli("wait", "pg", "--kubeconfig", self.kubeconfig, "--timeout", "2m", *args)

    def deciding_job(self) -> dict[str, str]:
        answer = self.kube.admin.get(f"/apis/batch/v1/namespaces/{self.ns}/jobs/pg-worker-0")
        return dict(answer["metadata"].get("annotations") or {})


@pytest.fixture
def progressing(
    cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path
) -> Iterator[Progressing]:
    nodes, label = stand_in_nodes("pg", 2, label_key="pg")
    with Kubelet(kube, nodes, tmp_path / "kubelet"):
        yield Progressing(cli, kube, namespace, tmp_path, label)


def until(test: Any, within: float = 30.0) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = test()
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError("not within the time")


def test_status_reads_a_json_line_program_and_the_note_outlives_its_pods(
    progressing: Progressing,
) -> None:
    applied = progressing.command("apply", "json")
    assert applied.code == 0, applied.err

    def at_the_end() -> Any:
        data, table = progressing.status()
        p = data["progress"]
        return (data, table) if p is not None and p["step"] == 20 else None

    data, table = until(at_the_end)
    p = data["progress"]
    assert (p["task"], p["total"], p["percent"], p["epoch"]) == ("worker-0", 20, 100, None)
    assert p["metrics"] == {"loss": 0.05}
    updated = time.mktime(time.strptime(p["updated"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    assert abs(updated - time.time()) < 60, p
    assert (data["restarts"], data["restartsWithoutProgress"]) == (0, 0)
    assert re.search(r"^progress  step 20/20 \(100%\)  loss 0\.05 [▁-█]{8}  [\d.]+ steps/s  ETA 0s  worker-0, \d+s ago$", table, re.M), table  # fmt: skip
    from simpletfjob import Client

    status = Client(kubeconfig=progressing.kubeconfig).get("pg").status()
    assert status.progress is not None and status.progress.step == 20
    (progressing.markers / "go").write_text("x")
    waited = progressing.wait("--cleanup", "running")
    assert waited.code == 0, waited.err
    # The note on the deciding Job: status shows it once the pods are gone.
    note = json.loads(progressing.deciding_job()["simpletfjob/progress"])
    assert (note["task"], note["step"], note["total"]) == ("worker-0", 20, 20)
    progressing.kube.admin.delete(
        f"/api/v1/namespaces/{progressing.ns}/pods", labelSelector="simpletfjob/job=pg"
    )
    until(lambda: not progressing.kube.admin.get(f"/api/v1/namespaces/{progressing.ns}/pods", labelSelector="simpletfjob/job=pg")["items"])  # fmt: skip
    data, _ = progressing.status()
    assert data["progress"]["step"] == 20, data


def test_a_real_tqdm_loop_is_read_with_its_epoch_and_postfix(progressing: Progressing) -> None:
    result = progressing.command("run", "tqdm", "--stall-timeout", "30s", "--cleanup", "none")
    assert result.code == 0, result.err
    data, _ = progressing.status()
    p = data["progress"]
    assert (p["epoch"], p["step"], p["total"]) == (2, 15, 15), p
    assert set(p["metrics"]) == {"loss"}, p


def test_a_hung_first_attempt_is_a_stall_that_run_restarts_with_nothing_of_it_left(
    progressing: Progressing,
) -> None:
    result = progressing.command(
        "run", "hang", "--stall-timeout", "5s", "--max-restarts", "1", workers=2
    )
    assert result.code == 0, result.err
    lines = result.err.splitlines()
    stalled = [line for line in lines if "stalled: no new step for 5s (last: step 1 at " in line]
    assert stalled, result.err
    restart = next(i for i, line in enumerate(lines) if line.startswith("restarting run pg"))
    assert "after a disruption: stalled: no new step for 5s" in lines[restart], result.err
    # Before it, the reporting task's last lines, then every task's state.
    assert any(line.startswith("worker-0: the last ") for line in lines[:restart]), result.err
    assert 'worker-0 | {"step": 1, "total": 10}' in lines[:restart], result.err
    assert {"worker-0: Running", "worker-1: Running"} <= {
        line.split(" on ")[0] for line in lines[:restart]
    }, result.err
    assert not (progressing.markers / "overlap").exists(), result.err
    assert len(list(progressing.markers.glob("pid-1-*"))) == 2


def test_wait_fails_a_hung_run_and_says_when_no_progress_was_ever_seen(
    progressing: Progressing,
) -> None:
    assert progressing.command("apply", "hang").code == 0
    waited = progressing.wait("--stall-timeout", "5s")
    assert waited.code == 1, waited.err
    last = waited.err.splitlines()[-1]
    assert re.fullmatch(
        r"simpletfjob: error: run 'pg' failed: stalled: no new step for 5s \(last: step 1 at "
        r"\d\d:\d\d:\d\d\)",
        last,
    ), waited.err
    # A failure verdict: --cleanup running (the default) deleted the tasks that still ran.
    jobs = f"/apis/batch/v1/namespaces/{progressing.ns}/jobs"
    until(lambda: not progressing.kube.admin.get(jobs, labelSelector="simpletfjob/job=pg")["items"])  # fmt: skip
    assert progressing.command("apply", "silent").code == 0
    out = progressing.markers / "bundles"
    out.mkdir()
    waited = progressing.wait("--stall-timeout", "5s", "--diagnose-on-failure", str(out))
    assert waited.code == 1, waited.err
    last = waited.err.splitlines()[-1]
    assert last.startswith(
        "simpletfjob: error: run 'pg' failed: stalled: no progress seen in 5s: worker-0 printed "
        "no step that simpletfjob reads"
    ), waited.err
    # the bundle, written before the cleanup, names the stall as the first failure
    (bundle,) = out.iterdir()
    assert last.endswith(f"; bundle: {bundle}"), last
    summary = bundle_files(bundle)["pg/summary.txt"]
    (first,) = [line for line in summary.splitlines() if line.startswith("first failure: ")]
    assert first.startswith("first failure: worker-0, stalled: no progress seen in 5s"), summary
    assert first.endswith(": a stall (a disruption)"), summary


def test_an_attempt_that_trains_further_gives_its_restart_back(progressing: Progressing) -> None:
    result = progressing.command(
        "run", "ckpt", "--max-restarts", "1", "--restart-exit-codes", "3", "--cleanup", "none"
    )
    assert result.code == 0, result.err
    resumed = [line for line in result.err.splitlines() if "resumed at" in line]
    assert resumed == [
        "attempt 2 resumed at step 4 (best before the restart: 3)",
        "attempt 3 resumed at step 7 (best before the restart: 6)",
        "attempt 4 resumed at step 10 (best before the restart: 9)",
    ], result.err
    counts = [
        re.sub(r"\).*", "", line.split(" (", 1)[1])
        for line in result.err.splitlines()
        if line.startswith("restarting run pg")
    ]
    assert counts == [
        "1/1",
        "1/1 in a row without progress; 2 in all",
        "1/1 in a row without progress; 3 in all",
    ], result.err
    data, table = progressing.status()
    assert (data["restarts"], data["maxRestarts"], data["restartsWithoutProgress"]) == (3, 1, 0)
    assert "restarts not known" not in table, table


def test_an_attempt_that_crashes_at_the_same_step_spends_its_restart(
    progressing: Progressing,
) -> None:
    result = progressing.command("run", "same", "--max-restarts", "1", "--restart-exit-codes", "3")
    assert result.code == 1, result.err
    assert len([line for line in result.err.splitlines() if "restarting run pg" in line]) == 1
    assert result.err.splitlines()[-1].endswith("no restart left (1 of 1 made)"), result.err


def test_a_header_pattern_is_the_only_form_read_and_travels_with_the_run(
    progressing: Progressing,
) -> None:
    header = (
        "# simpletfjob:\n#   options:\n"
        "#     progress-pattern: 'it (?P<step>\\d+) of (?P<total>\\d+) loss=(?P<loss>\\S+)'\n"
    )
    progressing.template.write_text(header + TEMPLATE)
    assert progressing.command("apply", "pattern").code == 0

    def read() -> Any:
        data, _ = progressing.status()
        p = data["progress"]
        return p if p is not None and p["step"] == 3 else None

    p = until(read)
    assert (p["step"], p["total"], p["metrics"]) == (3, 10, {"loss": 0.33}), p
    pattern = progressing.deciding_job()["simpletfjob/progress-pattern"]
    assert pattern == r"it (?P<step>\d+) of (?P<total>\d+) loss=(?P<loss>\S+)"
    (progressing.markers / "go").write_text("x")
    assert progressing.wait().code == 0


def test_a_real_keras_fit_is_read_by_epoch(progressing: Progressing) -> None:
    result = progressing.command("run", "keras", "--cleanup", "none")
    assert result.code == 0, result.err
    data, _ = progressing.status()
    p = data["progress"]
    assert (p["epoch"], p["epochs"], p["step"], p["total"], p["percent"]) == (3, 3, 4, 4, 100), p
    assert "loss" in p["metrics"], p


def test_wait_takes_the_stall_timeout_that_run_noted_on_the_run(progressing: Progressing) -> None:
    # run gives up first (--timeout), and leaves the hung run as it is
    left = progressing.cli(
        "run", *progressing.args("hang"), "--stall-timeout", "6s", "--timeout", "3s"
    )
    assert left.code == 3, left.err
    assert progressing.deciding_job()["simpletfjob/stall-timeout"] == "6"
    waited = progressing.wait()
    assert waited.code == 1, waited.err
    assert "failed: stalled: no new step for 6s" in waited.err.splitlines()[-1], waited.err


def test_a_stall_with_no_restart_left_is_the_verdict_and_the_hung_tasks_go(
    progressing: Progressing,
) -> None:
    result = progressing.command("run", "hang", "--stall-timeout", "4s")
    assert result.code == 1, result.err
    assert re.fullmatch(
        r"simpletfjob: error: run 'pg' failed: stalled: no new step for 4s \(last: step 1 at "
        r"\d\d:\d\d:\d\d\)",
        result.err.splitlines()[-1],
    ), result.err
    from simpletfjob import CauseKind, Client

    assert CauseKind("stalled") is CauseKind.STALLED
    jobs = f"/apis/batch/v1/namespaces/{progressing.ns}/jobs"
    until(lambda: not progressing.kube.admin.get(jobs, labelSelector="simpletfjob/job=pg")["items"])  # fmt: skip
    # The Python API: the same verdict, as a Cause of its own kind.
    client = Client(kubeconfig=progressing.kubeconfig)
    outcome = client.run(str(progressing.template), **progressing.keywords("hang"), stall_timeout="4s")  # fmt: skip
    assert outcome.cause is not None and outcome.cause.kind == CauseKind.STALLED, outcome


def test_a_progress_task_the_run_does_not_have_is_refused_before_anything_is_applied(
    progressing: Progressing,
) -> None:
    for command in ("apply", "run"):
        refused = progressing.command(command, "json", "--progress-task", "worker-9")
        assert refused.code == 2, refused.err
        assert refused.err.splitlines() == [
            "simpletfjob: error: --progress-task names 'worker-9', which the run does not have; "
            "its tasks are worker-0"
        ], refused.err
        assert refused.out == ""
        jobs = f"/apis/batch/v1/namespaces/{progressing.ns}/jobs"
        assert progressing.kube.admin.get(jobs)["items"] == []
