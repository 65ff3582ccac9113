"""Hostile and malformed inputs that need more than one command line: YAML alias bombs of
every kind (with a kubeconfig among them), NodeLists read back as kubectl writes them, a
live cluster's malformed nodes, malformed kubeconfigs against a server, and credential
plugins. The refusals that one command line shows without a server (a saved NodeList's
malformed fields, values that take what simpletfjob reserves, fields of the wrong type)
are rows of tests/error_table.py.

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
from pathlib import Path
from typing import Any

import pytest
import yaml

from simpletfjob import yamlload
from simpletfjob.hosts.nodes import without_images
from tests.conftest import (
    Result,
    assert_one_line_error,
    console_script,
    job_template,
    load_all,
    snapshot,
    write,
)
from tests.error_table import MALFORMED_NODES, mutation, saved_list, two_nodes
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
