"""--cleanup-after against what the cluster really does with `ttlSecondsAfterFinished`.

- With the TTL-after-finished controller on (the session's control plane), a TTL of 0
  deletes a failed deciding Job, and with it the rest of the run, the moment it fails:
  `run` has seen the failure, and restarts on it as on any other.
- Without the TTLAfterFinished feature gate (v1.20's default; a control plane of this
  module's own), the API server drops the field silently: `apply` and `run` refuse before
  anything is created, rather than apply a cleanup that will never happen. The loopback
  server models such a server (tests/loopback/test_permissions.py); the same request is
  checked against both here.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_one_line_error, write
from tests.support.cluster import Cluster, loopback_cluster
from tests.support.control_plane import ControlPlane, find_assets, start
from tests.support.kubelet import Kubelet
from tests.support.scenes import Runs, stand_in_nodes
from tests.support.templates import MNIST
from tests.support.templates import RUN_SCRIPT as SCRIPT

# worker-0, the task that decides the run, fails its first attempt.
DECIDER_FAILS_ONCE = SCRIPT.replace('name == "worker-1"', 'name == "worker-0"')


@pytest.fixture
def runs(cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[Runs]:
    nodes, label = stand_in_nodes("ca", 3, label_key="rt", label_prefix="ca-")
    with Kubelet(kube, nodes, tmp_path / "kubelet") as kubelet:
        found = Runs(cli, kube, kubelet, namespace, tmp_path, label)
        found.script = write(tmp_path / "decider.py", DECIDER_FAILS_ONCE)
        yield found


def test_a_deciding_task_whose_job_the_ttl_deletes_as_it_fails_is_restarted(runs: Runs) -> None:
    result = runs.run(
        "-N", "2", "--psn", "0", "--cleanup-after", "0s", "--max-restarts", "1",
        "--logs", "none", "--timeout", "3m", mode="fail-once", seconds=1,
    )  # fmt: skip
    assert result.code == 0, result.err
    restarts = [line for line in result.err.splitlines() if line.startswith("restarting")]
    assert len(restarts) == 1, result.err
    assert restarts[0].startswith(
        "restarting run rt (1/1) after a program error: worker-0 Failed: Error (exit 1); hosts now: "
    ), restarts[0]
    assert result.err.splitlines()[-1] == "run rt succeeded: worker-0 Succeeded"


# -- a control plane without the TTLAfterFinished gate ----------------------------------------


@pytest.fixture(scope="module")
def gateless() -> Iterator[ControlPlane]:
    """etcd, kube-apiserver and the controllers with v1.20's default feature gates, for this
    module only (started in the main thread, which outlives every process it starts)."""
    assets, reason = find_assets()
    if assets is None:
        pytest.skip(reason)
    directory = Path(tempfile.mkdtemp(prefix="simpletfjob-gateless-"))
    plane = start(assets, directory, feature_gates="")
    try:
        yield plane
    finally:
        plane.stop()
        shutil.rmtree(directory, ignore_errors=True)


def a_job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "ttlSecondsAfterFinished": 60,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}],
                }
            },
        },
    }


@pytest.mark.parametrize("where", ["loopback", "real"])
def test_a_server_without_the_gate_drops_the_ttl_and_the_loopback_server_models_it(
    gateless: ControlPlane, where: str
) -> None:
    def created(cluster: Cluster) -> dict[str, Any]:
        ns = cluster.create_namespace()
        return cluster.create(f"/apis/batch/v1/namespaces/{ns}/jobs", a_job("ttl"))

    if where == "real":
        job = created(gateless)
    else:
        with loopback_cluster() as loopback:
            assert loopback.api is not None
            loopback.api.store.gates["TTLAfterFinished"] = False
            job = created(loopback)
    assert "ttlSecondsAfterFinished" not in job["spec"]
    assert job["spec"]["backoffLimit"] == 6  # the rest of the spec, defaulted as ever


@pytest.mark.parametrize("command", ["apply", "run"])
def test_cleanup_after_on_a_server_without_the_gate_is_refused_and_nothing_is_created(
    gateless: ControlPlane, cli: Any, tmp_path: Path, command: str
) -> None:
    ns = gateless.create_namespace()
    kubeconfig = gateless.kubeconfig(tmp_path / "kc", namespace=ns)
    template = write(tmp_path / "mnist.yaml", MNIST)
    result = cli(
        command, str(template), "--nodes", "h1,h2,h3", "--set", "image=busybox",
        "--kubeconfig", str(kubeconfig), "--cleanup-after", "10m",
    )  # fmt: skip
    assert_one_line_error(
        result,
        1,
        contains=[
            "the API server drops ttlSecondsAfterFinished from job.batch/mnist-worker-0",
            "TTLAfterFinished feature gate is off",
            "nothing was applied",
        ],
    )
    jobs = gateless.admin.get(f"/apis/batch/v1/namespaces/{ns}/jobs")["items"]
    assert jobs == []
    # Without --cleanup-after the same run is applied as ever.
    applied = cli(
        "apply", str(template), "--nodes", "h1,h2,h3", "--set", "image=busybox",
        "--kubeconfig", str(kubeconfig),
    )  # fmt: skip
    assert applied.code == 0, applied.err
