"""What a run is (runs/objects.py), and the documents apply will send (runs/apply.py's manifests), without a server."""

from __future__ import annotations

from typing import Any

import pytest

from simpletfjob.errors import RenderCheckError, UsageError
from simpletfjob.kube.resources import JOBS, SERVICES
from simpletfjob.runs.objects import NoRunError, belongs_to, manifests, run_selector
from simpletfjob.yamlload import manifest_loader

OURS = "    app.kubernetes.io/managed-by: simpletfjob\n    simpletfjob/job: mnist\n"


def job(name: str, extra: str = "", labels: str = OURS) -> str:
    return (
        f"apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n{extra}  labels:\n{labels}"
        "spec:\n  template:\n    spec:\n      containers: [{name: c, image: busybox}]\n"
    )


def service(name: str) -> str:
    return f"apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  labels:\n{OURS}"


def test_a_run_is_selected_and_recognised_by_both_labels() -> None:
    assert run_selector("mnist") == "app.kubernetes.io/managed-by=simpletfjob,simpletfjob/job=mnist"
    labels: dict[str, Any] = {
        "app.kubernetes.io/managed-by": "simpletfjob",
        "simpletfjob/job": "mnist",
    }
    assert belongs_to({"metadata": {"labels": labels}}, "mnist")
    assert not belongs_to({"metadata": {"labels": labels}}, "other")
    assert not belongs_to({"metadata": {"labels": {"simpletfjob/job": "mnist"}}}, "mnist")
    assert not belongs_to({"metadata": {"labels": ["simpletfjob/job"]}}, "mnist")
    assert not belongs_to({}, "mnist")
    assert str(NoRunError("x", "default")) == "no run 'x' in namespace 'default'"


def test_services_come_before_jobs_whatever_the_document_order() -> None:
    found = manifests(
        [(job("a-0"), "document 1"), (service("a-0"), "document 2"), (job("a-1"), "document 3")],
        "mnist",
        "ml",
    )
    assert [(m.resource, m.name) for m in found] == [
        (SERVICES, "a-0"),
        (JOBS, "a-0"),
        (JOBS, "a-1"),
    ]
    assert [m.ref for m in found] == ["service/a-0", "job.batch/a-0", "job.batch/a-1"]


def test_the_runs_namespace_or_none_and_values_as_kubernetes_reads_them() -> None:
    (same,) = manifests([(job("a", "  namespace: ml\n"), "document 1")], "mnist", "ml")
    assert same.body["metadata"]["namespace"] == "ml"
    with pytest.raises(UsageError) as caught:
        manifests([(job("a", "  namespace: other\n"), "document 1 (Job 'a')")], "mnist", "ml")
    assert str(caught.value) == (
        "document 1 (Job 'a') names namespace 'other', but the run goes to namespace 'ml'; "
        "give --namespace other, or remove the namespace from the template"
    )
    # A timestamp is the string Kubernetes reads, not a date JSON cannot carry.
    (dated,) = manifests(
        [(job("a", "  annotations: {since: 2024-01-02}\n"), "document 1")], "mnist", "ml"
    )
    assert dated.body["metadata"]["annotations"] == {"since": "2024-01-02"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
            "document 1 is a ConfigMap of 'v1'; a run is batch/v1 Jobs and v1 Services",
        ),
        ("- a\n- b\n", "document 1 is not a mapping; a run is"),
        (
            job("a").replace("batch/v1", "batch/v2"),
            "document 1 is a Job of 'batch/v2'",
        ),
        (
            job("a", labels="    simpletfjob/job: mnist\n"),
            "document 1 carries simpletfjob/job='mnist' and app.kubernetes.io/managed-by=None",
        ),
        (
            job("a", "  annotations: {bytes: !!binary aGk=}\n"),
            "document 1 holds a value JSON cannot carry",
        ),
    ],
)
def test_what_apply_never_sends(text: str, message: str) -> None:
    with pytest.raises(RenderCheckError) as caught:
        manifests([(text, "document 1")], "mnist", "ml")
    assert str(caught.value).startswith(message), str(caught.value)


def test_numeric_quantities_go_as_the_strings_server_side_apply_takes() -> None:
    pod = (
        "      containers:\n"
        "        - name: c\n"
        "          resources:\n"
        "            limits: {nvidia.com/gpu: 1, memory: 1Gi, cpu: 0.5}\n"
        "            requests: {cpu: 2}\n"
        "      initContainers: [{name: i, resources: {limits: {cpu: 1}}}]\n"
        "      volumes: [{name: v, emptyDir: {medium: Memory, sizeLimit: 1000}}]\n"
        "      overhead: {cpu: 1}\n"
    )
    text = job("a").replace("      containers: [{name: c, image: busybox}]\n", pod)
    (found,) = manifests([(text, "document 1")], "mnist", "ml")
    spec = found.body["spec"]["template"]["spec"]
    assert spec["containers"][0]["resources"] == {
        "limits": {"nvidia.com/gpu": "1", "memory": "1Gi", "cpu": "0.5"},
        "requests": {"cpu": "2"},
    }
    assert spec["initContainers"][0]["resources"]["limits"] == {"cpu": "1"}
    assert spec["volumes"][0]["emptyDir"] == {"medium": "Memory", "sizeLimit": "1000"}
    assert spec["overhead"] == {"cpu": "1"}


def test_a_planned_run_sends_what_its_text_reads_as_each_task_read_from_its_skeleton() -> None:
    from simpletfjob.api.render import plan_for
    from simpletfjob.options.render import Options
    from tests.conftest import EXAMPLES

    for network in ("host", "pod"):
        planned = plan_for(
            Options, EXAMPLES / "mnist.yaml", nodes=[f"node-{i}" for i in range(40)], num=-1,
            values=None, options={"namespace": "ml", "network": network}, caller="test",
        )  # fmt: skip
        assert planned.job is not None
        named = [(d, f"document {i}") for i, d in enumerate(planned.documents, start=1)]
        texts = [(d.text, name) for d, name in named]
        assert manifests(named, planned.job, "ml") == manifests(texts, planned.job, "ml")
        read = [d for d, _ in named if d.body(manifest_loader())[0]]
        assert len(read) == 39  # every worker; the one ps, a role of one task, is parsed
