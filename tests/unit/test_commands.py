"""The command group: render by default or by name, the other commands, help and version."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from simpletfjob import __version__
from tests.conftest import EXAMPLES, assert_one_line_error, write

# The original tool's template, beside its output.
MNIST = ("--nodes-file", "../hosts", "-N", "3", "--no-labels", "-o", "-")
EXPECTED = (EXAMPLES / "mnist" / "expected.yaml").read_text()
SUMMARY = "simpletfjob: wrote 3 tasks to stdout: 1 ps (h10), 2 worker (h100, h14)\n"


@pytest.mark.parametrize(
    "args",
    [
        ("mnist.yaml", *MNIST),  # as it always was
        ("render", "mnist.yaml", *MNIST),  # by its name
        (*MNIST, "mnist.yaml"),  # options first
        ("-N", "3", "mnist.yaml", "--nodes-file", "../hosts", "--no-labels", "-o", "-"),
        ("render", "-N", "3", "--no-labels", "mnist.yaml", "--nodes-file", "../hosts", "-o", "-"),
        (*MNIST, "--", "mnist.yaml"),
    ],
)
def test_render_is_the_default_command(cli: Any, args: tuple[str, ...]) -> None:
    result = cli(*args, cwd=EXAMPLES / "mnist")
    assert (result.code, result.out, result.err) == (0, EXPECTED, SUMMARY)


@pytest.mark.parametrize("name", ["render", "templates", "init"])
def test_a_template_named_like_a_command_renders_as_dot_slash_name(
    cli: Any, tmp_path: Path, name: str
) -> None:
    write(tmp_path / name, f"kind: Job\nmetadata:\n  name: {name}-<<type>>-<<index>>\n")
    for args in ((f"./{name}",), ("render", name), ("render", f"./{name}")):
        result = cli(*args, "--nodes", "a,b", "-o", "-", cwd=tmp_path)
        assert result.code == 0, result.err
        assert [d["metadata"]["name"] for d in result.docs] == [f"{name}-ps-0", f"{name}-worker-0"]
    # The word alone is the command.
    assert cli(name, "--help", cwd=tmp_path).out.startswith(f"Usage: simpletfjob {name} ")


COMMANDS = [
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


def test_help_is_a_short_overview_of_the_commands(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As kubectl's and helm's: the commands, one line each, and how to see one's options."""
    monkeypatch.setenv("COLUMNS", "80")  # a common terminal
    for args in ((), ("--help",), ("-h",)):
        result = cli(*args)
        assert (result.code, result.err) == (0, ""), args
        lines = result.out.splitlines()
        assert len(lines) <= 40, len(lines)
        assert lines[:2] == [
            "Usage: simpletfjob [render] [OPTIONS] [TEMPLATE]",
            "       simpletfjob COMMAND [ARGS]...",
        ]
        listed = lines[lines.index("Commands:") + 1 : lines.index("Commands:") + 1 + len(COMMANDS)]
        assert [line.split()[0] for line in listed] == COMMANDS
        for line in listed:  # one line each, whole (click cuts a long one with '...')
            assert len(line) <= 80 and not line.endswith("..."), line
        assert "simpletfjob COMMAND --help" in result.out
        for option in ("--version", "-h, --help"):
            assert option in result.out
        # the render's options are render --help's, not the overview's
        assert "--psn" not in result.out and "--nodes-file" not in result.out


@pytest.mark.parametrize("command", COMMANDS)
def test_each_commands_help_groups_its_options_within_100_lines(
    cli: Any, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    result = cli(command, "--help")
    assert (result.code, result.err) == (0, "")
    lines = result.out.splitlines()
    assert len(lines) <= 100, len(lines)
    assert all(len(line) <= 80 for line in lines)
    headings = [line for line in lines if re.fullmatch(r"[A-Z][\w ]*options:|Options:", line)]
    options = sum(1 for line in lines if re.match(r"^  -", line))
    if options > 12:  # a command of many options shows them under headings
        assert len(headings) >= 3, headings
    assert "-h, --help" in result.out
    # the details are on the command's page
    assert f"docs/commands/{command}.md" in result.out


@pytest.mark.parametrize(
    ("args", "usage"),
    [
        (("mnist.yaml", "--help"), "Usage: simpletfjob [OPTIONS] [TEMPLATE]"),
        (("render", "--help"), "Usage: simpletfjob render [OPTIONS] [TEMPLATE]"),
        (("templates", "--help"), "Usage: simpletfjob templates [OPTIONS]"),
        (("init", "-h"), "Usage: simpletfjob init [OPTIONS] NAME"),
    ],
)
def test_each_command_has_its_help(cli: Any, args: tuple[str, ...], usage: str) -> None:
    result = cli(*args, cwd=EXAMPLES)
    assert result.code == 0 and result.err == ""
    assert result.out.splitlines()[0] == usage
    assert "Commands:" not in result.out


@pytest.mark.parametrize(
    "args", [("--version",), ("mnist.yaml", "--version"), ("render", "--version")]
)
def test_version(cli: Any, args: tuple[str, ...]) -> None:
    result = cli(*args, cwd=EXAMPLES)
    assert (result.code, result.out, result.err) == (0, f"simpletfjob, version {__version__}\n", "")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--nodes", "a"), "missing the TEMPLATE argument (see simpletfjob --help)"),
        (("render",), "missing the TEMPLATE argument (see simpletfjob render --help)"),
        (
            ("mnist.yaml", "--bogus"),
            "No such option '--bogus'. Did you mean '--gpus'? (see simpletfjob --help)",
        ),
        (("render", "mnist.yaml", "-x"), "No such option '-x'. (see simpletfjob render --help)"),
        (("init",), "Missing argument 'NAME'. (see simpletfjob init --help)"),
        (("init", "-o"), "Option '-o' requires an argument. (see simpletfjob init --help)"),
        (
            ("render", "t.yaml", "-N"),
            "Option '-N' requires an argument. (see simpletfjob render --help)",
        ),
        (("t.yaml", "-N"), "Option '-N' requires an argument. (see simpletfjob --help)"),
        (("-N",), "Option '-N' requires an argument. (see simpletfjob --help)"),
        (
            ("templates", "x"),
            "Got unexpected extra argument (x) (see simpletfjob templates --help)",
        ),
        (
            ("mnist.yaml", "-N", "x"),
            "Invalid value for '-N' / '--num': 'x' is not a valid integer. (see simpletfjob --help)",
        ),
    ],
)
def test_usage_errors_name_the_command_as_it_was_run(
    cli: Any, args: tuple[str, ...], message: str
) -> None:
    result = cli(*args, cwd=EXAMPLES)
    assert_one_line_error(result, 2, "")
    assert result.err == f"simpletfjob: error: {message}\n"


