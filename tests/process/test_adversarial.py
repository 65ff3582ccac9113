"""The error table's rows that run as a process: the installed console script, with a timeout.

tests/error_table.py holds every row and says which run here (`runs_as_process`): the
rows about streams and signals, and those whose only bound is a timeout. Each runs the
console script, forked by tests/support/forkserver.py, in a directory of its own; the
rows run concurrently, a few at a time, from one module-scoped fixture, and each
parametrized test then checks its own row as tests/error_table.py says.
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.conftest import console_script
from tests.error_table import (
    CASES,
    TIMEOUT,
    Case,
    Fifo,
    Outcome,
    check,
    make_files,
    snapshot,
    wait_for,
)
from tests.support import forkserver

WORKERS = 4  # rows run at once: most of a row's time is the interpreter starting
SCRIPT = console_script()
PROCESS = [name for name, case in CASES.items() if case.runs_as_process(name)]


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
        name: CASES[name] for name in PROCESS if CASES[name].skip is None and name in selected
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


@pytest.mark.parametrize("name", PROCESS)
def test_hostile_input(name: str, outcomes: dict[str, Outcome]) -> None:
    case = CASES[name]
    if case.skip is not None:
        pytest.skip(case.skip)
    check(case, outcomes[name])
