"""The fork server's runs behave as the console script started afresh (tests/support/forkserver.py)."""

from __future__ import annotations

import gc
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, console_script, load_all, write
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


def helper_of(pid: int) -> int:
    """The parent of a forked run: the server's helper that waits for it and says its status."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        pytest.skip("no /proc to find a process's parent")
    return int(stat.rsplit(")", 1)[1].split()[1])


@pytest.mark.parametrize(
    ("args", "code"),
    [(["mnist.yaml", "--nodes", "a,b", "-o", "-"], 0), (["--no-such-flag"], 2)],
    ids=["renders", "usage-error"],
)
def test_a_run_that_ends_before_its_pid_is_read_keeps_its_status(
    work: Path, args: list[str], code: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a loaded machine the test's thread may read the run's pid only once the run has
    ended, and the pid and the wait status then come in one read: both are kept."""
    sendall = socket.socket.sendall

    def then_let_the_run_end(self: socket.socket, data: Any, *flags: Any) -> None:
        sendall(self, data, *flags)
        if self.family == socket.AF_UNIX:  # the request to the fork server
            deadline = time.monotonic() + 60
            while self.recv(64, socket.MSG_PEEK).count(b"\n") < 2:  # the pid, the status
                assert time.monotonic() < deadline, "the run did not end"
                time.sleep(0.01)

    with monkeypatch.context() as patch:
        patch.setattr(socket.socket, "sendall", then_let_the_run_end)
        proc = forkserver.Popen(
            [SCRIPT, *args], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    assert proc._conn is not None
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    if code == 0:
        assert [d["metadata"]["name"] for d in load_all(out)] == ["mnist-ps-0", "mnist-worker-0"]
    else:
        assert not out and err.decode().splitlines()[-1].startswith("simpletfjob: error: ")


def test_a_signal_to_the_whole_group_leaves_the_helper_to_say_how_the_run_ended(
    work: Path,
) -> None:
    """Ctrl-C or a CI runner signals the process group: the helper too, which must outlive the run."""
    os.mkfifo(work / "pipe")
    proc = forkserver.Popen(
        [SCRIPT, "pipe", "--nodes", "a,b", "-o", "-"],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    writer = reader_of(work / "pipe", proc)
    helper = helper_of(proc.pid)
    assert helper not in (os.getpid(), 1)
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        os.kill(helper, signum)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    os.close(writer)
    assert (proc.returncode, out, err) == (143, b"", b"simpletfjob: interrupted\n")


def test_a_lost_status_fails_as_the_harness_not_as_an_exit_code(work: Path) -> None:
    """Should the helper die (SIGKILL), the run's status is unknown: waiting says so
    rather than reporting an exit code the run never had."""
    os.mkfifo(work / "pipe")
    proc = forkserver.Popen(
        [SCRIPT, "pipe", "--nodes", "a,b", "-o", "-"],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    writer = reader_of(work / "pipe", proc)
    os.kill(helper_of(proc.pid), signal.SIGKILL)
    os.kill(proc.pid, signal.SIGKILL)
    os.close(writer)
    with pytest.raises(forkserver.LostStatus, match=f"lost the wait status of run {proc.pid}"):
        proc.communicate(timeout=60)
    proc.wait(60)  # said once: cleanup afterwards does not fail again


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_a_run_the_collector_finalized_unwaited_does_not_break_later_runs(work: Path) -> None:
    """subprocess keeps an unwaited Popen (subprocess._active) and polls it from every
    later Popen; its connection, finalized with it, cannot fail them."""
    os.mkfifo(work / "pipe")
    proc = forkserver.Popen(
        [SCRIPT, "pipe", "--nodes", "a,b", "-o", "-"], cwd=work, stdout=subprocess.DEVNULL
    )
    writer = reader_of(work / "pipe", proc)
    proc.cycle = proc  # type: ignore[attr-defined]  # only the collector can free it
    del proc
    gc.collect()
    os.close(writer)  # the run reads an empty template and ends
    later = forkserver.Popen([SCRIPT, "--version"], stdout=subprocess.PIPE)
    assert later._conn is not None
    assert later.communicate(timeout=60)[0].startswith(b"simpletfjob")
    assert later.returncode == 0
