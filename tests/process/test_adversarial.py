"""Hostile, careless and unusual inputs, as a table: one line and an exit code, or the right output.

Each row is a case: the files of its directory, the command line, the environment
and the streams. Every row runs the installed console script in a directory of its
own, with HOME in that directory and no kubeconfig or in-cluster setting from the
machine. For each row the test asserts:

- the exit code;
- exactly one line on stderr (unless the row closes stderr), matching the row's
  pattern, with no traceback and no `internal error`;
- nothing on stdout when the run fails;
- every file that was in the directory before is byte-identical after, and no
  file is left behind (a temporary file, say), except what the row writes;
- that it ends: a generous timeout, not a timed assertion.

The rows run concurrently, a few at a time, from one module-scoped fixture; each
parametrized test then checks its own row.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import importlib.util
import json
import os
import re
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, console_script, load_all
from tests.support import forkserver
from tests.support.kubeapi import closed_port

TIMEOUT = 120  # seconds: generous, for a loaded machine; a row that takes it has hung
WORKERS = 4  # rows run at once: most of a row's time is the interpreter starting

MNIST = (EXAMPLES / "mnist.yaml").read_text()
HOSTS = "h1\nh2\nh3\n"


SCRIPT = console_script()


# -- what a case directory holds --------------------------------------------------------------


@dataclass(frozen=True)
class Dir:
    """An empty directory."""


@dataclass(frozen=True)
class Symlink:
    target: str


@dataclass(frozen=True)
class HardLink:
    to: str


@dataclass(frozen=True)
class Fifo:
    """A named pipe; with `feed`, the test writes it once the run opens the pipe to read."""

    feed: bytes | None = None


@dataclass(frozen=True)
class Sparse:
    """A file of `size` zero bytes that takes no room on disk."""

    size: int


@dataclass(frozen=True)
class Mode:
    text: str
    mode: int


Content = str | bytes | Dir | Symlink | HardLink | Fifo | Sparse | Mode


@dataclass
class Outcome:
    """What one run did: its exit code, streams, and the directory before and after."""

    directory: Path
    code: int | None = None
    out: bytes = b""
    err: str = ""
    hung: bool = False
    seconds: float = 0.0
    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)
    error: BaseException | None = None  # the harness itself failed

    def documents(self, name: str | None = None) -> list[Any]:
        """The YAML documents on stdout, or in the file `name`, parsed."""
        text = (self.directory / name).read_bytes() if name else self.out
        return load_all(text)


@dataclass(frozen=True)
class Case:
    argv: Sequence[str]
    code: int
    err: str | None  # a pattern for the one stderr line; None when the row closes stderr
    files: Mapping[str, Content] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    shell: str = ""  # redirections, applied by sh as a user types them: '>&-', '>>log'
    stdin: bytes | None = None
    broken_stdout: bool = False  # stdout is a pipe whose reader is already gone
    creates: tuple[str, ...] = ()  # files a successful run writes
    changes: tuple[str, ...] = ()  # files that were there and may change (an append target)
    partial_stdout: bool = False  # what reached stdout before a signal stays there
    before: Callable[[Path], None] | None = None  # after the files are made, before the snapshot
    during: Callable[[subprocess.Popen[bytes], Path], None] | None = None
    check: Callable[[Outcome], None] | None = None
    skip: str | None = None


# -- checks for the rows that succeed ---------------------------------------------------------


def tf_configs(documents: Sequence[Any]) -> list[dict[str, Any]]:
    """Each Job's TF_CONFIG, read back with json.loads."""
    configs = []
    for doc in documents:
        for container in doc["spec"]["template"]["spec"]["containers"]:
            for env in container.get("env", []):
                if env["name"] == "TF_CONFIG":
                    configs.append(json.loads(env["value"]))
    return configs


def renders(hosts: Sequence[str], name: str | None = None) -> Callable[[Outcome], None]:
    """The mnist Jobs: 1 ps and the rest workers, on these hosts, each TF_CONFIG its task's."""

    def check(outcome: Outcome) -> None:
        documents = outcome.documents(name)
        cluster = {"ps": [f"{hosts[0]}:2222"], "worker": [f"{h}:2222" for h in hosts[1:]]}
        tasks = [("ps", 0)] + [("worker", i) for i in range(len(hosts) - 1)]
        assert [d["spec"]["template"]["spec"]["nodeName"] for d in documents] == list(hosts)
        assert tf_configs(documents) == [
            {"cluster": cluster, "task": {"type": role, "index": index}} for role, index in tasks
        ]

    return check


def values_of(key: str, expected: Sequence[Any]) -> Callable[[Outcome], None]:
    """Each document's top-level `key`, as YAML reads it."""

    def check(outcome: Outcome) -> None:
        assert [d[key] for d in outcome.documents()] == list(expected)

    return check


def tf_config_values(value: Callable[[Any], Any]) -> Callable[[Outcome], None]:
    """The string `value(document)` of each of the two tasks ends with its TF_CONFIG as JSON."""

    def check(outcome: Outcome) -> None:
        documents = outcome.documents()
        assert len(documents) == 2
        for doc, role in zip(documents, ["ps", "worker"], strict=True):
            text = value(doc)
            assert isinstance(text, str)
            assert json.loads(text[text.index("{") :]) == {
                "cluster": {"ps": ["a:2222"], "worker": ["b:2222"]},
                "task": {"type": role, "index": 0},
            }

    return check


def tf_config_twice(outcome: Outcome) -> None:
    """`v` holds its task's TF_CONFIG twice, back to back, and nothing else."""
    decoder = json.JSONDecoder()
    for doc, role in zip(outcome.documents(), ["ps", "worker"], strict=True):
        first, end = decoder.raw_decode(doc["v"])
        second, rest = decoder.raw_decode(doc["v"], end)
        assert rest == len(doc["v"])
        assert (
            first
            == second
            == {
                "cluster": {"ps": ["a:2222"], "worker": ["b:2222"]},
                "task": {"type": role, "index": 0},
            }
        )


def appended_to(name: str, old: bytes) -> Callable[[Outcome], None]:
    def check(outcome: Outcome) -> None:
        data = (outcome.directory / name).read_bytes()
        assert data.startswith(old)
        assert [d["metadata"]["name"] for d in load_all(data[len(old) :])] == [
            "mnist-ps-0",
            "mnist-worker-0",
        ]

    return check


def no_temporary_file(outcome: Outcome) -> None:
    assert not [p for p in outcome.directory.iterdir() if p.name.endswith(".tmp")]


# -- what happens while a run is going: signals -------------------------------------------------


