"""`wait`, `run` and `status -w` behind the fault proxy (tests/support/faultproxy.py), each fault
starting before the command's watches are up and after: each command rides it out with one
line when the server goes and one when it is back, or fails in one clear line, or with
--timeout ends there (exit 3) saying since when the server has been away. Never a traceback,
a wrong verdict, or a hang past --timeout.

Every scenario runs the installed console script (forked by tests/support/forkserver.py)
against a loopback API server of its own behind a proxy of its own; the scenarios run a few
at a time from one module-scoped fixture, and each parametrized test checks its own, as
tests/process/test_adversarial.py does with the error table.
"""

from __future__ import annotations

import concurrent.futures
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, console_script, open_cluster
from tests.support import forkserver
from tests.support.faultproxy import BACK, FAULTS, LOST, FaultProxy
from tests.support.kubeapi import KubeAPI, job_status, serve
from tests.support.scenes import load_run

# The scenarios run from one module-scoped fixture for a minute or two: started first
# (tests/conftest.py), so that the run does not end with one worker busy with them alone.
pytestmark = pytest.mark.slow

SCRIPT = console_script()
WORKERS = 4
HOLD = 4.0  # seconds a passing fault lasts: past one call's first retries
TIMEOUT = 10  # --timeout of the scenarios whose fault lasts
SLACK = 40.0  # seconds past what a scenario should take before it counts as a hang
NS = "ml"

REFUSALS = ("401", "403", "down, then 401")
REQUESTS = 150  # more requests than a scenario needs: a command that spins on a fault
COMMANDS = ("wait", "status -w", "run")
WHEN = ("before", "after")
LASTING = ("500", "cut", "down", "410", "slow")  # the faults left on until --timeout


@dataclass(frozen=True)
class Scenario:
    command: str
    fault: str
    when: str
    lasting: bool = False

    @property
    def name(self) -> str:
        return f"{self.command}-{self.fault}-{self.when}" + ("-lasting" if self.lasting else "")


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    took: float  # seconds from the fault's start (or the command's, before) to its end
    finished_at: float | None  # when the test finished the run, after the start
    requests: int  # what reached the proxy


SCENARIOS = [Scenario(c, f, w) for c in COMMANDS for f in FAULTS for w in WHEN] + [
    Scenario(c, f, w, lasting=True) for c in ("wait", "run") for f in LASTING for w in WHEN
]


def finish(api: KubeAPI, namespace: str) -> None:
    """The Job controller: worker-0's Job complete."""
    api.patch(
        "jobs",
        "mnist-worker-0",
        {"status": job_status(succeeded=1, complete=True)},
        namespace=namespace,
        subresource="status",
    )


