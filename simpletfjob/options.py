"""Options: everything a run needs, as plain values, and the checks on their ranges."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from simpletfjob import nodes as node_sources
from simpletfjob.errors import UsageError
from simpletfjob.labels import LABEL_VALUE_RULE, is_label_value
from simpletfjob.selection import parse_selector


class Options(NamedTuple):
    """Everything a run needs, as plain values; the CLI fills it, tests may too."""

    template: str
    num: int = -1
    exc: str | None = None
    psn: int = 1
    psf: str | None = None
    chief: bool = False
    evaluator: bool = False
    evaluator_in_cluster: bool = False
    port: int = 2222
    nodes: str | None = None
    nodes_file: str | None = None
    output: str | None = None
    values: Mapping[str, Any] = MappingProxyType({})
    value_files: tuple[str, ...] = ()  # already read into `values`; kept to protect them
    network: str = "host"
    namespace: str | None = None
    cluster_domain: str | None = None
    tasks_per_host: int = 1
    name: str | None = None
    labels: bool = True
    # The template's text when the caller has read it already (a built-in, or a file whose
    # header was taken off); None reads the file named by `template`.
    template_text: str | None = None
    validate: bool = False
    kube_version: str | None = None  # None: the newest schema kubernetes-validate has
    # Reading nodes from a cluster, and which of them may take a task.
    kubeconfig: str | None = None
    context: str | None = None
    selector: str | None = None
    gpus: int = 0
    address: str = "name"
    explain: bool = False


def check_options(options: Options) -> None:
    if options.num == 0 or options.num < -1:
        raise UsageError(f"-N must be a positive number of hosts, or -1 for all; got {options.num}")
    if options.psn < 0:
        raise UsageError(f"--psn must be 0 or more; got {options.psn}")
    if not 1 <= options.port <= 65535:
        raise UsageError(f"--port must be between 1 and 65535; got {options.port}")
    if options.nodes is not None and options.nodes_file is not None:
        raise UsageError("give --nodes or --nodes-file, not both")
    if options.network not in ("host", "pod"):
        raise UsageError(f"--network must be host or pod; got {options.network!r}")
    if options.tasks_per_host < 1:
        raise UsageError(f"--tasks-per-host must be at least 1; got {options.tasks_per_host}")
    if options.port + options.tasks_per_host - 1 > 65535:
        raise UsageError(
            f"--port {options.port} with {options.tasks_per_host} tasks per host goes past port 65535"
        )
    for what, value in (
        ("--namespace", options.namespace),
        ("--cluster-domain", options.cluster_domain),
    ):
        if value is not None and not node_sources.is_node_name(value):
            raise UsageError(f"{what} {value!r} is not a valid DNS name")
    if options.namespace is not None and (len(options.namespace) > 63 or "." in options.namespace):
        raise UsageError(
            f"--namespace {options.namespace!r} is not a valid namespace (a DNS label)"
        )
    given = options.nodes is not None or options.nodes_file is not None
    if given and (options.kubeconfig is not None or options.context is not None):
        flag = "--kubeconfig" if options.kubeconfig is not None else "--context"
        raise UsageError(
            f"{flag} reads nodes from a cluster; it cannot go with --nodes or --nodes-file"
        )
    if options.gpus < 0:
        raise UsageError(f"--gpus must be 0 or more; got {options.gpus}")
    if options.address not in node_sources.ADDRESS_CHOICES:
        raise UsageError(f"--address must be one of {', '.join(node_sources.ADDRESS_CHOICES)}")
    if options.selector is not None:
        parse_selector(options.selector)  # a bad selector is a usage error before any network
    if options.name == "":
        raise UsageError("--name must not be empty")
    if options.name is not None and not is_label_value(options.name):
        # The name is the simpletfjob/job label, so it follows the rule for label values.
        raise UsageError(f"--name {options.name!r} is not a valid label value ({LABEL_VALUE_RULE})")
