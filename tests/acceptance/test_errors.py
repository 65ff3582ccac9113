"""The error table's rows that run in-process: `main()` as the console script calls it.

tests/error_table.py holds every row of every kind of input and what each row asserts;
the rows that need a real process (`runs_as_process`) run in tests/process/test_adversarial.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.error_table import CASES, Case, Outcome, check, make_files, snapshot

IN_PROCESS = [name for name, case in CASES.items() if not case.runs_as_process(name)]
MACHINE = ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")


def run_in_process(
    case: Case, directory: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> Outcome:
    """The row run as the console script would run it, with no setting from the machine."""
    outcome = Outcome(directory)
    make_files(directory, case.files)
    if case.before is not None:
        case.before(directory)
    outcome.before = snapshot(directory)
    for name in list(os.environ):
        if name in MACHINE or name.startswith("SIMPLETFJOB"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(directory / "home"))
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    result = cli(*case.argv, cwd=directory)
    outcome.code, outcome.out, outcome.err = result.code, result.out.encode(), result.err
    outcome.after = snapshot(directory)
    return outcome


@pytest.mark.parametrize("name", IN_PROCESS)
def test_error_case(name: str, cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    case = CASES[name]
    if case.skip is not None:
        pytest.skip(case.skip)
    check(case, run_in_process(case, tmp_path / "case", cli, monkeypatch))


def test_every_kind_of_input_is_attacked() -> None:
    """The table covers every kind of input, several rows each, in-process and as a process."""
    kinds: dict[str, int] = {}
    for name in CASES:
        kind = name.split("/", 1)[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    assert set(kinds) == {
        "commands",
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
    assert len(CASES) >= 290
    assert len(IN_PROCESS) >= 100 and len(CASES) - len(IN_PROCESS) >= 40
