"""`simpletfjob apply`: a run rendered and applied, on the loopback server and the real control plane.

Each test runs the command in-process, as a user would, through a kubeconfig and the
real `kubernetes` client, against both servers (the `cluster` fixture), and reads back
what the server holds. The real control plane runs the Job controller and the garbage
collector, so --replace is seen to wait for the old run's pods.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_one_line_error, load_all, tf_config_of, write
from tests.support.client import ApiFailure
from tests.support.cluster import Cluster, LoopbackCluster, wait_for
from tests.support.kubeapi import KubeAPI, make_node, write_kubeconfig
from tests.support.runs import Apply, docs_rbac, jobs, lines, services
from tests.support.templates import MNIST as TEMPLATE


def test_apply_creates_the_run_in_the_contexts_namespace(cluster: Cluster, run_in: Any) -> None:
    ns = cluster.create_namespace()
    result = run_in(ns)()
    assert result.code == 0, result.err
    assert result.out == ""
    assert lines(result) == [
        "job.batch/mnist-ps-0 created",
        "job.batch/mnist-worker-0 created",
        "job.batch/mnist-worker-1 created",
        f"simpletfjob: applied 3 tasks to run mnist in namespace {ns}: 1 ps (h1), "
        "2 worker (h2, h3) (3 created)",
    ]
    stored = jobs(cluster, ns)
    assert sorted(stored) == ["mnist-ps-0", "mnist-worker-0", "mnist-worker-1"]
    worker = stored["mnist-worker-1"]
    assert worker["metadata"]["namespace"] == ns
    assert worker["metadata"]["labels"]["simpletfjob/role"] == "worker"
    assert worker["metadata"]["annotations"]["simpletfjob/success-policy"] == "worker0"
    assert any(m["manager"] == "simpletfjob" for m in worker["metadata"]["managedFields"])
    assert tf_config_of(worker) == {
        "cluster": {"ps": ["h1:2222"], "worker": ["h2:2222", "h3:2222"]},
        "task": {"type": "worker", "index": 1},
    }


def test_the_same_run_again_is_unchanged(cluster: Cluster, run_in: Any) -> None:
    ns = cluster.create_namespace()
    apply = run_in(ns)
    assert apply().code == 0
    before = {name: job["metadata"]["resourceVersion"] for name, job in jobs(cluster, ns).items()}
    again = apply()
    assert again.code == 0, again.err
    assert lines(again)[:3] == [
        "job.batch/mnist-ps-0 unchanged",
        "job.batch/mnist-worker-0 unchanged",
        "job.batch/mnist-worker-1 unchanged",
    ]
    assert lines(again)[3].endswith("(3 unchanged)")
    after = jobs(cluster, ns)
    # Nothing was written: the Job controller may have updated a status meanwhile, never a spec.
    assert {name: job["metadata"]["uid"] for name, job in after.items()} == {
        name: job["metadata"]["uid"] for name, job in jobs(cluster, ns).items()
    }
    assert set(after) == set(before)


def test_a_changed_run_is_refused_before_anything_changes(cluster: Cluster, run_in: Any) -> None:
    ns = cluster.create_namespace()
    apply = run_in(ns)
    assert apply().code == 0
    before = jobs(cluster, ns)
    changed = apply(image="tensorflow/tensorflow")
    line = assert_one_line_error(
        changed, 1, contains=(f"run 'mnist' in namespace {ns} already exists", "--replace")
    )
    assert "job.batch/mnist-ps-0 (its pod template differs)" in line
    after = jobs(cluster, ns)
    assert {n: j["metadata"]["uid"] for n, j in after.items()} == {
        n: j["metadata"]["uid"] for n, j in before.items()
    }
    for job in after.values():
        assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox"


def test_a_run_the_render_lacks_a_task_of_is_refused(cluster: Cluster, run_in: Any) -> None:
    ns = cluster.create_namespace()
    apply = run_in(ns)
    assert apply().code == 0
    fewer = apply(hosts="h1,h2")
    line = assert_one_line_error(fewer, 1, contains=("--replace",))
    assert "job.batch/mnist-worker-1 (not in this render)" in line
    assert sorted(jobs(cluster, ns)) == ["mnist-ps-0", "mnist-worker-0", "mnist-worker-1"]


def test_a_run_that_has_ended_is_not_started_again_by_a_plain_apply(
    cluster: Cluster, run_in: Any
) -> None:
    """After wait's cleanup, apply would bring back a ps that never ends: --replace reruns."""
    ns = cluster.create_namespace()
    apply = run_in(ns)
    assert apply().code == 0
    jobs_path = f"/apis/batch/v1/namespaces/{ns}/jobs"
    complete = {
        "type": "Complete",
        "status": "True",
        "lastProbeTime": "2026-11-26T08:00:00Z",
        "lastTransitionTime": "2026-11-26T08:00:00Z",
    }
    status = {
        "status": {
            "succeeded": 1,
            "startTime": "2026-11-26T07:00:00Z",
            "completionTime": "2026-11-26T08:00:00Z",
            "conditions": [complete],
        }
    }
    cluster.finish_job(ns, "mnist-worker-0", status)
    for name in ("mnist-ps-0", "mnist-worker-1"):  # what wait's cleanup removes
        cluster.admin.delete(f"{jobs_path}/{name}", {"propagationPolicy": "Background"})
    wait_for(lambda: sorted(jobs(cluster, ns)) == ["mnist-worker-0"], what="the cleanup")
    again = apply()
    line = assert_one_line_error(
        again, 1, contains=(f"run 'mnist' in namespace {ns} has ended (worker-0 Succeeded)",)
    )
    assert "job.batch/mnist-ps-0, job.batch/mnist-worker-1" in line
    assert line.endswith("give --replace to run it again")
    assert sorted(jobs(cluster, ns)) == ["mnist-worker-0"]
    rerun = apply("--replace", "--timeout", "60s")
    assert rerun.code == 0, rerun.err
    assert sorted(jobs(cluster, ns)) == ["mnist-ps-0", "mnist-worker-0", "mnist-worker-1"]


