"""`simpletfjob init`: a built-in copied out to be edited, which renders as the built-in does.

Its refusals that one command line shows are rows of tests/error_table.py, or of
test_templates.py's test_command_errors (a missing or unknown name).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simpletfjob.template.catalog import read_builtin
from tests.conftest import assert_one_line_error, write


def test_init_writes_a_copy_that_renders_the_same(cli: Any, tmp_path: Path) -> None:
    result = cli("init", "tf2-multiworker", cwd=tmp_path)
    assert result.code == 0, result.err
    assert result.out == ""
    copy = tmp_path / "tf2-multiworker.yaml"
    assert copy.read_text() == read_builtin("tf2-multiworker")
    assert "simpletfjob tf2-multiworker.yaml --nodes" in result.err
    nodes = ("--nodes", "a,b,c", "-o", "-")
    from_copy = cli("tf2-multiworker.yaml", *nodes, cwd=tmp_path)
    from_builtin = cli("tf2-multiworker", *nodes, cwd=tmp_path)
    assert from_copy.code == 0, from_copy.err
    assert from_copy.out == from_builtin.out


def test_init_refuses_to_overwrite_without_force(cli: Any, tmp_path: Path) -> None:
    mine = write(tmp_path / "tf1-flags.yaml", "my edits\n")
    assert_one_line_error(
        cli("init", "tf1-flags", cwd=tmp_path), 1, r"'tf1-flags.yaml' already exists; give --force"
    )
    assert mine.read_text() == "my edits\n"
    assert cli("init", "tf1-flags", "--force", cwd=tmp_path).code == 0
    assert mine.read_text() == read_builtin("tf1-flags")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tf1-flags.yaml"]


def test_init_to_a_file_and_to_stdout(cli: Any, tmp_path: Path) -> None:
    result = cli("init", "tf1-flags.yaml", "-o", "mine.yaml", cwd=tmp_path)
    assert result.code == 0, result.err
    assert (tmp_path / "mine.yaml").read_text() == read_builtin("tf1-flags")
    result = cli("init", "tf2-parameter-server", "-o", "-", cwd=tmp_path)
    assert result.out == read_builtin("tf2-parameter-server")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.yaml"]
