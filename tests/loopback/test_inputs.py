"""Hostile and malformed inputs: YAML alias bombs of every kind, malformed NodeLists and
kubeconfigs, credential plugins that fail, and values that take what simpletfjob reserves.

Every refusal is held to the same standard (`assert_refused`): its exit code, exactly one
line on stderr that starts `simpletfjob: error:` and names the file and the field, no
traceback and no "internal error", nothing on stdout, and every file that was there
before byte for byte as it was. Alias bombs and credential plugins run as separate
processes: the bombs with a subprocess timeout as their time bound (unbounded, they
take minutes and gigabytes), the plugins so that nothing the kubernetes client logs
is caught by pytest's own logging before it could reach stderr.
"""

from __future__ import annotations

import copy
import json
import os
import re
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from simpletfjob import yamlload
from simpletfjob.hosts.nodes import without_images
from tests.conftest import (
    EXAMPLES,
    Result,
    assert_one_line_error,
    console_script,
    job_template,
    load_all,
    snapshot,
    write,
)
from tests.support import forkserver
from tests.support.kubeapi import KubeAPI, make_node, write_kubeconfig

TOKEN = "sha256~plugin-token"
TEMPLATE = job_template("              value: '<<TF_CONFIG>>'")


Snapshot = tuple[Path, dict[str, bytes | str]]


def before_run(directory: Path) -> Snapshot:
    """Every file under a directory, to compare with after a refused run."""
    return directory, snapshot(directory)


def assert_refused(
    result: Result, code: int, *fragments: str, before: Snapshot | None = None
) -> str:
    """The one standard for a refused input, and every file as it was; returns the error line."""
    line = assert_one_line_error(result, code, contains=fragments)
    if before is not None:
        assert snapshot(before[0]) == before[1]
    return line


def tool(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 30) -> Result:
    """simpletfjob as a separate process, as a user runs it; the timeout bounds its time."""
    proc = forkserver.run(
        [console_script(), *args],
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
    kubeconfig_bomb = "apiVersion: v1\nkind: Config\npreferences:\n" + laughs("  ")
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
        return (
            ["t.yaml", "--nodes-file", "nodes.json"],
            {},
            "t.yaml: document 1 (ps 0, placeholder render)",
        )
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
    if kind == "NodeList in YAML":
        text = "apiVersion: v1\nkind: List\nmetadata:\n" + laughs("  ")
        write(tmp_path / "nodes.yaml", text + "items:\n- metadata: {name: a}\n")
        return ["plain.yaml", "--nodes-file", "nodes.yaml"], {}, "nodes.yaml:14: "
    if kind == "--kubeconfig":
        write(tmp_path / "kc", kubeconfig_bomb)
        return ["plain.yaml", "--kubeconfig", "kc"], {}, "kubeconfig kc:14: "
    if kind == "$KUBECONFIG":
        write(tmp_path / "kc", kubeconfig_bomb)
        return ["plain.yaml"], {"KUBECONFIG": str(tmp_path / "kc")}, f"{tmp_path / 'kc'}:14: "
    assert kind == "~/.kube/config"
    write(home / ".kube" / "config", kubeconfig_bomb)
    return ["plain.yaml"], {}, f"{home / '.kube' / 'config'}:14: "


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
        "--kubeconfig",
        "$KUBECONFIG",
        "~/.kube/config",
    ],
)
def test_alias_bombs_are_refused_at_once(kind: str, tmp_path: Path, kube_env: Path) -> None:
    args, env, names = bomb_case(kind, tmp_path, kube_env)
    before = before_run(tmp_path)
    result = tool(*args, "-o", "-", cwd=tmp_path, env=env, timeout=30)
    problem = "recursive alias" if "recursive" in kind else "excessive aliasing"
    assert_refused(result, 1, names, problem, before=before)