def test_a_run_whose_deciding_job_was_deleted_beside_its_other_tasks_is_not_started_again(
    cluster: Cluster, run_in: Any
) -> None:
    """apply sends the deciding Jobs first (runs/judge.py): worker-0 missing beside ps-0 and
    worker-1 was deleted (by hand, or by a TTL once it ended), so applying would start it
    beside what is left of the run."""
    ns = cluster.create_namespace()
    apply = run_in(ns)
    assert apply().code == 0
    jobs_path = f"/apis/batch/v1/namespaces/{ns}/jobs"
    cluster.admin.delete(f"{jobs_path}/mnist-worker-0", {"propagationPolicy": "Background"})
    wait_for(lambda: "mnist-worker-0" not in jobs(cluster, ns), what="worker-0's Job to go")
    again = apply()
    line = assert_one_line_error(
        again, 1, contains=(f"run 'mnist' in namespace {ns} has ended (worker-0's Job is gone",)
    )
    assert "would start job.batch/mnist-worker-0 beside" in line, line
    assert sorted(jobs(cluster, ns)) == ["mnist-ps-0", "mnist-worker-1"]


def test_a_run_left_with_only_its_deciding_jobs_is_finished_by_apply_again(
    cluster: Cluster, run_in: Any
) -> None:
    """An apply cut short (or still at work) after the deciding Jobs: under all-workers every
    worker decides, and only some are there, none ended. apply again creates the rest."""
    ns = cluster.create_namespace()
    apply = run_in(ns)
    policy = ("--success-policy", "all-workers")
    assert apply(*policy).code == 0
    jobs_path = f"/apis/batch/v1/namespaces/{ns}/jobs"
    for name in ("mnist-ps-0", "mnist-worker-1"):  # as if never applied
        cluster.admin.delete(f"{jobs_path}/{name}", {"propagationPolicy": "Background"})
    wait_for(lambda: sorted(jobs(cluster, ns)) == ["mnist-worker-0"], what="the Jobs to go")
    uid = jobs(cluster, ns)["mnist-worker-0"]["metadata"]["uid"]
    again = apply(*policy)
    assert again.code == 0, again.err
    assert lines(again)[:3] == [
        "job.batch/mnist-ps-0 created",
        "job.batch/mnist-worker-0 unchanged",
        "job.batch/mnist-worker-1 created",
    ]
    now = jobs(cluster, ns)
    assert sorted(now) == ["mnist-ps-0", "mnist-worker-0", "mnist-worker-1"]
    assert now["mnist-worker-0"]["metadata"]["uid"] == uid


