"""PyTorch: torchrun's static rendezvous, one `worker` task per node of the run.

Each task is a node of the run (`--nnodes`), indexed 0..n-1 (`--node-rank`); worker 0's
address is the master (`--master-addr`), at --port (default 29500, torchrun's). Every
task runs --nproc-per-node processes (default 1; `gpu`: as many as its container
requests GPUs, as Kubeflow's trainer does), so the world size is nnodes x nproc_per_node.

`<<TORCH_ENV>>`, alone on a line under `env:`, expands to the variables torchrun reads
as its options' defaults (PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK,
PET_MASTER_ADDR, PET_MASTER_PORT), and the ones `init_process_group("env://")` reads
without torchrun (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, and RANK, the node's first
rank: node_rank x nproc_per_node).

With `--min-workers M` the run is elastic (torchrun's `--nnodes M:N`, c10d rendezvous):
the variables are then PET_NNODES=M:N, PET_NPROC_PER_NODE, PET_RDZV_BACKEND=c10d,
PET_RDZV_ENDPOINT (worker 0's host:port, where its agent hosts the store), PET_RDZV_ID
(the run's name), PET_RDZV_CONF (ELASTIC_CONF, and is_host true on worker 0 only, so the
store's host does not depend on host names), PET_MAX_RESTARTS (N - M: each lost worker
costs one restart) and SHARED_STORE_OFF. No fixed rank nor master: elastic mode assigns
ranks at each rendezvous.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from simpletfjob.frameworks.workers import (
    WORKER,
    EnvValues,
    WorkersOnly,
    address_of,
)
from simpletfjob.options.table import Must, OptionGroup, ascii_int, option
from simpletfjob.tasks import Task

TORCH_ENV = "TORCH_ENV"
DEFAULT_PORT = 29500  # torchrun's --master-port
# torchrun's rendezvous settings for an elastic run (seconds; docs/frameworks.md): 5 minutes
# for the first M workers to join, 5 seconds more for the others; a dead agent is noticed
# after 3 missed 2-second keep-alives (torch's defaults take about a minute).
ELASTIC_CONF = (
    "join_timeout=300,last_call_timeout=5,close_timeout=10,"
    "keep_alive_interval=2,keep_alive_max_attempt=3"
)

# An elastic run's processes meet in a store of each rendezvous round's own: the store the
# agents share by default outlives the rounds with no round in its keys, so a re-formed
# world may read the last round's addresses and fail to connect (docs/frameworks.md).
SHARED_STORE_OFF = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"


class _GpuCount(int):
    """`--nproc-per-node gpu`: an int, as the field is, told apart by identity."""

    def __repr__(self) -> str:
        return "gpu"

    __str__ = __repr__


# The plan replaces it with the GPUs worker 0's container requests (manifest/render.py's gpus_requested).
GPU_COUNT: int = _GpuCount(0)


def parse_nproc(text: str) -> int:
    """--nproc-per-node's text: a number of processes, or `gpu`."""
    if text == "gpu":
        return GPU_COUNT
    try:
        return ascii_int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number of processes; write a number, or gpu") from None


NPROC = Must("at least 1, or gpu", lambda n: n is GPU_COUNT or n >= 1)


