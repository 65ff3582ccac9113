"""Frameworks: what a distributed training framework adds to a run.

A framework owns the roles of its tasks and how they are seated on hosts, the
variables each task's render gets, the large values it places where the template
writes them (see template/markers.py), its options and header keys, and its output name.
TensorFlow (tensorflow.py) is the default; PyTorch (pytorch.py) and JAX (jax.py) have
workers only (workers.py), and give their variables as env entries (`blocks`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from simpletfjob.tasks import Pin, Seating, Task

if TYPE_CHECKING:
    from simpletfjob.tasks import Capacity

# The run's options (options/render.py's `Options`, which imports this package), not
# imported even for types; each framework types what it reads as its own group.
Options: TypeAlias = Any

__all__ = [
    "FRAMEWORKS",
    "TASK_VARIABLES",
    "Framework",
    "Pin",
    "RunValues",
    "framework",
    "independent_roles",
    "reserved_variables",
]

# --framework's choices; the first is the default.
FRAMEWORKS = ("tensorflow", "pytorch", "jax")

# Variables every task gets, whatever the framework; --set values may not reuse them.
TASK_VARIABLES = ("host", "node", "port", "num_tasks", "restart")


class RunValues(Protocol):
    """A run's per-task variables and placed values, built once for all its tasks."""

    def variables(self, task: Task) -> dict[str, Any]:
        """The framework's variables for one task's render (not the placed values)."""

    def compact_parts(self, name: str, task: Task) -> tuple[str, str]:
        """A placed value on one line, as (a part shared by every task, this task's part)."""

    def block_parts(self, name: str, task: Task, indent: str) -> tuple[str, str]:
        """A placed value as indented lines under a block scalar, in the same two parts."""

    def value(self, name: str, task: Task) -> Any:
        """A placed value as data, for checks: what the text reads back as."""


class Framework(Protocol):
    """What the plan asks of a framework; see tensorflow.py."""

    name: str
    output_suffix: str  # the default output is <template stem><suffix>.yaml
    variables: tuple[str, ...]  # per-task variables it sets, placed values included
    placed: tuple[str, ...]  # values placed where they stand, as large strings
    blocks: tuple[str, ...]  # values that stand alone on a line and expand to lines there
    env_names: tuple[str, ...]  # env names that only its tasks' containers carry (logs)
    default_port: int  # --port when neither the command line nor the header gives it
    default_policy: str  # --success-policy likewise
    legacy: tuple[str, ...]  # names the original tool wrote as {{.name}}
    addresses: frozenset[str]  # variables that hold task addresses (pod networking renders again)
    port_name: str  # the name of a task's Service port
    # Roles the training does not depend on: a failure of one is reported, does not fail
    # the run, and `run` restarts that task alone (runs/state.py, runs/run.py).
    independent: tuple[str, ...]
    role_order: tuple[str, ...]  # every role it may have, in the order render writes the tasks in
    lead: str  # the task that decides a run whatever its success policy, when it has one; or ''
    fills: str  # the role whose tasks take every slot left where they fit (-N -1)

    def deciding(self, policy: str, names: Iterable[str]) -> list[str]:
        """The tasks, of those named, whose success is the run's under the success policy."""

    def settle(self, options: Options, gpus: Callable[[], int]) -> Options:
        """The options with the defaults that wait for the template settled (PyTorch's
        `--nproc-per-node gpu`); `gpus` counts the GPUs a task asks."""

    # An elastic run's (--min-workers): the role it may lose tasks of, and the task that hosts
    # its rendezvous, whose loss no task survives.
    elastic: str
    rendezvous: str

    def check_floor(self, floor: int | None, roles: Iterable[str]) -> None:
        """--min-workers against the run's tasks' roles: a usage error when it is more than
        the tasks of the elastic role."""

    def lost(
        self, failed: Collection[str], names: Collection[str], floor: int | None
    ) -> frozenset[str]:
        """Of the run's failed tasks, those an elastic run trains on without: every failed task
        of the elastic role, when at least `floor` of that role's tasks (of `names`) remain and
        the rendezvous host is not among them; none otherwise (the failures are the run's)."""

    def roles(self, options: Options) -> tuple[str, ...]:
        """The roles this run has, in the order they are seated and documented."""

    def pins(self, options: Options) -> tuple[Pin, ...]:
        """Hosts a role must take, read from the files its options name."""

    def inputs(self, options: Options) -> list[tuple[str, str | None]]:
        """Files its options name, as (what, path): the output may not be one of them."""

    def seat(
        self,
        hosts: Sequence[str],
        options: Options,
        pins: Sequence[Pin],
        may_take: Callable[[str, int], bool] | None,
        note: Callable[[], str],
        capacity: Capacity | None = None,
    ) -> Seating:
        """Seat every task of the run on the hosts (node names, in order); `capacity`: each
        task only where it fits beside those seated before it (tasks.py's Slots)."""

    def values(
        self,
        tasks: Sequence[Task],
        endpoints: Mapping[Task, str] | None,
        options: Options,
        referenced: Collection[str],
    ) -> RunValues:
        """The run's values; `endpoints` replaces each task's host:port (pod networking).
        `referenced` are the names the template uses in expressions of its own."""

    def run_tasks(self, job: Mapping[str, Any]) -> list[str]:
        """Every task of the run ('worker-1'), as one of its Jobs (from the server) names them; [] if it does not."""

    def peer_hosts(self, job: Mapping[str, Any]) -> list[str]:
        """The hosts the run's tasks reach each other at, as one of its Jobs names them in its
        env (TensorFlow's cluster, torchrun's master, JAX's coordinator); [] if it does not."""

    def ends_by_itself(self, roles: Collection[str]) -> frozenset[str]:
        """Of a run's roles, those whose tasks end by themselves once the run has succeeded
        (the workers of a collective end with the task that decided, a moment later): `wait`'s
        cleanup gives them --cleanup-grace to end before it deletes what still runs."""


def framework(name: str = "tensorflow") -> Framework:
    """The framework of that name (each module is imported only when its framework is asked for)."""
    if name == "tensorflow":
        from simpletfjob.frameworks.tensorflow import TENSORFLOW

        return TENSORFLOW
    if name == "pytorch":
        from simpletfjob.frameworks.pytorch import PYTORCH

        return PYTORCH
    if name == "jax":
        from simpletfjob.frameworks.jax import JAX

        return JAX
    raise ValueError(f"unknown framework {name!r}")


def independent_roles() -> frozenset[str]:
    """The roles, in any framework, that the training does not depend on (`Framework.independent`):
    a run's Jobs say only their role, and a role's name means the same in every framework."""
    return frozenset(role for name in FRAMEWORKS for role in framework(name).independent)


def reserved_variables() -> tuple[str, ...]:
    """Names a value may not take: those every task gets, and every framework's.
    Every framework's: values are read before the template's header names the framework."""
    names = [*TASK_VARIABLES]
    for name in FRAMEWORKS:
        names += [n for n in framework(name).variables if n not in names]
    return tuple(names)
