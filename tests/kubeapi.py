"""A loopback Kubernetes API server that serves `/api/v1/nodes`, for tests and the benchmark.

It models what a real kube-apiserver does for a node list: a `NodeList` whose
metadata carries `continue` and `remainingItemCount` when `limit` is given,
`labelSelector` filtering, bearer-token authentication (401) and RBAC (403),
and every error as a `Status` object. Faults can be injected: the first K
requests fail with 500, a continue token expires (410), 429 with Retry-After,
slow answers, connections dropped without an answer.

Only the standard library is needed (trustme for TLS, if asked). The benchmark
imports this module, so it must not import pytest.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

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


def status(code: int, reason: str, message: str, **extra: Any) -> dict[str, Any]:
    """An error as kube-apiserver writes it: a v1 Status object."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": extra.pop("metadata", {}),
        "status": "Failure",
        "message": message,
        "reason": reason,
        **({"details": extra.pop("details")} if "details" in extra else {}),
        "code": code,
    }


def forbidden_message(user: str) -> str:
    return (
        f'nodes is forbidden: User "{user}" cannot list resource "nodes" '
        'in API group "" at the cluster scope'
    )


@dataclass
class Faults:
    """What goes wrong, and how often; counters count down as faults are served."""

    fail_first: int = 0  # the first K /api/v1/nodes requests answer 500
    drop_first: int = 0  # the first K requests get their connection closed with no answer
    throttle_first: int = 0  # the first K requests answer 429 with Retry-After
    retry_after: int = 1
    expire_continue: int = 0  # the next K requests that carry `continue` answer 410
    delay: float = 0.0  # seconds to wait before answering each nodes request


@dataclass
class Request:
    path: str
    query: dict[str, str]
    authorization: str | None


