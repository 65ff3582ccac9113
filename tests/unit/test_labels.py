"""Labels: on every Job and its pod template, merged with the template's own, text otherwise unchanged."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import EXAMPLES, write
from tests.support.templates import COMMENTED_LABELS as TEMPLATE

OURS = ("app.kubernetes.io/managed-by", "simpletfjob/job", "simpletfjob/role", "simpletfjob/index")
POLICY = "simpletfjob/success-policy"


def labels_of(doc: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    pod = doc["spec"]["template"].get("metadata", {}).get("labels", {})
    return doc["metadata"].get("labels", {}), pod


def is_subsequence(short: list[str], long: list[str]) -> bool:
    it = iter(long)
    return all(line in it for line in short)


def test_every_job_and_pod_template_is_labelled(cli: Any) -> None:
    result = cli("mnist.yaml", "--nodes-file", "hosts", "-N", "3", "-o", "-", cwd=EXAMPLES)
    assert result.code == 0, result.err
    for doc, (role, index) in zip(
        result.docs, [("ps", "0"), ("worker", "0"), ("worker", "1")], strict=True
    ):
        want = {
            "app.kubernetes.io/managed-by": "simpletfjob",
            "simpletfjob/job": "mnist",
            "simpletfjob/role": role,
            "simpletfjob/index": index,
        }
        assert labels_of(doc) == (want, want)


def test_labels_only_add_lines(cli: Any) -> None:
    args = ("mnist.yaml", "--nodes-file", "hosts", "-N", "3", "-o", "-")
    plain = cli(*args, "--no-labels", cwd=EXAMPLES).out.splitlines()
    labelled = cli(*args, cwd=EXAMPLES).out.splitlines()
    assert is_subsequence(plain, labelled)
    extra = list(labelled)
    for line in plain:
        extra.remove(line)
    assert all(
        line.strip() in ("labels:", "annotations:", "metadata:") or "simpletfjob" in line
        for line in extra
    )


def test_every_document_records_the_success_policy_and_its_own_name(
    cli: Any, tmp_path: Path
) -> None:
    """On the object's metadata, not on its pods; with --no-labels, nowhere."""
    args = ("pod-network", "--nodes", "a,b,c", "--chief", "-o", "-")
    for given, policy in (((), "worker0"), (("--success-policy", "all-workers"), "all-workers")):
        result = cli(*args, *given, cwd=tmp_path)
        assert result.code == 0, result.err
        assert [d["kind"] for d in result.docs] == ["Job", "Service"] * 3
        for doc in result.docs:
            assert doc["metadata"]["annotations"] == {
                "simpletfjob/success-policy": policy,
                "simpletfjob/name": doc["metadata"]["name"],
            }
            pod = doc.get("spec", {}).get("template", {}).get("metadata", {})
            assert "simpletfjob/success-policy" not in pod.get("annotations", {})
    plain = cli(*args, "--success-policy", "all-workers", "--no-labels", cwd=tmp_path)
    assert plain.code == 0 and "success-policy" not in plain.out
    assert "simpletfjob/name" not in plain.out


def test_a_success_policy_the_template_sets_wins(cli: Any, tmp_path: Path) -> None:
    template = write(
        tmp_path / "t.yaml",
        TEMPLATE.replace("note: keep me", "simpletfjob/success-policy: all-workers"),
    )
    result = cli(str(template), "--nodes", "a,b", "-o", "-")
    assert result.code == 0, result.err
    assert {d["metadata"]["annotations"]["simpletfjob/success-policy"] for d in result.docs} == {
        "all-workers"
    }
    assert (
        "simpletfjob: warning: the template sets annotation simpletfjob/success-policy="
        "all-workers; keeping it (simpletfjob would set 'worker0')"
    ) in result.err.splitlines()


def test_a_name_annotation_the_template_sets_wins_with_a_warning(cli: Any, tmp_path: Path) -> None:
    template = write(
        tmp_path / "t.yaml", TEMPLATE.replace("note: keep me", "simpletfjob/name: <<type>>")
    )
    result = cli(str(template), "--nodes", "a,b", "-o", "-")
    assert result.code == 0, result.err
    assert [d["metadata"]["annotations"]["simpletfjob/name"] for d in result.docs] == [
        "ps",
        "worker",
    ]
    assert (
        "simpletfjob: warning: the template sets annotation simpletfjob/name=ps; keeping it "
        "(simpletfjob would set 't-ps-0')"
    ) in result.err.splitlines()