def test_replace_deletes_the_old_run_waits_for_it_then_applies(
    cluster: Cluster, run_in: Any
) -> None:
    ns = cluster.create_namespace()
    apply = run_in(ns)
    assert apply().code == 0
    old = {job["metadata"]["uid"] for job in jobs(cluster, ns).values()}
    if not isinstance(cluster, LoopbackCluster):
        # The Job controller has made each Job's pod (unscheduled: it goes as soon as it is
        # deleted), so that Foreground has something to wait for.
        wait_for(lambda: len(cluster.pods(ns)) == 3, what="the Job controller's pods")
    replaced = apply("--replace", "--timeout", "60s", hosts="h1,h2", image="tensorflow/tensorflow")
    assert replaced.code == 0, replaced.err
    assert lines(replaced)[:5] == [
        'job.batch "mnist-ps-0" deleted',
        'job.batch "mnist-worker-0" deleted',
        'job.batch "mnist-worker-1" deleted',
        "job.batch/mnist-ps-0 created",
        "job.batch/mnist-worker-0 created",
    ]
    now = jobs(cluster, ns)
    assert sorted(now) == ["mnist-ps-0", "mnist-worker-0"]
    assert not old & {job["metadata"]["uid"] for job in now.values()}
    assert now["mnist-ps-0"]["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "tensorflow/tensorflow"
    )
    # Foreground: the old Jobs were gone only once their pods were, so none is left.
    owners = {
        ref["uid"] for pod in cluster.pods(ns) for ref in pod["metadata"].get("ownerReferences", [])
    }
    assert not owners & old
    assert tf_config_of(now["mnist-worker-0"])["cluster"] == {
        "ps": ["h1:2222"],
        "worker": ["h2:2222"],
    }


def test_a_server_dry_run_creates_nothing(cluster: Cluster, run_in: Any) -> None:
    ns = cluster.create_namespace()
    dry = run_in(ns)("--dry-run=server")
    assert dry.code == 0, dry.err
    assert lines(dry)[:3] == [
        "job.batch/mnist-ps-0 created (server dry run)",
        "job.batch/mnist-worker-0 created (server dry run)",
        "job.batch/mnist-worker-1 created (server dry run)",
    ]
    assert lines(dry)[3].startswith("simpletfjob: would apply 3 tasks to run mnist")
    assert lines(dry)[3].endswith("(3 created; server dry run, nothing changed)")
    assert jobs(cluster, ns) == {}


def test_a_client_dry_run_prints_what_apply_would_send_and_writes_nothing(
    cluster: Cluster, run_in: Any
) -> None:
    """As kubectl's: the objects on stdout, a line for each with (dry run), no request that
    writes: a user who may only read does it, and the server holds nothing after it."""
    ns = cluster.create_namespace()
    for resources, group in ((["jobs"], "batch"), (["services"], "")):
        cluster.grant("carol", ["get", "list"], resources, namespace=ns, api_group=group)
    carol = run_in(ns, "carol")
    dry = carol("--dry-run=client", "--network", "pod", "--deadline", "1h", hosts="h1,h2")
    assert dry.code == 0, dry.err
    assert lines(dry) == [
        "service/mnist-ps-0 created (dry run)",
        "service/mnist-worker-0 created (dry run)",
        "job.batch/mnist-ps-0 created (dry run)",
        "job.batch/mnist-worker-0 created (dry run)",
        f"simpletfjob: would apply 2 tasks to run mnist in namespace {ns}: 1 ps (h1), "
        "1 worker (h2) (4 created; client dry run, nothing sent)",
    ]
    assert jobs(cluster, ns) == {} and services(cluster, ns) == {}
    shown = load_all(dry.out)
    assert [(d["kind"], d["metadata"]["name"]) for d in shown] == [
        ("Service", "mnist-ps-0"), ("Service", "mnist-worker-0"),
        ("Job", "mnist-ps-0"), ("Job", "mnist-worker-0"),
    ]  # fmt: skip
    # What the real apply then sends is what was shown: the server holds every field of it.
    applied = run_in(ns)("--network", "pod", "--deadline", "1h", hosts="h1,h2")
    assert applied.code == 0, applied.err
    stored = {("Job", n): o for n, o in jobs(cluster, ns).items()}
    stored.update({("Service", n): o for n, o in services(cluster, ns).items()})
    for doc in shown:
        held = stored[doc["kind"], doc["metadata"]["name"]]
        assert doc["metadata"]["namespace"] == ns
        assert doc["metadata"]["labels"].items() <= held["metadata"]["labels"].items()
        if doc["kind"] == "Job":
            assert doc["spec"]["activeDeadlineSeconds"] == 3600
            assert held["spec"]["activeDeadlineSeconds"] == 3600
            assert tf_config_of(doc) == tf_config_of(held)
    # The same run again: each object as the server holds it already is unchanged.
    again = carol("--dry-run=client", "--network", "pod", "--deadline", "1h", hosts="h1,h2")
    assert again.code == 0, again.err
    assert lines(again)[0] == "service/mnist-ps-0 unchanged (dry run)"
    assert lines(again)[-1].endswith("(4 unchanged; client dry run, nothing sent)")
    # Another image: the Jobs would be configured (the server's dry run says whether it may).
    other = carol(
        "--dry-run=client", "--network", "pod", "--deadline", "1h", hosts="h1,h2", image="other"
    )
    assert lines(other)[2:4] == [
        "job.batch/mnist-ps-0 configured (dry run)",
        "job.batch/mnist-worker-0 configured (dry run)",
    ]
    # --replace: what it would delete, then what it would create.
    replaced = carol("--dry-run=client", "--replace", "--psn", "0", hosts="h1")
    assert replaced.code == 0, replaced.err
    assert lines(replaced) == [
        "job.batch/mnist-ps-0 deleted (dry run)",
        "job.batch/mnist-worker-0 deleted (dry run)",
        "service/mnist-ps-0 deleted (dry run)",
        "service/mnist-worker-0 deleted (dry run)",
        "job.batch/mnist-worker-0 created (dry run)",
        f"simpletfjob: would apply 1 task to run mnist in namespace {ns}: 1 worker (h1) "
        "(4 deleted, 1 created; client dry run, nothing sent)",
    ]
    assert sorted(jobs(cluster, ns)) == ["mnist-ps-0", "mnist-worker-0"]