def wait_for(condition: Callable[[], bool], proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if proc.poll() is not None or time.monotonic() > deadline:
            return  # the row's assertions say what went wrong
        time.sleep(0.005)


def signal_while_reading(fifo: str, signum: int) -> Callable[[subprocess.Popen[bytes], Path], None]:
    """Send `signum` while the run waits for the template to come through a named pipe."""

    def during(proc: subprocess.Popen[bytes], directory: Path) -> None:
        writer: list[int] = []

        def reader_is_there() -> bool:
            # A FIFO opens for writing without blocking only once a reader has it open.
            try:
                writer.append(os.open(directory / fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:  # ENXIO: no reader yet
                return False
            return True

        wait_for(reader_is_there, proc)
        try:
            proc.send_signal(signum)
            proc.wait(TIMEOUT)
        finally:
            for fd in writer:
                os.close(fd)

    return during


def signal_while_writing(signum: int) -> Callable[[subprocess.Popen[bytes], Path], None]:
    """Send `signum` once the temporary output file holds a megabyte: the run is writing it."""

    def during(proc: subprocess.Popen[bytes], directory: Path) -> None:
        def writing() -> bool:
            for path in directory.iterdir():
                if path.name.endswith(".tmp"):
                    try:
                        if path.stat().st_size > 1 << 20:
                            return True
                    except FileNotFoundError:
                        pass
            return False

        wait_for(writing, proc)
        proc.send_signal(signum)

    return during


def feed_fifos(proc: subprocess.Popen[bytes], directory: Path, fifos: Mapping[str, bytes]) -> None:
    """Write each FIFO's content once the run opens it to read, then close it."""
    for name, data in fifos.items():
        opened: list[int] = []

        def reader_is_there(path: Path = directory / name, opened: list[int] = opened) -> bool:
            try:
                opened.append(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                return False
            return True

        wait_for(reader_is_there, proc)
        for fd in opened:
            os.set_blocking(fd, True)
            try:
                os.write(fd, data)
            except BrokenPipeError:
                pass
            finally:
                os.close(fd)


# -- running a row ---------------------------------------------------------------------------


def make_files(directory: Path, files: Mapping[str, Content]) -> None:
    (directory / "home").mkdir(parents=True)
    for name, content in {"mnist.yaml": MNIST, "hosts": HOSTS, **files}.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        elif isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, Dir):
            path.mkdir()
        elif isinstance(content, Symlink):
            path.symlink_to(content.target)
        elif isinstance(content, HardLink):
            os.link(directory / content.to, path)
        elif isinstance(content, Fifo):
            os.mkfifo(path)
        elif isinstance(content, Sparse):
            with open(path, "wb") as f:
                f.truncate(content.size)
        else:
            path.write_text(content.text, encoding="utf-8")
            path.chmod(content.mode)


def snapshot(directory: Path) -> dict[str, Any]:
    """Every entry under the directory: a file's size and hash, a link's target, a pipe, a dir."""
    found: dict[str, Any] = {}
    for root, dirs, names in os.walk(directory):
        for name in dirs + names:
            path = Path(root) / name
            relative = str(path.relative_to(directory))
            status = path.lstat()
            if stat.S_ISLNK(status.st_mode):
                found[relative] = ("symlink", os.readlink(path))
            elif stat.S_ISDIR(status.st_mode):
                found[relative] = ("dir", stat.S_IMODE(status.st_mode))
            elif stat.S_ISFIFO(status.st_mode):
                found[relative] = ("fifo",)
            elif status.st_size > 64 << 20:  # a sparse file: hashing it would read gigabytes
                found[relative] = ("file", status.st_size, status.st_mtime_ns, status.st_ino)
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                found[relative] = ("file", status.st_size, digest, stat.S_IMODE(status.st_mode))
    return found


def environment(directory: Path, extra: Mapping[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
        and not k.startswith("SIMPLETFJOB")
    }
    env["HOME"] = str(directory / "home")
    env.update(extra)
    return env


def run_case(case: Case, directory: Path) -> Outcome:
    outcome = Outcome(directory)
    try:
        make_files(directory, case.files)
        if case.before is not None:
            case.before(directory)
        outcome.before = snapshot(directory)
        command = [SCRIPT, *case.argv]
        if case.shell:
            command = ["sh", "-c", f'exec "$0" "$@" {case.shell}', *command]
        stdout: int = subprocess.PIPE
        broken = None
        if case.broken_stdout:
            read_end, broken = os.pipe()
            os.close(read_end)
            stdout = broken
        started = time.monotonic()
        proc = forkserver.Popen(
            command,
            cwd=directory,
            env=environment(directory, case.env),
            stdin=subprocess.DEVNULL if case.stdin is None else subprocess.PIPE,
            stdout=stdout,
            stderr=subprocess.PIPE,
        )
        if broken is not None:
            os.close(broken)
        fifos = {
            name: content.feed
            for name, content in case.files.items()
            if isinstance(content, Fifo) and content.feed is not None
        }
        feeder = None
        if fifos:
            feeder = threading.Thread(target=feed_fifos, args=(proc, directory, fifos))
            feeder.start()
        if case.during is not None:
            case.during(proc, directory)
        try:
            out, err = proc.communicate(case.stdin, timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            outcome.hung = True
        if feeder is not None:
            feeder.join(TIMEOUT)
        outcome.seconds = time.monotonic() - started
        outcome.code = proc.returncode
        outcome.out = out or b""
        outcome.err = (err or b"").decode(errors="backslashreplace")
        outcome.after = snapshot(directory)
    except BaseException as e:  # reported by the row's test, not by the fixture
        outcome.error = e
    return outcome


# -- the table ---------------------------------------------------------------------------------

ERROR = "simpletfjob: error: "
WROTE_2 = r"^simpletfjob: wrote 2 tasks to stdout: 1 ps \(a\), 1 worker \(b\)$"
NODE_NAME = r"is not a valid Kubernetes node name"
AB = ("mnist.yaml", "--nodes", "a,b", "-o", "-")


def job(body: str) -> str:
    """A minimal Job template with `body` appended at the top level."""
    return "kind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\n" + body


def alias_bomb(levels: int = 8) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def kubeconfig(
    user: Mapping[str, Any] | None = None,
    server: str | None = None,
    proxy: str | None = None,
    ca: str | None = None,
) -> str:
    cluster = {"server": server or f"http://127.0.0.1:{closed_port()}"}
    if proxy is not None:
        cluster["proxy-url"] = proxy
    if ca is not None:
        cluster["certificate-authority"] = ca
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": dict(user or {})}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    return json.dumps(config)


# A proxy the machine's environment names must not be taken, nor bypassed for 127.0.0.1.
NO_PROXY_BYPASS = {
    name: ""
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy")
}


def plugin(command: str, *args: str) -> dict[str, Any]:
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": command,
            "args": list(args),
        }
    }


def node_list(*items: Any) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(items)})


def ready(name: str, **extra: Any) -> dict[str, Any]:
    node: dict[str, Any] = {
        "metadata": {"name": name},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    for key, value in extra.items():
        node.setdefault(key, {}).update(value)
    return node


ROOT = os.geteuid() == 0
LINUX = Path("/proc/self/statm").exists()


def _proc_1_closed() -> bool:
    try:
        os.readlink("/proc/1/fd/1")
    except PermissionError:
        return True
    except OSError:
        return False
    return False


PROC_1_CLOSED = _proc_1_closed()  # a container without ptrace: /proc/1/fd/1 cannot be opened
MANY_HOSTS = "".join(f"host-{i}\n" for i in range(1000))
PIPED_HOSTS = "".join(f"host-{i:04}.example\n" for i in range(300))  # more than a 4 KB peek

CASES: dict[str, Case] = {
    # -- host names: --nodes and host files ----------------------------------------------------
    "hosts/unicode-name": Case(["mnist.yaml", "--nodes", "hö,b", "-o", "-"], 1, NODE_NAME),
    "hosts/uppercase-in-a-host-file": Case(
        ["mnist.yaml", "--nodes-file", "list", "-o", "-"],
        1,
        r"^simpletfjob: error: list:2: 'H2' " + NODE_NAME,
        files={"list": "h1\nH2\n"},
    ),
    "hosts/254-characters": Case(
        ["mnist.yaml", "--nodes", "a" * 254 + ",b", "-o", "-"], 1, NODE_NAME
    ),
    "hosts/253-characters-in-four-labels": Case(
        ["mnist.yaml", "--nodes", ".".join(["a" * 63] * 4)[:253] + ",b", "-o", "-"],
        0,
        r"^simpletfjob: wrote 2 tasks to stdout",
        check=renders([".".join(["a" * 63] * 4)[:253], "b"]),
    ),
    "hosts/empty-entries-between-commas": Case(
        ["mnist.yaml", "--nodes", ",,a,,b,", "-o", "-"], 0, WROTE_2, check=renders(["a", "b"])
    ),
    "hosts/duplicate-in-a-host-file": Case(
        ["mnist.yaml", "--nodes-file", "list", "-o", "-"],
        1,
        r"list:3: host 'a' is listed twice \(first at list:1\)",
        files={"list": "a\nb\na\n"},
    ),
    "hosts/bom-and-crlf": Case(
        ["mnist.yaml", "--nodes-file", "list", "-o", "-"],
        0,
        WROTE_2,
        files={"list": b"\xef\xbb\xbfa\r\nb\r\n"},
        check=renders(["a", "b"]),
    ),
    "hosts/nul-byte-in-a-host-file": Case(
        ["mnist.yaml", "--nodes-file", "list", "-o", "-"],
        1,
        r"nodes file 'list' is not UTF-8 text \(byte 1 is NUL",
        files={"list": b"a\x00\nb\n"},
    ),
    "hosts/form-feed-inside-a-name": Case(
        ["mnist.yaml", "--nodes-file", "list", "-o", "-"],
        1,
        r"^simpletfjob: error: list:2: 'b\\x0cc' " + NODE_NAME,
        files={"list": "a\nb\x0cc\n"},
    ),
    "hosts/only-blank-lines-and-comments": Case(
        ["mnist.yaml", "--nodes-file", "list", "-o", "-"],
        1,
        r"nodes file 'list' lists no hosts",
        files={"list": "\n  \n# none yet\n"},
    ),
    # -- files --------------------------------------------------------------------------------
    "files/missing-template": Case(
        ["nope.yaml", "--nodes", "a,b", "-o", "-"], 1, r"template 'nope.yaml' does not exist"
    ),
    "files/template-is-a-directory": Case(
        ["dir", "--nodes", "a,b", "-o", "-"],
        1,
        r"template 'dir' is a directory, not a file",
        files={"dir": Dir()},
    ),
    "files/template-symlink-loop": Case(
        ["loop", "--nodes", "a,b", "-o", "-"],
        1,
        r"cannot read template 'loop': Too many levels of symbolic links",
        files={"loop": Symlink("loop2"), "loop2": Symlink("loop")},
    ),
    "files/template-named-pipe-by-a-bare-name": Case(
        ["pipe", "--nodes", "a,b", "-o", "-"],
        0,
        WROTE_2,
        files={"pipe": Fifo(MNIST.encode())},
        check=renders(["a", "b"]),
    ),
    "files/binary-template": Case(
        ["bin.yaml", *AB[1:]],
        1,
        r"template 'bin.yaml' is not UTF-8 text",
        files={"bin.yaml": bytes(range(256)) * 4},
    ),
    "files/unreadable-template": Case(
        ["secret.yaml", *AB[1:]],
        1,
        r"cannot read template 'secret.yaml': Permission denied",
        files={"secret.yaml": Mode(MNIST, 0)},
        skip="root reads any file whatever its mode" if ROOT else None,
    ),
    "files/template-is-dev-zero": Case(
        ["/dev/zero", "--nodes", "a,b", "-o", "-"],
        1,
        r"template '/dev/zero' is not UTF-8 text \(byte 0 is NUL",
    ),
    "files/nodes-file-is-dev-zero": Case(
        ["mnist.yaml", "--nodes-file", "/dev/zero", "-o", "-"],
        1,
        r"nodes file '/dev/zero' is not UTF-8 text \(byte 0 is NUL",
    ),
    "files/template-over-the-size-limit": Case(
        ["big.yaml", "--nodes", "a,b", "-o", "-"],
        1,
        r"template 'big.yaml' is larger than 16 MiB, the limit for it; see Limits in the README",
        files={"big.yaml": Sparse((16 << 20) + 1)},
    ),
    "files/nodes-file-over-the-size-limit": Case(
        ["mnist.yaml", "--nodes-file", "nodes.json", "-o", "-"],
        1,
        r"nodes file 'nodes.json' is larger than 1 GiB",
        files={"nodes.json": Sparse((1 << 30) + 1)},
    ),
    "files/endless-template-on-stdin": Case(
        ["/dev/stdin", "--nodes", "a,b", "-o", "-"],
        1,
        r"template '/dev/stdin' is larger than 16 MiB",
        stdin=b"y\n" * (9 << 20),
    ),
    "files/host-list-through-a-pipe-is-read-once": Case(
        ["mnist.yaml", "--nodes-file", "/dev/stdin", "-o", "-"],
        0,
        r"^simpletfjob: wrote 300 tasks to stdout: 1 ps \(host-0000.example\), 299 worker",
        stdin=PIPED_HOSTS.encode(),
        check=renders(PIPED_HOSTS.split()),
    ),
    "files/node-list-through-a-named-pipe": Case(
        ["mnist.yaml", "--nodes-file", "pipe", "-o", "-"],
        0,
        WROTE_2,
        files={"pipe": Fifo(node_list(ready("b"), ready("a")).encode())},
        check=renders(["a", "b"]),
    ),
    "files/one-pipe-for-the-template-and-the-values": Case(
        ["/dev/stdin", "--nodes", "a,b", "-f", "/dev/stdin", "-o", "-"],
        1,
        r"^simpletfjob: error: values file '/dev/stdin' is the pipe that the template "
        r"'/dev/stdin' was read from already; a pipe can be read only once",
        stdin=MNIST.encode(),
    ),
    "files/template-from-a-closed-stdin": Case(
        ["/dev/stdin", "--nodes", "a,b", "-o", "-"],
        1,
        r"cannot read template '/dev/stdin': stdin is closed",
        shell="<&-",
    ),
    # -- options ------------------------------------------------------------------------------
    "options/N-zero": Case([*AB, "-N", "0"], 2, r"-N must be a positive number"),
    "options/N-huge": Case(
        [*AB, "-N", "9" * 30], 1, r"-N 9{30} asks for more hosts than are eligible"
    ),
    "options/port-65535-with-two-tasks-per-host": Case(
        [*AB, "--port", "65535", "--tasks-per-host", "2"], 2, r"goes past port 65535"
    ),
    "options/tasks-per-host-65535-from-port-1": Case(
        [*AB, "--port", "1", "--tasks-per-host", "65535"],
        1,
        r"the run would have up to 131,070 tasks \(2 hosts x 65,535 tasks per host\); "
        r"a run has at most 10,000",
    ),
    "options/more-hosts-than-a-run-may-have": Case(
        ["mnist.yaml", "--nodes-file", "many", "-o", "-"],
        1,
        r"the run would have up to 10,001 tasks \(10,001 hosts\)",
        files={"many": "".join(f"h{i}\n" for i in range(10_001))},
    ),
    "options/E-before-the-template": Case(
        ["-E", "mnist.yaml", "--nodes", "a,b", "-o", "-"], 2, r"-E took 'mnist.yaml'"
    ),
    "options/E-bare-at-the-end-without-exc": Case(
        [*AB, "-E"], 1, r"exclusion file 'exc' does not exist"
    ),
    "options/exclusion-typo-then-too-few-hosts": Case(
        [*AB, "-E", "exc", "-N", "5"],
        1,
        r"^simpletfjob: error: -N 5 asks for more hosts than are eligible",
        files={"exc": "zz\n"},
    ),
    "options/psf-host-not-among-the-hosts": Case(
        [*AB, "--psf", "psf"], 1, r"--psf host 'z' is not among the hosts", files={"psf": "z\n"}
    ),
    "options/psf-file-with-no-hosts": Case(
        [*AB, "--psf", "psf"], 1, r"--psf file 'psf' lists no hosts", files={"psf": "# no\n"}
    ),
    "options/psf-host-that-is-excluded": Case(
        [*AB, "--psf", "psf", "-E", "psf"],
        1,
        r"--psf host 'a' is not eligible: excluded",
        files={"psf": "a\n"},
    ),
    "options/every-host-a-psf-host": Case(
        [*AB, "--psf", "psf"],
        1,
        r"taken by 2 ps; use more hosts or fewer hosts in the --psf file \(2 nodes: 2 eligible\)$",
        files={"psf": "a\nb\n"},
    ),
    "options/no-ps-and-the-chief-takes-the-one-host": Case(
        ["mnist.yaml", "--nodes", "a", "--psn", "0", "--chief", "-o", "-"],
        1,
        r"taken by 0 ps \+ 1 chief; use more hosts or no chief \(--no-chief\) \(1 node: ",
    ),
    "options/selector-with-a-plain-host-list": Case(
        [*AB, "-l", "pool=gpu"], 2, r"--selector needs node objects"
    ),
    # -- templates ----------------------------------------------------------------------------
    "templates/empty": Case(
        ["empty.yaml", *AB[1:]],
        1,
        r"document 1 \(ps 0 on a\) is empty: the template renders no YAML document",
        files={"empty.yaml": ""},
    ),
    "templates/a-list": Case(
        ["l.yaml", *AB[1:]], 1, r"is a YAML list, not a mapping", files={"l.yaml": "- a\n- b\n"}
    ),
    "templates/windows-line-endings": Case(
        ["crlf.yaml", *AB[1:]],
        0,
        r"^simpletfjob: wrote 2 tasks",
        files={"crlf.yaml": MNIST.replace("\n", "\r\n")},
        check=renders(["a", "b"]),
    ),
    "templates/old-mac-line-endings": Case(
        ["cr.yaml", *AB[1:]],
        0,
        r"^simpletfjob: wrote 2 tasks",
        files={"cr.yaml": MNIST.replace("\n", "\r")},
        check=renders(["a", "b"]),
    ),
    "templates/tabs-for-indentation": Case(
        ["tabs.yaml", *AB[1:]],
        1,
        r"not valid YAML at line 4, column 1: found character that cannot start any token",
        files={"tabs.yaml": MNIST.replace("\n  ", "\n\t")},
    ),
    "templates/duplicate-key": Case(
        ["dup.yaml", *AB[1:]],
        1,
        r"mapping key 'a' is defined twice, at lines 4 and 5",
        files={"dup.yaml": job("a: 1\na: 2\n")},
    ),
    "templates/pod-labels-a-list": Case(
        ["t.yaml", *AB[1:]],
        1,
        r"^simpletfjob: error: document 1 \(ps 0 on a\): spec\.template\.metadata\.labels is not "
        r"a mapping; write labels: \{\} or use --no-labels$",
        files={"t.yaml": job("spec:\n  template:\n    metadata:\n      labels: [x]\n")},
    ),
    "templates/metadata-a-list": Case(
        ["t.yaml", *AB[1:]],
        1,
        r"^simpletfjob: error: document 1 \(ps 0 on a, Job\): metadata must be a mapping, not a list$",
        files={"t.yaml": "kind: Job\nmetadata: [name, t-<<type>>-<<index>>]\n"},
    ),
    "templates/tf-config-as-a-key": Case(
        ["t.yaml", *AB[1:]],
        1,
        r"t.yaml:4: <<TF_CONFIG>> stands in a mapping key",
        files={"t.yaml": job("<<TF_CONFIG>>: 1\n")},
    ),
    "templates/tf-config-as-an-anchor": Case(
        ["t.yaml", *AB[1:]],
        1,
        r"not valid YAML.*\(<<TF_CONFIG>> at t.yaml:4\)",
        files={"t.yaml": job("v: &<<TF_CONFIG>> 1\n")},
    ),
    "templates/tf-config-tagged-int": Case(
        ["t.yaml", *AB[1:]],
        1,
        r"t.yaml:4: <<TF_CONFIG>> stands in a value tagged tag:yaml.org,2002:int",
        files={"t.yaml": job("v: !!int <<TF_CONFIG>>\n")},
    ),
    "templates/tf-config-in-a-flow-list-in-double-quotes": Case(
        ["t.yaml", *AB[1:], "--no-labels"],
        0,
        WROTE_2,
        files={"t.yaml": job('v: ["--tf_config=<<TF_CONFIG>>"]\n')},
        check=tf_config_values(lambda d: d["v"][0]),
    ),
    "templates/tf-config-twice-in-one-plain-value": Case(
        ["t.yaml", *AB[1:]],
        0,
        WROTE_2,
        files={"t.yaml": job("v: <<TF_CONFIG>><<TF_CONFIG>>\n")},
        check=tf_config_twice,
    ),
    "templates/a-yaml-directive": Case(
        ["d.yaml", *AB[1:]],
        1,
        r"document 1 \(ps 0 on a\) starts with a %YAML directive, which kubectl cannot read "
        r".*\(d.yaml:1\)$",
        files={"d.yaml": "%YAML 1.1\n---\n" + job("")},
    ),
    "templates/header-alias-bomb": Case(
        ["h.yaml", *AB[1:]],
        1,
        r"h.yaml:\d+: excessive aliasing",
        files={
            "h.yaml": "# simpletfjob:\n#   values:\n"
            + "".join(f"#     {line}\n" for line in alias_bomb().splitlines())
            + MNIST
        },
    ),
    "templates/private-use-marker-character": Case(
        ["t.yaml", *AB[1:]],
        1,
        r"t.yaml: contains U\+E000, which simpletfjob reserves",
        files={"t.yaml": job("v: \ue000\n")},
    ),
    # -- jinja --------------------------------------------------------------------------------
    "jinja/syntax-error": Case(
        ["j.yaml", *AB[1:]],
        1,
        r"j.yaml:4: template syntax error: unexpected 'end of template'",
        files={"j.yaml": job("v: << 1 +\n")},
    ),
    "jinja/undefined-name": Case(
        ["j.yaml", *AB[1:]],
        1,
        r"j.yaml:4: 'imge' is undefined; give it with --set imge=VALUE",
        files={"j.yaml": job("v: << imge >>\n")},
    ),
    "jinja/sandbox-mro": Case(
        ["j.yaml", *AB[1:]],
        1,
        r"j.yaml:4: SecurityError: access to attribute '__class__' of 'str' object is unsafe",
        files={"j.yaml": job("v: << ''.__class__.__mro__ >>\n")},
    ),
    "jinja/include-another-file": Case(
        ["j.yaml", *AB[1:]],
        1,
        r"j.yaml:4: there is no template 'x.yaml' to include, import or extend: "
        r"a simpletfjob template is one file",
        files={"j.yaml": job("{% include 'x.yaml' %}\n"), "x.yaml": "a: 1\n"},
    ),
    "jinja/range-of-a-billion": Case(
        ["j.yaml", *AB[1:]],
        1,
        r"j.yaml:4: .*range",
        files={"j.yaml": job("{% for i in range(10**9) %}{% endfor %}\n")},
    ),
    "jinja/macro-that-calls-itself-without-end": Case(
        ["j.yaml", *AB[1:]],
        1,
        r"j.yaml:1: the template recurses too deeply",
        files={"j.yaml": "{% macro f() %}<<f()>>{% endmacro %}<<f()>>\n"},
    ),
    "jinja/macro-that-calls-itself-twice": Case(
        ["j.yaml", *AB[1:]],
        1,
        r"j.yaml:1: the template makes more than 100,000 calls for one task",
        files={
            "j.yaml": "{% macro f(n) %}{% if n %}<<f(n-1)>><<f(n-1)>>{% endif %}{% endmacro %}"
            + job("v: '<<f(60)>>'\n")
        },
    ),
    "jinja/nested-range-loops": Case(
        ["j.yaml", *AB[1:]],
        1,
        r"j.yaml:4: the template loops more than 1,000,000 times for one task",
        files={
            "j.yaml": job(
                "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}\n"
            )
        },
    ),
    "jinja/a-string-times-ten-billion": Case(
        ["j.yaml", *AB[1:]],
        1,
        r"j.yaml:4: '\*' would make a string of 10,000,000,000 characters",
        files={"j.yaml": job("v: << 'x' * 10**10 >>\n")},
    ),
    "jinja/nine-to-the-hundred-millionth": Case(
        ["j.yaml", *AB[1:]],
        1,
        r"j.yaml:4: 9 \*\* 99999999 has more than 100,000 bits",
        files={"j.yaml": job("v: << 9 ** 99999999 >>\n")},
    ),
    "jinja/a-number-too-long-to-show": Case(
        ["j.yaml", *AB[1:]],
        1,
        r"^simpletfjob: error: j.yaml:4: a number of more than 4,300 digits is too long",
        files={"j.yaml": job("v: << 9 ** 9999 >>\n")},
    ),
    "jinja/squaring-in-a-loop": Case(
        ["j.yaml", *AB[1:]],
        1,
        r"j.yaml:4: a product of more than 100,000 bits",
        files={
            "j.yaml": job(
                "{% set ns = namespace(n=3) %}"
                "{% for i in range(40) %}{% set ns.n = ns.n * ns.n %}{% endfor %}v: 1\n"
            )
        },
    ),
    "jinja/center-ten-billion": Case(
        ["j.yaml", *AB[1:]],
        1,
        r"j.yaml:4: the template needs more than 512 MiB of memory for one task",
        files={"j.yaml": job("v: << 'x' | center(10**10) >>\n")},
        skip=None if LINUX else "the memory cap needs /proc",
    ),
    "jinja/twenty-megabytes-of-text": Case(
        ["j.yaml", *AB[1:]],
        1,
        r"j.yaml: the template makes 20,000,039 characters for one task, more than 16 MiB",
        files={"j.yaml": job("v: << 'x'.center(20000000) >>\n")},
    ),
    "jinja/ten-thousand-and-one-expressions": Case(
        ["j.yaml", *AB[1:]],
        1,
        r"j.yaml:10002: the template has more than 10,000 expressions and statements",
        files={"j.yaml": job("".join(f"k{i}: <<type>>\n" for i in range(10_001)))},
    ),
    "jinja/brackets-five-thousand-deep": Case(
        ["j.yaml", *AB[1:]],
        1,
        r"j.yaml: the template nests too deeply to compile",
        files={"j.yaml": job("v: << " + "(" * 5000 + "1" + ")" * 5000 + " >>\n")},
    ),
    # -- --set and -f -------------------------------------------------------------------------
    "values/set-without-equals": Case(
        [*AB, "--set", "image"], 2, r"--set 'image': expected KEY=VALUE"
    ),
    "values/set-a-built-in": Case(
        [*AB, "--set", "type=ps"], 2, r"'type' is set by simpletfjob for each task"
    ),
    "values/set-private-use-character": Case(
        [*AB, "--set", "a=x\ue000y"], 2, r"the value contains U\+E000"
    ),
    "values/set-nested-clash": Case(
        ["v.yaml", *AB[1:], "--set", "a=1", "--set", "a.b=2"],
        0,
        WROTE_2,
        files={"v.yaml": job("v: << a.b >>\n")},
        check=values_of("v", [2, 2]),
    ),
    "values/set-5000-digits": Case(
        ["v.yaml", *AB[1:], "--set", "a=" + "9" * 5000],
        0,
        WROTE_2,
        files={"v.yaml": job("v: << a|length >>\n")},
        check=values_of("v", [5000, 5000]),
    ),
    "values/file-number-of-5000-digits": Case(
        [*AB, "-f", "v.yaml"],
        1,
        r"^simpletfjob: error: v.yaml:2: not valid YAML: a number of 5,000 digits is too long: "
        r"a number may have at most 4,300 \(see Limits in the README\)$",
        files={"v.yaml": "a: 1\nb: " + "9" * 5000 + "\n"},
    ),
    "values/file-key-given-twice": Case(
        [*AB, "-f", "v.yaml"],
        1,
        r"^simpletfjob: error: v.yaml:4: not valid YAML: mapping key 'cpu' is given twice "
        r"\(first on line 2\)$",
        files={"v.yaml": "res:\n  cpu: 1\n  mem: 2\n  cpu: 4\n"},
    ),
    "values/header-options-given-twice": Case(
        ["h.yaml", *AB[1:]],
        1,
        r"^simpletfjob: error: h.yaml:5: the template header is not valid YAML: mapping key "
        r"'options' is given twice \(first on line 3\)$",
        files={
            "h.yaml": "# d\n# simpletfjob:\n#   options: {psn: 2}\n#   values: {}\n#   options: {psn: 0}\n"
            + MNIST
        },
    ),
    "values/set-bytes-that-are-not-utf-8": Case(
        [*AB, "--set", "a=x\udcffy"],
        2,
        r"^simpletfjob: error: --set 'a=x\\udcffy': the value is not UTF-8 text",
    ),
    "values/file-python-object-tag": Case(
        [*AB, "-f", "v.yaml"],
        1,
        r"v.yaml:1: not valid YAML: could not determine a constructor for the tag "
        r"'tag:yaml.org,2002:python/object:os.system'",
        files={"v.yaml": "a: !!python/object:os.system {}\n"},
    ),
    "values/file-alias-bomb": Case(
        [*AB, "-f", "v.yaml"],
        1,
        r"v.yaml:\d+: excessive aliasing",
        files={"v.yaml": alias_bomb()},
    ),
    "values/terminal-escape-in-the-file-name": Case(
        [*AB, "-f", "v\x1b[2J.yaml"],
        1,
        r"^simpletfjob: error: v\\x1b\[2J.yaml:2: not valid YAML",
        files={"v\x1b[2J.yaml": "a: [\n"},
    ),
    "values/file-sets-a-built-in": Case(
        [*AB, "-f", "v.yaml"],
        2,
        r"v.yaml:2: 'index' is set by simpletfjob",
        files={"v.yaml": "a: 1\nindex: 3\n"},
    ),
    # -- output paths -------------------------------------------------------------------------
    "output/the-template": Case(
        ["mnist.yaml", "--nodes", "a,b", "-o", "mnist.yaml"],
        1,
        r"output 'mnist.yaml' is the template",
    ),
    "output/hard-link-to-the-template": Case(
        ["mnist.yaml", "--nodes", "a,b", "-o", "copy.yaml"],
        1,
        r"output 'copy.yaml' is the same file as 'mnist.yaml', the template",
        files={"copy.yaml": HardLink("mnist.yaml")},
    ),
    "output/symlink-to-the-nodes-file": Case(
        ["mnist.yaml", "--nodes-file", "hosts", "-o", "link"],
        1,
        r"output 'link' is the same file as 'hosts', the nodes file",
        files={"link": Symlink("hosts")},
    ),
    "output/a-directory": Case(
        ["mnist.yaml", "--nodes", "a,b", "-o", "out"],
        1,
        r"output 'out' is a directory; give a file name, such as 'out/mnist_tfjob.yaml'",
        files={"out": Dir()},
    ),
    "output/missing-directory": Case(
        ["mnist.yaml", "--nodes", "a,b", "-o", "no/such/x.yaml"],
        1,
        r"cannot write 'no/such/x.yaml': directory 'no/such' does not exist",
    ),
    "output/under-a-file": Case(
        ["mnist.yaml", "--nodes", "a,b", "-o", "hosts/x.yaml"],
        1,
        r"cannot write 'hosts/x.yaml': 'hosts' is not a directory",
    ),
    "output/read-only-file-system": Case(
        ["mnist.yaml", "--nodes", "a,b", "-o", "/proc/simpletfjob.yaml"],
        1,
        r"cannot write '/proc/simpletfjob.yaml': cannot create a file in directory '/proc'",
    ),
    "output/dev-stdout-into-an-append-file": Case(
        ["mnist.yaml", "--nodes", "a,b", "-o", "/dev/stdout"],
        0,
        r"^simpletfjob: wrote 2 tasks to /dev/stdout",
        files={"log": "earlier\n"},
        shell=">>log",
        changes=("log",),
        check=appended_to("log", b"earlier\n"),
    ),
    "output/a-full-device-after-a-label-warning": Case(
        ["t.yaml", "--nodes", "a,b", "-o", "/dev/full"],
        1,
        r"^simpletfjob: error: cannot write '/dev/full': No space left on device$",
        files={"t.yaml": job("  labels: {simpletfjob/job: mine}\n")},
    ),
    "output/newline-in-the-file-name": Case(
        ["mnist.yaml", "--nodes", "a,b", "-o", "x\ny.yaml"],
        0,
        r"^simpletfjob: wrote 2 tasks to x\\ny.yaml: 1 ps \(a\), 1 worker \(b\)$",
        creates=("x\ny.yaml",),
        check=renders(["a", "b"], "x\ny.yaml"),
    ),
    "output/a-descriptor-that-is-not-open": Case(
        ["mnist.yaml", "--nodes", "a,b", "-o", "/dev/fd/9"],
        1,
        r"cannot write to /dev/fd/9: Bad file descriptor",
    ),
    "output/the-file-stdout-is-redirected-to": Case(
        ["mnist.yaml", "--nodes", "a,b", "-o", "out.yaml"],
        1,
        r"output 'out.yaml' is the file stdout is redirected to",
        files={"out.yaml": "old\n"},
        shell=">>out.yaml",
    ),
    "output/stdout-redirected-onto-the-template": Case(
        AB,
        1,
        r"stdout is redirected to 'mnist.yaml', the template",
        shell=">>mnist.yaml",
    ),
    "output/symlink-into-a-directory-that-may-not-be-searched": Case(
        ["mnist.yaml", "--nodes", "a,b", "-o", "link"],
        1,
        r"^simpletfjob: error: cannot write 'link': Permission denied$",
        files={"locked": Dir(), "link": Symlink("locked/x/y.yaml")},
        before=lambda directory: (directory / "locked").chmod(0),
        skip="root looks into any directory whatever its mode" if ROOT else None,
    ),
    "output/another-process-descriptor": Case(
        ["mnist.yaml", "--nodes", "a,b", "-o", "/proc/1/fd/1"],
        1,
        r"^simpletfjob: error: cannot write '/proc/1/fd/1': Permission denied$",
        skip=None if PROC_1_CLOSED else "this process may look into process 1's descriptors",
    ),
    # -- kubeconfigs --------------------------------------------------------------------------
    "kubeconfig/alias-bomb": Case(
        ["mnist.yaml", "--kubeconfig", "kc", "-o", "-"],
        1,
        r"kubeconfig kc:\d+: excessive aliasing",
        files={"kc": alias_bomb()},
    ),
    "kubeconfig/contexts-as-strings": Case(
        ["mnist.yaml", "--kubeconfig", "kc", "-o", "-"],
        1,
        r"kubeconfig kc: contexts\[0\] must be a mapping with 'name' and 'context', not the string 'a'",
        files={"kc": "contexts: [a, b]\n"},
    ),
    "kubeconfig/socks-proxy-url-without-pysocks": Case(
        ["mnist.yaml", "--kubeconfig", "kc", "-o", "-"],
        1,
        r"kc: clusters\[0\] \('c'\)\.cluster\.proxy-url 'socks5://127\.0\.0\.1:1' is a SOCKS "
        r"proxy, which needs the PySocks package installed",
        files={"kc": kubeconfig(proxy="socks5://127.0.0.1:1")},
        env=NO_PROXY_BYPASS,
        skip=None if importlib.util.find_spec("socks") is None else "PySocks is installed",
    ),
    "kubeconfig/proxy-url-that-is-not-a-url": Case(
        ["mnist.yaml", "--kubeconfig", "kc", "-o", "-"],
        1,
        r"kc: clusters\[0\] \('c'\)\.cluster\.proxy-url '::x' is not a valid proxy URL",
        files={"kc": kubeconfig(proxy="::x")},
        env=NO_PROXY_BYPASS,
    ),
    "kubeconfig/HTTPS_PROXY-with-a-password-and-no-url": Case(
        ["mnist.yaml", "--kubeconfig", "kc", "-o", "-"],
        1,
        r"^(?!.*secret).*the proxy from \$HTTPS_PROXY or \$HTTP_PROXY 'http://u:xxxxx@\[::x' "
        r"is not a valid proxy URL: ",
        files={"kc": kubeconfig()},
        env={**NO_PROXY_BYPASS, "http_proxy": "http://u:secret@[::x"},
    ),
    "kubeconfig/proxy-that-refuses": Case(
        ["mnist.yaml", "--kubeconfig", "kc", "-o", "-"],
        1,
        r"\(context 'x'\): cannot reach the proxy: connection refused; check \$HTTPS_PROXY",
        files={"kc": kubeconfig(proxy=f"http://127.0.0.1:{closed_port()}")},
        env=NO_PROXY_BYPASS,
    ),
    "kubeconfig/password-in-the-server-url": Case(
        ["mnist.yaml", "--kubeconfig", "kc", "-o", "-"],
        1,
        r"^simpletfjob: error: http://admin:xxxxx@127\.0\.0\.1:\d+ \(context 'x'\): unreachable",
        files={"kc": kubeconfig(server=f"http://admin:hunter2@127.0.0.1:{closed_port()}")},
    ),
    "kubeconfig/certificate-authority-is-a-directory": Case(
        ["mnist.yaml", "--kubeconfig", "kc", "-o", "-"],
        1,
        r"kc: clusters\[0\] \('c'\)\.cluster\.certificate-authority: 'certs' is a directory, "
        r"not a file$",
        files={"kc": kubeconfig(ca="certs"), "certs": Dir()},
    ),
    "kubeconfig/gcp-auth-provider-without-google-credentials": Case(
        ["mnist.yaml", "--kubeconfig", "kc", "-o", "-"],
        1,
        r"context 'x': the auth-provider 'gcp' gave no credential; .* gke-gcloud-auth-plugin$",
        files={"kc": kubeconfig({"auth-provider": {"name": "gcp"}})},
        env={"HOME": "/nonexistent", "GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent"},
        skip=None if importlib.util.find_spec("google") is None else "google-auth is installed",
    ),
    "kubeconfig/exec-plugin-missing": Case(
        ["mnist.yaml", "--kubeconfig", "kc", "-o", "-"],
        1,
        r"the credential plugin 'no-such-auth-plugin' was not found",
        files={"kc": kubeconfig(plugin("no-such-auth-plugin"))},
    ),
    "kubeconfig/exec-plugin-failing": Case(
        ["mnist.yaml", "--kubeconfig", "kc", "-o", "-"],
        1,
        r"the credential plugin 'sh' failed \(exit status 3\): Unable to locate credentials$",
        files={
            "kc": kubeconfig(
                plugin(
                    "sh", "-c", "echo starting >&2; echo Unable to locate credentials >&2; exit 3"
                )
            )
        },
    ),
    "kubeconfig/directory-in-KUBECONFIG": Case(
        ["mnist.yaml", "-o", "-"],
        1,
        r"\$KUBECONFIG lists 'kcdir', which is a directory",
        files={"kcdir": Dir(), "kc": kubeconfig()},
        env={"KUBECONFIG": "kc:kcdir"},
    ),
    "kubeconfig/KUBECONFIG-is-dev-null": Case(
        ["mnist.yaml", "-o", "-"],
        1,
        r"kubeconfig /dev/null sets no current context",
        env={"KUBECONFIG": "/dev/null"},
    ),
    "kubeconfig/symlink-loop-in-KUBECONFIG": Case(
        ["mnist.yaml", "-o", "-"],
        1,
        r"cannot read kubeconfig 'loop': Too many levels of symbolic links",
        files={"loop": Symlink("loop2"), "loop2": Symlink("loop")},
        env={"KUBECONFIG": "missing:loop"},
    ),
    "kubeconfig/dev-zero": Case(
        ["mnist.yaml", "--kubeconfig", "/dev/zero", "-o", "-"],
        1,
        r"kubeconfig '/dev/zero' is not UTF-8 text \(byte 0 is NUL",
    ),
    "kubeconfig/through-a-named-pipe": Case(
        ["mnist.yaml", "--kubeconfig", "pipe", "-o", "-"],
        1,
        r"^simpletfjob: error: http://127.0.0.1:\d+ \(context 'x'\): unreachable: connection refused",
        files={"pipe": Fifo(kubeconfig().encode())},
    ),
    "kubeconfig/output-onto-the-KUBECONFIG-file": Case(
        ["mnist.yaml", "--nodes", "a,b", "-o", "kc"],
        1,
        r"output 'kc' is the kubeconfig in \$KUBECONFIG",
        files={"kc": kubeconfig()},
        env={"KUBECONFIG": "kc"},
    ),
    "kubeconfig/output-onto-the-default-through-a-symlink": Case(
        ["mnist.yaml", "--nodes", "a,b", "-o", "link"],
        1,
        r"output 'link' is the same file as '.*home/.kube/config', the default kubeconfig",
        files={"home/.kube/config": kubeconfig(), "link": Symlink("home/.kube/config")},
    ),
    # -- NodeLists ----------------------------------------------------------------------------
    "nodelist/labels-as-a-list-json": Case(
        ["mnist.yaml", "--nodes-file", "n.json", "-o", "-"],
        1,
        r"n.json: items\[0\], node 'a': metadata.labels must be a mapping, not a list",
        files={"n.json": node_list({"metadata": {"name": "a", "labels": ["x"]}})},
    ),
    "nodelist/metadata-a-string-yaml": Case(
        ["mnist.yaml", "--nodes-file", "n.yaml", "-o", "-"],
        1,
        r"n.yaml: items\[0\]: metadata must be a mapping, not the string 'a'",
        files={"n.yaml": "kind: List\nitems:\n- metadata: a\n"},
    ),
    "nodelist/truncated-json": Case(
        ["mnist.yaml", "--nodes-file", "n.json", "-o", "-"],
        1,
        r"n.json:1: not valid JSON",
        files={"n.json": node_list(ready("a"))[:-3]},
    ),
    "nodelist/number-of-5000-digits-json": Case(
        ["mnist.yaml", "--nodes-file", "n.json", "-o", "-"],
        1,
        r"^simpletfjob: error: n.json: a number of 5,000 digits is too long",
        files={
            "n.json": node_list(ready("a"), ready("b", spec={"x": 0})).replace(
                '"x": 0', '"x": ' + "9" * 5000
            )
        },
    ),
    "nodelist/internal-ip-that-is-not-an-address": Case(
        ["mnist.yaml", "--nodes-file", "n.json", "--address", "internal-ip", "-o", "-"],
        1,
        r"^simpletfjob: error: n.json: items\[1\], node 'b': its InternalIP '10\.0\.0\.2 ' is "
        r"not an IP address; choose another --address$",
        files={
            "n.json": node_list(
                ready("a", status={"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}),
                ready("b", status={"addresses": [{"type": "InternalIP", "address": "10.0.0.2 "}]}),
            )
        },
    ),
    "nodelist/gpu-count-that-is-no-quantity": Case(
        ["mnist.yaml", "--nodes-file", "n.json", "--gpus", "1", "-o", "-"],
        1,
        r"^simpletfjob: error: n.json: items\[1\], node 'b': status.allocatable\['nvidia.com/gpu'\] "
        r"must be a quantity such as \"4\", not the string 'lots'$",
        files={
            "n.json": node_list(
                ready("a", status={"allocatable": {"nvidia.com/gpu": "2"}}),
                ready("b", status={"allocatable": {"nvidia.com/gpu": "lots"}}),
            )
        },
    ),
    "nodelist/gpu-counts-with-suffixes": Case(
        ["mnist.yaml", "--nodes-file", "n.json", "--gpus", "1000", "-o", "-"],
        0,
        WROTE_2,
        files={
            "n.json": node_list(
                ready("a", status={"allocatable": {"nvidia.com/gpu": "1k"}}),
                ready("b", status={"allocatable": {"nvidia.com/gpu": "1Ki"}}),
                ready("c", status={"allocatable": {"nvidia.com/gpu": "999"}}),
            )
        },
        check=renders(["a", "b"]),
    ),
    "nodelist/alias-bomb-yaml": Case(
        ["mnist.yaml", "--nodes-file", "n.yaml", "-o", "-"],
        1,
        r"n.yaml:\d+: excessive aliasing",
        files={"n.yaml": "kind: List\nitems: []\n" + alias_bomb()},
    ),
    "nodelist/nested-too-deeply": Case(
        ["mnist.yaml", "--nodes-file", "n.json", "-o", "-"],
        1,
        r"n.json: not a NodeList: nested too deeply",
        files={"n.json": '{"items": ' + "[" * 100_000 + "]" * 100_000 + "}"},
    ),
    "nodelist/the-same-name-twice": Case(
        ["mnist.yaml", "--nodes-file", "n.json", "-o", "-"],
        1,
        r"n.json: items\[1\]: host 'a' is listed twice",
        files={"n.json": node_list(ready("a"), ready("a"))},
    ),
    # -- streams ------------------------------------------------------------------------------
    "streams/stdout-closed": Case(
        AB, 1, r"^simpletfjob: error: cannot write to stdout: Bad file descriptor$", shell=">&-"
    ),
    "streams/stdout-full": Case(
        AB, 1, r"cannot write to stdout: No space left on device", shell=">/dev/full"
    ),
    "streams/stdout-broken-pipe": Case(
        AB, 1, r"cannot write to stdout: Broken pipe", broken_stdout=True
    ),
    "streams/stderr-closed-on-success": Case(AB, 0, None, shell="2>&-", check=renders(["a", "b"])),
    "streams/stderr-closed-on-failure": Case(
        ["mnist.yaml", "--nodes", "a,b,a", "-o", "-"], 1, None, shell="2>&-"
    ),
    "streams/help-to-a-closed-stdout": Case(
        ["--help"], 1, r"cannot write to stdout: Bad file descriptor", shell=">&-"
    ),
    "streams/init-to-a-full-stdout": Case(
        ["init", "tf1-flags", "-o", "-"],
        1,
        r"cannot write to stdout: No space left on device",
        shell=">/dev/full",
    ),
    # -- signals ------------------------------------------------------------------------------
    "signals/sigterm-while-reading-the-template": Case(
        ["./pipe", "--nodes", "a,b", "-o", "-"],
        143,
        r"^simpletfjob: interrupted$",
        files={"pipe": Fifo()},
        during=signal_while_reading("pipe", signal.SIGTERM),
    ),
    "signals/sigint-while-reading-the-template": Case(
        ["./pipe", "--nodes", "a,b", "-o", "-"],
        130,
        r"^simpletfjob: interrupted$",
        files={"pipe": Fifo()},
        during=signal_while_reading("pipe", signal.SIGINT),
    ),
    "signals/sighup-while-reading-the-template": Case(
        ["./pipe", "--nodes", "a,b", "-o", "-"],
        129,
        r"^simpletfjob: interrupted$",
        files={"pipe": Fifo()},
        during=signal_while_reading("pipe", signal.SIGHUP),
    ),
    "signals/sigint-while-writing-a-file": Case(
        ["mnist.yaml", "--nodes-file", "many", "-o", "out.yaml"],
        130,
        r"^simpletfjob: interrupted$",
        files={"many": MANY_HOSTS, "out.yaml": "old: content\n"},
        during=signal_while_writing(signal.SIGINT),
        check=no_temporary_file,
    ),
    "signals/sigterm-while-writing-a-file": Case(
        ["mnist.yaml", "--nodes-file", "many", "-o", "out.yaml"],
        143,
        r"^simpletfjob: interrupted$",
        files={"many": MANY_HOSTS, "out.yaml": "old: content\n"},
        during=signal_while_writing(signal.SIGTERM),
        check=no_temporary_file,
    ),
}


@pytest.fixture(scope="module")
def outcomes(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Outcome]]:
    """Every selected row, run a few at a time; each row's test then checks its own outcome."""
    root = tmp_path_factory.mktemp("adversarial")
    selected = {
        item.callspec.params["name"]
        for item in request.session.items
        if isinstance(item, pytest.Function) and item.originalname == "test_hostile_input"
    }
    runnable = {
        name: case for name, case in CASES.items() if case.skip is None and name in selected
    }
    # Under nohup (or a CI runner that ignores SIGHUP) the rows would inherit the
    # ignored SIGHUP, and simpletfjob rightly keeps running through it, as nohup asks:
    # the rows run as from a terminal, with SIGHUP's default action.
    hangup = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
            futures = {
                name: pool.submit(run_case, case, root / f"case{i}")
                for i, (name, case) in enumerate(runnable.items())
            }
            results = {name: future.result() for name, future in futures.items()}
    finally:
        signal.signal(signal.SIGHUP, hangup)
    yield results


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_input(name: str, outcomes: dict[str, Outcome]) -> None:
    case = CASES[name]
    if case.skip is not None:
        pytest.skip(case.skip)
    outcome = outcomes[name]
    if outcome.error is not None:
        raise outcome.error
    assert not outcome.hung, f"still running after {TIMEOUT} s: {outcome.err}"
    assert outcome.code == case.code, outcome.err
    assert "Traceback" not in outcome.err, outcome.err
    assert "internal error" not in outcome.err, outcome.err
    if case.err is not None:
        lines = outcome.err.splitlines()
        assert len(lines) == 1, outcome.err
        if case.code == 1 or case.code == 2:
            assert lines[0].startswith(ERROR), outcome.err
        assert re.search(case.err, lines[0]), outcome.err
    if case.code != 0 and not case.partial_stdout:
        assert outcome.out == b""
    expected = {k: v for k, v in outcome.before.items() if k not in case.changes}
    after = {
        k: v for k, v in outcome.after.items() if k not in case.changes and k not in case.creates
    }
    assert after == expected
    if case.check is not None:
        case.check(outcome)


def test_every_kind_of_input_is_attacked() -> None:
    """The table covers every input kind the issue lists, several rows each."""
    kinds: dict[str, int] = {}
    for name in CASES:
        kind = name.split("/", 1)[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    assert set(kinds) == {
        "hosts",
        "files",
        "options",
        "templates",
        "jinja",
        "values",
        "output",
        "kubeconfig",
        "nodelist",
        "streams",
        "signals",
    }
    assert all(count >= 4 for count in kinds.values()), kinds
    assert len(CASES) >= 60
