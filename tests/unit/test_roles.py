"""Role assignment and TF_CONFIG, tested as pure functions."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simpletfjob.errors import SelectionError
from simpletfjob.frameworks.tensorflow import ROLES, TF_CONFIG, ClusterSpec, place_tasks
from simpletfjob.tasks import Host, Task, tasks_at


def assign_roles(
    hosts: list[Host], *, port: int = 2222, tasks_per_host: int = 1, **seating: Any
) -> list[Task]:
    """The run's tasks on these hosts: `place_tasks`'s seating, given addresses and ports."""
    seats = place_tasks([h.node for h in hosts], tasks_per_host=tasks_per_host, **seating)
    return tasks_at(seats, ROLES, hosts.__getitem__, port)


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
        want = spec.value(TF_CONFIG, task)
        assert json.loads(spec.compact(task)) == want
        pretty = "".join(spec.block_parts(TF_CONFIG, task, "    "))
        assert json.loads(pretty) == want
        assert all(line.startswith("    ") for line in pretty.splitlines())
    assert spec.value(TF_CONFIG, tasks[0]) == {
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


# -- when every role may use every host: the plain rule -----------------------------------


def plain_rule(
    names: list[str], num: int, psn: int, psf: list[str], chief: bool, evaluator: bool, k: int
) -> list[tuple[str, int, str, int]] | None:
    """The rule as the README gives it for hosts that take any role; None: no worker is left.

    Take the first -N hosts (the --psf hosts always), give each k slots in order; the
    --psf hosts' first slots are the ps, then the chief, the ps, the evaluator last,
    and the workers in between.
    """
    others = [n for n in names if n not in psf]
    keep = set(psf) | set(others if num == -1 else others[: num - len(psf)])
    slots = [(n, 2222 + s) for n in names if n in keep for s in range(k)]
    ps = [(n, 2222) for n in psf]
    rest = [s for s in slots if s not in ps]
    chiefs, rest = (rest[:1], rest[1:]) if chief else ([], rest)
    if not psf:
        ps, rest = rest[:psn], rest[psn:]
    evaluators, workers = (rest[-1:], rest[:-1]) if evaluator else ([], rest)
    if not workers:
        return None
    groups = (("chief", chiefs), ("ps", ps), ("worker", workers), ("evaluator", evaluators))
    return [(role, i, n, p) for role, group in groups for i, (n, p) in enumerate(group)]


@given(
    count=st.integers(1, 7),
    psn=st.integers(0, 3),
    chief=st.booleans(),
    evaluator=st.booleans(),
    k=st.integers(1, 3),
    data=st.data(),
)
def test_hosts_that_take_any_role_follow_the_plain_rule(
    count: int, psn: int, chief: bool, evaluator: bool, k: int, data: st.DataObject
) -> None:
    names = [f"h{i}" for i in range(count)]
    psf = data.draw(st.lists(st.sampled_from(names), unique=True, max_size=2), label="psf")
    num = data.draw(st.sampled_from([-1, *range(max(1, len(psf)), count + 1)]), label="num")
    expected = plain_rule(names, num, psn, psf, chief, evaluator, k)

    def seat() -> list[Task]:
        return assign_roles(
            hosts(*names),
            num=num,
            psn=psn,
            psf=psf,
            chief=chief,
            evaluator=evaluator,
            tasks_per_host=k,
        )

    if expected is None:
        with pytest.raises(SelectionError, match="no task is left for a worker"):
            seat()
        return
    assert summary(seat()) == expected
