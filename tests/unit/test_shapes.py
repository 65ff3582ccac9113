"""Which objects apply dry-runs (runs/judge.py): one of each shape it would create, every
object the run already has, and any whose own values the sample's verdict does not cover;
and the would-be object of one that took its sample's verdict."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from simpletfjob.kube.resources import JOBS, SERVICES
from simpletfjob.runs.judge import SIZE_ANYWAY, Expected, carries, derived, sample, shape


def job(role: str, index: int, node: str | None = None, **changes: Any) -> dict[str, Any]:
    """A Job as a render makes one: the task's values in its name, labels, node and TF_CONFIG."""
    name = f"mnist-{role}-{index}"
    labels = {"simpletfjob/job": "mnist", "simpletfjob/role": role, "simpletfjob/index": str(index)}
    body: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels, "annotations": {"simpletfjob/name": name}},
        "spec": {
            "backoffLimit": 4,
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "nodeName": node or f"node-{index}",
                    "containers": [
                        {
                            "name": "tensorflow",
                            "image": "tensorflow/tensorflow:2.21.0",
                            "command": ["python", "-c", "print(1)"],
                            "env": [
                                {"name": "TF_CONFIG", "value": json.dumps({"task": index})},
                            ],
                            "ports": [{"containerPort": 2222, "hostPort": 2222}],
                        }
                    ],
                    "restartPolicy": "OnFailure",
                },
            },
        },
    }
    for path, value in changes.items():
        *where, last = path.split("__")
        holder = body
        for step in where:
            holder = holder[int(step)] if isinstance(holder, list) else holder[step]
        holder[int(last) if isinstance(holder, list) else last] = value
    return body


def run(
    *bodies: dict[str, Any], live: frozenset[int] = frozenset()
) -> tuple[list[int], dict[int, int]]:
    chosen = sample([(JOBS, b) for b in bodies], lambda i: i in live)
    return chosen.sent, chosen.sample_of


def test_one_dry_run_for_each_shape_and_the_others_take_its_verdict() -> None:
    # A role, its index, name, node and TF_CONFIG are values, each judged by its rule here.
    bodies = [job("ps", 0), *(job("worker", i) for i in range(5))]
    assert run(*bodies) == ([0], {1: 0, 2: 0, 3: 0, 4: 0, 5: 0})
    ps = {"spec__template__spec__containers__0__image": "tensorflow/tensorflow:cpu"}
    bodies = [job("ps", 0, **ps), *(job("worker", i) for i in range(3)), job("ps", 1, **ps)]
    assert run(*bodies) == ([0, 1], {2: 1, 3: 1, 4: 0})


def test_an_object_the_run_has_is_always_dry_run_itself() -> None:
    bodies = [job("worker", i) for i in range(4)]
    sent, sample_of = run(*bodies, live=frozenset({2}))
    assert sent == [0, 2]
    assert sample_of == {1: 0, 3: 0}


@pytest.mark.parametrize(
    "change",
    [
        {"spec__template__spec__containers__0__image": "busybox"},
        {"spec__backoffLimit": 5},
        {"spec__template__spec__containers__0__ports__0__hostPort": 2223},
        {"spec__template__spec__restartPolicy": "Never"},
        # a number where the others hold a string is not a varying string: part of the shape
        {"spec__template__spec__containers__0__env__0__value": 3},
        {"metadata__labels__team": "a"},  # a label the others lack
    ],
)
def test_an_object_that_differs_elsewhere_has_a_shape_and_a_dry_run_of_its_own(
    change: dict[str, Any],
) -> None:
    sent, sample_of = run(job("worker", 0), job("worker", 1, **change), job("worker", 2))
    assert sent == [0, 1]
    assert sample_of == {2: 0}


