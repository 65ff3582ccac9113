"""A role rendered once as a skeleton, each task's values written in: the same bytes as each task's own render."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simpletfjob.cli import main
from simpletfjob.manifest import skeleton
from simpletfjob.template.compiled import CompiledTemplate
from tests.conftest import EXAMPLES, load_all
from tests.support.templates import SKELETON_SMALL as SMALL

MNIST = EXAMPLES / "mnist" / "mnist.yaml"


def run(args: list[str], capsys: Any, fast: bool) -> tuple[int, str, str]:
    """The command in-process, with every role of two tasks or more as a skeleton, or none."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(skeleton, "MIN_TASKS", 2 if fast else 10**9)
        try:
            main(args)
            code = 0
        except SystemExit as e:
            code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def renders() -> Iterator[list[int]]:
    """How many times the template is rendered (once per call of its render)."""
    calls: list[int] = []
    original = CompiledTemplate.render

    def counted(self: CompiledTemplate, context: Any) -> str:
        calls.append(1)
        return original(self, context)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CompiledTemplate, "render", counted)
        yield calls


def hosts(n: int) -> str:
    return ",".join(f"ip-10-0-{i}-{i % 7}.us-west-2.compute.internal" for i in range(n))


def test_a_role_of_many_tasks_is_rendered_once(renders: list[int], capsys: Any) -> None:
    code, out, err = run([str(MNIST), "--nodes", hosts(60), "-o", "-"], capsys, fast=True)
    assert code == 0, err
    docs = load_all(out)
    assert [d["metadata"]["name"] for d in docs] == ["mnist-ps-0"] + [
        f"mnist-worker-{i}" for i in range(59)
    ]
    assert (
        docs[7]["spec"]["template"]["spec"]["nodeName"] == "ip-10-0-7-0.us-west-2.compute.internal"
    )
    assert docs[7]["metadata"]["labels"]["simpletfjob/index"] == "6"
    # The ps's own render and the placeholder renders that read each role's needs, and
    # the workers' skeleton (rendered to check where its tokens stand, then as a task's).
    assert len(renders) <= 8, len(renders)


def test_a_value_the_template_transforms_renders_each_task(
    renders: list[int], capsys: Any, tmp_path: Path
) -> None:
    template = tmp_path / "t.yaml"
    template.write_text(
        MNIST.read_text().replace("mnist-<<type>>-<<index>>", "m-<<type>>-<<index + 1>>")
    )
    code, out, err = run([str(template), "--nodes", hosts(30), "-o", "-"], capsys, fast=True)
    assert code == 0, err
    assert load_all(out)[-1]["metadata"]["name"] == "m-worker-29"
    assert len(renders) >= 30


def test_the_examples_render_the_same_bytes_either_way(capsys: Any) -> None:
    for template in sorted(EXAMPLES.glob("*/*.yaml")):
        if template.name == "expected.yaml":
            continue
        args = [str(template), "--nodes", hosts(9), "--psn", "2", "-o", "-"]
        assert run(args, capsys, fast=True) == run(args, capsys, fast=False), template


def test_the_built_in_templates_render_the_same_bytes_either_way(capsys: Any) -> None:
    from simpletfjob.template.catalog import builtin_names

    for name in builtin_names():
        for extra in ([], ["--tasks-per-host", "2", "--network", "pod"]):
            args = [name, "--nodes", hosts(7), *extra, "-o", "-"]
            fast = run(args, capsys, fast=True)
            assert fast[0] == 0, fast[2]
            assert fast == run(args, capsys, fast=False), (name, extra)


# Expressions of the task's values, bare (a skeleton) or transformed (each task rendered).
EXPRESSIONS = [
    "<<index>>",
    "<<host>>",
    "<<node>>",
    "<<port>>",
    "<<type>>",
    "<<num_tasks>>",
    "<<index | string>>",
    "<<host | upper>>",
    "<<'%03d' % index>>",
    "<<index * 2>>",
    "{% if index is even %}even{% else %}odd{% endif %}",
    "{% for i in range(index % 3) %}r{% endfor %}",
    "{% if index > 1 %}<<host>>{% endif %}",
]
# Where a value stands: plain, quoted, or in a flow list.
STYLES = ["{}", "x-{}", "'{}'", '"{}-y"', "{}.z"]


ODD_HOSTS = "123,true,1e3,a.b,node-4,null,007"


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_each_use_of_a_value_renders_the_same_bytes(
    expression: str, capsys: Any, tmp_path: Path
) -> None:
    template = tmp_path / "t.yaml"
    template.write_text(
        SMALL.format(label=f"x-{expression}-z", flow=f"'{expression}'", value=f'"{expression}"')
    )
    args = [str(template), "--nodes", ODD_HOSTS, "--tasks-per-host", "2", "-o", "-"]
    fast = run(args, capsys, fast=True)
    assert fast[0] == 0, fast[2]
    assert fast == run(args, capsys, fast=False)


def test_a_key_that_a_value_makes_twice_is_refused_either_way(capsys: Any, tmp_path: Path) -> None:
    template = tmp_path / "t.yaml"
    template.write_text(
        SMALL.format(label="a", flow="", value="b").replace(
            "    v: a\n", "    k<<index>>: a\n    k1: b\n"
        )
    )
    args = [str(template), "--nodes", ODD_HOSTS, "-o", "-"]
    fast = run(args, capsys, fast=True)
    assert fast[0] == 1 and fast[1] == ""
    assert "mapping key 'k1' is defined twice" in fast[2]
    assert fast == run(args, capsys, fast=False)


