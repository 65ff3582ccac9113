"""Defaults, output files and the summary line, as a user meets them (errors: tests/error_table.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, PLACEMENTS, assert_one_line_error, job_template, write


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    write(tmp_path / "mnist.yaml", (EXAMPLES / "mnist" / "mnist.yaml").read_text())  # the original
    write(tmp_path / "hosts", "h10\nh100\nh14\nh23\n")
    return tmp_path


def test_default_output_is_beside_the_template(cli: Any, workdir: Path) -> None:
    result = cli("mnist.yaml", "-N", "3", "--nodes-file", "hosts", "--no-labels", cwd=workdir)
    assert result.code == 0, result.err
    assert result.out == ""
    written = (workdir / "mnist_tfjob.yaml").read_text()
    assert written == (EXAMPLES / "mnist" / "expected.yaml").read_text()
    assert result.err == (
        "simpletfjob: wrote 3 tasks to mnist_tfjob.yaml: 1 ps (h10), 2 worker (h100, h14)\n"
    )


def test_template_in_another_directory(cli: Any, workdir: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    result = cli("../mnist.yaml", "--nodes-file", "../hosts", "-N", "2", cwd=other)
    assert result.code == 0, result.err
    assert (workdir / "mnist_tfjob.yaml").exists()
    assert not (other / "mnist_tfjob.yaml").exists()


def test_bare_exc_reads_exc_in_the_current_directory(cli: Any, workdir: Path) -> None:
    write(workdir / "exc", "h10\n# a comment\nh14\n")
    result = cli("mnist.yaml", "-N", "2", "-E", "--nodes-file", "hosts", "-o", "-", cwd=workdir)
    assert result.code == 0, result.err
    assert [d["spec"]["template"]["spec"]["nodeName"] for d in result.docs] == ["h100", "h23"]


def test_exc_with_a_file_and_a_typo_warns(cli: Any, workdir: Path) -> None:
    write(workdir / "skip.txt", "h100\nh99\n")
    result = cli("mnist.yaml", "--exc", "skip.txt", "--nodes-file", "hosts", "-o", "-", cwd=workdir)
    assert result.code == 0
    assert [d["spec"]["template"]["spec"]["nodeName"] for d in result.docs] == ["h10", "h14", "h23"]
    assert "warning: skip.txt: 'h99' is not among the hosts" in result.err


def test_exc_typos_are_warned_in_the_file_order_once_each(cli: Any, workdir: Path) -> None:
    names = ["zz9", "h100", "aa1", "m5", "zz9", "b2", "aa1", "q7"]
    write(workdir / "skip.txt", "".join(f"{n}\n" for n in names))
    result = cli("mnist.yaml", "--exc", "skip.txt", "--nodes-file", "hosts", "-o", "-", cwd=workdir)
    assert result.code == 0, result.err
    warned = [
        line.split("'")[1] for line in result.err.splitlines() if "is not among the hosts" in line
    ]
    assert warned == ["zz9", "aa1", "m5", "b2", "q7"]


def test_psf_overrides_psn(cli: Any, workdir: Path) -> None:
    write(workdir / "ps.txt", "h23\nh14\n")
    result = cli(
        "mnist.yaml",
        "--psf",
        "ps.txt",
        "--psn",
        "1",
        "--nodes-file",
        "hosts",
        "-o",
        "-",
        cwd=workdir,
    )
    assert result.code == 0, result.err
    names = [
        (d["metadata"]["name"], d["spec"]["template"]["spec"]["nodeName"]) for d in result.docs
    ]
    assert names == [
        ("mnist-ps-0", "h23"),
        ("mnist-ps-1", "h14"),
        ("mnist-worker-0", "h10"),
        ("mnist-worker-1", "h100"),
    ]


def test_output_is_byte_identical_across_runs(cli: Any, workdir: Path) -> None:
    args = ("mnist.yaml", "--nodes-file", "hosts", "--chief", "--evaluator", "-o", "-")
    assert cli(*args, cwd=workdir).out == cli(*args, cwd=workdir).out


def test_custom_port(cli: Any, workdir: Path) -> None:
    result = cli("mnist.yaml", "--nodes", "h1,h2", "--port", "5555", "-o", "-", cwd=workdir)
    assert '"ps": ["h1:5555"]' in result.out


def test_help_and_version(cli: Any) -> None:
    assert "--nodes-file" in cli("render", "--help").out
    assert "--psf" in cli("mnist.yaml", "-h").out  # a template's help is the render's
    from simpletfjob import __version__

    assert __version__ in cli("--version").out


def test_a_failed_write_leaves_the_old_file(cli: Any, tmp_path: Path) -> None:
    if os.geteuid() == 0:
        # root ignores directory permissions; use a path the kernel refuses for everyone
        out = tmp_path / ("x" * 300)
        pattern = r"cannot write"
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        out = ro / "out.yaml"
        write(out, "old\n")
        ro.chmod(0o500)
        pattern = r"Permission denied"
    template = write(tmp_path / "t.yaml", job_template(PLACEMENTS["inline-unquoted"]))
    result = cli(str(template), "--nodes", "a,b", "-o", str(out))
    assert_one_line_error(result, 1, pattern)
    assert [p.name for p in out.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_overwrite_keeps_the_file_mode_and_leaves_no_temp_file(cli: Any, tmp_path: Path) -> None:
    template = write(tmp_path / "t.yaml", job_template(PLACEMENTS["inline-unquoted"]))
    out = write(tmp_path / "out.yaml", "old\n")
    out.chmod(0o640)
    result = cli(str(template), "--nodes", "a,b", "-o", str(out))
    assert result.code == 0, result.err
    assert out.stat().st_mode & 0o777 == 0o640
    assert out.read_text().startswith("apiVersion: batch/v1\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.yaml", "t.yaml"]


def test_template_file_is_never_touched(cli: Any, tmp_path: Path) -> None:
    template = write(tmp_path / "t.yaml", job_template(PLACEMENTS["folded-column-0"]))
    before = template.read_bytes(), template.stat().st_mtime_ns
    assert cli(str(template), "--nodes", "a,b").code == 0
    assert (template.read_bytes(), template.stat().st_mtime_ns) == before


def test_output_to_a_device_writes_in_place(cli: Any, workdir: Path) -> None:
    result = cli("mnist.yaml", "--nodes-file", "hosts", "-o", os.devnull, cwd=workdir)
    assert result.code == 0, result.err
    assert not os.path.isfile(os.devnull)


def test_output_through_a_symlink_keeps_the_link(cli: Any, workdir: Path) -> None:
    target = write(workdir / "real.yaml", "old\n")
    (workdir / "link.yaml").symlink_to(target)
    result = cli("mnist.yaml", "--nodes-file", "hosts", "-o", "link.yaml", cwd=workdir)
    assert result.code == 0, result.err
    assert (workdir / "link.yaml").is_symlink()
    assert target.read_text().startswith("apiVersion: batch/v1")


# The first words of each command, before an option: what it needs to parse at all.
COMMAND_WORDS = {
    "render": ["mnist.yaml"],
    "apply": ["apply", "mnist.yaml"],
    "run": ["run", "mnist.yaml"],
    "status": ["status", "mnist"],
    "wait": ["wait", "mnist"],
    "logs": ["logs", "mnist"],
    "delete": ["delete", "mnist"],
    "nodes": ["nodes"],
}
# A fullwidth digit two and three: digits to int(), not to the command line.
TWO, THREE = "\uff12", "\uff13"
# Options whose own parser reads digits, and a value of theirs written with fullwidth ones.
PARSED = {"port": TWO * 4, "nproc_per_node": TWO, "restart_exit_codes": THREE}
DURATION = THREE + "s"


def integer_options() -> list[tuple[str, str, str]]:
    """(command, flag, a value with fullwidth digits) for every option that takes digits."""
    import click

    from simpletfjob.cli import group

    found = []
    for name in COMMAND_WORDS:
        command = group.commands.get(name) or group.get_command(click.Context(group), name)
        assert command is not None
        for param in command.params:
            if not isinstance(param, click.Option) or param.is_flag or not param.opts:
                continue
            flag = param.opts[0]
            if param.type.name == "integer":
                found.append((name, flag, TWO))
            elif param.name in PARSED:
                found.append((name, flag, PARSED[param.name]))
            elif param.metavar == "DURATION":
                found.append((name, flag, DURATION))
    return found


INTEGER_OPTIONS = integer_options()


def test_every_option_that_takes_digits_is_found() -> None:
    flags = {flag for _, flag, _ in INTEGER_OPTIONS}
    assert {"-N", "--psn", "--port", "--min-workers", "--tail", "--timeout"} <= flags


@pytest.mark.parametrize(("command", "flag", "value"), INTEGER_OPTIONS)
def test_integers_on_the_command_line_are_ascii_digits(
    cli: Any, workdir: Path, command: str, flag: str, value: str
) -> None:
    """`--min-workers \uff12` (a fullwidth 2) was taken as 2: int() reads any Unicode digit."""
    result = cli(*COMMAND_WORDS[command], flag, value, cwd=workdir)
    assert_one_line_error(result, 2, rf"Invalid value for '{flag}'.*'{value}'")