@pytest.mark.parametrize(
    "change",
    [
        {"spec__template__spec__nodeName": "Node_1"},  # not a DNS-1123 subdomain
        {"spec__template__spec__nodeName": "n" * 254},
        {"metadata__name": "mnist-worker-" + "1" * 60},  # past 63: the job-name label
        {"metadata__name": "Mnist-worker-1"},
        {"metadata__labels__simpletfjob/index": "-1"},  # not a label value
        {"spec__template__metadata__labels__simpletfjob/index": "x" * 64},
        {"metadata__annotations__simpletfjob/name": "x" * (256 * 1024)},  # past the total
        # bytes of UTF-8, as the server counts them: 170K characters of 2 bytes each
        {"metadata__annotations__simpletfjob/name": "é" * (170 * 1024)},
        # an Indexed Job's pods are named '<job>-<index>', a 63-character label
        {"metadata__name": "mnist-worker-" + "1" * 45},
    ],
)
def test_an_object_whose_own_value_breaks_the_servers_rule_is_dry_run_itself(
    change: dict[str, Any],
) -> None:
    sent, sample_of = run(job("worker", 0), job("worker", 1, **change), job("worker", 2))
    assert sent == [0, 1]
    assert sample_of == {2: 0}


def test_a_value_the_servers_rules_do_not_judge_carries_whatever_it_is() -> None:
    odd = {
        "spec__template__spec__containers__0__env__0__value": "x\n" * 1000 + "{}",
        "spec__template__spec__containers__0__command__2": "import os; print(os.environ)",
    }
    sent, sample_of = run(job("worker", 0), job("worker", 1, **odd))
    assert (sent, sample_of) == ([0], {1: 0})


def test_an_object_much_larger_than_its_sample_is_dry_run_itself() -> None:
    big = {"spec__template__spec__containers__0__env__0__value": "x" * SIZE_ANYWAY}
    sent, _ = run(job("worker", 0), job("worker", 1, **big))
    assert sent == [0, 1]
    # as large as its sample: the sample's verdict holds
    sent, _ = run(job("worker", 0, **big), job("worker", 1, **big))
    assert sent == [0]


def test_a_service_name_follows_the_dns_label_rule() -> None:
    def service(name: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name},
            "spec": {"clusterIP": "None", "selector": {"simpletfjob/index": name[-1]}},
        }

    a, b, c = (
        shape(SERVICES, service("w-0")),
        shape(SERVICES, service("w-1")),
        shape(SERVICES, service("1-w")),
    )
    assert a.key == b.key == c.key
    assert carries(SERVICES, a, b)
    assert not carries(SERVICES, a, c)  # a DNS-1035 label starts with a letter


def test_the_would_be_object_is_the_samples_answer_with_the_objects_values_written_in() -> None:
    first, second = job("worker", 0), job("worker", 7, node="node-x")
    answer = copy.deepcopy(first)  # as the server answers: defaults added
    answer["metadata"]["uid"] = "u-0"
    answer["spec"]["template"]["spec"]["dnsPolicy"] = "ClusterFirst"
    a, b = shape(JOBS, first), shape(JOBS, second)
    made = derived(answer, a, b)
    assert made is not None
    expected = copy.deepcopy(second)
    expected["metadata"]["uid"] = "u-0"
    expected["spec"]["template"]["spec"]["dnsPolicy"] = "ClusterFirst"
    assert made == expected
    assert answer["metadata"]["name"] == "mnist-worker-0"  # the sample's answer is left as it was

    expected_objects = Expected({("jobs", "mnist-worker-0"): answer}, {
        ("jobs", "mnist-worker-7"): (("jobs", "mnist-worker-0"), a, b)
    })  # fmt: skip
    assert expected_objects[("jobs", "mnist-worker-7")] == made
    assert expected_objects.get(("jobs", "mnist-worker-9")) is None
    assert len(expected_objects) == 2 and set(expected_objects) == {
        ("jobs", "mnist-worker-0"),
        ("jobs", "mnist-worker-7"),
    }
