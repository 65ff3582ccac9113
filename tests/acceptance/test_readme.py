"""The README's two setup commands are the ones CI and users run, and the README stays short."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, console_script, load_all
from tests.support.docs import fenced_blocks

README = ROOT / "README.md"


def setup_commands() -> list[str]:
    """The README's `sh setup` blocks, one command each, in order."""
    blocks = [b for b in fenced_blocks(README) if b.info == "sh setup"]
    return [b.text.strip() for b in blocks]


def test_the_readme_is_short() -> None:
    assert len(README.read_text().splitlines()) <= 250


def test_ci_runs_the_readmes_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1].strip()
    commands = setup_commands()
    assert len(commands) == 2
    assert commands[1] == ci
    assert "pytest" in ci and "'.[test]'" in ci


def test_the_first_command_installs_and_renders_the_shipped_example(tmp_path: Path) -> None:
    """The offline quick start names files that exist and renders them, from a clean clone."""
    first = setup_commands()[0]
    install, _, render = first.rpartition(" && ")
    assert install.startswith("python3 -m venv .venv && .venv/bin/pip install .")
    args = shlex.split(render)
    assert args[0] == ".venv/bin/simpletfjob"
    for arg in args[1:]:
        if arg.startswith("examples/"):
            assert (ROOT / arg).is_file(), arg
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["HOME"] = str(tmp_path)
    done = subprocess.run(
        [console_script(), *args[1:]], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    docs = load_all(done.stdout)
    assert [d["metadata"]["name"] for d in docs] == [
        "mnist-ps-0",
        "mnist-worker-0",
        "mnist-worker-1",
    ]
    assert re.fullmatch(r"simpletfjob: wrote 3 tasks to stdout: .*\n", done.stderr)


def test_the_readme_mentions_exc_example_which_exists() -> None:
    text = README.read_text()
    assert "exc.example" in text and (ROOT / "exc.example").is_file()
    assert "examples/exc" in text and (ROOT / "examples" / "exc").is_file()


def test_the_test_command_without_a_control_plane_ends_with_one_line_for_the_skipped(
    tmp_path: Path,
) -> None:
    """Without $KUBEBUILDER_ASSETS every control-plane test is skipped for the same reason:
    one line says how many and why, not a line per test; `-rs` still lists each."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "KUBEBUILDER"))}
    module = "tests/control_plane/test_run.py"
    command = [sys.executable, "-m", "pytest", module, "-p", "no:cacheprovider"]
    command += ["--basetemp", str(tmp_path / "base")]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    stats = re.fullmatch(r"=+ (\d+) skipped in [\d.]+s.* =+", lines[-1])
    assert stats is not None, done.stdout
    assert lines[-2] == (
        f"{stats[1]} skipped: {stats[1]} $KUBEBUILDER_ASSETS is not set "
        "(../shared/kube/unpack prints a directory for it)"
    ), done.stdout
    assert not [line for line in lines if line.startswith("SKIPPED")], done.stdout
    listed = subprocess.run([*command, "-rs"], cwd=ROOT, capture_output=True, text=True, env=env)
    each = [line for line in listed.stdout.splitlines() if line.startswith("SKIPPED [1] ")]
    assert len(each) == int(stats[1]), listed.stdout
    assert all(line.startswith(f"SKIPPED [1] {module}:") for line in each), listed.stdout


def test_one_file_and_a_run_without_workers_stay_in_this_process(tmp_path: Path) -> None:
    """The README's command runs on workers; the tests of one file, `-n 0` and `-p no:xdist`
    run in the one process, with pyproject's `-n auto --dist loadgroup` still in addopts."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "KUBEBUILDER"))}
    test = "tests/unit/test_parallel.py::test_a_closed_port_refuses_connections"
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
    for n, extra in enumerate([[test], [test, "-n", "0"], [test, "-p", "no:xdist"]]):
        command = [*base, "--basetemp", str(tmp_path / str(n)), *extra]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
        assert done.returncode == 0, (extra, done.stdout + done.stderr)
        assert re.search(r"^collected 1 item$", done.stdout, re.M), (extra, done.stdout)
        assert not re.search(r"\bworkers?\b|\bgw\d", done.stdout), (extra, done.stdout)
        assert re.search(r"=+ 1 passed in ", done.stdout), (extra, done.stdout)
