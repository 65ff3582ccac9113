"""Shell completion through click's protocol (`_SIMPLETFJOB_COMPLETE`): command words, choices, templates."""

from __future__ import annotations

import pytest

from simpletfjob.cli import main

BUILT_INS = [
    "jax-multiprocess",
    "pod-network",
    "pytorch-ddp",
    "tf1-flags",
    "tf1-ps-hostnetwork",
    "tf2-multiworker",
    "tf2-parameter-server",
]


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


def test_the_first_word_offers_the_commands_and_the_templates(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    found = complete(monkeypatch, capsys, "simpletfjob ")
    commands = [
        "render",
        "templates",
        "init",
        "nodes",
        "apply",
        "run",
        "status",
        "wait",
        "logs",
        "delete",
    ]
    assert plain(found) == [*commands, *BUILT_INS]
    assert ("file", "") in found  # and the shell's file names, for a template file
    assert plain(complete(monkeypatch, capsys, "simpletfjob st")) == ["status"]
    assert plain(complete(monkeypatch, capsys, "simpletfjob tf2")) == [
        "tf2-multiworker",
        "tf2-parameter-server",
    ]


def test_an_option_at_the_first_word_is_the_render_s(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert plain(complete(monkeypatch, capsys, "simpletfjob --ps")) == ["--psn", "--psf"]


@pytest.mark.parametrize(
    ("line", "offered"),
    [
        ("simpletfjob status -o ", ["table", "json", "yaml", "name"]),
        ("simpletfjob mnist.yaml --network ", ["host", "pod"]),
        ("simpletfjob render mnist.yaml --network p", ["pod"]),
        ("simpletfjob wait mnist --cleanup ", ["running", "all", "none"]),
        ("simpletfjob mnist.yaml --address ", ["name", "internal-ip", "hostname"]),
    ],
)
def test_choices_are_offered(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    line: str,
    offered: list[str],
) -> None:
    assert plain(complete(monkeypatch, capsys, line)) == offered


def test_a_template_is_a_built_in_or_a_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    found = complete(monkeypatch, capsys, "simpletfjob apply pod")
    assert found == [("plain", "pod-network"), ("file", "pod")]
    assert plain(complete(monkeypatch, capsys, "simpletfjob nodes --template tf1")) == [
        "tf1-flags",
        "tf1-ps-hostnetwork",
    ]


def test_no_cluster_offers_no_run_and_says_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    assert complete(monkeypatch, capsys, "simpletfjob status ") == []