def test_the_limit_is_go_yamls(tmp_path: Path) -> None:
    """Aliases may add 99% of a document of up to 400,000 nodes: 100x a small one, no more."""

    def document(aliases: int) -> str:
        # Written: the list, the anchored list and its 10 items (12 nodes); each alias adds 11.
        return "- &a [" + ", ".join("x" * 10) + "]\n" + "- *a\n" * aliases

    assert len(yamlload.load(document(100))) == 101  # 1112 nodes, 1100 from aliases: 98.9%
    with pytest.raises(yamlload.LimitError, match="from 12 nodes to 2,212"):
        yamlload.load(document(200))  # 99.5%


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
    assert yamlload.may_alias(text)
    node = yaml.compose(text, Loader=yamlload.loader_class())
    yamlload.check_aliases(node)  # small: allowed


# -- saved NodeLists: JSON read as JSON, every field checked ------------------------------


def saved_list(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    items = [{"apiVersion": "v1", "kind": "Node", **n} for n in nodes]
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {}}


def two_nodes() -> list[dict[str, Any]]:
    return [make_node("a", images=2), make_node("b", images=2, gpu_taint=True)]


def changed(path: str, value: Any) -> Callable[[list[dict[str, Any]]], None]:
    """Set one field of node b ('.'-separated, list indexes as numbers); None deletes it."""

    def change(nodes: list[dict[str, Any]]) -> None:
        *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        target: Any = nodes[1]
        for part in parents:
            target = target[part]
        if value is None:
            del target[last]
        else:
            target[last] = value

    return change


MALFORMED_NODES = [
    ("metadata.labels", ["pool=a"], "metadata.labels must be a mapping, not a list"),
    ("metadata.labels", "pool=a", "metadata.labels must be a mapping, not the string 'pool=a'"),
    ("metadata.labels.pool", 4, "metadata.labels['pool'] must be a string, not the integer 4"),
    ("metadata", "b", "items[1]: metadata must be a mapping, not the string 'b'"),
    ("metadata", None, "items[1]: metadata is missing"),
    ("metadata.name", 5, "items[1]: metadata.name must be a non-empty string, not the integer 5"),
    ("metadata.name", None, "items[1]: metadata.name is missing"),
    ("spec", ["x"], "node 'b': spec must be a mapping, not a list"),
    ("spec.taints", {"key": "a"}, "spec.taints must be a list, not a mapping"),
    ("spec.taints.0", "gpu:NoSchedule", "spec.taints[0] must be a mapping, not the string"),
    ("spec.taints.0.key", None, "spec.taints[0].key is missing"),
    ("spec.taints.0.effect", 1, "spec.taints[0].effect must be a string, not the integer 1"),
    ("spec.unschedulable", "true", "spec.unschedulable must be true or false, not the string"),
    ("status", "Ready", "node 'b': status must be a mapping, not the string 'Ready'"),
    ("status.conditions", ["Ready"], "status.conditions[0] must be a mapping, not the string"),
    ("status.conditions", {"Ready": "True"}, "status.conditions must be a list, not a mapping"),
    ("status.conditions.3.status", True, "status.conditions[3].status must be a string, not the boolean true"),
    ("status.conditions.3.type", None, "status.conditions[3].type is missing"),
    ("status.addresses", "10.0.0.1", "status.addresses must be a list, not the string"),
    ("status.addresses.0.address", 10, "status.addresses[0].address must be a string, not the integer 10"),
    ("status.allocatable", "8", "status.allocatable must be a mapping, not the string '8'"),
    ("status.allocatable.nvidia.com/gpu", [8], "['nvidia.com/gpu'] must be a quantity"),
]  # fmt: skip


def _set_gpu(value: Any) -> Callable[[list[dict[str, Any]]], None]:
    def change(nodes: list[dict[str, Any]]) -> None:
        nodes[1]["status"]["allocatable"]["nvidia.com/gpu"] = value

    return change


def mutation(path: str, value: Any) -> Callable[[list[dict[str, Any]]], None]:
    return _set_gpu(value) if path.endswith("nvidia.com/gpu") else changed(path, value)


