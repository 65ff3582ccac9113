"""A list page of nodes, Jobs or pods skimmed (hosts/pages.py) reads as the whole page reads: its
items, read by their kind's decoder, give the very same values or the same error, and its
metadata the same token and resourceVersion, or the page is not taken as a list either way."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simpletfjob.errors import ClusterError, InputError
from simpletfjob.hosts.nodes import node_from_object
from simpletfjob.hosts.pages import skim
from simpletfjob.hosts.usage import job_use, pod_use
from simpletfjob.kube.lists import decode_page
from simpletfjob.kube.resources import JOBS
from tests.support.kubeapi import realistic_cluster
from tests.support.scenes import task_job, task_pod

ORIGIN = "https://k8s.example:6443: the list's items"
GPU = "nvidia.com/gpu"
LABEL = "simpletfjob/job"
OTHERS = ("cpu", "memory")


def page(items: list[Any], token: str | None = "abc", version: str = "42") -> bytes:
    meta = {"resourceVersion": version, **({"continue": token} if token else {})}
    return json.dumps(
        {"kind": "List", "apiVersion": "v1", "metadata": meta, "items": items}
    ).encode()


def nodes(items: list[Any]) -> list[Any]:
    return [node_from_object(item, f"{ORIGIN}[{i}]", GPU) for i, item in enumerate(items)]


def jobs(items: list[Any], others: tuple[str, ...] = OTHERS) -> list[Any]:
    return [job_use(item, GPU, LABEL, ORIGIN, others) for item in items]


def pods(items: list[Any]) -> list[Any]:
    return [pod_use(item, GPU, LABEL, ORIGIN, OTHERS) for item in items]


def read(data: bytes, decode: Callable[[list[Any]], Any], skimmed: bool) -> Any:
    """The page's values and metadata as the cluster's parsers give them, or the error."""
    try:
        got = decode_page(data, "https://k8s.example:6443", JOBS, "/x", skim if skimmed else None)
        return decode(got.value), got.token, got.resource_version
    except (InputError, ClusterError) as e:
        return type(e), str(e)


def same(data: bytes, decode: Callable[[list[Any]], Any]) -> Any:
    whole = read(data, decode, skimmed=False)
    assert read(data, decode, skimmed=True) == whole
    return whole


def test_a_realistic_node_page_reads_as_the_whole_page() -> None:
    items = realistic_cluster(200)
    values, token, version = same(page(items), nodes)
    assert (token, version) == ("abc", "42")
    assert any(n.gpus == 8 for n in values) and any(not n.ready for n in values)
    assert any(n.taints for n in values) and any(n.unschedulable for n in values)
    assert same(page(items, token=None), nodes)[1] is None
    skimmed = skim(page(items))["items"][0]
    assert "images" not in skimmed["status"] and "managedFields" not in skimmed["metadata"]


def changed(
    realistic: list[dict[str, Any]], changes: list[tuple[int, tuple[str, ...], Any]]
) -> bytes:
    items = copy.deepcopy(realistic)
    for index, place, value in changes:
        into: dict[str, Any] = items[index]
        for key in place[:-1]:
            if not isinstance(into.get(key), dict):
                into[key] = {}
            into = into[key]
        into[place[-1]] = value
    return page(items)


# Where a node's JSON can go wrong in the fields simpletfjob reads, and what it can hold there.
NODE_PLACES = [
    ("metadata",), ("metadata", "name"), ("metadata", "labels"), ("spec",), ("spec", "taints"),
    ("spec", "unschedulable"), ("status",), ("status", "conditions"), ("status", "addresses"),
    ("status", "allocatable"), ("status", "allocatable", GPU), ("metadata", "labels", "zone"),
]  # fmt: skip
NODE_ODD = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 10**20), st.floats(allow_nan=False),
    st.text(max_size=4), st.sampled_from(["", "4", "2k", "1.5", "-1", "8Gi"]),
    st.lists(st.one_of(st.none(), st.text(max_size=3), st.fixed_dictionaries(
        {"key": st.text(max_size=3), "type": st.sampled_from(["Ready", "InternalIP", 1])},
        optional={"status": st.sampled_from(["True", "False", None]),
                  "address": st.one_of(st.none(), st.text(max_size=3))})), max_size=2),
    st.dictionaries(st.text(max_size=3), st.one_of(st.none(), st.text(max_size=3), st.integers()),
                    max_size=2),
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    changes=st.lists(
        st.tuples(st.integers(0, 2), st.sampled_from(NODE_PLACES), NODE_ODD), max_size=3
    )
)
def test_an_odd_node_field_reads_as_in_the_whole_page(
    changes: list[tuple[int, tuple[str, ...], Any]],
) -> None:
    same(changed(realistic_cluster(3), changes), nodes)


@pytest.mark.parametrize("decode", [nodes, jobs, pods])
def test_what_is_not_a_list_is_refused_as_the_whole_page_refuses_it(
    decode: Callable[[list[Any]], Any],
) -> None:
    for data in (b"[]", b"{", b'{"items": null}', b'{"items": [1]}', b'{"items": [{"spec": 3}]}',
                 b'{"items": [], "metadata": {"continue": 3}}', b'{"items": [{"metadata": []}]}',
                 b'{"items": [], "metadata": {"resourceVersion": 7}}'):  # fmt: skip
        same(data, decode)
    assert same(b'{"items": []}', decode) == ([], None, "")


def realistic_jobs(count: int) -> list[dict[str, Any]]:
    """A run's Jobs as the API server lists them: managed fields, a large environment, ports,
    requests, sidecars and overhead; some finished, suspended or being deleted."""
    jobs = []
    for i in range(count):
        job = task_job(
            "worker", i, node=f"node-{i % 7}", **({"succeeded": 1} if i % 5 == 4 else {})
        )
        job["metadata"].update(
            namespace=f"ns{i % 3}",
            uid=f"uid-{i}",
            managedFields=[{"manager": "simpletfjob", "fieldsV1": {"f:spec": {"f:x": {}}}}],
        )
        if i % 6 == 5:
            job["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        spec = job["spec"]
        spec.update(parallelism=1 + i % 2, completions=None if i % 4 else 3, suspend=i % 9 == 8)
        pod = spec["template"]["spec"]
        pod["hostNetwork"] = i % 2 == 0
        pod["containers"][0].update(
            command=["python", "-c", "print('x' * 80)\n" * 40],
            env=[{"name": "TF_CONFIG", "value": json.dumps({"cluster": ["h:1"] * 500})}],
            ports=[{"containerPort": 2222 + i, "hostPort": 2222 + i if i % 3 else None}],
            resources={"requests": {GPU: str(i % 3), "cpu": "500m"}, "limits": {"memory": "1Gi"}},
        )
        pod["initContainers"] = [
            {"name": "side", "restartPolicy": "Always", "ports": [{"containerPort": 9}],
             "resources": {"limits": {GPU: "1"}}},
            {"name": "init", "resources": {"requests": {"cpu": "2"}}},
        ]  # fmt: skip
        if i % 4 == 1:
            pod["overhead"] = {"cpu": "100m", GPU: "1"}
        jobs.append(job)
    return jobs


def test_a_realistic_job_page_reads_as_the_whole_page() -> None:
    items = realistic_jobs(60)
    for others in ((), OTHERS):
        assert same(page(items), partial(jobs, others=others))[1:] == ("abc", "42")
    uses = jobs(items)
    assert any(u.ports for u in uses) and any(u.requested for u in uses)
    assert any(not u.live for u in uses) and any(not u.active and u.live for u in uses)
    assert any(u.others and any(u.others) for u in uses)
    assert same(page(items, token=None), jobs)[1] is None


# Where a Job's JSON can go wrong in the fields the counting rules read, and what it can hold.
JOB_PLACES = [
    ("metadata",), ("metadata", "name"), ("metadata", "namespace"), ("metadata", "uid"),
    ("metadata", "labels"), ("metadata", "labels", LABEL), ("metadata", "deletionTimestamp"),
    ("spec",), ("spec", "parallelism"), ("spec", "completions"), ("spec", "suspend"),
    ("spec", "template"), ("spec", "template", "spec"), ("spec", "template", "spec", "nodeName"),
    ("spec", "template", "spec", "hostNetwork"), ("spec", "template", "spec", "overhead"),
    ("spec", "template", "spec", "containers"), ("spec", "template", "spec", "initContainers"),
    ("status",), ("status", "conditions"), ("status", "succeeded"),
]  # fmt: skip
ODD = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 10**20), st.floats(allow_nan=False),
    st.text(max_size=4), st.sampled_from(["", "4", "2k", "1.5", "-1", "8Gi", "node-1"]),
    st.lists(st.one_of(st.none(), st.integers(0, 3), st.text(max_size=3), st.fixed_dictionaries(
        {"type": st.sampled_from(["Complete", "Failed", 1])},
        optional={"status": st.sampled_from(["True", "False", None]),
                  "name": st.text(max_size=2), "restartPolicy": st.sampled_from(["Always", 3]),
                  "resources": st.one_of(st.none(), st.just({"limits": {GPU: "2"}}), st.text(max_size=2)),
                  "ports": st.one_of(st.none(), st.just([{"hostPort": 80}]), st.just([3]))})),
        max_size=2),
    st.dictionaries(st.sampled_from([GPU, "cpu", "x"]),
                    st.one_of(st.none(), st.text(max_size=3), st.integers(-1, 9)), max_size=2),
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(changes=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(JOB_PLACES), ODD), max_size=3))
def test_an_odd_job_field_reads_as_in_the_whole_page(
    changes: list[tuple[int, tuple[str, ...], Any]],
) -> None:
    same(changed(realistic_jobs(3), changes), jobs)


def realistic_pods(count: int) -> list[dict[str, Any]]:
    """The pods of realistic_jobs' Jobs, as the API server lists them: bound, some running,
    some finished or being deleted, each with its Job's pod spec."""
    pods = []
    for i, job in enumerate(realistic_jobs(count)):
        pod = task_pod(job)
        pod["status"]["phase"] = ["Pending", "Running", "Succeeded", "Failed"][i % 4]
        pod["metadata"].update(
            namespace=job["metadata"]["namespace"],
            managedFields=job["metadata"]["managedFields"],
            labels=job["metadata"]["labels"],
        )
        if i % 5 == 3:
            pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        pod["spec"] = copy.deepcopy(job["spec"]["template"]["spec"])
        pods.append(pod)
    return pods


def test_a_realistic_pod_page_reads_as_the_whole_page() -> None:
    items = realistic_pods(60)
    assert same(page(items), pods)[0] == pods(items)
    uses = pods(items)
    assert any(u.owner for u in uses) and any(u.deleting for u in uses)
    assert any(u.ports for u in uses) and any(u.requested for u in uses)
    assert {u.phase for u in uses} == {"Pending", "Running", "Succeeded", "Failed"}


POD_PLACES = [
    ("metadata",), ("metadata", "name"), ("metadata", "namespace"), ("metadata", "labels"),
    ("metadata", "ownerReferences"), ("metadata", "deletionTimestamp"), ("spec",),
    ("spec", "nodeName"), ("spec", "hostNetwork"), ("spec", "overhead"), ("spec", "containers"),
    ("spec", "initContainers"), ("status",), ("status", "phase"),
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(changes=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(POD_PLACES), ODD), max_size=3))
def test_an_odd_pod_field_reads_as_in_the_whole_page(
    changes: list[tuple[int, tuple[str, ...], Any]],
) -> None:
    same(changed(realistic_pods(3), changes), pods)
