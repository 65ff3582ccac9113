"""A task's object read from its role's skeleton (manifest/parsed.py) is exactly what YAML reads
from the task's text, object for object, or is left to that parse: over every example and
every built-in template at a size where roles have skeletons, and over odd templates and values."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from simpletfjob.api.render import plan_for
from simpletfjob.errors import SimpleTFJobError
from simpletfjob.options.render import Options
from simpletfjob.plan import Plan
from simpletfjob.yamlload import load, manifest_loader
from tests.conftest import EXAMPLES

LOADER = manifest_loader()
CASES = sorted(p.parent for p in EXAMPLES.glob("*/args"))
# Their framework writes each task's environment as YAML lines (<<JAX_ENV>>): parsed as text.
LINES_OF_THEIR_OWN = {"jax-multiprocess", "pytorch-ddp"}


def read_back(planned: Plan) -> int:
    """Check every document's object against the parse of its text; how many were read fast."""
    fast = 0
    for document in planned.documents:
        read, body = document.body(LOADER)
        if read:
            fast += 1
            text = load(document.text, LOADER)
            # repr too: True == 1 and 1 == 1.0 in Python, not in what is sent
            assert body == text and repr(body) == repr(text), document.id
            assert body is not document.body(LOADER)[1]  # each task its own object
    return fast


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_example_reads_back_as_its_text_parses(
    cli: Any, case: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    # The example's own command line, on 12 hosts, so that each role has a skeleton.
    here = tmp_path / "examples" / case.name
    shutil.copytree(case, here)
    hosts = "".join(f"gpu-{i:02d}\n" for i in range(12))
    for where in (here / "hosts", tmp_path / "examples" / "hosts"):
        where.write_text(hosts)
    shutil.copy(EXAMPLES / "mnist.yaml", tmp_path / "examples")
    (tmp_path / "examples" / "exc").write_text("gpu-03\n")
    args = shlex.split((case / "args").read_text())
    for flag in ("-N",):
        if flag in args:
            at = args.index(flag)
            del args[at : at + 2]
    made: list[Plan] = []

    def keep(options: Options, only: Any = ()) -> None:
        from simpletfjob.plan import plan

        made.append(plan(options))

    monkeypatch.setattr("simpletfjob.cli.render.write_run", keep)
    result = cli(*args, cwd=here)
    assert result.code == 0, result.err
    (planned,) = made
    fast = read_back(planned)
    many = {t.role for t in planned.tasks if sum(u.role == t.role for u in planned.tasks) >= 4}
    if many:
        assert fast or case.name in LINES_OF_THEIR_OWN, "no task was read from its skeleton"


def test_a_large_run_is_read_from_its_skeletons() -> None:
    planned = plan_for(
        Options, EXAMPLES / "mnist.yaml", nodes=[f"node-{i:04d}" for i in range(300)], num=-1,
        values=None, options={"namespace": "ns"}, caller="test",
    )  # fmt: skip
    assert read_back(planned) == 299  # the one ps is a role of one task, parsed


# Host names that read as something else than a string where YAML reads them plain.
ODD_HOSTS = ["123", "0x1f", "1.5", "true", "on", "null", "1e3", "007", "10.0.0.1",
             "2001-12-14", "y", "no", "0o17", "1-2", "a.b"]  # fmt: skip
# Where a task's values and the placed value stand: every scalar style.
LINES = [
    "  a: <<node>>",
    "  b: '<<node>>'",
    '  c: "x-<<node>>:<<port>>"',
    "  d: <<port>>",
    "  e: x <<index>> y",
    "  f: |\n    <<node>>\n    two <<index>>",
    "  g: >-\n    <<node>>\n    <<port>>",
    "  h: [<<node>>, '<<index>>', <<port>>]",
    "  i: {k: <<node>>}",
    "  j: '<<TF_CONFIG>>'",
    '  k: "pre <<TF_CONFIG>> post"',
    "  l: >\n<<TF_CONFIG>>",
    "  m: |\n<<TF_CONFIG>>",
    "  n: |+\n<<TF_CONFIG>>\n\n",
    "  o: >2-\n<<TF_CONFIG>>",
    "  p: x<<TF_CONFIG>>",
    "  q: <<TF_CONFIG>>",
    "  r: '<<v>>'",
    '  s: "<<v>>"',
    "  t: <<v>>",
    "  u: |\n    <<v>>",
    "  # <<TF_CONFIG>> in a comment",
]
VALUES = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["a'b", 'a"b', "a: b", "a #b", "x\ny", "héllo", "123", "0x1f", "", "-", "~"]),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(st.sampled_from(LINES), min_size=1, max_size=5, unique=True),
    hosts=st.lists(st.sampled_from(ODD_HOSTS), min_size=5, max_size=8, unique=True),
    value=VALUES,
)
def test_odd_templates_and_values_read_back_as_their_text_parses(
    tmp_path: Path, lines: list[str], hosts: list[str], value: str
) -> None:
    body = "\n".join(lines)
    template = tmp_path / "odd.yaml"
    template.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: odd-<<type>>-<<index>>\n"
        f"spec:\n  template:\n    spec:\n      nodeName: <<node>>\nodd:\n{body}\n"
    )
    try:
        planned = plan_for(
            Options, template, nodes=hosts, num=-1, values={"v": value},
            options={"namespace": "ns"}, caller="test",
        )  # fmt: skip
    except SimpleTFJobError:
        assume(False)  # a template or a value the render refuses: nothing to read back
    read_back(planned)


def _planned(tmp_path: Path, odd: str) -> Plan:
    template = tmp_path / "odd.yaml"
    template.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: odd-<<type>>-<<index>>\n"
        f"spec:\n  template:\n    spec:\n      nodeName: <<node>>\nodd:\n{odd}\n"
    )
    return plan_for(
        Options, template, nodes=[f"h{i}" for i in range(5)], num=-1, values={},
        options={"namespace": "ns"}, caller="test",
    )  # fmt: skip


def test_a_deeply_nested_template_is_left_to_the_parse() -> None:
    """Each task's copy of its skeleton's object recurses once a level: past DEEPEST levels the
    text is parsed (as it is, without recursion, in libyaml), never a RecursionError."""
    import tempfile

    from simpletfjob.manifest.parsed import DEEPEST

    with tempfile.TemporaryDirectory() as directory:
        for depth in (DEEPEST // 2, DEEPEST + 1, 900):
            deep = "[" * depth + "x" + "]" * depth
            planned = _planned(Path(directory), f"  a: <<node>>\n  deep: {deep}")
            fast = read_back(planned)
            assert (fast > 0) == (depth < DEEPEST), depth


def test_a_skeleton_is_read_again_for_another_loader(tmp_path: Path) -> None:
    import yaml

    planned = _planned(tmp_path, "  a: <<node>>\n  when: 2001-12-14")
    document = planned.documents[-1]
    read, body = document.body(yaml.CSafeLoader)  # a timestamp: a date
    assert read and str(type(body["odd"]["when"])) == "<class 'datetime.date'>"
    read, body = document.body(LOADER)  # the manifests' loader reads it as a string
    assert read and body["odd"]["when"] == "2001-12-14"
    assert body == load(document.text, LOADER)