@pytest.mark.parametrize("form", ["json", "yaml"])
@pytest.mark.parametrize(("path", "value", "message"), MALFORMED_NODES)
def test_malformed_node_lists(
    cli: Any, tmp_path: Path, form: str, path: str, value: Any, message: str
) -> None:
    nodes = two_nodes()
    mutation(path, value)(nodes)
    document = saved_list(nodes)
    text = json.dumps(document, indent=4) if form == "json" else yaml.safe_dump(document)
    write(tmp_path / f"nodes.{form}", text)
    write(tmp_path / "t.yaml", TEMPLATE)
    before = before_run(tmp_path)
    result = cli("t.yaml", "--nodes-file", f"nodes.{form}", "-o", "-", cwd=tmp_path)
    assert_refused(result, 1, f"nodes.{form}: items[1]", message, before=before)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"kind": "List", "items": {"a": 1}}, "nodes.json: items must be a list of nodes, not a mapping"),
        ({"kind": "List", "items": ["a"]}, "nodes.json: items[0]: a node must be a mapping, not the string 'a'"),
        ({"kind": "List", "items": [make_node("a"), make_node("a")]}, "nodes.json: items[1]: host 'a' is listed twice (first at nodes.json: items[0])"),
        ({"kind": "List", "items": [make_node("A")]}, "nodes.json: items[0]: 'A' is not a valid Kubernetes node name"),
        ({"kind": "Node", "metadata": {"name": "a", "labels": []}}, "nodes.json, node 'a': metadata.labels must be a mapping"),
        ({"kind": "Secret"}, "nodes.json: expected a NodeList"),
    ],
)  # fmt: skip
def test_malformed_node_list_documents(
    cli: Any, tmp_path: Path, document: dict[str, Any], message: str
) -> None:
    write(tmp_path / "nodes.json", json.dumps(document))
    write(tmp_path / "t.yaml", TEMPLATE)
    before = before_run(tmp_path)
    result = cli("t.yaml", "--nodes-file", "nodes.json", "-o", "-", cwd=tmp_path)
    assert_refused(result, 1, message, before=before)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"kind": "List", "items": [\n  {"metadata": {"name": "a"}},\n', "nodes.json:3: not valid JSON"),
        ('{"kind": "List",\n "items": [], }\n', "nodes.json:2: not valid JSON"),
        ("{kind: List, items: []}\n", "nodes.json:1: not valid JSON"),
        ('{"items": ' + "[" * 100_000 + "]" * 100_000 + "}", "nodes.json: not a NodeList: nested too deeply"),
    ],
)  # fmt: skip
def test_a_file_that_starts_with_a_brace_is_json(
    cli: Any, tmp_path: Path, text: str, message: str
) -> None:
    write(tmp_path / "nodes.json", text)
    write(tmp_path / "t.yaml", TEMPLATE)
    before = before_run(tmp_path)
    result = cli("t.yaml", "--nodes-file", "nodes.json", "-o", "-", cwd=tmp_path)
    assert_refused(result, 1, message, before=before)


def test_json_as_kubectl_writes_it_reads_as_yaml_does(cli: Any, tmp_path: Path) -> None:
    """Indented (kubectl), compact (the API server), with a BOM, and with images that cannot
    be cut: all read the same nodes as the YAML of the same list."""
    nodes = [make_node(f"n{i}", gpus=i % 2, gpu_taint=i == 3) for i in range(6)]
    odd = make_node("odd")
    odd["status"]["images"][0]["names"].append("weird}]name")
    document = saved_list([*nodes, odd])
    write(tmp_path / "t.yaml", TEMPLATE)
    forms = {
        "nodes.yaml": yaml.safe_dump(document),
        "indented.json": json.dumps(document, indent=4),
        "compact.json": json.dumps(document, separators=(",", ":")),
        "bom.json": "\ufeff" + json.dumps(document, indent=2),
    }
    outputs = set()
    for name, text in forms.items():
        write(tmp_path / name, text)
        result = cli("t.yaml", "--nodes-file", name, "--explain", "-o", "-", cwd=tmp_path)
        assert result.code == 0, result.err
        outputs.add((result.out, result.err))
    assert len(outputs) == 1
    out, err = outputs.pop()
    assert re.search(r"^n3 +no +- +taint nvidia.com/gpu", err, re.MULTILINE), err
    assert [d["metadata"]["name"] for d in load_all(out)] == [
        "t-ps-0",
        *(f"t-worker-{i}" for i in range(5)),
    ]


