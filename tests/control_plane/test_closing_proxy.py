"""`wait`, `status -w` and `logs -f` behind a proxy that answers each request with
`Connection: close` (tests/support/faultproxy.py `close_each`), as many corporate proxies and
some API gateways do, on the real control plane and the kubelet stand-in.

Behind such a proxy the client holds no socket of its own for an answer, and a watch must still
hand over each event as it arrives. A run of a ps and two workers ends about three seconds
after it starts; each command, through the proxy, must see the end at once: `wait --timeout
25s` answers within a few seconds of the end (not at its deadline), `status -w` prints the end
and exits, `logs -f` shows every line and exits. The proxy relays a watch's body in chunks, or
(as an HTTP/1.0 proxy does) as bytes that end with the connection: each command is followed
through each, all on one run.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import trustme

from tests.conftest import console_script, write
from tests.support import forkserver
from tests.support.cluster import wait_for
from tests.support.control_plane import ControlPlane
from tests.support.faultproxy import FaultProxy
from tests.support.kubelet import Kubelet
from tests.support.logruns import PRELUDE, Live
from tests.support.scenes import stand_in_nodes
from tests.support.templates import FOLLOWED as TEMPLATE

LINES = 15  # each worker's lines, one every PACE seconds once the test says go: 3 s
PACE = 0.2
SOON = 6.0  # seconds after the run's end within which each command must have ended
FRAMINGS = ("chunked", "close")
COMMANDS = {
    "wait": ("wait", "lf", "--timeout", "25s", "--cleanup", "none"),
    "status -w": ("status", "lf", "-w"),
    "logs -f": ("logs", "lf", "-f", "--tail", "-1"),
}

TASK = f"""
if task["type"] == "ps":
    say("ready")
    time.sleep(3600)
wait_for_marker("go", 120)
for i in range({LINES}):
    say("line", i)
    time.sleep({PACE})
"""


@dataclass
class Outcome:
    code: int | None  # None: still running SOON seconds after the end (then killed)
    after_end: float  # seconds from the run's end to the command's exit
    out: list[str]
    err: list[str]


def complete(kube: ControlPlane, ns: str, job: str) -> bool:
    found = kube.admin.get(f"/apis/batch/v1/namespaces/{ns}/jobs/{job}")
    conditions = (found.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)


@pytest.fixture(scope="module")
def outcomes(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[tuple[str, str], Outcome]]:
    """Each command through each proxy, on one run: how and when each ended."""
    kube = control_plane
    tmp = tmp_path_factory.mktemp("closing-proxy")
    kube.delete_nodes()
    ns = kube.create_namespace(prefix="cls")
    markers = tmp / "markers"
    markers.mkdir()
    template = write(tmp / "lf.yaml", TEMPLATE)
    script = write(tmp / "task.py", PRELUDE + TASK)
    admin = kube.kubeconfig(tmp / "admin", namespace=ns)
    nodes, _ = stand_in_nodes("cls", 3)
    found: dict[tuple[str, str], Outcome] = {}
    ca = trustme.CA()
    with (
        Kubelet(kube, nodes, tmp / "kubelet") as kubelet,
        FaultProxy(kube.url, ca_file=kube.ca_file, tls=ca) as chunked,
        FaultProxy(kube.url, ca_file=kube.ca_file, tls=ca) as closing,
    ):
        applied = forkserver.run(
            [
                console_script(), "apply", str(template), "--kubeconfig", str(admin),
                "--nodes", ",".join(kubelet.nodes), "--set", f"script={script}",
                "--set", f"markers={markers}", "--set", "restart_policy=Never",
                "--set", "backoff=0",
            ],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert applied.returncode == 0, applied.stderr
        proxies = {"chunked": chunked, "close": closing}
        live: dict[tuple[str, str], Live] = {}
        try:
            for framing, proxy in proxies.items():
                proxy.close_each(framing)
                kubeconfig = proxy.kubeconfig(tmp / f"kc-{framing}", token=kube.admin_token)
                for command, args in COMMANDS.items():
                    live[command, framing] = Live(*args, "-n", ns, "--kubeconfig", str(kubeconfig))
            # Every command follows the run (its first watch is open) before it starts.
            for proxy in proxies.values():
                wait_for(lambda p=proxy: len(p.seen("watch", "jobs")) >= 3, 60, "the watches")
            wait_for(lambda: any("ps-0 ready" in line for line in live["logs -f", "close"].out),
                     60, "the ps's first line")  # fmt: skip
            time.sleep(1.0)  # the pods' watches too, where they open
            (markers / "go").touch()
            wait_for(lambda: complete(kube, ns, "lf-worker-0"), 60, "worker-0's Job's end")
            ended = time.monotonic()
            exits: dict[tuple[str, str], float] = {}
            while len(exits) < len(live) and time.monotonic() < ended + SOON:
                for key, command in live.items():
                    if key not in exits and command.proc.poll() is not None:
                        exits[key] = time.monotonic()
                time.sleep(0.02)
            for key, command in live.items():
                if key not in exits:
                    command.proc.kill()
                result = command.finish(timeout=30)
                found[key] = Outcome(
                    result.code if key in exits else None,
                    exits.get(key, time.monotonic()) - ended,
                    result.out.splitlines(),
                    result.err.splitlines(),
                )
        finally:
            for command in live.values():
                if command.proc.poll() is None:
                    command.proc.kill()
    kube.delete_nodes()
    yield found


@pytest.mark.parametrize("framing", FRAMINGS)
def test_wait_answers_within_seconds_of_the_end_not_at_its_deadline(
    outcomes: dict[tuple[str, str], Outcome], framing: str
) -> None:
    outcome = outcomes["wait", framing]
    err = "\n".join(outcome.err)
    assert outcome.code == 0, (outcome.after_end, err)
    assert outcome.after_end < SOON, err
    assert outcome.err[-1] == "run lf succeeded: worker-0 Succeeded", err
    assert not outcome.out


@pytest.mark.parametrize("framing", FRAMINGS)
def test_status_watch_prints_the_end_and_exits(
    outcomes: dict[tuple[str, str], Outcome], framing: str
) -> None:
    outcome = outcomes["status -w", framing]
    err = "\n".join(outcome.err)
    assert outcome.code == 0, (outcome.after_end, outcome.out, err)
    rows = [line.split() for line in outcome.out[5:]]  # the head, the header, 3 tasks
    assert ["worker-0", "Succeeded"] in [row[:3:2] for row in rows], outcome.out
    assert outcome.err[-1] == "run lf succeeded: worker-0 Succeeded", err


@pytest.mark.parametrize("framing", FRAMINGS)
def test_logs_follow_shows_every_line_and_exits(
    outcomes: dict[tuple[str, str], Outcome], framing: str
) -> None:
    outcome = outcomes["logs -f", framing]
    err = "\n".join(outcome.err)
    assert outcome.code == 0, (outcome.after_end, err)
    for worker in ("worker-0", "worker-1"):  # (the prefixes are as wide as the longest)
        lines = [line for line in outcome.out if line.startswith(f"{worker} | ")]
        assert lines == [f"{worker} | {worker} line {i}" for i in range(LINES)], outcome.out
    assert [line for line in outcome.out if line.startswith("ps-0 ")] == ["ps-0     | ps-0 ready"]
