"""Judging a node by what its pods take: free GPUs and held ports in the verdicts; the host
ports a template's pods hold; and list pages cut of their managedFields before parsing."""

from __future__ import annotations

from typing import Any

import yaml

from simpletfjob.hosts.nodes import Node
from simpletfjob.hosts.selection import (
    Rules,
    breakdown,
    judge_node,
    judge_nodes,
    left_out_for_usage,
    left_out_text,
)
from simpletfjob.hosts.usage import EMPTY, NodeUsage
from simpletfjob.manifest.podspec import pod_host_ports

HELD = NodeUsage(6, 3, {(2222, "TCP"): "ml/other-worker-3", (53, "UDP"): "kube-system/dns"})


def test_free_gpus_decide_where_the_pods_were_read() -> None:
    node = Node("g1", gpus=8, plain=False)
    rules = Rules(min_gpus=4)
    verdict = judge_node(node, set(), rules, HELD)
    assert not verdict.eligible
    assert [str(r) for r in verdict.reasons] == ["2/8 GPUs free < 4"]
    assert verdict.free_gpus == 2
    # Not read (a saved NodeList, --no-usage): allocatable decides, as before.
    unread = judge_node(node, set(), rules)
    assert unread.eligible and unread.free_gpus is None
    assert judge_node(node, set(), Rules(min_gpus=2), HELD).eligible


def test_a_held_port_rules_a_node_out_and_names_its_holder() -> None:
    node = Node("n1", plain=False)
    rules = Rules(ports=frozenset({(2222, "TCP"), (2223, "TCP")}))
    verdict = judge_node(node, set(), rules, HELD)
    assert [str(r) for r in verdict.reasons] == ["port 2222 held by ml/other-worker-3"]
    # A UDP port of the same number is another port; an unread node is not judged by ports.
    assert judge_node(node, set(), Rules(ports=frozenset({(53, "TCP")})), HELD).eligible
    assert judge_node(node, set(), rules).eligible
    assert judge_node(node, set(), rules, EMPTY).eligible


def test_ports_that_differ_by_role_rule_a_node_out_for_those_roles_only() -> None:
    rules = Rules(
        role_ports=(("ps", frozenset({(2222, "TCP")})), ("worker", frozenset({(9000, "TCP")})))
    )
    (verdict,) = judge_nodes([Node("n1", plain=False)], set(), rules, lambda name: HELD)
    assert verdict.eligible and verdict.only_for == ("worker",)
    assert [str(r) for r in verdict.reasons] == ["port 2222 held by ml/other-worker-3 (ps)"]


def test_the_breakdown_counts_held_ports() -> None:
    rules = Rules(ports=frozenset({(2222, "TCP")}), min_gpus=4)
    usage = {"a": HELD, "b": NodeUsage(0, 1, {(2222, "TCP"): "ml/x"}), "c": EMPTY}
    nodes = [Node(n, gpus=8, plain=False) for n in usage]
    verdicts = judge_nodes(nodes, set(), rules, usage.get)
    assert breakdown(verdicts) == "3 nodes: 1 eligible, 1 without enough free GPUs, 1 port held"


def test_counts_and_their_nouns_agree() -> None:
    """'2 without enough free GPUs' and '2 ports held' in the breakdown; '1 GPU' and '0/1 GPU'
    in the reasons."""
    rules = Rules(ports=frozenset({(2222, "TCP")}), min_gpus=2)
    held = NodeUsage(0, 1, {(2222, "TCP"): "ml/x"})
    usage = {"a": held, "b": held, "c": NodeUsage(1, 1, {}), "d": EMPTY, "e": NodeUsage(4, 1, {})}
    gpus = {"a": 8, "b": 8, "c": 1, "d": 1, "e": 8}
    nodes = [Node(n, gpus=gpus[n], plain=False) for n in usage]
    verdicts = judge_nodes(nodes, set(), rules, usage.get)
    assert breakdown(verdicts) == "5 nodes: 1 eligible, 2 without enough free GPUs, 2 ports held"
    assert [str(r) for r in verdicts[2].reasons] == ["0/1 GPU free < 2"]
    assert [str(r) for r in verdicts[3].reasons] == ["1/1 GPU free < 2"]
    assert breakdown(verdicts[2:3]) == "1 node: 0 eligible, 1 without enough free GPUs"
    (alone,) = judge_nodes([Node("f", gpus=1, plain=False)], set(), rules)
    assert [str(r) for r in alone.reasons] == ["1 GPU < 2"]
    (two,) = judge_nodes([Node("g", gpus=8, plain=False)], set(), rules, lambda name: held)
    assert breakdown([two]) == "1 node: 0 eligible, 1 port held"


def test_the_nodes_left_out_for_usage_by_reason() -> None:
    rules = Rules(ports=frozenset({(2222, "TCP"), (9000, "TCP")}), min_gpus=4)
    nine = NodeUsage(0, 1, {(9000, "TCP"): "ml/y"})
    usage = {f"p{i}": HELD for i in range(5)} | {"q": nine, "r": EMPTY, "s": NodeUsage(6, 1, {})}
    nodes = [Node(n, gpus=8, plain=False) for n in usage]
    nodes += [Node("small", gpus=2, plain=False), Node("down", gpus=8, ready=False, plain=False)]
    verdicts = judge_nodes(nodes, set(), rules, lambda name: usage.get(name, HELD))
    # p*: 6 of 8 GPUs taken and port 2222 held: GPUs first, as the breakdown counts them.
    # small has too few GPUs to start with, down is NotReady: neither is left out for usage.
    left_out = left_out_for_usage(verdicts, rules.min_gpus)
    assert left_out == {
        "too few free GPUs": ["p0", "p1", "p2", "p3", "p4", "s"],
        "port 9000 held": ["q"],
    }
    assert left_out_text(1, 1, left_out) == (
        "-N -1: the run got 1 task on 1 node; 7 nodes otherwise eligible were left out for what "
        "their pods hold: 6 with too few free GPUs (p0, p1, p2 and 3 more), "
        "1 with port 9000 held (q)"
    )
    assert left_out_text(4, 2, {"port 2222 held": ["a"]}) == (
        "-N -1: the run got 4 tasks on 2 nodes; 1 node otherwise eligible was left out for what "
        "their pods hold: 1 with port 2222 held (a)"
    )


def documents(text: str) -> list[Any]:
    return list(yaml.compose_all(text))


def test_the_host_ports_a_template_holds() -> None:
    job = """\
kind: Job
spec:
  template:
    spec:
      hostNetwork: {host}
      initContainers:
        - name: setup
          ports: [{{containerPort: 7000}}]
        - name: proxy
          restartPolicy: Always
          ports: [{{containerPort: 15001}}]
      containers:
        - name: tf
          ports:
            - containerPort: 2222
            - containerPort: 8080
              hostPort: 80
            - containerPort: 53
              hostPort: 53
              protocol: UDP
"""
    on_host = pod_host_ports(documents(job.format(host="true")))
    assert on_host.host_network
    assert on_host.ports == ((2222, "TCP"), (80, "TCP"), (53, "UDP"), (15001, "TCP"))
    off_host = pod_host_ports(documents(job.format(host="false")))
    assert not off_host.host_network
    assert off_host.ports == ((80, "TCP"), (53, "UDP"))
