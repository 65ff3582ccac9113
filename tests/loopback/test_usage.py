"""Placing by what the nodes' pods take: free GPUs, host ports, --port auto, on the loopback server.

Each test loads nodes and pods into the loopback API server and runs the CLI through
a real kubeconfig and the real `kubernetes` client; the pods' requests are read as the
server returns them (defaults, managedFields and all).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_one_line_error, tf_config_of, write
from tests.support.kubeapi import (
    KubeAPI,
    make_job,
    make_node,
    make_pod,
    serve,
    sidecar,
    write_kubeconfig,
)
from tests.support.templates import HOST_NETWORK, POD_NETWORK

GPU = "nvidia.com/gpu"


# A hostNetwork pod's container port holds the host's port; a UDP port does not hold TCP's.
AGENT = {"name": "agent", "image": "x", "ports": [{"containerPort": 2222}]}
DNS = {
    "name": "dns",
    "image": "x",
    "ports": [{"containerPort": 2222, "hostPort": 2222, "protocol": "UDP"}],
}


def gpu_pod(name: str, node: str, gpus: int, **kwargs: Any) -> dict[str, Any]:
    return make_pod(name, "ml", node=node, requests={GPU: str(gpus), "cpu": "1"}, **kwargs)


def port_pod(name: str, node: str, port: int = 2222, **kwargs: Any) -> dict[str, Any]:
    return make_pod(name, "ml", node=node, host_ports=[port], **kwargs)


@pytest.fixture
def work(kubeapi: KubeAPI, tmp_path: Path) -> Path:
    write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    write(tmp_path / "pod.yaml", POD_NETWORK)
    write(tmp_path / "host.yaml", HOST_NETWORK)
    return tmp_path


def run(cli: Any, cwd: Path, *args: str) -> Any:
    return cli(*args, "--kubeconfig", "kubeconfig", cwd=cwd)


def render(cli: Any, cwd: Path, template: str, *args: str) -> Any:
    result = run(cli, cwd, template, "-o", "-", *args)
    assert result.code == 0, result.err
    return result


def node_names(result: Any) -> list[str]:
    return [d["spec"]["template"]["spec"]["nodeName"] for d in result.docs]


# ---- free GPUs -------------------------------------------------------------------------------


def busy_cluster(api: KubeAPI) -> None:
    """n1 full, n2 half taken (by a limit alone), n3 taken by pods that have ended, n4 idle."""
    api.set_nodes([make_node(f"n{i}", gpus=8) for i in range(1, 5)])
    api.load(
        "pods",
        [
            gpu_pod("full", "n1", 8),
            make_pod("half", "team", node="n2", limits={GPU: "4"}),
            gpu_pod("done", "n3", 8, phase="Succeeded"),
            gpu_pod("crashed", "n3", 8, phase="Failed"),
            gpu_pod("waiting", "n4", 0, phase="Pending"),
        ],
    )


def test_gpus_counts_free_gpus(cli: Any, kubeapi: KubeAPI, work: Path) -> None:
    busy_cluster(kubeapi)
    assert node_names(render(cli, work, "pod.yaml", "-N", "2", "--gpus", "8")) == ["n3", "n4"]
    assert node_names(render(cli, work, "pod.yaml", "-N", "3", "--gpus", "4")) == ["n2", "n3", "n4"]
    refused = run(cli, work, "pod.yaml", "-o", "-", "-N", "4", "--gpus", "4")
    assert_one_line_error(refused, 1, contains=["4 nodes: 3 eligible, 1 without enough free GPUs"])


def test_no_usage_judges_by_allocatable(cli: Any, kubeapi: KubeAPI, work: Path) -> None:
    busy_cluster(kubeapi)
    result = render(cli, work, "pod.yaml", "-N", "2", "--gpus", "8", "--no-usage")
    assert node_names(result) == ["n1", "n2"]
    assert kubeapi.requests_for("pods") == []


def test_a_pending_pod_bound_to_a_node_takes_its_gpus(
    cli: Any, kubeapi: KubeAPI, work: Path
) -> None:
    kubeapi.set_nodes([make_node("a", gpus=4), make_node("b", gpus=4)])
    kubeapi.load(
        "pods",
        [gpu_pod("starting", "a", 2, phase="Pending"), gpu_pod("lost", "b", 1, phase="Unknown")],
    )
    result = run(cli, work, "nodes", "-o", "json")
    assert result.code == 0, result.err
    gpus = {n["name"]: n["gpu"] for n in json.loads(result.out)}
    assert gpus == {
        "a": {"allocatable": 4, "requested": 2, "free": 2},
        "b": {"allocatable": 4, "requested": 1, "free": 3},
    }


def test_gpu_resource_chooses_what_is_counted(cli: Any, kubeapi: KubeAPI, work: Path) -> None:
    nodes = [make_node(f"m{i}") for i in range(1, 4)]
    for node in nodes:
        node["status"]["allocatable"]["amd.com/gpu"] = "4"
        node["status"]["capacity"]["amd.com/gpu"] = "4"
    kubeapi.set_nodes(nodes)
    kubeapi.load("pods", [make_pod("rocm", "ml", node="m1", requests={"amd.com/gpu": "3"})])
    args = ("-N", "2", "--gpus", "2", "--gpu-resource", "amd.com/gpu")
    assert node_names(render(cli, work, "pod.yaml", *args)) == ["m2", "m3"]
    refused = run(cli, work, "pod.yaml", "-o", "-", "-N", "1", "--gpus", "1")  # nvidia.com/gpu
    assert_one_line_error(refused, 1, contains=["3 nodes: 0 eligible, 3 without enough free GPUs"])


def test_init_containers_sidecars_and_overhead_count_as_the_scheduler_counts_them(
    cli: Any, kubeapi: KubeAPI, work: Path
) -> None:
    kubeapi.set_nodes([make_node(f"n{i}", gpus=8) for i in range(1, 4)])
    init = {"name": "warm", "image": "x", "resources": {"requests": {GPU: "6"}}}
    kubeapi.load(
        "pods",
        [
            # the largest init step (6) beats the containers (1): 6 of 8 taken
            make_pod("init", "ml", node="n1", requests={GPU: "1"}, init_containers=[init]),
            # a sidecar runs beside the containers: 2 + 3 = 5 taken
            make_pod(
                "side",
                "ml",
                node="n2",
                requests={GPU: "2"},
                init_containers=[sidecar("s", requests={GPU: "3"})],
            ),
            # overhead is added: 1 + 1 = 2 taken
            make_pod("vm", "ml", node="n3", requests={GPU: "1"}, overhead={GPU: "1"}),
        ],
    )
    result = run(cli, work, "nodes", "-o", "json")
    free = {n["name"]: n["gpu"]["free"] for n in json.loads(result.out)}
    assert free == {"n1": 2, "n2": 3, "n3": 6}


# ---- host ports -------------------------------------------------------------------------------


def test_a_node_whose_port_is_held_is_not_eligible(cli: Any, kubeapi: KubeAPI, work: Path) -> None:
    kubeapi.set_nodes([make_node(f"n{i}") for i in range(1, 5)])
    kubeapi.load(
        "pods",
        [
            port_pod("other-worker-3", "n1"),
            make_pod("agent", "kube-system", node="n2", host_network=True, containers=[AGENT]),
            make_pod("dns", "kube-system", node="n3", containers=[DNS]),
            port_pod("ended", "n4", phase="Succeeded"),
        ],
    )
    result = render(cli, work, "host.yaml", "-N", "2", "--explain")
    assert node_names(result) == ["n3", "n4"]  # a UDP port and an ended pod leave 2222/TCP free
    rows = {line.split()[0]: line for line in result.err.splitlines()[1:5]}
    assert rows["n1"].endswith("port 2222 held by ml/other-worker-3")
    assert rows["n2"].endswith("port 2222 held by kube-system/agent")


def test_a_run_does_not_count_its_own_pods(cli: Any, kubeapi: KubeAPI, work: Path) -> None:
    """A re-render of a running run sees its own ports and GPUs as its own."""
    kubeapi.set_nodes([make_node("n1", gpus=8), make_node("n2", gpus=8)])
    ours = {"simpletfjob/job": "host"}
    jobs = [make_job(f"t-{task}", "ml", labels=ours) for task in ("ps-0", "worker-0")]
    kubeapi.load("jobs", jobs)
    kubeapi.load(
        "pods",
        [
            make_pod(
                f"t-{task}-x", "ml", node=node, labels=ours, requests={GPU: "8"},
                host_ports=[2222], owner=job,
            )
            for task, node, job in zip(("ps-0", "worker-0"), ("n1", "n2"), jobs, strict=True)
        ] + [
            # the same label in another namespace is another run
            make_pod("elsewhere", "team", node="n2", labels=ours, requests={GPU: "1"}),
        ],
    )  # fmt: skip
    assert node_names(render(cli, work, "host.yaml", "--gpus", "7")) == ["n1", "n2"]
    refused = run(cli, work, "host.yaml", "-o", "-", "--gpus", "8")
    assert_one_line_error(refused, 1, contains=["2 nodes: 1 eligible, 1 without enough free GPUs"])
    # Under another name it is another run, which the pods hold the port against.
    refused = run(cli, work, "host.yaml", "-o", "-", "--name", "other")
    assert_one_line_error(refused, 1, contains=["2 nodes: 0 eligible, 2 ports held"])


def test_every_eligible_host_says_which_nodes_what_their_pods_hold_left_out(
    cli: Any, kubeapi: KubeAPI, work: Path
) -> None:
    """-N -1 took one node of four: one warning line says so, with why, after the run."""
    kubeapi.set_nodes([make_node(f"n{i}", gpus=8) for i in range(1, 6)] + [make_node("cpu")])
    kubeapi.load(
        "pods",
        [
            port_pod("stale-0", "n2"),
            port_pod("stale-1", "n3"),
            gpu_pod("big", "n4", 7),
            port_pod("both", "n5", labels={}, requests={GPU: "8"}),
        ],
    )
    result = render(cli, work, "host.yaml", "--gpus", "2", "--psn", "0")
    assert node_names(result) == ["n1"]
    warning, wrote = result.err.splitlines()
    # cpu has no GPU at all: not left out for what its pods hold.
    assert warning == (
        "simpletfjob: warning: -N -1: the run got 1 task on 1 node; 4 nodes otherwise eligible "
        "were left out for what their pods hold: 2 with port 2222 held (n2, n3), "
        "2 with too few free GPUs (n4, n5)"
    )
    assert wrote.startswith("simpletfjob: wrote 1 task")
    # With -N, the run got what it asked for: nothing to say.
    asked = render(cli, work, "host.yaml", "--gpus", "2", "--psn", "0", "-N", "1")
    assert len(asked.err.splitlines()) == 1
    # A run that fails says only its error.
    refused = run(cli, work, "host.yaml", "-o", "-", "--gpus", "2", "--psn", "2")
    assert_one_line_error(refused, 1)


def test_port_auto_picks_the_lowest_port_free_on_every_chosen_node(
    cli: Any, kubeapi: KubeAPI, work: Path
) -> None:
    kubeapi.set_nodes([make_node(f"n{i}") for i in range(1, 4)])
    kubeapi.load(
        "pods",
        [port_pod("a", "n1", 2222), port_pod("b", "n2", 2223), port_pod("c", "n3", 2225)],
    )
    result = render(cli, work, "host.yaml", "--port", "auto", "--tasks-per-host", "2")
    # 2222..2223 and 2223..2224 are held somewhere; 2224..2225 too; 2226..2227 is free.
    assert result.err.splitlines()[0] == (
        "simpletfjob: --port auto chose port 2226 (2222 is held by ml/a on n1)"
    )
    ports = set()
    for doc in result.docs:
        (container,) = doc["spec"]["template"]["spec"]["containers"]
        port = container["ports"][0]
        assert port["hostPort"] == port["containerPort"]
        ports.add(port["hostPort"])
        config = tf_config_of(doc)
        assert all(
            int(e.rsplit(":", 1)[1]) in (2226, 2227) for r in config["cluster"].values() for e in r
        )
    assert ports == {2226, 2227}


def test_port_auto_on_a_built_in_template(cli: Any, kubeapi: KubeAPI, work: Path) -> None:
    kubeapi.set_nodes([make_node(f"n{i}") for i in range(1, 4)])
    kubeapi.load("pods", [port_pod("a", "n3", 2222)])
    result = render(cli, work, "tf2-multiworker", "--port", "auto", "-N", "2")
    # The nodes first (n1 and n2: n3 is not needed), then the port free on them.
    assert result.err.splitlines()[0] == "simpletfjob: --port auto chose port 2222"
    assert node_names(result) == ["n1", "n2"]
    result = render(cli, work, "tf2-multiworker", "--port", "auto")
    assert result.err.splitlines()[0] == (
        "simpletfjob: --port auto chose port 2223 (2222 is held by ml/a on n3)"
    )
    assert node_names(result) == ["n1", "n2", "n3"]
    for doc in result.docs:
        port = doc["spec"]["template"]["spec"]["containers"][0]["ports"][0]
        assert (port["containerPort"], port["hostPort"]) == (2223, 2223)
        assert tf_config_of(doc)["cluster"]["worker"] == ["n1:2223", "n2:2223", "n3:2223"]


def test_port_auto_needs_the_pods(cli: Any, work: Path) -> None:
    refused = cli("host.yaml", "--nodes", "a,b", "--port", "auto", "-o", "-", cwd=work)
    assert_one_line_error(refused, 2, contains=["--port auto", "--nodes gives no pods", "--port N"])
    refused = run(cli, work, "host.yaml", "--port", "auto", "--no-usage", "-o", "-")
    assert_one_line_error(refused, 2, contains=["cannot go with --no-usage"])


# ---- how pods are read ------------------------------------------------------------------------


def test_a_small_run_on_a_large_cluster_reads_the_candidates_pods_node_by_node(
    cli: Any, kubeapi: KubeAPI, work: Path
) -> None:
    names = [f"n{i:03d}" for i in range(100)]
    kubeapi.set_nodes([make_node(n, gpus=8, images=1) for n in names])
    kubeapi.load("pods", [gpu_pod(f"busy-{n}", n, 8) for n in names[:5]])
    result = render(cli, work, "pod.yaml", "-N", "2", "--gpus", "8")
    assert node_names(result) == ["n005", "n006"]
    requests = kubeapi.requests_for("pods", "list")
    asked = [r.query["fieldSelector"] for r in requests]
    read = [s.split(",")[0].removeprefix("spec.nodeName=") for s in asked]
    assert sorted(read) == names[: len(read)]  # from the first, in order (several at a time)
    assert 7 <= len(read) < 50  # stopped once two had room (a few more were in flight)
    assert all(s.endswith(",status.phase!=Succeeded,status.phase!=Failed") for s in asked)
    assert all(r.query["resourceVersion"] == "0" for r in requests)
    assert all(r.path == "/api/v1/pods" for r in requests)


def test_a_large_run_reads_every_pod_in_one_paginated_list(
    cli: Any, kubeapi: KubeAPI, work: Path
) -> None:
    names = [f"n{i:03d}" for i in range(20)]
    kubeapi.set_nodes([make_node(n, gpus=8, images=1) for n in names])
    kubeapi.load("pods", [gpu_pod(f"p{i}", names[i % 20], 3 if i < 20 else 0) for i in range(1200)])
    result = render(cli, work, "pod.yaml", "-N", "-1", "--gpus", "1", "--explain")
    assert node_names(result) == names
    requests = kubeapi.requests_for("pods", "list")
    assert len(requests) == 3  # 1200 pods in pages of 500
    assert {r.path for r in requests} == {"/api/v1/pods"}
    assert requests[0].query == {
        "fieldSelector": "status.phase!=Succeeded,status.phase!=Failed",
        "limit": "500",
    }
    assert all("continue" in r.query for r in requests[1:])
    rows = [line.split() for line in result.err.splitlines()[1:21]]
    assert all(row[4] == "5/8" for row in rows)  # one pod of 3 GPUs on every node


# ---- a user who cannot list pods ---------------------------------------------------------------


@pytest.fixture
def no_pods(kube_env: Path, tmp_path: Path) -> Iterator[Path]:
    """A cluster whose user may list nodes, not pods."""
    api = KubeAPI()
    api.grant("system:anonymous", "list", "nodes")
    with serve(api) as served:
        served.set_nodes([make_node("n1", gpus=8), make_node("n2", gpus=8)])
        write_kubeconfig(tmp_path / "kubeconfig", served.url)
        write(tmp_path / "pod.yaml", POD_NETWORK)
        write(tmp_path / "host.yaml", HOST_NETWORK)
        yield tmp_path


def test_gpus_without_the_right_to_list_pods_is_an_error(cli: Any, no_pods: Path) -> None:
    refused = run(cli, no_pods, "pod.yaml", "-o", "-", "--gpus", "1")
    line = assert_one_line_error(refused, 1)
    assert "cannot list pods in all namespaces (403 Forbidden)" in line
    assert "it needs a ClusterRole with verb 'list' on 'pods'" in line
    assert line.endswith("or give --no-usage to judge GPUs by allocatable alone")
    result = render(cli, no_pods, "pod.yaml", "--gpus", "1", "--no-usage")
    assert node_names(result) == ["n1", "n2"]


def test_port_auto_without_the_right_to_list_pods_is_an_error(cli: Any, no_pods: Path) -> None:
    refused = run(cli, no_pods, "host.yaml", "-o", "-", "--port", "auto")
    line = assert_one_line_error(refused, 1, contains=["cannot list pods"])
    assert line.endswith("or give --port N")


def test_host_ports_without_the_right_to_list_pods_is_a_warning(cli: Any, no_pods: Path) -> None:
    result = render(cli, no_pods, "host.yaml")
    assert node_names(result) == ["n1", "n2"]
    warning, summary = result.err.splitlines()
    assert warning.startswith("simpletfjob: warning: cannot list pods: host ports not checked")
    assert summary.startswith("simpletfjob: wrote 2 tasks")


def test_nodes_without_the_right_to_list_pods(cli: Any, no_pods: Path) -> None:
    result = run(cli, no_pods, "nodes", "-o", "json")
    assert result.code == 0
    assert [n["pods"] for n in json.loads(result.out)] == [None, None]
    warning, summary = result.err.splitlines()
    assert warning.startswith(
        "simpletfjob: warning: cannot list pods: free GPUs and host ports not checked"
    )
    assert summary == "2 nodes: 2 eligible, 16 GPUs allocatable (pods not read)"
    refused = run(cli, no_pods, "nodes", "--gpus", "1")
    assert_one_line_error(refused, 1, contains=["cannot list pods", "--no-usage"])


def test_without_the_right_to_list_jobs_the_pods_still_count_after_a_warning(
    cli: Any, kube_env: Path, tmp_path: Path
) -> None:
    api = KubeAPI()
    api.grant("system:anonymous", "list", "nodes")
    api.grant("system:anonymous", "list", "pods")
    with serve(api) as served:
        served.set_nodes([make_node("n1", gpus=8), make_node("n2", gpus=8)])
        ours = {"simpletfjob/job": "host"}
        job = make_job("t-worker-0", "ml", labels=ours)
        served.load(
            "pods",
            [
                port_pod("t-worker-0-x", "n1", labels=ours, owner=job),  # the run's own
                port_pod("other", "n2"),
            ],
        )
        write_kubeconfig(tmp_path / "kubeconfig", served.url)
        write(tmp_path / "host.yaml", HOST_NETWORK)
        result = render(cli, tmp_path, "host.yaml", "--port", "auto")
        warning, chose, wrote = result.err.splitlines()
        assert warning.startswith(
            "simpletfjob: warning: cannot list jobs: the pods that Jobs have yet to make are not "
            "counted, and a pod is the run's own while it has a Job and is not stopping ("
        )
        assert "cannot list jobs in all namespaces (403 Forbidden))" in warning
        assert chose == "simpletfjob: --port auto chose port 2223 (2222 is held by ml/other on n2)"
        assert wrote.startswith("simpletfjob: wrote 2 tasks")
        shown = run(cli, tmp_path, "nodes", "-o", "json")
        assert shown.code == 0, shown.err
        assert [n["hostPorts"] for n in json.loads(shown.out)] == [[2222], [2222]]
        assert shown.err.startswith("simpletfjob: warning: cannot list jobs: the pods that Jobs")


def test_plain_hosts_keep_the_old_meaning(cli: Any, work: Path) -> None:
    write(work / "hosts", "a\nb\n")
    refused = cli("pod.yaml", "--nodes-file", "hosts", "--gpus", "1", "-o", "-", cwd=work)
    assert_one_line_error(refused, 2, contains=["--gpus needs node objects"])


def test_a_port_written_as_a_number_stays_put_under_port_auto(
    cli: Any, kubeapi: KubeAPI, work: Path
) -> None:
    write(work / "fixed.yaml", HOST_NETWORK.replace("<<port>>\n", "2222\n"))
    kubeapi.set_nodes([make_node(f"n{i}") for i in range(1, 4)])
    kubeapi.load("pods", [port_pod("a", "n1", 2222), port_pod("b", "n2", 2223)])
    result = render(cli, work, "fixed.yaml", "--port", "auto", "--explain")
    # n1 holds the template's own 2222 whatever --port is, so it is passed over; on n2
    # and n3, 2222 is free for the tasks' own port (2223 held on n2 does not matter).
    assert node_names(result) == ["n2", "n3"]
    assert "port 2222 held by ml/a" in result.err
    assert "simpletfjob: --port auto chose port 2222\n" in result.err
    assert all(e.endswith(":2222") for e in tf_config_of(result.docs[0])["cluster"]["worker"])


def test_a_small_run_refused_the_pods_of_its_nodes(
    cli: Any, kube_env: Path, tmp_path: Path
) -> None:
    api = KubeAPI()
    api.grant("system:anonymous", "list", "nodes")
    with serve(api) as served:
        served.set_nodes([make_node(f"n{i:02d}", gpus=8, images=1) for i in range(40)])
        write_kubeconfig(tmp_path / "kubeconfig", served.url)
        write(tmp_path / "pod.yaml", POD_NETWORK)
        refused = run(cli, tmp_path, "pod.yaml", "-o", "-", "-N", "2", "--gpus", "1")
        assert_one_line_error(refused, 1, contains=["cannot list pods", "--no-usage"])
        selectors = [r.query.get("fieldSelector", "") for r in served.requests_for("pods")]
        assert selectors and all(s.startswith("spec.nodeName=n") for s in selectors)


def test_a_template_header_may_default_to_port_auto(cli: Any, kubeapi: KubeAPI, work: Path) -> None:
    write(work / "auto.yaml", "# simpletfjob:\n#   options:\n#     port: auto\n" + HOST_NETWORK)
    kubeapi.set_nodes([make_node("n1"), make_node("n2"), make_node("n3")])
    kubeapi.load("pods", [port_pod("a", "n2", 2222)])
    result = render(cli, work, "auto.yaml")
    assert result.err.splitlines()[0] == (
        "simpletfjob: --port auto chose port 2223 (2222 is held by ml/a on n2)"
    )
    assert node_names(render(cli, work, "auto.yaml", "--port", "2222")) == ["n1", "n3"]
    refused = cli("auto.yaml", "--nodes", "a,b", "-o", "-", cwd=work)
    assert_one_line_error(refused, 2, contains=["--port auto", "give --port N"])
    write(work / "bad.yaml", "# simpletfjob:\n#   options:\n#     port: car\n" + HOST_NETWORK)
    refused = cli("bad.yaml", "--nodes", "a,b", "-o", "-", cwd=work)
    assert_one_line_error(refused, 1, contains=["bad.yaml:3: option 'port'", "'car' is not a port"])


def test_port_auto_starts_from_the_frameworks_port(cli: Any, kubeapi: KubeAPI, work: Path) -> None:
    kubeapi.set_nodes([make_node(f"n{i}") for i in range(1, 3)])
    kubeapi.load("pods", [port_pod("a", "n2", 29500), port_pod("b", "n1", 1234)])
    result = render(cli, work, "pytorch-ddp", "--port", "auto", "--set", "gpus=0")
    assert result.err.splitlines()[0] == (
        "simpletfjob: --port auto chose port 29501 (29500 is held by ml/a on n2)"
    )
    env = result.docs[1]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "PET_MASTER_PORT", "value": "29501"} in env
    result = render(cli, work, "jax-multiprocess", "--port", "auto", "--set", "gpus=0")
    assert result.err.splitlines()[0] == (
        "simpletfjob: --port auto chose port 1235 (1234 is held by ml/b on n1)"
    )
