"""The render's options, by group; the rules that tie two options together.

`Options`, the render's, is the core groups here plus each framework's (frameworks/), read
flat as the command line and a header are (`options.psn`); a framework's code can take its own
group (`TensorFlowOptions`), and mypy lets it read only that group's fields.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any, ClassVar

from simpletfjob.errors import UsageError
from simpletfjob.frameworks import FRAMEWORKS
from simpletfjob.frameworks.pytorch import PyTorchOptions
from simpletfjob.frameworks.tensorflow import TensorFlowOptions
from simpletfjob.hosts.nodes import ADDRESS_CHOICES, GPU_RESOURCE
from simpletfjob.identity import SUCCESS_POLICIES
from simpletfjob.options.limits import LimitOptions
from simpletfjob.options.rules import (
    AUTO_PORT,
    DEFAULT_PORT,
    HOST_COUNT,
    PORT,
    dns_name,
    duration,
    label_value,
    namespace_name,
    parse_port,
    selector,
)
from simpletfjob.options.table import (
    Field,
    Must,
    OneOf,
    OptionGroup,
    argument,
    at_least,
    check_values,
    fields,
    option,
)

# ---- shared declarations for the commands that act on a run -------------------------------


def output_format(*choices: str, help: str) -> str:
    """An `-o/--output` that chooses how a command prints (table, wide, json, yaml); the first
    choice is the default."""
    return option(
        "-o",
        "--output",
        default=choices[0],
        rule=OneOf(*choices),
        show_default=True,
        help=help,
    )


def timeout(default: float | None, help: str) -> Any:
    """A `--timeout` written as kubectl writes durations (30s, 5m, 1h); the value is in seconds."""
    return duration("--timeout", default=default, show_default=default is not None, help=help)


class ClusterOptions(OptionGroup):
    """Which cluster to ask, as kubectl chooses it."""

    section = "Cluster options"

    kubeconfig: str | None = option(
        "--kubeconfig",
        default=None,
        metavar="FILE",
        help="The kubeconfig file to use. Without it: $KUBECONFIG, ~/.kube/config, then in-cluster, as kubectl reads them.",
    )
    context: str | None = option(
        "--context",
        default=None,
        metavar="NAME",
        help="The kubeconfig context to use. The default is the current one.",
    )


class ConnectionOptions(ClusterOptions):
    """Which cluster to ask, and which namespace, as kubectl chooses them."""

    section = "Cluster options"

    namespace: str | None = option(
        "-n",
        "--namespace",
        default=None,
        metavar="NS",
        rule=namespace_name,
        help="The run's namespace. Default: the context's, else default; a render writes it into documents that set none.",
    )


class NodeOptions(OptionGroup):
    """Where the hosts come from, and which of them may take a task."""

    section = "Host options"

    nodes: str | None = option(
        "--nodes",
        default=None,
        metavar="H1,H2,...",
        help="Use these hosts instead of asking a cluster.",
    )
    nodes_file: str | None = option(
        "--nodes-file",
        default=None,
        metavar="FILE",
        help="Hosts from a file instead of a cluster. One per line, or a saved `kubectl get nodes -o json|yaml`.",
    )
    exc: str | None = option(
        "-E",
        "--exc",
        default=None,
        bare="exc",
        metavar="[FILE]",
        help="Exclude the hosts listed in FILE. One per line; given bare, FILE is ./exc.",
    )
    address: str = option(
        "--address",
        default="name",
        show_default=True,
        rule=OneOf(*ADDRESS_CHOICES),
        help="How the tasks name their nodes. The node name, its InternalIP, or its hostname label.",
    )
    explain: bool = option(
        "--explain",
        default=False,
        help="Print each node's verdict to stderr. Eligible or why not, its task, its free GPUs when the pods were read, and what the tasks reach each other at.",
    )


class NodeChoiceOptions(OptionGroup):
    """Which of a cluster's nodes may take a task: labels, free GPUs, and whether pods are read."""

    section = "Host options"

    selector: str | None = option(
        "-l",
        "--selector",
        default=None,
        metavar="LABELS",
        rule=selector,
        help="Only nodes with these labels, as kubectl -l. For example 'pool=gpu,zone in (a,b)'.",
    )
    gpus: int = option(
        "--gpus",
        default=0,
        metavar="N",
        rule=at_least(0),
        help="Only nodes with N or more free GPUs. Allocatable less pods' requests (saved lists, --no-usage: allocatable).",
    )
    gpu_resource: str = option(
        "--gpu-resource",
        default=GPU_RESOURCE,
        show_default=True,
        metavar="NAME",
        rule=Must("a resource name such as amd.com/gpu", lambda v: bool(v) and " " not in v),
        help="The resource --gpus counts. For example amd.com/gpu or gpu.intel.com/i915.",
    )
    usage: bool = option(
        "--no-usage",
        default=True,
        help="Do not read the cluster's pods. GPUs are then judged by allocatable alone, and host ports not at all.",
    )


