"""The seating of a run's tasks on its nodes when the roles ask unlike things of them: every
walk ends, a run is refused only when no seating exists (plan/fit.py, tasks.py,
simpletfjob/packing.py), and the refusal says what is short and where."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from tests.conftest import write
from tests.support.scenes import node_object
from tests.support.templates import FIT_PER_ROLE as TEMPLATE

GPU = "nvidia.com/gpu"


class TookTooLong(Exception):
    pass


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """Fail the test, rather than hang it, when the block takes longer than `seconds`."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise TookTooLong(f"still seating after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def nodes_file(tmp_path: Path, *nodes: tuple[str, int, str]) -> Path:
    """A saved NodeList of (name, GPUs, cpu) nodes, and the template beside it."""
    items = [node_object(name, gpus, cpu=cpu) for name, gpus, cpu in nodes]
    write(tmp_path / "nodes.json", json.dumps({"kind": "List", "items": items}))
    write(tmp_path / "t.yaml", TEMPLATE)
    return tmp_path


def seated(result: Any) -> list[tuple[str, str, int]]:
    """(task, node, port) of each Job rendered, in the documents' order."""
    assert result.code == 0, result.err
    found = []
    for doc in result.docs:
        config = json.loads(doc["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"])
        task, node = config["task"], doc["spec"]["template"]["spec"]["nodeName"]
        listed = config["cluster"].get(task["type"])  # (the evaluator is not in the cluster)
        host, port = listed[task["index"]].rsplit(":", 1) if listed else (node, "0")
        assert host == node
        found.append((f"{task['type']}-{task['index']}", host, int(port)))
    return found


# ---- every walk ends ------------------------------------------------------------------------


@pytest.fixture
def one_gpu_node(tmp_path: Path) -> Path:
    """gpu-a with 2 GPUs, and three CPU nodes (sorted by name before it)."""
    return nodes_file(tmp_path, ("gpu-a", 2, "8"), *((f"cpu-{i}", 0, "8") for i in range(3)))


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "-N 2 --psn 0 --evaluator --set gpus.evaluator=1",
            [("worker-0", "cpu-0"), ("evaluator-0", "gpu-a")],
        ),
        (
            "-N 3 --psn 1 --evaluator --set gpus.evaluator=1",
            [("ps-0", "cpu-0"), ("worker-0", "cpu-1"), ("evaluator-0", "gpu-a")],
        ),
        (
            "-N 3 --psn 1 --chief --evaluator --tasks-per-host 2 --set gpus.chief=1 "
            "--set gpus.evaluator=1",
            None,
        ),
        (
            "-N 3 --psn 1 --evaluator --tasks-per-host 2 --set gpus.evaluator=1",
            None,
        ),
    ],
)
def test_a_role_alone_on_the_device_node_is_seated_and_the_walk_ends(
    cli: Any, one_gpu_node: Path, line: str, expected: list[tuple[str, str]] | None
) -> None:
    """The workers passed over the only node the evaluator could use, and then asked for it
    again, for ever: `render`, `apply` and `run` hung at 100 % CPU."""
    args = line.split()
    with within(10):
        result = cli("t.yaml", "--nodes-file", "nodes.json", "-o", "-", *args, cwd=one_gpu_node)
    tasks = seated(result)
    if expected is not None:
        assert [(task, node) for task, node, _ in tasks] == expected
    num = int(args[args.index("-N") + 1])
    assert len({node for _, node, _ in tasks}) == num
    on_gpu = [task for task, node, _ in tasks if node == "gpu-a"]
    assert "evaluator-0" in on_gpu and len(on_gpu) <= 2
