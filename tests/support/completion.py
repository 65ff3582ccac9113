"""What a shell is offered: click's completion protocol driven as bash drives it, in-process."""

from __future__ import annotations

import pytest

from simpletfjob.cli import main


def complete(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], line: str
) -> list[tuple[str, str]]:
    """What bash is offered for the last word of `line` (after a space: a new word), as (type, value)."""
    words = line.split()
    monkeypatch.setenv("_SIMPLETFJOB_COMPLETE", "bash_complete")
    monkeypatch.setenv("COMP_WORDS", line)
    monkeypatch.setenv("COMP_CWORD", str(len(words) if line.endswith(" ") else len(words) - 1))
    with pytest.raises(SystemExit) as done:
        main([])
    assert done.value.code == 0
    out, err = capsys.readouterr()
    assert err == ""  # completion never speaks
    items = (item.split(",", 1) for item in out.splitlines() if item)
    return [(kind, value) for kind, value in items]


def plain(found: list[tuple[str, str]]) -> list[str]:
    return [value for kind, value in found if kind == "plain"]
