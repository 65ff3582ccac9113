"""Property tests: any hosts, any role counts, TF_CONFIG at any indentation -> valid YAML that round-trips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from simpletfjob.cli import main
from tests.conftest import load_all

LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
HOST = st.builds(lambda parts: ".".join(parts), st.lists(LABEL, min_size=1, max_size=3))
HOSTS = st.lists(HOST, min_size=1, max_size=12, unique=True)

STYLES = ("folded", "literal", "literal-keep", "single", "double", "plain", "next-line")


def placement(style: str, key_indent: int, own: int) -> str:
    pad = " " * key_indent
    if style in ("folded", "literal", "literal-keep"):
        indicator = {"folded": ">", "literal": "|", "literal-keep": "|+"}[style]
        own_pad = " " * (own if own == 0 else key_indent + own)
        return f"{pad}value: {indicator}\n{own_pad}<<TF_CONFIG>>"
    if style == "next-line":
        return f"{pad}value:\n<<TF_CONFIG>>"
    return {
        "single": f"{pad}value: '<<TF_CONFIG>>'",
        "double": f'{pad}value: "<<TF_CONFIG>>"',
        "plain": f"{pad}value: <<TF_CONFIG>>",
    }[style]


def template(style: str, depth: int, own: int) -> str:
    pad = " " * (2 * depth)
    return (
        "kind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\nspec:\n"
        f"{pad}  env:\n{pad}  - name: TF_CONFIG\n"
        f"{placement(style, 2 * depth + 4, own)}\n"
        f"{pad}  - name: AFTER\n{pad}    value: x\n"
    )


def tf_config(doc: dict[str, Any]) -> Any:
    node: Any = doc["spec"]
    while "env" not in node:
        (node,) = node.values()
    env = {e["name"]: e["value"] for e in node["env"]}
    assert env["AFTER"] == "x"
    return json.loads(env["TF_CONFIG"])


@given(
    hosts=HOSTS,
    psn=st.integers(0, 3),
    chief=st.booleans(),
    evaluator=st.booleans(),
    port=st.integers(1, 65535),
    style=st.sampled_from(STYLES),
    depth=st.integers(0, 6),
    own=st.sampled_from([0, 2, 5]),
    data=st.data(),
)
def test_any_hosts_roles_and_placement_round_trip(
    tmp_path_factory: Any,
    capsys: Any,
    hosts: list[str],
    psn: int,
    chief: bool,
    evaluator: bool,
    port: int,
    style: str,
    depth: int,
    own: int,
    data: st.DataObject,
) -> None:
    directory: Path = tmp_path_factory.mktemp("p")
    path = directory / "t.yaml"
    path.write_text(template(style, depth, own))
    num = data.draw(st.sampled_from([-1, *range(1, len(hosts) + 1)]), label="num")
    args = [
        str(path),
        "--nodes",
        ",".join(hosts),
        "-N",
        str(num),
        "--psn",
        str(psn),
        "--port",
        str(port),
        "-o",
        "-",
    ]
    args += ["--chief"] * chief + ["--evaluator"] * evaluator
    try:
        main(args)
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()

    used = hosts if num == -1 else hosts[:num]
    workers = len(used) - psn - chief - evaluator
    if workers < 1:
        assert code == 1 and out == "" and "no task is left for a worker" in err
        return
    assert code == 0, err
    roles = ["chief"] * chief + ["ps"] * psn + ["worker"] * workers + ["evaluator"] * evaluator
    counters: dict[str, int] = {}
    expected_tasks = []
    for role in roles:
        expected_tasks.append((role, counters.get(role, 0)))
        counters[role] = counters.get(role, 0) + 1
    cluster: dict[str, list[str]] = {}
    for role, host in zip(roles, used, strict=True):
        if role != "evaluator":
            cluster.setdefault(role, []).append(f"{host}:{port}")
    docs = load_all(out)
    assert len(docs) == len(roles)
    for doc, (role, index) in zip(docs, expected_tasks, strict=True):
        assert doc["metadata"]["name"] == f"t-{role}-{index}"
        assert tf_config(doc) == {"cluster": cluster, "task": {"type": role, "index": index}}


METADATA_STYLES = st.sampled_from(["block", "flow"])


@st.composite
def job_layouts(draw: st.DrawFn) -> tuple[str, dict[str, str]]:
    """A Job template whose metadata and pod template come in random shapes and orders."""
    existing = draw(
        st.dictionaries(
            st.from_regex(r"k[a-z]{0,5}(/[a-z]{1,5})?", fullmatch=True),
            st.from_regex(r"v[a-z0-9]{0,7}", fullmatch=True),
            max_size=3,
        )
    )
    entries = ["name: t-<<type>>-<<index>>"]
    if draw(st.booleans()):
        entries.append("annotations: {note: keep}")
    labels_style = draw(st.sampled_from(["none", "block", "flow"]))
    if labels_style == "flow":
        entries.append("labels: {" + ", ".join(f"{k}: {v}" for k, v in existing.items()) + "}")
    elif labels_style == "block" and existing:
        entries.append(
            "labels:\n" + "".join(f"    {k}: {v}  # c\n" for k, v in existing.items()).rstrip("\n")
        )
    else:
        existing = {}
    entries = draw(st.permutations(entries))
    if draw(METADATA_STYLES) == "flow" and labels_style != "block":
        metadata = "metadata: {" + ", ".join(e.replace("\n", " ") for e in entries) + "}\n"
        metadata = metadata.replace("name: t-<<type>>-<<index>>", "name: 't-<<type>>-<<index>>'")
    else:
        metadata = "metadata:\n" + "".join(f"  {e}\n" for e in entries)
    pod_metadata = draw(
        st.sampled_from(["", "    metadata: {}\n", "    metadata:\n      annotations: {a: b}\n"])
    )
    text = (
        "# header comment\napiVersion: batch/v1\nkind: Job\n"
        + metadata
        + "spec:\n  template:\n"
        + pod_metadata
        + "    spec:\n      containers: []\n"
    )
    return text, existing


@given(layout=job_layouts(), hosts=st.integers(2, 4))
def test_labels_merge_into_any_layout(
    tmp_path_factory: Any, capsys: Any, layout: tuple[str, dict[str, str]], hosts: int
) -> None:
    text, existing = layout
    path = tmp_path_factory.mktemp("l") / "job.yaml"
    path.write_text(text)
    names = ",".join(f"h{i}" for i in range(hosts))
    outputs = {}
    for flag in ([], ["--no-labels"]):
        try:
            main([str(path), "--nodes", names, "-o", "-", *flag])
            code = 0
        except SystemExit as e:
            code = int(e.code or 0)
        out, err = capsys.readouterr()
        assert code == 0, (err, text)
        outputs[bool(flag)] = out
    plain = load_all(outputs[True])
    labelled = load_all(outputs[False])
    assert len(plain) == len(labelled) == hosts
    for i, (p, lab) in enumerate(zip(plain, labelled, strict=True)):
        role, index = ("ps", 0) if i == 0 else ("worker", i - 1)
        ours = {
            "app.kubernetes.io/managed-by": "simpletfjob",
            "simpletfjob/job": "job",
            "simpletfjob/role": role,
            "simpletfjob/index": str(index),
        }
        assert lab["metadata"]["labels"] == {**ours, **existing}
        assert lab["spec"]["template"]["metadata"]["labels"] == ours
        annotations = lab["metadata"]["annotations"]
        assert annotations.pop("simpletfjob/success-policy") == "worker0"
        assert annotations.pop("simpletfjob/name") == lab["metadata"]["name"]
        # Apart from the labels and the run's annotations, the documents are the same.
        lab["metadata"].pop("labels")
        p["metadata"].pop("labels", None)
        if not annotations and "annotations" not in p["metadata"]:
            lab["metadata"].pop("annotations")
        pod = lab["spec"]["template"]["metadata"]
        pod.pop("labels")
        if not pod and "metadata" not in p["spec"]["template"]:
            lab["spec"]["template"].pop("metadata")
        assert lab == p
