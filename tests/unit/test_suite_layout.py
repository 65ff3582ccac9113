"""The test suite's own layout (CONTRIBUTING.md, "Where a command's tests go"): one place for a
command's tests, listed in CONTRIBUTING; what tests share in tests/support, not in test modules."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from simpletfjob.cli import COMMANDS
from tests.conftest import ROOT

TESTS = ROOT / "tests"
SUPPORT = TESTS / "support"
TREES = ("unit", "loopback", "control_plane", "process", "acceptance")
SECTION = "### Where a command's tests go"
# A test module that imports another, and why it must (CONTRIBUTING says it too).
IMPORTS_ALLOWED = {
    ("tests/control_plane/test_logs_outage.py", "tests.control_plane.test_outage"): (
        "a module-scoped control plane, defined in test_outage.py so that scheduling.py keeps"
        " that module's tests on one worker"
    ),
}


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def suite_modules() -> list[Path]:
    return sorted(p for tree in TREES for p in (TESTS / tree).glob("test_*.py"))


def commands_table() -> dict[str, list[str]]:
    """CONTRIBUTING's table of command -> the test files its row names."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert SECTION in text, f"CONTRIBUTING.md has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n#", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        found = re.fullmatch(r"\| `([a-z-]+)` \| (.*) \|", line)
        if found:
            rows[found[1]] = re.findall(r"`(tests/[^`]+\.py)`", found[2])
    return rows


def own_files(command: str) -> set[str]:
    """The files that the rule gives the command: test_<command>.py, test_<command>_*.py."""
    return {
        relative(p)
        for p in suite_modules()
        if p.stem == f"test_{command}" or p.stem.startswith(f"test_{command}_")
    }


def is_job_template(value: object) -> bool:
    return (
        isinstance(value, str)
        and value.count("\n") >= 6
        and re.search(r"(?m)^kind: Job\s*$", value) is not None
    )


def test_every_command_has_a_test_file_of_its_name() -> None:
    missing = [c for c in COMMANDS if not own_files(c)]
    assert missing == [], f"no tests/<tree>/test_<command>.py for {missing}"


def test_contributing_lists_each_commands_files_and_only_files_that_exist() -> None:
    table = commands_table()
    assert sorted(table) == sorted(COMMANDS), "one row a command in CONTRIBUTING.md's table"
    for command, listed in table.items():
        unlisted = own_files(command) - set(listed)
        assert unlisted == set(), f"CONTRIBUTING.md's row for {command} leaves out {unlisted}"
        gone = [path for path in listed if not (ROOT / path).is_file()]
        assert gone == [], f"CONTRIBUTING.md's row for {command} names missing files {gone}"


def imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""]
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return []


def is_test_module(name: str) -> bool:
    """tests.<tree>.test_<x>: a module of tests, not of tests/support or a tree's helpers."""
    parts = name.split(".")
    return len(parts) == 3 and parts[0] == "tests" and parts[2].startswith("test_")


def test_no_test_module_imports_another() -> None:
    found = []
    for path in python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for name in imported(node):
                if is_test_module(name) and (relative(path), name) not in IMPORTS_ALLOWED:
                    found.append(f"{relative(path)}:{getattr(node, 'lineno', 0)} imports {name}")
    assert found == [], "shared code belongs in tests/support or a conftest.py: " + "; ".join(found)


def test_job_templates_shared_at_module_level_live_in_tests_support() -> None:
    found = []
    for path in python_files():
        if path.is_relative_to(SUPPORT):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if isinstance(value, ast.Constant) and is_job_template(value.value):
                found.append(f"{relative(path)}:{node.lineno}")
    assert found == [], f"Job templates belong in tests/support/templates.py: {found}"


def test_the_template_rule_sees_a_template_and_no_one_line_case() -> None:
    assert is_job_template("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: t\n" * 2)
    assert not is_job_template("kind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\n")
    assert not is_job_template("apiVersion: v1\nkind: Service\n" * 4)
