"""Every built-in, as it ships, trains on one CPU node: `simpletfjob run BUILT-IN` with the
arguments a one-node cluster (kind, minikube) needs, on the real control plane, its pods run by
the kubelet stand-in with the real TensorFlow, torch and JAX.

Nothing is set but what the stand-in needs: a port range free on this shared machine
(--port), and the one node chosen by its label (-l), so that a node another test left would
not be taken. The node is named `localhost`, so that TF_CONFIG, torchrun's master and JAX's
coordinator name it as a kind node is named, by a name that resolves. No --set: each task runs
the template's own program, which trains a small model on synthetic data; the task that
decides prints its progress as JSON lines, which runs/progresslog.py must read as progress
up to the last step, with a falling loss, and the run must end, exit 0, with a small loss.

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

from simpletfjob.runs.progresslog import LogReader
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
    # Rank 0's lines, as `run` streams them: 'worker-0 | {"step": 30, "total": 150, ...}' (no
    # run here has a chief: worker 0 is rank 0).
    rank0 = "worker-0 | "
    ours = [line[len(rank0) :] for line in result.out.splitlines() if line.startswith(rank0)]
    reports = LogReader().feed("\n".join(ours) + "\n")
    assert [(r.step, r.total) for r in reports][-1] == (150, 150), result.out
    assert [r.step for r in reports] == sorted(r.step for r in reports) and len(reports) >= 3
    losses = [dict(r.metrics)["loss"] for r in reports]
    trained = [m for line in result.out.splitlines() if (m := TRAINED.match(line))]
    assert trained, result.out
    assert losses[0] > losses[-1], result.out  # it learned
    assert float(trained[-1][2]) < 0.01, result.out  # y = 2a - b + c/2 + 3d + 1, nearly
