"""Acceptance: each tests/acceptance/errors/<case>/ directory is a refused run.

`args` is the command line, run from the case directory with no kubeconfig;
`expected-stderr` is the exact stderr and `expected-exit` the exit status. Nothing
may reach stdout, and every file in the directory must be as it was.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_one_line_error, snapshot

CASES = sorted(p.parent for p in (Path(__file__).parent / "errors").glob("*/args"))


def test_there_are_cases() -> None:
    assert len(CASES) >= 15


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_error_case(cli: Any, kube_env: Path, case: Path) -> None:
    args = shlex.split((case / "args").read_text())
    before = snapshot(case)
    result = cli(*args, cwd=case)
    assert_one_line_error(result, int((case / "expected-exit").read_text()))
    assert result.err == (case / "expected-stderr").read_text()
    assert snapshot(case) == before
