"""`logs RUN -f` behind the fault proxy (tests/support/faultproxy.py), on the real control plane
and the kubelet stand-in: each fault starting before the command's watch is up and after it
(then every open watch and log stream is cut too). A passing fault is ridden out with one line
when the server goes and one when it is back, and every line of every task comes once, in
order (`--tail -1`); a refusal ends the command in one line; a server never reached fails in one line.
Never a traceback or a hang.

The scenarios share one kubelet stand-in and run a few at a time from one module-scoped
fixture, each with a namespace, a run and a proxy of its own; each parametrized test checks
its own scenario, as tests/process/test_faults.py does.
"""

from __future__ import annotations

import concurrent.futures
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

from tests.conftest import console_script, write
from tests.support import forkserver
from tests.support.cluster import wait_for
from tests.support.control_plane import ControlPlane
from tests.support.faultproxy import BACK, LOST, FaultProxy
from tests.support.faultproxy import FAULTS as ALL_FAULTS
from tests.support.kubelet import Kubelet, Node
from tests.support.logruns import PRELUDE, Live
from tests.support.parallel import node_address
from tests.support.templates import FOLLOWED as TEMPLATE

# The scenarios run from one module-scoped fixture for a minute or two: started first
# (tests/conftest.py), so that the run does not end with one worker busy with them alone.
pytestmark = pytest.mark.slow

SCRIPT = console_script()
LINES = 30  # each worker's lines, one every PACE seconds once the test says go
PACE = 0.2
HOLD = 4.0  # seconds a fault lasts: past one call's first retries
WORKERS = 4  # scenarios at once
TIMEOUT = 150.0  # seconds a scenario may take before it counts as a hang

TASK = f"""
if task["type"] == "ps":
    say("ready")
    time.sleep(3600)
wait_for_marker("go", 120)
for i in range({LINES}):
    say("line", i)
    time.sleep({PACE})
if task["index"] == 0:  # the deciding worker ends last: every other log is whole by then
    time.sleep(1)
"""

# The faults of `wait`, `run` and `status -w` (tests/process/test_faults.py), but the one whose
# server comes back refusing the credentials: a log stream has nothing more to show of it.
FAULTS = {name: fault for name, fault in ALL_FAULTS.items() if name != "down, then 401"}
REFUSALS = ("401", "403")
READY = "ps-0     | ps-0 ready"


@dataclass(frozen=True)
class Scenario:
    fault: str
    when: str

    @property
    def name(self) -> str:
        return f"{self.fault}-{self.when}"


@dataclass
class Outcome:
    code: int
    out: list[str]
    err: list[str]


SCENARIOS = [Scenario(f, w) for f in FAULTS for w in ("before", "after")]


def play(kube: ControlPlane, nodes: list[str], tmp: Path, scenario: Scenario) -> Outcome:
    """Apply a run of one ps and two workers, follow its logs through a faulty proxy."""
    ns = kube.create_namespace(prefix="lfx")
    here = tmp / scenario.name
    here.mkdir()
    markers = here / "markers"
    markers.mkdir()
    template = write(here / "lf.yaml", TEMPLATE)
    script = write(here / "task.py", PRELUDE + TASK)
    admin = kube.kubeconfig(here / "admin", namespace=ns)
    applied = forkserver.run(
        [
            SCRIPT, "apply", str(template), "--kubeconfig", str(admin), "--nodes", ",".join(nodes),
            "--set", f"script={script}", "--set", f"markers={markers}",
            "--set", "restart_policy=Never", "--set", "backoff=0",
        ],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    with FaultProxy(kube.url, ca_file=kube.ca_file, tls=trustme.CA()) as proxy:
        kubeconfig = proxy.kubeconfig(here / "kc", token=kube.admin_token, namespace=ns)
        fault = FAULTS[scenario.fault]
        if scenario.when == "before":
            fault(proxy)
        live = Live("logs", "lf", "-f", "--tail", "-1", "--kubeconfig", str(kubeconfig))
        try:
            if scenario.when == "after":
                proxy.wait_for("watch", "pods", timeout=60)
                wait_for(lambda: READY in live.out, 60, "the ps's first line")
                fault(proxy)
                proxy.cut_streams()
            (markers / "go").touch()
            if scenario.fault == "down" and scenario.when == "before":
                # Never reached since it started: it must end on its own, however long a
                # loaded machine takes to start it, not find the server back after HOLD.
                end = time.monotonic() + TIMEOUT
                while live.proc.poll() is None and time.monotonic() < end:
                    time.sleep(0.05)
            else:
                # The fault holds HOLD seconds from the command's first request, however long
                # a loaded machine takes to start the command.
                wait_for(lambda: proxy.requests, 60, "the command's first request")
                time.sleep(HOLD)
            proxy.clear()
            if scenario.fault == "down":
                proxy.up()
            result = live.finish(timeout=TIMEOUT)
        finally:
            if live.proc.poll() is None:
                live.proc.kill()
    return Outcome(result.code, result.out.splitlines(), result.err.splitlines())


@pytest.fixture(scope="module")
def outcomes(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Outcome | BaseException]]:
    tmp = tmp_path_factory.mktemp("logs-faults")
    control_plane.delete_nodes()
    nodes = [Node(f"lfx-{i}", node_address(i)) for i in range(3)]
    results: dict[str, Outcome | BaseException] = {}
    with Kubelet(control_plane, nodes, tmp / "kubelet") as kubelet:
        names = list(kubelet.nodes)
        with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
            futures = {pool.submit(play, control_plane, names, tmp, s): s for s in SCENARIOS}
            for future in concurrent.futures.as_completed(futures):
                try:
                    results[futures[future].name] = future.result()
                except BaseException as e:  # reported by the scenario's test
                    results[futures[future].name] = e
    control_plane.delete_nodes()
    yield results


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_logs_follow_rides_a_fault_out_or_fails_in_one_line(
    outcomes: dict[str, Outcome | BaseException], scenario: Scenario
) -> None:
    outcome = outcomes[scenario.name]
    if isinstance(outcome, BaseException):
        raise outcome
    err = "\n".join(outcome.err)
    assert "Traceback" not in err and "internal error" not in err, err
    errors = [line for line in outcome.err if line.startswith("simpletfjob: error:")]
    lost = [line for line in outcome.err if "lost the API server" in line]
    back = [line for line in outcome.err if BACK.fullmatch(line)]
    assert len(lost) <= 1 and len(back) <= len(lost), err  # one line each way
    for line in lost:
        assert LOST.fullmatch(line), line
    if scenario.fault == "down" and scenario.when == "before":
        # never reached since it started: more often a wrong context than an outage
        assert outcome.code == 1, err
        assert errors == [outcome.err[-1]] and "unreachable" in errors[0], err
        assert not outcome.out, outcome.out
        return
    if scenario.fault in REFUSALS:
        assert outcome.code == 1, err
        assert errors == [outcome.err[-1]], err
        assert f"({scenario.fault} " in errors[0], err
        return
    assert outcome.code == 0, err
    assert not errors, err
    # every line of every task, once and in order, whatever was cut and resumed
    for worker in ("worker-0", "worker-1"):  # (the prefixes are as wide as the longest)
        lines = [line for line in outcome.out if line.startswith(f"{worker} | ")]
        assert lines == [f"{worker} | {worker} line {i}" for i in range(LINES)], outcome.out
    assert [line for line in outcome.out if line.startswith("ps-0 ")] == [READY]
