"""`simpletfjob nodes`: the cluster's nodes as a render judges them, on the loopback server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_one_line_error, write
from tests.support.kubeapi import KubeAPI, make_node, make_pod, write_kubeconfig
from tests.support.templates import TOLERATING_GPU as TOLERATING

GPU = "nvidia.com/gpu"


@pytest.fixture
def work(kubeapi: KubeAPI, tmp_path: Path) -> Path:
    """Six nodes: full, half taken, tainted, cordoned, port 2222 held, idle without GPUs."""
    kubeapi.set_nodes(
        [
            make_node("full", gpus=8, labels={"pool": "gpu"}),
            make_node("half", gpus=8, labels={"pool": "gpu"}),
            make_node("tainted", gpus=4, gpu_taint=True, labels={"pool": "gpu"}),
            make_node("cordoned", gpus=8, cordoned=True),
            make_node("ported", gpus=2, labels={"pool": "gpu"}),
            make_node("cpu", internal_ip="10.0.0.9", hostname="cpu-host"),
        ]
    )
    kubeapi.load(
        "pods",
        [
            make_pod("a", "ml", node="full", requests={GPU: "4"}),
            make_pod("b", "ml", node="full", limits={GPU: "4"}),
            make_pod("c", "team", node="half", requests={GPU: "4"}),
            make_pod("old", "team", node="half", requests={GPU: "4"}, phase="Succeeded"),
            make_pod("other-worker-3", "ml", node="ported", host_ports=[2222, 9000]),
            make_pod("idle", "ml", node="cpu"),
        ],
    )
    write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    write(tmp_path / "tolerating.yaml", TOLERATING)
    return tmp_path


def nodes(cli: Any, cwd: Path, *args: str) -> Any:
    result = cli("nodes", "--kubeconfig", "kubeconfig", *args, cwd=cwd)
    assert result.code == 0, result.err
    return result


def by_name(result: Any) -> dict[str, dict[str, Any]]:
    found = json.loads(result.out)
    assert [n["name"] for n in found] == sorted(n["name"] for n in found)
    return {n["name"]: n for n in found}


def test_json_has_each_nodes_verdict_gpus_pods_and_ports(cli: Any, work: Path) -> None:
    result = nodes(cli, work, "-o", "json")
    found = by_name(result)
    assert found["full"] == {
        "name": "full",
        "eligible": True,
        "reasons": [],
        "gpu": {"allocatable": 8, "requested": 8, "free": 0},
        "pods": 2,
        "hostPorts": [],
        "addresses": found["full"]["addresses"],
    }
    assert found["half"]["gpu"] == {"allocatable": 8, "requested": 4, "free": 4}
    assert found["half"]["pods"] == 1  # the pod that ended does not count
    assert found["tainted"]["eligible"] is False
    assert found["tainted"]["reasons"] == ["taint nvidia.com/gpu=present:NoSchedule"]
    assert found["cordoned"]["reasons"] == ["cordoned"]
    # Without a template, the ports in use are shown but decide nothing.
    assert found["ported"]["eligible"] is True
    assert found["ported"]["hostPorts"] == [2222, 9000]
    assert found["cpu"]["addresses"] == {"Hostname": ["cpu-host"], "InternalIP": ["10.0.0.9"]}
    # The free GPUs of the eligible nodes only: not the cordoned node's or the tainted one's.
    assert result.err == "6 nodes: 4 eligible, 6 GPUs free\n"


def test_the_table(cli: Any, work: Path) -> None:
    result = nodes(cli, work, "--gpus", "4")
    lines = result.out.splitlines()
    assert lines[0].split() == ["NAME", "ELIGIBLE", "REASON", "GPU(FREE/ALLOC)", "PODS"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert list(rows) == ["cordoned", "cpu", "full", "half", "ported", "tainted"]
    assert rows["half"] == ["half", "yes", "-", "4/8", "1"]
    assert rows["full"] == ["full", "no", "0/8", "GPUs", "free", "<", "4", "0/8", "2"]
    assert rows["ported"][-2:] == ["2/2", "1"]
    assert result.err == "6 nodes: 1 eligible, 4 GPUs free\n"  # half's: the one eligible


def test_wide_adds_addresses_ports_and_labels(cli: Any, work: Path) -> None:
    result = nodes(cli, work, "-o", "wide", "-l", "pool=gpu")
    lines = result.out.splitlines()
    assert lines[0].split()[5:] == ["ADDRESSES", "HOST", "PORTS", "LABELS"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert list(rows) == ["full", "half", "ported", "tainted"]  # -l asked the server
    assert rows["ported"][6] == "2222,9000"
    assert rows["half"][6] == "<none>"
    assert "pool=gpu" in rows["half"][7].split(",")
    assert rows["half"][5].startswith("Hostname=half,InternalIP=")


def test_a_dual_stack_node_keeps_every_address_of_a_type(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    node = make_node("dual", internal_ip="10.0.0.7", hostname="dual-host")
    node["status"]["addresses"].insert(1, {"type": "InternalIP", "address": "fd00::7"})
    kubeapi.set_nodes([node])
    write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    shown = nodes(cli, tmp_path, "-o", "json")
    (found,) = json.loads(shown.out)
    assert found["addresses"] == {"Hostname": ["dual-host"], "InternalIP": ["10.0.0.7", "fd00::7"]}
    wide = nodes(cli, tmp_path, "-o", "wide")
    assert wide.out.splitlines()[1].split()[5] == (
        "Hostname=dual-host,InternalIP=10.0.0.7,InternalIP=fd00::7"
    )
    # The first InternalIP stays the one --address internal-ip gives, as kubectl shows it.
    write(tmp_path / "t.yaml", "kind: Job\nmetadata:\n  name: t-<<type>>-<<index>>\n")
    args = ("t.yaml", "--kubeconfig", "kubeconfig", "--address", "internal-ip", "--psn", "0")
    rendered = cli(*args, "-o", "-", cwd=tmp_path)
    assert rendered.code == 0, rendered.err
    assert rendered.err == "simpletfjob: wrote 1 task to stdout: 1 worker (10.0.0.7)\n"


def test_a_template_judges_tolerations_and_host_ports_as_a_render_would(
    cli: Any, work: Path
) -> None:
    found = by_name(nodes(cli, work, "-o", "json", "--template", "tolerating.yaml"))
    assert found["tainted"]["eligible"] is True
    assert found["ported"]["eligible"] is False
    assert found["ported"]["reasons"] == ["port 2222 held by ml/other-worker-3"]
    # The same verdicts as a render: a run on every eligible node avoids 'ported'.
    render = cli("tolerating.yaml", "--kubeconfig", "kubeconfig", "-o", "-", cwd=work)
    assert render.code == 0, render.err
    used = {d["spec"]["template"]["spec"]["nodeName"] for d in render.docs}
    assert used == {name for name, n in found.items() if n["eligible"]}


def test_no_usage_reads_no_pods(cli: Any, kubeapi: KubeAPI, work: Path) -> None:
    result = nodes(cli, work, "-o", "json", "--no-usage")
    found = by_name(result)
    assert found["full"]["gpu"] == {"allocatable": 8, "requested": None, "free": 8}
    assert found["full"]["pods"] is None
    assert kubeapi.requests_for("pods") == []
    assert result.err == "6 nodes: 4 eligible, 18 GPUs allocatable (pods not read)\n"


def test_gpu_resource(cli: Any, kubeapi: KubeAPI, work: Path) -> None:
    node = make_node("amd")
    node["status"]["allocatable"]["amd.com/gpu"] = "2"
    kubeapi.set_nodes([node])
    kubeapi.load("pods", [make_pod("r", "ml", node="amd", requests={"amd.com/gpu": "1"})])
    result = nodes(cli, work, "-o", "json", "--gpu-resource", "amd.com/gpu")
    assert by_name(result)["amd"]["gpu"] == {"allocatable": 2, "requested": 1, "free": 1}


def test_bad_options_are_usage_errors(cli: Any, work: Path) -> None:
    refused = cli("nodes", "-o", "yaml", cwd=work)
    assert_one_line_error(refused, 2, contains=["yaml"])
    refused = cli("nodes", "--gpus", "-1", cwd=work)
    assert_one_line_error(refused, 2, contains=["--gpus"])


def test_a_template_takes_its_variables_from_set_and_values_as_a_render_does(
    cli: Any, kubeapi: KubeAPI, work: Path
) -> None:
    # The variables decide what is judged: here, whether the pods use the host's network.
    template = TOLERATING.replace("hostNetwork: true", "hostNetwork: <<host_network>>")
    write(work / "variable.yaml", template.replace("tensorflow/tensorflow", "<<image>>"))
    write(work / "values.yaml", "image: tensorflow/tensorflow\nhost_network: false\n")
    missing = cli("nodes", "--kubeconfig", "kubeconfig", "--template", "variable.yaml", cwd=work)
    assert_one_line_error(missing, 1, contains=["'host_network' is undefined; give it with --set"])

    on_host = ("--set", "image=tf", "--set", "host_network=true")
    found = by_name(nodes(cli, work, "-o", "json", "--template", "variable.yaml", *on_host))
    assert found["ported"]["reasons"] == ["port 2222 held by ml/other-worker-3"]
    found = by_name(
        nodes(cli, work, "-o", "json", "--template", "variable.yaml", "-f", "values.yaml")
    )
    assert found["ported"]["eligible"] is True  # on the pod network, no host port is needed
    assert found["tainted"]["eligible"] is True  # and the tolerations still count


@pytest.mark.parametrize("given", [("--set", "image=tf"), ("-f", "values.yaml")])
def test_variables_without_a_template_are_a_usage_error(
    cli: Any, kubeapi: KubeAPI, work: Path, given: tuple[str, str]
) -> None:
    refused = cli("nodes", "--kubeconfig", "kubeconfig", *given, cwd=work)
    assert_one_line_error(refused, 2, contains=["a template's variables: it needs --template FILE"])
    assert kubeapi.requests_for("nodes") == []  # refused before the cluster is asked


# -- a saved list: --nodes-file, as a render takes it ---------------------------------------------


def saved_list(kubeapi: KubeAPI, path: Path, form: str) -> Path:
    """The loopback cluster's nodes as `kubectl get nodes -o json|yaml` saves them."""
    import yaml

    document = {"apiVersion": "v1", "kind": "List", "items": kubeapi.nodes}
    path.write_text(json.dumps(document) if form == "json" else yaml.safe_dump(document))
    return path


