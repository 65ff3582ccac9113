"""The README's two setup commands are the ones CI and users run."""

from __future__ import annotations

import re

from tests.conftest import ROOT


def indented_commands(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.startswith("    python3 -m venv")]


def test_ci_runs_the_readmes_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1].strip()
    commands = indented_commands(readme.split("## How a run")[0])
    assert len(commands) == 2
    assert commands[1] == ci
    assert "pytest" in ci and "'.[test]'" in ci


def test_the_main_command_renders_the_shipped_example() -> None:
    readme = (ROOT / "README.md").read_text()
    first = indented_commands(readme.split("## How a run")[0])[0]
    match = re.search(r"simpletfjob (examples/\S+) --nodes-file (examples/\S+)", first)
    assert match is not None
    assert (ROOT / match[1]).is_file() and (ROOT / match[2]).is_file()