def test_services_go_first_and_a_document_for_another_namespace_is_a_usage_error(
    cluster: Cluster, run_in: Any
) -> None:
    ns = cluster.create_namespace()
    apply = run_in(ns)
    result = apply("--network", "pod", hosts="h1,h2")
    assert result.code == 0, result.err
    assert lines(result)[:4] == [
        "service/mnist-ps-0 created",
        "service/mnist-worker-0 created",
        "job.batch/mnist-ps-0 created",
        "job.batch/mnist-worker-0 created",
    ]
    assert sorted(services(cluster, ns)) == ["mnist-ps-0", "mnist-worker-0"]
    config = tf_config_of(jobs(cluster, ns)["mnist-worker-0"])
    assert config["cluster"]["ps"] == [f"mnist-ps-0.{ns}.svc:2222"]

    elsewhere = cluster.create_namespace()
    apply.template.write_text(
        TEMPLATE.replace("  name: mnist-<<type>>-<<index>>\n", "  name: x-<<type>>-<<index>>\n  namespace: "
                         f"{elsewhere}\n")
    )  # fmt: skip
    refused = apply(hosts="h1,h2")
    assert_one_line_error(
        refused, 2, contains=(f"names namespace {elsewhere!r}", f"namespace {ns!r}")
    )
    assert jobs(cluster, elsewhere, "simpletfjob/job=mnist") == {}


def test_an_object_of_the_same_name_outside_the_run_is_never_taken_over(
    cluster: Cluster, run_in: Any
) -> None:
    ns = cluster.create_namespace()
    theirs = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "mnist-worker-0", "labels": {"team": "other"}},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}],
                }
            }
        },
    }
    cluster.create(f"/apis/batch/v1/namespaces/{ns}/jobs", theirs)
    refused = run_in(ns)()
    assert_one_line_error(
        refused,
        1,
        contains=(
            "job.batch/mnist-worker-0 already exists",
            "belongs to no run",
            "rename the template's objects (metadata.name; --name changes only the run's label)",
        ),
    )
    # --name is the run's label, not the objects' names: another run meets the same Job.
    assert_one_line_error(
        run_in(ns)("--name", "other"), 1, contains=("job.batch/mnist-worker-0 already exists",)
    )
    assert set(jobs(cluster, ns, "team=other")) == {"mnist-worker-0"}
    assert jobs(cluster, ns) == {}


