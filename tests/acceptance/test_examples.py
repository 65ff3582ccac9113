"""Acceptance: each examples/<case>/ directory holds its arguments and the expected output.

`args` is the command line (run from the case directory); `expected.yaml` is
the exact stdout. The output is compared byte for byte, and parsed.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, load_all

CASES = sorted(p.parent for p in EXAMPLES.glob("*/args"))


def test_there_are_cases() -> None:
    assert {c.name for c in CASES} >= {"mnist", "mnist-exc", "legacy"}


def test_every_built_in_template_has_an_example() -> None:
    from simpletfjob.template.catalog import builtin_names

    for name in builtin_names():
        case = EXAMPLES / name
        assert shlex.split((case / "args").read_text())[0] == name
        assert (case / "hosts").is_file()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_example(cli: Any, case: Path) -> None:
    args = shlex.split((case / "args").read_text())
    expected = (case / "expected.yaml").read_text()
    result = cli(*args, cwd=case)
    assert result.code == 0, result.err
    assert load_all(result.out) == load_all(expected)
    assert result.out == expected


def test_mnist_matches_the_original_tools_readme() -> None:
    """The seed's golden output is the second yaml block of the original README, verbatim."""
    readme = EXAMPLES.parent.parent / "shared" / "reference" / "simpletfjob-original-README.md"
    if not readme.exists():
        pytest.skip("the reference README is not beside this checkout")
    golden = readme.read_text(encoding="utf-8").split("```yaml\n")[2].split("```")[0]
    assert (EXAMPLES / "mnist" / "expected.yaml").read_text() == golden
