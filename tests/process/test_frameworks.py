"""Truth: real PyTorch and JAX processes read what a render gives them, and meet.

Each test renders a built-in template for three tasks on one host (127.0.0.1,
--tasks-per-host 3), takes each task's container command, args and env entries from
the YAML, and starts the three as processes with only those variables set. They must
form one group and agree on a sum that crosses processes. A framework that is not
installed skips its test, saying so.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write
from tests.support.parallel import free_port
from tests.support.templates import TORCH_SCRIPT

pytestmark = pytest.mark.slow  # tens of seconds each: started first (tests/conftest.py)

TIMEOUT = 180  # seconds for the three processes; the frameworks take a while to import


def needs(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (the test extra installs it)")


def tasks_of(cli: Any, tmp_path: Path, template: str, script: Path) -> list[dict[str, Any]]:
    """The containers of the three tasks, rendered from the built-in onto 127.0.0.1."""
    result = cli(
        template, "--nodes", "127.0.0.1", "--tasks-per-host", "3", "--port", str(free_port()),
        "--set", "gpus=0", "--set", f"script={script}", "-o", "-", "--validate", cwd=tmp_path,
    )  # fmt: skip
    assert result.code == 0, result.err
    containers = [d["spec"]["template"]["spec"]["containers"][0] for d in result.docs]
    assert len(containers) == 3
    return containers  # type: ignore[no-any-return]


def run_all(containers: list[dict[str, Any]], tmp_path: Path, **extra: str) -> list[str]:
    """Each container's command as a process with only its env entries (and PATH) set; their output."""
    processes = []
    for i, container in enumerate(containers):
        command = [*container["command"], *container.get("args", [])]
        assert command[0] == "python"
        env = {e["name"]: e["value"] for e in container["env"]}
        env = {**env, "PATH": os.environ["PATH"], **extra}
        out = (tmp_path / f"task-{i}.log").open("w")
        processes.append(
            (
                subprocess.Popen(
                    [sys.executable, *command[1:]],
                    env=env,
                    cwd=tmp_path,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                ),
                out,
            )
        )
    outputs = []
    try:
        for i, (process, out) in enumerate(processes):
            code = process.wait(timeout=TIMEOUT)
            out.close()
            text = (tmp_path / f"task-{i}.log").read_text()
            assert code == 0, text
            outputs.append(text)
    finally:
        for process, out in processes:
            if process.poll() is None:
                os.killpg(process.pid, 9)
                process.wait()
            out.close()
    return outputs


def test_torchrun_reads_the_rendered_variables_and_three_nodes_all_reduce(
    cli: Any, tmp_path: Path
) -> None:
    needs("torch")
    script = write(tmp_path / "ddp.py", TORCH_SCRIPT)
    containers = tasks_of(cli, tmp_path, "pytorch-ddp", script)
    assert [c["command"] for c in containers] == [["python", "-m", "torch.distributed.run"]] * 3
    outputs = run_all(containers, tmp_path)
    lines = sorted(line for out in outputs for line in out.splitlines() if line.startswith("rank="))
    assert lines == [f"rank={r} world=3 node={r} sum=6" for r in range(3)]


JAX_SCRIPT = """\
import os
import jax

# As the docs say: the coordinator address comes from the environment, the rest is passed.
jax.distributed.initialize(
    num_processes=int(os.environ["JAX_NUM_PROCESSES"]),
    process_id=int(os.environ["JAX_PROCESS_ID"]),
)
import jax.numpy as jnp
from jax.experimental import multihost_utils

me = jax.process_index()
every = multihost_utils.process_allgather(jnp.array([me + 1.0]))
print(f"process={me} of={jax.process_count()} devices={jax.device_count()} "
      f"sum={float(every.sum()):g}", flush=True)
jax.distributed.shutdown()
"""


def test_jax_processes_read_the_rendered_variables_and_agree_on_a_global_sum(
    cli: Any, tmp_path: Path
) -> None:
    needs("jax")
    script = write(tmp_path / "sum.py", JAX_SCRIPT)
    containers = tasks_of(cli, tmp_path, "jax-multiprocess", script)
    outputs = run_all(containers, tmp_path, JAX_PLATFORMS="cpu")
    lines = [line for out in outputs for line in out.splitlines() if line.startswith("process=")]
    assert sorted(lines) == [f"process={p} of=3 devices=3 sum=6" for p in range(3)]
