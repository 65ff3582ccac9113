"""Where the documents go, and what cannot be lost on the way.

- The output never replaces an input, by file identity: hard links and symlinks too.
- Stream paths (/dev/stdout, /dev/stderr, /dev/fd/N) write into the stream already open.
- SIGINT and SIGTERM remove the temporary file and exit 130 or 143 with one line.
- A closed, full or broken stdout is one line and exit 1; a closed stderr drops messages.
- The messages for a directory where a file should be, and the other way round.

What depends on the process (its descriptors, signals, redirections) runs the installed
console script; the rest runs main() in-process.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import signal
import stat
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from simpletfjob.kube.paths import kubeconfig_files, kubeconfig_paths
from simpletfjob.streams import stream_fd, warn
from tests.conftest import (
    EXAMPLES,
    assert_one_line_error,
    console_script,
    load_all,
    snapshot,
    write,
)
from tests.support import forkserver
from tests.support.kubeapi import KubeAPI, closed_port, make_node, write_kubeconfig

MNIST = (EXAMPLES / "mnist.yaml").read_text()
HOSTS = "h10\nh100\nh14\n"
TIMEOUT = 180  # seconds: generous, for a loaded machine; no test asserts a speed


SCRIPT = console_script()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    write(tmp_path / "mnist.yaml", MNIST)
    write(tmp_path / "hosts", HOSTS)
    return tmp_path


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
    proc = forkserver.run(
        command, cwd=cwd, env={**os.environ, **(env or {})}, timeout=TIMEOUT, **popen, check=False
    )
    out = proc.stdout if isinstance(proc.stdout, bytes) else b""
    err = proc.stderr.decode() if isinstance(proc.stderr, bytes) else ""
    return Proc(proc.returncode, out, err)


def jobs(text: str | bytes) -> list[dict[str, Any]]:
    docs = load_all(text)
    assert docs and all(d["kind"] == "Job" for d in docs), docs
    return docs


# -- 1. the output never replaces an input ---------------------------------------------


def _link(kind: str, target: Path, link: Path) -> None:
    if kind == "hard":
        os.link(target, link)
    else:
        link.symlink_to(os.path.relpath(target, link.parent))


INPUT_CASES = {
    # name: (files to write, the run's arguments, the input the output must not be)
    "template": ({}, ["--nodes-file", "hosts"], "mnist.yaml", "the template"),
    "nodes file": ({}, ["--nodes-file", "hosts"], "hosts", "the nodes file"),
    "values file": (
        {"v.yaml": "a: 1\n"},
        ["--nodes-file", "hosts", "-f", "v.yaml"],
        "v.yaml",
        "the values file",
    ),
    "exclusion file": (
        {"exc": "h14\n"},
        ["--nodes-file", "hosts", "-E", "exc"],
        "exc",
        "the exclusion file",
    ),
    "bare -E": ({"exc": "h14\n"}, ["--nodes-file", "hosts", "-E"], "exc", "the exclusion file"),
    "--psf file": (
        {"psf": "h14\n"},
        ["--nodes-file", "hosts", "--psf", "psf"],
        "psf",
        "the --psf file",
    ),
    "NodeList": (
        {
            "nodes.json": json.dumps(
                {"kind": "NodeList", "items": [make_node("n1"), make_node("n2")]}
            )
        },
        ["--nodes-file", "nodes.json"],
        "nodes.json",
        "the nodes file",
    ),
}


@pytest.mark.parametrize("how", ["same name", "hard", "symlink"])
@pytest.mark.parametrize("case", sorted(INPUT_CASES))
def test_the_output_is_never_an_input(cli: Any, work: Path, case: str, how: str) -> None:
    files, args, victim, what = INPUT_CASES[case]
    for name, text in files.items():
        write(work / name, text)
    output = victim
    if how != "same name":
        output = f"other-{how}"
        _link(how, work / victim, work / output)
    before = snapshot(work)
    result = cli("mnist.yaml", *args, "-o", output, cwd=work)
    assert_one_line_error(result, 1, rf"output '{re.escape(output)}' is .*{re.escape(what)}")
    if how != "same name":
        assert f"the same file as '{victim}'" in result.err
    assert snapshot(work) == before


@pytest.mark.parametrize("how", ["same name", "hard", "symlink"])
@pytest.mark.parametrize("found", ["--kubeconfig", "$KUBECONFIG", "~/.kube/config"])
def test_the_output_is_never_a_kubeconfig_and_the_cluster_is_not_asked(
    cli: Any,
    kubeapi: KubeAPI,
    kube_env: Path,
    work: Path,
    monkeypatch: pytest.MonkeyPatch,
    found: str,
    how: str,
) -> None:
    kubeapi.set_nodes([make_node("n1"), make_node("n2")])
    args: list[str] = []
    if found == "--kubeconfig":
        kubeconfig = write_kubeconfig(work / "kc", kubeapi.url)
        args = ["--kubeconfig", "kc"]
    elif found == "$KUBECONFIG":
        # The second file of the list; the first does not exist and is skipped.
        kubeconfig = write_kubeconfig(work / "kc", kubeapi.url)
        monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(work / "missing"), str(kubeconfig)]))
    else:
        kubeconfig = write_kubeconfig(kube_env / ".kube" / "config", kubeapi.url)
    output = str(kubeconfig)
    if how != "same name":
        output = str(work / f"other-{how}")
        _link(how, kubeconfig, Path(output))
    before = snapshot(work), snapshot(kube_env)
    result = cli("mnist.yaml", *args, "-o", output, cwd=work)
    assert_one_line_error(result, 1, rf"output '{re.escape(output)}' is .*kubeconfig")
    assert (snapshot(work), snapshot(kube_env)) == before
    assert kubeapi.nodes_requests() == []
    # And with the kubeconfig in place, the same run reads the cluster and writes.
    result = cli("mnist.yaml", *args, "-o", str(work / "out.yaml"), cwd=work)
    assert result.code == 0, result.err
    placed = jobs((work / "out.yaml").read_text())
    assert [d["spec"]["template"]["spec"]["nodeName"] for d in placed] == ["n1", "n2"]


def test_kubeconfigs_are_protected_in_an_offline_render_too(
    cli: Any, kube_env: Path, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = write_kubeconfig(work / "kc", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    before = snapshot(work)
    result = cli("mnist.yaml", "--nodes-file", "hosts", "-o", "kc", cwd=work)
    assert_one_line_error(result, 1, r"output 'kc' is the kubeconfig in \$KUBECONFIG")
    assert snapshot(work) == before


@pytest.mark.parametrize(
    "environ",
    [
        {"KUBECONFIG": "{d}/a:{d}/missing:{d}/b", "HOME": "{d}/home"},
        {"KUBECONFIG": "", "HOME": "{d}/home"},
        {"HOME": "{d}/home"},
        {"KUBECONFIG": "{d}/missing:{d}/b", "HOME": "{d}/home"},
    ],
)
@pytest.mark.parametrize("flag", [None, "{d}/a"])
def test_every_kubeconfig_the_cluster_reads_is_protected(
    tmp_path: Path, environ: dict[str, str], flag: str | None
) -> None:
    """The files kubeconfig_paths reads are among those the output may not be (kubeconfig_files)."""
    for name in ("a", "b", "home/.kube/config"):
        write_kubeconfig(tmp_path / name, "http://127.0.0.1:1")
    env = {k: v.format(d=tmp_path) for k, v in environ.items()}
    kubeconfig = flag.format(d=tmp_path) if flag else None
    read = kubeconfig_paths(kubeconfig, env) or []
    protected = {os.path.realpath(f.path) for f in kubeconfig_files(kubeconfig, env)}
    assert read and {os.path.realpath(p) for p in read} <= protected


@pytest.mark.parametrize(
    ("redirect", "args", "pattern"),
    [
        (">> mnist.yaml", ["-o", "-"], r"stdout is redirected to 'mnist.yaml', the template"),
        (">> hosts", ["-o", "/dev/stdout"], r"stdout is redirected to 'hosts', the nodes file"),
        (
            "3>> mnist.yaml",
            ["-o", "/dev/fd/3"],
            r"output '/dev/fd/3' is the same file as 'mnist.yaml'",
        ),
    ],
)
def test_a_stream_open_on_an_input_is_refused(
    work: Path, redirect: str, args: list[str], pattern: str
) -> None:
    before = snapshot(work)
    err = work.parent / f"{work.name}.err"
    proc = run(
        ["mnist.yaml", "--nodes-file", "hosts", *args],
        work,
        shell_redirect=f"{redirect} 2> '{err}'",
    )
    proc.err = err.read_text()
    assert_one_line_error(proc, 1, pattern)
    assert snapshot(work) == before


@pytest.mark.parametrize("redirect", ["2>> mnist.yaml", "2>> hosts"])
@pytest.mark.parametrize("hosts", ["--nodes-file hosts", "--nodes-file hosts -N 9"])
def test_stderr_redirected_into_an_input_is_left_alone(
    work: Path, redirect: str, hosts: str
) -> None:
    """Messages would be written into the template or the host list: they are dropped instead."""
    before = snapshot(work)
    proc = run(["mnist.yaml", *hosts.split(), "-o", "-"], work, shell_redirect=redirect)
    assert snapshot(work) == before
    if "-N 9" in hosts:  # too few hosts: the exit status says so
        assert (proc.code, proc.out) == (1, b"")
    else:
        assert proc.code == 0
        assert [d["metadata"]["name"] for d in jobs(proc.out)] == [
            "mnist-ps-0",
            "mnist-worker-0",
            "mnist-worker-1",
        ]


# -- 2. stream paths write into the stream that is open --------------------------------


def test_dev_stdout_into_a_pipe(work: Path) -> None:
    proc = run(["mnist.yaml", "--nodes-file", "hosts", "-o", "/dev/stdout"], work)
    assert proc.code == 0, proc.err
    assert [d["metadata"]["name"] for d in jobs(proc.out)] == [
        "mnist-ps-0",
        "mnist-worker-0",
        "mnist-worker-1",
    ]
    assert proc.err_lines == [
        "simpletfjob: wrote 3 tasks to /dev/stdout: 1 ps (h10), 2 worker (h100, h14)"
    ]
    assert sorted(p.name for p in work.iterdir()) == ["hosts", "mnist.yaml"]


@pytest.mark.parametrize("path", ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1", "link-to-stdout"])
def test_a_file_opened_for_appending_keeps_its_content(work: Path, path: str) -> None:
    (work / "link-to-stdout").symlink_to("/dev/stdout")
    expected = run(["mnist.yaml", "--nodes-file", "hosts", "-o", "-"], work).out
    log = write(work.parent / f"{work.name}-log.yaml", "# earlier content\n")
    with open(log, "ab") as out:
        proc = run(["mnist.yaml", "--nodes-file", "hosts", "-o", path], work, stdout=out)
    assert proc.code == 0, proc.err
    assert log.read_bytes() == b"# earlier content\n" + expected
    assert (work / "link-to-stdout").is_symlink()


def test_a_file_opened_with_truncation_at_an_offset(work: Path) -> None:
    """A stream is written where it stands, without truncating what follows."""
    expected = run(["mnist.yaml", "--nodes-file", "hosts", "-o", "-"], work).out
    target = work.parent / f"{work.name}-out.yaml"
    target.write_bytes(b"x" * 10)
    with open(target, "r+b") as out:
        out.seek(4)
        proc = run(["mnist.yaml", "--nodes-file", "hosts", "-o", "/dev/stdout"], work, stdout=out)
    assert proc.code == 0, proc.err
    assert target.read_bytes() == b"xxxx" + expected


def test_dev_stderr_and_dev_fd_n(work: Path) -> None:
    expected = run(["mnist.yaml", "--nodes-file", "hosts", "-o", "-"], work).out
    proc = run(["mnist.yaml", "--nodes-file", "hosts", "-o", "/dev/stderr"], work)
    assert proc.code == 0 and proc.out == b""
    assert (
        proc.err.encode()
        == expected
        + b"simpletfjob: wrote 3 tasks to /dev/stderr: 1 ps (h10), 2 worker (h100, h14)\n"
    )

    log = write(work.parent / f"{work.name}-fd.yaml", "# kept\n")
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    try:
        proc = run(
            ["mnist.yaml", "--nodes-file", "hosts", "-o", f"/dev/fd/{fd}"], work, pass_fds=(fd,)
        )
    finally:
        os.close(fd)
    assert proc.code == 0, proc.err
    assert log.read_bytes() == b"# kept\n" + expected


def test_a_terminal(work: Path) -> None:
    main, terminal = pty.openpty()
    try:
        proc = forkserver.Popen(
            [SCRIPT, "mnist.yaml", "--nodes-file", "hosts", "-o", "/dev/stdout"],
            cwd=work,
            stdin=subprocess.DEVNULL,
            stdout=terminal,
            stderr=subprocess.PIPE,
        )
        os.close(terminal)
        received = b""
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:  # EIO: the terminal's last writer has gone
                break
            if not data:
                break
            received += data
        assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        os.close(main)
    assert jobs(received.replace(b"\r\n", b"\n"))[0]["metadata"]["name"] == "mnist-ps-0"


def test_a_named_pipe_is_written_in_place(work: Path) -> None:
    fifo = work / "fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    # A daemon: if the run never opens the FIFO, the blocked reader must not keep pytest alive.
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    proc = run(["mnist.yaml", "--nodes-file", "hosts", "-o", "fifo"], work)
    reader.join(timeout=TIMEOUT)
    assert proc.code == 0, proc.err
    assert len(jobs(received[0])) == 3
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


@pytest.mark.parametrize("fd", ["9", "99999999999999999999"])
def test_a_stream_path_that_is_not_open(work: Path, fd: str) -> None:
    before = snapshot(work)
    proc = run(["mnist.yaml", "--nodes-file", "hosts", "-o", f"/dev/fd/{fd}"], work)
    assert_one_line_error(
        proc, 1, rf"^simpletfjob: error: cannot write to /dev/fd/{fd}: Bad file descriptor$"
    )
    assert snapshot(work) == before


def test_output_file_that_stdout_or_stderr_is_redirected_to(work: Path) -> None:
    """-o FILE with stdout (or stderr) open on FILE is refused: renaming would cut the stream off."""
    target = write(work / "out.yaml", "# earlier\n")
    with open(target, "ab") as out:
        proc = run(["mnist.yaml", "--nodes-file", "hosts", "-o", "out.yaml"], work, stdout=out)
    assert_one_line_error(
        proc, 1, r"output 'out.yaml' is the file stdout is redirected to; write -o -"
    )
    assert target.read_text() == "# earlier\n"
    with open(target, "ab") as err:
        proc = run(["mnist.yaml", "--nodes-file", "hosts", "-o", "out.yaml"], work, stderr=err)
    assert proc.code == 1 and proc.out == b""
    # The one line went where stderr was sent; nothing else changed the file.
    assert target.read_text() == (
        "# earlier\nsimpletfjob: error: output 'out.yaml' is the file stderr is redirected to, "
        "where messages go; choose another -o\n"
    )


def test_a_template_read_from_a_stream_needs_an_output(work: Path) -> None:
    with open(work / "mnist.yaml", "rb") as template:
        proc = run(["/dev/stdin", "--nodes-file", "hosts"], work, stdin=template)
    assert_one_line_error(proc, 2, r"the template is read from /dev/stdin, .*give -o FILE, or -o -")
    with open(work / "mnist.yaml", "rb") as template:
        proc = run(["/dev/stdin", "--nodes-file", "hosts", "-o", "-"], work, stdin=template)
    assert proc.code == 0 and len(jobs(proc.out)) == 3


@pytest.mark.parametrize(
    ("path", "fd"),
    [
        ("/dev/stdin", 0),
        ("/dev/stdout", 1),
        ("/dev/stderr", 2),
        ("/dev/fd/7", 7),
        ("/dev//fd/./7", 7),
        ("/proc/self/fd/3", 3),
        ("/proc/thread-self/fd/4", 4),
        ("/proc/{pid}/fd/5", 5),
        ("/proc/1/fd/1", None),  # another process's descriptor is a path like any other
        ("/dev/null", None),
        ("/dev/fd", None),
        ("out.yaml", None),
        ("dev/stdout", None),
    ],
)
def test_stream_fd(path: str, fd: int | None) -> None:
    assert stream_fd(path.format(pid=os.getpid())) == fd


def test_stream_fd_through_symlinks(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("/dev/stderr")
    (tmp_path / "b").symlink_to("a")
    (tmp_path / "loop").symlink_to("loop")
    assert stream_fd(str(tmp_path / "b")) == 2
    assert stream_fd(str(tmp_path / "loop")) is None


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
    proc = forkserver.Popen(
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
        proc = forkserver.Popen(
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


def test_a_signal_just_as_a_named_pipe_opens_is_not_lost(work: Path) -> None:
    """A signal that lands just before the read blocks still stops the run (the tick).

    Python runs a handler between bytecodes: without the tick, a SIGTERM that came
    between the pipe's open and the read left the run blocked in the read for good,
    about one time in ten.
    """
    for attempt in range(20):
        fifo = work / f"pipe{attempt}"
        os.mkfifo(fifo)
        proc = forkserver.Popen(
            [SCRIPT, fifo.name, "--nodes", "a,b", "-o", "-"],
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + TIMEOUT
        while True:  # a FIFO opens for writing without blocking once its reader has it
            try:
                writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.001)
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=30)
        finally:
            os.close(writer)
            proc.kill()
        assert (proc.returncode, out, err) == (143, b"", b"simpletfjob: interrupted\n"), attempt


def test_sigint_is_handled_even_when_started_ignoring_it(work: Path) -> None:
    """A shell script's `simpletfjob ... &` starts with SIGINT ignored; kill -INT still cleans up."""
    big_hosts(work)
    proc = forkserver.Popen(
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
    "render /dev/stdout": ["mnist.yaml", "--nodes-file", "hosts", "-o", "/dev/stdout"],
    "templates": ["templates"],
    "init -o -": ["init", "tf1-flags", "-o", "-"],
    "--help": ["--help"],
    "render --help": ["render", "--help"],
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
    [("closed", "Bad file descriptor"), ("/dev/full", "No space left on device")],
)
def test_stdout_that_cannot_be_written(work: Path, command: str, stdout: str, reason: str) -> None:
    before = snapshot(work)
    args = COMMANDS[command]
    if stdout == "closed":
        proc = run(args, work, shell_redirect=">&-", stdout=None)
    else:
        with open("/dev/full", "wb") as full:
            proc = run(args, work, stdout=full)
    assert proc.code == 1, proc.err
    assert proc.err_lines == [f"simpletfjob: error: cannot write to stdout: {reason}"]
    assert snapshot(work) == before