def test_images_are_cut_from_indented_json_too() -> None:
    nodes = [make_node("a"), make_node("none", images=0), make_node("b", images=3)]
    expected = saved_list(copy.deepcopy(nodes))
    for node in expected["items"]:
        node["status"]["images"] = []
    for indent in (None, 1, 4):
        data = json.dumps(saved_list(nodes), indent=indent).encode()
        slim = without_images(data)
        assert json.loads(slim) == expected
        assert len(slim) < len(data) * 0.6


@pytest.fixture
def secured(kubeapi: KubeAPI) -> KubeAPI:
    kubeapi.anonymous_auth = False
    kubeapi.add_user("alice", TOKEN)
    kubeapi.grant("alice", "list", "nodes")
    return kubeapi


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [case for case in MALFORMED_NODES if not case[0].startswith("metadata")],
)
def test_malformed_nodes_from_a_live_cluster(
    cli: Any, secured: KubeAPI, tmp_path: Path, path: str, value: Any, message: str
) -> None:
    nodes = two_nodes()
    mutation(path, value)(nodes)
    secured.set_nodes(nodes)
    write_kubeconfig(tmp_path / "kc", secured.url, token=TOKEN)
    write(tmp_path / "t.yaml", TEMPLATE)
    before = before_run(tmp_path)
    result = cli("t.yaml", "--kubeconfig", "kc", "-o", "-", cwd=tmp_path)
    prefix = f"{secured.url} (context 'loopback'): the node list's items[1], node 'b': "
    assert_refused(result, 1, prefix, message, before=before)


# -- malformed kubeconfigs ----------------------------------------------------------------


def kubeconfig(server: str, **changes: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lo", "cluster": {"server": server}}],
        "users": [{"name": "alice", "user": {"token": TOKEN}}],
        "contexts": [{"name": "c", "context": {"cluster": "lo", "user": "alice"}}],
        "current-context": "c",
    }
    config.update(changes)
    return config


def with_cluster(**fields: Any) -> dict[str, Any]:
    return {"clusters": [{"name": "lo", "cluster": {"server": "SERVER", **fields}}]}


def with_user(**fields: Any) -> dict[str, Any]:
    return {"users": [{"name": "alice", "user": fields}]}


