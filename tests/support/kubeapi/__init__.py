"""A loopback Kubernetes API server for tests and the benchmark, and objects as a real one
returns them.

It models what clients of kube-apiserver v1.20 can observe: resources.py (the served
resources and Status errors), store.py (storage, lists, watches, deletion and garbage
collection), admission.py and defaults.py (what the server fills in and refuses),
patches.py (patch types and server-side apply), selectors.py, rbac.py, api.py (routing,
authentication, faults, the Python API), serving.py (HTTP). Only the standard library
is needed (trustme for TLS, pyyaml for a YAML apply body); the benchmark imports it, so
it must not import pytest.

    with serve(KubeAPI()) as api:
        token = api.add_admin()
        api.load("pods", [make_pod("p", "ml", node="n1")])
        write_kubeconfig(path, api.url, token=token)
"""

from tests.support.kubeapi.api import VERSION, Answer, Faults, KubeAPI, Request
from tests.support.kubeapi.objects import (
    CONTROL_PLANE_TAINT,
    GPU_TAINT,
    NOT_READY_NO_EXECUTE,
    NOT_READY_NO_SCHEDULE,
    UNREACHABLE_NO_EXECUTE,
    UNSCHEDULABLE_TAINT,
    Encoded,
    cloud_name,
    container,
    job_status,
    make_job,
    make_node,
    make_pod,
    make_service,
    node_ip,
    owner_reference,
    pod_status,
    realistic_cluster,
    realistic_pods,
    short_name,
    sidecar,
    uid_for,
)
from tests.support.kubeapi.rbac import ANONYMOUS, Attributes, Rule, forbidden_message
from tests.support.kubeapi.resources import RESOURCES, ApiError, Resource, status_object
from tests.support.kubeapi.selectors import SelectorError, parse_label_selector
from tests.support.kubeapi.serving import closed_port, serve, write_kubeconfig
from tests.support.kubeapi.store import Store

__all__ = [
    "ANONYMOUS",
    "CONTROL_PLANE_TAINT",
    "GPU_TAINT",
    "NOT_READY_NO_EXECUTE",
    "NOT_READY_NO_SCHEDULE",
    "RESOURCES",
    "UNREACHABLE_NO_EXECUTE",
    "UNSCHEDULABLE_TAINT",
    "VERSION",
    "Answer",
    "ApiError",
    "Attributes",
    "Encoded",
    "Faults",
    "KubeAPI",
    "Request",
    "Resource",
    "Rule",
    "SelectorError",
    "Store",
    "closed_port",
    "cloud_name",
    "container",
    "forbidden_message",
    "job_status",
    "make_job",
    "make_node",
    "make_pod",
    "make_service",
    "node_ip",
    "owner_reference",
    "parse_label_selector",
    "pod_status",
    "realistic_cluster",
    "realistic_pods",
    "serve",
    "short_name",
    "sidecar",
    "status_object",
    "uid_for",
    "write_kubeconfig",
]
