"""`status` against the loopback API server: its table, -o json/yaml/name, list counts, RBAC.

The loopback server has no Job controller: these tests write the Jobs' status as it
would, and the pods' as a kubelet would. `wait` is in test_wait.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import assert_one_line_error
from tests.support.kubeapi import KubeAPI, write_kubeconfig
from tests.support.scenes import NS, UNSCHEDULED, finish_job, load_run, run_pod


def test_status_of_a_run_shows_a_line_and_one_row_per_task(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str
) -> None:
    load_run(kubeapi)
    run_pod(kubeapi, "mnist-ps-0", "h10")
    run_pod(kubeapi, "mnist-worker-1", "h14", "Pending", waiting="ImagePullBackOff")
    result = cli("status", "mnist", "--kubeconfig", kubeconfig)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == "run mnist in ml: Running, 3 tasks; started 2024-05-01T10:00:00Z"
    assert lines[1].split() == ["TASK", "NODE", "STATE", "RESTARTS", "AGE", "REASON"]
    rows = [line.split() for line in lines[2:]]
    assert [r[:4] for r in rows] == [
        ["ps-0", "h10", "Running", "0"],
        ["worker-0", "<none>", "Pending", "0"],
        ["worker-1", "h14", "Pending", "0"],
    ]
    assert rows[1][-1] == "Unschedulable" and rows[2][-1] == "ImagePullBackOff"
    assert lines[1].index("STATE") == lines[2].index("Running")  # columns line up


@pytest.mark.parametrize("form", ["json", "yaml"])
def test_status_json_and_yaml_carry_the_documented_fields(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str, form: str
) -> None:
    load_run(kubeapi, policy="all-workers")
    run_pod(kubeapi, "mnist-worker-0", "h1", "Failed", exit_code=1)
    finish_job(kubeapi, "mnist-worker-0", ok=False)
    result = cli("status", "mnist", "-o", form, "--kubeconfig", kubeconfig)
    assert result.code == 0, result.err  # whatever the run's state
    data = json.loads(result.out) if form == "json" else yaml.safe_load(result.out)
    assert (data["name"], data["namespace"], data["state"], data["successPolicy"]) == (
        "mnist",
        NS,
        "Failed",
        "all-workers",
    )
    worker = data["tasks"][1]
    assert worker == {
        "task": "worker-0",
        "role": "worker",
        "index": 0,
        "job": "mnist-worker-0",
        "node": "h1",
        "state": "Failed",
        "restarts": 1,
        "reason": "Error (exit 1)",
        "exitCode": 1,
        "jobCondition": "Failed",
        "startTime": "2024-05-01T10:00:00Z",
        "completionTime": "2024-05-01T10:00:00Z",
        "message": None,
    }


def test_status_says_what_a_pod_says_before_its_job_and_a_restart_count_only_when_known(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str
) -> None:
    load_run(kubeapi, tasks=(("chief", 0), ("worker", 0), ("worker", 1)))
    run_pod(kubeapi, "mnist-worker-0", "h1", "Succeeded")
    run_pod(kubeapi, "mnist-worker-1", "h2", "Failed", exit_code=1)  # the Job yet to count it
    # The chief restarted in place (OnFailure) past its backoffLimit: the Job controller
    # failed its Job and deleted its pod, and its restarts with it.
    chief = kubeapi.get("jobs", "mnist-chief-0", NS)
    chief["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    kubeapi.load("jobs", [chief])
    finish_job(kubeapi, "mnist-chief-0", ok=False)
    kubeapi.force_delete("mnist-chief-0-x", NS)
    result = cli("status", "mnist", "--kubeconfig", kubeconfig)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].startswith(
        "run mnist in ml: Failed, 3 tasks (chief-0 Failed: BackoffLimitExceeded)"
    )
    header = lines[1]
    rows = {line.split()[0]: line for line in lines[2:]}
    cells = {task: row.split(maxsplit=4) for task, row in rows.items()}
    assert cells["chief-0"][2:4] == ["Failed", "-"]
    assert cells["worker-0"][2:4] == ["Succeeded", "0"]
    assert cells["worker-1"][2:4] == ["Failed", "1"]
    reason = header.index("REASON")
    assert rows["worker-1"][reason:] == "Error (exit 1); its Job has yet to count it"
    assert rows["worker-0"][reason:] == "its Job has yet to count it"
    assert rows["chief-0"][reason:] == "BackoffLimitExceeded"
    data = json.loads(cli("status", "mnist", "-o", "json", "--kubeconfig", kubeconfig).out)
    tasks = {t["task"]: t for t in data["tasks"]}
    assert (tasks["chief-0"]["restarts"], tasks["chief-0"]["jobCondition"]) == (None, "Failed")
    assert (tasks["worker-1"]["state"], tasks["worker-1"]["jobCondition"]) == ("Failed", None)
    every = cli("status", "--kubeconfig", kubeconfig).out.splitlines()
    # ACTIVE, SUCCEEDED and FAILED count the Jobs: worker-0's and worker-1's are still active
    assert every[1].split()[:6] == ["mnist", "3", "2", "0", "1", "Failed"]


def test_status_without_a_run_lists_every_run(cli: Any, kubeapi: KubeAPI, kubeconfig: str) -> None:
    load_run(kubeapi, "mnist")
    load_run(kubeapi, "resnet", (("worker", 0), ("worker", 1)))
    run_pod(kubeapi, "resnet-worker-0", "h1")
    finish_job(kubeapi, "resnet-worker-1")
    result = cli("status", "--kubeconfig", kubeconfig)
    assert result.code == 0, result.err
    rows = [line.split() for line in result.out.splitlines()]
    assert rows[0] == ["NAME", "TASKS", "ACTIVE", "SUCCEEDED", "FAILED", "STATE", "AGE"]
    assert [r[:6] for r in rows[1:]] == [
        ["mnist", "3", "3", "0", "0", "Pending"],
        ["resnet", "2", "1", "1", "0", "Running"],
    ]
    listed = json.loads(cli("status", "-o", "json", "--kubeconfig", kubeconfig).out)
    assert [r["name"] for r in listed["runs"]] == ["mnist", "resnet"]


def test_status_o_name_prints_a_job_batch_line_per_job_as_kubectl_get(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str
) -> None:
    load_run(kubeapi, "mnist", (("ps", 0), ("worker", 0), ("worker", 1), ("worker", 10)))
    load_run(kubeapi, "resnet", (("worker", 0),))
    one = cli("status", "mnist", "-o", "name", "--kubeconfig", kubeconfig)
    assert (one.code, one.err) == (0, "")
    kinds_and_names = [line.split("/", 1) for line in one.out.splitlines()]
    assert all(kind == "job.batch" for kind, _ in kinds_and_names), one.out
    # The table's order: by role, then by index (worker-10 after worker-1).
    assert [name for _, name in kinds_and_names] == [
        "mnist-ps-0",
        "mnist-worker-0",
        "mnist-worker-1",
        "mnist-worker-10",
    ]
    # Each line names a Job that is there, as kubectl would take it back.
    jobs = {o["metadata"]["name"] for o in kubeapi.objects("jobs", NS)}
    assert {name for _, name in kinds_and_names} <= jobs
    every = cli("status", "-o", "name", "--kubeconfig", kubeconfig)
    assert every.code == 0, every.err
    assert every.out.splitlines() == [*one.out.splitlines(), "job.batch/resnet-worker-0"]
    # No run: nothing on stdout, kubectl's line on stderr, exit 0; a missing RUN is exit 1.
    empty = cli("status", "-o", "name", "--kubeconfig", kubeconfig, "-n", "default")
    assert (empty.code, empty.out, empty.err) == (0, "", "No runs found in default namespace.\n")
    missing = cli("status", "x", "-o", "name", "--kubeconfig", kubeconfig)
    assert_one_line_error(missing, 1, r"no run 'x' in namespace 'ml'$")


def test_status_of_a_missing_run_is_one_line_and_exit_1(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str
) -> None:
    load_run(kubeapi)
    result = cli("status", "x", "--kubeconfig", kubeconfig, "-n", "default")
    assert_one_line_error(result, 1, r"no run 'x' in namespace 'default'$")


def test_status_reads_with_the_same_number_of_lists_whatever_the_number_of_tasks(
    cli: Any, kubeapi: KubeAPI, kubeconfig: str
) -> None:
    load_run(kubeapi, "small", (("worker", 0),))
    load_run(kubeapi, "big", tuple(("worker", i) for i in range(300)))
    counts = []
    for run in ("small", "big"):
        before = len(kubeapi.requests)
        result = cli("status", run, "--kubeconfig", kubeconfig)
        assert result.code == 0, result.err
        made = kubeapi.requests[before:]
        counts.append(sorted((r.resource, r.verb) for r in made if r.resource))
    assert counts[0] == counts[1] == [("jobs", "list"), ("pods", "list")]


def test_status_refused_by_rbac_names_the_verb_and_resource(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path
) -> None:
    load_run(kubeapi)
    kubeapi.add_user("ci", "ci-token")
    kubeapi.grant("ci", ["list"], ["jobs"], namespace=NS)
    kubeconfig = write_kubeconfig(tmp_path / "ci", kubeapi.url, token="ci-token", namespace=NS)
    result = cli("status", "mnist", "--kubeconfig", str(kubeconfig))
    assert_one_line_error(result, 1, contains=["cannot list pods in namespace ml"])


def test_status_warns_once_when_tls_is_not_checked(
    cli: Any, kubeapi_tls: KubeAPI, tmp_path: Path
) -> None:
    load_run(kubeapi_tls)
    kubeconfig = write_kubeconfig(tmp_path / "kc", kubeapi_tls.url, insecure=True, namespace=NS)
    result = cli("status", "mnist", "--kubeconfig", str(kubeconfig))
    assert result.code == 0, result.err
    assert result.err.splitlines() == [
        f"simpletfjob: warning: {kubeapi_tls.url} (context 'loopback'): insecure-skip-tls-verify "
        "is set, so the server's certificate is not checked",
        f"ps-0, worker-0 and worker-1 Pending: {UNSCHEDULED}",  # under the table, as always
    ]
