"""The documentation runs: every offline shell block in it succeeds, and each command page
lists exactly the options that command's --help shows.

Fenced blocks tell what they are by their info string:

- ```sh: runs offline, from a copy of the repository's examples, with the installed
  `simpletfjob` first on PATH and no kubeconfig; it must exit 0;
- ```sh setup: the README's two setup commands (tests/acceptance/test_readme.py);
- ```console: a session against a cluster, or one with its output: shown, not run;
- ```python in docs/python.md: Python that runs offline, from a copy of the examples
  directory, with the interpreter the tests run under (which has simpletfjob installed);
  it must exit 0 and write nothing to stderr. Elsewhere, a task program's lines: shown;
- ```python notebook: Python against a cluster (docs/python.md): shown, not run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, console_script, missing_extra
from tests.support.docs import DOCS, Block, fenced_blocks

COMMANDS = [
    "render", "templates", "init", "nodes", "apply", "run", "status", "wait", "logs", "delete",
    "diagnose",
    "queue",
]  # fmt: skip
FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def shell_blocks() -> list[Any]:
    found = []
    for path in DOCS:
        for block in fenced_blocks(path):
            if block.info in ("sh", "bash", "shell"):
                name = f"{path.relative_to(ROOT)}:{block.line}"
                found.append(pytest.param(block, id=name))
    return found


def test_the_docs_have_shell_blocks_to_run() -> None:
    assert len(shell_blocks()) >= 10


@pytest.mark.parametrize("block", shell_blocks())
def test_an_offline_shell_block_runs(block: Block, tmp_path: Path) -> None:
    assert "kubectl" not in block.text, "a block that needs a cluster is ```console"
    unable = missing_extra("validate") if "--validate" in block.text else None
    if unable:
        pytest.skip(unable)
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shutil.copy(ROOT / "exc.example", tmp_path / "exc.example")
    home = tmp_path / "home"
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
    }
    env["HOME"] = str(home)
    env["PATH"] = f"{Path(console_script()).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        ["bash", "-e", "-c", block.text],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{block.path.name}:{block.line}\n{block.text}\n{done.stderr}"


def python_blocks() -> list[Any]:
    return [
        pytest.param(block, id=f"{path.relative_to(ROOT)}:{block.line}")
        for path in DOCS
        for block in fenced_blocks(path)
        if block.info == "python" and path == ROOT / "docs" / "python.md"
    ]


def test_the_python_page_has_blocks_to_run() -> None:
    assert any(p.id.startswith("docs/python.md") for p in python_blocks())


@pytest.mark.parametrize("block", python_blocks())
def test_an_offline_python_block_runs(block: Block, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
    }
    env["HOME"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", block.text],
        cwd=tmp_path / "examples",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{block.path.name}:{block.line}\n{block.text}\n{done.stderr}"
    assert done.stderr == "", done.stderr  # the API prints nothing of its own


def help_flags(cli: Any, command: str) -> set[str]:
    """Every flag that `simpletfjob COMMAND --help` lists under its option headings."""
    result = cli(command, "--help")
    assert result.code == 0, result.err
    flags: set[str] = set()
    in_options = False
    for line in result.out.splitlines():
        if re.match(r"^(\w+ )?[Oo]ptions:$", line):
            in_options = True
        elif line and not line.startswith(" "):
            in_options = False
        elif in_options:
            spec = re.match(r"^  (-\S.*?)(?:\s{2,}|$)", line)
            if spec:
                flags.update(FLAG.findall(re.sub(r"\[[^\]]*\]", "", spec[1])))
    return flags


def page_flags(command: str) -> set[str]:
    """Every flag in the first column of the tables under the page's `## Options` heading."""
    text = (ROOT / "docs" / "commands" / f"{command}.md").read_text()
    section = text.split("\n## Options\n", 1)[1].split("\n## ", 1)[0]
    flags: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.split(" | ")[0]
            flags.update(FLAG.findall(re.sub(r"\[[^\]]*\]", "", first)))
    return flags


def test_every_command_has_a_page(cli: Any) -> None:
    listed = re.findall(
        r"^  (\w+)\s{2,}", cli("--help").out.split("Commands:")[1].split("\n\n")[0], re.M
    )
    assert listed == COMMANDS
    for command in COMMANDS:
        assert (ROOT / "docs" / "commands" / f"{command}.md").is_file(), command


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_page_lists_the_options_of_its_help(cli: Any, command: str) -> None:
    from_help = help_flags(cli, command)
    assert {"-h", "--help"} <= from_help
    on_page = page_flags(command)
    assert on_page == from_help, (
        f"missing on the page: {sorted(from_help - on_page)}; "
        f"not in --help: {sorted(on_page - from_help)}"
    )


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)
    return {slug(m[1]) for m in re.finditer(r"^#{1,6} (.*)$", text, re.M)}


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_between_pages_resolve(path: Path) -> None:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        assert linked.exists(), f"{path.name}: {target}"
        if anchor and linked.suffix == ".md":
            assert anchor in anchors(linked), f"{path.name}: {target}"


def test_the_docs_name_no_package_registry_host() -> None:
    for path in DOCS:
        assert "pypi" not in path.read_text().lower(), path