@pytest.mark.parametrize("form", ["json", "yaml"])
def test_a_saved_node_list_is_judged_as_the_cluster_it_came_from(
    cli: Any, kubeapi: KubeAPI, work: Path, form: str
) -> None:
    """A saved list has no pods: what it shows is the cluster's own view with --no-usage."""
    saved = saved_list(kubeapi, work / f"nodes.{form}", form)
    live = nodes(cli, work, "-o", "json", "--no-usage", "--gpus", "4", "-l", "pool=gpu")
    asked = len(kubeapi.requests)
    result = cli(
        "nodes", "--nodes-file", saved.name, "-o", "json", "--gpus", "4", "-l", "pool=gpu", cwd=work
    )
    assert result.code == 0, result.err
    assert len(kubeapi.requests) == asked  # read from the file, not the cluster
    # The same verdicts as the cluster's; the nodes -l leaves out stay, saying why (as
    # render --explain says it of a saved list, which the server did not filter).
    found, shown = by_name(result), by_name(live)
    assert {name: found[name] for name in shown} == shown
    assert list(shown) == ["full", "half", "ported", "tainted"]
    assert found["cpu"]["reasons"] == ["labels do not match --selector", "0 GPUs < 4"]
    assert found["cordoned"]["reasons"] == ["cordoned", "labels do not match --selector"]
    assert found["tainted"]["reasons"] == ["taint nvidia.com/gpu=present:NoSchedule"]
    assert live.err == "4 nodes: 2 eligible, 16 GPUs allocatable (pods not read)\n"
    assert result.err == "6 nodes: 2 eligible, 16 GPUs allocatable (pods not read)\n"
    # --template judges it as a render from the same file would
    judged = cli(
        "nodes", "--nodes-file", saved.name, "-o", "json", "--template", "tolerating.yaml", cwd=work
    )
    assert by_name(judged)["tainted"]["eligible"] is True
    render = cli("tolerating.yaml", "--nodes-file", saved.name, "-o", "-", cwd=work)
    assert render.code == 0, render.err
    used = {d["spec"]["template"]["spec"]["nodeName"] for d in render.docs}
    assert used == {name for name, n in by_name(judged).items() if n["eligible"]}