class ValueOptions(OptionGroup):
    """The template's variables: for a render, and for `nodes --template`, which renders it too."""

    set_values: tuple[str, ...] = option(
        "--set",
        default=(),
        multiple=True,
        metavar="KEY=VALUE",
        help="A template variable (repeatable). Keys nest with dots, as in helm; a name the "
        "template never reads is refused.",
    )
    value_files: tuple[str, ...] = option(
        "-f",
        "--values",
        default=(),
        multiple=True,
        metavar="FILE",
        help="Template variables from a YAML file. A mapping; repeatable: later files win, and --set wins over all.",
    )


class RenderOptions(OptionGroup):
    """The core of a render: the template, how many hosts, ports and networking, values, output."""

    template: str = argument(required=False)
    framework: str = option(
        "--framework",
        default=FRAMEWORKS[0],
        show_default=True,
        rule=OneOf(*FRAMEWORKS),
        header=True,
        help="The run's framework. It gives the run's roles, variables, default port and success policy.",
    )
    num: int = option(
        "-N",
        "--num",
        default=-1,
        show_default=True,
        rule=HOST_COUNT,
        header=True,
        shown="-N",  # as the original tool named it
        help="Hosts to use in total; -1: all eligible.",
    )
    port: int = option(
        "--port",
        default=DEFAULT_PORT,
        rule=PORT,
        parse=parse_port,
        format=str,
        metavar="PORT|auto",
        header=True,
        help="Task 0's port, or auto. Default 2222, 29500 or 1234 by --framework; auto: the lowest "
        "from there up that is free on every chosen node.",
    )
    tasks_per_host: int = option(
        "--tasks-per-host",
        default=1,
        show_default=True,
        rule=at_least(1),
        header=True,
        help="Tasks on each selected host. They take the ports port, port+1, ...",
    )
    network: str = option(
        "--network",
        default="host",
        show_default=True,
        rule=OneOf("host", "pod"),
        header=True,
        help="How the tasks reach each other. host: TF_CONFIG names hosts. pod: one headless "
        "Service per task, named by its DNS name.",
    )
    cluster_domain: str | None = option(
        "--cluster-domain",
        default=None,
        metavar="DOMAIN",
        rule=dns_name,
        help="The cluster's DNS domain, for --network pod. Tasks are then named "
        "NAME.NAMESPACE.svc.DOMAIN (for example cluster.local).",
    )
    output: str | None = option(
        "-o",
        "--output",
        default=None,
        metavar="FILE|-",
        help="Where to write; '-' is stdout. The default is <template dir>/<template stem>_tfjob.yaml.",
    )
    name: str | None = option(
        "--name",
        default=None,
        metavar="NAME",
        rule=label_value,
        help="The run's name (default: the template's stem). It is the simpletfjob/job label, and "
        "the value `name` of a template that reads it, as the built-ins name their objects.",
    )
    labels: bool = option(
        "--no-labels",
        default=True,
        help="Do not add the run's labels. Those are app.kubernetes.io/managed-by and simpletfjob/*.",
    )
    validate: bool = option(
        "--validate",
        default=False,
        help="Check the documents against the schema. Every document, against the Kubernetes "
        "schema, offline, before anything is written.",
    )
    kube_version: str | None = option(
        "--kube-version",
        default=None,
        metavar="VERSION",
        help="The Kubernetes version for --validate. It implies --validate; default: the newest kubernetes-validate has.",
    )
    # Filled in by the render command: the template's text once read (None: read `template`).
    template_text: str | None = None
    # The template's variables: the header's values, then the -f files, then --set.
    values: Mapping[str, Any] = field(default_factory=dict)
    # The top-level names of `values` that -f or --set gave (a value `name` names the run).
    given_values: frozenset[str] = frozenset()
    # The built-in's name when the template is one (the run's default name).
    builtin: str | None = None


