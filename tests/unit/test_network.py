"""--network pod (headless Services and DNS names) and --tasks-per-host."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, assert_one_line_error, needs_extra, tf_config_of, write
from tests.support.templates import LEGACY_HOSTS as POD_TEMPLATE


def jobs_and_services(docs: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    return [d for d in docs if d["kind"] == "Job"], [d for d in docs if d["kind"] == "Service"]


@pytest.mark.parametrize(
    ("extra", "suffix"),
    [
        ([], ".default.svc"),
        (["--namespace", "ml", "--cluster-domain", "cluster.local"], ".ml.svc.cluster.local"),
    ],
)
def test_pod_network_addresses_are_emitted_services(
    cli: Any, tmp_path: Path, extra: list[str], suffix: str
) -> None:
    template = write(tmp_path / "t.yaml", POD_TEMPLATE)
    result = cli(
        str(template), "--nodes", "a,b,c,d", "--chief", "--network", "pod", *extra, "-o", "-"
    )
    assert result.code == 0, result.err
    docs = result.docs
    assert [d["kind"] for d in docs] == ["Job", "Service"] * 4
    jobs, services = jobs_and_services(docs)
    namespace = suffix.split(".")[1]
    for job, service in zip(jobs, services, strict=True):
        assert service["metadata"]["name"] == job["metadata"]["name"]
        assert service["metadata"]["namespace"] == namespace
        assert job["metadata"]["namespace"] == namespace
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["publishNotReadyAddresses"] is True
        assert service["spec"]["selector"] == {"job-name": job["metadata"]["name"]}
        port = job["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"]
        assert service["spec"]["ports"][0]["port"] == port
        # Named, as server-side apply on v1.20 needs both keys of the port list.
        assert service["spec"]["ports"][0]["protocol"] == "TCP"
        assert (
            service["metadata"]["labels"]["simpletfjob/role"]
            == job["metadata"]["labels"]["simpletfjob/role"]
        )
    served = {f"{s['metadata']['name']}{suffix}:{s['spec']['ports'][0]['port']}" for s in services}
    for job in jobs:
        config = tf_config_of(job)
        addresses = [a for role in config["cluster"].values() for a in role]
        assert set(addresses) == served
        name = job["metadata"]["name"]
        role, index = config["task"]["type"], config["task"]["index"]
        assert config["cluster"][role][index].startswith(f"{name}{suffix}:")
        args = job["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args[0] == "--ps_hosts=" + ",".join(config["cluster"]["ps"])
        assert args[1] == "--worker_hosts=" + ",".join(config["cluster"]["worker"])


def test_pod_network_uses_the_templates_namespace(cli: Any, tmp_path: Path) -> None:
    text = POD_TEMPLATE.replace(
        "  name: t-<<type>>-<<index>>", "  name: t-<<type>>-<<index>>\n  namespace: team"
    )
    template = write(tmp_path / "t.yaml", text)
    result = cli(str(template), "--nodes", "a,b", "--network", "pod", "-o", "-")
    assert result.code == 0, result.err
    jobs, services = jobs_and_services(result.docs)
    assert {s["metadata"]["namespace"] for s in services} == {"team"}
    assert tf_config_of(jobs[0])["cluster"]["ps"] == ["t-ps-0.team.svc:2222"]
    clash = cli(
        str(template), "--nodes", "a,b", "--network", "pod", "--namespace", "other", "-o", "-"
    )
    assert clash.code == 2 and clash.out == ""
    assert "sets namespace 'team' but --namespace is 'other'" in clash.err


def test_pod_network_without_labels_still_selects_pods(cli: Any, tmp_path: Path) -> None:
    template = write(tmp_path / "t.yaml", POD_TEMPLATE)
    result = cli(str(template), "--nodes", "a,b", "--network", "pod", "--no-labels", "-o", "-")
    _, services = jobs_and_services(result.docs)
    assert all("labels" not in s["metadata"] for s in services)
    assert [s["spec"]["selector"] for s in services] == [
        {"job-name": "t-ps-0"},
        {"job-name": "t-worker-0"},
    ]


def test_service_names_must_be_dns_1035(cli: Any, tmp_path: Path) -> None:
    text = POD_TEMPLATE.replace("name: t-<<type>>-<<index>>", "name: <<index>>-<<type>>")
    result = cli(
        str(write(tmp_path / "t.yaml", text)), "--nodes", "a,b", "--network", "pod", "-o", "-"
    )
    assert result.code == 1 and result.out == ""
    assert "Service name '0-ps' is not a valid DNS label (RFC 1035" in result.err


def host_port_pairs(docs: list[Any]) -> list[tuple[str, int]]:
    pairs = []
    for doc in docs:
        config = tf_config_of(doc)
        host, port = config["cluster"][config["task"]["type"]][config["task"]["index"]].split(":")
        pairs.append((host, int(port)))
    return pairs


def test_tasks_per_host_walk_and_ports(cli: Any) -> None:
    result = cli(
        "mnist.yaml",
        "--nodes",
        "ha,hb",
        "-N",
        "2",
        "--tasks-per-host",
        "2",
        "--psn",
        "1",
        "--port",
        "5000",
        "-o",
        "-",
        cwd=EXAMPLES,
    )
    assert result.code == 0, result.err
    docs = result.docs
    walk = [(d["metadata"]["name"], d["spec"]["template"]["spec"]["nodeName"]) for d in docs]
    assert walk == [
        ("mnist-ps-0", "ha"),
        ("mnist-worker-0", "ha"),
        ("mnist-worker-1", "hb"),
        ("mnist-worker-2", "hb"),
    ]
    pairs = host_port_pairs(docs)
    assert pairs == [("ha", 5000), ("ha", 5001), ("hb", 5000), ("hb", 5001)]
    assert "4 tasks" in result.err and "ha:5001" in result.err


def test_tasks_per_host_port_variable_matches_tf_config(cli: Any, tmp_path: Path) -> None:
    template = write(
        tmp_path / "t.yaml",
        POD_TEMPLATE.replace(
            "image: tensorflow/tensorflow",
            "image: tf\n          command: [serve, '--port=<<port>>']",
        ),
    )
    result = cli(
        str(template),
        "--nodes",
        "a,b,c",
        "--tasks-per-host",
        "3",
        "--chief",
        "--evaluator",
        "--evaluator-in-cluster",
        "--psn",
        "2",
        "-o",
        "-",
    )
    assert result.code == 0, result.err
    docs = result.docs
    pairs = host_port_pairs(docs)
    assert len(pairs) == len(set(pairs)) == 9
    for doc, (_, port) in zip(docs, pairs, strict=True):
        container = doc["spec"]["template"]["spec"]["containers"][0]
        assert container["ports"][0]["containerPort"] == port
        assert container["command"][1] == f"--port={port}"
    roles = [tf_config_of(d)["task"]["type"] for d in docs]
    assert roles == [
        "chief",
        "ps",
        "ps",
        "worker",
        "worker",
        "worker",
        "worker",
        "worker",
        "evaluator",
    ]


def test_tasks_per_host_limits(cli: Any) -> None:
    result = cli("mnist.yaml", "--nodes", "a", "--tasks-per-host", "0", cwd=EXAMPLES)
    assert result.code == 2 and "--tasks-per-host must be at least 1" in result.err
    result = cli(
        "mnist.yaml", "--nodes", "a", "--tasks-per-host", "3", "--port", "65534", cwd=EXAMPLES
    )
    assert result.code == 2 and "goes past port 65535" in result.err


@needs_extra("validate")
def test_pod_network_output_validates(cli: Any, tmp_path: Path) -> None:
    template = write(tmp_path / "t.yaml", POD_TEMPLATE)
    result = cli(str(template), "--nodes", "a,b,c", "--network", "pod", "--validate", "-o", "-")
    assert result.code == 0, result.err
    assert "valid for Kubernetes" in result.err
    assert [d["kind"] for d in result.docs] == ["Job", "Service"] * 3


@pytest.mark.parametrize("source", ["host list", "cluster"])
def test_pod_network_and_tasks_per_host_combine_with_everything(
    cli: Any, request: pytest.FixtureRequest, tmp_path: Path, source: str
) -> None:
    """-E, --psf, --chief, --evaluator, --tasks-per-host, --network pod and labels, from either source."""
    if source == "cluster":
        from tests.support.kubeapi import make_node, write_kubeconfig

        kubeapi = request.getfixturevalue("kubeapi")
        kubeapi.set_nodes(
            [
                make_node("n3"),
                make_node("n1"),
                make_node("down", ready=False),
                make_node("n2"),
                make_node("n4"),
                make_node("cp", control_plane=True),
            ]
        )
        hosts = ["--kubeconfig", str(write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url))]
    else:
        hosts = ["--nodes", "n1,n2,n3,n4"]
    write(tmp_path / "exc", "n2\n")
    write(tmp_path / "ps", "n4\n")
    template = write(tmp_path / "t.yaml", POD_TEMPLATE)
    args = [str(template), *hosts, "-E", "--psf", "ps", "--chief", "--evaluator"]
    args += ["--tasks-per-host", "2", "--network", "pod", "--port", "4000", "-o", "-"]
    first = cli(*args, cwd=tmp_path)
    assert first.code == 0, first.err
    assert first.out == cli(*args, cwd=tmp_path).out  # byte for byte
    jobs, services = jobs_and_services(first.docs)
    # Eligible: n1, n3, n4 (n2 excluded; from the cluster, down is NotReady and cp tainted),
    # so 6 slots: n1:4000 n1:4001 n3:4000 n3:4001 n4:4000 n4:4001; n4's first is the ps.
    labels = [j["metadata"]["labels"] for j in jobs]
    walk = [(x["simpletfjob/role"], x["simpletfjob/index"]) for x in labels]
    assert walk == [
        ("chief", "0"),
        ("ps", "0"),
        ("worker", "0"),
        ("worker", "1"),
        ("worker", "2"),
        ("evaluator", "0"),
    ]
    config = tf_config_of(jobs[0])
    assert config["cluster"] == {
        "chief": ["t-chief-0.default.svc:4000"],
        "ps": ["t-ps-0.default.svc:4000"],
        "worker": [
            "t-worker-0.default.svc:4001",
            "t-worker-1.default.svc:4000",
            "t-worker-2.default.svc:4001",
        ],
    }
    served = {
        f"{s['metadata']['name']}.default.svc:{s['spec']['ports'][0]['port']}" for s in services
    }
    assert {a for role in config["cluster"].values() for a in role} <= served
    assert all(s["metadata"]["labels"]["simpletfjob/job"] == "t" for s in services)


@pytest.mark.parametrize(
    "ports",
    [
        "            - containerPort: 2222\n              hostPort: 2222\n",
        "            - containerPort: 9090\n              hostPort: 9090\n",
    ],
    ids=["the-task-port-fixed", "a-fixed-extra-port"],
)
def test_tasks_on_one_node_may_not_hold_the_same_host_port(
    cli: Any, tmp_path: Path, ports: str
) -> None:
    """With --tasks-per-host, a host port the template fixes would be every task's on that node."""
    text = (EXAMPLES / "mnist.yaml").read_text()
    text = re.sub(
        r"            - containerPort: <<port>>\n              hostPort: <<port>>\n", ports, text
    )
    assert "<<port>>" not in text
    write(tmp_path / "fixed.yaml", text)
    result = cli("fixed.yaml", "--nodes", "a,b", "--tasks-per-host", "2", "-o", "-", cwd=tmp_path)
    port = re.search(r"hostPort: (\d+)", ports)[1]  # type: ignore[index]
    assert_one_line_error(
        result,
        1,
        rf"^simpletfjob: error: --tasks-per-host 2: ps 0 and worker 0 on node 'a' would both hold "
        rf"host port {port}; declare it in the template as <<port>>, which moves with each "
        r"task's port, or give each task a node of its own$",
    )
    assert cli("fixed.yaml", "--nodes", "a,b", "-o", "-", cwd=tmp_path).code == 0  # one each: fine


def test_explain_says_which_address_the_tasks_reach_each_other_at(cli: Any, tmp_path: Path) -> None:
    """A node's name resolves inside a pod only where the cluster's DNS knows it: --explain says
    the tasks use names, and how to give them an address instead."""
    template = write(tmp_path / "t.yaml", POD_TEMPLATE)
    named = cli(str(template), "--nodes", "a,b", "-o", "-", "--explain")
    assert named.code == 0, named.err
    lines = named.err.splitlines()
    assert lines[3] == "2 nodes: 2 eligible"
    assert lines[4] == (
        "the tasks reach each other at their nodes' names (--address name), which their pods "
        "must resolve; --address internal-ip gives them the nodes' InternalIP"
    )
    pods = cli(str(template), "--nodes", "a,b", "-o", "-", "--explain", "--network", "pod")
    assert pods.err.splitlines()[4] == (
        "the tasks reach each other at their Services' DNS names (--network pod)"
    )
    failed = cli(str(template), "--nodes", "a", "-N", "2", "-o", "-", "--explain")
    assert failed.code == 1
    assert "reach each other" not in failed.err  # no tasks, no addresses