def test_no_labels_and_replace_with_a_dry_run_are_usage_errors(
    cluster: Cluster, run_in: Any
) -> None:
    ns = cluster.create_namespace()
    apply = run_in(ns)
    assert_one_line_error(apply("--no-labels"), 2, contains=("--no-labels cannot go with apply",))
    assert_one_line_error(
        apply("--replace", "--dry-run=server"), 2, contains=("--replace cannot go with --dry-run",)
    )
    assert_one_line_error(apply("-o", "x.yaml"), 2, contains=("No such option '-o'",))
    assert jobs(cluster, ns) == {}


# -- RBAC -------------------------------------------------------------------------------------------


def readme_role() -> dict[str, Any]:
    """The Role that the docs give a user of apply, status, wait and delete."""
    return docs_rbac("Role")


def test_the_readme_role_is_enough_and_a_user_without_create_changes_nothing(
    cluster: Cluster, run_in: Any
) -> None:
    ns = cluster.create_namespace()
    for rule in readme_role()["rules"]:
        (group,) = rule["apiGroups"]
        cluster.grant("alice", rule["verbs"], rule["resources"], namespace=ns, api_group=group)
    alice = run_in(ns, "alice")
    assert alice("--network", "pod").code == 0
    assert alice("--network", "pod").code == 0  # unchanged
    r = alice("--network", "pod", "--replace", hosts="h1,h2")
    assert r.code == 0, r.err
    deleted = alice.delete("--wait")
    assert deleted.code == 0, deleted.err
    assert jobs(cluster, ns) == {} and services(cluster, ns) == {}

    # bob may read and patch, not create: the servers' dry run refuses before anything is made.
    for resources, group in ((["jobs"], "batch"), (["services"], "")):
        cluster.grant("bob", ["get", "list", "patch"], resources, namespace=ns, api_group=group)
    refused = run_in(ns, "bob")("--network", "pod")
    assert_one_line_error(
        refused, 1, contains=(f"cannot create services in namespace {ns}", "verb 'create'")
    )
    assert jobs(cluster, ns) == {} and services(cluster, ns) == {}


def test_the_docs_role_and_cluster_role_let_a_run_read_nodes_and_their_usage(
    cluster: Cluster, cli: Any, tmp_path: Path, kube_env: Path
) -> None:
    """With only the docs' Role and ClusterRole, nodes are read with their pods: no warning.

    The user is one no other test uses: a ClusterRole's grants hold in every namespace, for
    the rest of the session.
    """
    ns = cluster.create_namespace()
    for name in ("g1", "g2"):
        cluster.create_node(name, gpus=2)
    for kind, namespace in (("Role", ns), ("ClusterRole", None)):
        for rule in docs_rbac(kind)["rules"]:
            (group,) = rule["apiGroups"]
            cluster.grant("erin", rule["verbs"], rule["resources"], namespace, api_group=group)
    kubeconfig = str(cluster.kubeconfig(tmp_path / "kc-erin", "erin", ns))
    template = write(tmp_path / "mnist.yaml", TEMPLATE)
    shown = cli("nodes", "--gpus", "1", "-o", "json", "--kubeconfig", kubeconfig)
    assert shown.code == 0, shown.err
    assert "warning" not in shown.err
    counted = {n["name"]: n["gpu"]["requested"] for n in json.loads(shown.out)}
    assert counted["g1"] == 0 and counted["g2"] == 0  # the pods were read: a count, not null
    applied = cli(
        "apply", str(template), "-N", "2", "--gpus", "1",
        "--set", "image=busybox", "--kubeconfig", kubeconfig,
    )  # fmt: skip
    assert applied.code == 0, applied.err
    assert "warning" not in applied.err
    assert sorted(jobs(cluster, ns)) == ["mnist-ps-0", "mnist-worker-0"]


# -- half-way ----------------------------------------------------------------------------------------


