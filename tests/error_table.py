"""The one table of error cases, for every kind of input: each row a command line and what it must do.

A row (`Case`) is the files of its directory, the command line, the environment and
the streams, and what the run must do. For every row the runner asserts:

- the exit code;
- exactly one line on stderr (unless the row closes stderr), matching the row's
  pattern (`line(...)` for an exact line), with no traceback and no `internal error`;
  a refusal's line starts `simpletfjob: error: `;
- nothing on stdout when the run fails;
- every file that was in the directory before is byte-identical after, and no
  file is left behind (a temporary file, say), except what the row writes;
- what the row's `check` says of a run that succeeds.

Each row runs in a directory of its own, with HOME in that directory and no kubeconfig or
in-cluster setting from the machine. Most rows run in-process, calling `main()` as the
console script does (tests/acceptance/test_errors.py). A row runs as the installed
console script, forked by tests/support/forkserver.py and ended by a generous timeout
(tests/process/test_adversarial.py), when the process is what it tests (`runs_as_process`):

- its kind is about the process: streams and signals;
- it needs what only a process has: a shell redirection, stdin, a broken pipe, a named
  pipe fed while the run waits, something done while it runs, a path that names a
  descriptor (/dev/fd/N, /dev/stdout, /proc/...), a file mode or a file too large to hash;
- or a timeout is its only bound should the code regress, or what it loads must not
  reach pytest (`process=True`, and the kinds jinja and kubeconfig): hostile
  templates, alias bombs, kubeconfigs that reach out or run a credential plugin.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import signal
import stat
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import EXAMPLES, job_template, load_all, missing_extra
from tests.support.kubeapi import closed_port, make_node

TIMEOUT = 120  # seconds: generous, for a loaded machine; a row that takes it has hung

MNIST = (EXAMPLES / "mnist.yaml").read_text()
HOSTS = "h1\nh2\nh3\n"
FOUR_HOSTS = "h10\nh100\nh14\nh23\n"

# The kinds of row that run as a process whatever they hold (see the module docstring).
PROCESS_KINDS = frozenset({"streams", "signals", "jinja", "kubeconfig"})
# Paths that name the process's own descriptors (or another's): in-process they would be pytest's.
DESCRIPTORS = ("/dev/fd/", "/dev/std", "/proc/")


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
    process: bool = False  # run as the console script, with a timeout, whatever the row holds

    def runs_as_process(self, name: str) -> bool:
        """Whether the row runs as the installed console script (see the module docstring)."""
        special = (Fifo, Sparse, Mode)
        return (
            self.process
            or name.split("/", 1)[0] in PROCESS_KINDS
            or bool(self.shell or self.broken_stdout or self.partial_stdout)
            or self.stdin is not None
            or self.during is not None
            or self.err is None
            or any(isinstance(content, special) for content in self.files.values())
            or any(arg.startswith(DESCRIPTORS) for arg in self.argv)
        )


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


def no_stderr(outcome: Outcome) -> None:
    """Nothing on stderr: no line of the run's, nor of the interpreter's end."""
    assert outcome.err == ""


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


# -- a case directory ----------------------------------------------------------------------


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


def line(text: str) -> str:
    """The pattern of exactly this stderr line."""
    return "^" + re.escape(text) + "$"


def check(case: Case, outcome: Outcome) -> None:
    """Everything a row asserts of its run (see the module docstring)."""
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
    "hosts/nodes-from-a-nodes-file-and-a-kubeconfig": Case(
        ["nodes", "--nodes-file", "list", "--kubeconfig", "kubeconfig"],
        2,
        line(
            "simpletfjob: error: --kubeconfig reads nodes from a cluster; it cannot go with --nodes-file"
        ),
        files={"list": "a\n"},
    ),
    "hosts/nodes-gpus-of-a-host-list": Case(
        ["nodes", "--nodes-file", "list", "--gpus", "1"],
        2,
        r"--gpus needs node objects, but nodes file 'list' gives only host names",
        files={"list": "a\n"},
    ),
    "hosts/bad-host-name": Case(
        ["mnist.yaml", "--nodes-file", "hosts", "-o", "-"],
        1,
        line(
            "simpletfjob: error: hosts:2: 'H11' is not a valid Kubernetes node name (RFC 1123: lowercase letters, digits, '-' and '.', at most 253 characters)"
        ),
        files={"hosts": "h10\nH11\n"},
    ),
    "hosts/every-host-excluded": Case(
        ["mnist.yaml", "--nodes-file", "hosts", "-E", "exc", "-o", "-"],
        1,
        line("simpletfjob: error: no host is eligible (2 nodes: 0 eligible, 2 excluded)"),
        files={"hosts": "h1\nh2\n", "exc": "h1\nh2\n"},
    ),
    "hosts/too-many-hosts": Case(
        ["mnist.yaml", "--nodes-file", "hosts", "-N", "5", "-o", "-"],
        1,
        line(
            "simpletfjob: error: -N 5 asks for more hosts than are eligible (4 nodes: 4 eligible); "
            "4 eligible hosts fit 4 tasks at 1 per host; for 5 tasks, give -N 1 --tasks-per-host 5"
        ),
        files={"hosts": "h10\nh100\nh14\nh23\n"},
    ),
    "hosts/a-line-of-100000-characters-shown-cut": Case(
        ["mnist.yaml", "--nodes-file", "hosts", "-o", "-"],
        1,
        line(
            f"simpletfjob: error: hosts:1: {'x' * 60!r}... is not a valid Kubernetes node name (RFC 1123: lowercase letters, digits, '-' and '.', at most 253 characters)"
        ),
        files={"hosts": "x" * 100_000 + "\n"},
    ),
    "hosts/uppercase-after-a-good-one": Case(
        ["mnist.yaml", "--nodes-file", "hosts"],
        1,
        r"hosts:2: 'H11' is not a valid Kubernetes node name",
        files={"hosts": "h10\nH11\n"},
    ),
    "hosts/listed-twice-in-a-host-file": Case(
        ["mnist.yaml", "--nodes-file", "hosts"],
        1,
        r"hosts:3: host 'h10' is listed twice \(first at hosts:1\)",
        files={"hosts": "h10\nh11\nh10\n"},
    ),
    "hosts/underscore-in-a-name": Case(
        ["mnist.yaml", "--nodes-file", "hosts"],
        1,
        r"'node_1' is not a valid Kubernetes node name",
        files={"hosts": "node_1\n"},
    ),
    "hosts/a-host-file-of-comments": Case(
        ["mnist.yaml", "--nodes-file", "hosts"],
        1,
        r"lists no hosts",
        files={"hosts": "# nothing\n\n"},
    ),
    "hosts/listed-twice-in-nodes": Case(
        ["mnist.yaml", "--nodes", "a,b,a"], 1, r"host 'a' is listed twice"
    ),
    # -- commands ------------------------------------------------------------------------------
    "commands/a-file-named-like-a-command": Case(
        ["templates", "--nodes", "a,b", "-o", "-"],
        2,
        line(
            "simpletfjob: error: No such option '--nodes'. (see simpletfjob templates --help; to render the file 'templates', write ./templates)"
        ),
        files={
            "templates": 'apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: mnist-<<type>>-<<index>>\nspec:\n  template:\n    spec:\n      nodeName: <<host>>\n      hostNetwork: true\n      containers:\n        - name: tensorflow\n          image: tensorflow/tensorflow:1.13.1-py3\n          command: ["python", "mnist_cnn.py", "--strategy=ps", "--steps=5000"]\n          workingDir: /root/share/tensorflow/mnist\n          env:\n            - name: TF_CONFIG\n              value: >\n<<TF_CONFIG>>\n          ports:\n            - containerPort: 2222\n              hostPort: 2222\n              name: tfjob-port\n          volumeMounts:\n            - mountPath: /root/share\n              name: mynfs\n      restartPolicy: OnFailure\n      volumes:\n        - name: mynfs\n          persistentVolumeClaim:\n            claimName: nfs-pvc\n  backoffLimit: 4\n'
        },
    ),
    "commands/apply-dry-run-all": Case(
        ["apply", "mnist.yaml", "--nodes", "a,b", "--dry-run=all"],
        2,
        line("simpletfjob: error: --dry-run must be none, server or client, not 'all'"),
    ),
    "commands/apply-timeout-without-a-unit": Case(
        ["apply", "mnist.yaml", "--nodes", "a,b", "--timeout", "5"],
        2,
        line(
            "simpletfjob: error: Invalid value for '--timeout': '5' is not a duration; write a number and a unit, such as 30s, 5m or 1h (see simpletfjob apply --help)"
        ),
    ),
    "commands/apply-without-a-cluster": Case(
        ["apply", "mnist.yaml", "--nodes", "a,b", "-n", "ml"],
        1,
        line(
            "simpletfjob: error: no cluster to apply the run to: there is no --kubeconfig, $KUBECONFIG or ~/.kube/config, and this is not a pod; point at a cluster with --kubeconfig FILE (or $KUBECONFIG)"
        ),
    ),
    "commands/apply-without-labels": Case(
        ["apply", "mnist.yaml", "--nodes", "a,b", "--no-labels"],
        2,
        line(
            "simpletfjob: error: --no-labels cannot go with apply: the labels are what make the Jobs one run; render with --no-labels and apply with kubectl instead"
        ),
    ),
    "commands/run-restart-exit-codes-zero": Case(
        ["run", "mnist.yaml", "--nodes", "a,b", "--restart-exit-codes", "0,3"],
        2,
        line(
            "simpletfjob: error: Invalid value for '--restart-exit-codes': must be exit codes from 1 to 255, as 3,42 or 3-5, not '0,3' (see simpletfjob run --help)"
        ),
    ),
    "commands/run-restart-exit-codes-backwards": Case(
        ["run", "mnist.yaml", "--nodes", "a,b", "--restart-exit-codes", "5-3"],
        2,
        line(
            "simpletfjob: error: Invalid value for '--restart-exit-codes': must be exit codes from 1 to 255, as 3,42 or 3-5 (a range from low to high), not '5-3' (see simpletfjob run --help)"
        ),
    ),
    "commands/run-restart-exit-codes-words": Case(
        ["run", "mnist.yaml", "--nodes", "a,b", "--restart-exit-codes", "three"],
        2,
        line(
            "simpletfjob: error: Invalid value for '--restart-exit-codes': must be exit codes from 1 to 255, as 3,42 or 3-5, not 'three' (see simpletfjob run --help)"
        ),
    ),
    "commands/run-restart-on-other": Case(
        ["run", "mnist.yaml", "--nodes", "a,b", "--restart-on", "always"],
        2,
        line("simpletfjob: error: --restart-on must be failure or disruption, not 'always'"),
    ),
    "templates/restart-exit-codes-in-a-header": Case(
        ["run", "job.yaml", "--nodes", "a,b"],
        1,
        line(
            "simpletfjob: error: job.yaml:4: option 'restart-exit-codes' in the template header: must be exit codes from 1 to 255, as 3,42 or 3-5, not '300'"
        ),
        files={
            "job.yaml": "# A job.\n# simpletfjob:\n#   options:\n#     restart-exit-codes: '300'\nkind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\n"
        },
    ),
    "templates/restart-on-in-a-header": Case(
        ["run", "job.yaml", "--nodes", "a,b"],
        1,
        line(
            "simpletfjob: error: job.yaml:4: option 'restart-on' in the template header must be failure or disruption, not 'always'"
        ),
        files={
            "job.yaml": "# A job.\n# simpletfjob:\n#   options:\n#     restart-on: always\nkind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\n"
        },
    ),
    "commands/run-progress-pattern-not-a-regex": Case(
        ["run", "mnist.yaml", "--nodes", "a,b", "--progress-pattern", "(?P<step>"],
        2,
        line(
            "simpletfjob: error: --progress-pattern must be a regular expression, not '(?P<step>': missing ), unterminated subpattern at position 0"
        ),
    ),
    "commands/apply-progress-pattern-without-step": Case(
        ["apply", "mnist.yaml", "--nodes", "a,b", "--progress-pattern", "it (?P<n>\\d+)"],
        2,
        line(
            "simpletfjob: error: --progress-pattern must have a named group 'step', as in (?P<step>\\d+), not 'it (?P<n>\\\\d+)'"
        ),
    ),
    "commands/run-stall-timeout-zero": Case(
        ["run", "mnist.yaml", "--nodes", "a,b", "--stall-timeout", "0"],
        2,
        line("simpletfjob: error: --stall-timeout must be more than 0, not 0s"),
    ),
    "templates/progress-pattern-in-a-header": Case(
        ["apply", "job.yaml", "--nodes", "a,b"],
        1,
        line(
            "simpletfjob: error: job.yaml:4: option 'progress-pattern' in the template header must have a named group 'step', as in (?P<step>\\d+), not 'x'"
        ),
        files={
            "job.yaml": "# A job.\n# simpletfjob:\n#   options:\n#     progress-pattern: x\nkind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\n"
        },
    ),
    "commands/apply-queue-not-a-label": Case(
        ["apply", "mnist.yaml", "--nodes", "a,b", "--queue", "Team_A"],
        2,
        line(
            "simpletfjob: error: --queue must be a DNS label such as team-a (lower-case letters, digits and '-', at most 63), not 'Team_A'"
        ),
    ),
    "commands/run-queue-lease-too-short": Case(
        ["run", "mnist.yaml", "--nodes", "a,b", "--queue", "team", "--queue-lease", "1s"],
        2,
        line("simpletfjob: error: --queue-lease must be at least 2s, not 1s"),
    ),
    "commands/run-queue-lease-without-a-queue": Case(
        ["run", "mnist.yaml", "--nodes", "a,b", "--queue-lease", "40s"],
        2,
        line("simpletfjob: error: --queue-lease is for a run in a queue: give --queue NAME too"),
    ),
    "commands/apply-queue-namespace-without-a-queue": Case(
        ["apply", "mnist.yaml", "--nodes", "a,b", "--queue-namespace", "ml"],
        2,
        line(
            "simpletfjob: error: --queue-namespace is for a run in a queue: give --queue NAME too"
        ),
    ),
    "templates/queue-in-a-header": Case(
        ["apply", "job.yaml", "--nodes", "a,b"],
        1,
        line(
            "simpletfjob: error: job.yaml:4: option 'queue' in the template header must be a DNS label such as team-a (lower-case letters, digits and '-', at most 63), not 'Team A'"
        ),
        files={
            "job.yaml": "# A job.\n# simpletfjob:\n#   options:\n#     queue: Team A\nkind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\n"
        },
    ),
    "commands/queue-name-not-a-label": Case(
        ["queue", "Team_A"],
        2,
        line(
            "simpletfjob: error: the queue's name must be a DNS label such as team-a (lower-case letters, digits and '-', at most 63), not 'Team_A'"
        ),
    ),
    "commands/delete-without-a-cluster": Case(
        ["delete", "mnist", "-n", "ml"],
        1,
        line(
            "simpletfjob: error: no cluster to delete a run from: there is no --kubeconfig, $KUBECONFIG or ~/.kube/config, and this is not a pod; point at a cluster with --kubeconfig FILE (or $KUBECONFIG)"
        ),
    ),
    "commands/delete-without-a-run": Case(
        ["delete"],
        2,
        line("simpletfjob: error: Missing argument 'RUN'. (see simpletfjob delete --help)"),
    ),
    "commands/diagnose-into-a-missing-directory": Case(
        ["diagnose", "mnist", "-o", "no/such/mnist.tgz"],
        1,
        line(
            "simpletfjob: error: cannot write 'no/such/mnist.tgz': directory 'no/such' does not exist"
        ),
    ),
    "commands/diagnose-to-stdout": Case(
        ["diagnose", "mnist", "-o", "-"],
        2,
        line("simpletfjob: error: -o -: the bundle is a .tar.gz archive; give a file name"),
    ),
    "commands/mistyped-command": Case(
        ["statsu", "mnist", "-n", "ml"],
        2,
        line("simpletfjob: error: no such command or template 'statsu'; did you mean 'status'?"),
    ),
    "commands/wait-timeout-too-long": Case(
        ["wait", "mnist", "--timeout", "3000000h"],
        2,
        line(
            "simpletfjob: error: Invalid value for '--timeout': '3000000h' is longer than the longest duration, 2562047h (as in kubectl) (see simpletfjob wait --help)"
        ),
    ),
    "commands/run-diagnose-on-failure-missing-directory": Case(
        ["run", "mnist.yaml", "--nodes", "a,b", "--diagnose-on-failure", "bundles"],
        2,
        line(
            "simpletfjob: error: --diagnose-on-failure must be an existing directory, not 'bundles'"
        ),
    ),
    "commands/wait-diagnose-on-failure-a-file": Case(
        ["wait", "mnist", "--diagnose-on-failure", "mnist.yaml"],
        2,
        line(
            "simpletfjob: error: --diagnose-on-failure must be an existing directory, not 'mnist.yaml'"
        ),
    ),
    "commands/render-without-a-template": Case(
        ["--nodes", "a,b"], 2, r"missing the TEMPLATE argument"
    ),
    # -- files --------------------------------------------------------------------------------
    "files/missing-template": Case(
        ["nope.yaml", "--nodes", "a,b", "-o", "-"],
        1,
        line("simpletfjob: error: template 'nope.yaml' does not exist"),
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
    "files/binary-template-after-a-line-of-text": Case(
        ["bin.yaml", "--nodes", "a,b"],
        1,
        r"template 'bin.yaml' is not UTF-8 text",
        files={"bin.yaml": b"kind: Job\n\xff\xfe\x00"},
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
        r"taken by 0 ps \+ 1 chief; use more hosts, more tasks per host \(--tasks-per-host 2\) "
        r"or no chief \(--no-chief\) \(1 node: ",
    ),
    "options/selector-with-a-plain-host-list": Case(
        [*AB, "-l", "pool=gpu"], 2, r"--selector needs node objects"
    ),
    "options/bad-name": Case(
        ["mnist.yaml", "--nodes", "a,b", "--name", "Not_A_Label!", "-o", "-"],
        2,
        line(
            "simpletfjob: error: --name 'Not_A_Label!' is not a valid label value (at most 63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit)"
        ),
    ),
    "options/negative-psn": Case(
        ["mnist.yaml", "--nodes", "a,b", "--psn", "-1", "-o", "-"],
        2,
        line("simpletfjob: error: --psn must be 0 or more, not -1"),
    ),
    "options/no-worker-left": Case(
        ["mnist.yaml", "--nodes", "a", "-o", "-"],
        1,
        line(
            "simpletfjob: error: no task is left for a worker: 1 task in all, taken by 1 ps; use more hosts, more tasks per host (--tasks-per-host 2) or fewer parameter servers (--psn) (1 node: 1 eligible)"
        ),
    ),
    "options/unknown-option": Case(
        ["mnist.yaml", "--nodes", "a,b", "--psm", "2", "-o", "-"],
        2,
        line(
            "simpletfjob: error: No such option '--psm'. (Did you mean one of: '--gpus', '--psf', '--psn'?) (see simpletfjob --help)"
        ),
    ),
    "options/N-more-than-eligible": Case(
        ["mnist.yaml", "--nodes-file", "hosts", "-N", "5"],
        1,
        r"-N 5 asks for more hosts than are eligible \(4 nodes: 4 eligible\)",
        files={"hosts": FOUR_HOSTS},
    ),
    "options/N-negative": Case(
        ["mnist.yaml", "--nodes-file", "hosts", "-N", "-2"],
        2,
        r"-N must be a positive number",
        files={"hosts": FOUR_HOSTS},
    ),
    "options/N-not-a-number": Case(
        ["mnist.yaml", "--nodes-file", "hosts", "-N", "x"],
        2,
        r"'x' is not a valid integer",
        files={"hosts": FOUR_HOSTS},
    ),
    # int() reads any Unicode digit: a fullwidth 2 was taken as 2.
    "options/min-workers-fullwidth-digit": Case(
        ["pytorch-ddp", "--nodes", "a,b", "--min-workers", "\uff12", "-o", "-"],
        2,
        line(
            "simpletfjob: error: Invalid value for '--min-workers': '\uff12' is not a valid integer. (see simpletfjob --help)"
        ),
    ),
    "options/psn-takes-every-host": Case(
        ["mnist.yaml", "--nodes-file", "hosts", "--psn", "4"],
        1,
        r"no task is left for a worker",
        files={"hosts": FOUR_HOSTS},
    ),
    "options/port-past-65535": Case(
        ["mnist.yaml", "--nodes-file", "hosts", "--port", "70000"],
        2,
        r"--port must be between 1 and 65535",
        files={"hosts": FOUR_HOSTS},
    ),
    "options/E-file-missing": Case(
        ["mnist.yaml", "--nodes-file", "hosts", "-E", "missing-exc"],
        1,
        r"exclusion file 'missing-exc' does not exist",
        files={"hosts": FOUR_HOSTS},
    ),
    "options/psf-file-missing": Case(
        ["mnist.yaml", "--nodes-file", "hosts", "--psf", "nope"],
        1,
        r"--psf file 'nope' does not exist",
        files={"hosts": FOUR_HOSTS},
    ),
    "options/no-such-option": Case(
        ["mnist.yaml", "--nodes-file", "hosts", "--bogus"],
        2,
        r"No such option.*--bogus",
        files={"hosts": FOUR_HOSTS},
    ),
    "options/nodes-and-nodes-file": Case(
        ["mnist.yaml", "--nodes", "a", "--nodes-file", "hosts"],
        2,
        r"--nodes or --nodes-file, not both",
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
        process=True,
    ),
    "templates/private-use-marker-character": Case(
        ["t.yaml", *AB[1:]],
        1,
        r"t.yaml: contains U\+E000, which simpletfjob reserves",
        files={"t.yaml": job("v: \ue000\n")},
    ),
    "templates/duplicate-name-key": Case(
        ["job.yaml", "--nodes", "a,b", "-o", "-"],
        1,
        line(
            "simpletfjob: error: document 1 (ps 0 on a): mapping key 'name' is defined twice, at lines 3 and 4; kubectl refuses a duplicate key (job.yaml:4)"
        ),
        files={"job.yaml": "kind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\n  name: again\n"},
    ),
    "templates/not-yaml": Case(
        ["job.yaml", "--nodes", "a,b", "-o", "-"],
        1,
        line(
            "simpletfjob: error: document 1 (ps 0 on a) is not valid YAML at line 5, column 7: mapping values are not allowed in this context: 'x: y: z' (job.yaml:5)"
        ),
        files={
            "job.yaml": "kind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\nspec:\n  x: y: z\n"
        },
    ),
    "templates/jinja-syntax-error": Case(
        ["job.yaml", "--nodes", "a,b", "-o", "-"],
        1,
        line(
            "simpletfjob: error: job.yaml:5: template syntax error: Unexpected end of template. Jinja was looking for the following tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be closed is 'if'."
        ),
        files={
            "job.yaml": "kind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\n{% if type == 'ps' %}\nspec: {}\n"
        },
    ),
    "templates/tf-config-as-a-key-under-spec": Case(
        ["job.yaml", "--nodes", "a,b", "-o", "-"],
        1,
        line(
            "simpletfjob: error: job.yaml:5: <<TF_CONFIG>> stands in a mapping key; it can only be (part of) a value"
        ),
        files={
            "job.yaml": "kind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\nspec:\n  <<TF_CONFIG>>: x\n"
        },
    ),
    "templates/undefined-variable": Case(
        ["job.yaml", "--nodes", "a,b", "-o", "-"],
        1,
        line(
            "simpletfjob: error: job.yaml:5: 'imge' is undefined; give it with --set imge=VALUE or -f values.yaml, or use one of: chief_hosts, host, index, name, node, num_tasks, port, ps_hosts, restart, TF_CONFIG, type, worker_hosts"
        ),
        files={
            "job.yaml": "kind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\nspec:\n  image: <<imge>>\n"
        },
    ),
    "templates/unknown-header-option": Case(
        ["job.yaml", "--nodes", "a,b", "-o", "-"],
        1,
        line(
            "simpletfjob: error: job.yaml:4: unknown option 'psm' in the template header; a header can set: chief, cleanup-after, deadline, evaluator, evaluator-in-cluster, framework, min-workers, network, nproc-per-node, num, port, progress-pattern, progress-task, psn, queue, restart-exit-codes, restart-on, stall-timeout, tasks-per-host"
        ),
        files={
            "job.yaml": "# A job.\n# simpletfjob:\n#   options:\n#     psm: 2\nkind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\n"
        },
    ),
    "templates/documents-with-one-name": Case(
        ["t.yaml", "--nodes", "a,b", "-o", "out.yaml"],
        1,
        r"documents 1 and 2 are both Job 'j'",
        files={"t.yaml": "kind: Job\nmetadata:\n  name: j\n", "out.yaml": "old: content\n"},
    ),
    "templates/documents-with-one-name-by-index": Case(
        ["t.yaml", "--nodes", "a,b", "-o", "out.yaml"],
        1,
        r"documents 1 and 2 are both Job 'j-0'",
        files={
            "t.yaml": "kind: Job\nmetadata:\n  name: j-<<index>>\n",
            "out.yaml": "old: content\n",
        },
    ),
    "templates/unclosed-flow-list": Case(
        ["t.yaml", "--nodes", "a,b", "-o", "out.yaml"],
        1,
        r"document 1 \(ps 0 on a\) is not valid YAML at line 5",
        files={
            "t.yaml": "kind: Job\nmetadata:\n  name: j-<<type>>-<<index>>\nbad: [\n",
            "out.yaml": "old: content\n",
        },
    ),
    "templates/mapping-in-a-plain-value": Case(
        ["t.yaml", "--nodes", "a,b", "-o", "out.yaml"],
        1,
        r"document 1 \(ps 0 on a\) is not valid YAML at line 4, column 7: .*'x: y: z'",
        files={
            "t.yaml": "kind: Job\nmetadata:\n  name: j-<<type>>-<<index>>\n  x: y: z\n",
            "out.yaml": "old: content\n",
        },
    ),
    "templates/a-list-document": Case(
        ["t.yaml", "--nodes", "a,b", "-o", "out.yaml"],
        1,
        r"document 1 \(ps 0 on a\) is a YAML list, not a mapping",
        files={"t.yaml": "- just\n- a list\n", "out.yaml": "old: content\n"},
    ),
    "templates/no-kind": Case(
        ["t.yaml", "--nodes", "a,b", "-o", "out.yaml"],
        1,
        r"document 1 \(ps 0 on a\) has no 'kind'",
        files={"t.yaml": "metadata:\n  name: x\n", "out.yaml": "old: content\n"},
    ),
    "templates/nothing-at-all": Case(
        ["t.yaml", "--nodes", "a,b", "-o", "out.yaml"],
        1,
        r"document 1 \(ps 0 on a\) is empty: the template renders no YAML document",
        files={"t.yaml": "", "out.yaml": "old: content\n"},
    ),
    "templates/just-a-comment": Case(
        ["t.yaml", "--nodes", "a,b", "-o", "out.yaml"],
        1,
        r"document 1 \(ps 0 on a\) is empty",
        files={"t.yaml": "# just a comment\n", "out.yaml": "old: content\n"},
    ),
    "templates/empty-for-one-role": Case(
        ["t.yaml", "--nodes", "a,b", "-o", "out.yaml"],
        1,
        r"document 1 \(ps 0 on a\) is empty",
        files={
            "t.yaml": "{% if type == 'worker' %}kind: Job\n{% endif %}",
            "out.yaml": "old: content\n",
        },
    ),
    "templates/no-metadata-name": Case(
        ["t.yaml", "--nodes", "a,b", "-o", "out.yaml"],
        1,
        r"has no metadata.name",
        files={"t.yaml": "kind: Job\nmetadata: {}\n", "out.yaml": "old: content\n"},
    ),
    "templates/name-not-a-dns-label": Case(
        ["t.yaml", "--nodes", "a,b", "-o", "out.yaml"],
        1,
        r"Job name 'J-ps-0' is not a valid DNS label",
        files={
            "t.yaml": "kind: Job\nmetadata:\n  name: J-<<type>>-<<index>>\n",
            "out.yaml": "old: content\n",
        },
    ),
    "templates/name-too-long": Case(
        ["t.yaml", "--nodes", "a,b", "-o", "out.yaml"],
        1,
        r"is 72 characters; the limit is 63",
        files={
            "t.yaml": "kind: Job\nmetadata:\n  name: <<type>>xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n",
            "out.yaml": "old: content\n",
        },
    ),
    "templates/tf-config-as-a-nested-key": Case(
        ["t.yaml", "--nodes", "a,b", "-o", "out.yaml"],
        1,
        r"t\.yaml:6: <<TF_CONFIG>> stands in a mapping key",
        files={
            "t.yaml": "kind: Job\nmetadata:\n  name: j-<<type>>-<<index>>\nvalue:\n  a: 1\n  <<TF_CONFIG>>: 2\n",
            "out.yaml": "old: content\n",
        },
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
        process=True,
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
    "values/alias-bomb-in-values": Case(
        ["mnist.yaml", "--nodes", "a,b", "-f", "values.yaml", "-o", "-"],
        1,
        line(
            "simpletfjob: error: values.yaml:8: excessive aliasing: aliases expand the document from 29 nodes to 1,234,567,909 (the largest anchor they repeat starts on this line), past the limit Kubernetes also applies; see Limits in the README"
        ),
        files={
            "values.yaml": "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h,*h]\n"
        },
    ),
    "values/values-not-a-mapping": Case(
        ["mnist.yaml", "--nodes", "a,b", "-f", "values.yaml", "-o", "-"],
        1,
        line("simpletfjob: error: values file 'values.yaml' must be a YAML mapping, not a list"),
        files={"values.yaml": "- a\n- b\n"},
    ),
    "values/set-without-a-value": Case(
        ["mnist.yaml", "--nodes-file", "hosts", "--set", "novalue"],
        2,
        r"expected KEY=VALUE",
        files={"hosts": FOUR_HOSTS},
    ),
    "values/set-type": Case(
        ["mnist.yaml", "--nodes-file", "hosts", "--set", "type=x"],
        2,
        r"'type' is set by simpletfjob",
        files={"hosts": FOUR_HOSTS},
    ),
    # -- output paths -------------------------------------------------------------------------
    "output/the-template": Case(
        ["mnist.yaml", "--nodes", "a,b", "-o", "mnist.yaml"],
        1,
        line("simpletfjob: error: output 'mnist.yaml' is the template; choose another -o"),
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
    "output/the-nodes-file": Case(
        ["mnist.yaml", "--nodes-file", "hosts", "-o", "hosts"],
        1,
        r"output 'hosts' is the nodes file",
        files={"hosts": FOUR_HOSTS},
    ),
    "output/directory-missing-several-levels": Case(
        ["mnist.yaml", "--nodes-file", "hosts", "-o", "no/such/dir/out.yaml"],
        1,
        r"directory 'no/such/dir' does not exist",
        files={"hosts": FOUR_HOSTS},
    ),
    "output/the-current-directory": Case(
        ["mnist.yaml", "--nodes-file", "hosts", "-o", "."],
        1,
        r"is a directory",
        files={"hosts": FOUR_HOSTS},
    ),
    "output/the-values-file": Case(
        ["mnist.yaml", "--nodes-file", "hosts", "-f", "v.yaml", "-o", "v.yaml"],
        1,
        r"output 'v.yaml' is the values file",
        files={"v.yaml": "a: 1\n"},
    ),
    "output/the-kubeconfig": Case(
        ["mnist.yaml", "--kubeconfig", "kc", "-o", "kc"],
        1,
        r"output 'kc' is the kubeconfig",
        files={"kc": "apiVersion: v1\nkind: Config\n"},
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
    "kubeconfig/kubeconfig-is-a-directory": Case(
        ["mnist.yaml", "--kubeconfig", "kube", "-o", "-"],
        1,
        line("simpletfjob: error: kubeconfig 'kube' is a directory, not a file"),
        files={"kube/.keep": ""},
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
        process=True,
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
    "nodelist/malformed-node-list": Case(
        ["mnist.yaml", "--nodes-file", "nodes.json", "-o", "-"],
        1,
        line(
            "simpletfjob: error: nodes.json: items[0], node 'a': metadata.labels must be a mapping, not a list"
        ),
        files={
            "nodes.json": '{"kind": "NodeList", "apiVersion": "v1", "items": [{"metadata": {"name": "a", "labels": ["x"]}}]}'
        },
    ),
    "nodelist/shared-address": Case(
        ["mnist.yaml", "--nodes-file", "nodes.json", "--address", "internal-ip", "-o", "-"],
        1,
        line(
            "simpletfjob: error: nodes 'a' and 'b' have the same InternalIP 10.0.0.1, so ps 0 and worker 0 would both listen at 10.0.0.1:2222; exclude one of them (-E) or choose another --address"
        ),
        files={
            "nodes.json": '{\n  "kind": "NodeList",\n  "apiVersion": "v1",\n  "items": [\n    {\n      "metadata": {\n        "name": "a"\n      },\n      "status": {\n        "conditions": [\n          {\n            "type": "Ready",\n            "status": "True"\n          }\n        ],\n        "addresses": [\n          {\n            "type": "InternalIP",\n            "address": "10.0.0.1"\n          }\n        ]\n      }\n    },\n    {\n      "metadata": {\n        "name": "b"\n      },\n      "status": {\n        "conditions": [\n          {\n            "type": "Ready",\n            "status": "True"\n          }\n        ],\n        "addresses": [\n          {\n            "type": "InternalIP",\n            "address": "10.0.0.1"\n          }\n        ]\n      }\n    }\n  ]\n}'
        },
    ),
    # -- streams ------------------------------------------------------------------------------
    "streams/stdout-closed": Case(
        AB, 1, r"^simpletfjob: error: cannot write to stdout: Bad file descriptor$", shell=">&-"
    ),
    "streams/stdout-full": Case(
        AB, 1, r"cannot write to stdout: No space left on device", shell=">/dev/full"
    ),
    # A reader that went away: no line, and the status of a process that SIGPIPE ended.
    "streams/stdout-broken-pipe": Case(AB, 141, None, broken_stdout=True, check=no_stderr),
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


# -- rows made by rule: the same refusal for each field, each form, each reserved name ------------


def holding(*fragments: str) -> str:
    """The pattern of a line that holds each fragment, in any order."""
    return "^" + "".join(f"(?=.*{re.escape(f)})" for f in fragments)


TEMPLATE = job_template("              value: '<<TF_CONFIG>>'")
IMAGE_TEMPLATE = TEMPLATE.replace("tensorflow/tensorflow", "<<image>>")


def saved_list(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    items = [{"apiVersion": "v1", "kind": "Node", **n} for n in nodes]
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {}}


def two_nodes() -> list[dict[str, Any]]:
    return [make_node("a", images=2), make_node("b", images=2, gpu_taint=True)]


def changed(path: str, value: Any) -> Callable[[list[dict[str, Any]]], None]:
    """Set one field of node b ('.'-separated, list indexes as numbers); None deletes it."""

    def change(nodes: list[dict[str, Any]]) -> None:
        *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        target: Any = nodes[1]
        for part in parents:
            target = target[part]
        if value is None:
            del target[last]
        else:
            target[last] = value

    return change


MALFORMED_NODES = [
    ("metadata.labels", ["pool=a"], "metadata.labels must be a mapping, not a list"),
    ("metadata.labels", "pool=a", "metadata.labels must be a mapping, not the string 'pool=a'"),
    ("metadata.labels.pool", 4, "metadata.labels['pool'] must be a string, not the integer 4"),
    ("metadata", "b", "items[1]: metadata must be a mapping, not the string 'b'"),
    ("metadata", None, "items[1]: metadata is missing"),
    ("metadata.name", 5, "items[1]: metadata.name must be a non-empty string, not the integer 5"),
    ("metadata.name", None, "items[1]: metadata.name is missing"),
    ("spec", ["x"], "node 'b': spec must be a mapping, not a list"),
    ("spec.taints", {"key": "a"}, "spec.taints must be a list, not a mapping"),
    ("spec.taints.0", "gpu:NoSchedule", "spec.taints[0] must be a mapping, not the string"),
    ("spec.taints.0.key", None, "spec.taints[0].key is missing"),
    ("spec.taints.0.effect", 1, "spec.taints[0].effect must be a string, not the integer 1"),
    ("spec.unschedulable", "true", "spec.unschedulable must be true or false, not the string"),
    ("status", "Ready", "node 'b': status must be a mapping, not the string 'Ready'"),
    ("status.conditions", ["Ready"], "status.conditions[0] must be a mapping, not the string"),
    ("status.conditions", {"Ready": "True"}, "status.conditions must be a list, not a mapping"),
    ("status.conditions.3.status", True, "status.conditions[3].status must be a string, not the boolean true"),
    ("status.conditions.3.type", None, "status.conditions[3].type is missing"),
    ("status.addresses", "10.0.0.1", "status.addresses must be a list, not the string"),
    ("status.addresses.0.address", 10, "status.addresses[0].address must be a string, not the integer 10"),
    ("status.allocatable", "8", "status.allocatable must be a mapping, not the string '8'"),
    ("status.allocatable.nvidia.com/gpu", [8], "['nvidia.com/gpu'] must be a quantity"),
]  # fmt: skip


def _set_gpu(value: Any) -> Callable[[list[dict[str, Any]]], None]:
    def change(nodes: list[dict[str, Any]]) -> None:
        nodes[1]["status"]["allocatable"]["nvidia.com/gpu"] = value

    return change


def mutation(path: str, value: Any) -> Callable[[list[dict[str, Any]]], None]:
    return _set_gpu(value) if path.endswith("nvidia.com/gpu") else changed(path, value)


def _node_list_rows() -> dict[str, Case]:
    """A saved NodeList with one field of node b malformed, in JSON and in YAML; documents
    that are no NodeList; and files that start with a brace, read as JSON."""
    rows: dict[str, Case] = {}
    for i, (path, value, message) in enumerate(MALFORMED_NODES):
        for form in ("json", "yaml"):
            nodes = two_nodes()
            mutation(path, value)(nodes)
            document = saved_list(nodes)
            text = json.dumps(document, indent=4) if form == "json" else yaml.safe_dump(document)
            rows[f"nodelist/node-b-{path}-{i}-in-{form}"] = Case(
                ["t.yaml", "--nodes-file", f"nodes.{form}", "-o", "-"],
                1,
                holding(f"nodes.{form}: items[1]", message),
                files={f"nodes.{form}": text, "t.yaml": TEMPLATE},
            )
    documents = {
        "items-a-mapping": ({"kind": "List", "items": {"a": 1}}, "nodes.json: items must be a list of nodes, not a mapping"),
        "an-item-a-string": ({"kind": "List", "items": ["a"]}, "nodes.json: items[0]: a node must be a mapping, not the string 'a'"),
        "a-node-twice": ({"kind": "List", "items": [make_node("a"), make_node("a")]}, "nodes.json: items[1]: host 'a' is listed twice (first at nodes.json: items[0])"),
        "an-uppercase-name": ({"kind": "List", "items": [make_node("A")]}, "nodes.json: items[0]: 'A' is not a valid Kubernetes node name"),
        "one-node-with-labels-a-list": ({"kind": "Node", "metadata": {"name": "a", "labels": []}}, "nodes.json, node 'a': metadata.labels must be a mapping"),
        "a-secret": ({"kind": "Secret"}, "nodes.json: expected a NodeList"),
        "a-pod-list": ({"kind": "List", "items": [{"kind": "Pod", "metadata": {"name": "p"}}]}, "nodes.json: items[0]: kind must be Node, not the string 'Pod'"),
        "the-items-alone": ([make_node("a")] * 20_000, "nodes.json: expected a NodeList"),
    }  # fmt: skip
    brace = {
        "json-cut-short": ('{"kind": "List", "items": [\n  {"metadata": {"name": "a"}},\n', "nodes.json:3: not valid JSON"),
        "json-with-a-trailing-comma": ('{"kind": "List",\n "items": [], }\n', "nodes.json:2: not valid JSON"),
        "yaml-flow-mapping-read-as-json": ("{kind: List, items: []}\n", "nodes.json:1: not valid JSON"),
        "json-nested-too-deeply": ('{"items": ' + "[" * 100_000 + "]" * 100_000 + "}", "nodes.json: not a NodeList: nested too deeply"),
        "a-bracket-alone": ("[\n", "nodes.json:2: not valid JSON: Expecting value (column 1); a nodes file that starts with '{' or '[' is read as JSON"),
    }  # fmt: skip
    texts = {n: (json.dumps(d), m) for n, (d, m) in documents.items()} | brace
    for name, (text, message) in texts.items():
        rows[f"nodelist/{name}"] = Case(
            ["t.yaml", "--nodes-file", "nodes.json", "-o", "-"],
            1,
            holding(message),
            files={"nodes.json": text, "t.yaml": TEMPLATE},
        )
    return rows


def _value_rows() -> dict[str, Case]:
    """Values that take a name simpletfjob sets, or a character it reserves."""
    rows: dict[str, Case] = {}
    for name in ("type", "index", "host", "port", "TF_CONFIG", "num_tasks"):
        rows[f"values/file-sets-{name}"] = Case(
            ["t.yaml", "--nodes", "a,b", "-f", "v.yaml", "-o", "-"],
            2,
            holding(f"v.yaml:2: {name!r} is set by simpletfjob for each task"),
            files={"t.yaml": TEMPLATE, "v.yaml": f"image: x\n{name}: 1\n"},
        )
        rows[f"values/set-{name}-to-1"] = Case(
            ["t.yaml", "--nodes", "a,b", "--set", f"{name}=1", "-o", "-"],
            2,
            holding(f"--set '{name}=1': {name!r} is set by simpletfjob"),
            files={"t.yaml": TEMPLATE},
        )
    reserved = {
        "escaped-u-e000": ('image: "tf\\ue000"\n', "v.yaml:1: image: contains U+E000"),
        "u-e001": ("image: tf\ue001\n", "v.yaml:1: image: contains U+E001"),
        "u-e000-in-a-list": ("res:\n  args: [a, 'b\ue0000\ue001']\n", "v.yaml:2: res.args[1]: contains U+E000"),
        "u-e001-in-a-key": ('res:\n  "k\\U0000e001": 1\n', "v.yaml:2: res.k\ue001 (its key): contains U+E001"),
    }  # fmt: skip
    for name, (values, message) in reserved.items():
        rows[f"values/file-reserved-{name}"] = Case(
            ["t.yaml", "--nodes", "a,b", "-f", "v.yaml", "-o", "-"],
            1,
            holding(message, "a character simpletfjob reserves"),
            files={"t.yaml": IMAGE_TEMPLATE, "v.yaml": values},
        )
    for char in ("\ue000", "\ue001"):
        code = f"U+{ord(char):04X}"
        rows[f"values/set-reserved-{code}"] = Case(
            ["t.yaml", "--nodes", "a,b", "--set", f"image=x{char}0", "-o", "-"],
            2,
            holding(f"--set 'image=x\\u{ord(char):04x}0': the value contains {code}"),
            files={"t.yaml": IMAGE_TEMPLATE},
        )
        header = f"# simpletfjob:\n#   values:\n#     image: 'x{char}'\n"
        rows[f"values/header-reserved-{code}"] = Case(
            ["h.yaml", "--nodes", "a,b", "-o", "-"],
            1,
            holding(f"h.yaml:3: simpletfjob.values.image: contains {code}"),
            files={"h.yaml": header + IMAGE_TEMPLATE},
        )
    return rows


def _document_rows() -> dict[str, Case]:
    """Documents whose fields have the wrong type: with --validate, kind, namespace; nesting."""
    rows: dict[str, Case] = {}
    wrong = {
        "1": "apiVersion: must be a string, not an integer 1",
        "1.0": "apiVersion: must be a string, not a number 1.0",
        "true": "apiVersion: must be a string, not a boolean true",
        "[batch/v1]": 'apiVersion: must be a string, not a list ["batch/v1"]',
        "{group: batch}": "apiVersion: must be a string, not a mapping",
        "null": "apiVersion: required field is missing",
    }
    for value, message in wrong.items():
        rows[f"templates/validate-api-version-{value}"] = Case(
            ["t.yaml", "--nodes", "a,b", "--validate", "-o", "-"],
            1,
            holding(f"document 1 (Job 't-ps-0'): {message}"),
            files={"t.yaml": TEMPLATE.replace("apiVersion: batch/v1", f"apiVersion: {value}")},
            skip=missing_extra("validate"),
        )
    for value in ("1", "true", "1.5"):
        for validate in ((), ("--validate",)):
            rows[f"templates/kind-{value}{'-validated' if validate else ''}"] = Case(
                ["t.yaml", "--nodes", "a,b", *validate, "-o", "-"],
                1,
                holding(f"document 1 (ps 0 on a): kind {value} is not a string; quote it"),
                files={"t.yaml": TEMPLATE.replace("kind: Job", f"kind: {value}")},
            )
    named = "  name: t-<<type>>-<<index>>\n"
    for value in ("1", "true", "2.5"):
        rows[f"templates/namespace-{value}"] = Case(
            ["t.yaml", "--nodes", "a,b", "--network", "pod", "-o", "-"],
            1,
            holding(
                f"document 1 (ps 0 on a, Job): metadata.namespace {value} is not a string; quote it"
            ),
            files={"t.yaml": TEMPLATE.replace(named, f"{named}  namespace: {value}\n", 1)},
        )
    deep = "[" * 990 + "]" * 990
    rows["templates/annotation-nested-990-deep-validated"] = Case(
        ["t.yaml", "--nodes", "a,b", "--validate", "-o", "-"],
        1,
        holding("document 1 (Job 'mnist-ps-0'): nested too deeply"),
        files={
            "t.yaml": MNIST.replace("metadata:\n", f"metadata:\n  annotations:\n    x: {deep}\n", 1)
        },
        skip=missing_extra("validate"),
    )
    rows["values/nested-1001-deep"] = Case(
        ["mnist.yaml", "--nodes", "a,b", "-f", "v.yaml", "-o", "-"],
        1,
        holding("v.yaml:1: not valid YAML"),
        files={"v.yaml": "x: " + "[" * 1001 + "]" * 1001 + "\n"},
    )
    return rows


_MADE = _node_list_rows() | _value_rows() | _document_rows()
assert not _MADE.keys() & CASES.keys(), "a row made by rule has the name of a row above"
CASES.update(_MADE)
