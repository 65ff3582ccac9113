"""Every built-in, as it ships, trains on one CPU node: `simpletfjob run BUILT-IN` with the
arguments a one-node cluster (kind, minikube) needs, on the real control plane, its pods run by
the kubelet stand-in with the real TensorFlow, torch and JAX.

Nothing is set but what the stand-in needs: a port range free on this shared machine
(--port), and the one node chosen by its label (-l), so that a node another test left would
not be taken. The node is named `localhost`, so that TF_CONFIG, torchrun's master and JAX's
coordinator name it as a kind node is named, by a name that resolves. No --set: each task runs
the template's own program, which trains a small model on synthetic data; the task that
decides prints its losses, and the run must end, exit 0, with a small loss.

`pod-network` is left out: its tasks find each other through their Services' DNS names,
which the stand-in, on this machine's network and without cluster DNS, cannot resolve.
`examples/mnist.yaml` runs the same program as tf1-ps-hostnetwork (test_templates.py checks).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.control_plane import ControlPlane
from tests.support.kubelet import Kubelet, Node
from tests.support.parallel import free_ports

# (built-in, its framework's module, tasks on the one node, the other arguments it needs)
RUNS = [
    ("tf2-multiworker", "tensorflow", 2, ("-N", "1")),
    ("pytorch-ddp", "torch", 2, ("-N", "1")),
    ("jax-multiprocess", "jax", 2, ("-N", "1")),
    ("tf1-ps-hostnetwork", "tensorflow", 2, ()),  # 1 ps, 1 worker (-N -1: every host)
    ("tf1-flags", "tensorflow", 2, ()),
]
# A line of the deciding task's log, as `run` streams it: 'worker-0 | worker 0: epoch 3 loss 0.01'.
LOSS = re.compile(r"^(\S+) \| .*: (?:epoch|step) \d+ loss (\S+)$")
TRAINED = re.compile(r"^(\S+) \| .*: trained, loss (\S+)$")


@pytest.fixture
def one_node(kube: ControlPlane, tmp_path: Path) -> Iterator[str]:
    """One CPU node, as kind's: 'localhost' at 127.0.0.1, with the room of a laptop."""
    node = Node("localhost", "127.0.0.1", cpu="4", memory="8Gi", labels={"first-hour": "yes"})
    with Kubelet(kube, [node], tmp_path / "kubelet"):
        yield node.name


@pytest.mark.slow  # real frameworks, tens of seconds each: started first (tests/conftest.py)
@pytest.mark.parametrize(("builtin", "module", "tasks", "args"), RUNS, ids=[r[0] for r in RUNS])
def test_a_built_in_trains_on_one_cpu_node_as_it_ships(
    cli: Any,
    kube: ControlPlane,
    namespace: str,
    one_node: str,
    tmp_path: Path,
    builtin: str,
    module: str,
    tasks: int,
    args: tuple[str, ...],
) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (the test extra installs it)")
    kubeconfig = str(kube.kubeconfig(tmp_path / "kc", namespace=namespace))
    result = cli(
        "run", builtin, *args, "--tasks-per-host", str(tasks),
        "-l", "first-hour=yes", "--port", str(free_ports(tasks)),
        "--timeout", "8m", "--kubeconfig", kubeconfig,
    )  # fmt: skip
    assert result.code == 0, result.err + result.out
    assert result.err.splitlines()[-1].startswith(f"run {builtin} succeeded"), result.err
    losses = [float(m[2]) for line in result.out.splitlines() if (m := LOSS.match(line))]
    trained = [m for line in result.out.splitlines() if (m := TRAINED.match(line))]
    assert len(losses) >= 3 and trained, result.out
    assert losses[0] > losses[-1], result.out  # it learned
    assert float(trained[-1][2]) < 0.01, result.out  # y = 2a - b + c/2 + 3d + 1, nearly