def test_an_apply_that_fails_half_way_says_what_was_applied_and_how_to_remove_it(
    kube: Any, namespace: str, cli: Any, tmp_path: Path, kube_env: Path
) -> None:
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "two-jobs"},
        "spec": {"hard": {"count/jobs.batch": "2"}},
    }
    kube.create(f"/api/v1/namespaces/{namespace}/resourcequotas", quota)
    # No quota controller runs: write the status it would (admission counts from there on).
    kube.admin.merge_patch(
        f"/api/v1/namespaces/{namespace}/resourcequotas/two-jobs/status",
        {"status": {"hard": {"count/jobs.batch": "2"}, "used": {"count/jobs.batch": "0"}}},
    )
    result = Apply(cli, kube, tmp_path, namespace)()
    assert result.code == 1
    *applied, error = lines(result)
    # The writes go out together: any two of the three may take the quota's two places.
    # Those that did are said, in the render's order; the one left is named.
    render = ["mnist-ps-0", "mnist-worker-0", "mnist-worker-1"]
    landed = [line.removeprefix("job.batch/").removesuffix(" created") for line in applied]
    assert len(landed) == 2 and landed == [name for name in render if name in landed], applied
    (left,) = set(render) - set(landed)
    assert error.startswith("simpletfjob: error: ") and "exceeded quota: two-jobs" in error
    assert f"cannot apply job '{left}' in namespace {namespace}: " in error
    assert "Role" not in error  # a quota, not RBAC
    assert "applied 2 of 3 objects of run 'mnist'" in error
    assert f"not job.batch/{left}" in error
    assert f"simpletfjob delete mnist -n {namespace}" in error
    assert sorted(jobs(kube, namespace)) == landed


def test_json_of_a_stored_job_is_what_the_render_wrote(cluster: Cluster, run_in: Any) -> None:
    """TF_CONFIG goes to the server as the string a render writes, not re-encoded."""
    ns = cluster.create_namespace()
    apply = run_in(ns)
    assert apply().code == 0
    stored = jobs(cluster, ns)["mnist-ps-0"]
    env = stored["spec"]["template"]["spec"]["containers"][0]["env"][0]
    assert env["name"] == "TF_CONFIG"
    assert json.loads(env["value"])["task"] == {"type": "ps", "index": 0}
    with pytest.raises(ApiFailure):
        cluster.admin.get(f"/apis/batch/v1/namespaces/{ns}/jobs/mnist-worker-2")


# -- what apply refuses to send ---------------------------------------------------------------------


def test_only_the_runs_jobs_and_services_are_sent(cluster: Cluster, run_in: Any) -> None:
    ns = cluster.create_namespace()
    apply = run_in(ns)
    config_map = (
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg-<<type>>-<<index>>\n"
        "data:\n  a: b\n"
    )
    apply.template.write_text(TEMPLATE + config_map)
    refused = apply()
    assert_one_line_error(
        refused, 1, contains=("document 2 (ConfigMap 'cfg-ps-0') is a ConfigMap", "kubectl")
    )
    # The template sets the run's label otherwise: the run would not find its own Jobs.
    labelled = TEMPLATE.replace(
        "  name: mnist-<<type>>-<<index>>\n",
        "  name: mnist-<<type>>-<<index>>\n  labels:\n    simpletfjob/job: other\n",
    )
    apply.template.write_text(labelled)
    refused = apply()
    assert_one_line_error(
        refused, 1, contains=("carries simpletfjob/job='other'", "the run's 'mnist'")
    )
    assert jobs(cluster, ns, "simpletfjob/job") == {}


def test_a_run_being_deleted_is_waited_for_not_applied_over(cluster: Cluster, run_in: Any) -> None:
    ns = cluster.create_namespace()
    apply = run_in(ns)
    assert apply().code == 0
    held = f"/apis/batch/v1/namespaces/{ns}/jobs/mnist-worker-0"
    cluster.admin.merge_patch(held, {"metadata": {"finalizers": ["example.com/hold"]}})
    assert apply.delete().code == 0
    refused = apply()
    assert_one_line_error(
        refused,
        1,
        contains=("is being deleted (job.batch/mnist-worker-0 still there)", "--wait"),
    )
    cluster.admin.merge_patch(held, {"metadata": {"finalizers": None}})
    wait_for(lambda: not jobs(cluster, ns), what="the held Job to go")
    assert apply().code == 0


def test_apply_reads_the_nodes_from_the_cluster_it_applies_to(
    kubeapi: KubeAPI, cli: Any, tmp_path: Path
) -> None:
    kubeapi.set_nodes([make_node(name) for name in ("n2", "n1", "n3")])
    kubeapi.create(
        "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}
    )
    kubeconfig = write_kubeconfig(tmp_path / "kc", kubeapi.url, namespace="ml")
    template = write(tmp_path / "mnist.yaml", TEMPLATE)
    result = cli("apply", str(template), "--set", "image=busybox", "--kubeconfig", str(kubeconfig))
    assert result.code == 0, result.err
    assert lines(result)[-1] == (
        "simpletfjob: applied 3 tasks to run mnist in namespace ml: 1 ps (n1), 2 worker (n2, n3) "
        "(3 created)"
    )
    stored = {job["metadata"]["name"]: job for job in kubeapi.objects("jobs", "ml")}
    assert tf_config_of(stored["mnist-ps-0"])["cluster"]["worker"] == ["n2:2222", "n3:2222"]


