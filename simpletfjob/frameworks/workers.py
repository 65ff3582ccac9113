"""What the worker-only frameworks (pytorch.py, jax.py) share: seating, env entries, and a run's tasks.

Their runs have one role, `worker`, indexed 0..n-1; the others meet at worker 0 (torchrun's
master, JAX's coordinator). Every free slot of every eligible host takes a worker. Their
variables reach the container as a placeholder alone on a line (`<<TORCH_ENV>>`,
`<<JAX_ENV>>`) that expands to `env` entries at its indentation, placed as TensorFlow's
config is (template/markers.py): the shared entries built once per run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from simpletfjob.errors import SelectionError, UsageError
from simpletfjob.tasks import MAX_TASKS, Pin, Seating, Slots, Task, hosts_noun

if TYPE_CHECKING:
    from simpletfjob.tasks import Capacity

WORKER = "worker"
ROLES = (WORKER,)


class CommonRules:
    """What every framework here decides alike: which tasks decide a run, and no late defaults.

    A run succeeds when its `lead` task does, if it has one (TensorFlow's chief);
    else by its success policy: when worker 0 does (`worker0`), or every worker
    (`all-workers`). A framework overrides `settle` for a default that depends on
    what the template's tasks ask (PyTorch's `--nproc-per-node gpu`).
    """

    lead: str = ""
    fills: str = WORKER
    elastic: str = ""  # '' for a framework whose runs are never elastic
    rendezvous: str = ""
    # The roles whose tasks end by themselves once the run has succeeded (`ends_by_itself`),
    # and a role whose tasks never do, nor the others beside them ('' for none).
    collective: tuple[str, ...] = (WORKER,)
    serving: str = ""

    def deciding(self, policy: str, names: Iterable[str]) -> list[str]:
        known = set(names)
        if self.lead and self.lead in known:
            return [self.lead]
        if policy == "all-workers":
            indices = [n.removeprefix(f"{WORKER}-") for n in known if n.startswith(f"{WORKER}-")]
            last = max((int(i) for i in indices if i.isdigit()), default=0)
            # Workers are numbered from 0 without a gap: one missing below the last was there too.
            return [f"{WORKER}-{i}" for i in range(last + 1)]
        return [f"{WORKER}-0"]

    def settle(self, options: Any, gpus: Callable[[], int]) -> Any:
        return options

    def ends_by_itself(self, roles: Collection[str]) -> frozenset[str]:
        """The roles of `collective` (all end once the work is done: torchrun's and JAX's
        workers), unless the run has a `serving` role (then none: its tasks serve until they
        are stopped, and so do the others beside them)."""
        if self.serving and self.serving in roles:
            return frozenset()
        return frozenset(roles) & set(self.collective)

    def check_floor(self, floor: int | None, roles: Iterable[str]) -> None:
        if floor is None or not self.elastic:
            return
        count = sum(role == self.elastic for role in roles)
        if floor > count:
            raise UsageError(
                f"--min-workers {floor} is more than the run's {count} "
                f"{self.elastic}{'s' if count != 1 else ''}; give at most {count}, or more hosts"
            )

    def lost(
        self, failed: Collection[str], names: Collection[str], floor: int | None
    ) -> frozenset[str]:
        if floor is None or not self.elastic:
            return frozenset()
        members = {n for n in names if n.rpartition("-")[0] == self.elastic}
        gone = members.intersection(failed)
        if not gone or self.rendezvous in gone or len(members) - len(gone) < floor:
            return frozenset()
        return frozenset(gone)


def seat_workers(
    hosts: Sequence[str],
    num: int,
    tasks_per_host: int,
    may_take: Callable[[str, int], bool] | None,
    note: Callable[[], str],
    capacity: Capacity | None = None,
) -> Seating:
    """A worker in every free slot of the hosts a worker may use (and, with `capacity`, where it
    fits beside the workers already there); with -N, on exactly N hosts."""
    if tasks_per_host < 1:
        raise UsageError("--tasks-per-host must be at least 1")
    limit = len(hosts) if num == -1 else min(num, len(hosts))
    if limit * tasks_per_host > MAX_TASKS:
        raise SelectionError(
            f"the run would have up to {limit * tasks_per_host:,} tasks; a run has at most "
            f"{MAX_TASKS:,}; use -N or --tasks-per-host to ask for fewer (see Limits in the README)"
        )
    slots = Slots(hosts, ROLES, num, tasks_per_host, may_take, note, capacity)
    slots.seat_rest(WORKER)
    if not slots.placed[WORKER]:
        raise slots.shortage(WORKER)
    if num != -1 and slots.used < slots.limit:
        raise too_few_used(slots, "workers")
    return slots.placed


def too_few_used(slots: Slots, tasks: str, hint: str = "") -> SelectionError:
    """-N asked for more hosts than the run's `tasks` could be seated on."""
    spare = slots.spare()
    return SelectionError(
        f"-N {slots.num} asks for more hosts than the {tasks} can use: {slots.used} take them "
        f"all, and the other {len(spare)} eligible {hosts_noun(len(spare))} may not take "
        f"a worker{hint}{slots.breakdown()}"
    )


