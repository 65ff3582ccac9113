"""Real TensorFlow reads what simpletfjob renders: a distributed run from a built-in template,
through `apply` and `wait` on the real control plane, its pods run by the kubelet stand-in.

The first run is `tf2-parameter-server` with a chief, a ps and two workers, all on one node
(the xdist worker's first node address, on ports of its own: tests/support/parallel.py) with
`--tasks-per-host 4`: every task of the stand-in runs on this machine's network, so tasks on
different nodes could not share a port. The built-in's own program
has the chief train a small linear model through a ClusterCoordinator; the ps and workers
serve until `wait`'s cleanup deletes them. Skipped, saying why, when TensorFlow is not installed (the `test` extra
installs tensorflow-cpu).
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write
from tests.support.control_plane import ControlPlane
from tests.support.kubelet import Kubelet, Node
from tests.support.parallel import free_ports, node_address
from tests.support.runs import jobs

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("tensorflow") is None,
        reason="TensorFlow is not installed (pip install '.[test]' brings tensorflow-cpu)",
    ),
    pytest.mark.slow,  # tens of seconds each: started first (tests/conftest.py)
]


def test_a_parameter_server_run_trains_through_apply_and_wait(
    cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """The built-in's own program: the chief coordinates, the ps and the two workers serve."""
    kubeconfig = str(kube.kubeconfig(tmp_path / "kc", namespace=namespace))
    node = Node("tf-node", node_address(0), cpu="8", memory="32Gi")
    with Kubelet(kube, [node], tmp_path / "kubelet"):
        applied = cli(
            "apply", "tf2-parameter-server", "-N", "1", "--tasks-per-host", "4",
            "--address", "internal-ip", "--port", str(free_ports(4)), "--name", "tfps",
            "--set", "cpu=100m", "--set", "memory=1Gi", "--kubeconfig", kubeconfig,
        )  # fmt: skip
        assert applied.code == 0, applied.err
        waited = cli("wait", "tfps", "--timeout", "4m", "--kubeconfig", kubeconfig)
        logs = cli("logs", "tfps", "chief-0", "--kubeconfig", kubeconfig)
        assert waited.code == 0, waited.err + logs.out
        assert "run tfps succeeded: chief-0 Succeeded" in waited.err
        # wait's cleanup removed the tasks that never end on their own, and kept the chief
        left = jobs(kube, namespace, "simpletfjob/job=tfps")
        assert set(left) == {"tfps-chief-0"}, waited.err
    reports = [json.loads(line) for line in logs.out.splitlines() if line.startswith('{"step"')]
    assert [r["step"] for r in reports] == [30, 60, 90, 120, 150], logs.out
    assert {r["total"] for r in reports} == {150}, logs.out
    assert reports[0]["loss"] > reports[-1]["loss"], logs.out
    trained = [line.split() for line in logs.out.splitlines() if ": trained, loss " in line]
    assert trained and float(trained[-1][-1]) < 0.01, logs.out


MULTIWORKER = """\
import json, os, pathlib, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf

task = json.loads(os.environ["TF_CONFIG"])["task"]
marker = pathlib.Path(sys.argv[1])
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    # MEAN: each replica's update is all-reduced across the three workers.
    w = tf.Variable(0.0, aggregation=tf.VariableAggregation.MEAN)
    b = tf.Variable(0.0, aggregation=tf.VariableAggregation.MEAN)


@tf.function
def step():
    def replica():
        x = tf.random.uniform([32])
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((w * x + b - (3.0 * x + 1.0)) ** 2)
        gw, gb = tape.gradient(loss, [w, b])
        w.assign_sub(0.3 * gw)
        b.assign_sub(0.3 * gb)
        return loss

    return strategy.reduce("MEAN", strategy.run(replica), axis=None)


for epoch in range(4):
    for _ in range(50):
        loss = step()
    print("epoch", epoch, "loss", round(float(loss), 4), flush=True)
    if task["index"] == 1 and epoch == 1 and not marker.exists():
        marker.write_text("killed")  # the next attempt trains to its end
        print("killed mid-training", flush=True)
        os.kill(os.getpid(), 9)
print("trained w", round(float(w.numpy()), 2), "b", round(float(b.numpy()), 2), flush=True)
"""


def test_a_multiworker_run_whose_worker_is_killed_completes_after_one_whole_run_restart(
    cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    script = write(tmp_path / "train.py", MULTIWORKER)
    marker = tmp_path / "killed"
    values = write(
        tmp_path / "values.yaml",
        f"command: [python, {script}, {marker}]\ncpu: '100m'\nmemory: 1Gi\ngpus: 0\n"
        "backoff_limit: 0\n",
    )
    kubeconfig = str(kube.kubeconfig(tmp_path / "kc", namespace=namespace))
    node = Node("tfmw-node", node_address(0), cpu="8", memory="32Gi", labels={"tfmw": "yes"})
    with Kubelet(kube, [node], tmp_path / "kubelet"):
        result = cli(
            "run", "tf2-multiworker", "-l", "tfmw=yes", "-N", "1", "--tasks-per-host", "3",
            "--address", "internal-ip", "--port", str(free_ports(3)), "-f", str(values),
            "--name", "tfmw", "--max-restarts", "1", "--logs", "all", "--timeout", "8m",
            "--kubeconfig", kubeconfig,
        )  # fmt: skip
    assert result.code == 0, result.err + result.out
    restarts = [line for line in result.err.splitlines() if line.startswith("restarting")]
    assert len(restarts) == 1, result.err
    assert re.match(
        r"restarting run tfmw \(1/1\) after (a program error|a disruption): worker-1 Failed",
        restarts[0],
    ), restarts[0]
    assert result.err.splitlines()[-1] == "run tfmw succeeded: worker-0 Succeeded"
    lines = result.out.splitlines()
    assert lines.count("worker-1 | killed mid-training") == 1, result.out
    trained = [line.split() for line in lines if line.startswith("worker-0 | trained")]
    assert len(trained) == 1, result.out
    *_, w, _, b = trained[0]
    assert abs(float(w) - 3.0) < 0.5 and abs(float(b) - 1.0) < 0.5, result.out