def test_an_unknown_success_policy_is_a_usage_error(cli: Any) -> None:
    result = cli("mnist.yaml", "--nodes", "a,b", "--success-policy", "any", "-o", "-", cwd=EXAMPLES)
    assert result.code == 2 and result.out == ""
    assert result.err.startswith(
        "simpletfjob: error: --success-policy must be worker0 or all-workers, not 'any'"
    )


def test_no_labels_means_none(cli: Any) -> None:
    result = cli("mnist.yaml", "--nodes-file", "hosts", "--no-labels", "-o", "-", cwd=EXAMPLES)
    assert "simpletfjob" not in result.out
    assert all(labels_of(d) == ({}, {}) for d in result.docs)


def test_name_option_sets_the_job_label(cli: Any) -> None:
    result = cli("mnist.yaml", "--nodes", "a,b", "--name", "run-7", "-o", "-", cwd=EXAMPLES)
    assert {labels_of(d)[0]["simpletfjob/job"] for d in result.docs} == {"run-7"}


def test_merge_with_template_labels_and_template_wins(cli: Any, tmp_path: Path) -> None:
    template = write(tmp_path / "t.yaml", TEMPLATE)
    result = cli(str(template), "--nodes", "a,b,c", "-o", "-")
    assert result.code == 0, result.err
    job, pod = labels_of(result.docs[1])
    assert job == {
        "team": "ml",
        "simpletfjob/job": "custom",
        "app.kubernetes.io/managed-by": "simpletfjob",
        "simpletfjob/role": "worker",
        "simpletfjob/index": "0",
    }
    assert pod == {
        "app.kubernetes.io/managed-by": "simpletfjob",
        "simpletfjob/job": "t",
        "simpletfjob/role": "worker",
        "simpletfjob/index": "0",
    }
    assert result.docs[1]["spec"]["template"]["metadata"]["annotations"] == {"a": "b"}
    warnings = [line for line in result.err.splitlines() if "warning" in line]
    assert warnings == [
        "simpletfjob: warning: the template sets label simpletfjob/job=custom; "
        "keeping it (simpletfjob would set 't')"
    ]
    plain = cli(str(template), "--nodes", "a,b,c", "--no-labels", "-o", "-").out.splitlines()
    assert is_subsequence(plain, result.out.splitlines())
    assert "    team: ml          # who owns it" in result.out.splitlines()


@pytest.mark.parametrize(
    "metadata",
    [
        "metadata: {name: 't-<<type>>-<<index>>', labels: {app: x}}",
        "metadata: {name: 't-<<type>>-<<index>>', labels: {}}",
        "metadata: {name: 't-<<type>>-<<index>>'}",
        "metadata:\n  labels: {app: x}\n  name: t-<<type>>-<<index>>",
        'metadata:\n  name: "t-<<type>>-<<index>>"\n  labels:\n    app: x',
    ],
)
def test_flow_and_block_styles(cli: Any, tmp_path: Path, metadata: str) -> None:
    text = f"kind: Job\n{metadata}\nspec:\n  template:\n    spec: {{}}\n"
    result = cli(str(write(tmp_path / "t.yaml", text)), "--nodes", "a,b", "-o", "-")
    assert result.code == 0, result.err
    job, pod = labels_of(result.docs[0])
    assert {k: job[k] for k in OURS} == {k: pod[k] for k in OURS}
    assert job["simpletfjob/role"] == "ps"
    assert job.get("app", "x") == "x"


def test_a_stem_that_is_no_label_value_asks_for_name(cli: Any, tmp_path: Path) -> None:
    template = write(tmp_path / "my job!.yaml", TEMPLATE)
    result = cli(str(template), "--nodes", "a,b", "-o", "-")
    assert result.code == 1 and result.out == ""
    assert "is not a valid label value" in result.err and "--name" in result.err
    assert cli(str(template), "--nodes", "a,b", "--name", "ok", "-o", "-").code == 0