def test_a_label_the_template_sets_itself_warns_either_way(capsys: Any, tmp_path: Path) -> None:
    template = tmp_path / "t.yaml"
    template.write_text(
        SMALL.format(label="a", flow="", value="b").replace(
            "    v: a\n", "    v: a\n    simpletfjob/index: mine\n"
        )
    )
    args = [str(template), "--nodes", ODD_HOSTS, "--psn", "0", "-o", "-"]
    fast = run(args, capsys, fast=True)
    assert fast[0] == 0 and "sets label simpletfjob/index=mine" in fast[2]
    assert fast == run(args, capsys, fast=False)


def test_labels_shared_through_an_anchor_are_written_out_either_way(
    capsys: Any, tmp_path: Path
) -> None:
    template = tmp_path / "t.yaml"
    template.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: s-<<type>>-<<index>>\n"
        "  labels: &l {app: x, h: <<node>>}\nspec:\n  template:\n    spec:\n"
        "      nodeSelector: *l\n      containers: [{name: m, image: b}]\n"
        "      restartPolicy: Never\n"
    )
    args = [str(template), "--nodes", ODD_HOSTS, "-o", "-"]
    fast = run(args, capsys, fast=True)
    assert fast[0] == 0, fast[2]
    selectors = [d["spec"]["template"]["spec"]["nodeSelector"] for d in load_all(fast[1])]
    assert selectors[2] == {"app": "x", "h": "1e3"}
    assert fast == run(args, capsys, fast=False)


@st.composite
def uses(draw: st.DrawFn, bare: bool) -> str:
    expression = draw(st.sampled_from(EXPRESSIONS[:6] if bare else EXPRESSIONS))
    return draw(st.sampled_from(STYLES)).format(expression)


@st.composite
def templates(draw: st.DrawFn) -> str:
    name = draw(
        st.sampled_from(
            [
                "t-<<type>>-<<index>>",
                "t-<<type>>-<<index | string>>",
                "<<type>>-<<index>>",
                "t<<index>>-<<type>>",
                "t-<<type>>-<<host>>",
                "'t-<<type>>-<<index>>'",
                '"<<node>>-<<index>>"',
                "<<index>>-<<type>>",
            ]
        )
    )
    bare = draw(st.booleans())  # only bare values (a skeleton), or transformed ones too
    labels = draw(st.lists(uses(bare), max_size=3))
    annotations = draw(st.lists(uses(bare), max_size=2))
    args = draw(st.lists(uses(bare), max_size=3))
    env = draw(st.lists(uses(bare), max_size=3))
    own_index_label = draw(st.booleans())
    block = draw(st.sampled_from(["", "|", ">"]))
    lines = [
        "apiVersion: batch/v1",
        "kind: Job",
        "metadata:",
        f"  name: {name}",
        "  labels:",
        "    app: demo",
        *[f"    l{i}: {u}" for i, u in enumerate(labels)],
        *(["    simpletfjob/index: '<<index>>'"] if own_index_label else []),
        "  annotations:",
        "    a: b",
        *[f"    a{i}: {u}" for i, u in enumerate(annotations)],
        "spec:",
        "  template:",
        "    spec:",
        "      nodeName: <<node>>",
        "      containers:",
        "        - name: main",
        "          image: busybox",
        f"          args: [{', '.join(args)}]",
        "          env:",
        *[f"            - name: E{i}\n              value: {u}" for i, u in enumerate(env)],
        "            - name: TF_CONFIG",
        "              value: '<<TF_CONFIG>>'",
        "          ports:",
        "            - containerPort: <<port>>",
        "      restartPolicy: Never",
    ]
    if block:
        lines += ["  # a block scalar after the pod", f"  note: {block}", "    <<host>> <<index>>"]
    return "\n".join(lines) + "\n"


LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
HOST = st.builds(".".join, st.lists(LABEL, min_size=1, max_size=3)) | st.sampled_from(
    ["123", "1e3", "true", "null", "0x1f", "a.b.c", "007"]
)


@settings(max_examples=60, deadline=None)
@given(
    template=templates(),
    hosts=st.lists(HOST, min_size=1, max_size=9, unique=True),
    psn=st.integers(0, 2),
    tasks_per_host=st.sampled_from([1, 1, 3]),
    labels=st.booleans(),
)
def test_a_skeleton_gives_each_task_the_bytes_of_its_own_render(
    capsys: Any,
    tmp_path_factory: Any,
    template: str,
    hosts: list[str],
    psn: int,
    tasks_per_host: int,
    labels: bool,
) -> None:
    path: Path = tmp_path_factory.mktemp("s") / "t.yaml"
    path.write_text(template)
    args = [str(path), "--nodes", ",".join(hosts), "--psn", str(psn), "-o", "-"]
    args += ["--tasks-per-host", str(tasks_per_host)] + ["--no-labels"] * (not labels)
    assert run(args, capsys, fast=True) == run(args, capsys, fast=False)
