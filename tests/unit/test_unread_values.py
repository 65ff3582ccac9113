"""A --set that the template never reads is a usage error offering the closest value it reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_one_line_error, write
from tests.support.templates import READS_VALUES as BODY

HEADER = """\
# A template with a header.
#
# simpletfjob:
#   values:
#     gpus: 1
#     image: busybox
"""


VALUES = """\
train: {lr: 0.1, momentum: 0.9}
extra_env: {}
table: {small: {size: 1}}
pick: small
shared_with_another_template: 7
"""

NODES = ("--nodes", "a,b", "-o", "-")


@pytest.fixture
def template(tmp_path: Path) -> Path:
    write(tmp_path / "values.yaml", VALUES)
    return write(tmp_path / "t.yaml", HEADER + BODY)


def render(cli: Any, template: Path, *sets: str) -> Any:
    args = [a for item in sets for a in ("--set", item)]
    return cli(str(template), "-f", "values.yaml", *args, *NODES, cwd=template.parent)


def env_of(doc: dict[str, Any]) -> dict[str, str]:
    container = doc["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e["value"] for e in container["env"]}


def test_a_set_name_the_template_never_reads_offers_the_closest_it_reads(
    cli: Any, template: Path
) -> None:
    result = render(cli, template, "gpu=2")
    assert_one_line_error(result, 2)
    assert result.err == (
        "simpletfjob: error: --set gpu=2: the template reads no value 'gpu'; did you mean 'gpus'?\n"
    )
    # The name it reads renders as given; a -f key no template reads is no error.
    done = render(cli, template, "gpus=2")
    assert done.code == 0, done.err
    limits = done.docs[0]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": 2}


@pytest.mark.parametrize(
    ("item", "said"),
    [
        # A name inside a value the template reads only by the names it spells.
        ("train.lrr=0.2", "the template reads no value 'train.lrr'; did you mean 'train.lr'?"),
        ("train.beta=0.2", "the template reads no value 'train.beta'; it reads: train.lr, "),
        # Far from every name: the names it reads (the task variables are not offered).
        # (never a loop's own variable: key, value)
        (
            "zzz=1",
            "the template reads no value 'zzz'; it reads: debug, extra_env, gpus, image, pick, "
            "steps, table, train\n",
        ),
        # The name of an option, not a value.
        ("psn=2", "the template reads no value 'psn'; did you mean the option --psn?"),
    ],
)
def test_unread_set_names(cli: Any, template: Path, item: str, said: str) -> None:
    result = render(cli, template, item)
    assert_one_line_error(result, 2)
    assert result.err.startswith(f"simpletfjob: error: --set {item}: {said}"), result.err


@pytest.mark.parametrize(
    "item",
    [
        "debug=true",  # asked about with `is defined`
        "steps=5",  # read with default(...)
        "train.lr=0.5",  # read by the path it spells
        "train.momentum=0.5",  # read as train['momentum']
        "train.lr.x=1",  # inside what it reads (the render decides what becomes of it)
        "extra_env.FOO=bar",  # read whole, by a loop over its items
        "table.big.size=3",  # read by a key the template computes: anything may be read
    ],
)
def test_names_the_template_may_read_are_taken(cli: Any, template: Path, item: str) -> None:
    result = render(cli, template, item)
    if item == "train.lr.x=1":
        # Read: the --set check lets it through, and the value renders as the mapping it is.
        assert "reads no value" not in result.err
        return
    assert result.code == 0, result.err
    env = env_of(result.docs[0])
    if item == "extra_env.FOO=bar":
        assert env["FOO"] == "bar"
    if item == "steps=5":
        assert env["STEPS"] == "5"


def test_a_built_in_template_refuses_a_value_it_does_not_take(cli: Any, tmp_path: Path) -> None:
    """tf1-ps-hostnetwork has no /dev/shm: --set shm=2Gi would be silently ignored."""
    result = cli("tf1-ps-hostnetwork", "--set", "shm=2Gi", *NODES, cwd=tmp_path)
    line = assert_one_line_error(result, 2)
    assert line.startswith("simpletfjob: error: --set shm=2Gi: the template reads no value 'shm'")
    result = cli("tf2-parameter-server", "--set", "gpus=2", *NODES, cwd=tmp_path)
    assert assert_one_line_error(result, 2).endswith("did you mean 'worker_gpus'?")
    assert not list(tmp_path.iterdir())  # nothing written


def test_a_template_that_reads_no_value_says_so(cli: Any, tmp_path: Path) -> None:
    write(tmp_path / "t.yaml", "kind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\n")
    result = cli("t.yaml", "--set", "image=x", *NODES, cwd=tmp_path)
    assert assert_one_line_error(result, 2).endswith(
        "--set image=x: the template reads no value 'image'; it reads no value that --set can give"
    )