def test_a_host_list_file_is_taken_as_a_render_takes_it(cli: Any, tmp_path: Path) -> None:
    write(tmp_path / "hosts", "# two hosts\nh2\nh1\n")
    result = cli("nodes", "--nodes-file", "hosts", cwd=tmp_path)
    assert result.code == 0, result.err
    rows = [line.split() for line in result.out.splitlines()]
    assert rows == [
        ["NAME", "ELIGIBLE", "REASON", "GPU(FREE/ALLOC)", "PODS"],
        ["h2", "yes", "-", "0/0", "-"],  # the file's order, as a render keeps it
        ["h1", "yes", "-", "0/0", "-"],
    ]
    refused = cli("nodes", "--nodes-file", "hosts", "--gpus", "1", cwd=tmp_path)
    assert_one_line_error(
        refused,
        2,
        contains=["--gpus needs node objects, but nodes file 'hosts' gives only host names"],
    )


def test_a_nodes_file_and_a_cluster_are_one_or_the_other(
    cli: Any, kubeapi: KubeAPI, work: Path
) -> None:
    write(work / "hosts", "h1\n")
    refused = cli("nodes", "--nodes-file", "hosts", "--kubeconfig", "kubeconfig", cwd=work)
    assert_one_line_error(refused, 2, contains=["--kubeconfig reads nodes from a cluster"])
    missing = cli("nodes", "--nodes-file", "nope.json", cwd=work)
    assert_one_line_error(missing, 1, contains=["nope.json"])
    assert kubeapi.requests_for("nodes") == []
