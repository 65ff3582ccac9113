"""The kubectl plugin: `kubectl simpletfjob ...` is `simpletfjob ...`, named as the user typed it."""

from __future__ import annotations

import re
from typing import Any

import pytest

from simpletfjob.cli import KUBECTL_PLUGIN, main
from tests.conftest import EXAMPLES, ROOT, Result, assert_one_line_error, load_all


def run_plugin(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(list(args), prog_name=KUBECTL_PLUGIN)
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_pyproject_ships_the_plugin_as_a_second_console_script() -> None:
    scripts = (ROOT / "pyproject.toml").read_text().split("[project.scripts]")[1].split("\n[")[0]
    entries = dict(re.findall(r'^([\w-]+) = "([\w.:]+)"$', scripts, re.M))
    assert entries == {
        "simpletfjob": "simpletfjob.cli:console_main",
        "kubectl-simpletfjob": "simpletfjob.cli:kubectl_main",
        "kubectl_complete-simpletfjob": "simpletfjob.cli:kubectl_complete_main",
    }


@pytest.mark.parametrize("command", ["", "status", "wait", "delete", "apply", "nodes"])
def test_help_names_the_program_as_kubectl_runs_it(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    code, out, err = run_plugin(capsys, *([command] if command else []), "--help")
    assert (code, err) == (0, "")
    usage = out.splitlines()[0]
    assert usage.startswith(f"Usage: kubectl simpletfjob {command}".rstrip() + " "), usage


def test_a_usage_error_points_at_the_plugins_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_plugin(capsys, "status", "--no-such-option")
    line = assert_one_line_error(Result(code, out, err), 2)
    assert line.endswith("(see kubectl simpletfjob status --help)")


def test_the_plugin_renders_as_the_program_does(
    capsys: pytest.CaptureFixture[str], cli: Any
) -> None:
    args = [
        str(EXAMPLES / "mnist.yaml"),
        "--nodes-file",
        str(EXAMPLES / "hosts"),
        "-N",
        "3",
        "-o",
        "-",
    ]
    code, out, err = run_plugin(capsys, *args)
    plain = cli(*args)
    assert (code, out, err) == (plain.code, plain.out, plain.err)
    assert [d["metadata"]["name"] for d in load_all(out)] == [
        "mnist-ps-0",
        "mnist-worker-0",
        "mnist-worker-1",
    ]


def test_completion_answers_under_the_plugin_name(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("_SIMPLETFJOB_COMPLETE", "bash_complete")
    monkeypatch.setenv("COMP_WORDS", "kubectl-simpletfjob status --con")
    monkeypatch.setenv("COMP_CWORD", "2")
    code, out, _ = run_plugin(capsys, "status", "--con")
    assert code == 0
    assert "plain,--context" in out.splitlines()
