"""Eligibility, exclusion and taking N hosts, as pure functions."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from simpletfjob.errors import SelectionError
from simpletfjob.frameworks.tensorflow import place_tasks
from simpletfjob.hosts.nodes import Node, Taint
from simpletfjob.hosts.selection import (
    Rules,
    Verdict,
    breakdown,
    eligible_hosts,
    judge_nodes,
    parse_selector,
    tolerates,
    unknown_exclusions,
)
from simpletfjob.tasks import Pin
from tests.conftest import ROOT, assert_one_line_error


def plain(*names: str) -> list[Node]:
    return [Node(n) for n in names]


def names(nodes: list[Node]) -> list[str]:
    return [n.name for n in nodes]


def take_hosts(verdicts: list[Verdict], num: int, psf: list[str] | None = None) -> list[Node]:
    """The nodes a run with one ps uses, in order."""
    pins = [Pin("ps", tuple(psf), "--psf")] if psf else []
    eligible = eligible_hosts(verdicts, num, pins)
    seats = place_tasks([v.node.name for v in eligible], num=num, psf=psf or [])
    used = {host for role in seats.values() for host, _ in role}
    return [v.node for i, v in enumerate(eligible) if i in used]


def test_first_n_after_exclusion_in_given_order() -> None:
    verdicts = judge_nodes(plain("h10", "h100", "h14", "h23"), {"h100"}, Rules())
    assert names(take_hosts(verdicts, 2)) == ["h10", "h14"]
    assert names(take_hosts(verdicts, -1)) == ["h10", "h14", "h23"]


def test_too_many_hosts_says_how_many_are_eligible() -> None:
    verdicts = judge_nodes(plain("a", "b", "c"), {"c"}, Rules())
    with pytest.raises(SelectionError, match=r"-N 3 .*3 nodes: 2 eligible, 1 excluded"):
        take_hosts(verdicts, 3)


def test_psf_hosts_are_always_taken() -> None:
    verdicts = judge_nodes(plain("a", "b", "c", "d"), set(), Rules())
    assert names(take_hosts(verdicts, 2, ["d"])) == ["a", "d"]


def test_psf_host_must_be_eligible_and_known() -> None:
    verdicts = judge_nodes(plain("a", "b"), {"b"}, Rules())
    with pytest.raises(SelectionError, match="'b' is not eligible: excluded"):
        take_hosts(verdicts, -1, ["b"])
    with pytest.raises(SelectionError, match="'z' is not among the hosts"):
        take_hosts(verdicts, -1, ["z"])


def test_unknown_exclusions_are_reported() -> None:
    assert unknown_exclusions(plain("a", "b"), ["b", "typo"]) == ["typo"]


def test_health_rules_and_breakdown() -> None:
    nodes = [
        Node("ok"),
        Node("down", ready=False),
        Node("cordoned", unschedulable=True),
        Node("gpu", taints=(Taint("nvidia.com/gpu", "", "NoSchedule"),)),
        Node("soft", taints=(Taint("x", "", "PreferNoSchedule"),)),
        Node("new", taints=(Taint("node.kubernetes.io/not-ready", "", "NoSchedule"),)),
    ]
    verdicts = judge_nodes(nodes, {"ok"}, Rules())
    assert [v.node.name for v in verdicts if v.eligible] == ["soft"]
    assert (
        breakdown(verdicts) == "6 nodes: 1 eligible, 1 excluded, 2 NotReady, 1 cordoned, 1 tainted"
    )
    tolerant = Rules(tolerations=({"key": "nvidia.com/gpu", "operator": "Exists"},))
    assert [v.node.name for v in judge_nodes(nodes, set(), tolerant) if v.eligible] == [
        "ok",
        "gpu",
        "soft",
    ]


def test_not_ready_taint_counts_even_when_tolerated() -> None:
    node = Node("n", taints=(Taint("node.kubernetes.io/not-ready", "", "NoExecute"),))
    everything = Rules(tolerations=({"operator": "Exists"},))
    assert not judge_nodes([node], set(), everything)[0].eligible


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"key": "k", "operator": "Equal", "value": "v"}, Taint("k", "v", "NoSchedule"), True),
        ({"key": "k", "value": "v"}, Taint("k", "w", "NoSchedule"), False),
        (
            {"key": "k", "operator": "Exists", "effect": "NoExecute"},
            Taint("k", "", "NoSchedule"),
            False,
        ),
        ({"operator": "Exists"}, Taint("any", "x", "NoExecute"), True),
        ({"key": "", "operator": "Equal"}, Taint("any", "", "NoExecute"), False),
    ],
)
def test_tolerates(toleration: dict[str, str], taint: Taint, expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


def test_selector_and_gpus() -> None:
    nodes = [
        Node("a", labels={"pool": "gpu", "zone": "x"}, gpus=8),
        Node("b", labels={"pool": "cpu"}),
        Node("c", labels={"pool": "gpu"}, gpus=2),
    ]
    rules = Rules(selector=parse_selector("pool=gpu, zone in (x,y)"), min_gpus=4)
    assert [v.node.name for v in judge_nodes(nodes, set(), rules) if v.eligible] == ["a"]
    assert [r.matches({"a": "1"}) for r in parse_selector("!b,a,a!=2")] == [True, True, True]


@pytest.mark.parametrize("builtin", ["tf2-multiworker", "pytorch-ddp", "jax-multiprocess"])
def test_too_few_hosts_says_how_many_tasks_fit_and_offers_tasks_per_host(
    cli: Any, builtin: str
) -> None:
    """-N 3 on a one-node cluster (kind, minikube), for every framework: the way that works."""
    line = assert_one_line_error(cli(builtin, "--nodes", "kind", "-N", "3", "-o", "-"))
    assert line == (
        "simpletfjob: error: -N 3 asks for more hosts than are eligible (1 node: 1 eligible); "
        "1 eligible host fits 1 task at 1 per host; for 3 tasks, give -N 1 --tasks-per-host 3"
    )
    offered = line.rpartition("give ")[2].split()
    done = cli(builtin, "--nodes", "kind", *offered, "-o", "-")
    assert done.code == 0, done.err
    seated = [d for d in yaml.safe_load_all(done.out) if d["kind"] == "Job"]
    assert len(seated) == 3


def test_too_few_hosts_counts_the_tasks_per_host_already_asked() -> None:
    verdicts = judge_nodes(plain("a", "b", "c"), {"c"}, Rules())
    with pytest.raises(SelectionError) as raised:
        eligible_hosts(verdicts, 3, (), tasks_per_host=2)
    assert str(raised.value).endswith(
        "(3 nodes: 2 eligible, 1 excluded); 2 eligible hosts fit 4 tasks at 2 per host; "
        "for 6 tasks, give -N 2 --tasks-per-host 3"
    )
    with pytest.raises(SelectionError) as raised:  # past a run's size: what fits, and no layout
        eligible_hosts(verdicts, 10**6, ())
    assert str(raised.value).endswith(
        "; 2 eligible hosts fit 2 tasks at 1 per host; no layout on them gives 1,000,000 "
        "tasks: a run has at most 10,000"
    )
    none = judge_nodes(plain("a"), {"a"}, Rules())
    with pytest.raises(SelectionError) as raised:  # nothing fits: nothing to offer
        eligible_hosts(none, 2, ())
    assert (
        str(raised.value)
        == "-N 2 asks for more hosts than are eligible (1 node: 0 eligible, 1 excluded)"
    )


@pytest.mark.parametrize(
    ("hosts", "num", "per_host", "layout"),
    [
        (2, 3, 1, "for 3 tasks, give -N 1 --tasks-per-host 3"),  # (was: for 4 tasks)
        (2, 5, 1, "for 5 tasks, give -N 1 --tasks-per-host 5"),  # (was: for 6)
        (3, 4, 1, "for 4 tasks, give -N 2 --tasks-per-host 2"),
        (7, 99, 1, "for 99 tasks, give -N 3 --tasks-per-host 33"),  # (was: for 105)
        (3, 5, 2, "for 10 tasks, give -N 2 --tasks-per-host 5"),
        (2, 10**6, 1, "no layout on them gives 1,000,000 tasks: a run has at most 10,000"),
    ],
)
def test_too_few_hosts_offers_a_layout_of_exactly_the_tasks_asked_for(
    cli: Any, hosts: int, num: int, per_host: int, layout: str
) -> None:
    """The hint gives the tasks -N and --tasks-per-host ask for, not more; the layout it
    gives, run, has exactly them."""
    names = ",".join(f"h{i}" for i in range(hosts))
    asked = ("--nodes", names, "-N", str(num), "--tasks-per-host", str(per_host), "-o", "-")
    line = assert_one_line_error(cli("tf2-multiworker", *asked))
    assert line.endswith(f" at {per_host} per host; {layout}"), line
    if ", give " in layout:
        offered = layout.rpartition("give ")[2].split()
        done = cli("tf2-multiworker", "--nodes", names, *offered, "-o", "-")
        assert done.code == 0, done.err
        assert sum(d["kind"] == "Job" for d in yaml.safe_load_all(done.out)) == num * per_host


def test_the_readme_exclusion_example_works_with_the_example_hosts(cli: Any) -> None:
    """The README's first command, with a bare -E (./exc), run where examples/exc is beside
    examples/hosts; and the hint for -N 3 there gives exactly 3 tasks."""
    readme = (ROOT / "README.md").read_text()
    command = next(line for line in readme.splitlines() if " -E " in line and "$ " in line)
    args = command.split("$ ", 1)[1].split("|")[0].split()[1:]
    assert args[args.index("-E") + 1].startswith("-")  # bare: ./exc
    template = ROOT / "examples" / args[0]
    args = [str(template), *args[1:], "--nodes-file", "hosts"]
    done = cli(*args, cwd=ROOT / "examples")
    assert done.code == 0, done.err
    three = cli(
        "mnist.yaml", "--nodes-file", "hosts", "-N", "3", "-E", "-o", "-", cwd=ROOT / "examples"
    )
    assert assert_one_line_error(three).endswith("; for 3 tasks, give -N 1 --tasks-per-host 3")


@pytest.mark.parametrize(
    ("builtin", "per_host"),
    [("tf1-flags", 2), ("tf1-ps-hostnetwork", 2), ("tf2-parameter-server", 3)],
)
def test_no_worker_left_on_one_node_offers_tasks_per_host(
    cli: Any, builtin: str, per_host: int
) -> None:
    """The TensorFlow built-ins with parameter servers, on one node with the default -N -1."""
    line = assert_one_line_error(cli(builtin, "--nodes", "kind", "-o", "-"))
    assert f"more tasks per host (--tasks-per-host {per_host})" in line, line
    done = cli(builtin, "--nodes", "kind", "--tasks-per-host", str(per_host), "-o", "-")
    assert done.code == 0, done.err
