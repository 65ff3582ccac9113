"""An elastic PyTorch run (--min-workers) on the real control plane, with the kubelet stand-in and
real torchrun agents meeting over c10d and training with gloo.

Three workers on one node (the xdist worker's first node address, --tasks-per-host 3). Once
the training has checkpointed a few steps, worker-2's whole pod is killed (its torchrun agent
and its process, as a lost pod's are: the stand-in kills every process of the container). With --min-workers 2, workers 0 and 1 form a world of 2,
load the checkpoint and finish; `run` says the loss in one line and spends no restart.
"""

from __future__ import annotations

import importlib.util
import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write
from tests.support.control_plane import ControlPlane
from tests.support.kubelet import Kubelet, Node
from tests.support.parallel import free_ports, node_address

_names = itertools.count()

# Saves its step after each all-reduce (rank 0), loads it when it starts: a restarted world
# goes on from there. Each start says its world; each end says the step it reached.
ELASTIC_SCRIPT = """\
import datetime, pathlib, sys, time
import torch
import torch.distributed as dist

checkpoint = pathlib.Path(sys.argv[1])
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
rank, world = dist.get_rank(), dist.get_world_size()
step = int(checkpoint.read_text()) if checkpoint.exists() else 0
print(f"start rank={rank} world={world} step={step}", flush=True)
while step < 120:
    value = torch.ones(1)
    dist.all_reduce(value)
    step += 1
    if rank == 0:
        checkpoint.write_text(str(step))
    time.sleep(0.25)
print(f"done rank={rank} world={world} step={step}", flush=True)
dist.destroy_process_group()
"""


@pytest.fixture
def kubelet(kube: ControlPlane, tmp_path: Path) -> Iterator[Kubelet]:
    with Kubelet(kube, [Node(f"el-{next(_names)}", node_address(0))], tmp_path / "kubelet") as k:
        yield k


def _kill_worker_2(
    kube: ControlPlane, kubelet: Kubelet, namespace: str, run: str, checkpoint: Path
) -> threading.Thread:
    """Once the training is 5 steps in, kill worker-2's pod (every process in it)."""

    def kill() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            text = checkpoint.read_text() if checkpoint.exists() else ""
            if text.isdigit() and int(text) >= 5:
                break
            time.sleep(0.2)
        pods = kube.admin.get(
            f"/api/v1/namespaces/{namespace}/pods?labelSelector=job-name%3D{run}-worker-2"
        )["items"]
        pod = pods[0]["metadata"]["name"]
        kubelet.kill(namespace, pod)  # every process in it: the agent and its workers

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow  # tens of seconds: started first (tests/conftest.py)
def test_an_elastic_run_goes_on_without_a_lost_worker_and_spends_no_restart(
    cli: Any, kube: ControlPlane, namespace: str, kubelet: Kubelet, tmp_path: Path
) -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (the test extra installs it)")
    script = write(tmp_path / "elastic.py", ELASTIC_SCRIPT)
    checkpoint = tmp_path / "checkpoint"
    values = write(tmp_path / "values.yaml", f"script_args: [{str(checkpoint)!r}]\n")
    kubeconfig = str(kube.kubeconfig(tmp_path / "kc", namespace=namespace))
    run = f"el{next(_names)}"
    killer = _kill_worker_2(kube, kubelet, namespace, run, checkpoint)
    result = cli(
        "run", "pytorch-ddp", "--kubeconfig", kubeconfig, "--name", run, "--max-restarts", "1",
        "--min-workers", "2",
        "--tasks-per-host", "3", "--address", "internal-ip", "--port", str(free_ports(3)),
        "--set", "gpus=0", "--set", "cpu=100m", "--set", "memory=256Mi", "--set", "shm=64Mi",
        "--set", f"script={script}", "-f", str(values),
        "--set", "backoff_limit=0", "--logs", "all", "--timeout", "200s",
    )  # fmt: skip
    killer.join(timeout=10)
    assert result.code == 0, result.err + result.out
    errs = result.err.splitlines()
    assert not [line for line in errs if line.startswith("restarting")], result.err
    assert "worker-2 lost (exit 137); training goes on with 2 of 3 workers (min 2)" in errs, (
        result.err
    )
    lines = {line.partition(" | ")[2] for line in result.out.splitlines()}
    assert {"done rank=0 world=2 step=120", "done rank=1 world=2 step=120"} <= lines, result.out
    resumed = [line for line in lines if line.startswith("start ") and "world=2" in line]
    assert resumed and all(int(line.rpartition("=")[2]) >= 5 for line in resumed), result.out