def with_exec(**fields: Any) -> dict[str, Any]:
    plugin = {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws", **fields}
    return with_user(exec={k: v for k, v in plugin.items() if v is not None})


MALFORMED_KUBECONFIGS = [
    ({"contexts": ["c", "d"]}, "kubeconfig kc: contexts[0] must be a mapping with 'name' and 'context', not the string 'c'"),
    ({"contexts": "c"}, "kubeconfig kc: contexts must be a list, not the string 'c'"),
    ({"contexts": [{"name": "c", "context": "lo"}]}, "kubeconfig kc: contexts[0] ('c').context must be a mapping, not the string 'lo'"),
    ({"contexts": [{"context": {"cluster": "lo"}}]}, "kubeconfig kc: contexts[0].name is missing"),
    ({"contexts": [{"name": ["c"], "context": {}}]}, "kubeconfig kc: contexts[0].name must be a string, not a list"),
    ({"clusters": {"lo": {"server": "x"}}}, "kubeconfig kc: clusters must be a list, not a mapping"),
    ({"clusters": [["lo"]]}, "kubeconfig kc: clusters[0] must be a mapping with 'name' and 'cluster', not a list"),
    ({"users": [{"name": "alice", "user": "s3cr3t"}]}, "kubeconfig kc: users[0] ('alice').user must be a mapping, not the string"),
    ({"users": [{"name": "alice"}, {"name": "alice"}]}, "kubeconfig kc: users[1]: 'alice' is defined twice in this file (first at users[0])"),
    ({"contexts": [{"name": "c", "context": {"cluster": "gone", "user": "alice"}}]}, "kubeconfig kc: contexts[0] ('c'): the context names cluster 'gone', which kubeconfig kc does not define (its clusters: lo)"),
    ({"contexts": [{"name": "c", "context": {"cluster": "lo", "user": "bob"}}]}, "the context names user 'bob', which kubeconfig kc does not define (its users: alice)"),
    ({"contexts": [{"name": "c", "context": {"user": "alice"}}]}, "kubeconfig kc: contexts[0] ('c'): the context names no cluster"),
    ({"contexts": [{"name": "c", "context": {"cluster": ["lo"]}}]}, "contexts[0] ('c').context.cluster must be a string, not a list"),
    ({"current-context": 1}, "kubeconfig kc: current-context must be a string, not the integer 1"),
    ({"current-context": ["c"]}, "kubeconfig kc: current-context must be a string, not a list"),
    (with_cluster(server=6443), "clusters[0] ('lo').cluster.server must be a string, not the integer 6443"),
    (with_cluster(**{"insecure-skip-tls-verify": "yes"}), ".cluster.insecure-skip-tls-verify must be true or false, not the string 'yes'"),
    (with_cluster(**{"certificate-authority": ["ca.crt"]}), ".cluster.certificate-authority must be a string, not a list"),
    (with_user(token=12345), "users[0] ('alice').user.token must be a string, not the integer 12345"),
    (with_user(exec="aws eks get-token"), "users[0] ('alice').user.exec must be a mapping, not the string"),
    (with_exec(command=None), "users[0] ('alice').user.exec.command is missing"),
    (with_exec(args="eks get-token"), "users[0] ('alice').user.exec.args must be a list of strings, not the string"),
    (with_exec(env={"AWS_PROFILE": "x"}), "users[0] ('alice').user.exec.env must be a list, not a mapping"),
    (with_user(**{"auth-provider": {"name": "oidc", "config": "x"}}), "users[0] ('alice').user.auth-provider.config must be a mapping, not the string 'x'"),
    (with_user(**{"auth-provider": {"name": 5}}), "users[0] ('alice').user.auth-provider.name must be a string, not the integer 5"),
    (with_user(**{"auth-provider": {"name": "oidc", "config": {"id-token": 5}}}), "user.auth-provider.config.id-token must be a string, not the integer 5"),
]  # fmt: skip


@pytest.mark.parametrize(("changes", "message"), MALFORMED_KUBECONFIGS)
def test_malformed_kubeconfigs(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path, changes: dict[str, Any], message: str
) -> None:
    config = json.loads(
        json.dumps(kubeconfig(kubeapi.url, **changes)).replace("SERVER", kubeapi.url)
    )
    write(tmp_path / "kc", yaml.safe_dump(config))
    write(tmp_path / "t.yaml", TEMPLATE)
    before = before_run(tmp_path)
    result = cli("t.yaml", "--kubeconfig", "kc", "-o", "-", cwd=tmp_path)
    assert_refused(result, 1, message, before=before)
    assert kubeapi.requests == []  # refused before anything was asked


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- clusters\n- users\n", "kubeconfig kc must be a YAML mapping with clusters, users and contexts, not a list"),
        ("just a string\n", "not the string 'just a string'"),
        ("42\n", "not the integer 42"),
        ("clusters: [\n", "kubeconfig kc:2: not valid YAML"),
        ("", "kubeconfig kc sets no current context; choose one with --context NAME (it has no contexts)"),
    ],
)  # fmt: skip
def test_kubeconfigs_that_are_not_mappings(
    cli: Any, kube_env: Path, tmp_path: Path, text: str, message: str
) -> None:
    write(tmp_path / "kc", text)
    write(tmp_path / "t.yaml", TEMPLATE)
    before = before_run(tmp_path)
    result = cli("t.yaml", "--kubeconfig", "kc", "-o", "-", cwd=tmp_path)
    assert_refused(result, 1, message, before=before)


def test_a_kubeconfig_directory_is_named_as_one(cli: Any, kube_env: Path, tmp_path: Path) -> None:
    (tmp_path / "kube").mkdir()
    write(tmp_path / "t.yaml", TEMPLATE)
    before = before_run(tmp_path)
    result = cli("t.yaml", "--kubeconfig", str(tmp_path / "kube"), "-o", "-", cwd=tmp_path)
    assert_refused(
        result, 1, f"kubeconfig '{tmp_path / 'kube'}' is a directory, not a file", before=before
    )


