"""Where the documents go, and what cannot be lost on the way.

- SIGINT and SIGTERM remove the temporary file and exit 130 or 143 with one line.
- A closed, full or broken stdout is one line and exit 1; a closed stderr drops messages.

What depends on the process (its descriptors, signals, redirections) runs the installed
console script; the rest runs main() in-process.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import EXAMPLES, write

MNIST = (EXAMPLES / "mnist.yaml").read_text()
HOSTS = "h10\nh100\nh14\n"
TIMEOUT = 180  # seconds: generous, for a loaded machine; no test asserts a speed


def _console_script() -> str:
    found = shutil.which("simpletfjob") or str(Path(sys.executable).parent / "simpletfjob")
    if not Path(found).exists():
        pytest.fail("the simpletfjob console script is not installed; run pip install .[test]")
    return found


SCRIPT = _console_script()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    write(tmp_path / "mnist.yaml", MNIST)
    write(tmp_path / "hosts", HOSTS)
    return tmp_path


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every file under `root` (bytes) and every symlink (its target), by relative path."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        name = str(path.relative_to(root))
        if path.is_symlink():
            found[name] = "-> " + os.readlink(path)
        elif path.is_file():
            found[name] = path.read_bytes()
    return found


@dataclass
class Proc:
    code: int
    out: bytes
    err: str

    @property
    def err_lines(self) -> list[str]:
        return self.err.splitlines()


def run(
    args: Sequence[str],
    cwd: Path,
    *,
    env: Mapping[str, str] | None = None,
    shell_redirect: str = "",
    **popen: Any,
) -> Proc:
    """Run the console script; `shell_redirect` (such as '>&-') is applied by sh, as a user types it."""
    command: list[str] = [SCRIPT, *args]
    if shell_redirect:
        command = ["sh", "-c", f'"$0" "$@" {shell_redirect}', *command]
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    popen.setdefault("stdin", subprocess.DEVNULL)
    proc = subprocess.run(
        command, cwd=cwd, env={**os.environ, **(env or {})}, timeout=TIMEOUT, **popen, check=False
    )
    out = proc.stdout if isinstance(proc.stdout, bytes) else b""
    err = proc.stderr.decode() if isinstance(proc.stderr, bytes) else ""
    return Proc(proc.returncode, out, err)


def assert_failed(proc: Proc, code: int, pattern: str) -> None:
    """Exit code, exactly one line on stderr, no traceback or internal error, nothing on stdout."""
    assert proc.code == code, (proc.code, proc.err)
    assert proc.out == b""
    assert len(proc.err_lines) == 1, proc.err
    assert proc.err_lines[0].startswith("simpletfjob: error: "), proc.err
    assert re.search(pattern, proc.err_lines[0]), proc.err
    assert "Traceback" not in proc.err and "internal error" not in proc.err


def assert_one_line_error(result: Any, code: int, pattern: str) -> None:
    """The same for an in-process run (the `cli` fixture)."""
    assert result.code == code, (result.code, result.err)
    assert result.out == ""
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("simpletfjob: error: ")
    assert re.search(pattern, lines[0]), lines[0]
    assert "Traceback" not in result.err and "internal error" not in result.err


def jobs(text: str | bytes) -> list[dict[str, Any]]:
    docs = list(yaml.safe_load_all(text))
    assert docs and all(d["kind"] == "Job" for d in docs), docs
    return docs


# -- 3. signals ------------------------------------------------------------------------


def big_hosts(work: Path, n: int = 2500) -> Path:
    """A host list whose render is a few hundred MB (the output grows as n²)."""
    return write(work / "big", "".join(f"host-{i}.example.internal\n" for i in range(n)))


def temp_files(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


def wait_for(condition: Callable[[], bool], proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert proc.poll() is None, "the run ended before the moment the test waits for"
        assert time.monotonic() < deadline
        time.sleep(0.005)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_while_writing_a_file_removes_the_temporary_file(
    work: Path, signum: int, code: int
) -> None:
    big_hosts(work)
    old = write(work / "out.yaml", "old: content\n")
    before = snapshot(work)
    proc = subprocess.Popen(
        [SCRIPT, "mnist.yaml", "--nodes-file", "big", "-o", "out.yaml"],
        cwd=work,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    # Wait until the temporary file holds a megabyte: the run is in the middle of writing.
    wait_for(
        lambda: any(
            (work / t).stat().st_size > 1 << 20 for t in temp_files(work) if (work / t).exists()
        ),
        proc,
    )
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == code
    assert err == b"simpletfjob: interrupted\n"
    assert out == b""
    assert temp_files(work) == []
    assert old.read_text() == "old: content\n"
    assert snapshot(work) == before


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_while_blocked_on_a_full_pipe(work: Path, signum: int, code: int) -> None:
    """Blocked in write() on a pipe nobody reads: the signal still ends the run, in one line."""
    big_hosts(work, 400)
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.Popen(
            [SCRIPT, "mnist.yaml", "--nodes-file", "big", "-o", "-"],
            cwd=work,
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
        )
        os.close(write_end)
        waiting = bytearray(4)
        seen: list[int] = []

        def pipe_full() -> bool:
            # The bytes waiting in the pipe have stopped growing: the writer is blocked.
            fcntl.ioctl(read_end, termios.FIONREAD, waiting)
            seen.append(int.from_bytes(waiting, sys.byteorder))
            return len(seen) > 50 and seen[-1] > 0 and seen[-50] == seen[-1]

        wait_for(pipe_full, proc)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=TIMEOUT)
    finally:
        os.close(read_end)
    assert proc.returncode == code
    assert err == b"simpletfjob: interrupted\n"


def test_sigint_is_handled_even_when_started_ignoring_it(work: Path) -> None:
    """A shell script's `simpletfjob ... &` starts with SIGINT ignored; kill -INT still cleans up."""
    big_hosts(work)
    proc = subprocess.Popen(
        [SCRIPT, "mnist.yaml", "--nodes-file", "big", "-o", "out.yaml"],
        cwd=work,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    wait_for(lambda: bool(temp_files(work)), proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=TIMEOUT)
    assert (proc.returncode, err) == (130, b"simpletfjob: interrupted\n")
    assert temp_files(work) == [] and not (work / "out.yaml").exists()


# -- 10. closed, full and broken streams ------------------------------------------------

COMMANDS = {
    "render": ["mnist.yaml", "--nodes-file", "hosts", "-o", "-"],
    "templates": ["templates"],
    "init -o -": ["init", "tf1-flags", "-o", "-"],
    "--help": ["--help"],
    "init --help": ["init", "--help"],
    "--version": ["--version"],
}


def _broken_pipe() -> int:
    """The write end of a pipe whose reader has already gone."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    return write_end


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(
    ("stdout", "reason"),
    [
        ("closed", "Bad file descriptor"),
        ("/dev/full", "No space left on device"),
        ("broken pipe", "Broken pipe"),
    ],
)
def test_stdout_that_cannot_be_written(work: Path, command: str, stdout: str, reason: str) -> None:
    before = snapshot(work)
    args = COMMANDS[command]
    if stdout == "closed":
        proc = run(args, work, shell_redirect=">&-", stdout=None)
    elif stdout == "/dev/full":
        with open("/dev/full", "wb") as full:
            proc = run(args, work, stdout=full)
    else:
        fd = _broken_pipe()
        try:
            proc = run(args, work, stdout=fd)
        finally:
            os.close(fd)
    assert proc.code == 1, proc.err
    assert proc.err_lines == [f"simpletfjob: error: cannot write to stdout: {reason}"]
    assert snapshot(work) == before


def test_closed_stdout_with_an_output_file(work: Path) -> None:
    """With -o FILE, a closed stdout does not matter, and the file gets no stray bytes."""
    expected = run(["mnist.yaml", "--nodes-file", "hosts", "-o", "-"], work).out
    proc = run(
        ["mnist.yaml", "--nodes-file", "hosts", "-o", "out.yaml"],
        work,
        shell_redirect=">&-",
        stdout=None,
    )
    assert proc.code == 0, proc.err
    assert (work / "out.yaml").read_bytes() == expected


def test_closed_stderr_drops_the_messages(work: Path) -> None:
    write(work / "exc", "not-a-host\n")  # a warning: not among the hosts
    expected = run(["mnist.yaml", "--nodes-file", "hosts", "-E", "exc", "-o", "-"], work)
    assert "warning" in expected.err
    proc = run(
        ["mnist.yaml", "--nodes-file", "hosts", "-E", "exc", "-o", "-"],
        work,
        shell_redirect="2>&-",
        stderr=None,
    )
    assert proc.code == 0
    assert proc.out == expected.out  # YAML only: no message went into it
    # To a file: the temporary file must not take descriptor 2 and receive the messages.
    proc = run(
        ["mnist.yaml", "--nodes-file", "hosts", "-E", "exc", "-o", "out.yaml"],
        work,
        shell_redirect="2>&-",
        stderr=None,
    )
    assert proc.code == 0
    assert (work / "out.yaml").read_bytes() == expected.out
    # A failure still exits 1, with nothing on stdout.
    proc = run(
        ["mnist.yaml", "--nodes-file", "hosts", "-N", "9", "-o", "-"],
        work,
        shell_redirect="2>&-",
        stderr=None,
    )
    assert (proc.code, proc.out) == (1, b"")


def test_full_stderr_does_not_fail_the_run(work: Path) -> None:
    write(work / "exc", "not-a-host\n")
    with open("/dev/full", "wb") as full:
        proc = run(
            ["mnist.yaml", "--nodes-file", "hosts", "-E", "exc", "-o", "-"], work, stderr=full
        )
    assert proc.code == 0
    assert len(jobs(proc.out)) == 3


@pytest.mark.parametrize("closed", ["<&-", ">&- 2>&-"])
def test_closed_standard_streams_at_once(work: Path, closed: str) -> None:
    proc = run(
        ["mnist.yaml", "--nodes-file", "hosts", "-o", "out.yaml"],
        work,
        shell_redirect=closed,
        stdout=None,
        stderr=None,
        stdin=None,
    )
    assert proc.code == 0
    assert len(jobs((work / "out.yaml").read_text())) == 3
