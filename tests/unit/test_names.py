"""The run's name: one name for the run (its simpletfjob/job label) and its objects' names.

As a helm release names its chart's objects, --name names a built-in's Jobs; a template
that spells its names out keeps them; `--set name=` still names the objects, and the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_one_line_error, write
from tests.support.templates import READS_NAME

NODES = ("--nodes", "a,b", "-o", "-")
BUILTINS = [
    "jax-multiprocess",
    "pod-network",
    "pytorch-ddp",
    "tf1-flags",
    "tf1-ps-hostnetwork",
    "tf2-multiworker",
    "tf2-parameter-server",
]


def names(result: Any) -> list[tuple[str, str]]:
    """(object name, run label) of each document."""
    assert result.code == 0, result.err
    return [
        (d["metadata"]["name"], d["metadata"]["labels"]["simpletfjob/job"]) for d in result.docs
    ]


@pytest.mark.parametrize("builtin", BUILTINS)
def test_a_built_in_has_one_name_for_the_run_and_its_objects(
    cli: Any, tmp_path: Path, builtin: str
) -> None:
    plain = names(cli(builtin, "--tasks-per-host", "2", *NODES, cwd=tmp_path))
    assert {label for _, label in plain} == {builtin}
    assert all(name.startswith(f"{builtin}-") for name, _ in plain), plain
    named = names(cli(builtin, "--tasks-per-host", "2", "--name", "sl", *NODES, cwd=tmp_path))
    assert [name for name, _ in named] == [name.replace(builtin, "sl", 1) for name, _ in plain]
    assert {label for _, label in named} == {"sl"}


def test_set_name_still_names_the_objects_and_the_run(cli: Any, tmp_path: Path) -> None:
    result = cli("tf2-multiworker", "--set", "name=resnet", *NODES, cwd=tmp_path)
    assert names(result) == [("resnet-worker-0", "resnet"), ("resnet-worker-1", "resnet")]
    assert result.docs[0]["metadata"]["labels"]["tfjob"] == "resnet"
    values = write(tmp_path / "values.yaml", "name: bert\n")
    result = cli("tf2-multiworker", "-f", str(values), *NODES, cwd=tmp_path)
    assert names(result)[0] == ("bert-worker-0", "bert")
    # Both: the run is --name's, its objects --set's (as a chart's fullnameOverride).
    result = cli("tf2-multiworker", "--name", "run1", "--set", "name=resnet", *NODES, cwd=tmp_path)
    assert names(result)[0] == ("resnet-worker-0", "run1")


def test_a_template_that_spells_its_names_out_keeps_them(cli: Any, tmp_path: Path) -> None:
    write(tmp_path / "own.yaml", "kind: Job\nmetadata:\n  name: mnist-<<type>>-<<index>>\n")
    values = write(tmp_path / "values.yaml", "name: shared-by-other-templates\n")
    result = cli("own.yaml", "--name", "sl", *NODES, cwd=tmp_path)
    assert names(result) == [("mnist-ps-0", "sl"), ("mnist-worker-0", "sl")]
    # A values file's `name` that the template never reads names nothing.
    result = cli("own.yaml", "-f", str(values), *NODES, cwd=tmp_path)
    assert names(result) == [("mnist-ps-0", "own"), ("mnist-worker-0", "own")]


def test_a_template_that_reads_name_gets_the_runs_name(cli: Any, tmp_path: Path) -> None:
    write(tmp_path / "job.yaml", READS_NAME)
    # The header's default, as before, when nothing names the run.
    assert names(cli("job.yaml", *NODES, cwd=tmp_path))[0] == ("base-ps-0", "job")
    # --name wins over the header's default.
    assert names(cli("job.yaml", "--name", "sl", *NODES, cwd=tmp_path))[0] == ("sl-ps-0", "sl")
    # No default at all: the run's name, once an undefined name.
    write(tmp_path / "bare.yaml", READS_NAME.replace("#     name: base\n", "#     image: x\n"))
    assert names(cli("bare.yaml", *NODES, cwd=tmp_path))[0] == ("bare-ps-0", "bare")
    plain = cli("bare.yaml", "--no-labels", *NODES, cwd=tmp_path)
    assert plain.code == 0, plain.err
    assert plain.docs[0]["metadata"] == {"name": "bare-ps-0"}


def test_a_name_value_that_cannot_be_a_label_says_to_use_name(cli: Any, tmp_path: Path) -> None:
    result = cli("tf2-multiworker", "--set", "name=Not_A_Label_", *NODES, cwd=tmp_path)
    assert_one_line_error(result, 1, r"the value name 'Not_A_Label_' is not a valid label value")
    assert result.err.rstrip().endswith("; use --name")
