"""What a task's output and the server's text look like on a terminal, and through a pipe.

A task (or whoever may write events) can print control characters: `\\r\\e[2K` erases the
line so far (the task's own prefix), `\\e[A` moves the cursor up over earlier lines. On a
terminal they are shown as `cat -v` shows them, tabs kept, so that no line passes itself
off as another task's or as the verdict; through a pipe or into a file, the log lines are
the task's bytes, unchanged. The commands run as processes (the console script), on a
pseudo-terminal (pty) in raw mode, so that what is read is what the process wrote.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import threading
import tty
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.conftest import console_script, write
from tests.support import forkserver
from tests.support.cluster import wait_for
from tests.support.control_plane import ControlPlane
from tests.support.kubelet import Kubelet
from tests.support.scenes import stand_in_nodes
from tests.support.templates import TERMINAL as TEMPLATE

SCRIPT = """\
import json, os, sys, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
if task["index"] == 0:  # the task that decides: it ends once worker-1 has
    time.sleep(3)
    sys.exit(0)
sys.stdout.buffer.write(HOSTILE)
sys.stdout.buffer.flush()
time.sleep(0.5)
sys.exit(int(sys.argv[1]))
"""

# What worker-1 prints: a tab, a line that erases its prefix and names another task, one
# that moves up over the line before, C1 control and undecodable bytes, and UTF-8 text.
HOSTILE = (
    b"plain\tline\n"
    b"\r\x1b[2K\x1b[1Gworker-0 | SPOOFED\n"
    b"\x1b[A\x1b[2Krun tt succeeded: worker-0 Succeeded\n"
    b"c1 \xc2\x9b31m, bytes \xff\xfe, text \xc3\xa9\n"
)
# The same, as `cat -v` shows it (the UTF-8 text stays).
SHOWN = [
    b"plain\tline",
    b"^M^[[2K^[[1Gworker-0 | SPOOFED",
    b"^[[A^[[2Krun tt succeeded: worker-0 Succeeded",
    b"c1 M-BM-^[31m, bytes M-^?M-~, text \xc3\xa9",
]
TIMEOUT = 120  # seconds: generous, for a loaded machine


class Terminal:
    """The test's nodes and template, and the console script run on a pty or through pipes."""

    def __init__(self, kube: ControlPlane, kubelet: Kubelet, ns: str, tmp: Path) -> None:
        self.kube, self.kubelet, self.ns = kube, kubelet, ns
        self.template = write(tmp / "tt.yaml", TEMPLATE)
        self.script = write(tmp / "task.py", f"HOSTILE = {HOSTILE!r}\n{SCRIPT}")
        self.kubeconfig = str(kube.kubeconfig(tmp / "kc", namespace=ns))

    def args(self, code: int) -> list[str]:
        return [
            str(self.template), "--nodes", ",".join(self.kubelet.nodes), "--psn", "0",
            "--kubeconfig", self.kubeconfig, "--set", f"script={self.script}",
            "--set", f"code={code}",
        ]  # fmt: skip

    def apply(self, code: int) -> None:
        proc = forkserver.run(
            [console_script(), "apply", *self.args(code)], capture_output=True, timeout=TIMEOUT
        )
        assert proc.returncode == 0, proc.stderr

    def ended(self, job: str) -> bool:
        found = self.kube.admin.get(f"/apis/batch/v1/namespaces/{self.ns}/jobs/{job}")
        return any(
            c["type"] in ("Complete", "Failed") and c["status"] == "True"
            for c in found.get("status", {}).get("conditions") or []
        )

    def warning_event(self, job: str, reason: str, message: str) -> None:
        found = self.kube.admin.get(f"/apis/batch/v1/namespaces/{self.ns}/jobs/{job}")
        self.kube.admin.post(
            f"/api/v1/namespaces/{self.ns}/events",
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"generateName": "tt-", "namespace": self.ns},
                "involvedObject": {
                    "kind": "Job",
                    "apiVersion": "batch/v1",
                    "namespace": self.ns,
                    "name": job,
                    "uid": found["metadata"]["uid"],
                },
                "type": "Warning",
                "reason": reason,
                "message": message,
                "count": 1,
                "source": {"component": "someone"},
                "firstTimestamp": found["metadata"]["creationTimestamp"],
                "lastTimestamp": found["metadata"]["creationTimestamp"],
            },
        )