@pytest.mark.parametrize("name", ["my job!", "-lead", "x" * 64, "tail.", ""])
def test_a_bad_name_is_a_usage_error(cli: Any, tmp_path: Path, name: str) -> None:
    template = write(tmp_path / "t.yaml", TEMPLATE)
    for labels in ([], ["--no-labels"]):
        result = cli(str(template), "--nodes", "a,b", "--name", name, "-o", "-", *labels)
        assert result.code == 2 and result.out == ""
        assert result.err.count("\n") == 1 and "Traceback" not in result.err
        if name:
            assert result.err == (
                f"simpletfjob: error: --name {name!r} is not a valid label value (at most 63 "
                "characters: letters, digits, '-', '_' and '.', starting and ending with a "
                "letter or digit)\n"
            )
        else:
            assert result.err == "simpletfjob: error: --name must not be empty\n"


def test_labels_reach_other_kinds_in_a_multi_document_template(cli: Any, tmp_path: Path) -> None:
    text = (
        "kind: ConfigMap\napiVersion: v1\nmetadata:\n  name: cm-<<type>>-<<index>>\n"
        "data: {k: v}\n---\n"
        "kind: Job\napiVersion: batch/v1\nmetadata:\n  name: j-<<type>>-<<index>>\n"
        "spec:\n  template:\n    spec: {}\n"
    )
    result = cli(str(write(tmp_path / "t.yaml", text)), "--nodes", "a,b", "-o", "-")
    assert result.code == 0, result.err
    kinds = [(d["kind"], d["metadata"]["labels"]["simpletfjob/role"]) for d in result.docs]
    assert kinds == [("ConfigMap", "ps"), ("Job", "ps"), ("ConfigMap", "worker"), ("Job", "worker")]


def assert_refused(result: Any, *patterns: str) -> str:
    """Exit 1, nothing on stdout, exactly one stderr line with no traceback or internal value."""
    assert result.code == 1, result.err
    assert result.out == ""
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    (line,) = lines
    assert line.startswith("simpletfjob: error: ")
    assert "Traceback" not in line and "internal error" not in line
    assert "stub" not in line and "\ue000" not in line and "\\ue000" not in line
    for pattern in patterns:
        assert re.search(pattern, line), (pattern, line)
    return line


JOB_HEAD = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\n"


@pytest.mark.parametrize(
    ("text", "key", "lines", "template_line"),
    [
        (JOB_HEAD + "  labels: {a: b}\n  labels: {c: d}\nspec: {}\n", "labels", (5, 6), 6),
        (JOB_HEAD + "  annotations: {a: b, 'a': c}\nspec: {}\n", "a", (5, 5), 5),
        (
            JOB_HEAD + "spec:\n  template:\n    spec:\n      containers:\n"
            "        - name: a\n          image: i\n          name: b\n",
            "name",
            (9, 11),
            11,
        ),
        (
            JOB_HEAD
            + "spec:\n  backoffLimit: 1\n{% if type == 'ps' %}\n  backoffLimit: 2\n{% endif %}\n",
            "backoffLimit",
            (6, 7),
            8,
        ),
        (JOB_HEAD + "x: &a {k: 1}\ny:\n  <<: *a\n  <<: *a\n", "<<", (7, 8), 8),
    ],
)
def test_a_document_with_a_duplicate_key_is_refused(
    cli: Any, tmp_path: Path, text: str, key: str, lines: tuple[int, int], template_line: int
) -> None:
    template = write(tmp_path / "t.yaml", text)
    for flags in ((), ("--no-labels",)):
        line = assert_refused(
            cli(str(template), "--nodes", "a,b", "-o", "-", *flags),
            rf"document 1 \(ps 0 on a\): mapping key {re.escape(repr(key))} is defined twice, "
            rf"at lines {lines[0]} and {lines[1]}",
        )
        assert line.endswith(f"t.yaml:{template_line})"), line


def nested_aliases(shape: str, levels: int) -> str:
    """`levels` levels of aliases, each naming the one below twice: 2**levels paths."""
    if shape == "lists":
        return (
            "".join(
                f"    x{i}: &x{i} [*x{i - 1}, *x{i - 1}]\n" if i else "    x0: &x0 {k: v}\n"
                for i in range(levels)
            )
            + f"  y: *x{levels - 1}\n"
        )
    return (
        "".join(
            f"    x{i}: &x{i} {{<<: [*x{i - 1}, *x{i - 1}], k{i}: v}}\n"
            if i
            else "    x0: &x0 {k: v}\n"
            for i in range(levels)
        )
        + f"  template:\n    metadata: {{labels: *x{levels - 1}}}\n"
    )


