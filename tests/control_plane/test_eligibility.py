"""Which nodes take the work: health, taints against the template's tolerations, --selector,
--gpus, --address, --explain, and saved NodeLists that render exactly as the live cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from simpletfjob.manifest.documents import compose_documents
from simpletfjob.manifest.podspec import pod_tolerations
from tests.conftest import EXAMPLES, assert_one_line_error, write
from tests.support.kubeapi import KubeAPI, make_node, write_kubeconfig
from tests.support.templates import TOLERATIONS_SLOT as TEMPLATE

GPU_TOLERATION = """\
      tolerations:
        - key: nvidia.com/gpu
          operator: Exists
          effect: NoSchedule
"""

TOLERATE_ALL = """\
      tolerations:
        - operator: Exists
"""


def cluster_nodes() -> list[dict[str, Any]]:
    return [
        make_node("h10", internal_ip="10.0.0.10", hostname="host-10"),
        make_node("h100", internal_ip="10.0.0.100", hostname="host-100"),
        make_node("h14", internal_ip="10.0.0.14", hostname="host-14"),
        make_node("cp0", control_plane=True),
        make_node("g1", gpus=8, gpu_taint=True),
        make_node("g2", gpus=8, gpu_taint=True),
        make_node("g3", gpus=2, gpu_taint=True),
        make_node("down1", ready=False),
        make_node("cordoned1", cordoned=True),
        make_node("new1", just_admitted=True),
    ]


@pytest.fixture
def cluster(kubeapi: KubeAPI, tmp_path: Path) -> Path:
    """A kubeconfig for a small cluster with every kind of node; returns the working directory."""
    kubeapi.set_nodes(cluster_nodes())
    write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    write(tmp_path / "plain.yaml", TEMPLATE.format(tolerations=""))
    write(tmp_path / "gpu.yaml", TEMPLATE.format(tolerations=GPU_TOLERATION))
    write(tmp_path / "all.yaml", TEMPLATE.format(tolerations=TOLERATE_ALL))
    return tmp_path


def run(cli: Any, cwd: Path, template: str, *args: str) -> Any:
    return cli(template, "--kubeconfig", "kubeconfig", "-o", "-", *args, cwd=cwd)


def node_names(result: Any) -> list[str]:
    assert result.code == 0, result.err
    return [d["spec"]["template"]["spec"]["nodeName"] for d in result.docs]


def tf_configs(result: Any) -> list[dict[str, Any]]:
    return [
        json.loads(d["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"])
        for d in result.docs
    ]


def test_only_ready_schedulable_untainted_nodes_by_default(cli: Any, cluster: Path) -> None:
    assert node_names(run(cli, cluster, "plain.yaml")) == ["h10", "h100", "h14"]


def test_template_tolerating_gpus_can_use_gpu_nodes(cli: Any, cluster: Path) -> None:
    assert node_names(run(cli, cluster, "gpu.yaml")) == ["g1", "g2", "g3", "h10", "h100", "h14"]
    assert node_names(run(cli, cluster, "gpu.yaml", "--gpus", "4")) == ["g1", "g2"]


def test_tolerating_everything_never_takes_down_cordoned_or_new_nodes(
    cli: Any, cluster: Path
) -> None:
    assert node_names(run(cli, cluster, "all.yaml")) == [
        "cp0",
        "g1",
        "g2",
        "g3",
        "h10",
        "h100",
        "h14",
    ]


def test_too_few_eligible_gives_the_short_breakdown(cli: Any, cluster: Path) -> None:
    result = run(cli, cluster, "plain.yaml", "-N", "4", "-E", "exc")
    assert result.code == 1  # the exc file is missing: checked before the cluster is asked
    write(cluster / "exc", "h100\n")
    result = run(cli, cluster, "plain.yaml", "-N", "4", "-E", "exc")
    assert result.code == 1 and result.out == ""
    assert result.err == (
        "simpletfjob: error: -N 4 asks for more hosts than are eligible "
        "(10 nodes: 2 eligible, 1 excluded, 2 NotReady, 1 cordoned, 4 tainted); "
        "2 eligible hosts fit 2 tasks at 1 per host; for 4 tasks, give -N 2 --tasks-per-host 2\n"
    )
    result = run(cli, cluster, "gpu.yaml", "-N", "3", "--gpus", "4")
    assert (
        "(10 nodes: 2 eligible, 2 NotReady, 1 cordoned, 1 tainted, 4 without enough free GPUs)"
        in result.err
    )


def test_address_internal_ip_and_hostname(cli: Any, cluster: Path) -> None:
    result = run(cli, cluster, "plain.yaml", "--address", "internal-ip")
    assert node_names(result) == ["h10", "h100", "h14"]
    assert tf_configs(result)[0]["cluster"] == {
        "ps": ["10.0.0.10:2222"],
        "worker": ["10.0.0.100:2222", "10.0.0.14:2222"],
    }
    args = [d["spec"]["template"]["spec"]["containers"][0]["args"] for d in result.docs]
    assert args[0] == ["--listen=10.0.0.10:2222"]
    result = run(cli, cluster, "plain.yaml", "--address", "hostname", "-N", "2")
    assert tf_configs(result)[1]["cluster"] == {
        "ps": ["host-10:2222"],
        "worker": ["host-100:2222"],
    }
    assert "1 ps (host-10), 1 worker (host-100)" in result.err


@pytest.mark.parametrize("address", ["internal-ip", "hostname"])
def test_a_pod_pinned_to_the_address_is_refused(cli: Any, cluster: Path, address: str) -> None:
    """`nodeName: <<host>>`, right for node names, pins pods to no node under --address."""
    write(cluster / "old.yaml", TEMPLATE.format(tolerations="").replace("<<node>>", "<<host>>"))
    before = (cluster / "old.yaml").read_bytes()
    result = run(cli, cluster, "old.yaml", "--address", address)
    assert_one_line_error(
        result,
        1,
        r"^simpletfjob: error: document 1 \(ps 0 on h10\): nodeName is '(10\.0\.0\.10|host-10)', "
        r"the task's address \(<<host>>\), not its node's name 'h10'; write nodeName: <<node>> "
        r"\(old\.yaml:8\)$",
    )
    assert (cluster / "old.yaml").read_bytes() == before
    assert node_names(run(cli, cluster, "old.yaml")) == ["h10", "h100", "h14"]  # names: right


@pytest.mark.parametrize(
    "template",
    [
        "tf1-ps-hostnetwork",
        "tf1-flags",
        "tf2-multiworker",
        "tf2-parameter-server",
        str(EXAMPLES / "mnist.yaml"),
    ],
)
def test_shipped_templates_pin_pods_to_node_names(cli: Any, cluster: Path, template: str) -> None:
    result = run(cli, cluster, template, "--address", "internal-ip", "-N", "3")
    assert set(node_names(result)) == {"h10", "h100", "h14"}


def test_exclusion_files_name_nodes_whatever_the_address(cli: Any, cluster: Path) -> None:
    write(cluster / "exc", "h10\n")
    result = run(cli, cluster, "plain.yaml", "--address", "internal-ip", "-E", "exc")
    assert node_names(result) == ["h100", "h14"]


def test_a_node_without_the_requested_address(cli: Any, kubeapi: KubeAPI, tmp_path: Path) -> None:
    bare = make_node("bare")
    bare["status"]["addresses"] = [{"type": "Hostname", "address": "bare"}]
    kubeapi.set_nodes([bare, make_node("fine")])
    write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    write(tmp_path / "t.yaml", TEMPLATE.format(tolerations=""))
    result = run(cli, tmp_path, "t.yaml", "--address", "internal-ip")
    assert result.code == 1 and result.out == ""
    assert result.err == (
        "simpletfjob: error: node 'bare' has no InternalIP address (it lists: Hostname); "
        "choose another --address\n"
    )


def test_explain_prints_a_row_per_node(cli: Any, cluster: Path) -> None:
    result = run(cli, cluster, "gpu.yaml", "--explain", "-N", "3", "--address", "internal-ip")
    assert result.code == 0, result.err
    lines = result.err.splitlines()
    # Some nodes have GPUs, so --explain reads the nodes' pods (the server has none here)
    # for its free-GPU column.
    assert lines[0].split() == ["NODE", "ELIGIBLE", "TASK", "GPU(FREE/ALLOC)", "WHY", "NOT"]
    rows = {line.split()[0]: line for line in lines[1:11]}
    assert list(rows) == sorted(n["metadata"]["name"] for n in cluster_nodes())
    assert rows["g1"].split()[1:5] + rows["g1"].split()[6:] == ["yes", "ps", "0", "at", "8/8"]
    assert rows["g3"].split()[1:4] + rows["g3"].split()[6:] == ["yes", "worker", "1", "2/2"]
    assert rows["h10"].split()[1:] == ["yes", "-", "0/0", "not", "needed", "(-N)"]
    assert rows["cordoned1"].split()[1:4] == ["no", "-", "0/0"]
    assert rows["cordoned1"].endswith("cordoned")
    assert rows["down1"].split()[1:5] == ["no", "-", "0/0", "NotReady"]
    assert rows["new1"].split()[1:5] == ["no", "-", "0/0", "NotReady"]
    assert rows["cp0"].endswith("taint node-role.kubernetes.io/control-plane:NoSchedule")
    assert lines[11] == "10 nodes: 6 eligible, 2 NotReady, 1 cordoned, 1 tainted"
    assert (
        lines[12] == "the tasks reach each other at their nodes' InternalIP (--address internal-ip)"
    )
    assert lines[13].startswith("simpletfjob: wrote 3 tasks to stdout")
    assert len(lines) == 14


def test_explain_still_prints_when_selection_fails(cli: Any, cluster: Path) -> None:
    result = run(cli, cluster, "plain.yaml", "--explain", "-N", "9")
    assert result.code == 1 and result.out == ""
    lines = result.err.splitlines()
    assert lines[0].startswith("NODE") and len(lines) == 13
    assert lines[-1].startswith("simpletfjob: error: -N 9 asks for more hosts")


# -- saved NodeLists render exactly what the live cluster gives ----------------------------


def saved_list(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """What `kubectl get nodes -o json` writes: a v1 List whose items carry kind and apiVersion."""
    items = [{"apiVersion": "v1", "kind": "Node", **n} for n in nodes]
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}


@pytest.mark.parametrize("form", ["json", "yaml"])
@pytest.mark.parametrize(
    "args",
    [
        ("plain.yaml",),
        ("gpu.yaml", "--gpus", "1", "--address", "internal-ip", "--chief"),
        ("all.yaml", "--address", "hostname", "-N", "4"),
    ],
)
def test_saved_node_list_renders_as_the_live_cluster(
    cli: Any, cluster: Path, form: str, args: tuple[str, ...]
) -> None:
    nodes = list(reversed(cluster_nodes()))  # kubectl's order does not matter: names are sorted
    text = (
        json.dumps(saved_list(nodes), indent=4)
        if form == "json"
        else yaml.safe_dump(saved_list(nodes))
    )
    write(cluster / f"nodes.{form}", text)
    live = run(cli, cluster, *args)
    saved = cli(args[0], "--nodes-file", f"nodes.{form}", "-o", "-", *args[1:], cwd=cluster)
    assert live.code == 0, live.err
    assert (saved.code, saved.out, saved.err) == (0, live.out, live.err)


def test_selector_on_a_saved_list_is_applied_here(cli: Any, tmp_path: Path) -> None:
    nodes = [make_node(f"n{i}", labels={"pool": "a" if i % 2 else "b"}) for i in range(4)]
    write(tmp_path / "nodes.json", json.dumps(saved_list(nodes)))
    write(tmp_path / "t.yaml", TEMPLATE.format(tolerations=""))
    args = ("t.yaml", "--nodes-file", "nodes.json", "-o", "-", "-l", "pool=a", "--explain")
    result = cli(*args, cwd=tmp_path)
    assert node_names(result) == ["n1", "n3"]
    assert "n0    no        -         labels do not match --selector" in result.err
    assert "4 nodes: 2 eligible, 2 selector" in result.err


# -- options that need node objects ----------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--nodes", "a,b", "-l", "pool=a"), "--selector needs node objects, but --nodes gives"),
        (
            ("--nodes-file", "hosts", "--gpus", "1"),
            "--gpus needs node objects, but nodes file 'hosts'",
        ),
        (
            ("--nodes", "a,b", "--address", "internal-ip"),
            "--address internal-ip needs node objects",
        ),
        (("--nodes", "a,b", "--kubeconfig", "k"), "--kubeconfig reads nodes from a cluster"),
        (("--nodes", "a,b", "--context", "c"), "--context reads nodes from a cluster"),
        (("--nodes", "a,b", "--gpus", "-1"), "--gpus must be 0 or more"),
        (
            ("--nodes", "a,b", "--address", "ip"),
            "--address must be name, internal-ip or hostname, not 'ip'",
        ),
    ],
)
def test_node_options_with_plain_hosts_are_usage_errors(
    cli: Any, args: tuple[str, ...], message: str
) -> None:
    result = cli("mnist.yaml", "-o", "-", *args, cwd=EXAMPLES)
    assert result.code == 2, result.err
    assert result.out == ""
    assert len(result.err.strip().splitlines()) == 1
    assert message in result.err


def test_plain_hosts_stay_eligible_with_gpus_zero_and_name_address(cli: Any) -> None:
    result = cli(
        "mnist.yaml", "--nodes", "a,b", "--gpus", "0", "--address", "name", "-o", "-", cwd=EXAMPLES
    )
    assert node_names(result) == ["a", "b"]


# -- tolerations read from the template ----------------------------------------------------


def tolerations_of(text: str) -> tuple[dict[str, str], ...]:
    return pod_tolerations(compose_documents(text, 1, "test"))


def test_tolerations_from_pods_cronjobs_and_several_documents() -> None:
    pod = "kind: Pod\nspec:\n  tolerations:\n  - {key: a, operator: Exists}\n  containers: []\n"
    cronjob = (
        "kind: CronJob\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n"
        "          containers: []\n          tolerations:\n"
        "          - {key: b, value: x, effect: NoSchedule, tolerationSeconds: 30}\n"
        "          - {key: a, operator: Exists}\n"
    )
    assert tolerations_of(pod + "---\n" + cronjob) == (
        {"key": "a", "operator": "Exists"},
        {"key": "b", "value": "x", "effect": "NoSchedule"},
    )
    assert tolerations_of("kind: ConfigMap\ndata:\n  tolerations: nope\n") == ()
