"""What the tests of `logs -f` and `run --logs` share: a run whose tasks run a script of the
test's own on the kubelet stand-in, and the console script followed as it prints.

Each task runs `python SCRIPT MARKERS` with its TF_CONFIG; the script reads its task's name
from it (`name`, 'worker-1') and may wait for a marker file that the test creates once it
has seen something (`wait_for_marker`), so that a test can tell what came live.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from typing import Any

from tests.conftest import Result, console_script, write
from tests.support.cluster import wait_for
from tests.support.control_plane import ControlPlane
from tests.support.kubelet import Kubelet
from tests.support.templates import FOLLOWED as TEMPLATE

PRELUDE = """\
import json, os, pathlib, subprocess, sys, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
name = f"{task['type']}-{task['index']}"
markers = pathlib.Path(sys.argv[1])

def say(*words):
    print(name, *words, flush=True)

def once(marker):
    \"\"\"True the first time it is asked for this marker, in any run of any container.\"\"\"
    path = markers / marker
    try:
        path.touch(exist_ok=False)
    except FileExistsError:
        return False
    return True

def wait_for_marker(marker, seconds=60):
    end = time.monotonic() + seconds
    while not (markers / marker).exists() and time.monotonic() < end:
        time.sleep(0.05)

"""


class LogRun:
    """A run named lf of the template on the kubelet's nodes, and the commands a user runs on it."""

    def __init__(self, cli: Any, kube: ControlPlane, kubelet: Kubelet, ns: str, tmp: Path) -> None:
        self.cli, self.kube, self.kubelet, self.ns, self.tmp = cli, kube, kubelet, ns, tmp
        self.template = write(tmp / "lf.yaml", TEMPLATE)
        self.kubeconfig = str(kube.kubeconfig(tmp / "kc", namespace=ns))
        self.markers = tmp / "markers"
        self.markers.mkdir()

    def args(self, script: str, restart: str = "Never", backoff: int = 0) -> list[str]:
        path = write(self.tmp / "task.py", PRELUDE + script)
        return [
            str(self.template), "--kubeconfig", self.kubeconfig,
            "--set", f"script={path}", "--set", f"markers={self.markers}",
            "--set", f"restart_policy={restart}", "--set", f"backoff={backoff}",
        ]  # fmt: skip

    def apply(self, script: str, *args: str, restart: str = "Never", backoff: int = 0) -> None:
        nodes = ",".join(self.kubelet.nodes)
        result = self.cli("apply", *self.args(script, restart, backoff), "--nodes", nodes, *args)
        assert result.code == 0, result.err

    def logs(self, *args: str) -> Result:
        return self.cli("logs", "lf", "--kubeconfig", self.kubeconfig, *args)  # type: ignore[no-any-return]

    def mark(self, marker: str) -> None:
        (self.markers / marker).touch()

    def running(self, task: str) -> bool:
        pods = self.kube.pods(self.ns, f"job-name=lf-{task}")
        return any(p.get("status", {}).get("phase") == "Running" for p in pods)

    def job_done(self, task: str) -> bool:
        job = self.kube.admin.get(f"/apis/batch/v1/namespaces/{self.ns}/jobs/lf-{task}")
        return any(
            c["type"] in ("Complete", "Failed") and c["status"] == "True"
            for c in job.get("status", {}).get("conditions") or []
        )


class Live:
    """The console script as a process of its own, its stdout and stderr read line by line as they come."""

    def __init__(self, *args: str, home: Path | None = None) -> None:
        env = dict(os.environ)
        if home is not None:
            env["HOME"] = str(home)
        for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
            env.pop(name, None)
        self.proc = subprocess.Popen(
            [console_script(), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.err), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: Any, lines: list[str]) -> None:
        for raw in stream:
            lines.append(raw.decode(errors="replace").rstrip("\n"))

    def saw(self, line: str, timeout: float = 30, *, stderr: bool = False) -> None:
        """Wait until the exact line has come (on stdout, or stderr)."""
        lines = self.err if stderr else self.out
        wait_for(lambda: line in lines, timeout, f"{line!r} from {self.proc.args[1]}")

    def saw_part(self, text: str, timeout: float = 30, *, stderr: bool = False) -> None:
        lines = self.err if stderr else self.out
        wait_for(lambda: any(text in line for line in lines), timeout, repr(text))

    def finish(self, timeout: float = 120) -> Result:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        for reader in self._readers:
            reader.join(10)
        return Result(code, "".join(f"{line}\n" for line in self.out), "\n".join(self.err))


def prefixed(out: str) -> dict[str, list[str]]:
    """The lines of each task, from `task | line` output."""
    found: dict[str, list[str]] = {}
    for line in out.splitlines():
        task, _, text = line.partition(" | ")
        found.setdefault(task.strip(), []).append(text)
    return found
