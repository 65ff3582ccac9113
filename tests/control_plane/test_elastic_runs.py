"""Elastic PyTorch runs (--min-workers) on the real control plane, with the kubelet stand-in and
real torchrun agents meeting over c10d and training with gloo.

Three workers on one node (the xdist worker's first node address, --tasks-per-host 3). Once
the training has checkpointed a few steps, one worker's whole pod is killed (its torchrun
agent and its processes, as a lost pod's are: the stand-in kills every process of the
container), and `run` is followed to its end:

- worker-2 lost with --min-workers 2: workers 0 and 1 form a world of 2, load the checkpoint
  and finish; `run` says the loss in one line and spends no restart;
- worker-2 lost with --min-workers 3: fewer than M remain, so the run restarts whole, once,
  and the new world of 3 finishes from the checkpoint;
- worker-0 lost (the rendezvous host, whose agent holds the c10d store) with --min-workers 2:
  no agent survives it (pytorch/pytorch#67742), so the run restarts whole, once, as
  docs/frameworks.md says, and finishes.

A tiny program (one all-reduce a step) and few steps keep each under two minutes on a quiet
machine; the waits are generous for a loaded one.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write
from tests.support.control_plane import ControlPlane
from tests.support.kubelet import Kubelet, Node
from tests.support.parallel import free_ports, node_address
from tests.support.scenes import stand_in_nodes

_names = itertools.count()
STEPS = 40

# Saves its step after each all-reduce (rank 0), loads it when it starts: a restarted world
# goes on from there. Each start says its world; each end says the step it reached.
ELASTIC_SCRIPT = f"""\
import datetime, pathlib, sys, time
import torch
import torch.distributed as dist

checkpoint = pathlib.Path(sys.argv[1])
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
rank, world = dist.get_rank(), dist.get_world_size()
step = int(checkpoint.read_text()) if checkpoint.exists() else 0
print(f"start rank={{rank}} world={{world}} step={{step}}", flush=True)
while step < {STEPS}:
    value = torch.ones(1)
    dist.all_reduce(value)
    step += 1
    if rank == 0:
        checkpoint.write_text(str(step))
    time.sleep(0.25)
print(f"done rank={{rank}} world={{world}} step={{step}}", flush=True)
dist.destroy_process_group()
"""


@pytest.fixture
def kubelet(kube: ControlPlane, tmp_path: Path) -> Iterator[Kubelet]:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (the test extra installs it)")
    with Kubelet(kube, [Node(f"el-{next(_names)}", node_address(0))], tmp_path / "kubelet") as k:
        yield k


@dataclass
class Ended:
    """What `run` printed, its exit code, and the run's status afterwards."""

    code: int
    out: str
    err: str
    status: dict[str, Any]

    @property
    def errs(self) -> list[str]:
        return self.err.splitlines()

    @property
    def said(self) -> set[str]:
        """What the tasks printed (`--logs all`), without the task's prefix."""
        return {line.partition(" | ")[2] for line in self.out.splitlines()}

    def restarts(self, run: str) -> list[str]:
        return [line for line in self.errs if line.startswith(f"restarting run {run} ")]

    def finished(self, world: int) -> bool:
        """Every rank of a world of `world` reached the last step, and some world of that size
        started from a checkpoint (a step past 0) after the loss."""
        done = {f"done rank={r} world={world} step={STEPS}" for r in range(world)}
        resumed = [
            line
            for line in self.said
            if line.startswith("start ") and f"world={world} " in line and "step=0" not in line
        ]
        return done <= self.said and bool(resumed)


def _when_training(checkpoint: Path, then: Callable[[], None]) -> threading.Thread:
    """Once the training is 5 steps in (its checkpoint says so), do `then`, in a thread."""

    def wait_then() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            text = checkpoint.read_text() if checkpoint.exists() else ""
            if text.isdigit() and int(text) >= 5:
                break
            time.sleep(0.2)
        then()

    thread = threading.Thread(target=wait_then, daemon=True)
    thread.start()
    return thread


def _pod_of(kube: ControlPlane, namespace: str, job: str) -> dict[str, Any]:
    pods = kube.admin.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=job-name%3D{job}")
    return dict(pods["items"][0])


def _kill_when_training(
    kube: ControlPlane, kubelet: Kubelet, namespace: str, job: str, checkpoint: Path
) -> threading.Thread:
    """Once the training is 5 steps in, kill the Job's pod (every process in it)."""
    return _when_training(
        checkpoint,
        lambda: kubelet.kill(namespace, _pod_of(kube, namespace, job)["metadata"]["name"]),
    )


