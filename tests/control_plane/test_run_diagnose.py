"""`run --diagnose-on-failure DIR` on the real control plane, its pods run by the kubelet
stand-in: a bundle for each failure, written before `run` deletes anything, that holds the
failing task's log though the cluster deleted its Job and pod first (--cleanup-after 0s: the
TTL controller deletes a failed Job the moment it fails, and the garbage collector its pod).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import bundle_files, write
from tests.support.control_plane import ControlPlane
from tests.support.kubelet import Kubelet
from tests.support.scenes import Runs, stand_in_nodes

# worker-1 prints a traceback, then 30 lines (the traceback is not among the last 20), and
# exits 1, in every attempt; the attempt is in its error. The others run on.
SCRIPT = """\
import json, os, pathlib, sys, time, traceback
task = json.loads(os.environ["TF_CONFIG"])["task"]
name = f"{task['type']}-{task['index']}"
markers, mode, seconds = pathlib.Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
print(name, "started", flush=True)
if name != "worker-1":
    time.sleep(seconds)
    sys.exit(0)
attempt = len(list(markers.glob("failed-*")))
(markers / f"failed-{attempt}").touch()
try:
    raise ValueError(f"bad batch in attempt {attempt}")
except ValueError:
    traceback.print_exc(file=sys.stdout)
for i in range(30):
    print(name, "cleaning up", i, flush=True)
sys.exit(1)
"""


@pytest.fixture
def runs(cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[Runs]:
    nodes, label = stand_in_nodes("rd", 3, label_key="rt", label_prefix="rd-")
    with Kubelet(kube, nodes, tmp_path / "kubelet") as kubelet:
        found = Runs(cli, kube, kubelet, namespace, tmp_path, label)
        found.script = write(tmp_path / "failing.py", SCRIPT)
        yield found


def test_each_failure_has_its_bundle_though_the_ttl_deleted_the_failed_job_first(
    runs: Runs, tmp_path: Path
) -> None:
    out = tmp_path / "bundles"
    out.mkdir()
    result = runs.run(
        "--psn", "0", "--max-restarts", "1", "--cleanup-after", "0s", "--logs", "none",
        "--diagnose-on-failure", str(out), "--timeout", "3m", seconds=60,
    )  # fmt: skip
    assert result.code == 1, result.err
    first = sorted(out.glob("rt-attempt-1-diagnose-*.tar.gz"))
    last = sorted(out.glob("rt-diagnose-*.tar.gz"))
    assert (len(first), len(last), len(list(out.iterdir()))) == (1, 1, 2), result.err
    assert re.fullmatch(r"rt-attempt-1-diagnose-\d{8}T\d{6}Z\.tar\.gz", first[0].name)
    lines = result.err.splitlines()
    (restart,) = [line for line in lines if line.startswith("restarting run rt")]
    assert restart.endswith(f"; bundle: {first[0]}"), restart
    assert lines[-1].startswith("simpletfjob: error: run 'rt' failed: worker-1 Failed: ")
    assert lines[-1].endswith(f"; bundle: {last[0]}"), lines[-1]
    # each bundle holds its own attempt's failure: the first was not overwritten
    for attempt, path in enumerate([first[0], last[0]]):
        files = bundle_files(path)
        assert next(iter(files)) == "rt/summary.txt"
        log = files["rt/tasks/worker-1.log"].splitlines()
        assert log[0] == "worker-1 started"
        assert "Traceback (most recent call last):" in log
        assert f"ValueError: bad batch in attempt {attempt}" in log
        assert log[-1] == "worker-1 cleaning up 29"
        summary = files["rt/summary.txt"].splitlines()
        assert summary[2] == "state: Failed", summary
        assert "first failure: worker-1, exit code 1, reason Error: a program error" in summary
        # the failed task, though the follower saw its Job deleted, as last seen
        table = summary[summary.index("tasks:") + 1 :]
        assert any(re.match(r"  worker-1 +\S+ +Failed\b", row) for row in table), table
        error = summary.index("worker-1's error, from tasks/worker-1.log:")
        assert f"  ValueError: bad batch in attempt {attempt}" in summary[error:], summary
        # a task that runs on: its log as it is (a loaded machine may not have started it yet)
        assert files["rt/tasks/worker-0.log"] in ("", "worker-0 started\n"), sorted(files)
    # the failure output shows the error above the last lines, as wait does
    errors = [i for i, line in enumerate(lines) if line == "worker-1: its error:"]
    assert len(errors) == 2, result.err
    assert lines[errors[0] + 1] == "worker-1 | Traceback (most recent call last):"
    assert "worker-1 | ValueError: bad batch in attempt 0" in lines[errors[0] : errors[1]]