def test_a_built_in_template_with_numeric_quantities_applies_and_applies_again(
    cluster: Cluster, cli: Any, tmp_path: Path, kube_env: Path
) -> None:
    """tf2-multiworker writes `nvidia.com/gpu: 1`; server-side apply on v1.20 takes only strings."""
    ns = cluster.create_namespace()
    kubeconfig = str(cluster.kubeconfig(tmp_path / "kc", "admin", ns))
    args = ("apply", "tf2-multiworker", "--nodes", "a,b", "--set", "gpus=1")
    first = cli(*args, "--kubeconfig", kubeconfig)
    assert first.code == 0, first.err
    again = cli(*args, "--kubeconfig", kubeconfig)
    assert again.code == 0, again.err
    assert lines(again)[:2] == [
        "job.batch/tf2-multiworker-worker-0 unchanged",
        "job.batch/tf2-multiworker-worker-1 unchanged",
    ]
    stored = jobs(cluster, ns, "simpletfjob/job=tf2-multiworker")["tf2-multiworker-worker-0"]
    (container,) = stored["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_a_built_in_runs_again_beside_itself_under_another_name(
    cluster: Cluster, cli: Any, tmp_path: Path, kube_env: Path
) -> None:
    """--name names a built-in's Jobs, so a second run does not meet the first; a refusal of a
    taken name offers the option that names the run otherwise."""
    ns = cluster.create_namespace()
    kubeconfig = str(cluster.kubeconfig(tmp_path / "kc", "admin", ns))

    def apply(*args: str) -> Any:
        return cli("apply", "pytorch-ddp", "--nodes", "a,b", "--kubeconfig", kubeconfig, *args)

    assert apply().code == 0
    changed = apply("--set", "cpu=2")  # another run of the same built-in, under its name
    line = assert_one_line_error(changed, 1, contains=("run 'pytorch-ddp'", "differs"))
    assert line.endswith(
        "give --replace to delete it and apply this render, "
        "or --name NAME to start another run beside it"
    )
    second = apply("--set", "cpu=2", "--name", "second")
    assert second.code == 0, second.err
    assert lines(second)[:2] == [
        "job.batch/second-worker-0 created",
        "job.batch/second-worker-1 created",
    ]
    assert set(jobs(cluster, ns, "simpletfjob/job=pytorch-ddp")) == {
        "pytorch-ddp-worker-0",
        "pytorch-ddp-worker-1",
    }
    # Objects named by --set name= that another run holds: --set names them otherwise.
    taken = apply("--name", "third", "--set", "name=second")
    line = assert_one_line_error(taken, 1, contains=("job.batch/second-worker-0 already exists",))
    assert line.endswith(
        "belongs to run 'second'; simpletfjob changes only its own objects: delete it, "
        "or give --set name=NAME to name this run's objects otherwise"
    )
    assert jobs(cluster, ns, "simpletfjob/job=third") == {}


def test_replace_gives_up_after_its_timeout_and_applies_nothing(
    cluster: Cluster, run_in: Any
) -> None:
    ns = cluster.create_namespace()
    apply = run_in(ns)
    assert apply().code == 0
    held = f"/apis/batch/v1/namespaces/{ns}/jobs/mnist-ps-0"
    cluster.admin.merge_patch(held, {"metadata": {"finalizers": ["example.com/hold"]}})
    result = apply("--replace", "--timeout", "1s", image="tensorflow/tensorflow")
    assert result.code == 1
    *deleted, error = lines(result)
    assert len(deleted) == 3 and all(line.endswith('" deleted') for line in deleted)
    # The held Job at least (on the real server, the others may still wait for their pods).
    assert error.startswith(f"simpletfjob: error: run 'mnist' in namespace {ns}: ")
    assert "still there after 1s (job.batch/mnist-ps-0" in error
    assert error.endswith(
        "; the old run is being deleted (--replace), and nothing of this render was applied"
    )
    wait_for(lambda: len(jobs(cluster, ns)) == 1, what="the Jobs that nothing holds to go")
    (left,) = jobs(cluster, ns).values()
    assert left["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox"
    cluster.admin.merge_patch(held, {"metadata": {"finalizers": None}})