def test_the_malformed_file_among_several_is_named(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = write_kubeconfig(tmp_path / "good", kubeapi.url)
    bad = write(tmp_path / "bad", yaml.safe_dump({"users": [{"name": 7, "user": {}}]}))
    monkeypatch.setenv("KUBECONFIG", f"{good}:{bad}")
    write(tmp_path / "t.yaml", TEMPLATE)
    result = cli("t.yaml", "-o", "-", cwd=tmp_path)
    assert_refused(
        result, 1, f"kubeconfig {bad}: users[0].name must be a string, not the integer 7"
    )


def test_later_files_fill_in_what_earlier_ones_lack(
    cli: Any, secured: KubeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kubectl's merge: a context in one file may name a cluster and a user from others."""
    secured.set_nodes([make_node("a"), make_node("b")])
    contexts = {"contexts": [{"name": "c", "context": {"cluster": "lo", "user": "alice"}}]}
    first = write(tmp_path / "first", yaml.safe_dump({**contexts, "current-context": "c"}))
    second = write(tmp_path / "second", yaml.safe_dump(kubeconfig(secured.url, contexts=[])))
    empty = write(tmp_path / "empty", "")
    monkeypatch.setenv("KUBECONFIG", f"{first}:{empty}:{second}")
    write(tmp_path / "t.yaml", TEMPLATE)
    result = cli("t.yaml", "-o", "-", cwd=tmp_path)
    assert result.code == 0, result.err
    assert [r.authorization for r in secured.nodes_requests()] == [f"Bearer {TOKEN}"]


# -- credential plugins -------------------------------------------------------------------


def plugin_kubeconfig(path: Path, server: str, command: str) -> Path:
    plugin = {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": command}
    config = kubeconfig(server, users=[{"name": "alice", "user": {"exec": plugin}}])
    return write(path, yaml.safe_dump(config))


def script(path: Path, body: str) -> Path:
    write(path, "#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


CREDENTIAL = json.dumps(
    {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {"token": TOKEN},
    }
)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "echo 'retrieving token' >&2\n"
            "echo 'An error occurred (ExpiredToken) when calling the GetCallerIdentity operation' >&2\n"
            "exit 3\n",
            "failed (exit status 3): An error occurred (ExpiredToken) when calling the "
            "GetCallerIdentity operation",
        ),
        (
            "printf 'ERROR: (gcloud.auth) You do not currently have an active account.\\n"
            "Please run:\\n\\n  $ gcloud auth login\\n\\n)\\n' >&2\nexit 1\n",
            "failed (exit status 1): $ gcloud auth login",
        ),
        ("exit 1\n", "failed (exit status 1)"),
        ("echo 'token: abc'\n", "gave no credential: failed to decode process output"),
        ('echo \'{"kind": "ExecCredential"}\'\n', "gave no credential: malformed response"),
    ],
)
def test_a_failing_plugin_is_one_line(
    secured: KubeAPI, tmp_path: Path, body: str, message: str
) -> None:
    plugin = script(tmp_path / "aws", body)
    plugin_kubeconfig(tmp_path / "kc", secured.url, str(plugin))
    write(tmp_path / "t.yaml", TEMPLATE)
    before = before_run(tmp_path)
    result = tool("t.yaml", "--kubeconfig", "kc", "-o", "-", cwd=tmp_path)
    line = assert_refused(result, 1, f"the credential plugin '{plugin}' ", message, before=before)
    assert line.startswith("simpletfjob: error: kubeconfig kc, context 'c': ")
    assert "ERROR:root" not in result.err
    assert secured.nodes_requests() == []  # no request went out without credentials


def test_a_missing_plugin_is_named(secured: KubeAPI, tmp_path: Path) -> None:
    for command in ("gke-gcloud-auth-plugin", "aws"):
        plugin_kubeconfig(tmp_path / "kc", secured.url, command)
        write(tmp_path / "t.yaml", TEMPLATE)
        before = before_run(tmp_path)
        # Only an empty directory on PATH: the command is not installed.
        (tmp_path / "bin").mkdir(exist_ok=True)
        result = tool(
            "t.yaml",
            "--kubeconfig",
            "kc",
            "-o",
            "-",
            cwd=tmp_path,
            env={"PATH": str(tmp_path / "bin")},
        )
        assert_refused(
            result, 1, f"the credential plugin '{command}' was not found; install it", before=before
        )
        assert "ERROR:root" not in result.err


def test_a_plugin_that_cannot_run(secured: KubeAPI, tmp_path: Path) -> None:
    plugin = write(tmp_path / "plugin", "#!/bin/sh\necho hi\n")  # not executable
    plugin_kubeconfig(tmp_path / "kc", secured.url, str(plugin))
    write(tmp_path / "t.yaml", TEMPLATE)
    result = tool("t.yaml", "--kubeconfig", "kc", "-o", "-", cwd=tmp_path)
    assert_refused(result, 1, f"the credential plugin '{plugin}' cannot be run: permission denied")


def test_a_working_plugin_gives_the_token(secured: KubeAPI, tmp_path: Path) -> None:
    secured.set_nodes([make_node("a"), make_node("b")])
    plugin = script(tmp_path / "bin" / "get-token", f"echo '{CREDENTIAL}'\n")
    plugin_kubeconfig(tmp_path / "kc", secured.url, "get-token")
    write(tmp_path / "t.yaml", TEMPLATE)
    path = f"{plugin.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    result = tool("t.yaml", "--kubeconfig", "kc", "-o", "-", cwd=tmp_path, env={"PATH": path})
    assert result.code == 0, result.err
    assert [d["metadata"]["name"] for d in load_all(result.out)] == [
        "t-ps-0",
        "t-worker-0",
    ]
    assert [r.authorization for r in secured.nodes_requests()] == [f"Bearer {TOKEN}"]
    assert result.err.splitlines() == [
        "simpletfjob: wrote 2 tasks to stdout: 1 ps (a), 1 worker (b)"
    ]


# -- values that take what simpletfjob reserves, and --validate's types --------------------


@pytest.mark.parametrize("name", ["type", "index", "host", "port", "TF_CONFIG", "num_tasks"])
def test_a_values_file_that_sets_a_built_in_is_named(cli: Any, tmp_path: Path, name: str) -> None:
    write(tmp_path / "t.yaml", TEMPLATE)
    write(tmp_path / "v.yaml", f"image: x\n{name}: 1\n")
    before = before_run(tmp_path)
    result = cli("t.yaml", "--nodes", "a,b", "-f", "v.yaml", "-o", "-", cwd=tmp_path)
    assert_refused(
        result, 2, f"v.yaml:2: {name!r} is set by simpletfjob for each task", before=before
    )
    result = cli("t.yaml", "--nodes", "a,b", "--set", f"{name}=1", "-o", "-", cwd=tmp_path)
    assert_refused(result, 2, f"--set '{name}=1': {name!r} is set by simpletfjob", before=before)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ('image: "tf\\ue000"\n', "v.yaml:1: image: contains U+E000"),
        ("image: tf\ue001\n", "v.yaml:1: image: contains U+E001"),
        ("res:\n  args: [a, 'b\ue0000\ue001']\n", "v.yaml:2: res.args[1]: contains U+E000"),
        ('res:\n  "k\\U0000e001": 1\n', "v.yaml:2: res.k\ue001 (its key): contains U+E001"),
    ],
)
def test_reserved_characters_in_a_values_file(
    cli: Any, tmp_path: Path, values: str, message: str
) -> None:
    write(tmp_path / "t.yaml", TEMPLATE.replace("tensorflow/tensorflow", "<<image>>"))
    write(tmp_path / "v.yaml", values)
    before = before_run(tmp_path)
    result = cli("t.yaml", "--nodes", "a,b", "-f", "v.yaml", "-o", "-", cwd=tmp_path)
    assert_refused(result, 1, message, "a character simpletfjob reserves", before=before)


