"""The installed console script and `python -m simpletfjob`, run as separate processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, console_script, load_all


def test_console_script_renders_mnist() -> None:
    proc = subprocess.run(
        [
            console_script(),
            "mnist.yaml",
            "-N",
            "3",
            "--nodes-file",
            "../hosts",
            "--no-labels",
            "-o",
            "-",
        ],
        cwd=EXAMPLES / "mnist",  # the original tool's template, beside its output
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (EXAMPLES / "mnist" / "expected.yaml").read_text()
    assert proc.stderr.startswith("simpletfjob: wrote 3 tasks to stdout")


def test_python_dash_m_reports_errors_in_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "simpletfjob", "mnist.yaml", "--nodes", "a", "-N", "2"],
        cwd=EXAMPLES,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "simpletfjob: error: -N 2 asks for more hosts than are eligible (1 node: 1 eligible); "
        "1 eligible host fits 1 task at 1 per host; for 2 tasks, give -N 1 --tasks-per-host 2"
    ]


def test_stdout_closed_early_is_exit_141_and_no_line() -> None:
    """A reader that goes away (| head) is no error, as for git and kubectl: exit 141
    (128 + SIGPIPE), and nothing on stderr, the interpreter's own end included."""
    hosts = ",".join(f"h{i}" for i in range(300))
    proc = subprocess.Popen(
        [console_script(), "mnist.yaml", "--nodes", hosts, "-o", "-"],
        cwd=EXAMPLES,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.read(100)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert first.startswith(b"apiVersion: batch/v1")
    assert err == ""


@pytest.mark.parametrize("template", ["mnist.yaml", "tf2-multiworker"])
def test_an_offline_render_imports_nothing_heavy(template: str) -> None:
    """Neither the cluster client nor the schema validator is loaded without a need for it."""
    code = (
        "import sys; from simpletfjob.cli import main\n"
        f"try:\n    main([{template!r}, '--nodes', 'a,b,c', '-o', '-'])\n"
        "except SystemExit: pass\n"
        "heavy = ('kubernetes', 'kubernetes_validate', 'jsonschema', 'referencing', 'urllib3')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy), file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=EXAMPLES, capture_output=True, text=True, timeout=60
    )
    assert proc.stderr.strip().splitlines()[-1] == "[]"
    assert len(load_all(proc.stdout)) == 3


@pytest.mark.parametrize("template", ["mnist.yaml", "tf2-multiworker"])
def test_a_render_imports_no_queue_code(template: str) -> None:
    """--queue is apply's and run's: a render (a header's `queue:` option aside) loads none of it."""
    code = (
        "import sys; from simpletfjob.cli import main\n"
        f"try:\n    main([{template!r}, '--nodes', 'a,b,c', '-o', '-'])\n"
        "except SystemExit: pass\n"
        "queue = ('simpletfjob.runs.queue', 'simpletfjob.runs.queue', 'simpletfjob.cli.queue')\n"
        "print(sorted(m for m in sys.modules if m in queue), file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=EXAMPLES, capture_output=True, text=True, timeout=60
    )
    assert proc.stderr.strip().splitlines()[-1] == "[]"
    assert len(load_all(proc.stdout)) == 3


def test_kubectl_plugin_script_is_installed_and_named_as_kubectl_runs_it() -> None:
    plugin = str(Path(console_script()).with_name("kubectl-simpletfjob"))
    rendered = subprocess.run(
        [plugin, "mnist.yaml", "-N", "3", "--nodes-file", "../hosts", "--no-labels", "-o", "-"],
        cwd=EXAMPLES / "mnist",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert rendered.returncode == 0, rendered.stderr
    assert rendered.stdout == (EXAMPLES / "mnist" / "expected.yaml").read_text()
    usage = subprocess.run([plugin, "wait", "--help"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 0
    assert usage.stdout.startswith("Usage: kubectl simpletfjob wait [OPTIONS] RUN")
