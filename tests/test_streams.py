"""Where the documents go, and what cannot be lost on the way.

- A closed, full or broken stdout is one line and exit 1; a closed stderr drops messages.

What depends on the process (its descriptors, signals, redirections) runs the installed
console script; the rest runs main() in-process.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
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