# A reader that went away is no error (git and kubectl): no line, and the status of a
# process that SIGPIPE ended, 128 + 13.
READER_GONE = 141

# Commands whose output goes to stdout, beside COMMANDS; each writes with stdout's reader gone.
COMPLETION = {
    # click's completion writes with click.echo, through sys.stdout's buffer, which the
    # interpreter flushes as it ends.
    "completion": (
        ["x"],
        {"_SIMPLETFJOB_COMPLETE": "bash_complete", "COMP_WORDS": "simpletfjob ", "COMP_CWORD": "1"},
    ),
    "kubectl_complete": (["__kubectl_complete__", ""], {}),
}


@pytest.mark.parametrize("command", sorted([*COMMANDS, *COMPLETION]))
def test_a_reader_gone_before_the_first_byte_is_told_as_git_tells_it(
    work: Path, command: str
) -> None:
    """Run as the console script is, a fresh interpreter each time (not forked), so that its
    own end is the one a user has: nothing on stderr, not even the interpreter's
    "Exception ignored ... BrokenPipeError", and exit 141."""
    before = snapshot(work)
    env = dict(os.environ)
    if command in COMPLETION:
        args, extra = COMPLETION[command]
        env.update(extra)
    else:
        args = COMMANDS[command]
    executable = SCRIPT
    if args[0] == "__kubectl_complete__":
        executable = str(Path(SCRIPT).with_name("kubectl_complete-simpletfjob"))
        args = args[1:]
    fd = _broken_pipe()
    try:
        proc = subprocess.run(
            [executable, *args], cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=fd,
            stderr=subprocess.PIPE, timeout=TIMEOUT, check=False,
        )  # fmt: skip
    finally:
        os.close(fd)
    assert (proc.returncode, proc.stderr.decode()) == (READER_GONE, "")
    assert snapshot(work) == before


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_reader_gone_is_told_so_in_a_forked_run_too(work: Path, command: str) -> None:
    fd = _broken_pipe()
    try:
        proc = run(COMMANDS[command], work, stdout=fd)
    finally:
        os.close(fd)
    assert (proc.code, proc.err) == (READER_GONE, "")