@pytest.mark.parametrize("char", ["\ue000", "\ue001"])
def test_reserved_characters_in_set_and_header(cli: Any, tmp_path: Path, char: str) -> None:
    write(tmp_path / "t.yaml", TEMPLATE.replace("tensorflow/tensorflow", "<<image>>"))
    before = before_run(tmp_path)
    result = cli("t.yaml", "--nodes", "a,b", "--set", f"image=x{char}0", "-o", "-", cwd=tmp_path)
    code = f"U+{ord(char):04X}"
    assert_refused(
        result, 2, f"--set 'image=x\\u{ord(char):04x}0': the value contains {code}", before=before
    )
    header = f"# simpletfjob:\n#   values:\n#     image: 'x{char}'\n"
    write(tmp_path / "h.yaml", header + TEMPLATE.replace("tensorflow/tensorflow", "<<image>>"))
    before = before_run(tmp_path)
    result = cli("h.yaml", "--nodes", "a,b", "-o", "-", cwd=tmp_path)
    assert_refused(result, 1, f"h.yaml:3: simpletfjob.values.image: contains {code}", before=before)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("apiVersion", "1", "apiVersion: must be a string, not an integer 1"),
        ("apiVersion", "1.0", "apiVersion: must be a string, not a number 1.0"),
        ("apiVersion", "true", "apiVersion: must be a string, not a boolean true"),
        ("apiVersion", "[batch/v1]", 'apiVersion: must be a string, not a list ["batch/v1"]'),
        ("apiVersion", "{group: batch}", "apiVersion: must be a string, not a mapping"),
        ("apiVersion", "null", "apiVersion: required field is missing"),
    ],
)
def test_validate_names_a_wrong_type(
    cli: Any, tmp_path: Path, field: str, value: str, message: str
) -> None:
    write(tmp_path / "t.yaml", TEMPLATE.replace(f"{field}: batch/v1", f"{field}: {value}"))
    before = before_run(tmp_path)
    result = cli("t.yaml", "--nodes", "a,b", "--validate", "-o", "-", cwd=tmp_path)
    assert_refused(result, 1, f"document 1 (Job 't-ps-0'): {message}", before=before)


