"""`logs -f` and `run --logs` while the API server restarts: the follow rides the outage out
as `wait` does (one line when the server goes, one when it is back), and each task's log goes
on from where it stopped, with no line lost and none repeated.

On a control plane of this module's own (test_outage.py's fixtures), whose kube-apiserver is
killed (SIGKILL) and started again while the tasks print, ten lines a second each, so that the
lines of one second must be told apart when a log is opened again from that second.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Result
from tests.control_plane.test_outage import outage, outage_lines, plane  # noqa: F401 -- fixtures
from tests.support.control_plane import ControlPlane
from tests.support.kubelet import Kubelet
from tests.support.logruns import Live, LogRun, prefixed
from tests.support.scenes import stand_in_nodes

THROUGH = """
if task["type"] == "ps":
    time.sleep(3600)
i = 0
while not (markers / "back").exists() and i < 3000:  # through the outage
    say("line", i)
    i += 1
    time.sleep(0.1)
for _ in range(20):  # and on, once the server is back
    say("line", i)
    i += 1
    time.sleep(0.05)
say("end", i)
"""

LINE = re.compile(r"(worker-\d) (line|end) (\d+)")


@pytest.fixture
def lf(
    cli: Any,
    outage: ControlPlane,  # noqa: F811 -- the fixture
    tmp_path: Path,
) -> Iterator[LogRun]:
    namespace = outage.create_namespace()
    nodes, _ = stand_in_nodes("lo", 3)
    with Kubelet(outage, nodes, tmp_path / "kubelet") as kubelet:
        yield LogRun(cli, outage, kubelet, namespace, tmp_path)


def restart_while_printing(lf: LogRun, live: Live) -> None:
    """Kill the API server once both workers' lines stream, start it 6 s later, let them end."""
    try:
        live.saw("worker-0 | worker-0 line 10", 90)
        live.saw("worker-1 | worker-1 line 10", 30)
        lf.kube.kill_apiserver()
        time.sleep(6)
        lf.kube.start_apiserver()
        lf.mark("back")
    except BaseException:
        live.proc.kill()
        raise


def every_line_once(result: Result) -> None:
    """Each worker's lines, numbered from 0, each once and in order, up to its end line."""
    by_task = prefixed(result.out)
    for task in ("worker-0", "worker-1"):
        lines = by_task[task]
        parsed = [LINE.fullmatch(line) for line in lines]
        assert all(parsed), lines
        numbers = [int(m[3]) for m in parsed if m]
        assert numbers == list(range(len(lines))), f"{task}: {numbers}"
        assert lines[-1] == f"{task} end {len(lines) - 1}"
        assert len(lines) > 60  # lines came before, through and after the outage


def test_logs_follow_rides_out_an_api_server_restart_with_every_line_once(lf: LogRun) -> None:
    lf.apply(THROUGH)
    live = Live(
        "logs", "lf", "-f", "--role", "worker", "--tail", "-1", "--kubeconfig", lf.kubeconfig,
        home=lf.tmp,
    )  # fmt: skip
    restart_while_printing(lf, live)
    result = live.finish(180)
    assert result.code == 0, result.err
    every_line_once(result)
    (lost,), (back,) = outage_lines(result.err)
    assert lost[3] == "retrying until it is back (no --timeout)", lost[0]
    lines = result.err.splitlines()
    assert lines.index(lost[0]) < lines.index(back[0])
    assert lines[-1] == "run lf succeeded: worker-0 Succeeded"


def test_run_logs_rides_out_an_api_server_restart_with_every_line_once(lf: LogRun) -> None:
    nodes = ",".join(lf.kubelet.nodes)
    args = lf.args(THROUGH)
    live = Live(
        "run", *args, "--nodes", nodes, "--logs", "all", "--timeout", "5m", "--cleanup", "none",
        home=lf.tmp,
    )  # fmt: skip
    restart_while_printing(lf, live)
    result = live.finish(180)
    assert result.code == 0, result.err
    every_line_once(result)
    (lost,), (back,) = outage_lines(result.err)
    assert lost[3] == "retrying until the --timeout (5m)", lost[0]
    lines = result.err.splitlines()
    assert lines.index(lost[0]) < lines.index(back[0])
    assert lines[-1] == "run lf succeeded: worker-0 Succeeded"