def run_losing(
    cli: Any,
    kube: ControlPlane,
    namespace: str,
    kubelet: Kubelet,
    tmp_path: Path,
    run: str,
    victim: str,
    min_workers: int,
) -> Ended:
    """`run` three elastic workers with --min-workers, one restart allowed; `victim`'s pod is
    killed 5 steps in."""
    checkpoint = tmp_path / "checkpoint"
    killer = _kill_when_training(kube, kubelet, namespace, f"{run}-{victim}", checkpoint)
    try:
        return run_elastic(
            cli, kube, namespace, tmp_path, run, "--min-workers", str(min_workers),
            "--tasks-per-host", "3", "--port", str(free_ports(3)),
        )  # fmt: skip
    finally:
        killer.join(timeout=10)


def run_elastic(
    cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path, run: str, *args: str
) -> Ended:
    """`run pytorch-ddp` of ELASTIC_SCRIPT (its checkpoint TMP_PATH/checkpoint) with `args`,
    one restart allowed, and the run's status after."""
    script = write(tmp_path / "elastic.py", ELASTIC_SCRIPT)
    checkpoint = tmp_path / "checkpoint"
    values = write(tmp_path / "values.yaml", f"script_args: [{str(checkpoint)!r}]\n")
    kubeconfig = str(kube.kubeconfig(tmp_path / "kc", namespace=namespace))
    result = cli(
        "run", "pytorch-ddp", "--kubeconfig", kubeconfig, "--name", run, "--max-restarts", "1",
        *args, "--address", "internal-ip",
        "--set", "gpus=0", "--set", "cpu=100m", "--set", "memory=256Mi", "--set", "shm=64Mi",
        "--set", f"script={script}", "-f", str(values),
        "--set", "backoff_limit=0", "--logs", "all", "--timeout", "300s",
    )  # fmt: skip
    status = cli("status", run, "--kubeconfig", kubeconfig, "-o", "json")
    assert status.code in (0, 1), status.err
    return Ended(result.code, result.out, result.err, json.loads(status.out))


@pytest.mark.slow  # tens of seconds: started first (tests/conftest.py)
def test_an_elastic_run_goes_on_without_a_lost_worker_and_spends_no_restart(
    cli: Any, kube: ControlPlane, namespace: str, kubelet: Kubelet, tmp_path: Path
) -> None:
    run = f"el{next(_names)}"
    ended = run_losing(cli, kube, namespace, kubelet, tmp_path, run, "worker-2", 2)
    assert ended.code == 0, ended.err + ended.out
    assert ended.restarts(run) == [], ended.err
    assert "worker-2 lost (exit 137); training goes on with 2 of 3 workers (min 2)" in ended.errs
    assert ended.finished(world=2), ended.out
    assert (ended.status["restarts"], ended.status["minWorkers"]) == (0, 2)
    states = {task["task"]: task["state"] for task in ended.status["tasks"]}
    assert states == {"worker-0": "Succeeded", "worker-1": "Succeeded", "worker-2": "Lost"}


@pytest.mark.slow
def test_fewer_than_min_workers_left_costs_one_whole_run_restart_and_the_run_finishes(
    cli: Any, kube: ControlPlane, namespace: str, kubelet: Kubelet, tmp_path: Path
) -> None:
    run = f"el{next(_names)}"
    ended = run_losing(cli, kube, namespace, kubelet, tmp_path, run, "worker-2", 3)
    assert ended.code == 0, ended.err + ended.out
    [line] = ended.restarts(run)
    # The first failure decides: worker-2's, or a survivor's that the same second saw fail.
    assert re.fullmatch(rf"restarting run {run} \(1/1\) after .*worker-\d Failed: .*", line), line
    assert not [line for line in ended.errs if " lost (" in line], ended.err
    assert ended.finished(world=3), ended.out
    assert ended.status["restarts"] == 1
    assert {task["state"] for task in ended.status["tasks"]} == {"Succeeded"}


@pytest.mark.slow
def test_losing_the_rendezvous_host_costs_one_whole_run_restart_and_the_run_finishes(
    cli: Any, kube: ControlPlane, namespace: str, kubelet: Kubelet, tmp_path: Path
) -> None:
    run = f"el{next(_names)}"
    ended = run_losing(cli, kube, namespace, kubelet, tmp_path, run, "worker-0", 2)
    assert ended.code == 0, ended.err + ended.out
    [line] = ended.restarts(run)
    assert re.fullmatch(rf"restarting run {run} \(1/1\) after .*worker-0 Failed: .*", line), line
    assert not [line for line in ended.errs if " lost (" in line], ended.err
    assert ended.finished(world=3), ended.out
    assert ended.status["restarts"] == 1