@dataclass
class KubeAPI:
    """The server's state: nodes, who may do what, faults, and the requests it saw."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    tokens: dict[str, str] = field(default_factory=dict)  # bearer token -> user name
    can_list: set[str] = field(default_factory=set)  # users with RBAC to list nodes
    faults: Faults = field(default_factory=Faults)
    requests: list[Request] = field(default_factory=list)
    url: str = ""
    ca_file: Path | None = None
    _encoded: list[bytes] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def set_nodes(self, nodes: list[dict[str, Any]]) -> None:
        self.nodes = sorted(nodes, key=lambda n: n["metadata"]["name"])  # etcd's key order
        self._encoded = [json.dumps(n, separators=(",", ":")).encode() for n in self.nodes]

    def nodes_requests(self) -> list[Request]:
        return [r for r in self.requests if r.path == "/api/v1/nodes"]

    # -- the API -----------------------------------------------------------------------

    def answer(
        self, path: str, query: dict[str, str], authorization: str | None
    ) -> tuple[int, dict[str, str], bytes]:
        with self._lock:
            self.requests.append(Request(path, query, authorization))
        user = self._authenticate(authorization)
        if user is None:
            return _json(401, status(401, "Unauthorized", "Unauthorized"))
        if path == "/api":
            return _json(
                200,
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}
                    ],
                },
            )
        if path == "/apis":
            return _json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
        if path == "/api/v1":
            return _json(200, _RESOURCES)
        if path == "/version":
            return _json(
                200,
                {"major": "1", "minor": "29", "gitVersion": "v1.29.3", "platform": "linux/amd64"},
            )
        if path != "/api/v1/nodes":
            return _json(
                404,
                status(
                    404, "NotFound", "the server could not find the requested resource", details={}
                ),
            )
        if self.tokens and user not in self.can_list:
            return _json(
                403, status(403, "Forbidden", forbidden_message(user), details={"kind": "nodes"})
            )
        return self._list_nodes(query)

    def _authenticate(self, authorization: str | None) -> str | None:
        if not self.tokens:
            return "system:anonymous"
        if authorization is None or not authorization.lower().startswith("bearer "):
            return None
        return self.tokens.get(authorization.split(" ", 1)[1].strip())

    def _list_nodes(self, query: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        faults = self.faults
        with self._lock:
            if faults.fail_first > 0:
                faults.fail_first -= 1
                return _json(
                    500,
                    status(
                        500,
                        "InternalError",
                        "Internal error occurred: etcdserver: request timed out",
                        details={"causes": [{"message": "etcdserver: request timed out"}]},
                    ),
                )
            if faults.throttle_first > 0:
                faults.throttle_first -= 1
                code, headers, body = _json(
                    429,
                    status(
                        429,
                        "TooManyRequests",
                        "Too many requests, please try again later.",
                        details={"retryAfterSeconds": faults.retry_after},
                    ),
                )
                return code, {**headers, "Retry-After": str(faults.retry_after)}, body
            expire = "continue" in query and faults.expire_continue > 0
            if expire:
                faults.expire_continue -= 1
        if expire:
            return _json(
                410, status(410, "Expired", _EXPIRED, metadata={"continue": query["continue"]})
            )
        if faults.delay:
            time.sleep(faults.delay)
        try:
            selected = self._select(query.get("labelSelector", ""))
        except ValueError as e:
            return _json(400, status(400, "BadRequest", f"unable to parse requirement: {e}"))
        start = 0
        if "continue" in query:
            try:
                start = int(json.loads(base64.b64decode(query["continue"]))["start"])
            except (ValueError, KeyError, TypeError):
                return _json(
                    400, status(400, "BadRequest", "continue key is not valid: illegal base64 data")
                )
        limit = int(query.get("limit") or 0)
        end = len(selected) if limit <= 0 else min(len(selected), start + limit)
        metadata: dict[str, Any] = {"resourceVersion": "123456"}
        if end < len(selected):
            token = base64.b64encode(
                json.dumps({"v": "meta.k8s.io/v1", "rv": 123456, "start": end}).encode()
            ).decode()
            metadata["continue"] = token
            metadata["remainingItemCount"] = len(selected) - end
        head = json.dumps(
            {"kind": "NodeList", "apiVersion": "v1", "metadata": metadata}, separators=(",", ":")
        )  # compact, as Go's encoding/json writes it
        body = b"".join([head[:-1].encode(), b',"items":[', b",".join(selected[start:end]), b"]}"])
        return 200, {"Content-Type": "application/json"}, body

    def _select(self, selector: str) -> list[bytes]:
        if not selector:
            return self._encoded
        terms = parse_selector(selector)
        return [
            encoded
            for node, encoded in zip(self.nodes, self._encoded, strict=True)
            if all(term(node["metadata"].get("labels", {})) for term in terms)
        ]


def parse_selector(text: str) -> list[Callable[[Mapping[str, str]], bool]]:
    """The server's own reading of a label selector (k=v, k==v, k!=v, k, !k, k in (..), k notin (..))."""
    terms: list[Callable[[Mapping[str, str]], bool]] = []
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    for raw in (p.strip() for p in parts):
        if not raw:
            raise ValueError(f"found '', expected: identifier in {text!r}")
        if " in " in raw or " notin " in raw:
            op = " notin " if " notin " in raw else " in "
            key, _, rest = raw.partition(op)
            values = {v.strip() for v in rest.strip().strip("()").split(",")}
            terms.append(_term(key.strip(), op.strip(), values))
        elif "!=" in raw:
            key, _, value = raw.partition("!=")
            terms.append(_term(key.strip(), "notin", {value.strip()}))
        elif "=" in raw:
            key, _, value = raw.replace("==", "=").partition("=")
            terms.append(_term(key.strip(), "in", {value.strip()}))
        elif raw.startswith("!"):
            terms.append(_term(raw[1:].strip(), "absent", set()))
        else:
            terms.append(_term(raw, "present", set()))
    return terms


def _term(key: str, op: str, values: set[str]) -> Callable[[Mapping[str, str]], bool]:
    def matches(labels: Mapping[str, str]) -> bool:
        if op == "present":
            return key in labels
        if op == "absent":
            return key not in labels
        return (labels.get(key) in values) == (op == "in")

    return matches


_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token results "
    "in an inconsistent list - objects that were created, modified, or deleted between the time the "
    "first chunk was returned and now may show up in the list."
)