class PolicyOptions(OptionGroup):
    """When a run has succeeded, recorded on its documents for `status` and `wait`."""

    section = "Run options"

    success_policy: str = option(
        "--success-policy",
        default="worker0",
        rule=OneOf(*SUCCESS_POLICIES),
        help="When a run without a chief has succeeded. Once worker 0 has (worker0), or every "
        "worker (all-workers); default: worker0 for tensorflow, all-workers for pytorch and jax. "
        "Recorded as the annotation simpletfjob/success-policy (not with --no-labels).",
    )


class Options(
    RenderOptions,
    ValueOptions,
    PolicyOptions,
    TensorFlowOptions,
    PyTorchOptions,
    NodeChoiceOptions,
    NodeOptions,
    ConnectionOptions,
):
    """Everything a render needs, as plain values; the render command fills it, tests may too."""

    restart: int = 0  # <<restart>>, the run's restart count: no option; `run` sets it
    run_name: str = ""  # the run's name (plan.name_run), with or without labels: no option

    # The rules between options that `check_options` applies (runs.ApplyOptions has more).
    _rules: ClassVar[tuple[Callable[[Any], None], ...]] = ()


# ---- checks -------------------------------------------------------------------------------------


def nodes_or_nodes_file(options: Options) -> None:
    if options.nodes is not None and options.nodes_file is not None:
        raise UsageError("give --nodes or --nodes-file, not both")


def ports_fit(options: Options) -> None:
    if options.port is not AUTO_PORT and options.port + options.tasks_per_host - 1 > 65535:
        raise UsageError(
            f"--port {options.port} with {options.tasks_per_host} tasks per host goes past port 65535"
        )


def cluster_or_host_list(options: Options) -> None:
    given = options.nodes is not None or options.nodes_file is not None
    if given and (options.kubeconfig is not None or options.context is not None):
        flag = "--kubeconfig" if options.kubeconfig is not None else "--context"
        raise UsageError(
            f"{flag} reads nodes from a cluster; it cannot go with --nodes or --nodes-file"
        )


def auto_port_reads_pods(options: Options) -> None:
    """--port auto chooses by the ports the cluster's pods hold: it needs them read."""
    if options.port is not AUTO_PORT:
        return
    if not options.usage:
        raise UsageError(
            "--port auto reads the ports the cluster's pods hold; it cannot go with --no-usage"
        )
    if options.nodes is not None or options.nodes_file is not None:
        source = "--nodes" if options.nodes is not None else "--nodes-file"
        raise UsageError(
            f"--port auto reads the ports the cluster's pods hold, and {source} gives no pods; "
            "give --port N"
        )


Options._rules = (nodes_or_nodes_file, ports_fit, cluster_or_host_list, auto_port_reads_pods)


def check_options(options: Options) -> None:
    """Each option's rule, then the rules between options; the first broken one is a UsageError."""
    check_values(options)
    for rule in options._rules:
        rule(options)


def header_fields() -> dict[str, Field]:
    """The options a template header may set, by field name (`tasks_per_host`)."""
    from simpletfjob.options import progress, queue, restarts

    groups: tuple[type, ...] = (Options, LimitOptions, restarts.RestartOptions)
    groups += (queue.QueueOptions, progress.ProgressOptions, progress.StallOptions)
    return {f.name: f for g in groups for f in fields(g) if f.option and f.option.header}