# 8 levels stay under the alias limit (see yamlload.py); 30 levels name 2**30 paths, past it.
@pytest.mark.parametrize("levels", [8, 30])
@pytest.mark.parametrize("labels", [True, False])
@pytest.mark.parametrize("shape", ["lists", "merges"])
def test_checks_and_labels_stay_linear_when_aliases_nest(
    tmp_path: Path, shape: str, labels: bool, levels: int
) -> None:
    """Each node is looked at once, however many paths the aliases give it; past the limit, one line."""
    text = (
        "kind: Job\nmetadata: &m\n  name: t-<<type>>-<<index>>\n  labels: {team: ml}\n"
        "spec:\n  data:\n" + nested_aliases(shape, levels)
    )
    template = write(tmp_path / "t.yaml", text)
    args = [str(template), "--nodes", "a,b", "-o", str(tmp_path / "out.yaml")]
    proc = subprocess.run(
        [sys.executable, "-m", "simpletfjob", *args, *([] if labels else ["--no-labels"])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout == ""
    if levels == 30:
        assert proc.returncode == 1
        assert proc.stderr.count("\n") == 1 and "excessive aliasing" in proc.stderr
        assert not (tmp_path / "out.yaml").exists()
        return
    assert proc.returncode == 0, proc.stderr
    out = (tmp_path / "out.yaml").read_text()
    first = out.split("---\n")[0]
    assert ("simpletfjob/role: ps" in first) == labels


# -- anchors, aliases and merge keys ---------------------------------------------------------


class StrictLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a duplicate key in any mapping, as kubectl does."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        keys = [k.value for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"]
        assert len(keys) == len(set(keys)), f"duplicate key at line {node.start_mark.line + 1}"
        return super().construct_mapping(node, deep)


def strict_docs(text: str) -> list[Any]:
    return list(yaml.load_all(text, Loader=StrictLoader))


def ours(role: str, index: int, job: str = "t") -> dict[str, str]:
    return {
        "app.kubernetes.io/managed-by": "simpletfjob",
        "simpletfjob/job": job,
        "simpletfjob/role": role,
        "simpletfjob/index": str(index),
    }


def without_labels_and_namespace(doc: Any) -> Any:
    """The document as --no-labels gives it: drop our labels, and a namespace we added."""
    doc = json.loads(json.dumps(doc))
    for metadata in (doc.get("metadata"), doc.get("spec", {}).get("template", {}).get("metadata")):
        if not isinstance(metadata, dict):
            continue
        for key, ours in (("labels", OURS), ("annotations", [POLICY, "simpletfjob/name"])):
            found = metadata.get(key, {})
            for name in ours:
                found.pop(name, None)
            if found == {} and key in metadata:
                del metadata[key]
    return doc


POD_SPEC = "    spec:\n      containers: [{name: c, image: i}]\n"
NAME = "  name: t-<<type>>-<<index>>\n"

# name -> (template, the Job's own labels, the pod template's own labels)
ANCHORED: dict[str, tuple[str, dict[str, str], dict[str, str]]] = {
    "metadata-alias": (
        "kind: Job\nmetadata: &m\n" + NAME + "  labels:\n    team: ml\n"
        "spec:\n  template:\n    metadata: *m\n" + POD_SPEC,
        {"team": "ml"},
        {"team": "ml"},
    ),
    "metadata-alias-without-labels": (
        "kind: Job\nmetadata: &m\n" + NAME + "spec:\n  template:\n    metadata: *m\n" + POD_SPEC,
        {},
        {},
    ),
    "metadata-alias-flow": (
        "kind: Job\nmetadata: &m {name: 't-<<type>>-<<index>>', labels: {team: ml}}\n"
        "spec:\n  template:\n    metadata: *m\n" + POD_SPEC,
        {"team": "ml"},
        {"team": "ml"},
    ),
    "labels-alias": (
        "kind: Job\nmetadata:\n" + NAME + "  labels: &l\n    team: ml\n"
        "spec:\n  template:\n    metadata:\n      labels: *l\n" + POD_SPEC,
        {"team": "ml"},
        {"team": "ml"},
    ),
    "merge-block": (
        "kind: Job\nmetadata: &m\n" + NAME + "  labels:\n    team: ml\n"
        "spec:\n  template:\n    metadata:\n      <<: *m\n      annotations: {a: b}\n" + POD_SPEC,
        {"team": "ml"},
        {"team": "ml"},
    ),
    "merge-flow": (
        "kind: Job\nmetadata: &m\n" + NAME + "  labels: {team: ml}\n"
        "spec:\n  template:\n    metadata: {<<: *m, annotations: {a: b}}\n" + POD_SPEC,
        {"team": "ml"},
        {"team": "ml"},
    ),
    "merge-list": (
        "kind: Job\nmetadata: &m\n" + NAME + "  annotations: &a {note: x}\n"
        "  labels: &l {team: ml}\n"
        "spec:\n  template:\n    metadata:\n      <<: [{annotations: *a}, *m]\n"
        "      labels: {<<: [*l, *a], own: 'y'}\n" + POD_SPEC,
        {"team": "ml"},
        {"team": "ml", "note": "x", "own": "y"},
    ),
    "merge-without-labels": (
        "kind: Job\nmetadata: &m\n"
        + NAME
        + "spec:\n  template:\n    metadata:\n      <<: *m\n"
        + POD_SPEC,
        {},
        {},
    ),
    "labels-merged-into-the-pod-template": (
        "kind: Job\nmetadata:\n" + NAME + "  labels: &l {team: ml}\n"
        "spec:\n  template:\n    metadata:\n      labels:\n        <<: *l\n        tier: gpu\n"
        + POD_SPEC,
        {"team": "ml"},
        {"team": "ml", "tier": "gpu"},
    ),
    "labels-shared-with-the-selector": (
        "kind: Job\nmetadata:\n" + NAME + "  labels: &l\n    team: ml\n"
        "spec:\n  manualSelector: true\n  selector:\n    matchLabels: *l\n"
        "  template:\n    metadata:\n      labels: *l\n" + POD_SPEC,
        {"team": "ml"},
        {"team": "ml"},
    ),
    "selector-defines-the-anchor": (
        "kind: Job\nspec:\n  manualSelector: true\n  selector:\n    matchLabels: &l {team: ml}\n"
        "  template:\n    metadata:\n      labels: *l\n"
        + POD_SPEC
        + "metadata:\n"
        + NAME
        + "  labels: *l\n",
        {"team": "ml"},
        {"team": "ml"},
    ),
    "metadata-shared-with-another-field": (
        "kind: Job\nmetadata: &m\n" + NAME + "  labels: {team: ml}\n"
        "spec:\n  template:\n    metadata:\n      <<: *m\n" + POD_SPEC + "  x-copy: *m\n",
        {"team": "ml"},
        {"team": "ml"},
    ),
    "metadata-defined-elsewhere": (
        "kind: Job\nx-meta: &m\n" + NAME + "  labels: {team: ml}\nmetadata: *m\n"
        "spec:\n  template:\n    metadata: *m\n" + POD_SPEC,
        {"team": "ml"},
        {"team": "ml"},
    ),
    "metadata-merged-from-elsewhere": (
        "kind: Job\nx-meta: &m\n" + NAME + "metadata:\n  <<: *m\n  annotations: {a: b}\n"
        "spec:\n  template:\n    metadata: {<<: *m}\n" + POD_SPEC,
        {},
        {},
    ),
    "metadata-alias-with-namespace": (
        "kind: Job\nmetadata: &m\n" + NAME + "  namespace: team\n  labels: {team: ml}\n"
        "spec:\n  template:\n    metadata: *m\n" + POD_SPEC,
        {"team": "ml"},
        {"team": "ml"},
    ),
    "namespace-through-a-merge-key": (
        "kind: Job\nx-common: &c {namespace: team, labels: {team: ml}}\nmetadata:\n"
        "  <<: *c\n" + NAME + "spec:\n  template:\n    metadata: {<<: *c}\n" + POD_SPEC,
        {"team": "ml"},
        {"team": "ml"},
    ),
    "template-label-wins-over-a-merged-one": (
        "kind: Job\nmetadata: &m\n" + NAME + "  labels: {team: ml}\n"
        "spec:\n  template:\n    metadata:\n      <<: *m\n"
        "      labels: {simpletfjob/role: custom}\n" + POD_SPEC,
        {"team": "ml"},
        {"simpletfjob/role": "custom"},
    ),
}


@pytest.mark.parametrize("namespace", [None, "ns"])
@pytest.mark.parametrize("name", sorted(ANCHORED))
def test_labels_through_anchors_aliases_and_merge_keys(
    cli: Any, tmp_path: Path, name: str, namespace: str | None
) -> None:
    text, job_own, pod_own = ANCHORED[name]
    template = write(tmp_path / "t.yaml", text)
    extra = ("--namespace", namespace) if namespace else ()
    result = cli(str(template), "--nodes", "a,b,c", "-o", "-", *extra)
    assert result.code == 0, result.err
    plain = cli(str(template), "--nodes", "a,b,c", "-o", "-", "--no-labels").out
    docs, plain_docs = strict_docs(result.out), strict_docs(plain)
    for doc, before, (role, index) in zip(
        docs, plain_docs, [("ps", 0), ("worker", 0), ("worker", 1)], strict=True
    ):
        job, pod = labels_of(doc)
        assert job == {**ours(role, index), **job_own}
        assert pod == {**ours(role, index), **pod_own}
        assert doc["metadata"]["annotations"][POLICY] == "worker0"
        if "namespace: team" in text:
            assert doc["metadata"]["namespace"] == "team"  # the template's, kept
        elif namespace:
            assert doc["metadata"]["namespace"] == namespace
            doc["metadata"].pop("namespace")
            if doc["spec"]["template"]["metadata"].get("namespace") == namespace:
                # Shared with the Job's metadata: Kubernetes ignores a pod template's namespace.
                doc["spec"]["template"]["metadata"].pop("namespace")
        # Everything else, the selector included, reads as --no-labels gives it.
        assert without_labels_and_namespace(doc) == without_labels_and_namespace(before)
    if "custom" in name:
        assert "label simpletfjob/role=custom; keeping it" in result.err


def test_an_alias_where_labels_do_not_belong_is_written_out(cli: Any, tmp_path: Path) -> None:
    text, _, _ = ANCHORED["labels-shared-with-the-selector"]
    out = cli(str(write(tmp_path / "t.yaml", text)), "--nodes", "a,b", "-o", "-").out
    assert "    matchLabels: {team: ml}\n" in out  # the selector's alias, written out
    assert "      labels: *l\n" in out  # the pod template still shares the Job's labels


def test_a_merged_mapping_that_cannot_be_written_out_is_refused(cli: Any, tmp_path: Path) -> None:
    text = (
        "kind: Job\nmetadata: &m\n" + NAME + "  labels: {team: !!str ml}\n"
        "spec:\n  template:\n    metadata: {<<: *m}\n" + POD_SPEC + "  x-copy: *m\n"
    )
    template = write(tmp_path / "t.yaml", text)
    line = assert_refused(
        cli(str(template), "--nodes", "a,b", "-o", "-"),
        r"document 1 \(ps 0 on a\): cannot add labels to the labels at line 4: .*; use --no-labels",
    )
    assert line.endswith("t.yaml:4)"), line
    assert cli(str(template), "--nodes", "a,b", "--no-labels", "-o", "-").code == 0


def test_pod_network_finds_a_namespace_through_a_merge_key(cli: Any, tmp_path: Path) -> None:
    text, _, _ = ANCHORED["namespace-through-a-merge-key"]
    template = write(tmp_path / "t.yaml", text)
    result = cli(str(template), "--nodes", "a,b", "--network", "pod", "-o", "-")
    assert result.code == 0, result.err
    docs = strict_docs(result.out)
    services = [d for d in docs if d["kind"] == "Service"]
    assert [(s["metadata"]["name"], s["metadata"]["namespace"]) for s in services] == [
        ("t-ps-0", "team"),
        ("t-worker-0", "team"),
    ]
    job = next(d for d in docs if d["kind"] == "Job")
    assert job["metadata"]["namespace"] == "team"
    assert job["metadata"]["labels"] == {**ours("ps", 0), "team": "ml"}
