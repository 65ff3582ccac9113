"""PyTorch and JAX runs on the real control plane: the built-ins pass a server dry run, and
with the kubelet stand-in one run of each goes from its built-in through `apply` and `wait`
to success, its processes really meeting (torchrun's static rendezvous, JAX's coordinator).

The stand-in runs every pod on this machine's network, so the run's three tasks share one
node, at the xdist worker's first node address (--tasks-per-host 3, --address internal-ip):
each gets its own port, from the worker's own (tests/support/parallel.py), and all meet at
worker 0's.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write
from tests.support.control_plane import ControlPlane
from tests.support.kubelet import Kubelet, Node
from tests.support.parallel import free_port, node_address
from tests.support.templates import TORCH_SCRIPT

_names = itertools.count()
BUILTINS = {"pytorch-ddp": "torch", "jax-multiprocess": "jax"}


@pytest.mark.parametrize("builtin", sorted(BUILTINS))
def test_a_built_in_passes_validation_and_a_server_dry_run(
    cli: Any, kube: ControlPlane, namespace: str, tmp_path: Path, builtin: str
) -> None:
    kubeconfig = str(kube.kubeconfig(tmp_path / "kc", namespace=namespace))
    result = cli(
        "apply", builtin, "--nodes", "a,b,c", "--kubeconfig", kubeconfig,
        "--dry-run", "server", "--validate",
    )  # fmt: skip
    assert result.code == 0, result.err
    assert "3 created; server dry run, nothing changed" in result.err
    jobs = kube.admin.get(f"/apis/batch/v1/namespaces/{namespace}/jobs")["items"]
    assert jobs == []


@pytest.fixture
def node(kube: ControlPlane, tmp_path: Path) -> Iterator[str]:
    """One node on this worker's first node address, run by the kubelet stand-in; its name."""
    name = f"fw-{next(_names)}"
    with Kubelet(kube, [Node(name, node_address(0))], tmp_path / "kubelet"):
        yield name


@pytest.mark.slow  # tens of seconds: started first (tests/conftest.py)
@pytest.mark.parametrize(
    ("builtin", "printed"),
    [
        ("pytorch-ddp", [f"rank {r}: trained, loss" for r in range(3)]),
        ("jax-multiprocess", [f"process {p}: trained, loss" for p in range(3)]),
    ],
)
def test_a_run_of_each_framework_applies_and_waits_to_success(
    cli: Any,
    kube: ControlPlane,
    namespace: str,
    node: str,
    tmp_path: Path,
    builtin: str,
    printed: list[str],
) -> None:
    """The built-in's own program: a small model trained data-parallel across the 3 tasks."""
    module = BUILTINS[builtin]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (the test extra installs it)")
    kubeconfig = str(kube.kubeconfig(tmp_path / "kc", namespace=namespace))
    run = f"fw{next(_names)}"
    shm = ("--set", "shm=64Mi") if builtin == "pytorch-ddp" else ()  # only torchrun's reads it
    result = cli(
        "apply", builtin, "--kubeconfig", kubeconfig, "--name", run,
        "--tasks-per-host", "3", "--address", "internal-ip", "--port", str(free_port()),
        "--set", "cpu=100m", "--set", "memory=1Gi", *shm, "--set", "backoff_limit=0",
    )  # fmt: skip
    assert result.code == 0, result.err
    assert f"3 worker ({node_address(0)}:" in result.err

    status = cli("status", run, "--kubeconfig", kubeconfig, "-o", "json")
    assert status.code == 0, status.err
    tasks = json.loads(status.out)
    assert tasks["successPolicy"] == "all-workers"
    assert sorted(t["task"] for t in tasks["tasks"]) == ["worker-0", "worker-1", "worker-2"]

    waited = cli("wait", run, "--kubeconfig", kubeconfig, "--timeout", "5m")
    assert waited.code == 0, waited.err
    assert waited.err.splitlines()[-1].startswith(f"run {run} succeeded")
    for i in range(3):  # all-workers: every rank ran to its end
        assert f"worker-{i} Succeeded" in waited.err

    # Every line (the frameworks' own warnings may follow the program's), from the container
    # that carries the framework's variables.
    logs = cli("logs", run, "--kubeconfig", kubeconfig, "--tail", "-1")
    assert logs.code == 0, logs.err
    lines = [line.partition(" | ")[2] for line in logs.out.splitlines()]
    for start in printed:  # every rank ends with the loss of the whole run's last batch
        (trained,) = [line for line in lines if line.startswith(start)]
        assert float(trained.rpartition(" ")[2]) < 0.01, logs.out


FLAKY_TORCH_SCRIPT = """\
import os, pathlib, sys

marker = pathlib.Path(sys.argv[1])
if os.environ["PET_NODE_RANK"] == "1" and not marker.exists():
    marker.write_text("failed once")
    print("node 1 fails on its first attempt", flush=True)
    sys.exit(3)
""" + TORCH_SCRIPT.replace("import os\n", "")


@pytest.mark.slow
def test_run_restarts_a_pytorch_run_whole_and_it_then_succeeds(
    cli: Any,
    kube: ControlPlane,
    namespace: str,
    node: str,
    tmp_path: Path,
) -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (the test extra installs it)")
    path = write(tmp_path / "flaky.py", FLAKY_TORCH_SCRIPT)
    values = write(tmp_path / "values.yaml", f"script_args: [{str(tmp_path / 'marker')!r}]\n")
    kubeconfig = str(kube.kubeconfig(tmp_path / "kc", namespace=namespace))
    run = f"fw{next(_names)}"
    result = cli(
        "run", "pytorch-ddp", "--kubeconfig", kubeconfig, "--name", run, "--max-restarts", "1",
        "--tasks-per-host", "3", "--address", "internal-ip", "--port", str(free_port()),
        "--set", "gpus=0", "--set", "cpu=100m", "--set", "memory=256Mi", "--set", "shm=64Mi",
        "--set", f"script={path}", "-f", str(values),
        "--set", "backoff_limit=0", "--logs", "all", "--timeout", "5m",
    )  # fmt: skip
    assert result.code == 0, result.err
    restarts = [
        line for line in result.err.splitlines() if line.startswith(f"restarting run {run}")
    ]
    assert len(restarts) == 1 and " (1/1) after a program error: worker-1 Failed" in restarts[0], (
        result.err
    )
    lines = {line.partition(" | ")[2] for line in result.out.splitlines()}
    assert {f"rank={r} world=3 node={r} sum=6" for r in range(3)} <= lines, result.out
