"""kubectl's habits offline: its verbs, a bare `simpletfjob`, --help's order, `render --task`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, assert_one_line_error, write


@pytest.mark.parametrize(
    ("args", "instead"),
    [
        (("get",), "to list runs, use: simpletfjob status"),
        (("get", "runs"), "to list runs, use: simpletfjob status"),
        (("get", "runs", "-n", "ml"), "to list runs, use: simpletfjob status -n ml"),
        (("get", "run/mnist"), "to list runs, use: simpletfjob status mnist"),
        (("list",), "to list runs, use: simpletfjob status"),
        (("ls", "-A"), "to list runs, use: simpletfjob status -A"),
        (("describe", "mnist", "-n", "ml"), "to show a run, use: simpletfjob status mnist -n ml"),
        (("describe",), "to show a run, use: simpletfjob status RUN"),
    ],
)
def test_kubectl_verbs_point_to_status_with_exit_2(
    cli: Any, tmp_path: Path, args: tuple[str, ...], instead: str
) -> None:
    # A file named like the verb does not change it: the verb wins, as a command word does.
    write(tmp_path / args[0], "kind: Job\nmetadata:\n  name: j-<<type>>-<<index>>\n")
    result = cli(*args, cwd=tmp_path)
    assert_one_line_error(result, 2, "")
    assert result.err == f"simpletfjob: error: no such command {args[0]!r}; {instead}\n"


def test_a_file_named_like_a_kubectl_verb_renders_as_dot_slash(cli: Any, tmp_path: Path) -> None:
    write(tmp_path / "get", "kind: Job\nmetadata:\n  name: j-<<type>>-<<index>>\n")
    result = cli("./get", "--nodes", "a,b", "-o", "-", cwd=tmp_path)
    assert result.code == 0, result.err
    assert [d["metadata"]["name"] for d in result.docs] == ["j-ps-0", "j-worker-0"]


def test_a_bare_simpletfjob_prints_its_help_and_exits_0(cli: Any) -> None:
    bare = cli()
    assert (bare.code, bare.err) == (0, "")
    assert bare.out == cli("--help").out
    lines = bare.out.splitlines()
    assert lines[0] == "Usage: simpletfjob [render] [OPTIONS] [TEMPLATE]"
    # The commands come first, right after the usage and what the program does.
    assert "Commands:" in lines[:8]
    commands = [line.split()[0] for line in lines[lines.index("Commands:") + 1 :][:10]]
    assert commands == [
        "render", "templates", "init", "nodes", "apply",
        "run", "status", "wait", "logs", "delete",
    ]  # fmt: skip
    assert lines.index("Commands:") < lines.index("Options:")


@pytest.mark.parametrize("command", ["render", "apply", "run", "status", "wait", "logs", "delete"])
def test_the_help_of_n_is_one_line_and_its_page_names_every_command_that_uses_it(
    cli: Any, command: str
) -> None:
    rows = [line.split() for line in cli(command, "--help").out.splitlines()]
    assert ["-n,", "--namespace", "NS", "The", "run's", "namespace."] in rows
    page = " ".join((ROOT / "docs" / "commands" / f"{command}.md").read_text().split())
    assert "(apply, run, status, wait, logs, delete: default the context's" in page


# -- render --task ----------------------------------------------------------------------------


def test_render_task_writes_only_that_tasks_documents_of_the_whole_run(cli: Any) -> None:
    whole = cli("tf2-multiworker", "-N", "3", "--nodes", "h1,h2,h3", "-o", "-")
    one = cli("tf2-multiworker", "-N", "3", "--nodes", "h1,h2,h3", "-o", "-", "--task", "worker-1")
    assert one.code == 0, one.err
    assert [d["metadata"]["name"] for d in one.docs] == ["tf2-multiworker-worker-1"]
    assert one.docs == [d for d in whole.docs if d["metadata"]["name"].endswith("-worker-1")]
    env = {e["name"]: e.get("value") for e in _env(one.docs[0])}
    assert len(json.loads(env["TF_CONFIG"])["cluster"]["worker"]) == 3
    assert one.err == (
        "simpletfjob: wrote 1 task to stdout: 1 worker (h2) (of 3; the whole run planned)\n"
    )


def test_render_task_may_be_repeated_and_takes_a_tasks_service(cli: Any) -> None:
    args = ("tf2-multiworker", "-N", "3", "--nodes", "h1,h2,h3", "-o", "-", "--network", "pod")
    result = cli(*args, "--task", "worker-2", "--task", "worker-0")
    assert result.code == 0, result.err
    kinds = [(d["kind"], d["metadata"]["name"]) for d in result.docs]
    assert sorted(kinds) == sorted(
        [(k, f"tf2-multiworker-worker-{i}") for k in ("Job", "Service") for i in (0, 2)]
    )


def test_render_task_of_no_task_is_one_line_naming_the_tasks(cli: Any, tmp_path: Path) -> None:
    out = tmp_path / "out.yaml"
    result = cli(
        "tf2-multiworker", "-N", "3", "--nodes", "h1,h2,h3", "-o", str(out), "--task", "worker-9"
    )
    assert_one_line_error(
        result,
        2,
        r"--task 'worker-9': the run has no such task; its tasks are worker-0, worker-1, worker-2$",
    )
    assert not out.exists()


def _env(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return list(doc["spec"]["template"]["spec"]["containers"][0].get("env") or [])