def play(scenario: Scenario) -> Outcome:
    """Run one scenario (see the module docstring) and what the command did."""
    directory = Path(tempfile.mkdtemp(prefix="simpletfjob-faults-"))
    with serve(open_cluster()) as api, FaultProxy(api.url) as proxy:
        namespace = NS
        if scenario.command == "run":
            namespace = "train"
            api.load(
                "namespaces",
                [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}],
            )
        else:
            load_run(api)
        kubeconfig = proxy.kubeconfig(directory / "kubeconfig", namespace=namespace)
        args = {
            "wait": ["wait", "mnist"],
            "status -w": ["status", "mnist", "-w"],
            "run": ["run", str(EXAMPLES / "mnist.yaml"), "--nodes", "h1,h2,h3", "--logs", "none"],
        }[scenario.command]
        if scenario.command != "status -w":
            args += ["--timeout", f"{TIMEOUT}s" if scenario.lasting else "5m"]
        fault = FAULTS[scenario.fault]
        if scenario.when == "before":
            fault(proxy)
        started = time.monotonic()
        proc = forkserver.Popen(
            [SCRIPT, *args, "--kubeconfig", str(kubeconfig)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            if scenario.when == "after":
                for resource in ("jobs", "pods"):
                    _until(lambda r=resource: proxy.wait_for("watch", r, timeout=0) or True, proc)
                started = time.monotonic()
                fault(proxy)
                proxy.cut_streams()
            finished_at = None
            if not scenario.lasting:
                # A server down since before the start is never reached: the command must end
                # on its own, however long a loaded machine takes to start it, not find the
                # server back after HOLD.
                never = scenario.when == "before" and scenario.fault.startswith("down")
                if scenario.when == "before" and not never:
                    # HOLD seconds from the command's first request, however long a loaded
                    # machine takes to start it
                    _until(lambda: proxy.requests, proc)
                _sleep(HOLD + SLACK if never else HOLD, proc)
                proxy.clear()
                if scenario.fault == "down, then 401":
                    proxy.refuse(401)
                if scenario.fault.startswith("down"):
                    proxy.up()
                if scenario.command == "run":  # once it is applied
                    _until(lambda: len(api.objects("jobs", namespace)) == 3, proc)
                if proc.poll() is None:
                    finish(api, namespace)
                    finished_at = time.monotonic() - started
            limit = (TIMEOUT if scenario.lasting else HOLD) + SLACK
            out, err = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            err += "\n[the test: hung, killed]"
        finally:
            if proc.poll() is None:
                proc.kill()
        took = time.monotonic() - started
        return Outcome(proc.returncode, out, err, took, finished_at, len(proxy.requests))


def _sleep(seconds: float, proc: subprocess.Popen[str]) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and proc.poll() is None:
        time.sleep(0.05)


def _until(check: Callable[[], object], proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + SLACK
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if check():
                return
        except AssertionError:
            pass
        time.sleep(0.05)


@pytest.fixture(scope="module")
def outcomes() -> Iterator[dict[str, Outcome | BaseException]]:
    results: dict[str, Outcome | BaseException] = {}
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        futures = {pool.submit(play, s): s for s in SCENARIOS}
        for future in concurrent.futures.as_completed(futures):
            try:
                results[futures[future].name] = future.result()
            except BaseException as e:  # reported by the scenario's test
                results[futures[future].name] = e
    yield results


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_a_fault_is_ridden_out_or_fails_in_one_line(
    outcomes: dict[str, Outcome | BaseException], scenario: Scenario
) -> None:
    outcome = outcomes[scenario.name]
    if isinstance(outcome, BaseException):
        raise outcome
    err = outcome.err
    lines = err.splitlines()
    assert "Traceback" not in err and "internal error" not in err, err
    assert "[the test: hung, killed]" not in err, err
    errors = [line for line in lines if line.startswith("simpletfjob: error:")]
    lost = [line for line in lines if "lost the API server" in line]
    back = [line for line in lines if BACK.fullmatch(line)]
    assert len(lost) <= 1 and len(back) <= len(lost), err  # one line each way
    for line in lost:
        assert LOST.fullmatch(line), line
        assert "Connection broken" not in line and "IncompleteRead" not in line, line
    assert outcome.requests < REQUESTS, outcome.requests  # (a watch answered 410 made 1700)
    if scenario.fault.startswith("down") and scenario.when == "before":
        # Never reached since it started: more often a wrong context than an outage.
        assert outcome.code == 1, err
        assert errors == [lines[-1]] and "unreachable" in lines[-1], err
        return
    if scenario.fault in REFUSALS:
        # An answer about the request, not an outage: one line, at once (after an outage too).
        assert outcome.code == 1, err
        assert errors == [lines[-1]], err
        assert f"({scenario.fault.removeprefix('down, then ')} " in lines[-1], err
        return
    if scenario.lasting:
        assert outcome.code == 3, err
        assert errors == [lines[-1]], err
        assert re.match(
            rf"simpletfjob: error: run 'mnist' did not end within {TIMEOUT}s", lines[-1]
        ) or (  # run: the server failing from the start, no plan could be made
            scenario.command == "run"
            and scenario.when == "before"
            and scenario.fault in ("500", "cut")
            and re.match(
                rf"simpletfjob: error: the run did not start within {TIMEOUT}s: ", lines[-1]
            )
        ), err
        assert outcome.took < TIMEOUT + SLACK / 2, outcome.took
        return
    assert outcome.code == 0, err
    assert not errors, err
    assert lines[-1] == "run mnist succeeded: worker-0 Succeeded", err
    assert outcome.finished_at is not None  # the verdict came after the run's end, not before
