"""The fit: what a task of each role asks, against what each node has free (hosts/fit.py,
plan/fit.py), as pure rules and through a render from a saved NodeList."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simpletfjob.frameworks.tensorflow import place_tasks
from simpletfjob.frameworks.workers import seat_workers
from simpletfjob.hosts.fit import Fit, allocatable, free, ordered, shortfall, tasks_that_fit
from simpletfjob.hosts.nodes import Node
from simpletfjob.hosts.requested import pod_units
from simpletfjob.hosts.usage import NodeUsage
from simpletfjob.quantity import scheduler_units, units_text
from tests.conftest import assert_one_line_error, write
from tests.support.scenes import node_object
from tests.support.templates import FIT_BY_VALUES as TEMPLATE

GPU = "nvidia.com/gpu"


def node(name: str, gpus: int = 0, cpu: str = "8", memory: str = "32Gi", **more: str) -> Node:
    listed = {"cpu": cpu, "memory": memory, "pods": "110", **more}
    if gpus:
        listed[GPU] = str(gpus)
    return Node(name, gpus=gpus, plain=False, allocatable=listed, origin="test")


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    """A saved NodeList: a CPU node, GPU nodes with 2, 1 and 2 GPUs; and the template."""
    items = [node_object("cpu-x"), *(node_object(n, g) for n, g in (("gpu-a", 2), ("gpu-b", 1)))]
    items.append(node_object("gpu-c", 2))
    write(tmp_path / "nodes.json", json.dumps({"kind": "List", "items": items}))
    write(tmp_path / "t.yaml", TEMPLATE)
    return tmp_path


def render(cli: Any, cwd: Path, *args: str) -> Any:
    return cli("t.yaml", "--nodes-file", "nodes.json", "-o", "-", *args, cwd=cwd)


def seated(result: Any) -> list[tuple[str, str]]:
    assert result.code == 0, result.err
    return [
        (d["metadata"]["name"].rsplit("-", 1)[0][2:], d["spec"]["template"]["spec"]["nodeName"])
        for d in result.docs
    ]


# ---- units and the pure rules ---------------------------------------------------------------


@given(st.integers(0, 10**15), st.sampled_from(["cpu", "memory", GPU, "ephemeral-storage"]))
def test_an_amount_shown_reads_back_as_itself(units: int, resource: str) -> None:
    assert scheduler_units(units_text(units, resource), resource) == units


def test_units_are_the_schedulers() -> None:
    assert scheduler_units("250m", "cpu") == 250 and scheduler_units("1.5", "cpu") == 1500
    assert scheduler_units("1Gi", "memory") == 1 << 30 and scheduler_units("0.5", "memory") == 1
    assert units_text(2 << 30, "memory") == "2Gi" and units_text(1500, "cpu") == "1500m"


def test_a_node_has_what_it_lists_and_no_device_it_does_not() -> None:
    n = node("a", cpu="3500m")
    assert allocatable(n, "cpu") == 3500 and allocatable(n, GPU) == 0
    assert allocatable(n, "ephemeral-storage") is None  # not listed: not checked
    assert allocatable(Node("plain"), "cpu") is None and allocatable(Node("plain"), GPU) is None
    used = NodeUsage(0, 2, {}, {"cpu": 3000, GPU: 0})
    assert free(n, used, "cpu") == 500 and free(n, None, "cpu") == 3500


def test_a_shortfall_names_the_first_resource_short() -> None:
    n = node("a", gpus=1, cpu="2")
    ask = (("cpu", 1000), (GPU, 2))
    assert str(shortfall(n, None, ask)) == "nvidia.com/gpu 2 > 1 free"
    assert str(shortfall(n, None, ask, count=3)) == "cpu 3 > 2 free"
    assert shortfall(node("b", gpus=4), None, ask) is None


@given(
    st.lists(st.tuples(st.sampled_from(["cpu", "memory", GPU]), st.integers(1, 5000)), max_size=3),
    st.integers(0, 20000),
    st.integers(0, 8),
    st.integers(1, 6),
)
def test_tasks_that_fit_is_the_count_whose_shortfall_is_none(
    asked: list[tuple[str, int]], cpu: int, gpus: int, most: int
) -> None:
    ask = tuple((r, a) for r, a in dict(asked).items())
    n = node("a", gpus=gpus, cpu=f"{cpu}m", memory="4000")
    fits = tasks_that_fit(n, None, ask, most)
    assert 0 <= fits <= most
    assert fits == 0 or shortfall(n, None, ask, fits) is None
    assert fits == most or shortfall(n, None, ask, fits + 1) is not None


def test_resources_are_ordered_standard_first() -> None:
    assert ordered([GPU, "memory", "amd.com/gpu", "cpu"]) == ["cpu", "memory", "amd.com/gpu", GPU]


def test_a_template_pod_asks_as_the_scheduler_counts_it() -> None:
    """Containers summed, at least the largest init step, a limit standing for a request."""
    pod = {
        "containers": [
            {"resources": {"requests": {"cpu": "500m"}, "limits": {GPU: "1", "memory": "1Gi"}}},
            {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
        ],
        "initContainers": [{"resources": {"requests": {"cpu": "3"}}}],
        "overhead": {"memory": "64Mi"},
    }
    assert pod_units(pod, ["cpu", "memory", GPU]) == [3000, (2 << 30) + (64 << 20), 1]


# ---- the seating walk with room --------------------------------------------------------------


@given(
    st.lists(st.integers(0, 4), min_size=1, max_size=6),
    st.integers(1, 4),
    st.integers(1, 3),
)
def test_workers_never_take_more_than_a_node_has_free(
    free_gpus: list[int], per_host: int, each: int
) -> None:
    nodes = [node(f"n{i}", gpus=g) for i, g in enumerate(free_gpus)]
    fit = Fit([(n, None) for n in nodes], {"worker": ((GPU, each),)})
    names = [n.name for n in nodes]
    if all(g < each for g in free_gpus):
        with pytest.raises(Exception, match="no host is left"):
            seat_workers(names, -1, per_host, None, lambda: "", fit)
        return
    seats = seat_workers(names, -1, per_host, None, lambda: "", fit)
    on = [sum(1 for host, _ in seats["worker"] if host == i) for i in range(len(nodes))]
    # As many as fit, up to --tasks-per-host: none left out, none too many.
    assert on == [min(per_host, g // each) for g in free_gpus]


def test_a_ps_that_asks_no_gpu_leaves_the_gpu_node_to_the_workers() -> None:
    nodes = [node("a-gpu", gpus=1), node("b-cpu")]
    hosts = [n.name for n in nodes]
    fit = Fit([(n, None) for n in nodes], {"worker": ((GPU, 1),), "ps": (("cpu", 1000),)})
    seats = place_tasks(hosts, num=2, capacity=fit)
    assert seats["ps"] == [(1, 0)] and seats["worker"] == [(0, 0)]
    # Without the fit, the first host by name went to the ps.
    assert place_tasks(hosts, num=2)["ps"] == [(0, 0)]


# ---- a render from a saved NodeList ----------------------------------------------------------


def test_a_run_that_cannot_fit_is_refused_in_one_line(cli: Any, saved: Path) -> None:
    result = render(cli, saved, "-N", "3", "--psn", "0", "--set", "gpus=2")
    assert_one_line_error(result)
    assert result.err == (
        "simpletfjob: error: 3 workers ask 2 nvidia.com/gpu each; only 2 nodes have 2 free "
        "(gpu-a, gpu-c)\n"
    )
    result = render(cli, saved, "--psn", "0", "--set", "gpus=4")
    assert (
        result.err
        == "simpletfjob: error: 4 workers ask 4 nvidia.com/gpu each; no node has 4 free\n"
    )


def test_workers_go_where_the_gpus_are_and_the_ps_to_the_cpu_node(cli: Any, saved: Path) -> None:
    result = render(cli, saved, "--set", "gpus=1")
    assert seated(result) == [
        ("ps", "cpu-x"),
        *(("worker", n) for n in ("gpu-a", "gpu-b", "gpu-c")),
    ]


def test_the_gpu_nodes_go_to_the_workers_even_when_they_come_first(
    cli: Any, tmp_path: Path
) -> None:
    """Before the fit, the ps took the first node by name, the only GPU node, and the run
    could not start: now the ps takes the CPU node, as the scheduler would have it."""
    items = [node_object("a-gpu", 1), node_object("b-cpu")]
    write(tmp_path / "nodes.json", json.dumps({"kind": "List", "items": items}))
    write(tmp_path / "t.yaml", TEMPLATE)
    assert seated(render(cli, tmp_path, "--set", "gpus=1")) == [
        ("ps", "b-cpu"),
        ("worker", "a-gpu"),
    ]


def test_a_chief_and_an_evaluator_that_ask_no_gpu_take_cpu_nodes_too(
    cli: Any, tmp_path: Path
) -> None:
    """Every role that asks for no GPU looks first at the nodes without one, in host order;
    the workers, in between, keep the GPU nodes that come first by name."""
    items = [node_object(n, g) for n, g in (("a-gpu", 1), ("b-gpu", 1), ("c-cpu", 0))]
    items += [node_object(n) for n in ("d-cpu", "e-cpu")]
    write(tmp_path / "nodes.json", json.dumps({"kind": "List", "items": items}))
    write(tmp_path / "t.yaml", TEMPLATE)
    result = render(cli, tmp_path, "--chief", "--evaluator", "--set", "gpus=1")
    assert seated(result) == [
        ("chief", "c-cpu"),
        ("ps", "d-cpu"),
        ("worker", "a-gpu"),
        ("worker", "b-gpu"),
        ("evaluator", "e-cpu"),
    ]


def test_tasks_on_one_node_add_up(cli: Any, saved: Path) -> None:
    args = ("--psn", "0", "--set", "gpus=1", "-l", "kubernetes.io/hostname=gpu-a")
    result = render(cli, saved, "-N", "1", "--tasks-per-host", "3", *args)
    assert_one_line_error(result)
    assert result.err == (
        "simpletfjob: error: 3 workers ask 1 nvidia.com/gpu each; only 2 fit on -N 1 host "
        "(gpu-a: 2 free)\n"
    )
    assert seated(render(cli, saved, "-N", "1", "--tasks-per-host", "2", *args)) == [
        ("worker", "gpu-a"),
        ("worker", "gpu-a"),
    ]


def test_every_slot_takes_what_fits_with_n_minus_one_and_says_so(cli: Any, saved: Path) -> None:
    result = render(cli, saved, "--psn", "0", "--set", "gpus=1", "--tasks-per-host", "2")
    assert [n for _, n in seated(result)] == ["gpu-a", "gpu-a", "gpu-b", "gpu-c", "gpu-c"]
    assert (
        "warning: -N -1: the run got 5 tasks; 1 slot of --tasks-per-host 2 on its nodes had no room for "
        "workers (1 cpu, 1Gi memory, 1 nvidia.com/gpu each)" in result.err
    )


@pytest.mark.parametrize(
    ("args", "reason", "line"),
    [
        (["--set", "cpu=9"], "cpu 9 > 8 free", "1 ps asks 9 cpu; no node has 9 free"),
        (
            ["--set", "memory=40Gi"],
            "memory 40Gi > 32Gi free",
            "1 ps asks 40Gi memory; no node has 40Gi free",
        ),
    ],
)
def test_cpu_and_memory_are_checked_too(
    cli: Any, tmp_path: Path, args: list[str], reason: str, line: str
) -> None:
    items = [node_object(f"n{i}", cpu="8", memory="32Gi") for i in range(4)]
    write(tmp_path / "nodes.json", json.dumps({"kind": "List", "items": items}))
    write(tmp_path / "t.yaml", TEMPLATE)
    result = render(cli, tmp_path, *args, "--explain")
    assert result.code == 1 and result.out == ""
    lines = result.err.splitlines()
    # Every role asks alike: one reason names them all, and no node is left to any.
    assert all(row.endswith(f"ps, worker: {reason}") for row in lines[1:5]), lines
    assert lines[5] == "4 nodes: 0 eligible, 4 without room"
    assert lines[6] == f"simpletfjob: error: {line}"


def test_explain_says_per_role_why_a_node_does_not_fit(cli: Any, saved: Path) -> None:
    result = render(cli, saved, "--set", "gpus=2", "--explain")
    rows = {line.split()[0]: line for line in result.err.splitlines()[1:5]}
    assert rows["cpu-x"].split()[1:3] == ["only", "ps"]
    assert rows["cpu-x"].endswith("worker: nvidia.com/gpu 2 > 0 free")
    assert rows["gpu-b"].endswith("worker: nvidia.com/gpu 2 > 1 free")
    assert "4 nodes: 4 eligible (2 only for ps)" in result.err


def test_a_standard_resource_a_node_does_not_list_is_not_checked(cli: Any, tmp_path: Path) -> None:
    listed = node_object("n1")
    del listed["status"]["allocatable"]["cpu"]
    write(tmp_path / "nodes.json", json.dumps({"kind": "List", "items": [listed]}))
    write(tmp_path / "t.yaml", TEMPLATE)
    assert seated(render(cli, tmp_path, "--psn", "0", "--set", "cpu=1000")) == [("worker", "n1")]
    result = render(cli, tmp_path, "--psn", "0", "--set", "gpus=1")  # a device: 0 where unlisted
    assert result.err == "simpletfjob: error: 1 worker asks 1 nvidia.com/gpu; no node has 1 free\n"


def test_a_template_quantity_that_is_none_is_one_line(cli: Any, saved: Path) -> None:
    result = render(cli, saved, "--set", "cpu=lots")
    assert_one_line_error(
        result,
        contains=["t.yaml: the pod spec of ps 0: spec.containers[0].resources.requests['cpu']"],
    )


def test_host_names_are_not_fitted_and_explain_says_so(cli: Any, saved: Path) -> None:
    result = cli("t.yaml", "--nodes", "a,b", "-o", "-", "--set", "gpus=8", "--explain", cwd=saved)
    assert result.code == 0, result.err
    assert (
        "simpletfjob: the fit is not checked (ps: 1 cpu, 1Gi memory; worker: 1 cpu, 1Gi memory, "
        "8 nvidia.com/gpu)" in result.err
    )
    plain = cli("t.yaml", "--nodes", "a,b", "-o", "-", "--set", "gpus=8", cwd=saved)
    assert "fit" not in plain.err


def test_gpus_stays_a_filter_beside_the_fit(cli: Any, saved: Path) -> None:
    """--gpus 2 keeps the nodes with 2 free GPUs, for every role: the ps asks none, yet takes one."""
    result = render(cli, saved, "--gpus", "2", "--set", "gpus=1")
    assert seated(result) == [("ps", "gpu-a"), ("worker", "gpu-c")]