@pytest.mark.parametrize(
    ("command", "loaded", "not_loaded"),
    [
        ("templates", "simpletfjob.cli.templates", "simpletfjob.cli.render"),
        ("mnist.yaml", "simpletfjob.cli.render", "simpletfjob.cli.init"),
    ],
)
def test_a_command_imports_only_its_own_module(command: str, loaded: str, not_loaded: str) -> None:
    """Commands are loaded when they run, so adding commands does not slow down a render."""
    code = (
        "import sys; from simpletfjob.cli import main\n"
        f"try:\n    main([{command!r}, '--nodes', 'a,b', '-o', '-'] if {command!r} != 'templates'"
        " else ['templates'])\nexcept SystemExit: pass\n"
        f"print({loaded!r} in sys.modules, {not_loaded!r} in sys.modules, file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=EXAMPLES, capture_output=True, text=True, timeout=60
    )
    assert proc.stderr.strip().splitlines()[-1] == "True False"


def test_short_options_parse_as_click_parses_them(cli: Any, tmp_path: Path) -> None:
    write(tmp_path / "exc", "a\n")
    write(tmp_path / "t.yaml", "kind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\n")
    nodes = ("--nodes", "a,b,c,d")
    result = cli("t.yaml", *nodes, "-N2", "-oout.yaml", cwd=tmp_path)  # values attached
    assert result.code == 0, result.err
    assert (tmp_path / "out.yaml").read_text().count("kind: Job") == 2
    result = cli("t.yaml", *nodes, "-E", "-o", "-", cwd=tmp_path)  # -E alone before an option
    assert [d["metadata"]["name"] for d in result.docs] == ["t-ps-0", "t-worker-0", "t-worker-1"]
    result = cli("t.yaml", *nodes, "--name", "-o", cwd=tmp_path)  # a value that looks like one
    assert result.err == (
        "simpletfjob: error: --name '-o' is not a valid label value (at most 63 characters: "
        "letters, digits, '-', '_' and '.', starting and ending with a letter or digit)\n"
    )
    result = cli("t.yaml", *nodes, "-Nx", cwd=tmp_path)
    assert result.err == (
        "simpletfjob: error: Invalid value for '-N' / '--num': 'x' is not a valid integer. "
        "(see simpletfjob --help)\n"
    )


@pytest.mark.parametrize(
    ("word", "meant"),
    [("statsu", "status"), ("stat", "status"), ("aply", "apply"), ("Delete", "delete")],
)
def test_a_mistyped_command_is_suggested_when_no_file_has_its_name(
    cli: Any, tmp_path: Path, word: str, meant: str
) -> None:
    result = cli(word, "mnist", "-n", "ml", cwd=tmp_path)
    assert_one_line_error(result, 2)
    assert result.err == (
        f"simpletfjob: error: no such command or template {word!r}; did you mean {meant!r}?\n"
    )
    # A file of that name is a template, as it always was.
    write(tmp_path / word, f"kind: Job\nmetadata:\n  name: {word.lower()}-<<type>>-<<index>>\n")
    result = cli(word, "--nodes", "a,b", "-o", "-", cwd=tmp_path)
    assert result.code == 0, result.err
    assert [d["metadata"]["name"] for d in result.docs] == [
        f"{word.lower()}-ps-0",
        f"{word.lower()}-worker-0",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # Like no command: the missing template's own message.
        (("mnist", "--nodes", "a,b"), "template 'mnist' is neither a file nor a built-in"),
        (("nope", "--nodes", "a,b"), "template 'nope' is neither a file nor a built-in"),
        # A path is always a template, however close to a command.
        (("status.yaml", "--nodes", "a,b"), "template 'status.yaml' does not exist"),
        (("./statsu", "--nodes", "a,b"), "template './statsu' does not exist"),
        # Named as a template of render: never a command.
        (("render", "statsu", "--nodes", "a,b"), "template 'statsu' is neither a file nor"),
    ],
)
def test_a_word_like_no_command_or_a_path_stays_a_missing_template(
    cli: Any, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    assert message in assert_one_line_error(cli(*args, "-o", "-", cwd=tmp_path), 1)


def test_a_built_in_close_to_no_command_still_renders(cli: Any, tmp_path: Path) -> None:
    result = cli("tf1-flags", "--nodes", "a,b", "-o", "-", cwd=tmp_path)
    assert result.code == 0, result.err
    assert len(result.docs) == 2
