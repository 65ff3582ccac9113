"""`simpletfjob delete RUN`, on the loopback server and the real control plane (the `cluster` fixture)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simpletfjob.kube.lists import METADATA_ONLY
from tests.conftest import assert_one_line_error
from tests.support.cluster import ADMIN, Cluster
from tests.support.kubeapi import KubeAPI, write_kubeconfig
from tests.support.runs import Apply, jobs, lines, services


def job(name: str, labels: dict[str, str], **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels, **metadata},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}],
                }
            }
        },
    }


def test_delete_removes_the_runs_jobs_and_services_and_nothing_else(
    cluster: Cluster, run_in: Any
) -> None:
    ns = cluster.create_namespace()
    apply = run_in(ns)
    assert apply("--network", "pod", hosts="h1,h2").code == 0
    # Not the run's: one without managed-by, and another run.
    cluster.create(
        f"/apis/batch/v1/namespaces/{ns}/jobs", job("stray", {"simpletfjob/job": "mnist"})
    )
    other = {"simpletfjob/job": "other", "app.kubernetes.io/managed-by": "simpletfjob"}
    cluster.create(f"/apis/batch/v1/namespaces/{ns}/jobs", job("other-0", other))

    result = apply.delete()
    assert result.code == 0, result.err
    assert result.out == ""
    assert lines(result) == [
        'job.batch "mnist-ps-0" deleted',
        'job.batch "mnist-worker-0" deleted',
        'service "mnist-ps-0" deleted',
        'service "mnist-worker-0" deleted',
        f"simpletfjob: deleted run mnist in namespace {ns} (4 objects: 2 jobs, 2 services)",
    ]
    assert services(cluster, ns) == {}
    left = jobs(cluster, ns, "simpletfjob/job")
    assert sorted(left) == ["other-0", "stray"]

    missing = apply.delete()
    assert_one_line_error(missing, 1, contains=(f"no run 'mnist' in namespace '{ns}'",))


def test_a_run_of_one_object_is_counted_in_the_singular(cluster: Cluster, run_in: Any) -> None:
    ns = cluster.create_namespace()
    apply = run_in(ns)
    assert apply("--psn", "0", hosts="h1").code == 0
    result = apply.delete()
    assert result.code == 0, result.err
    assert lines(result) == [
        'job.batch "mnist-worker-0" deleted',
        f"simpletfjob: deleted run mnist in namespace {ns} (1 object: 1 job, 0 services)",
    ]


def test_a_refusal_stops_the_delete_at_once_in_one_line(cluster: Cluster, run_in: Any) -> None:
    ns = cluster.create_namespace()
    assert run_in(ns)("--network", "pod", hosts="h1,h2").code == 0
    cluster.grant("carol", ["list"], ["jobs"], namespace=ns, api_group="batch")
    cluster.grant("carol", ["list", "delete"], ["services"], namespace=ns)
    refused = run_in(ns, "carol").delete()
    assert_one_line_error(
        refused,
        1,
        contains=(f"user 'carol' cannot delete jobs in namespace {ns}", "verb 'delete' on 'jobs'"),
    )
    assert sorted(jobs(cluster, ns)) == ["mnist-ps-0", "mnist-worker-0"]
    assert sorted(services(cluster, ns)) == ["mnist-ps-0", "mnist-worker-0"]


def test_wait_returns_once_the_jobs_are_gone_or_says_which_are_left(
    cluster: Cluster, run_in: Any
) -> None:
    ns = cluster.create_namespace()
    apply = run_in(ns)
    assert apply().code == 0
    waited = apply.delete("--wait", "--timeout", "30s")
    assert waited.code == 0, waited.err
    assert lines(waited)[-1].endswith("(3 objects: 3 jobs, 0 services) and its Jobs are gone")
    assert jobs(cluster, ns) == {}

    # A finalizer holds a Job: --wait gives up after --timeout, naming it.
    assert apply().code == 0
    held = f"/apis/batch/v1/namespaces/{ns}/jobs/mnist-ps-0"
    cluster.admin.merge_patch(held, {"metadata": {"finalizers": ["example.com/hold"]}})
    timed_out = apply.delete("--wait", "--timeout", "1s")
    assert timed_out.code == 1
    *deleted, error = lines(timed_out)
    assert len(deleted) == 3
    assert error == (
        f"simpletfjob: error: run 'mnist' in namespace {ns}: 1 job is still there after 1s "
        "(job.batch/mnist-ps-0); their pods may still be stopping, see kubectl get pods -l "
        f"app.kubernetes.io/managed-by=simpletfjob,simpletfjob/job=mnist -n {ns}"
    )
    cluster.admin.merge_patch(held, {"metadata": {"finalizers": None}})
    assert jobs(cluster, ns) == {} or all(
        j["metadata"].get("deletionTimestamp") for j in jobs(cluster, ns).values()
    )


def test_a_run_name_that_is_no_label_value_is_a_usage_error(
    cluster: Cluster, cli: Any, tmp_path: Path, kube_env: Path
) -> None:
    kubeconfig = str(cluster.kubeconfig(tmp_path / "kc", ADMIN, "default"))
    result = cli("delete", "Mnist run", "--kubeconfig", kubeconfig)
    assert_one_line_error(
        result, 2, contains=("RUN 'Mnist run' is not a valid run name, a label value",)
    )


def test_apply_and_delete_list_each_resource_once_whatever_the_number_of_tasks(
    kubeapi: KubeAPI, cli: Any, tmp_path: Path
) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kc", kubeapi.url, namespace="default")
    apply = Apply(cli, None, tmp_path, "default", kubeconfig=kubeconfig)  # type: ignore[arg-type]
    hosts = ",".join(f"h{i}" for i in range(12))
    assert apply("--network", "pod", hosts=hosts).code == 0
    # The run, by its labels; and the names the namespace's objects hold (metadata only).
    listed = [
        (r.query.get("labelSelector"), r.accept) for r in kubeapi.requests_for("jobs", "list")
    ]
    assert listed == [
        ("app.kubernetes.io/managed-by=simpletfjob,simpletfjob/job=mnist", "application/json"),
        (None, METADATA_ONLY),
    ]
    assert len(kubeapi.requests_for("services", "list")) == 2
    assert apply.delete().code == 0
    assert len(kubeapi.requests_for("jobs", "list")) == 3
    assert len(kubeapi.requests_for("services", "list")) == 3
    assert len(kubeapi.requests_for("jobs", "delete")) == 12


def test_namespace_given_wins_over_the_contexts(cluster: Cluster, run_in: Any) -> None:
    ns, other = cluster.create_namespace(), cluster.create_namespace()
    apply = run_in(ns)
    assert apply("-n", other).code == 0
    assert jobs(cluster, ns) == {}
    assert sorted(jobs(cluster, other)) == ["mnist-ps-0", "mnist-worker-0", "mnist-worker-1"]
    assert_one_line_error(apply.delete(), 1, contains=(f"no run 'mnist' in namespace '{ns}'",))
    deleted = apply.delete("--namespace", other)
    assert deleted.code == 0, deleted.err
    assert jobs(cluster, other) == {}


def test_ignore_not_found_exits_0_quietly_when_there_is_no_run(
    cluster: Cluster, run_in: Any
) -> None:
    ns = cluster.create_namespace()
    apply = run_in(ns)
    # Nothing there yet: as kubectl delete --ignore-not-found, exit 0 and say nothing.
    for extra in ((), ("--wait", "--timeout", "10s")):
        quiet = apply.delete("--ignore-not-found", *extra)
        assert (quiet.code, quiet.out, quiet.err) == (0, "", "")
    # A run that is there is deleted as without the flag.
    assert apply().code == 0
    result = apply.delete("--ignore-not-found")
    assert result.code == 0, result.err
    assert lines(result)[-1] == (
        f"simpletfjob: deleted run mnist in namespace {ns} (3 objects: 3 jobs, 0 services)"
    )
    assert jobs(cluster, ns) == {}
    # Again, as a CI cleanup step after wait --cleanup all: nothing left, still exit 0.
    again = apply.delete("--ignore-not-found")
    assert (again.code, again.out, again.err) == (0, "", "")
    # A name that cannot be a run is still a usage error.
    bad = apply.cli("delete", "no/such", "--ignore-not-found", "--kubeconfig", apply.kubeconfig)
    assert_one_line_error(bad, 2, contains=("is not a valid run name",))


def test_wait_of_jobs_the_server_deleted_at_once_lists_them_no_more(
    kubeapi: KubeAPI, cli: Any, tmp_path: Path
) -> None:
    """Each Job's delete answered with a Status, not the Job: gone, with nothing to watch for.
    --wait listed them again and watched (kubectl's `delete --wait` is 0.4 s at 10 tasks)."""
    kubeconfig = write_kubeconfig(tmp_path / "kc", kubeapi.url, namespace="default")
    apply = Apply(cli, None, tmp_path, "default", kubeconfig=kubeconfig)  # type: ignore[arg-type]
    assert apply(hosts="h1,h2,h3").code == 0
    waited = apply.delete("--wait")
    assert waited.code == 0, waited.err
    assert lines(waited)[-1].endswith("(3 objects: 3 jobs, 0 services) and its Jobs are gone")
    assert kubeapi.objects("jobs", "default") == []
    assert len(kubeapi.requests_for("jobs", "list")) == 3  # apply's two and delete's, no more
    assert kubeapi.requests_for("jobs", "watch") == []
