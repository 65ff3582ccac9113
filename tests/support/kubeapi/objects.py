"""Objects as a kube-apiserver returns them: nodes, pods, Jobs, Services, their statuses, and
a large realistic cluster for the benchmark.

The builders return plain dicts (no `kind`/`apiVersion`, as list items carry none). A
pod's status is what a kubelet reports (`pod_status`), so tests that play the kubelet on
the real control plane patch the same shapes through pods/status.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from tests.support.kubeapi.defaults import default_job, default_pod, default_service, qos_class
from tests.support.kubeapi.patches import fields_v1, leaves
from tests.support.kubeapi.selectors import field_values

STAMP = "2024-05-01T10:00:00Z"

CONTROL_PLANE_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
NOT_READY_NO_SCHEDULE = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
NOT_READY_NO_EXECUTE = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
UNREACHABLE_NO_EXECUTE = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}

_IMAGES = [
    "registry.k8s.io/kube-proxy",
    "registry.k8s.io/pause",
    "registry.k8s.io/coredns/coredns",
    "docker.io/calico/node",
    "docker.io/calico/cni",
    "quay.io/prometheus/node-exporter",
    "nvcr.io/nvidia/k8s-device-plugin",
    "nvcr.io/nvidia/tensorflow",
    "docker.io/tensorflow/tensorflow",
    "gcr.io/kubeflow-images-public/tf-operator",
    "docker.io/library/python",
    "docker.io/grafana/promtail",
    "registry.k8s.io/sig-storage/csi-node-driver-registrar",
    "docker.io/fluent/fluent-bit",
    "quay.io/jetstack/cert-manager-controller",
]


def _digest(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()


def make_node(
    name: str,
    *,
    ready: bool = True,
    cordoned: bool = False,
    control_plane: bool = False,
    just_admitted: bool = False,
    gpus: int = 0,
    gpu_taint: bool = False,
    taints: Sequence[Mapping[str, str]] = (),
    labels: Mapping[str, str] | None = None,
    internal_ip: str | None = None,
    hostname: str | None = None,
    images: int = 36,
    seed: int = 0,
) -> dict[str, Any]:
    """A v1 Node as a kube-apiserver returns it, with the long `images` list real nodes carry.

    `just_admitted` models a node whose admission added `node.kubernetes.io/not-ready:NoSchedule`
    and whose Ready condition is still Unknown; `ready=False` models a node that went down
    (the node lifecycle controller's NoExecute taints); `cordoned` is `kubectl cordon`.
    """
    rng = random.Random(f"{name}/{seed}")
    host = hostname if hostname is not None else name.split(".")[0]
    ip = internal_ip or f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
    node_labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": host,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "p3.8xlarge" if gpus else "m5.4xlarge",
        "topology.kubernetes.io/region": "eu-west-1",
        "topology.kubernetes.io/zone": f"eu-west-1{'abc'[rng.randrange(3)]}",
    }
    if control_plane:
        node_labels["node-role.kubernetes.io/control-plane"] = ""
    if gpus:
        node_labels["nvidia.com/gpu.present"] = "true"
        node_labels["nvidia.com/gpu.product"] = "Tesla-V100-SXM2-16GB"
    node_labels.update(labels or {})

    node_taints: list[Mapping[str, str]] = []
    if control_plane:
        node_taints.append(CONTROL_PLANE_TAINT)
    if gpu_taint:
        node_taints.append(GPU_TAINT)
    if just_admitted:
        node_taints.append(NOT_READY_NO_SCHEDULE)
    elif not ready:
        node_taints += [UNREACHABLE_NO_EXECUTE, NOT_READY_NO_EXECUTE]
    if cordoned:
        node_taints.append(UNSCHEDULABLE_TAINT)
    node_taints += list(taints)
    stamped = [
        {**t, "timeAdded": "2024-05-01T10:00:00Z"} if t["effect"] == "NoExecute" else dict(t)
        for t in node_taints
    ]

    stamp = "2024-05-01T10:00:00Z"
    ready_status = "Unknown" if just_admitted or not ready else "True"

    def condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
        return {
            "type": kind,
            "status": status,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": "2024-04-01T08:00:00Z",
            "reason": reason,
            "message": message,
        }

    conditions = [
        condition(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        condition(
            "DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"
        ),
        condition(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        condition(
            "Ready",
            ready_status,
            "KubeletReady" if ready_status == "True" else "NodeStatusUnknown",
            "kubelet is posting ready status"
            if ready_status == "True"
            else "Kubelet stopped posting node status.",
        ),
    ]
    capacity = {
        "cpu": "32",
        "ephemeral-storage": "203070420Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": "251698004Ki",
        "pods": "110",
    }
    allocatable = {**capacity, "cpu": "31850m", "memory": "248735060Ki"}
    if gpus:
        capacity["nvidia.com/gpu"] = allocatable["nvidia.com/gpu"] = str(gpus)
    image_list = []
    for k in range(images):
        repo = _IMAGES[k % len(_IMAGES)]
        tag = f"v1.{(k * 7 + seed) % 30}.{k % 10}"
        image_list.append(
            {
                "names": [f"{repo}@sha256:{_digest(repo, tag, name)}", f"{repo}:{tag}"],
                "sizeBytes": 10_000_000 + rng.randrange(900_000_000),
            }
        )
    spec: dict[str, Any] = {
        "podCIDR": f"{ip.rsplit('.', 1)[0]}.0/24",
        "providerID": f"aws:///eu-west-1a/i-{_digest(name)[:17]}",
    }
    if cordoned:
        spec["unschedulable"] = True
    if stamped:
        spec["taints"] = stamped
    return {
        "metadata": {
            "name": name,
            "uid": _digest("uid", name)[:8]
            + "-"
            + _digest("uid", name)[8:12]
            + "-4f00-8000-"
            + _digest(name)[:12],
            "resourceVersion": str(1000 + rng.randrange(100000)),
            "creationTimestamp": "2024-04-01T08:00:00Z",
            "labels": node_labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "csi.volume.kubernetes.io/nodeid": json.dumps(
                    {"ebs.csi.aws.com": f"i-{_digest(name)[:17]}"}
                ),
            },
            "managedFields": [
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": stamp,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": {"f:conditions": {}, "f:images": {}}},
                    "subresource": "status",
                }
            ],
        },
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": host},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": _digest("machine", name)[:32],
                "systemUUID": _digest("system", name)[:32],
                "bootID": _digest("boot", name)[:32],
                "kernelVersion": "5.15.0-1051-aws",
                "osImage": "Ubuntu 22.04.4 LTS",
                "containerRuntimeVersion": "containerd://1.7.12",
                "kubeletVersion": "v1.29.3",
                "kubeProxyVersion": "v1.29.3",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": image_list,
        },
    }


def realistic_cluster(
    count: int, name: Callable[[int], str] = lambda i: f"node-{i:05d}"
) -> list[dict[str, Any]]:
    """`count` nodes as a large cluster has them: control plane, GPU pools, some down, cordoned or new."""
    nodes = []
    for i in range(count):
        kind = i % 50
        nodes.append(
            make_node(
                name(i),
                control_plane=i < 3,
                ready=kind != 7,
                cordoned=kind == 11,
                just_admitted=kind == 23,
                gpus=8 if i % 4 == 1 else 0,
                gpu_taint=i % 4 == 1,
                seed=i,
            )
        )
    return nodes


def cloud_name(i: int) -> str:
    """As a cloud provider names nodes (about 40 characters)."""
    return f"ip-10-{i // 250}-{i % 250}-{i % 7}.eu-west-1.compute.internal"


def short_name(i: int) -> str:
    return f"h{i}"


def uid_for(*parts: object) -> str:
    """A stable UUID-shaped uid, so that generated objects are the same on every run."""
    d = _digest("uid", *parts)
    return f"{d[:8]}-{d[8:12]}-4{d[13:16]}-8{d[17:20]}-{d[20:32]}"


def _ip(*parts: object) -> str:
    d = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return f"10.{d[0]}.{d[1]}.{1 + d[2] % 254}"


def node_ip(node: Mapping[str, Any]) -> str:
    for address in node.get("status", {}).get("addresses", []):
        if address.get("type") == "InternalIP":
            return str(address["address"])
    return _ip(node["metadata"]["name"])


# -- pods --------------------------------------------------------------------------------------


def container(
    name: str,
    image: str = "docker.io/tensorflow/tensorflow:2.15.0",
    *,
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    ports: Sequence[int] = (),
    host_ports: Sequence[int] = (),
    restart_policy: str | None = None,
    command: Sequence[str] = (),
) -> dict[str, Any]:
    """A container as a pod spec holds it; `host_ports` pair with `ports` (or stand alone)."""
    spec: dict[str, Any] = {"name": name, "image": image}
    if command:
        spec["command"] = list(command)
    port_list = []
    for n, port in enumerate(ports or host_ports):
        entry: dict[str, Any] = {"containerPort": port}
        if n < len(host_ports):
            entry["hostPort"] = host_ports[n]
        port_list.append(entry)
    if port_list:
        spec["ports"] = port_list
    resources: dict[str, Any] = {}
    if limits:
        resources["limits"] = dict(limits)
    if requests:
        resources["requests"] = dict(requests)
    spec["resources"] = resources
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return spec


def sidecar(
    name: str, image: str = "docker.io/istio/proxyv2:1.22.0", **kwargs: Any
) -> dict[str, Any]:
    """An init container with `restartPolicy: Always`: it starts before the next init
    containers and keeps running beside the main containers."""
    return container(name, image, restart_policy="Always", **kwargs)


def owner_reference(
    owner: Mapping[str, Any], kind: str = "Job", api_version: str = "batch/v1"
) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_status(
    pod: Mapping[str, Any],
    phase: str = "Running",
    *,
    exit_code: int | None = None,
    reason: str | None = None,
    message: str | None = None,
    restarts: int = 0,
    waiting: str | None = None,
    host_ip: str | None = None,
    pod_ip: str | None = None,
    started: str = STAMP,
    finished: str = STAMP,
) -> dict[str, Any]:
    """The status a kubelet reports for `pod` in `phase`: conditions, container states, IPs.

    Succeeded: every container terminated with exit code 0 (`Completed`). Failed: the first
    container terminated with `exit_code` (default 1) and `reason` (default `Error`; give
    `OOMKilled` with 137). Pending with `waiting` (`ImagePullBackOff`, `ContainerCreating`):
    containers waiting for that reason. `restarts` puts an earlier failure in `lastState`.
    """
    spec = pod.get("spec") or {}
    node = spec.get("nodeName")
    status: dict[str, Any] = {"phase": phase}
    if not node:
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": None,
                "lastTransitionTime": started,
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
            }
        ]
        status["qosClass"] = qos_class(spec)
        return status
    running = phase == "Running" and not waiting
    ready = "True" if running else "False"
    not_ready_reason = {"Succeeded": "PodCompleted", "Failed": "PodFailed"}.get(
        phase, "ContainersNotReady"
    )

    def condition(kind: str, value: str) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "type": kind,
            "status": value,
            "lastProbeTime": None,
            "lastTransitionTime": started,
        }
        if value == "False":
            entry["reason"] = not_ready_reason
            if not_ready_reason == "ContainersNotReady":
                names = ", ".join(c["name"] for c in spec.get("containers") or [])
                entry["message"] = f"containers with unready status: [{names}]"
        return entry

    status["conditions"] = [
        condition("Initialized", "True"),
        condition("Ready", ready),
        condition("ContainersReady", ready),
        condition("PodScheduled", "True"),
    ]
    if message:
        status["message"] = message
    if reason and phase in ("Failed", "Unknown"):
        status["reason"] = reason
    status["hostIP"] = host_ip or _ip(node)
    if phase != "Pending" or not waiting:
        ip = pod_ip or _ip(pod["metadata"].get("namespace"), pod["metadata"]["name"])
        status["podIP"] = status["hostIP"] if spec.get("hostNetwork") else ip
        status["podIPs"] = [{"ip": status["podIP"]}]
    status["startTime"] = started

    def state_of(c: Mapping[str, Any], index: int) -> dict[str, Any]:
        digest = _digest(pod["metadata"]["name"], c["name"])
        cid = f"containerd://{digest}"
        if phase == "Succeeded" or (phase == "Failed" and index > 0):
            term = {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": started,
                "finishedAt": finished,
                "containerID": cid,
            }
            return {"terminated": term}
        if phase == "Failed":
            code = 1 if exit_code is None else exit_code
            term = {
                "exitCode": code,
                "reason": reason or ("OOMKilled" if code == 137 else "Error"),
                "startedAt": started,
                "finishedAt": finished,
                "containerID": cid,
            }
            return {"terminated": term}
        if waiting or phase == "Pending":
            wait: dict[str, Any] = {"reason": waiting or "ContainerCreating"}
            if waiting == "ImagePullBackOff":
                wait["message"] = f'Back-off pulling image "{c.get("image")}"'
            return {"waiting": wait}
        return {"running": {"startedAt": started}}

    def statuses(containers: Sequence[Mapping[str, Any]], init: bool) -> list[dict[str, Any]]:
        out = []
        for n, c in enumerate(containers):
            if init and c.get("restartPolicy") != "Always":
                state = {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": started,
                        "finishedAt": started,
                        "containerID": f"containerd://{_digest('init', pod['metadata']['name'], c['name'])}",
                    }
                }
            elif init:  # a sidecar runs until the pod ends
                state = (
                    state_of(c, 1)
                    if phase in ("Succeeded", "Failed")
                    else {"running": {"startedAt": started}}
                )
            else:
                state = state_of(c, n)
            entry: dict[str, Any] = {
                "name": c["name"],
                "state": state,
                "lastState": {},
                "ready": "running" in state and (ready == "True" or init),
                "restartCount": restarts if not init and n == 0 else 0,
                "image": c.get("image", ""),
                "imageID": f"{str(c.get('image', '')).split(':')[0]}@sha256:{_digest('image', c.get('image'))}",
            }
            if "waiting" not in state:
                entry["containerID"] = state[next(iter(state))].get(
                    "containerID", f"containerd://{_digest(pod['metadata']['name'], c['name'])}"
                )
            entry["started"] = "running" in state
            if restarts and not init and n == 0:
                entry["lastState"] = {
                    "terminated": {
                        "exitCode": 1,
                        "reason": "Error",
                        "startedAt": started,
                        "finishedAt": started,
                        "containerID": f"containerd://{_digest('previous', pod['metadata']['name'])}",
                    }
                }
            out.append(entry)
        return out

    if spec.get("initContainers"):
        status["initContainerStatuses"] = statuses(spec["initContainers"], True)
    status["containerStatuses"] = statuses(spec.get("containers") or [], False)
    status["qosClass"] = qos_class(spec)
    return status


def _managed(
    obj: Mapping[str, Any], manager: str, *, subresource: str | None = None, api_version: str = "v1"
) -> dict[str, Any]:
    paths = set(leaves(obj, status=subresource == "status"))
    if subresource == "status":
        paths = {p for p in paths if p[0] == "f:status"}
    entry: dict[str, Any] = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": api_version,
        "time": STAMP,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields_v1(paths, apply=False),
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def make_pod(
    name: str,
    namespace: str = "default",
    *,
    node: str | None = None,
    phase: str = "Running",
    labels: Mapping[str, str] | None = None,
    containers: Sequence[Mapping[str, Any]] | None = None,
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    init_containers: Sequence[Mapping[str, Any]] = (),
    overhead: Mapping[str, str] | None = None,
    runtime_class: str | None = None,
    host_network: bool = False,
    host_ports: Sequence[int] = (),
    owner: Mapping[str, Any] | None = None,
    restart_policy: str | None = None,
    host_ip: str | None = None,
    **status: Any,
) -> dict[str, Any]:
    """A v1 Pod as the API server returns it: defaulted spec, managedFields and a kubelet's status.

    Without `containers`, one container `main` gets `requests`, `limits` and `host_ports`.
    `init_containers` may hold sidecars (`sidecar(...)`). Without `node`, the pod is
    unscheduled and Pending. The remaining keywords go to `pod_status` (exit_code,
    reason, restarts, waiting, ...).
    """
    if containers is None:
        containers = [container("main", requests=requests, limits=limits, host_ports=host_ports)]
    spec: dict[str, Any] = {
        "containers": [copy.deepcopy(dict(c)) for c in containers],
    }
    if init_containers:
        spec["initContainers"] = [copy.deepcopy(dict(c)) for c in init_containers]
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    if host_network:
        spec["hostNetwork"] = True
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    if overhead:
        spec["overhead"] = dict(overhead)
    if node:
        spec["nodeName"] = node
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner is not None:
        metadata["generateName"] = owner["metadata"]["name"] + "-"
    metadata["uid"] = uid_for("pod", namespace, name)
    metadata["resourceVersion"] = "1"
    metadata["creationTimestamp"] = STAMP
    metadata["labels"] = dict(labels or {})
    if owner is not None:
        metadata["labels"].setdefault("controller-uid", owner["metadata"]["uid"])
        metadata["labels"].setdefault("job-name", owner["metadata"]["name"])
        metadata["ownerReferences"] = [owner_reference(owner)]
    if not metadata["labels"]:
        del metadata["labels"]
    pod: dict[str, Any] = {"metadata": metadata, "spec": spec}
    default_pod(pod)
    if not node:
        phase = "Pending"
    pod["status"] = pod_status(pod, phase, host_ip=host_ip, **status)
    managers = [
        _managed(
            {"metadata": metadata, "spec": spec},
            "kube-controller-manager" if owner else "kubectl-create",
        )
    ]
    if node:
        managers.append(_managed(pod, "kubelet", subresource="status"))
    metadata["managedFields"] = managers
    return pod


# -- Jobs and Services -------------------------------------------------------------------------


def job_status(
    *,
    active: int = 0,
    succeeded: int = 0,
    failed: int = 0,
    complete: bool = False,
    failed_reason: str | None = None,
    start: str = STAMP,
    finish: str = STAMP,
) -> dict[str, Any]:
    """A Job's status as the Job controller writes it; `failed_reason` adds a Failed condition."""
    status: dict[str, Any] = {}
    conditions = []
    if complete:
        conditions.append(
            {
                "type": "Complete",
                "status": "True",
                "lastProbeTime": finish,
                "lastTransitionTime": finish,
            }
        )
    if failed_reason:
        messages = {
            "BackoffLimitExceeded": "Job has reached the specified backoff limit",
            "DeadlineExceeded": "Job was active longer than specified deadline",
        }
        conditions.append(
            {
                "type": "Failed",
                "status": "True",
                "lastProbeTime": finish,
                "lastTransitionTime": finish,
                "reason": failed_reason,
                "message": messages.get(failed_reason, failed_reason),
            }
        )
    if conditions:
        status["conditions"] = conditions
    status["startTime"] = start
    if complete:
        status["completionTime"] = finish
    for key, value in (("active", active), ("succeeded", succeeded), ("failed", failed)):
        if value:
            status[key] = value
    return status


def make_job(
    name: str,
    namespace: str = "default",
    *,
    template: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    completions: int | None = None,
    parallelism: int | None = None,
    backoff_limit: int | None = None,
    status: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A batch/v1 Job as the API server returns it; `template` is a pod template (metadata, spec)."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid_for("job", namespace, name),
        "resourceVersion": "1",
        "creationTimestamp": STAMP,
    }
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    spec: dict[str, Any] = {}
    if completions is not None:
        spec["completions"] = completions
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if backoff_limit is not None:
        spec["backoffLimit"] = backoff_limit
    spec["template"] = (
        copy.deepcopy(dict(template))
        if template
        else {
            "spec": {
                "restartPolicy": "Never",
                "containers": [container("tensorflow")],
            }
        }
    )
    job: dict[str, Any] = {"metadata": metadata, "spec": spec}
    default_job(job)
    metadata["generation"] = 1
    metadata["managedFields"] = [_managed(job, "simpletfjob", api_version="batch/v1")]
    job["status"] = (
        dict(status) if status is not None else job_status(active=spec.get("parallelism", 1))
    )
    return job


def make_service(
    name: str,
    namespace: str = "default",
    *,
    selector: Mapping[str, str] | None = None,
    ports: Sequence[int] = (2222,),
    headless: bool = True,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid_for("service", namespace, name),
        "resourceVersion": "1",
        "creationTimestamp": STAMP,
    }
    if labels:
        metadata["labels"] = dict(labels)
    spec: dict[str, Any] = {"ports": [{"name": f"port-{p}", "port": p} for p in ports]}
    if selector:
        spec["selector"] = dict(selector)
    if headless:
        spec["clusterIP"] = "None"
    service: dict[str, Any] = {"metadata": metadata, "spec": spec}
    default_service(service)
    service["status"] = {"loadBalancer": {}}
    return service


# -- a large realistic cluster, fast ---------------------------------------------------------


class Encoded(NamedTuple):
    """One object ready to store: its compact JSON, and what selectors look at."""

    namespace: str
    name: str
    body: bytes
    labels: dict[str, str]
    fields: dict[str, str]
    owners: tuple[str, ...]


def _archetypes() -> list[tuple[str, Callable[[str, str | None], dict[str, Any]]]]:
    """(name prefix, builder) for the kinds of pods a busy shared cluster runs."""

    def web(name: str, node: str | None) -> dict[str, Any]:
        return make_pod(
            name,
            "@NS@",
            node=node,
            labels={"app": "storefront", "pod-template-hash": "7d9f8b6c5"},
            containers=[
                container(
                    "web",
                    "registry.example/shop/storefront:3.14.1",
                    requests={"cpu": "250m", "memory": "256Mi"},
                    limits={"memory": "512Mi"},
                    ports=[8080],
                )
            ],
            init_containers=[sidecar("istio-proxy", requests={"cpu": "100m", "memory": "128Mi"})],
        )

    def api(name: str, node: str | None) -> dict[str, Any]:
        return make_pod(
            name,
            "@NS@",
            node=node,
            labels={"app": "orders-api", "pod-template-hash": "5c8d7f9b4"},
            containers=[
                container(
                    "api",
                    "registry.example/shop/orders:1.2.0",
                    requests={"cpu": "500m", "memory": "1Gi"},
                    limits={"cpu": "1", "memory": "1Gi"},
                    ports=[9000],
                )
            ],
            init_containers=[
                container("migrate", "registry.example/shop/orders:1.2.0", requests={"cpu": "1"})
            ],
        )

    def finished(name: str, node: str | None) -> dict[str, Any]:
        return make_pod(
            name,
            "@NS@",
            node=node,
            phase="Succeeded",
            labels={"job-name": "nightly-report"},
            restart_policy="Never",
            requests={"cpu": "2", "memory": "4Gi"},
        )

    def crashed(name: str, node: str | None) -> dict[str, Any]:
        return make_pod(
            name,
            "@NS@",
            node=node,
            phase="Failed",
            exit_code=137,
            labels={"job-name": "etl"},
            restart_policy="Never",
            requests={"cpu": "1", "memory": "2Gi"},
        )

    def unscheduled(name: str, node: str | None) -> dict[str, Any]:
        return make_pod(name, "@NS@", labels={"app": "batch"}, requests={"cpu": "64"})

    def starting(name: str, node: str | None) -> dict[str, Any]:
        return make_pod(
            name,
            "@NS@",
            node=node,
            phase="Pending",
            waiting="ContainerCreating",
            requests={"cpu": "1"},
        )

    def kata(name: str, node: str | None) -> dict[str, Any]:
        return make_pod(
            name,
            "@NS@",
            node=node,
            runtime_class="kata",
            overhead={"cpu": "250m", "memory": "160Mi"},
            requests={"cpu": "1", "memory": "1Gi"},
            labels={"app": "sandboxed"},
        )

    def tf_worker(name: str, node: str | None) -> dict[str, Any]:
        return make_pod(
            name,
            "@NS@",
            node=node,
            host_network=True,
            labels={"simpletfjob/job": "other-run", "simpletfjob/type": "worker"},
            containers=[
                container("tensorflow", requests={"cpu": "4", "memory": "8Gi"}, ports=[2222])
            ],
            restart_policy="Never",
        )

    def lost(name: str, node: str | None) -> dict[str, Any]:
        return make_pod(
            name, "@NS@", node=node, phase="Unknown", reason="NodeLost", requests={"cpu": "500m"}
        )

    return [
        ("storefront-7d9f8b6c5-", web),
        ("storefront-7d9f8b6c5-", web),
        ("storefront-7d9f8b6c5-", web),
        ("orders-api-5c8d7f9b4-", api),
        ("orders-api-5c8d7f9b4-", api),
        ("orders-api-5c8d7f9b4-", api),
        ("nightly-report-", finished),
        ("nightly-report-", finished),
        ("etl-", crashed),
        ("batch-", unscheduled),
        ("batch-", starting),
        ("sandboxed-", kata),
        ("other-run-worker-", tf_worker),
        ("lost-", lost),
    ]


def _gpu_training(name: str, node: str | None, gpus: int) -> dict[str, Any]:
    return make_pod(
        name,
        "@NS@",
        node=node,
        labels={"app": "llm-finetune"},
        containers=[
            container(
                "trainer",
                "nvcr.io/nvidia/pytorch:24.05-py3",
                requests={"cpu": "16", "memory": "128Gi"},
                limits={"nvidia.com/gpu": str(gpus), "memory": "128Gi"},
            )
        ],
        init_containers=[
            container(
                "fetch-data",
                "docker.io/amazon/aws-cli:2.15.0",
                requests={"cpu": "4", "memory": "16Gi"},
            )
        ],
        restart_policy="Never",
    )


def _daemon(name: str, node: str | None, app: str) -> dict[str, Any]:
    if app == "node-exporter":
        return make_pod(
            name,
            "@NS@",
            node=node,
            host_network=True,
            labels={
                "app.kubernetes.io/name": "node-exporter",
                "controller-revision-hash": "6b8c9d7f5",
            },
            containers=[
                container(
                    "node-exporter",
                    "quay.io/prometheus/node-exporter:v1.8.1",
                    requests={"cpu": "100m", "memory": "180Mi"},
                    limits={"memory": "180Mi"},
                    ports=[9100],
                )
            ],
        )
    return make_pod(
        name,
        "@NS@",
        node=node,
        host_network=True,
        labels={"k8s-app": "kube-proxy", "controller-revision-hash": "7f9c8b6d4"},
        containers=[
            container("kube-proxy", "registry.k8s.io/kube-proxy:v1.29.3", requests={"cpu": "100m"})
        ],
    )


_PLACEHOLDER = re.compile("(@NAME@|@NS@|@UID@|@NODE@|@HOSTIP@|@PODIP@)")


class _Shape:
    """A pod encoded once with placeholders, then stamped out by joining its pieces."""

    def __init__(self, pod: dict[str, Any]) -> None:
        pieces = _PLACEHOLDER.split(json.dumps(pod, separators=(",", ":")))
        self.pieces = [p.encode() for p in pieces]
        self.slots = [(i, p) for i, p in enumerate(pieces) if i % 2]  # (index, placeholder)
        self.labels = pod["metadata"].get("labels", {})
        self.fields = field_values("pods", pod)
        self.marked = {k: v for k, v in self.fields.items() if "@" in v}

    def stamp(self, namespace: str, name: str, node: str | None, host_ip: str) -> Encoded:
        values = {
            "@NAME@": name,
            "@NS@": namespace,
            "@UID@": uid_for("pod", namespace, name),
            "@NODE@": node or "",
            "@HOSTIP@": host_ip,
            "@PODIP@": _ip(namespace, name),
        }
        pieces = self.pieces.copy()
        for index, placeholder in self.slots:
            pieces[index] = values[placeholder].encode()
        fields = dict(self.fields)
        for label, value in self.marked.items():
            fields[label] = _PLACEHOLDER.sub(lambda m: values[m[0]], value)
        return Encoded(namespace, name, b"".join(pieces), dict(self.labels), fields, ())


def _shape(build: Callable[..., dict[str, Any]], scheduled: bool, *args: Any) -> _Shape:
    pod = build("@NAME@", "@NODE@" if scheduled else None, *args)
    pod["metadata"]["uid"] = "@UID@"
    status = pod.get("status", {})
    if "hostIP" in status:
        status["hostIP"] = "@HOSTIP@"
        status["podIP"] = "@HOSTIP@" if pod["spec"].get("hostNetwork") else "@PODIP@"
        status["podIPs"] = [{"ip": status["podIP"]}]
    return _Shape(pod)


def realistic_pods(
    nodes: Sequence[Mapping[str, Any]], count: int, seed: int = 0
) -> Iterator[Encoded]:
    """`count` pods over `nodes` as a busy shared cluster has them, encoded without building dicts.

    Every node runs node-exporter (hostNetwork, host port 9100) and kube-proxy while pods
    last; the rest are web and API pods with sidecars and init containers, finished and
    failed Job pods, unscheduled and starting pods, sandboxed pods with overhead, other
    runs' hostNetwork TensorFlow workers on port 2222, and GPU training pods that fill a
    quarter of the GPU nodes (so most GPUs are free).
    """
    rng = random.Random(seed)
    names = [n["metadata"]["name"] for n in nodes]
    ips = {n["metadata"]["name"]: node_ip(n) for n in nodes}
    gpu_nodes = [
        n["metadata"]["name"]
        for n in nodes
        if int(n.get("status", {}).get("allocatable", {}).get("nvidia.com/gpu", "0")) > 0
    ]
    cpu_nodes = [name for name in names if name not in set(gpu_nodes)] or names
    daemons = [_shape(_daemon, True, app) for app in ("node-exporter", "kube-proxy")]
    kinds = [
        (prefix, _shape(build, build.__name__ != "unscheduled")) for prefix, build in _archetypes()
    ]
    training = _shape(_gpu_training, True, 8)
    made = 0
    taken: set[tuple[str, str]] = set()

    def unique(namespace: str, prefix: str) -> str:
        name = prefix + _suffix(rng)
        while (namespace, name) in taken:
            name = prefix + _suffix(rng)
        taken.add((namespace, name))
        return name

    for daemon, namespace, prefix in zip(
        daemons, ("monitoring", "kube-system"), ("node-exporter-", "kube-proxy-"), strict=True
    ):
        for name in names:
            if made == count:
                return
            yield daemon.stamp(namespace, unique(namespace, prefix), name, ips[name])
            made += 1
    busy_gpu = gpu_nodes[: max(1, len(gpu_nodes) // 4)] if gpu_nodes else []
    for gpu_node in busy_gpu:
        if made == count:
            return
        yield training.stamp(
            "research", unique("research", "llm-finetune-"), gpu_node, ips[gpu_node]
        )
        made += 1
    i = 0
    while made < count:
        prefix, shape = kinds[i % len(kinds)]
        node = cpu_nodes[(i * 7) % len(cpu_nodes)]
        namespace = f"team-{i % 40:02d}"
        yield shape.stamp(namespace, unique(namespace, prefix), node, ips[node])
        made += 1
        i += 1


def _suffix(rng: random.Random) -> str:
    return "".join(rng.choices("bcdfghjklmnpqrstvwxz2456789", k=5))
