"""Run the console script as a process of its own, without paying for Python's start each time.

Most of a short run's time is the interpreter starting and importing click, jinja2,
yaml and simpletfjob. A fork server (one per test session) imports them once and,
for each run, forks a fresh process that takes the test's standard streams, argument
list, environment, working directory and signal dispositions, then calls the console
script's entry point, `simpletfjob.cli:console_main`, which ends the process: its SystemExit unwinds the server's frames to the interpreter's
own end, which flushes the standard streams and runs the exit handlers as a fresh process's.

`Popen` and `run` are `subprocess`'s, for the installed console script. The process
is real: its own pid, file descriptors, signals and exit status, so tests signal it,
read its pipes and wait for it as for any child. It falls back to a real exec where a
fork could differ from a fresh interpreter:

- a command other than the console script, or `shell`, `preexec_fn`, `pass_fds`,
  `start_new_session` and the like;
- an environment that changes how Python starts (`PYTHON*`, `LANG`, `LC_*`) from the
  one the server started with;
- a standard stream that is closed or a terminal;
- `SIMPLETFJOB_TESTS_EXEC=1` in the environment of the tests, which turns the server off.

The server has imported the Kubernetes client before it forks, so a forked run cannot
show what the tool imports: tests about what an interpreter imports or how it starts
run their own `subprocess`.

How a run's wait status comes back, so that it cannot be lost: the test process
never waits for a forked run (it is not its child), so nothing there can reap it
first, neither subprocess's collector nor another thread. For each run the server
forks a helper, and the run is the helper's only child: the helper says the run's
pid, waits for that pid, and says its wait status on the run's connection. The
client reads the pid line by itself and keeps whatever came after it: a run that
ends before the test's thread gets to read (a loaded machine, a busy interpreter)
has its status in the same read. The helper ignores the signals a terminal or a CI
runner sends to a whole process group (the run takes them), so it outlives the run.
Should the helper die all the same (SIGKILL), waiting raises `LostStatus`: the
harness failed, and no exit code is made up for the run.

The tests that use the server are about the process, and stay processes: the
console script's entry point (its stream guards, signal handlers and exit), standard
streams and their descriptors, signals, what a user's shell does to it, and the
rows of the error table (tests/error_table.py) that need a process, bounded by a
timeout. A test of one error line that needs none of that runs main() in-process
(the `cli` fixture), cheaper still.

Run as a script, this module is the server: `python forkserver.py SOCKET SCRIPT`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

# Popen arguments a forked run honours; any other sends the run to a real exec.
_SUPPORTED = frozenset(
    {"stdin", "stdout", "stderr", "cwd", "env", "text", "encoding", "errors", "universal_newlines"}
)
# Read by the interpreter as it starts: a run that sets them differently needs a fresh one.
_STARTUP_PREFIXES = ("PYTHON", "LC_")
_STARTUP_NAMES = frozenset({"LANG", "LANGUAGE"})
# What the server imports before it forks: what a render imports anyway, and the parts of
# the Kubernetes client that a run asking a cluster imports (most of a second each time).
_PRELOAD = (
    "simpletfjob.cli",
    "simpletfjob.cli.render",
    "simpletfjob.plan",
    "simpletfjob.output",
    "simpletfjob.kube.connection",
    "simpletfjob.kube.request",
    "jinja2.sandbox",
    "yaml",
    "tempfile",
    "json",
    "kubernetes.client.api_client",
    "kubernetes.client.configuration",
    "kubernetes.client.exceptions",
    "kubernetes.config.kube_config",
    "kubernetes.config.incluster_config",
)


def _startup_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(_STARTUP_PREFIXES) or k in _STARTUP_NAMES}


# -- the client ------------------------------------------------------------------------------


class _Server:
    """The fork server process for one console script, and where it listens."""

    def __init__(self, script: str) -> None:
        self.directory = tempfile.mkdtemp(prefix="simpletfjob-forkserver-")
        if len(self.directory) > 80:  # a socket's path has room for about 100 bytes
            os.rmdir(self.directory)
            self.directory = tempfile.mkdtemp(prefix="simpletfjob-forkserver-", dir="/tmp")
        self.path = os.path.join(self.directory, "socket")
        self.env = dict(os.environ)
        self.process = subprocess.Popen(
            [_interpreter(script), os.path.abspath(__file__), self.path, script],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while not os.path.exists(self.path):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("the test fork server did not start")
            time.sleep(0.005)

    def start(
        self, argv: Sequence[str], cwd: str | None, env: Mapping[str, str], fds: Sequence[int]
    ) -> tuple[socket.socket, int, bytes]:
        """Fork a run: its connection, its pid, and what of its wait status came with the pid."""
        ignored = [
            int(s)
            for s in signal.valid_signals()
            if s not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGPIPE, signal.SIGXFSZ)
            and signal.getsignal(s) == signal.SIG_IGN
        ]
        request = json.dumps(
            {
                "argv": list(argv),
                "cwd": cwd or os.getcwd(),
                "env": dict(env),
                "ignored": ignored,
            }
        ).encode()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self.path)
            socket.send_fds(conn, [b"F"], list(fds))
            conn.sendall(len(request).to_bytes(8, "big") + request)
            # Read the pid line and keep what came after it: a run that ends before
            # this thread reads has its status in the same read (see the module).
            received = b""
            while b"\n" not in received:
                part = conn.recv(64)
                if not part:
                    raise RuntimeError("the test fork server did not start the run")
                received += part
            line, rest = received.split(b"\n", 1)
            return conn, int(line), rest
        except BaseException:
            conn.close()
            raise

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        shutil.rmtree(self.directory, ignore_errors=True)


_servers: dict[str, _Server] = {}
_servers_lock = threading.Lock()
_failed: set[str] = set()  # scripts whose server would not start: their runs exec


def _server_for(script: str) -> _Server | None:
    with _servers_lock:
        if script in _failed:
            return None
        server = _servers.get(script)
        if server is None or server.process.poll() is not None:
            try:
                server = _servers[script] = _Server(script)
            except (OSError, RuntimeError) as e:
                _failed.add(script)
                warnings.warn(f"the test fork server did not start ({e}); runs exec", stacklevel=2)
                return None
        return server


@atexit.register
def _close_servers() -> None:
    for server in _servers.values():
        server.close()


def _interpreter(script: str) -> str:
    """The Python the console script runs under (its #! line), else this one."""
    with open(script, "rb") as f:
        first = f.readline().decode(errors="replace").strip()
    if first.startswith("#!") and " " not in first[2:].strip():
        return first[2:].strip()
    return sys.executable


def _is_script(path: str) -> bool:
    from tests.conftest import console_script

    try:
        return os.path.samefile(path, console_script())
    except OSError:
        return False


def _usable(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return not os.isatty(fd)


class LostStatus(RuntimeError):
    """A forked run's helper ended without the run's wait status: the harness failed, not the run."""


class Popen(subprocess.Popen[Any]):
    """`subprocess.Popen`, forked from the server for the console script (see the module)."""

    def __init__(self, args: Sequence[str], **kwargs: Any) -> None:
        self._conn: socket.socket | None = None
        self._status = b""  # what the run's helper has said of its wait status so far
        self._lost = False
        env = kwargs.get("env")
        self._forkable = (
            os.environ.get("SIMPLETFJOB_TESTS_EXEC") != "1"
            and not isinstance(args, (str, bytes))
            and bool(args)
            and set(kwargs) <= _SUPPORTED
            and _is_script(os.fspath(args[0]))
            and _startup_env(os.environ if env is None else env) == _startup_env(os.environ)
        )
        super().__init__(args, **kwargs)

    def _execute_child(
        self,
        args: Any,
        executable: Any,
        preexec_fn: Any,
        close_fds: Any,
        pass_fds: Any,
        cwd: Any,
        env: Any,
        startupinfo: Any,
        creationflags: Any,
        shell: Any,
        p2cread: int,
        p2cwrite: int,
        c2pread: int,
        c2pwrite: int,
        errread: int,
        errwrite: int,
        *rest: Any,
    ) -> None:
        fds = [
            p2cread if p2cread != -1 else 0,
            c2pwrite if c2pwrite != -1 else 1,
            errwrite if errwrite != -1 else 2,
        ]
        server = _server_for(os.fspath(args[0])) if self._forkable else None
        if server is None or not all(_usable(fd) for fd in fds):
            super()._execute_child(  # type: ignore[misc]
                args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite,
                *rest,
            )  # fmt: skip
            return
        environment = {
            os.fsdecode(k): os.fsdecode(v) for k, v in (os.environ if env is None else env).items()
        }
        try:
            argv = [os.fsdecode(a) for a in args]
            self._conn, self.pid, self._status = server.start(
                argv, None if cwd is None else os.fsdecode(cwd), environment, fds
            )
            self._child_created = True
        finally:
            self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)  # type: ignore[attr-defined]

    def _try_wait(self, wait_flags: int) -> tuple[int, int]:
        conn = self._conn
        if conn is None:
            return super()._try_wait(wait_flags)  # type: ignore[misc, no-any-return]
        if not self._status.endswith(b"\n") and not self._lost:
            try:
                conn.setblocking(not (wait_flags & os.WNOHANG))
                while not self._status.endswith(b"\n"):
                    try:
                        part = conn.recv(64)
                    except BlockingIOError:
                        return 0, 0
                    if not part:  # the helper ended without saying the status
                        break
                    self._status += part
            except OSError:  # closed under us: the collector finalized an unwaited Popen
                pass
            conn.close()
            if not self._status.endswith(b"\n"):
                self._lost = True
                raise LostStatus(
                    f"the test fork server lost the wait status of run {self.pid}: "
                    "its helper process ended before the run did"
                )
        if self._lost:  # said once, above; what follows is the caller's cleanup
            return self.pid, 255 << 8
        return self.pid, int(self._status)

    def _internal_poll(self, _deadstate: Any = None, *args: Any, **kwargs: Any) -> int | None:
        if self._conn is None:
            return super()._internal_poll(_deadstate)  # type: ignore[misc, no-any-return]
        if self.returncode is None and self._waitpid_lock.acquire(False):  # type: ignore[attr-defined]
            try:
                if self.returncode is None:
                    pid, status = self._try_wait(os.WNOHANG)
                    if pid == self.pid:
                        self._handle_exitstatus(status)  # type: ignore[attr-defined]
            except LostStatus:
                if _deadstate is None:
                    raise
                # subprocess's own collector (Popen.__del__, subprocess._active): as for
                # a child it cannot wait for, the run is done and its status unknown.
                self.returncode = _deadstate
            finally:
                self._waitpid_lock.release()  # type: ignore[attr-defined]
        return self.returncode


def run(
    args: Sequence[str],
    *,
    input: bytes | str | None = None,
    timeout: float | None = None,
    check: bool = False,
    capture_output: bool = False,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run`, with `Popen` above."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    with Popen(args, **kwargs) as process:
        try:
            out, err = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise
        except BaseException:
            process.kill()
            raise
        code = process.poll()
    if check and code:
        raise subprocess.CalledProcessError(code or 0, process.args, out, err)
    return subprocess.CompletedProcess(process.args, code or 0, out, err)


# -- the server ------------------------------------------------------------------------------


def _serve(path: str, script: str) -> None:
    # As the console script has it: its directory first on the path, then the site's.
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    import importlib

    for name in _PRELOAD:
        importlib.import_module(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".new")
    listener.listen(64)
    os.rename(path + ".new", path)  # the client waits for the name: it is there once listening
    listener.settimeout(1.0)
    parent = os.getppid()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the per-run helpers
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if os.getppid() != parent:  # the tests are gone
                return
            continue
        if os.fork() == 0:
            try:
                listener.close()
                _helper(conn, script)
            except BaseException:
                if _RUN[0]:
                    # The run itself: the console script's end (sys.exit) unwinds from here
                    # to the interpreter's own end, as in a fresh process.
                    raise
            os._exit(70)
        conn.close()


_RUN = [False]  # True in a run's process (see _helper)


# What a terminal or a CI runner sends to a whole process group.
_GROUP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT})


def _helper(conn: socket.socket, script: str) -> None:
    """One run: fork it, say its pid, wait for it and say its wait status.

    The helper ignores the signals a terminal or a CI runner sends to the whole process
    group: the run takes them, and the helper lives to say how it ended. They are
    blocked across the fork, so that the run takes one that comes meanwhile with its
    own dispositions (`_become`), not the helper's.
    """
    conn.settimeout(None)
    _, fds, _, _ = socket.recv_fds(conn, 1, 3)
    size = int.from_bytes(_receive(conn, 8), "big")
    request = json.loads(_receive(conn, size))
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _GROUP_SIGNALS)
    pid = os.fork()
    if pid == 0:
        _RUN[0] = True
        conn.close()
        _become(request, fds, script, mask)  # never returns: it raises SystemExit (see _serve)
    for s in _GROUP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    for fd in fds:
        os.close(fd)
    conn.sendall(f"{pid}\n".encode())
    _, status = os.waitpid(pid, 0)
    conn.sendall(f"{status}\n".encode())


def _receive(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        part = conn.recv(size - len(data))
        if not part:
            raise EOFError
        data += part
    return data


def _become(
    request: dict[str, Any], fds: Sequence[int], script: str, mask: set[int | signal.Signals]
) -> None:
    """The run itself: a fresh process's streams, directory, environment and signals, then the script."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.closerange(3, os.sysconf("SC_OPEN_MAX") if os.sysconf("SC_OPEN_MAX") > 0 else 4096)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    ignored = set(request["ignored"])
    for s in signal.valid_signals():
        if s in (signal.SIGKILL, signal.SIGSTOP):
            continue
        if s in (signal.SIGPIPE, signal.SIGXFSZ) or s in ignored:
            handler: Any = signal.SIG_IGN  # Python ignores these two as it starts
        elif s == signal.SIGINT:
            handler = signal.default_int_handler
        else:
            handler = signal.SIG_DFL
        with contextlib.suppress(OSError, ValueError):
            signal.signal(s, handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    sys.argv = [script, *request["argv"][1:]]
    from simpletfjob.cli import console_main

    console_main()


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2])
