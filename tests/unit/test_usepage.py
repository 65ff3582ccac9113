"""A page of the cluster's Jobs or pods decoded the fast way gives exactly what the careful way
gives (json, then usage.job_use or usage.pod_use), refuses what it refuses in the same words, or
leaves the page to it."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from simpletfjob.errors import InputError
from simpletfjob.hosts.usage import job_use, pod_use
from simpletfjob.hosts.usepage import decode_jobs, decode_pods
from tests.support.scenes import task_job, task_pod

ORIGIN = "https://k8s.example:6443: the job list's items"
GPU = "nvidia.com/gpu"
LABEL = "simpletfjob/job"
OTHERS = ("cpu", "memory")


def page(items: list[Any], token: str | None = "abc", version: str = "42") -> bytes:
    meta = {"resourceVersion": version, **({"continue": token} if token else {})}
    body = {"kind": "JobList", "apiVersion": "batch/v1", "metadata": meta, "items": items}
    return json.dumps(body).encode()


def careful(items: list[Any], others: tuple[str, ...] = OTHERS) -> list[Any]:
    return [job_use(item, GPU, LABEL, ORIGIN, others) for item in items]


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


def test_a_realistic_page_decodes_to_the_very_jobs_the_careful_way_gives() -> None:
    items = realistic_jobs(60)
    for others in ((), OTHERS):
        fast = decode_jobs(page(items), ORIGIN, GPU, LABEL, others)
        assert fast is not None
        assert fast.value == careful(items, others)
        assert (fast.token, fast.resource_version) == ("abc", "42")
    uses = careful(items)
    assert any(u.ports for u in uses) and any(u.requested for u in uses)
    assert any(not u.live for u in uses) and any(not u.active and u.live for u in uses)
    assert any(u.others and any(u.others) for u in uses)
    last = decode_jobs(page(items, token=None), ORIGIN, GPU, LABEL)
    assert last is not None and last.token is None


# Where a Job's JSON can go wrong in the fields the counting rules read, and what it can hold.
PLACES = [
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
@given(changes=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(PLACES), ODD), max_size=3))
def test_an_odd_field_is_decoded_as_the_careful_way_decodes_it_or_left_to_it(
    changes: list[tuple[int, tuple[str, ...], Any]],
) -> None:
    same_or_left(realistic_jobs(3), changes, careful, decode_jobs)


def test_what_is_not_a_job_list_is_left_to_the_careful_way() -> None:
    for data in (b"[]", b"{", b'{"items": null}', b'{"items": [1]}', b'{"items": [{"spec": 3}]}',
                 b'{"items": [], "metadata": {"continue": 3}}', b'{"items": [{"metadata": []}]}'):  # fmt: skip
        assert decode_jobs(data, ORIGIN, GPU, LABEL) is None
    assert decode_jobs(b'{"items": []}', ORIGIN, GPU, LABEL) is not None


def careful_pods(items: list[Any]) -> list[Any]:
    return [pod_use(item, GPU, LABEL, ORIGIN, OTHERS) for item in items]


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


def test_a_realistic_pod_page_decodes_to_the_very_pods_the_careful_way_gives() -> None:
    items = realistic_pods(60)
    fast = decode_pods(page(items), ORIGIN, GPU, LABEL, OTHERS)
    assert fast is not None
    assert fast.value == careful_pods(items)
    uses = careful_pods(items)
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
def test_an_odd_pod_field_is_decoded_as_the_careful_way_decodes_it_or_left_to_it(
    changes: list[tuple[int, tuple[str, ...], Any]],
) -> None:
    same_or_left(realistic_pods(3), changes, careful_pods, decode_pods)


def same_or_left(
    realistic: list[dict[str, Any]],
    changes: list[tuple[int, tuple[str, ...], Any]],
    careful_way: Callable[[list[dict[str, Any]]], Any],
    fast_way: Callable[..., Any],
) -> None:
    """The items with `changes` made: decoded the fast way as the careful way decodes them
    (the same uses, or the same error), or left to the careful way (None)."""
    items = copy.deepcopy(realistic)
    for index, place, value in changes:
        into: dict[str, Any] = items[index]
        for key in place[:-1]:
            if not isinstance(into.get(key), dict):
                into[key] = {}
            into = into[key]
        into[place[-1]] = value
    try:
        expected: Any = careful_way(items)
    except InputError as e:
        expected = e
    try:
        fast: Any = fast_way(page(items), ORIGIN, GPU, LABEL, OTHERS)
    except InputError as e:
        fast = e
    if fast is None:
        return  # left to the careful way
    if isinstance(expected, InputError):
        assert isinstance(fast, InputError), f"fast took what is wrong: {expected}"
        assert str(fast) == str(expected)
    else:
        assert fast.value == expected