@pytest.mark.parametrize("output", ["-", "/dev/stdout", "/dev/fd/1"])
def test_head_1_of_a_long_render(work: Path, output: str) -> None:
    """`simpletfjob ... | head -1` in bash: the first line, and 141 in PIPESTATUS, nothing else."""
    hosts = ",".join(f"h{i}" for i in range(300))
    script = f'"$0" mnist.yaml --nodes {hosts} -o {output} | head -1; echo "status ${{PIPESTATUS[0]}}" >&2'
    proc = subprocess.run(
        ["bash", "-c", script, SCRIPT], cwd=work, capture_output=True, timeout=TIMEOUT, check=False
    )
    assert proc.returncode == 0
    assert proc.stdout == b"apiVersion: batch/v1\n"
    assert proc.stderr.decode().splitlines() == [f"status {READER_GONE}"]
    assert not (work / "mnist_tfjob.yaml").exists()


def test_a_named_pipe_whose_reader_went_away(work: Path) -> None:
    """`-o FIFO` is written in place: its reader gone is told as stdout's is."""
    fifo = work / "fifo"
    os.mkfifo(fifo)
    hosts = ",".join(f"h{i}" for i in range(300))
    proc = subprocess.Popen(
        [SCRIPT, "mnist.yaml", "--nodes", hosts, "-o", "fifo"],
        cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    with open(fifo, "rb") as reader:
        assert reader.read(20) == b"apiVersion: batch/v1"
    out, err = proc.communicate(timeout=TIMEOUT)
    assert (proc.returncode, out, err) == (READER_GONE, b"", b"")


@pytest.mark.parametrize(
    "args", [["status", "mnist"], ["status", "mnist", "-w"], ["status"], ["nodes"]]
)
def test_a_reader_gone_from_a_command_that_reads_the_cluster(
    work: Path, kubeapi: KubeAPI, args: list[str]
) -> None:
    from tests.support.scenes import NS, load_run

    load_run(kubeapi)
    kubeapi.set_nodes([make_node(f"n{i}") for i in range(3)])
    kubeconfig = write_kubeconfig(work / "kc", kubeapi.url, namespace=NS)
    fd = _broken_pipe()
    try:
        proc = subprocess.run(
            [SCRIPT, *args, "--kubeconfig", str(kubeconfig)], cwd=work, stdin=subprocess.DEVNULL,
            stdout=fd, stderr=subprocess.PIPE, timeout=TIMEOUT, check=False,
        )  # fmt: skip
    finally:
        os.close(fd)
    assert (proc.returncode, proc.stderr.decode()) == (READER_GONE, "")


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


def test_one_warn_for_every_module_that_stderr_never_fails(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    warn("'h99' is not among the hosts")
    assert capsys.readouterr() == ("", "simpletfjob: warning: 'h99' is not among the hosts\n")
    # No stderr at all (closed at start, main() run in-process): nothing, and not on stdout.
    monkeypatch.setattr(sys, "stderr", None)
    warn("dropped")
    monkeypatch.undo()
    assert capsys.readouterr() == ("", "")
    with open("/dev/full", "w") as full:
        monkeypatch.setattr(sys, "stderr", full)
        warn("x" * 10_000)  # more than the buffer holds: the write itself fails
    monkeypatch.undo()
    assert capsys.readouterr().out == ""


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


# -- 14. directories and files in the wrong places ---------------------------------------


@pytest.mark.parametrize(
    ("output", "pattern"),
    [
        ("file/x.yaml", r"cannot write 'file/x.yaml': 'file' is not a directory"),
        ("file/sub/x.yaml", r"cannot write 'file/sub/x.yaml': 'file' is not a directory"),
        ("file/", r"cannot write 'file/': 'file' is not a directory"),
        ("missing/x.yaml", r"cannot write 'missing/x.yaml': directory 'missing' does not exist"),
        ("missing/deeper/x.yaml", r"directory 'missing/deeper' does not exist"),
        ("dir", r"output 'dir' is a directory; give a file name, such as 'dir/mnist_tfjob.yaml'"),
        (".", r"output '.' is a directory"),
        (
            "link-to-dir",
            r"output 'link-to-dir' is a directory; give a file name, such as 'link-to-dir/",
        ),
        ("dangling", r"cannot write 'dangling': directory '/nonexistent-[0-9a-f]+' does not exist"),
    ],
)
def test_output_paths_that_cannot_be_a_file(
    cli: Any, work: Path, output: str, pattern: str
) -> None:
    write(work / "file", "a file\n")
    (work / "dir").mkdir()
    (work / "link-to-dir").symlink_to("dir")
    (work / "dangling").symlink_to(f"/nonexistent-{os.urandom(4).hex()}/out.yaml")
    before = snapshot(work)
    result = cli("mnist.yaml", "--nodes-file", "hosts", "-o", output, cwd=work)
    assert_one_line_error(result, 1, pattern)
    assert snapshot(work) == before


def test_an_empty_output_is_a_usage_error(cli: Any, work: Path) -> None:
    assert_one_line_error(
        cli("mnist.yaml", "--nodes-file", "hosts", "-o", "", cwd=work), 2, r"-o needs a file name"
    )
    assert_one_line_error(cli("init", "tf1-flags", "-o", "", cwd=work), 2, r"-o needs a file name")


def test_a_directory_that_refuses_new_files(cli: Any, work: Path) -> None:
    if os.geteuid() == 0:
        # root may write anywhere a mode allows nothing; sysfs refuses everyone new files
        if not os.path.isdir("/sys/kernel"):
            pytest.skip("needs a non-root user or /sys")
        output, directory = "/sys/out.yaml", "/sys"
    else:
        ro = work / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        output, directory = str(ro / "out.yaml"), str(ro)
    before = snapshot(work)
    result = cli("mnist.yaml", "--nodes-file", "hosts", "-o", output, cwd=work)
    assert_one_line_error(
        result,
        1,
        rf"cannot write '{output}': cannot create a file in directory '{directory}': Permission denied",
    )
    assert snapshot(work) == before


def test_init_into_a_directory(cli: Any, work: Path) -> None:
    (work / "dir").mkdir()
    copy = cli("init", "tf1-flags", "-o", "-", cwd=work).out
    result = cli("init", "tf1-flags", "-o", "dir", cwd=work)
    assert result.code == 0, result.err
    assert (work / "dir" / "tf1-flags.yaml").read_text() == copy
    assert "wrote dir/tf1-flags.yaml" in result.err
    # As cp: once there, it is not overwritten without --force.
    result = cli("init", "tf1-flags", "-o", "dir/", cwd=work)
    assert_one_line_error(result, 1, r"'dir/tf1-flags.yaml' already exists; give --force")
    write(work / "dir" / "tf1-flags.yaml", "edited\n")
    assert cli("init", "tf1-flags", "-o", "dir", "--force", cwd=work).code == 0
    assert (work / "dir" / "tf1-flags.yaml").read_text() == copy
    # The copy renders.
    result = cli("dir/tf1-flags.yaml", "--nodes", "a,b", "-o", "-", cwd=work)
    assert result.code == 0 and len(load_all(result.out)) == 2


@pytest.mark.parametrize(
    ("output", "pattern"),
    [
        ("file/x.yaml", r"'file' is not a directory"),
        ("missing/x.yaml", r"directory 'missing' does not exist"),
    ],
)
def test_init_into_paths_that_cannot_be_a_file(
    cli: Any, work: Path, output: str, pattern: str
) -> None:
    write(work / "file", "a file\n")
    before = snapshot(work)
    assert_one_line_error(cli("init", "tf1-flags", "-o", output, cwd=work), 1, pattern)
    assert snapshot(work) == before


def test_init_into_streams_needs_no_force(work: Path) -> None:
    log = write(work / "log", "# kept\n")
    with open(log, "ab") as out:
        proc = run(["init", "tf1-flags", "-o", "/dev/stdout"], work, stdout=out)
    assert proc.code == 0, proc.err
    assert log.read_text().startswith("# kept\n# TF1 ")
    assert run(["init", "tf1-flags", "-o", os.devnull], work).code == 0


def test_kubeconfig_that_is_a_directory(
    cli: Any, kube_env: Path, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (work / "kc.d").mkdir()
    result = cli("mnist.yaml", "--kubeconfig", "kc.d", "-o", "-", cwd=work)
    assert_one_line_error(result, 1, r"kubeconfig 'kc.d' is a directory, not a file")
    monkeypatch.setenv("KUBECONFIG", str(work / "kc.d"))
    result = cli("mnist.yaml", "-o", "-", cwd=work)
    assert_one_line_error(result, 1, r"\$KUBECONFIG lists '.*kc.d', which is a directory")
    monkeypatch.delenv("KUBECONFIG")
    (kube_env / ".kube" / "config").mkdir(parents=True)
    result = cli("mnist.yaml", "-o", "-", cwd=work)
    assert_one_line_error(result, 1, r"kubeconfig '.*/\.kube/config' is a directory, not a file")
    result = cli("mnist.yaml", "--kubeconfig", "nope", "-o", "-", cwd=work)
    assert_one_line_error(result, 1, r"kubeconfig 'nope' does not exist")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file whatever its mode")
def test_kubeconfig_that_cannot_be_read(cli: Any, kube_env: Path, work: Path) -> None:
    kubeconfig = write_kubeconfig(work / "kc", f"http://127.0.0.1:{closed_port()}")
    kubeconfig.chmod(0)
    result = cli("mnist.yaml", "--kubeconfig", "kc", "-o", "-", cwd=work)
    assert_one_line_error(result, 1, r"cannot read kubeconfig 'kc': Permission denied")


def test_leave_puts_aside_only_the_handlers_the_console_script_installed() -> None:
    """In a process of the caller's own (main() or the plugin's completion called in-process,
    as these tests call them), the end of a command leaves the signals as they were: the
    forked runs of later tests inherit them (an ignored SIGHUP kept them running)."""
    import gc

    from simpletfjob import streams

    kinds = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGALRM]
    before = {signum: signal.getsignal(signum) for signum in kinds}
    try:
        assert streams.leave(0) == 0
    finally:
        gc.unfreeze()
    assert {signum: signal.getsignal(signum) for signum in kinds} == before
