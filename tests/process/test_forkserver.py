"""The fork server's runs behave as the console script started afresh (tests/support/forkserver.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, console_script, write
from tests.support import forkserver

SCRIPT = console_script()


def reader_of(fifo: Path, proc: subprocess.Popen[bytes]) -> int:
    """A writing end of the named pipe, once the run has opened it to read (and waits there)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: no reader yet
            if proc.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    write(tmp_path / "mnist.yaml", (EXAMPLES / "mnist.yaml").read_text())
    return tmp_path


@pytest.mark.parametrize(
    "args",
    [
        ["mnist.yaml", "--nodes", "a,b,c", "-o", "-"],
        ["mnist.yaml", "--nodes", "a,b", "-N", "5", "-o", "-"],
        ["missing.yaml", "--nodes", "a", "-o", "-"],
        ["--help"],
        ["--no-such-flag"],
    ],
    ids=["renders", "too-few-hosts", "no-template", "help", "usage-error"],
)
def test_a_forked_run_is_the_same_as_a_fresh_one(work: Path, args: list[str]) -> None:
    env = {**os.environ, "HOME": str(work)}
    forked = forkserver.Popen(
        [SCRIPT, *args], cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert forked._conn is not None  # it did go through the server
    out, err = forked.communicate(timeout=60)
    fresh = subprocess.run([SCRIPT, *args], cwd=work, env=env, capture_output=True, timeout=60)
    assert (forked.returncode, out, err) == (fresh.returncode, fresh.stdout, fresh.stderr)


def test_what_a_fork_could_get_wrong_runs_afresh(work: Path) -> None:
    shell = forkserver.Popen(["sh", "-c", f"exec {SCRIPT} --version"], stdout=subprocess.PIPE)
    locale = forkserver.Popen(
        [SCRIPT, "--version"], env={**os.environ, "LC_ALL": "C"}, stdout=subprocess.PIPE
    )
    hook = forkserver.Popen([SCRIPT, "--version"], preexec_fn=os.getpid, stdout=subprocess.PIPE)
    for proc in (shell, locale, hook):
        assert proc._conn is None
        assert proc.communicate(timeout=60)[0].startswith(b"simpletfjob")
        assert proc.returncode == 0


def test_a_signal_reaches_the_run_and_its_status_comes_back(work: Path) -> None:
    os.mkfifo(work / "pipe")  # the run waits here, reading its template
    proc = forkserver.Popen(
        [SCRIPT, "pipe", "--nodes", "a,b", "-o", "-"],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc._conn is not None
    writer = reader_of(work / "pipe", proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    os.close(writer)
    assert (proc.returncode, out, err) == (143, b"", b"simpletfjob: interrupted\n")


def test_an_ignored_signal_stays_ignored_as_across_exec(work: Path) -> None:
    """Under nohup the run keeps SIGHUP ignored, as a fresh process would inherit it."""
    os.mkfifo(work / "pipe")
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        proc = forkserver.Popen(
            [SCRIPT, "pipe", "--nodes", "a,b", "-o", "-"],
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    finally:
        signal.signal(signal.SIGHUP, previous)
    writer = reader_of(work / "pipe", proc)
    proc.send_signal(signal.SIGHUP)
    time.sleep(0.3)
    assert proc.poll() is None  # still reading
    proc.kill()
    proc.communicate(timeout=60)
    os.close(writer)
    assert proc.returncode == -signal.SIGKILL
