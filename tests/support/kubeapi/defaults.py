"""What kube-apiserver fills in when it stores an object: defaults, admission, create-time resets.

Written after what a v1.20.2 server answers (the control plane in ../shared/kube), for
the resources the loopback server serves. Newer fields that v1.20 drops (a sidecar's
`restartPolicy: Always` on an init container) are kept, as a current server keeps them.
"""

from __future__ import annotations

import ipaddress
import random
import time
import uuid
from typing import Any

NOT_READY_TOLERATION = {
    "key": "node.kubernetes.io/not-ready",
    "operator": "Exists",
    "effect": "NoExecute",
    "tolerationSeconds": 300,
}
UNREACHABLE_TOLERATION = {
    "key": "node.kubernetes.io/unreachable",
    "operator": "Exists",
    "effect": "NoExecute",
    "tolerationSeconds": 300,
}


def timestamp(seconds: float | None = None) -> str:
    """RFC 3339 in UTC with whole seconds, as metav1.Time serializes."""
    return time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if seconds is None else seconds)
    )


def new_uid() -> str:
    return str(uuid.uuid4())


_NAME_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"  # utilrand's alphabet: no vowels, no look-alikes


def generated_name(prefix: str) -> str:
    return prefix + "".join(random.choice(_NAME_SUFFIX) for _ in range(5))


def default_container(container: dict[str, Any], *, host_network: bool) -> None:
    """SetDefaults_Container and its ports and resources, in place."""
    resources = container.setdefault("resources", {})
    limits = resources.get("limits") or {}
    if limits:  # a limit without a request: the request defaults to the limit
        requests = resources.setdefault("requests", {})
        for name, value in limits.items():
            requests.setdefault(name, value)
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")
        if host_network and "containerPort" in port:
            port.setdefault("hostPort", port["containerPort"])
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    if "imagePullPolicy" not in container:
        image = str(container.get("image", ""))
        tagged = ":" in image.rsplit("/", 1)[-1] or "@" in image
        latest = image.endswith(":latest") or not tagged
        container["imagePullPolicy"] = "Always" if latest else "IfNotPresent"


def default_pod_spec(spec: dict[str, Any]) -> None:
    """SetDefaults_PodSpec, as for a pod and for a Job's pod template."""
    host_network = bool(spec.get("hostNetwork"))
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(key) or []:
            default_container(container, host_network=host_network)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")


def default_pod(pod: dict[str, Any]) -> None:
    """A pod's defaults plus what admission adds (DefaultTolerationSeconds, Priority)."""
    spec = pod.setdefault("spec", {})
    default_pod_spec(spec)
    tolerations = spec.setdefault("tolerations", [])
    keys = {t.get("key") for t in tolerations if t.get("effect") in ("NoExecute", None, "")}
    for toleration in (NOT_READY_TOLERATION, UNREACHABLE_TOLERATION):
        if toleration["key"] not in keys:
            tolerations.append(dict(toleration))
    spec.setdefault("priority", 0)
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")


def qos_class(spec: dict[str, Any]) -> str:
    """qos.GetPodQOS: Guaranteed when every container's cpu and memory requests equal limits."""
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    guaranteed = True
    any_set = False
    for container in containers:
        resources = container.get("resources") or {}
        req = {k: v for k, v in (resources.get("requests") or {}).items() if k in ("cpu", "memory")}
        lim = {k: v for k, v in (resources.get("limits") or {}).items() if k in ("cpu", "memory")}
        any_set = any_set or bool(req) or bool(lim)
        if set(lim) != {"cpu", "memory"} or any(req.get(k, lim[k]) != lim[k] for k in lim):
            guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def pod_status_on_create(pod: dict[str, Any]) -> dict[str, Any]:
    return {"phase": "Pending", "qosClass": qos_class(pod.get("spec") or {})}


def default_job(job: dict[str, Any]) -> None:
    """SetDefaults_Job and the Job strategy's selector and template labels (batch/v1 in v1.20)."""
    uid = job["metadata"]["uid"]
    spec = job.setdefault("spec", {})
    if "completions" not in spec and "parallelism" not in spec:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    template = spec.setdefault("template", {})
    template_meta = template.setdefault("metadata", {})
    if not spec.get("manualSelector"):
        spec.setdefault("selector", {"matchLabels": {"controller-uid": uid}})
        labels = template_meta.setdefault("labels", {})
        labels.setdefault("controller-uid", uid)
        labels.setdefault("job-name", job["metadata"]["name"])
    template_meta.setdefault("creationTimestamp", None)
    default_pod_spec(template.setdefault("spec", {}))


_service_ips: set[str] = set()


def default_service(service: dict[str, Any]) -> None:
    """Service defaults and a cluster IP from 10.0.0.0/24, as the control plane's range."""
    spec = service.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))
    if "clusterIP" not in spec or spec["clusterIP"] == "":
        network = ipaddress.ip_network("10.0.0.0/24")
        for _ in range(1000):
            candidate = str(network[random.randrange(2, network.num_addresses - 1)])
            if candidate not in _service_ips:
                break
        _service_ips.add(candidate)
        spec["clusterIP"] = candidate
    spec.setdefault("clusterIPs", [spec["clusterIP"]])


def default_namespace(namespace: dict[str, Any]) -> None:
    namespace.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    namespace["status"] = {"phase": "Active"}
