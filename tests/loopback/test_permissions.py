"""What the loopback server lets the tests make that a real cluster rarely is: a server that
serves no SelfSubjectAccessReview, a user refused the nodes' reads half-way, and an API
server without the TTLAfterFinished feature gate, which drops `ttlSecondsAfterFinished`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simpletfjob.kube.access import allowed
from simpletfjob.kube.connection import Connection, Settings, connect
from simpletfjob.kube.resources import JOBS, NODES, Action
from simpletfjob.runs.failure import NodeWatch
from simpletfjob.runs.watch import read_run
from tests.conftest import assert_one_line_error, write
from tests.support.kubeapi import KubeAPI, write_kubeconfig
from tests.support.scenes import NS, load_run, run_pod
from tests.support.templates import MNIST as TEMPLATE


@pytest.fixture
def ci(kubeapi: KubeAPI, tmp_path: Path) -> Iterator[Connection]:
    """A connection as user 'ci', who may read the run but not the nodes."""
    kubeapi.add_user("ci", "ci-token")
    kubeapi.grant("ci", ["list", "watch"], ["jobs", "pods"], namespace=NS)
    kubeconfig = write_kubeconfig(tmp_path / "ci", kubeapi.url, token="ci-token", namespace=NS)
    conn = connect(Settings(kubeconfig=str(kubeconfig)))
    try:
        yield conn
    finally:
        conn.close()


def test_a_server_without_the_review_api_answers_nothing_and_nothing_fails(
    ci: Connection,
) -> None:
    """The loopback server serves no authorization.k8s.io: the checks give way to the requests."""
    assert allowed(ci, [Action("list", JOBS, NS), Action("get", NODES)]) is None


def test_a_node_refused_to_run_is_said_once_and_not_asked_for_again(
    kubeapi: KubeAPI, ci: Connection
) -> None:
    load_run(kubeapi)
    run_pod(kubeapi, "mnist-worker-1", "h3")
    run = read_run(ci, "mnist")
    said: list[str] = []
    nodes = NodeWatch(ci, grace=0.0, say=said.append)
    assert nodes.check(run) is None
    assert nodes.check(run) is None
    (line,) = said
    assert line.startswith("simpletfjob: warning: node loss not watched: ")
    assert line.endswith(
        "user 'ci' cannot get nodes (403 Forbidden, to get node 'h3'); it needs a ClusterRole "
        "with verb 'get' on 'nodes'"
    ), line
    assert len(kubeapi.requests_for("nodes", "get")) == 1


def test_a_node_that_cannot_be_read_says_why_in_the_tasks_reason(
    cli: Any, kubeapi: KubeAPI, ci: Connection, tmp_path: Path
) -> None:
    load_run(kubeapi)
    run_pod(kubeapi, "mnist-worker-1", "h3", "Unknown")
    run_pod(kubeapi, "mnist-worker-0", "h4", "Unknown")
    run = read_run(ci, "mnist")
    reasons = {t.task: t.reason for t in run.tasks if t.state == "Unknown"}
    assert reasons == {
        "worker-0": "node h4 unreachable (cannot get nodes: 403 Forbidden)",
        "worker-1": "node h3 unreachable (cannot get nodes: 403 Forbidden)",
    }
    assert len(kubeapi.requests_for("nodes", "get")) == 1  # refused once: not asked again


# -- --cleanup-after on a server without the TTLAfterFinished gate --------------------------------


def cleanup_after(cli: Any, kubeapi: KubeAPI, tmp_path: Path, command: str) -> Any:
    kubeapi.create(
        "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    )
    template = write(tmp_path / "mnist.yaml", TEMPLATE)
    kubeconfig = write_kubeconfig(tmp_path / "kc", kubeapi.url, namespace=NS)
    return cli(
        command, str(template), "--nodes", "h1,h2", "--set", "image=busybox",
        "--kubeconfig", str(kubeconfig), "--cleanup-after", "1h", "--timeout", "1s",
    )  # fmt: skip


@pytest.mark.parametrize("command", ["apply", "run"])
def test_cleanup_after_on_a_server_that_drops_the_ttl_is_refused_before_anything_is_applied(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path, command: str
) -> None:
    kubeapi.store.gates["TTLAfterFinished"] = False
    result = cleanup_after(cli, kubeapi, tmp_path, command)
    assert_one_line_error(
        result,
        1,
        contains=[
            "the API server drops ttlSecondsAfterFinished from job.batch/mnist-worker-0",
            "--cleanup-after would never be carried out",
            "TTLAfterFinished feature gate is off",
            "nothing was applied",
        ],
    )
    assert kubeapi.objects("jobs", NS) == [] and kubeapi.objects("services", NS) == []
    assert kubeapi.requests_for("jobs", "patch")  # the server's dry run said it


@pytest.mark.parametrize("command", ["apply", "run"])
def test_cleanup_after_on_a_server_that_keeps_the_ttl_is_applied(
    cli: Any, kubeapi: KubeAPI, tmp_path: Path, command: str
) -> None:
    result = cleanup_after(cli, kubeapi, tmp_path, command)
    # apply is done; run follows until its --timeout (no Job controller here): exit 3
    assert result.code == (0 if command == "apply" else 3), result.err
    owner = kubeapi.get("jobs", "mnist-worker-0", NS)
    assert owner["spec"]["ttlSecondsAfterFinished"] == 3600