class PyTorchValues(EnvValues):
    """A run's torchrun variables: the same for every task but its rank."""

    def __init__(
        self,
        tasks: Sequence[Task],
        endpoints: Mapping[Task, str] | None,
        nproc: int,
        uses_env: bool,
        min_workers: int | None = None,
        run_id: str = "",
    ) -> None:
        self.nnodes = len(tasks)
        self.nproc = nproc
        self.master_addr, endpoint = address_of(tasks[0], endpoints) if tasks else ("", "")
        self.master_port = tasks[0].port if tasks else 0
        self._uses_env = uses_env
        self.min_workers = min_workers
        if min_workers is not None:
            super().__init__(
                (
                    ("PET_NNODES", f"{min_workers}:{self.nnodes}"),
                    ("PET_NPROC_PER_NODE", self.nproc),
                    ("PET_RDZV_BACKEND", "c10d"),
                    ("PET_RDZV_ENDPOINT", endpoint),
                    ("PET_RDZV_ID", run_id),
                    ("PET_MAX_RESTARTS", max(self.nnodes - min_workers, 0)),
                    (SHARED_STORE_OFF, 1),
                )
            )
            return
        super().__init__(
            (
                ("PET_NNODES", self.nnodes),
                ("PET_NPROC_PER_NODE", self.nproc),
                ("PET_MASTER_ADDR", self.master_addr),
                ("PET_MASTER_PORT", self.master_port),
                ("MASTER_ADDR", self.master_addr),
                ("MASTER_PORT", self.master_port),
                ("WORLD_SIZE", self.nnodes * self.nproc),
            )
        )

    def own(self, task: Task) -> tuple[tuple[str, object], ...]:
        if self.min_workers is not None:
            host = "true" if task.index == 0 else "false"
            return (("PET_RDZV_CONF", f"{ELASTIC_CONF},is_host={host}"),)
        return (("PET_NODE_RANK", task.index), ("RANK", task.index * self.nproc))

    def variables(self, task: Task) -> dict[str, Any]:
        found: dict[str, Any] = {
            "type": task.role,
            "index": task.index,
            "node_rank": task.index,
            "nnodes": self.nnodes,
            "nproc_per_node": self.nproc,
            "world_size": self.nnodes * self.nproc,
            "master_addr": self.master_addr,
            "master_port": self.master_port,
        }
        if self._uses_env:
            found[TORCH_ENV] = self.env(task)
        return found


class PyTorch(WorkersOnly):
    """The PyTorch framework: torchrun workers, static rendezvous at worker 0."""

    name: str = "pytorch"
    output_suffix: str = "_pytorchjob"
    variables: tuple[str, ...] = (
        "type",
        "index",
        "node_rank",
        "nnodes",
        "nproc_per_node",
        "world_size",
        "master_addr",
        "master_port",
        TORCH_ENV,
    )
    blocks: tuple[str, ...] = (TORCH_ENV,)  # placed as lines of env entries
    env_names: tuple[str, ...] = (
        "PET_NNODES", "PET_NODE_RANK", "MASTER_ADDR", "RANK", "PET_RDZV_ENDPOINT",
    )  # fmt: skip
    addresses: frozenset[str] = frozenset({TORCH_ENV, "master_addr"})
    port_name: str = "pytorchjob-port"  # as the PyTorchJob operator names it
    default_port: int = DEFAULT_PORT
    count_variable: str = "PET_NNODES"  # N, or M:N elastic
    meeting_variables: tuple[str, ...] = ("PET_RDZV_ENDPOINT", "MASTER_ADDR")  # elastic, or static
    # Under --min-workers the run may lose workers, never worker 0: its agent hosts the c10d
    # store, which no agent outlives (pytorch/pytorch#67742; docs/frameworks.md).
    elastic: str = WORKER
    rendezvous: str = f"{WORKER}-0"

    def values(
        self,
        tasks: Sequence[Task],
        endpoints: Mapping[Task, str] | None,
        options: Any,
        referenced: Collection[str],
    ) -> PyTorchValues:
        return PyTorchValues(
            tasks,
            endpoints,
            options.nproc_per_node,
            TORCH_ENV in referenced,
            options.min_workers,
            options.run_name,
        )

    def settle(self, options: Any, gpus: Callable[[], int]) -> Any:
        """--nproc-per-node gpu: the GPUs a task asks, once the template is read."""
        if options.nproc_per_node is GPU_COUNT:
            return options.replace(nproc_per_node=gpus())
        return options


PYTORCH = PyTorch()


# ---- options: PyTorch's group of the option table (see options/table.py) ----------------------


class PyTorchOptions(OptionGroup):
    """How many processes torchrun starts on each node."""

    section = "PyTorch options"

    nproc_per_node: int = option(
        "--nproc-per-node",
        default=1,
        show_default=True,
        rule=NPROC,
        parse=parse_nproc,
        format=str,
        metavar="N|gpu",
        header=True,
        help="Processes per task (torchrun's). gpu: as many as the task's container requests GPUs.",
    )

    min_workers: int | None = option(
        "--min-workers",
        default=None,
        type=int,
        metavar="M",
        rule=Must("at least 1", lambda n: n is None or n >= 1),
        header=True,
        help="Elastic: go on while M workers remain. torchrun's c10d rendezvous, --nnodes M:N; a "
        "lost worker is not a whole-run restart under run. Recorded as the annotation "
        "simpletfjob/min-workers.",
    )