def address_of(task: Task, endpoints: Mapping[Task, str] | None) -> tuple[str, str]:
    """A task's (host, host:port): its Service's DNS name with pod networking, else its host."""
    if endpoints is None:
        return task.host, task.endpoint
    endpoint = endpoints[task]
    return endpoint.rsplit(":", 1)[0], endpoint


def env_entries(pairs: Sequence[tuple[str, object]]) -> str:
    """`env` list entries, one name/value pair each, the values double-quoted strings; no final newline."""
    return "\n".join(f"- name: {name}\n  value: {json.dumps(str(value))}" for name, value in pairs)


def env_values(job: Mapping[str, Any], name: str) -> list[Any]:
    """The values of every env entry `name` in a Job's pod template, init containers first (as
    the server wrote them: any type)."""
    try:
        spec = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
        containers = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
    except (AttributeError, TypeError):  # not a Job as the API server writes one
        return []
    return [
        env.get("value")
        for container in containers
        for env in (container.get("env") if isinstance(container, Mapping) else None) or ()
        if isinstance(env, Mapping) and env.get("name") == name
    ]


def env_value(job: Mapping[str, Any], name: str) -> str | None:
    """The value of env entry `name` in any container of a Job's pod template (as the server wrote it)."""
    values = env_values(job, name)
    return values[0] if values and isinstance(values[0], str) else None


def host_of(endpoint: object) -> str:
    """The host of an endpoint: 'h1' of 'h1:2222', '::1' of '[::1]:2222'; a host alone as it is."""
    text = str(endpoint)
    if text.startswith("["):
        return text[1:].partition("]")[0]
    return text.partition(":")[0] if text.count(":") == 1 else text


class EnvValues:
    """The RunValues of a framework whose placed value is env entries (`<<TORCH_ENV>>`): the
    shared entries written once per indentation, each task's own (its rank) after them."""

    def __init__(self, shared: Sequence[tuple[str, object]]) -> None:
        self._shared = tuple(shared)
        self._shared_text: dict[str, str] = {}

    def own(self, task: Task) -> Sequence[tuple[str, object]]:
        """This task's own entries."""
        raise NotImplementedError

    def env(self, task: Task) -> str:
        """Every entry of the task, unindented (for a template that uses the value in an expression)."""
        return env_entries((*self._shared, *self.own(task)))

    def block_parts(self, name: str, task: Task, indent: str) -> tuple[str, str]:
        shared = self._shared_text.get(indent)
        if shared is None:
            shared = self._shared_text[indent] = _indented(env_entries(self._shared), indent) + "\n"
        return shared, _indented(env_entries(self.own(task)), indent)

    def compact_parts(self, name: str, task: Task) -> tuple[str, str]:
        # Never asked: the value stands alone on its line (template/compiled.py's translate_source).
        raise ValueError(f"<<{name}>> is lines of YAML, not one value")

    def value(self, name: str, task: Task) -> Any:
        return [{"name": n, "value": str(v)} for n, v in (*self._shared, *self.own(task))]


def _indented(text: str, indent: str) -> str:
    return indent + text.replace("\n", "\n" + indent)


class WorkersOnly(CommonRules):
    """What a framework whose tasks are all workers has in common (PyTorch, JAX): one role,
    no pinned hosts and no files of its own, every task seated as a worker."""

    role_order: tuple[str, ...] = ROLES
    # The env entries a Job of the run carries: the count of its workers, and where they
    # meet (the first of these it has).
    count_variable: str
    meeting_variables: tuple[str, ...]
    placed: tuple[str, ...] = ()  # their values are env entries (`blocks`)
    legacy: tuple[str, ...] = ()
    default_policy: str = "all-workers"
    independent: tuple[str, ...] = ()  # every worker is in the collective

    def roles(self, options: Any) -> tuple[str, ...]:
        return ROLES

    def pins(self, options: Any) -> tuple[Pin, ...]:
        return ()

    def inputs(self, options: Any) -> list[tuple[str, str | None]]:
        return []

    def seat(
        self,
        hosts: Sequence[str],
        options: Any,
        pins: Sequence[Pin],
        may_take: Callable[[str, int], bool] | None,
        note: Callable[[], str],
        capacity: Capacity | None = None,
    ) -> Seating:
        return seat_workers(hosts, options.num, options.tasks_per_host, may_take, note, capacity)

    def run_tasks(self, job: Mapping[str, Any]) -> list[str]:
        """Every worker of the run ('worker-0', ...), from the count the Job's env carries; []
        if none. An elastic run's count may be written `M:N` (torchrun's --nnodes), N the run's."""
        value = env_value(job, self.count_variable)
        if self.elastic and value is not None and value.count(":") == 1:
            value = value.split(":")[1]
        if value is None or not value.isdigit():
            return []
        return [f"{WORKER}-{i}" for i in range(int(value))]

    def peer_hosts(self, job: Mapping[str, Any]) -> list[str]:
        """The host of the first meeting variable the Job's env has (torchrun's master, JAX's
        coordinator), as a list; [] if none."""
        for name in self.meeting_variables:
            value = env_value(job, name)
            if value:
                return [host_of(value)]
        return []
