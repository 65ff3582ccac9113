"""`python -m tests.support.playground`: a local cluster to try the tool on, as a process.

It is started as a newcomer starts it (docs/getting-started.md), its `KUBECONFIG=` line read,
and the installed `simpletfjob` run against it: `nodes`, and a run whose tasks the kubelet
stand-in runs with the interpreter `--python` names. Ctrl-C (or SIGTERM) must then stop every
process it started: the tasks', the control plane's, and itself. Each start costs a control
plane (about 10 s of CPU); the tests are skipped without $KUBEBUILDER_ASSETS, saying so.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, console_script, write
from tests.support.control_plane import find_assets
from tests.support.playground import loopback_problem

pytestmark = pytest.mark.slow  # a control plane of its own each: started first

START = 240.0  # seconds for the control plane to come up on a loaded machine (control_plane.py)


class Playground:
    """The playground as a process, and the KUBECONFIG it printed."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.playground", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a process group of its own, as a terminal's job is
        )
        self.kubeconfig = self._first_line().removeprefix("KUBECONFIG=")

    def _first_line(self) -> str:
        assert self.process.stdout is not None
        with selectors.DefaultSelector() as waiting:
            waiting.register(self.process.stdout, selectors.EVENT_READ)
            if not waiting.select(START):
                self.process.kill()
                pytest.fail(f"no KUBECONFIG line within {START} s: {self.stop()[1]}")
        line = self.process.stdout.readline().rstrip("\n")
        assert line.startswith("KUBECONFIG=/"), (line, self.stop())
        return line

    def simpletfjob(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": self.kubeconfig, "HOME": str(cwd)}
        return subprocess.run(
            [console_script(), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
        )

    def stop(self, sig: int = signal.SIGINT) -> tuple[int, str]:
        """Send `sig`, SIGINT to its whole group as a terminal's Ctrl-C does (the control
        plane's processes get it too); its exit status and what it said on stderr."""
        if self.process.poll() is None:
            if sig == signal.SIGINT:
                os.killpg(self.process.pid, sig)
            else:
                self.process.send_signal(sig)
        _, err = self.process.communicate(timeout=60)
        return self.process.returncode, err


@pytest.fixture
def assets() -> None:
    found, why = find_assets()
    if found is None:
        pytest.skip(why)


@pytest.fixture
def started(assets: None, tmp_path: Path) -> Iterator[Playground]:
    python = Path(sys.executable).with_name("python3")
    playground = Playground(
        "--nodes", "2", "--dir", str(tmp_path / "pg"),
        "--python", str(python if python.exists() else sys.executable),
    )  # fmt: skip
    try:
        yield playground
    finally:
        if playground.process.poll() is None:
            playground.process.kill()
            playground.process.communicate(timeout=60)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and " Z " not in Path(f"/proc/{pid}/stat").read_text()


def job_template(name: str, program: str) -> str:
    return (
        f"apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}-<<type>>-<<index>>\nspec:\n"
        "  backoffLimit: 0\n  template:\n    spec:\n      nodeName: <<host>>\n"
        "      restartPolicy: Never\n      containers:\n        - name: main\n"
        f"          image: python:3\n          command: [python, -c, {program!r}]\n"
    )


def test_a_newcomer_runs_on_it_and_ctrl_c_stops_everything(
    started: Playground, tmp_path: Path
) -> None:
    nodes = started.simpletfjob("nodes", cwd=tmp_path)
    assert nodes.returncode == 0, nodes.stderr
    rows = [line.split() for line in nodes.stdout.splitlines()[1:]]
    assert [row[:2] for row in rows] == [["node-1", "yes"], ["node-2", "yes"]]
    assert nodes.stderr == "2 nodes: 2 eligible, 0 GPUs free\n"

    # A tiny run: its tasks are processes of the interpreter --python names.
    write(
        tmp_path / "hello.yaml",
        job_template("hello", "import sys; print('hello from', sys.executable)"),
    )
    run = started.simpletfjob(
        "run", "hello.yaml", "--psn", "0", "-N", "2", "--timeout", "2m", cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    python = started.process.args[started.process.args.index("--python") + 1]
    assert run.stdout == f"worker-0 | hello from {python}\n"
    assert run.stderr.splitlines()[-1].startswith("run hello succeeded"), run.stderr

    # A task still running when the playground stops, and the control plane's processes.
    pid_file = tmp_path / "sleeper.pid"
    program = (
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    )
    write(tmp_path / "sleeper.yaml", job_template("sleeper", program))
    applied = started.simpletfjob("apply", "sleeper.yaml", "--psn", "0", "-N", "1", cwd=tmp_path)
    assert applied.returncode == 0, applied.stderr
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.2)
    task = int(pid_file.read_text())
    plane = tmp_path / "pg" / "control-plane"
    servers = {p.stem: int(p.read_text()) for p in plane.glob("*.pid")}
    assert sorted(servers) == ["etcd", "kube-apiserver", "kube-controller-manager"]
    assert alive(task) and all(alive(pid) for pid in servers.values())

    code, err = started.stop(signal.SIGINT)
    assert code == 0, err
    assert err.splitlines()[-1] == "playground: stopped"
    assert not alive(task)
    assert [name for name, pid in servers.items() if alive(pid)] == []
    assert (tmp_path / "pg" / "kubeconfig").exists()  # a --dir is kept


def test_sigterm_stops_it_and_removes_the_directory_it_made(assets: None) -> None:
    playground = Playground("--nodes", "1")
    directory = Path(playground.kubeconfig).parent
    servers = [int(p.read_text()) for p in (directory / "control-plane").glob("*.pid")]
    assert len(servers) == 3
    code, err = playground.stop(signal.SIGTERM)
    assert code == 0, err
    assert [pid for pid in servers if alive(pid)] == []
    assert not directory.exists()


def test_without_the_binaries_it_says_in_one_line_how_to_get_them(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "KUBEBUILDER_ASSETS"}
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.playground", "--nodes", "1"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (1, "")
    (line,) = done.stderr.splitlines()
    assert line.startswith("playground: $KUBEBUILDER_ASSETS is not set;")
    assert "setup-envtest use -p path 1.20.x" in line


def test_it_needs_the_nodes_loopback_addresses_and_says_so_where_there_are_none() -> None:
    assert loopback_problem(["127.0.0.1"]) is None
    problem = loopback_problem(["192.0.2.1"])  # TEST-NET-1: on no interface here
    assert problem is not None
    assert "192.0.2.1 cannot be bound" in problem and "runs on Linux" in problem
