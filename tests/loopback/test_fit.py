"""The fit against a cluster's nodes and pods, on the loopback server: what a task asks against
allocatable less what the nodes' pods (and the Jobs' pods to come) request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_one_line_error, write
from tests.support.kubeapi import (
    KubeAPI,
    make_job,
    make_pod,
    serve,
    sidecar,
    write_kubeconfig,
)
from tests.support.scenes import node_object
from tests.support.templates import FIT_WORKER_GPU as TEMPLATE

GPU = "nvidia.com/gpu"


def node(name: str, gpus: int = 0, cpu: str = "8") -> dict[str, Any]:
    return node_object(name, gpus, images=36, cpu=cpu, memory="16Gi")


@pytest.fixture
def work(kubeapi: KubeAPI, tmp_path: Path) -> Path:
    """g1 (2 GPUs) with both taken by a running pod; g2 (2 GPUs) with 7 of its 8 cpu taken by a
    pod and its sidecar; g3 (1 GPU) free; c1, a CPU node."""
    kubeapi.set_nodes([node("c1"), node("g1", 2), node("g2", 2), node("g3", 1)])
    kubeapi.load(
        "pods",
        [
            make_pod("train", "team", node="g1", limits={GPU: "2"}),
            make_pod(
                "web",
                "team",
                node="g2",
                requests={"cpu": "6"},
                init_containers=[sidecar("proxy", requests={"cpu": "1"})],
            ),
            make_pod("done", "team", node="g3", limits={GPU: "1"}, phase="Succeeded"),
        ],
    )
    write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    write(tmp_path / "t.yaml", TEMPLATE)
    return tmp_path


def run(cli: Any, cwd: Path, *args: str) -> Any:
    return cli(*args, "--kubeconfig", "kubeconfig", cwd=cwd)


def seated(result: Any) -> list[tuple[str, str]]:
    assert result.code == 0, result.err
    return [
        (d["metadata"]["name"].split("-")[1], d["spec"]["template"]["spec"]["nodeName"])
        for d in result.docs
    ]


def test_what_the_pods_hold_is_not_free(cli: Any, work: Path) -> None:
    result = run(cli, work, "t.yaml", "-o", "-", "--explain")
    assert seated(result) == [("ps", "c1"), ("worker", "g3")]
    rows = {line.split()[0]: line for line in result.err.splitlines()[1:5]}
    assert rows["g1"].endswith("worker: nvidia.com/gpu 1 > 0 free")
    assert rows["g2"].endswith("ps, worker: cpu 2 > 1 free")  # 6 + the sidecar's 1 of 8
    assert rows["c1"].endswith("worker: nvidia.com/gpu 1 > 0 free")


def test_a_run_that_cannot_fit_names_where_it_could_go(cli: Any, work: Path) -> None:
    result = run(cli, work, "t.yaml", "-o", "-", "-N", "3", "--psn", "0")
    assert_one_line_error(result)
    assert result.err == (
        "simpletfjob: error: 3 workers ask 1 nvidia.com/gpu each; only 1 node has 1 free beside "
        "the rest of what a worker asks (g3)\n"
    )


def test_no_usage_judges_by_allocatable_alone(cli: Any, work: Path) -> None:
    result = run(cli, work, "t.yaml", "-o", "-", "--no-usage", "--psn", "0")
    assert [n for _, n in seated(result)] == ["g1", "g2", "g3"]


def test_the_pods_a_job_has_yet_to_make_hold_their_room(
    cli: Any, work: Path, kubeapi: KubeAPI
) -> None:
    pinned = {"spec": {"nodeName": "g3", "containers": [{"name": "a", "image": "x"}]}}
    pinned["spec"]["containers"][0]["resources"] = {"limits": {GPU: "1"}}
    kubeapi.load("jobs", [make_job("queued", "team", template=pinned)])
    result = run(cli, work, "t.yaml", "-o", "-", "--psn", "0")
    assert_one_line_error(result)
    assert result.err == (  # g3's GPU is the queued Job's; g2 has GPUs, but not the cpu
        "simpletfjob: error: 4 workers ask 1 nvidia.com/gpu each; no node has 1 free beside the "
        "rest of what a worker asks\n"
    )


def test_nodes_with_a_template_says_per_role_why(cli: Any, work: Path) -> None:
    result = run(cli, work, "nodes", "--template", "t.yaml")
    assert result.code == 0, result.err
    rows = {line.split()[0]: line for line in result.out.splitlines()[1:]}
    assert rows["c1"].split()[1:6] == ["only", "ps", "worker:", "nvidia.com/gpu", "1"]
    shown = json.loads(run(cli, work, "nodes", "--template", "t.yaml", "-o", "json").out)
    reasons = {n["name"]: n["reasons"] for n in shown}
    assert reasons == {
        "c1": ["worker: nvidia.com/gpu 1 > 0 free"],
        "g1": ["worker: nvidia.com/gpu 1 > 0 free"],
        "g2": ["ps, worker: cpu 2 > 1 free"],
        "g3": [],
    }


def test_few_hosts_of_many_read_only_their_own_pods(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    """-N small against many nodes reads the candidates' pods one node at a time: a node whose
    pods leave no room is passed over, and the reading stops once enough have room."""
    kubeapi.set_nodes([node(f"n{i:02d}") for i in range(40)])
    kubeapi.load("pods", [make_pod("big", "team", node="n00", requests={"cpu": "7"})])
    write_kubeconfig(tmp_path / "kubeconfig", kubeapi.url)
    write(tmp_path / "t.yaml", TEMPLATE.replace("{% if", "{% if false and"))
    result = run(cli, tmp_path, "t.yaml", "-o", "-", "-N", "2")
    assert [n for _, n in seated(result)] == ["n01", "n02"]
    selectors = [r.query.get("fieldSelector", "") for r in kubeapi.requests_for("pods", "list")]
    assert selectors and all(s.startswith("spec.nodeName=n") for s in selectors)
    assert len(selectors) < 40  # not every node's


@pytest.fixture
def no_pods(kube_env: Path, tmp_path: Path) -> Iterator[Path]:
    """A cluster whose user may list nodes, not pods."""
    api = KubeAPI()
    api.grant("system:anonymous", "list", "nodes")
    with serve(api) as served:
        served.set_nodes([node("c1"), node("g1", 1)])
        write_kubeconfig(tmp_path / "kubeconfig", served.url)
        write(tmp_path / "t.yaml", TEMPLATE)
        yield tmp_path


def test_without_the_right_to_list_pods_the_fit_is_by_allocatable(cli: Any, no_pods: Path) -> None:
    result = run(cli, no_pods, "t.yaml", "-o", "-")
    assert seated(result) == [("ps", "c1"), ("worker", "g1")]
    warning = result.err.splitlines()[0]
    assert warning.startswith(
        "simpletfjob: warning: cannot list pods: free resources (the fit is judged by "
        "allocatable) not checked (user "
    )
    refused = run(cli, no_pods, "t.yaml", "-o", "-", "--psn", "0", "-N", "2")
    assert_one_line_error(
        refused, contains=["2 workers ask 1 nvidia.com/gpu each; only 1 node has 1 free (g1)"]
    )