@pytest.fixture
def three_nodes(kube: ControlPlane, tmp_path: Path) -> Iterator[tuple[Kubelet, str]]:
    """Three nodes (labelled el=LABEL), one worker on each."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (the test extra installs it)")
    nodes, label = stand_in_nodes("el3", 3, label_key="el", label_prefix="el-")
    with Kubelet(kube, nodes, tmp_path / "kubelet") as kubelet:
        yield kubelet, label


@pytest.mark.slow
def test_a_worker_whose_node_is_lost_is_let_go_and_the_run_trains_on(
    cli: Any, kube: ControlPlane, namespace: str, three_nodes: tuple[Kubelet, str], tmp_path: Path
) -> None:
    """worker-2's node stops answering 5 steps in: past --node-grace, `run` lets the worker go
    (its Job's parallelism 0, annotated lost, its pod deleted at once) instead of restarting the
    run, and workers 0 and 1 finish as a world of 2."""
    kubelet, label = three_nodes
    run = f"el{next(_names)}"
    checkpoint = tmp_path / "checkpoint"

    loser = _when_training(
        checkpoint,
        lambda: kubelet.lose(_pod_of(kube, namespace, f"{run}-worker-2")["spec"]["nodeName"]),
    )
    ended = run_elastic(
        cli, kube, namespace, tmp_path, run, "--min-workers", "2", "-l", f"el={label}",
        "--node-grace", "2s", "--port", str(free_ports(1)),
    )  # fmt: skip
    loser.join(timeout=10)
    assert ended.code == 0, ended.err + ended.out
    assert ended.restarts(run) == [], ended.err
    [lost] = [line for line in ended.errs if line.startswith("worker-2 lost (")]
    assert re.fullmatch(
        r"worker-2 lost \(node el3-\d+-2 \w+ for more than 2s\); "
        r"training goes on with 2 of 3 workers \(min 2\)",
        lost,
    ), lost
    assert ended.finished(world=2), ended.out
    states = {task["task"]: task["state"] for task in ended.status["tasks"]}
    assert states == {"worker-0": "Succeeded", "worker-1": "Succeeded", "worker-2": "Lost"}
    job = kube.admin.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/{run}-worker-2")
    assert job["spec"]["parallelism"] == 0
    assert (
        job["metadata"]["annotations"]["simpletfjob/lost"]
        == lost[len("worker-2 lost (") :].split(")")[0]
    )


@pytest.mark.slow
def test_a_worker_whose_node_refuses_its_pod_is_let_go_and_the_others_train_as_two(
    cli: Any, kube: ControlPlane, namespace: str, three_nodes: tuple[Kubelet, str], tmp_path: Path
) -> None:
    """worker-2's node is full (a pod there takes its 8 CPUs, unseen by the plan: --no-usage),
    so the node refuses worker-2's pod: `run` lets the worker go, and workers 0 and 1 form a
    world of 2 and finish."""
    kubelet, label = three_nodes
    full = sorted(kubelet.nodes)[2]
    hog = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hog"},
        "spec": {"nodeName": full, "restartPolicy": "Never", "containers": [{
            "name": "main", "image": "python", "command": ["python", "-c", "import time; time.sleep(600)"],
            "resources": {"requests": {"cpu": "8"}},
        }]},
    }  # fmt: skip
    kube.create(f"/api/v1/namespaces/{namespace}/pods", hog)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pod = kube.admin.get(f"/api/v1/namespaces/{namespace}/pods/hog")
        if pod.get("status", {}).get("phase") == "Running":
            break
        time.sleep(0.2)
    run = f"el{next(_names)}"
    ended = run_elastic(
        cli, kube, namespace, tmp_path, run, "--min-workers", "2", "-l", f"el={label}",
        "--no-usage", "--port", str(free_ports(1)),
    )  # fmt: skip
    assert ended.code == 0, ended.err + ended.out
    assert ended.restarts(run) == [], ended.err
    assert (
        f"worker-2 lost (refused by node {full}: OutOfcpu); "
        "training goes on with 2 of 3 workers (min 2)"
    ) in ended.errs, ended.err
    done = {f"done rank={r} world=2 step={STEPS}" for r in range(2)}
    assert done <= ended.said, ended.out
    states = {task["task"]: task["state"] for task in ended.status["tasks"]}
    assert states == {"worker-0": "Succeeded", "worker-1": "Succeeded", "worker-2": "Lost"}
