"""Hostile inputs: YAML alias bombs of every input kind, and YAML nested too deeply.

Every refusal is held to the same standard (`assert_refused`): its exit code, exactly one
line on stderr that starts `simpletfjob: error:` and names the file, no traceback and no
"internal error", nothing on stdout, and every file that was there before byte for byte
as it was. Alias bombs run as separate processes, with a subprocess timeout as their
time bound: unbounded, they take minutes and gigabytes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from simpletfjob import yamlinput
from tests.conftest import EXAMPLES, Result, job_template, write
from tests.kubeapi import make_node

TEMPLATE = job_template("              value: '<<TF_CONFIG>>'")


Snapshot = tuple[Path, dict[Path, bytes]]


def snapshot(directory: Path) -> Snapshot:
    """Every file under a directory, with its bytes."""
    return directory, {p: p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def assert_refused(
    result: Result, code: int, *fragments: str, before: Snapshot | None = None
) -> str:
    """The one standard for a refused input; returns the error line."""
    assert result.code == code, result.err
    assert result.out == ""
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    line = lines[0]
    assert line.startswith("simpletfjob: error: "), line
    assert "internal error" not in line and "Traceback" not in result.err
    for fragment in fragments:
        assert fragment in line, line
    if before is not None:
        assert snapshot(before[0]) == before
    return line


def tool(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 30) -> Result:
    """simpletfjob as a separate process, as a user runs it; the timeout bounds its time."""
    proc = subprocess.run(
        [sys.executable, "-m", "simpletfjob", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


# -- YAML alias bombs ---------------------------------------------------------------------


def laughs(indent: str = "", levels: int = 12) -> str:
    """A "billion laughs": each of `levels` anchors is nine aliases of the one before."""
    lines = [f"{indent}l0: &l0 [" + ", ".join(["lol"] * 9) + "]"]
    lines += [
        f"{indent}l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels)
    ]
    return "\n".join(lines) + "\n"


BOMB_JOB = TEMPLATE.replace(
    "metadata:\n  name: t-<<type>>-<<index>>\n",
    "metadata:\n  name: t-<<type>>-<<index>>\n  annotations:\n" + laughs("    "),
)
# The template line of l10, the largest anchor that is repeated.
BOMB_LINE = BOMB_JOB.splitlines().index("    l10: &l10 [" + ", ".join(["*l9"] * 9) + "]") + 1


def bomb_case(kind: str, tmp_path: Path, home: Path) -> tuple[list[str], dict[str, str], str]:
    """Files for one kind of bomb; returns the arguments, the environment and what the error names."""
    write(tmp_path / "plain.yaml", TEMPLATE)
    hosts = ["--nodes", "a,b"]
    if kind == "template":
        write(tmp_path / "t.yaml", BOMB_JOB)
        return ["t.yaml", *hosts], {}, f"t.yaml: document 1 (ps 0 on a), line {BOMB_LINE} "
    if kind == "template --validate":
        write(tmp_path / "t.yaml", BOMB_JOB)
        return ["t.yaml", *hosts, "--validate"], {}, "t.yaml: document 1 (ps 0 on a)"
    if kind == "template, tolerations read for tainted nodes":
        write(tmp_path / "t.yaml", BOMB_JOB)
        nodes = {"kind": "List", "items": [make_node("a", gpu_taint=True), make_node("b")]}
        write(tmp_path / "nodes.json", json.dumps(nodes))
        return ["t.yaml", "--nodes-file", "nodes.json"], {}, "t.yaml: document 1 (worker 0,"
    if kind == "values file":
        write(tmp_path / "v.yaml", laughs())
        return ["plain.yaml", *hosts, "-f", "v.yaml"], {}, "v.yaml:11: "
    if kind == "values file, merge keys":
        text = "m0: &m0 {a: 1, b: 2}\n" + "".join(
            f"m{i}: &m{i} {{<<: [*m{i - 1}, *m{i - 1}], k{i}: {i}}}\n" for i in range(1, 30)
        )
        write(tmp_path / "v.yaml", text)
        return ["plain.yaml", *hosts, "-f", "v.yaml"], {}, "v.yaml:"
    if kind == "values file, recursive alias":
        write(tmp_path / "v.yaml", "a: &a\n  b: [1, *a]\n")
        return ["plain.yaml", *hosts, "-f", "v.yaml"], {}, "v.yaml:1: recursive alias"
    if kind == "template header":
        header = "# simpletfjob:\n#   values:\n" + "".join(
            f"#     {line}\n" for line in laughs().splitlines()
        )
        write(tmp_path / "t.yaml", header + TEMPLATE)
        return ["t.yaml", *hosts], {}, "t.yaml:13: "
    assert kind == "NodeList in YAML"
    text = "apiVersion: v1\nkind: List\nmetadata:\n" + laughs("  ")
    write(tmp_path / "nodes.yaml", text + "items:\n- metadata: {name: a}\n")
    return ["plain.yaml", "--nodes-file", "nodes.yaml"], {}, "nodes.yaml:14: "


@pytest.mark.parametrize(
    "kind",
    [
        "template",
        "template --validate",
        "template, tolerations read for tainted nodes",
        "values file",
        "values file, merge keys",
        "values file, recursive alias",
        "template header",
        "NodeList in YAML",
    ],
)
def test_alias_bombs_are_refused_at_once(kind: str, tmp_path: Path, kube_env: Path) -> None:
    args, env, names = bomb_case(kind, tmp_path, kube_env)
    before = snapshot(tmp_path)
    result = tool(*args, "-o", "-", cwd=tmp_path, env=env, timeout=30)
    problem = "recursive alias" if "recursive" in kind else "excessive aliasing"
    assert_refused(result, 1, names, problem, before=before)


def test_the_limit_is_go_yamls(tmp_path: Path) -> None:
    """Aliases may add 99% of a document of up to 400,000 nodes: 100x a small one, no more."""

    def document(aliases: int) -> str:
        # Written: the list, the anchored list and its 10 items (12 nodes); each alias adds 11.
        return "- &a [" + ", ".join("x" * 10) + "]\n" + "- *a\n" * aliases

    assert len(yamlinput.load(document(100))) == 101  # 1112 nodes, 1100 from aliases: 98.9%
    with pytest.raises(yamlinput.LimitError, match="from 12 nodes to 2,212"):
        yamlinput.load(document(200))  # 99.5%


def test_aliases_within_the_limit_still_render(cli: Any, tmp_path: Path) -> None:
    write(tmp_path / "t.yaml", TEMPLATE.replace("image: tensorflow/tensorflow", "image: <<image>>"))
    write(tmp_path / "v.yaml", "base: &base tensorflow/tensorflow:2.16\nimage: *base\n")
    result = cli("t.yaml", "--nodes", "a,b", "-f", "v.yaml", "-o", "-", cwd=tmp_path)
    assert result.code == 0, result.err
    containers = [d["spec"]["template"]["spec"]["containers"][0] for d in result.docs]
    assert [c["image"] for c in containers] == ["tensorflow/tensorflow:2.16"] * 2


@pytest.mark.parametrize(
    "text",
    [
        "a: &a [x, y]\nb: [*a, *a]\n",  # flow
        "a: &a [x, y]\nb:\n  - *a\n  - *a\n",  # block sequence
        "a: &a [x, y]\nb: {p: *a, q: *a}\n",  # flow mapping values
        "a: &a {x: 1}\nb:\n  <<: *a\n",  # merge key
        "a: &a [x]\n? *a\n: 1\n",  # a complex key
        "a: &a [x]\nb:\n  *a\n",  # on a line of its own
    ],
)
def test_every_alias_form_is_seen(text: str) -> None:
    assert yamlinput.may_alias(text)
    node = yaml.compose(text, Loader=yamlinput.loader_class())
    yamlinput.check_aliases(node)  # small: allowed


def test_deep_nesting_is_refused_not_a_crash(cli: Any, tmp_path: Path) -> None:
    deep = "[" * 990 + "]" * 990
    text = (EXAMPLES / "mnist.yaml").read_text()
    write(
        tmp_path / "t.yaml",
        text.replace("metadata:\n", f"metadata:\n  annotations:\n    x: {deep}\n", 1),
    )
    before = snapshot(tmp_path)
    result = cli("t.yaml", "--nodes", "a,b", "--validate", "-o", "-", cwd=tmp_path)
    assert_refused(result, 1, "document 1 (Job 'mnist-ps-0'): nested too deeply", before=before)
    write(tmp_path / "v.yaml", "x: " + "[" * 1001 + "]" * 1001 + "\n")
    result = cli("t.yaml", "--nodes", "a,b", "-f", "v.yaml", "-o", "-", cwd=tmp_path)
    assert_refused(result, 1, "v.yaml:1: not valid YAML")
