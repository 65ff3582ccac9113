"""JAX: multi-process runs, one `worker` process per task, process 0 the coordinator.

`<<JAX_ENV>>`, alone on a line under `env:`, expands to JAX_COORDINATOR_ADDRESS
(process 0's host:port, at --port, default 1234 as JAX's examples use),
JAX_NUM_PROCESSES and JAX_PROCESS_ID. `jax.distributed.initialize()` reads only the
coordinator address from the environment (its Kubernetes detection assumes one
indexed Job, which a run is not), so the program passes the other two itself::

    jax.distributed.initialize(
        num_processes=int(os.environ["JAX_NUM_PROCESSES"]),
        process_id=int(os.environ["JAX_PROCESS_ID"]),
    )
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from simpletfjob.frameworks.workers import (
    EnvValues,
    WorkersOnly,
    address_of,
)
from simpletfjob.tasks import Task

JAX_ENV = "JAX_ENV"
DEFAULT_PORT = 1234


class JaxValues(EnvValues):
    """A run's coordinator and process count, and each task's process id."""

    def __init__(
        self, tasks: Sequence[Task], endpoints: Mapping[Task, str] | None, uses_env: bool
    ) -> None:
        self.num_processes = len(tasks)
        self.coordinator = address_of(tasks[0], endpoints)[1] if tasks else ""
        self._uses_env = uses_env
        super().__init__(
            (
                ("JAX_COORDINATOR_ADDRESS", self.coordinator),
                ("JAX_NUM_PROCESSES", self.num_processes),
            )
        )

    def own(self, task: Task) -> tuple[tuple[str, object], ...]:
        return (("JAX_PROCESS_ID", task.index),)

    def variables(self, task: Task) -> dict[str, Any]:
        found: dict[str, Any] = {
            "type": task.role,
            "index": task.index,
            "coordinator_address": self.coordinator,
            "num_processes": self.num_processes,
            "process_id": task.index,
        }
        if self._uses_env:
            found[JAX_ENV] = self.env(task)
        return found


class Jax(WorkersOnly):
    """The JAX framework: worker processes, process 0 coordinates."""

    name: str = "jax"
    output_suffix: str = "_jaxjob"
    variables: tuple[str, ...] = (
        "type",
        "index",
        "coordinator_address",
        "num_processes",
        "process_id",
        JAX_ENV,
    )
    blocks: tuple[str, ...] = (JAX_ENV,)
    env_names: tuple[str, ...] = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES")
    addresses: frozenset[str] = frozenset({JAX_ENV, "coordinator_address"})
    port_name: str = "jaxjob-port"  # as the JAXJob operator names it
    default_port: int = DEFAULT_PORT
    count_variable: str = "JAX_NUM_PROCESSES"  # in a Job's env: the run's workers
    meeting_variables: tuple[str, ...] = ("JAX_COORDINATOR_ADDRESS",)  # the coordinator's

    def values(
        self,
        tasks: Sequence[Task],
        endpoints: Mapping[Task, str] | None,
        options: Any,
        referenced: Collection[str],
    ) -> JaxValues:
        return JaxValues(tasks, endpoints, JAX_ENV in referenced)


JAX = Jax()