_RESOURCES = {
    "kind": "APIResourceList",
    "groupVersion": "v1",
    "resources": [
        {
            "name": "nodes",
            "singularName": "node",
            "namespaced": False,
            "kind": "Node",
            "verbs": [
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ],
            "shortNames": ["no"],
            "storageVersionHash": "XwShjMxG9Fs=",
        }
    ],
}


def _json(code: int, obj: Any) -> tuple[int, dict[str, str], bytes]:
    return code, {"Content-Type": "application/json"}, json.dumps(obj).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as kube-apiserver
    server: _Server

    def do_GET(self) -> None:
        api = self.server.api
        faults = api.faults
        url = urlsplit(self.path)
        if url.path == "/api/v1/nodes":
            with api._lock:
                drop = faults.drop_first > 0
                if drop:
                    faults.drop_first -= 1
            if drop:  # a reset: the client sees its connection closed with no answer
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                )
                self.close_connection = True
                return
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        code, headers, body = api.answer(url.path, query, self.headers.get("Authorization"))
        try:
            self.send_response(code)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    api: KubeAPI

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up mid-answer is expected in the fault tests


@contextmanager
def serve(api: KubeAPI, tls: Any = None) -> Iterator[KubeAPI]:
    """Run `api` on 127.0.0.1 in a thread; `tls` is a trustme.CA to serve https with its certificate."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.api = api
    scheme = "http"
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.issue_cert("127.0.0.1", "localhost").configure_cert(context)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    api.url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def closed_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_kubeconfig(
    path: Path,
    server: str,
    *,
    token: str | None = None,
    ca_file: Path | None = None,
    insecure: bool = False,
    context: str = "loopback",
    user: str = "tester",
    current: bool = True,
) -> Path:
    """A kubeconfig with one cluster, user and context, as `kubectl config` writes it."""
    cluster: dict[str, Any] = {"server": server}
    if ca_file is not None:
        cluster["certificate-authority"] = str(ca_file)
    if insecure:
        cluster["insecure-skip-tls-verify"] = True
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": f"{context}-cluster", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token} if token else {}}],
        "contexts": [{"name": context, "context": {"cluster": f"{context}-cluster", "user": user}}],
        "preferences": {},
    }
    if current:
        config["current-context"] = context
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2))  # JSON is YAML, and needs no yaml import here
    return path


def main(argv: Sequence[str] | None = None) -> None:
    """Serve a realistic cluster until stdin closes: `python -m tests.kubeapi --nodes 5000 --tls DIR`.

    Prints the server's URL on its first line of stdout; with --tls, also writes DIR/ca.crt.
    The benchmark runs the server as its own process so that the clients it measures start
    from a small parent (Linux counts a parent's memory at fork in a child's peak RSS).
    """
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m tests.kubeapi")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--token", help="require this bearer token (the user may list nodes)")
    parser.add_argument("--tls", metavar="DIR", help="serve https; write the CA to DIR/ca.crt")
    parser.add_argument("--names", choices=("cloud", "short"), default="cloud")
    args = parser.parse_args(argv)
    api = KubeAPI()
    if args.token:
        api.tokens = {args.token: "bench"}
        api.can_list = {"bench"}
    api.set_nodes(
        realistic_cluster(args.nodes, name=cloud_name if args.names == "cloud" else short_name)
    )
    api.nodes = [{"metadata": {"labels": n["metadata"].get("labels", {})}} for n in api.nodes]
    ca = None
    if args.tls:
        import trustme

        ca = trustme.CA()
        ca.cert_pem.write_to_path(str(Path(args.tls) / "ca.crt"))
    with serve(api, tls=ca):
        size = sum(map(len, api._encoded))
        print(api.url, size, flush=True)
        sys.stdin.read()  # until the parent closes our stdin or goes away


def cloud_name(i: int) -> str:
    """As a cloud provider names nodes (about 40 characters)."""
    return f"ip-10-{i // 250}-{i % 250}-{i % 7}.eu-west-1.compute.internal"


def short_name(i: int) -> str:
    return f"h{i}"


if __name__ == "__main__":
    main()
