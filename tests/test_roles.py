"""Role assignment and TF_CONFIG, tested as pure functions."""

from __future__ import annotations

import json

import pytest

from simpletfjob.errors import SelectionError
from simpletfjob.roles import ClusterSpec, Host, Task, assign_roles


def hosts(*names: str) -> list[Host]:
    return [Host(n, n) for n in names]


def summary(tasks: list[Task]) -> list[tuple[str, int, str, int]]:
    return [(t.role, t.index, t.host, t.port) for t in tasks]


def test_default_is_one_ps_then_workers_in_host_order() -> None:
    tasks = assign_roles(hosts("h10", "h100", "h14"))
    assert summary(tasks) == [
        ("ps", 0, "h10", 2222),
        ("worker", 0, "h100", 2222),
        ("worker", 1, "h14", 2222),
    ]


def test_chief_ps_workers_evaluator_order() -> None:
    tasks = assign_roles(hosts("a", "b", "c", "d", "e"), psn=2, chief=True, evaluator=True)
    assert summary(tasks) == [
        ("chief", 0, "a", 2222),
        ("ps", 0, "b", 2222),
        ("ps", 1, "c", 2222),
        ("worker", 0, "d", 2222),
        ("evaluator", 0, "e", 2222),
    ]


def test_psn_zero_is_all_workers() -> None:
    tasks = assign_roles(hosts("a", "b"), psn=0)
    assert [t.role for t in tasks] == ["worker", "worker"]


def test_psf_pins_parameter_servers_in_file_order() -> None:
    tasks = assign_roles(hosts("a", "b", "c", "d"), psf=["c", "a"], chief=True)
    assert summary(tasks) == [
        ("chief", 0, "b", 2222),
        ("ps", 0, "c", 2222),
        ("ps", 1, "a", 2222),
        ("worker", 0, "d", 2222),
    ]


@pytest.mark.parametrize(
    ("names", "psn", "chief", "evaluator"),
    [(("a",), 1, False, False), (("a", "b"), 2, False, False), (("a", "b", "c"), 1, True, True)],
)
def test_no_worker_left_is_an_error(
    names: tuple[str, ...], psn: int, chief: bool, evaluator: bool
) -> None:
    with pytest.raises(SelectionError, match="no task is left for a worker"):
        assign_roles(hosts(*names), psn=psn, chief=chief, evaluator=evaluator)


def test_tasks_per_host_walks_slots_in_host_order() -> None:
    tasks = assign_roles(hosts("A", "B"), psn=1, port=5000, tasks_per_host=2)
    assert summary(tasks) == [
        ("ps", 0, "A", 5000),
        ("worker", 0, "A", 5001),
        ("worker", 1, "B", 5000),
        ("worker", 2, "B", 5001),
    ]


def test_compact_and_pretty_read_back_as_the_same_config() -> None:
    tasks = assign_roles(hosts("a", "b", "c", "d"), chief=True, evaluator=True, port=3000)
    spec = ClusterSpec(tasks)
    for task in tasks:
        want = spec.config(task)
        assert json.loads(spec.compact(task)) == want
        assert json.loads(spec.pretty(task, "    ")) == want
        assert all(line.startswith("    ") for line in spec.pretty(task, "    ").splitlines())
    assert spec.config(tasks[0]) == {
        "cluster": {"chief": ["a:3000"], "ps": ["b:3000"], "worker": ["c:3000"]},
        "task": {"type": "chief", "index": 0},
    }


def test_evaluator_in_cluster_on_request() -> None:
    tasks = assign_roles(hosts("a", "b", "c"), evaluator=True)
    assert "evaluator" not in ClusterSpec(tasks).cluster
    assert ClusterSpec(tasks, include_evaluator=True).cluster["evaluator"] == ["c:2222"]


def test_role_host_lists() -> None:
    spec = ClusterSpec(assign_roles(hosts("a", "b", "c"), port=9))
    assert spec.hosts("ps") == "a:9"
    assert spec.hosts("worker") == "b:9,c:9"
    assert spec.hosts("chief") == ""


def test_an_ipv6_address_is_bracketed_in_the_cluster() -> None:
    tasks = assign_roles([Host("n1", "fd00::1"), Host("n2", "10.0.0.2")], port=2222)
    assert ClusterSpec(tasks).cluster == {"ps": ["[fd00::1]:2222"], "worker": ["10.0.0.2:2222"]}
    assert tasks[0].host == "fd00::1"