@pytest.mark.parametrize("value", ["1", "true", "1.5"])
@pytest.mark.parametrize("validate", [(), ("--validate",)])
def test_a_kind_that_is_not_a_string(
    cli: Any, tmp_path: Path, value: str, validate: tuple[str, ...]
) -> None:
    write(tmp_path / "t.yaml", TEMPLATE.replace("kind: Job", f"kind: {value}"))
    before = before_run(tmp_path)
    result = cli("t.yaml", "--nodes", "a,b", *validate, "-o", "-", cwd=tmp_path)
    assert_refused(
        result, 1, f"document 1 (ps 0 on a): kind {value} is not a string; quote it", before=before
    )


@pytest.mark.parametrize("value", ["1", "true", "2.5"])
def test_a_namespace_that_is_not_a_string(cli: Any, tmp_path: Path, value: str) -> None:
    text = TEMPLATE.replace(
        "  name: t-<<type>>-<<index>>\n", f"  name: t-<<type>>-<<index>>\n  namespace: {value}\n", 1
    )
    write(tmp_path / "t.yaml", text)
    before = before_run(tmp_path)
    result = cli("t.yaml", "--nodes", "a,b", "--network", "pod", "-o", "-", cwd=tmp_path)
    assert_refused(
        result,
        1,
        f"document 1 (ps 0 on a, Job): metadata.namespace {value} is not a string; quote it",
        before=before,
    )


def test_deep_nesting_is_refused_not_a_crash(cli: Any, tmp_path: Path) -> None:
    deep = "[" * 990 + "]" * 990
    text = (EXAMPLES / "mnist.yaml").read_text()
    write(
        tmp_path / "t.yaml",
        text.replace("metadata:\n", f"metadata:\n  annotations:\n    x: {deep}\n", 1),
    )
    before = before_run(tmp_path)
    result = cli("t.yaml", "--nodes", "a,b", "--validate", "-o", "-", cwd=tmp_path)
    assert_refused(result, 1, "document 1 (Job 'mnist-ps-0'): nested too deeply", before=before)
    write(tmp_path / "v.yaml", "x: " + "[" * 1001 + "]" * 1001 + "\n")
    result = cli("t.yaml", "--nodes", "a,b", "-f", "v.yaml", "-o", "-", cwd=tmp_path)
    assert_refused(result, 1, "v.yaml:1: not valid YAML")
