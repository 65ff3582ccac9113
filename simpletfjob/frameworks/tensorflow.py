"""TensorFlow: chief, ps, worker and evaluator tasks, each with its TF_CONFIG.

Roles are seated in the order chief (with --chief), parameter servers (--psn,
or the --psf hosts' first slots), workers, and the evaluator (with
--evaluator), each on a host its role may use; each role is indexed from 0 and
the documents come out in that order. TF_CONFIG is
`{"cluster": {role: ["host:port", ...]}, "task": {"type": role, "index": i}}`
with sorted keys, as the original tool wrote it; the evaluator is left out of
the cluster unless --evaluator-in-cluster, as TensorFlow documents. Its
cluster part is built once per run and shared, as one string, by every task.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from simpletfjob.errors import InputError, SelectionError, UsageError
from simpletfjob.frameworks.workers import CommonRules, env_values, host_of, too_few_used
from simpletfjob.hosts.nodes import check_host_names, parse_host_lines
from simpletfjob.inputs import read_text
from simpletfjob.options.table import OptionGroup, at_least, option
from simpletfjob.tasks import (
    MAX_TASKS,
    Pin,
    Seating,
    Slots,
    Task,
    tasks_per_host_for,
)

if TYPE_CHECKING:
    from simpletfjob.tasks import Capacity

ROLES = ("chief", "ps", "worker", "evaluator")
TF_CONFIG = "TF_CONFIG"


def place_tasks(
    hosts: Sequence[str],
    *,
    num: int = -1,
    psn: int = 1,
    psf: Sequence[str] = (),
    chief: bool = False,
    evaluator: bool = False,
    tasks_per_host: int = 1,
    may_take: Callable[[str, int], bool] | None = None,
    note: Callable[[], str] | None = None,
    capacity: Capacity | None = None,
) -> Seating:
    """Seat every task of the run on the hosts (node names, in order), in tasks.Slots' walk.

    The --psf hosts' first slots are the parameter servers, in the file's order. Then the
    chief, the other parameter servers, the workers and the evaluator each take the first
    free slot on a host their role may use. With `num` (-N) the run uses exactly `num`
    hosts, and a worker passes over a slot whose taking would leave the evaluator none.
    With -1 the evaluator takes the last free slot it may use before the workers take
    every free slot they may use. `may_take`, `note` and `capacity` are Slots'.
    """
    if tasks_per_host < 1:
        raise UsageError("--tasks-per-host must be at least 1")
    limit = len(hosts) if num == -1 else min(num, len(hosts))
    _check_size(limit, tasks_per_host)
    _check_capacity(limit, tasks_per_host, len(psf) or psn, bool(psf), chief, evaluator, num, note)
    slots = Slots(hosts, ROLES, num, tasks_per_host, may_take, note, capacity)
    position = {name: i for i, name in enumerate(hosts)}
    for name in psf:
        slots.take("ps", position[name])
    slots.seat("chief", int(chief))
    slots.seat("ps", 0 if psf else psn)
    limited = num != -1
    if evaluator:
        host = slots.first_free("evaluator") if limited else slots.last_free("evaluator")
        if host is None:
            raise slots.shortage("evaluator")
        if not limited:
            slots.take("evaluator", host, last=True)
    if limited and evaluator:
        slots.seat_rest_leaving_one("worker", "evaluator")
    else:
        slots.seat_rest("worker")
    if not slots.placed["worker"]:
        raise slots.shortage("worker")
    if limited and evaluator:
        slots.seat("evaluator", 1)  # the slot the workers left it
    if limited and slots.used < slots.limit:
        to_ps = not psf and psn and any(slots.may_take("ps", i) for i in slots.spare())
        hint = "; --psf can put the parameter servers there" if to_ps else ""
        raise too_few_used(slots, "tasks", hint)
    return slots.placed


def _check_size(hosts: int, tasks_per_host: int) -> None:
    """Refuse a run of more tasks than MAX_TASKS, before any host is seated."""
    slots = hosts * tasks_per_host
    if slots <= MAX_TASKS:
        return
    per_host = f" x {tasks_per_host:,} tasks per host" if tasks_per_host > 1 else ""
    raise SelectionError(
        f"the run would have up to {slots:,} tasks ({hosts:,} hosts{per_host}); a run has at "
        f"most {MAX_TASKS:,}, since every task's TF_CONFIG lists every task; use -N or "
        "--tasks-per-host to ask for fewer (see Limits in the README)"
    )


def _check_capacity(
    hosts: int,
    tasks_per_host: int,
    ps: int,
    pinned: bool,
    chief: bool,
    evaluator: bool,
    num: int,
    note: Callable[[], str] | None,
) -> None:
    """Too few slots for the chief, the parameter servers, one worker and the evaluator."""
    slots = hosts * tasks_per_host
    needed = int(chief) + ps + int(evaluator) + 1
    if pinned:
        chiefs = min(int(chief), slots - ps)
    else:
        chiefs = min(int(chief), slots)
        ps = min(ps, slots - chiefs)
    if slots - chiefs - ps - int(evaluator) >= 1:
        return
    taken = [f"{ps} ps"] + (["1 chief"] if chiefs else []) + (["1 evaluator"] if evaluator else [])
    noun = "task" if slots == 1 else "tasks"
    message = f"no task is left for a worker: {slots} {noun} in all, taken by {' + '.join(taken)}; "
    # More slots on the same hosts (the --psf hosts' first slots are the parameter servers'
    # whatever the count), then giving up what takes a slot, by the option that set it.
    per_host = None if pinned else tasks_per_host_for(hosts, needed)
    ways = [f"more tasks per host (--tasks-per-host {per_host})"] if per_host else []
    if ps:
        ways.append(
            "fewer hosts in the --psf file" if pinned else "fewer parameter servers (--psn)"
        )
    if not ps or pinned:
        ways += ["no chief (--no-chief)"] if chiefs else []
        ways += ["no evaluator (--no-evaluator)"] if evaluator else []
    # -N -1 took every eligible host already: the count says why there are so few.
    counted = num == -1 and note is not None
    ways.insert(0, "more hosts" if counted else "more hosts (-N)")
    message += f"use {', '.join(ways[:-1])} or {ways[-1]}"
    raise SelectionError(f"{message} ({note()})" if counted and note is not None else message)


class ClusterSpec:
    """A run's RunValues: the `cluster` part of TF_CONFIG, built once, each task's whole
    TF_CONFIG from it, and the host lists. Keys are sorted, as the original tool's were. The
    evaluator is left out of the cluster unless `include_evaluator`, as TensorFlow documents."""

    def __init__(
        self,
        tasks: Sequence[Task],
        endpoints: Mapping[Task, str] | None = None,
        include_evaluator: bool = False,
        uses_config: bool = False,
    ) -> None:
        cluster: dict[str, list[str]] = {}
        for t in tasks:
            if t.role == "evaluator" and not include_evaluator:
                continue
            endpoint = endpoints[t] if endpoints is not None else t.endpoint
            cluster.setdefault(t.role, []).append(endpoint)
        self.cluster = {role: cluster[role] for role in sorted(cluster)}
        self._lists = {role: ",".join(map(json.dumps, eps)) for role, eps in self.cluster.items()}
        self._compact_prefix = (
            '{"cluster":{'
            + ",".join(f"{json.dumps(r)}:[{lst}]" for r, lst in self._lists.items())
            + '},"task":{"index":'
        )
        self._pretty_prefixes: dict[str, str] = {}
        self._uses_config = uses_config  # the template uses TF_CONFIG in an expression

    def hosts(self, role: str) -> str:
        """Comma-separated host:port list of one role, for --ps_hosts/--worker_hosts style flags."""
        return ",".join(self.cluster.get(role, ()))

    def variables(self, task: Task) -> dict[str, Any]:
        found: dict[str, Any] = {
            "type": task.role,
            "index": task.index,
            "ps_hosts": self.hosts("ps"),
            "worker_hosts": self.hosts("worker"),
            "chief_hosts": self.hosts("chief"),
        }
        if self._uses_config:
            found[TF_CONFIG] = self.compact(task)
        return found

    def value(self, name: str, task: Task) -> Any:
        return {
            "cluster": {role: list(eps) for role, eps in self.cluster.items()},
            "task": {"type": task.role, "index": task.index},
        }

    def compact(self, task: Task) -> str:
        """TF_CONFIG on one line with no spaces, safe inside any YAML quoting or plain scalar."""
        return "".join(self.compact_parts(TF_CONFIG, task))

    def compact_parts(self, name: str, task: Task) -> tuple[str, str]:
        """compact() as (the shared cluster part, this task's part), so the first is never copied."""
        return self._compact_prefix, f'{task.index},"type":{json.dumps(task.role)}}}}}'

    def block_parts(self, name: str, task: Task, indent: str) -> tuple[str, str]:
        """TF_CONFIG as indented lines, each starting with `indent`, ending with a newline (the
        original tool's layout), as (the shared cluster part, this task's part)."""
        prefix = self._pretty_prefixes.get(indent)
        if prefix is None:
            roles = ",\n".join(
                f"{indent}    {json.dumps(r)}: [{lst}]" for r, lst in self._lists.items()
            )
            prefix = f'{indent}{{\n{indent}  "cluster": {{\n{roles}\n{indent}  }},\n{indent}  "task": {{\n'
            self._pretty_prefixes[indent] = prefix
        return prefix, (
            f'{indent}    "index": {task.index},\n'
            f'{indent}    "type": {json.dumps(task.role)}\n{indent}  }}\n{indent}}}\n'
        )


class TensorFlow(CommonRules):
    """The TensorFlow framework: TF_CONFIG, chief/ps/worker/evaluator; the chief decides a run."""

    name: str = "tensorflow"
    output_suffix: str = "_tfjob"
    variables: tuple[str, ...] = (
        "type",
        "index",
        TF_CONFIG,
        "ps_hosts",
        "worker_hosts",
        "chief_hosts",
    )
    placed: tuple[str, ...] = (TF_CONFIG,)
    blocks: tuple[str, ...] = ()
    env_names: tuple[str, ...] = (TF_CONFIG,)
    legacy: tuple[str, ...] = ("type", "index", "host", TF_CONFIG)
    addresses: frozenset[str] = frozenset({TF_CONFIG, "ps_hosts", "worker_hosts", "chief_hosts"})
    port_name: str = "tfjob-port"  # as the TFJob operator names it
    default_port: int = 2222
    default_policy: str = "worker0"
    # The evaluator only reads the checkpoints the others write, and is not in the cluster
    # spec (with --evaluator-in-cluster it is listed, and still no strategy waits for it).
    independent: tuple[str, ...] = ("evaluator",)
    role_order: tuple[str, ...] = ROLES  # the order render writes the tasks in
    lead: str = "chief-0"
    collective: tuple[str, ...] = ("chief", "worker")  # MultiWorkerMirroredStrategy's (no ps)
    serving: str = "ps"  # never ends, nor do a ParameterServerStrategy's workers beside it

    def roles(self, options: TensorFlowOptions) -> tuple[str, ...]:
        has_ps = bool(options.psf) or options.psn > 0
        wanted = (options.chief, has_ps, True, options.evaluator)  # in ROLES' order
        return tuple(role for role, has in zip(ROLES, wanted, strict=True) if has)

    def pins(self, options: TensorFlowOptions) -> tuple[Pin, ...]:
        path = options.psf
        if path is None:
            return ()
        entries = parse_host_lines(read_text(path, "--psf file"), path)
        if not entries:
            raise InputError(f"--psf file {path!r} lists no hosts")
        return (Pin("ps", tuple(check_host_names(entries)), "--psf"),)

    def inputs(self, options: TensorFlowOptions) -> list[tuple[str, str | None]]:
        return [("--psf file", options.psf)]

    def seat(
        self,
        hosts: Sequence[str],
        options: Any,  # options/render.py's Options: its group and the core's seating options
        pins: Sequence[Pin],
        may_take: Callable[[str, int], bool] | None,
        note: Callable[[], str],
        capacity: Capacity | None = None,
    ) -> Seating:
        psf = next((p.hosts for p in pins if p.role == "ps"), ())
        return place_tasks(
            hosts,
            num=options.num,
            psn=options.psn,
            psf=psf,
            chief=options.chief,
            evaluator=options.evaluator,
            tasks_per_host=options.tasks_per_host,
            may_take=may_take,
            note=note,
            capacity=capacity,
        )

    def values(
        self,
        tasks: Sequence[Task],
        endpoints: Mapping[Task, str] | None,
        options: TensorFlowOptions,
        referenced: Collection[str],
    ) -> ClusterSpec:
        return ClusterSpec(
            tasks,
            endpoints,
            include_evaluator=options.evaluator_in_cluster,
            uses_config=TF_CONFIG in referenced,
        )

    def run_tasks(self, job: Mapping[str, Any]) -> list[str]:
        """Every task of the run ('chief-0', 'worker-1'), from the cluster in a Job's TF_CONFIG;
        [] when its pod template has no TF_CONFIG with a cluster (flags instead, say)."""
        return [
            f"{role}-{i}" for role, hosts in _cluster_of(job).items() for i in range(len(hosts))
        ]

    def peer_hosts(self, job: Mapping[str, Any]) -> list[str]:
        """The hosts of the cluster in a Job's TF_CONFIG; [] when it has none."""
        return [host_of(endpoint) for hosts in _cluster_of(job).values() for endpoint in hosts]


def _cluster_of(job: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The cluster of a Job's first TF_CONFIG that has one (roles with a list); {} if none."""
    for value in env_values(job, TF_CONFIG):
        try:
            cluster = json.loads(str(value)).get("cluster")
        except (ValueError, AttributeError):
            continue
        if isinstance(cluster, dict):
            return {role: hosts for role, hosts in cluster.items() if isinstance(hosts, list)}
    return {}


TENSORFLOW = TensorFlow()


class TensorFlowOptions(OptionGroup):
    """TensorFlow's group of the option table (options/): the roles a TensorFlow run has
    besides its workers, and what TF_CONFIG's cluster lists."""

    section = "TensorFlow options"

    psn: int = option(
        "--psn",
        default=1,
        show_default=True,
        rule=at_least(0),
        header=True,
        help="Parameter servers; 0 for none (all-reduce).",
    )
    psf: str | None = option(
        "--psf",
        default=None,
        metavar="FILE",
        help="Hosts that must be the parameter servers. One per line; overrides --psn.",
    )
    # Each switch has a --no- form so that the command line can turn off a template header's default.
    chief: bool = option(
        "--chief",
        default=False,
        negatable=True,
        header=True,
        help="Add one chief task. For ParameterServerStrategy or an Estimator.",
    )
    evaluator: bool = option(
        "--evaluator",
        default=False,
        negatable=True,
        header=True,
        help="Add one evaluator task, on the last host.",
    )
    evaluator_in_cluster: bool = option(
        "--evaluator-in-cluster",
        default=False,
        negatable=True,
        header=True,
        help="List the evaluator in TF_CONFIG's cluster. TensorFlow leaves it out.",
    )