@pytest.fixture
def terminal(kube: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[Terminal]:
    nodes, _ = stand_in_nodes("tt", 2)
    with Kubelet(kube, nodes, tmp_path / "kubelet") as kubelet:
        yield Terminal(kube, kubelet, namespace, tmp_path)


def on_terminal(args: Sequence[str], *, stdout: bool, stderr: bool) -> tuple[int, bytes, bytes]:
    """Run the console script with stdout and/or stderr on one pty (raw: no newline translation);
    the exit status, what the terminal received, and what the pipe (the other stream) received."""
    main, slave = pty.openpty()
    tty.setraw(slave)
    try:
        proc = forkserver.Popen(
            [console_script(), *args],
            stdin=subprocess.DEVNULL,
            stdout=slave if stdout else subprocess.PIPE,
            stderr=slave if stderr else subprocess.PIPE,
        )
        os.close(slave)
        piped: list[bytes] = []
        pipe = proc.stderr if stdout else proc.stdout
        reader = None
        if pipe is not None:
            reader = threading.Thread(target=lambda: piped.append(pipe.read()), daemon=True)
            reader.start()
        received = b""
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:  # EIO: the terminal's last writer has gone
                break
            if not data:
                break
            received += data
        code = proc.wait(timeout=TIMEOUT)
        if reader is not None:
            reader.join(TIMEOUT)
    finally:
        os.close(main)
    return code, received, b"".join(piped)


ERASE = b"\r\x1b[K"
STATUS = re.compile(rb"\r\x1b\[K(run[ :][^\r\n]*?)(?=\r\x1b\[K)")


def without_status(shown: bytes) -> bytes:
    """What a terminal received without the status line that run and wait keep on stderr (each
    drawn `\\r\\e[K` + text, cleared `\\r\\e[K`); that it was drawn is checked."""
    assert STATUS.search(shown), shown
    return STATUS.sub(b"", shown).replace(ERASE, b"")


PREFIX = re.compile(rb"^(?:\x1b\[\d+m)?(worker-\d+) \|(?:\x1b\[0m)? ")


def uncoloured(out: bytes) -> bytes:
    """The output without its prefixes' colours."""
    return re.sub(rb"\x1b\[\d+m(worker-\d+ \|)\x1b\[0m", rb"\1", out)


def task_lines(out: bytes, task: str) -> list[bytes]:
    """The lines of one task, its prefix (coloured or not) taken off."""
    found = []
    for line in out.split(b"\n"):
        match = PREFIX.match(line)
        if match and match[1] == task.encode():
            found.append(line[match.end() :])
    return found


def test_logs_on_a_terminal_show_control_characters_as_cat_v_and_through_a_pipe_byte_for_byte(
    terminal: Terminal,
) -> None:
    terminal.apply(code=0)
    wait_for(lambda: terminal.ended("tt-worker-0"), 60, "the workers to end")
    logs = ["logs", "tt", "--kubeconfig", terminal.kubeconfig]

    code, shown, err = on_terminal(logs, stdout=True, stderr=False)
    assert code == 0, err
    # The only escapes on the terminal are the prefixes' colours (--color auto).
    assert b"\x1b" not in uncoloured(shown)
    assert b"\r" not in shown
    assert task_lines(shown, "worker-1") == SHOWN

    code, plain, err = on_terminal([*logs, "--color", "never"], stdout=True, stderr=False)
    assert code == 0, err
    assert b"\x1b" not in plain
    assert [line.removeprefix(b"worker-1 | ") for line in plain.split(b"\n")[:-1]] == SHOWN

    # Through a pipe, the task's bytes, unchanged, carriage returns and escapes included.
    proc = forkserver.run(
        [console_script(), *logs, "worker-1"], capture_output=True, timeout=TIMEOUT
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == HOSTILE
    proc = forkserver.run([console_script(), *logs], capture_output=True, timeout=TIMEOUT)
    worker = [line for line in proc.stdout.split(b"\n") if line.startswith(b"worker-1 | ")]
    assert b"\n".join(line.removeprefix(b"worker-1 | ") for line in worker) + b"\n" == HOSTILE

    # Coloured for a terminal later (`--color always | less -R`): a task's escapes cannot
    # wipe its coloured prefix there either; the prefixes' colours are the only escapes.
    proc = forkserver.run(
        [console_script(), *logs, "--color", "always"], capture_output=True, timeout=TIMEOUT
    )
    assert proc.returncode == 0, proc.stderr
    assert b"\x1b" not in uncoloured(proc.stdout) and b"\r" not in proc.stdout
    assert task_lines(proc.stdout, "worker-1") == SHOWN


def test_wait_on_a_terminal_shows_the_servers_text_and_the_tasks_last_lines_as_cat_v(
    terminal: Terminal,
) -> None:
    terminal.apply(code=1)
    terminal.warning_event("tt-worker-1", "Spoof\x1b[2J", "\r\x1b[2Kworker-1 Succeeded\x1b[A")
    wait = ["wait", "tt", "--kubeconfig", terminal.kubeconfig, "--cleanup", "none"]

    code, shown, out = on_terminal(wait, stdout=False, stderr=True)
    assert code == 1 and out == b"", shown
    shown = without_status(shown)
    assert b"\x1b" not in shown and b"\r" not in shown
    lines = shown.split(b"\n")
    # (the event's message has its whitespace, the carriage return too, made single spaces)
    assert b"  Spoof^[[2J (x1) job/tt-worker-1: ^[[2Kworker-1 Succeeded^[[A" in lines
    assert [x.removeprefix(b"worker-1 | ") for x in lines if x.startswith(b"worker-1 | ")] == [
        line.rstrip() for line in SHOWN
    ]
    assert lines[-2].startswith(b"simpletfjob: error: run 'tt' failed: worker-1 Failed")

    # Through a pipe, each line is still one line, its escapes as Python writes them.
    proc = forkserver.run([console_script(), *wait], capture_output=True, timeout=TIMEOUT)
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert "\x1b" not in err and "\r" not in err
    assert "  Spoof\\x1b[2J (x1) job/tt-worker-1: \\x1b[2Kworker-1 Succeeded\\x1b[A" in (
        err.splitlines()
    )
    assert "worker-1 | \\r\\x1b[2K\\x1b[1Gworker-0 | SPOOFED" in err.splitlines()


def test_run_on_a_terminal_shows_the_tasks_output_as_cat_v(terminal: Terminal) -> None:
    args = ["run", *terminal.args(code=0), "--logs", "all"]
    code, shown, _ = on_terminal(args, stdout=True, stderr=True)
    assert code == 0, shown
    shown = without_status(shown)
    assert b"\r" not in shown
    assert task_lines(shown, "worker-1") == SHOWN
    assert b"\x1b" not in uncoloured(shown)
