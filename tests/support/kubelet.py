"""A kubelet stand-in for the real control plane: nodes that run their pods as local processes.

The control plane in ../shared/kube has no kubelet and no scheduler. `Kubelet` plays the
kubelet for one or more nodes of it, closely enough that `pods/log`, pod status and the Job
controller behave as on a cluster:

- **Nodes.** Each node is registered with a Ready condition, one InternalIP (a loopback
  address: several nodes share this machine, each on its own; tests take them from
  `tests.support.parallel.node_address`, which gives each xdist worker its own), its
  allocatable, and `status.daemonEndpoints.kubeletEndpoint.Port`; a heartbeat keeps Ready
  fresh. `lose(node)` stops the heartbeat and reports the node as the node lifecycle
  controller would once its grace has passed (Ready Unknown, the unreachable taints), and
  kills its processes, as a machine that went away.
- **Pods.** Every pod bound to one of its nodes (`spec.nodeName`) runs as a process group:
  the first container's `command` and `args`, with the pod's `env` values (plain values,
  and `fieldRef`s to the pod's name, namespace, node and IP), on the host's network. A
  command named `python` runs the test's interpreter (or the one given as `python`; its
  directory leads PATH, for torchrun). The status is what a kubelet reports:
  the phase, and `containerStatuses` with `running`, `waiting` or `terminated` (exit code and
  reason), `restartCount` and `lastState`. Other containers are reported as running and run
  nothing. With `restartPolicy: OnFailure` a container that fails is started again in place
  after a short back-off (`CrashLoopBackOff` meanwhile).
- **Admission.** A pod whose requests (cpu, memory, GPUs, or any extended resource) do not
  fit beside the pods already running on the node is refused as the kubelet refuses it:
  phase Failed, reason `OutOf<resource>`, and a Warning event.
- **Logs.** Each node serves the kubelet API's `/containerLogs/{namespace}/{pod}/{container}`
  over HTTPS with `follow`, `tailLines`, `sinceSeconds`, `sinceTime`, `timestamps` and
  `previous`, so the real API server's `pods/log` works: kube-apiserver v1.20 forwards it to
  the node's address and kubelet port, and checks no kubelet certificate unless told to.
  `cut_logs()` ends every stream being served at once, as a kubelet that restarts.
- **Deletes.** A pod being deleted gets SIGTERM on its process group, SIGKILL once its grace
  period has passed, and is then removed (a delete with grace 0 and the pod's uid).
- **The container's processes.** As a container's cgroup holds every process it starts,
  whatever session or parent each has by then (torchrun starts its workers in sessions of
  their own), each container's processes carry a mark in their environment
  (`CONTAINER_MARK`), and a SIGKILL (`kill`, a lost node, a grace period's end, `stop`)
  reaches every process that has it. The end of the first process alone leaves the others
  be (a real container's would end them): tests use one to write a log that comes late.
- **Events** for what it does: `Started`, `Killing`, `BackOff`, and admission refusals.

Pods are found by listing each node's pods every `sync` seconds, not by watching, so the
stand-in rides through an API server restart as a kubelet does.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import http.server
import itertools
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.client import ApiFailure, Client

GPU = "nvidia.com/gpu"
# In the environment of every process of a container (its children inherit it): which
# container it belongs to, so that a SIGKILL finds them all, as a cgroup holds them.
CONTAINER_MARK = "SIMPLETFJOB_TEST_CONTAINER"
BACKOFF = (0.5, 1.0, 2.0)  # seconds before each restart in place; the last one repeats
_events = itertools.count()


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def stamp(when: dt.datetime | None = None) -> str:
    """RFC 3339 to the second, as the API server stores times."""
    return (when or now()).strftime("%Y-%m-%dT%H:%M:%SZ")


def nano(when: dt.datetime) -> str:
    """RFC 3339 with nanoseconds, as the kubelet prefixes log lines with --timestamps."""
    return when.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


_QUANTITY = re.compile(r"^([0-9.]+)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")
_SCALE = {
    None: 1, "m": 0.001, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
}  # fmt: skip


def quantity(value: Any) -> float:
    """A Kubernetes quantity ('500m', '2Gi', 4) as a number."""
    match = _QUANTITY.match(str(value).strip())
    if match is None:
        raise ValueError(f"not a quantity: {value!r}")
    return float(match.group(1)) * _SCALE[match.group(2)]


def pod_requests(spec: Mapping[str, Any]) -> dict[str, float]:
    """What a pod asks for: its containers' requests (a limit stands for a missing request)."""
    total: dict[str, float] = {}
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, value in asked.items():
            total[name] = total.get(name, 0.0) + quantity(value)
    return total


@dataclass
class Node:
    """One node this kubelet plays: its name, loopback address and allocatable."""

    name: str
    address: str
    gpus: int = 0
    cpu: str = "8"
    memory: str = "32Gi"
    pods: int = 110
    labels: Mapping[str, str] = field(default_factory=dict)
    port: int = 0  # the kubelet API's port, chosen when the node starts
    beating: bool = True  # the heartbeat keeps Ready fresh

    @property
    def allocatable(self) -> dict[str, str]:
        values = {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": str(self.pods),
            "ephemeral-storage": "100Gi",
        }
        if self.gpus:
            values[GPU] = str(self.gpus)
        return values


@dataclass
class Instance:
    """One run of a container: its process, its log file, and how it ended."""

    process: subprocess.Popen[bytes]
    log: Path
    started: dt.datetime
    reader: threading.Thread
    mark: str = ""  # CONTAINER_MARK's value in its processes' environment
    swept: bool = False  # every process of it killed, its first one had ended: none is left
    finished: dt.datetime | None = None
    exit_code: int | None = None
    reason: str = ""

    @property
    def done(self) -> bool:
        """The process has ended and every line it wrote is in the log."""
        return self.exit_code is not None and not self.reader.is_alive()


@dataclass
class PodRun:
    """A pod as this kubelet runs it."""

    namespace: str
    name: str
    uid: str
    node: str
    pod: dict[str, Any]
    instances: list[Instance] = field(default_factory=list)
    restarts: int = 0
    phase: str = "Pending"
    waiting: str = "ContainerCreating"
    restart_at: float | None = None
    message: str = ""
    reason: str = ""
    killing: bool = False
    reported: Any = None  # the last status written, so an unchanged one is not written again

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.pod.get("spec") or {}

    @property
    def container(self) -> str:
        return str(self.spec["containers"][0]["name"])

    @property
    def current(self) -> Instance | None:
        return self.instances[-1] if self.instances else None

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


class Kubelet:
    """Plays the kubelet for `nodes` on `cluster` (a running control plane); a context manager."""

    def __init__(
        self,
        cluster: Any,
        nodes: Sequence[Node],
        workdir: Path,
        *,
        sync: float = 0.2,
        heartbeat: float = 2.0,
        python: str | None = None,
    ) -> None:
        self.cluster = cluster
        self.python = python or sys.executable  # what a container's `python` runs
        self.admin: Client = cluster.admin
        self.nodes = {node.name: node for node in nodes}
        self.workdir = workdir
        self.sync = sync
        self.heartbeat = heartbeat
        self.runs: dict[str, PodRun] = {}  # by pod uid
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._servers: list[http.server.ThreadingHTTPServer] = []
        self.errors: list[str] = []  # what went wrong in the background, for the test to see

    # -- lifecycle --------------------------------------------------------------------------

    def __enter__(self) -> Kubelet:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        import trustme

        self.workdir.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        for node in self.nodes.values():
            cert = ca.issue_cert(node.address, node.name)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            cert.configure_cert(context)
            server = _LogServer((node.address, node.port), _LogHandler, self, node.name)
            server.socket = context.wrap_socket(server.socket, server_side=True)
            node.port = server.server_address[1]
            self._servers.append(server)
            # polled often, so that stop() does not wait half a second (the default) per node
            self._spawn(partial(server.serve_forever, 0.05), f"kubelet-logs-{node.name}")
            self._register(node)
        self._spawn(self._sync_loop, "kubelet-sync")
        self._spawn(self._heartbeat_loop, "kubelet-heartbeat")

    def stop(self) -> None:
        """Kill every process, stop serving, and delete the nodes (their pods stay as they are)."""
        self._stop.set()
        for server in self._servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=10)
        with self._lock:
            for run in self.runs.values():
                for instance in run.instances:
                    _kill(instance, signal.SIGKILL)
        for name in self.nodes:
            with contextlib.suppress(ApiFailure, OSError):
                self.admin.delete(f"/api/v1/nodes/{name}")

    def _spawn(self, target: Any, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    # -- nodes ------------------------------------------------------------------------------

    def _ready(self, status: str = "True", reason: str = "KubeletReady") -> dict[str, Any]:
        messages = {
            "KubeletReady": "kubelet is posting ready status",
            "NodeStatusUnknown": "Kubelet stopped posting node status.",
        }
        return {
            "type": "Ready",
            "status": status,
            "reason": reason,
            "message": messages.get(reason, reason),
            "lastHeartbeatTime": stamp(),
            "lastTransitionTime": stamp(),
        }

    def _register(self, node: Node) -> None:
        labels = {
            "kubernetes.io/hostname": node.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            **node.labels,
        }
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node.name, "labels": labels},
            "status": {
                "capacity": node.allocatable,
                "allocatable": node.allocatable,
                "conditions": [self._ready()],
                "addresses": [{"type": "InternalIP", "address": node.address}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": node.port}},
                "nodeInfo": {
                    "machineID": uuid.uuid4().hex, "systemUUID": str(uuid.uuid4()),
                    "bootID": str(uuid.uuid4()), "kernelVersion": os.uname().release,
                    "osImage": "simpletfjob test kubelet", "containerRuntimeVersion": "process://1",
                    "kubeletVersion": "v1.20.2", "kubeProxyVersion": "v1.20.2",
                    "operatingSystem": "linux", "architecture": "amd64",
                },
            },
        }  # fmt: skip
        self.admin.post("/api/v1/nodes", body)
        created = self.admin.get(f"/api/v1/nodes/{node.name}")
        taints = [
            t
            for t in created["spec"].get("taints") or []
            if t.get("key") != "node.kubernetes.io/not-ready"
        ]
        self.admin.merge_patch(f"/api/v1/nodes/{node.name}", {"spec": {"taints": taints or None}})

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(self.heartbeat):
            for node in list(self.nodes.values()):
                if node.beating:
                    self._try(
                        self.admin.merge_patch,
                        f"/api/v1/nodes/{node.name}/status",
                        {"status": {"conditions": [self._ready()]}},
                    )

    def lose(self, name: str) -> None:
        """The node goes away: no more heartbeat or pod status, its processes killed, and the
        node reported as the node lifecycle controller reports a node that stopped posting."""
        node = self.nodes[name]
        node.beating = False
        with self._lock:
            for run in self.runs.values():
                if run.node == name:
                    for instance in run.instances:
                        _kill(instance, signal.SIGKILL)
        self.admin.merge_patch(
            f"/api/v1/nodes/{name}/status",
            {"status": {"conditions": [self._ready("Unknown", "NodeStatusUnknown")]}},
        )
        taints = [
            {"key": "node.kubernetes.io/unreachable", "effect": effect, "timeAdded": stamp()}
            for effect in ("NoSchedule", "NoExecute")
        ]
        self.admin.merge_patch(f"/api/v1/nodes/{name}", {"spec": {"taints": taints}})

    # -- pods -------------------------------------------------------------------------------

    def _sync_loop(self) -> None:
        while not self._stop.wait(self.sync):
            for node in list(self.nodes.values()):
                if not node.beating:
                    continue
                try:
                    listed = self.admin.get(
                        "/api/v1/pods", fieldSelector=f"spec.nodeName={node.name}"
                    )
                except (ApiFailure, OSError):
                    continue  # the API server is away: try again at the next sync
                for pod in listed["items"]:
                    self._try(self._sync_pod, node, pod)
                seen = {pod["metadata"]["uid"] for pod in listed["items"]}
                with self._lock:
                    for run in self.runs.values():
                        if run.node == node.name and run.uid not in seen:
                            for instance in run.instances:  # deleted behind our back
                                _kill(instance, signal.SIGKILL)

    def _try(self, call: Any, *args: Any) -> None:
        try:
            call(*args)
        except (ApiFailure, OSError) as e:
            self.errors.append(f"{getattr(call, '__name__', call)}: {e}")

    def _sync_pod(self, node: Node, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        with self._lock:
            if not node.beating:  # lost since this sync listed its pods: it reports nothing more
                return
            run = self.runs.get(uid)
            if run is None:
                if pod["metadata"].get("deletionTimestamp"):
                    self._remove(pod["metadata"]["namespace"], pod["metadata"]["name"], uid)
                    return
                if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                    return
                run = PodRun(
                    pod["metadata"]["namespace"], pod["metadata"]["name"], uid, node.name, pod
                )
                self.runs[uid] = run
                self._admit(node, run)
            run.pod = pod
            if pod["metadata"].get("deletionTimestamp"):
                self._delete(run)
                return
            self._step(run)
            self._report(run)

    def _admit(self, node: Node, run: PodRun) -> None:
        """Start the pod, or refuse it as the kubelet's admission does when it does not fit."""
        used: dict[str, float] = {"pods": 0.0}
        for other in self.runs.values():
            if other.node == node.name and other is not run and not other.finished:
                used["pods"] += 1
                for name, amount in pod_requests(other.spec).items():
                    used[name] = used.get(name, 0.0) + amount
        asked = {**pod_requests(run.spec), "pods": 1.0}
        for name, amount in asked.items():
            have = quantity(node.allocatable.get(name, 0))
            if amount and used.get(name, 0.0) + amount > have:
                run.phase, run.reason = "Failed", f"OutOf{name}"
                run.message = (
                    f"Pod Node didn't have enough resource: {name}, requested: {amount:g}, "
                    f"used: {used.get(name, 0.0):g}, capacity: {have:g}"
                )
                self._event(run, "Warning", run.reason, run.message)
                return
        self._start(run)

    def _start(self, run: PodRun) -> None:
        container = run.spec["containers"][0]
        argv = [*(container.get("command") or []), *(container.get("args") or [])]
        log = self.workdir / f"{run.namespace}.{run.name}.{run.container}.{len(run.instances)}.log"
        node = self.nodes[run.node]
        env = {
            **os.environ,
            "PATH": f"{Path(self.python).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOSTNAME": run.name,
            "PYTHONUNBUFFERED": "1",
        }
        env.update(self._env(run, container, node))
        mark = env[CONTAINER_MARK] = f"{run.uid}.{len(run.instances)}"
        if argv and argv[0] == "python":
            argv[0] = self.python
        started = now()
        try:
            process = subprocess.Popen(
                argv or ["false"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=container.get("workingDir") or self.workdir,
                start_new_session=True,
            )
        except OSError as e:
            run.phase = run.phase if run.spec.get("restartPolicy") == "OnFailure" else "Failed"
            run.waiting, run.reason, run.message = "", "ContainerCannotRun", str(e)
            self._event(run, "Warning", "Failed", f"Error: {e}")
            return
        reader = threading.Thread(target=_copy_lines, args=(process, log), daemon=True)
        reader.start()
        run.instances.append(Instance(process, log, started, reader, mark))
        run.phase, run.waiting, run.restart_at = "Running", "", None
        self._event(run, "Normal", "Started", f"Started container {run.container}")

    def _env(self, run: PodRun, container: Mapping[str, Any], node: Node) -> dict[str, str]:
        fields = {
            "metadata.name": run.name,
            "metadata.namespace": run.namespace,
            "metadata.uid": run.uid,
            "spec.nodeName": node.name,
            "status.hostIP": node.address,
            "status.podIP": node.address,
        }
        values: dict[str, str] = {}
        for item in container.get("env") or []:
            if "value" in item:
                values[item["name"]] = str(item["value"])
            elif path := ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath"):
                values[item["name"]] = fields.get(path, "")
        return values

    def _step(self, run: PodRun) -> None:
        """Note a process that ended, and restart it in place when the pod's policy says so."""
        instance = run.current
        if run.finished or instance is None:
            return
        if instance.exit_code is None and instance.process.poll() is not None:
            code = instance.process.returncode
            instance.exit_code = 128 - code if code < 0 else code
            instance.finished = now()
            instance.reason = "Completed" if instance.exit_code == 0 else "Error"
        if instance.exit_code is None:
            return
        if instance.exit_code == 0:
            run.phase = "Succeeded"
        elif run.spec.get("restartPolicy") == "OnFailure":
            if run.restart_at is None:
                delay = BACKOFF[min(run.restarts, len(BACKOFF) - 1)]
                run.restart_at = time.monotonic() + delay
                run.waiting = "CrashLoopBackOff"
                # As the kubelet counts them: each ended instance, from when it has ended.
                run.restarts += 1
                self._event(
                    run,
                    "Warning",
                    "BackOff",
                    f"Back-off restarting failed container {run.container}",
                )
            elif time.monotonic() >= run.restart_at:
                self._start(run)
        else:
            run.phase = "Failed"

    def _delete(self, run: PodRun) -> None:
        instance = run.current
        if instance is not None and instance.process.poll() is None and not run.killing:
            run.killing = True
            self._event(run, "Normal", "Killing", f"Stopping container {run.container}")
            grace = run.pod["metadata"].get("deletionGracePeriodSeconds") or 0
            _kill(instance, signal.SIGTERM)
            self._spawn(lambda: self._kill_after(run, instance, float(grace)), f"kill-{run.name}")
            return
        if instance is not None and instance.process.poll() is None:
            return  # still stopping
        if self._remove(run.namespace, run.name, run.uid):
            self.runs.pop(run.uid, None)

    def _remove(self, namespace: str, name: str, uid: str) -> bool:
        """Delete the pod for good (grace 0, this uid only), as the kubelet does once it stopped."""
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": uid},
        }
        response = self.admin.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body)
        return response.code in (200, 404, 409)

    def _kill_after(self, run: PodRun, instance: Instance, grace: float) -> None:
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and instance.process.poll() is None:
            if self._stop.wait(0.05):
                break
        _kill(instance, signal.SIGKILL)

    # -- status and events ------------------------------------------------------------------

    def _report(self, run: PodRun) -> None:
        status = self._status(run)
        # the conditions' times say when this was written: an otherwise unchanged status is not
        key = {**status, "conditions": [c["status"] for c in status.get("conditions", [])]}
        if key == run.reported:
            return
        self.admin.merge_patch(
            f"/api/v1/namespaces/{run.namespace}/pods/{run.name}/status", {"status": status}
        )
        run.reported = key

    def _status(self, run: PodRun) -> dict[str, Any]:
        node = self.nodes[run.node]
        instance = run.current
        first: dict[str, Any] = {
            "name": run.container,
            "image": run.spec["containers"][0].get("image", ""),
            "imageID": "",
            "restartCount": run.restarts,
            "ready": False,
            "started": False,
        }
        if instance is not None and instance.exit_code is None and not run.waiting:
            first["state"] = {"running": {"startedAt": stamp(instance.started)}}
            first["ready"] = first["started"] = True
        elif instance is not None and instance.exit_code is not None and not run.waiting:
            first["state"] = {"terminated": _terminated(instance)}
        else:
            waiting = run.waiting or run.reason or "ContainerCreating"
            first["state"] = {"waiting": {"reason": waiting}}
            if run.message:
                first["state"]["waiting"]["message"] = run.message
        earlier = run.instances[-2] if len(run.instances) > 1 else None
        if run.waiting == "CrashLoopBackOff" and instance is not None:
            earlier = instance
        first["lastState"] = {"terminated": _terminated(earlier)} if earlier else {}
        others = [
            {
                "name": c["name"], "image": c.get("image", ""), "imageID": "", "restartCount": 0,
                "ready": run.phase == "Running", "started": run.phase == "Running",
                "state": {"running": {"startedAt": stamp(run.instances[0].started)}}
                if run.instances else {"waiting": {"reason": "ContainerCreating"}},
                "lastState": {},
            }
            for c in run.spec["containers"][1:]
        ]  # fmt: skip
        ready = "True" if first["ready"] else "False"
        status: dict[str, Any] = {
            "phase": run.phase,
            "hostIP": node.address,
            "podIP": node.address,
            "podIPs": [{"ip": node.address}],
            "startTime": stamp(run.instances[0].started) if run.instances else stamp(),
            "conditions": [
                {"type": "Initialized", "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp()},
                {"type": "Ready", "status": ready, "lastProbeTime": None, "lastTransitionTime": stamp()},
                {"type": "ContainersReady", "status": ready, "lastProbeTime": None, "lastTransitionTime": stamp()},
                {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp()},
            ],
            "containerStatuses": [first, *others],
            "qosClass": "BestEffort",
        }  # fmt: skip
        if run.reason and run.phase == "Failed" and not run.instances:
            # refused at admission: no container ever ran, as the kubelet reports it
            status = {"phase": "Failed", "reason": run.reason, "message": run.message}
        return status

    def _event(self, run: PodRun, kind: str, reason: str, message: str) -> None:
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{run.name}.{uuid.uuid4().hex[:16]}", "namespace": run.namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": run.name,
                "namespace": run.namespace,
                "uid": run.uid,
                "fieldPath": f"spec.containers{{{run.container}}}",
            },
            "reason": reason,
            "message": message,
            "type": kind,
            "count": 1,
            "firstTimestamp": stamp(),
            "lastTimestamp": stamp(),
            "source": {"component": "kubelet", "host": run.node},
            "reportingComponent": "kubelet",
            "reportingInstance": run.node,
        }
        self._try(self.admin.post, f"/api/v1/namespaces/{run.namespace}/events", event)

    # -- what tests ask -----------------------------------------------------------------------

    def find(self, namespace: str, pod: str) -> PodRun | None:
        with self._lock:
            for run in self.runs.values():
                if run.namespace == namespace and run.name == pod:
                    return run
        return None

    def streams(self) -> int:
        """How many log streams it serves now: a `logs -f` whose stream is up (its --since
        counted from the moment it came) is one."""
        return sum(len(server.streaming) for server in self._servers)

    def cut_logs(self) -> int:
        """End every log stream being served, at once, as a kubelet that restarts does; how many."""
        cut = 0
        for server in self._servers:
            for handler in list(server.streaming):
                with contextlib.suppress(OSError):
                    handler.connection.shutdown(socket.SHUT_RDWR)
                    cut += 1
        return cut

    def kill(self, namespace: str, pod: str, sig: int = signal.SIGKILL) -> None:
        """Kill a running pod's container: with SIGKILL (the default) every process in it, as a
        lost pod's or an OOM-killed container's; another signal goes to its first process's
        group, as a crash's would."""
        run = self.find(namespace, pod)
        assert run is not None and run.current is not None, f"no process for pod {pod}"
        _kill(run.current, sig)


def _terminated(instance: Instance) -> dict[str, Any]:
    return {
        "exitCode": instance.exit_code,
        "reason": instance.reason,
        "startedAt": stamp(instance.started),
        "finishedAt": stamp(instance.finished),
        "containerID": f"process://{instance.process.pid}",
    }


def _kill(instance: Instance, sig: int) -> None:
    """`sig` to the container's first process group; a SIGKILL to every process of the
    container too, wherever it went (its CONTAINER_MARK), as a cgroup's kill."""
    if instance.process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(instance.process.pid, sig)
    if sig == signal.SIGKILL and instance.mark and not instance.swept:
        ended = instance.process.poll() is not None
        for pid in _marked(instance.mark):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        instance.swept = ended


def _marked(mark: str) -> list[int]:
    """Every process whose environment says it is of the container `mark`, from /proc."""
    entry = f"{CONTAINER_MARK}={mark}".encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if entry in Path(f"/proc/{name}/environ").read_bytes().split(b"\0"):
                    found.append(int(name))
    return found


def _copy_lines(process: subprocess.Popen[bytes], log: Path) -> None:
    """Write each line the container prints to its log, with the time it arrived."""
    assert process.stdout is not None
    with log.open("wb") as out:
        for line in iter(process.stdout.readline, b""):
            if not line.endswith(b"\n"):
                line += b"\n"
            out.write(nano(now()).encode() + b" " + line)
            out.flush()
    process.wait()


# -- the kubelet API's container logs ---------------------------------------------------------


class _LogServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the API server opens a connection per stream: 100 at once

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-stream is no error of the kubelet's."""

    def __init__(self, address: Any, handler: Any, kubelet: Kubelet, node: str) -> None:
        super().__init__(address, handler)
        self.kubelet = kubelet
        self.node = node
        self.streaming: set[_LogHandler] = set()  # the handlers streaming a log now


class _LogHandler(http.server.BaseHTTPRequestHandler):
    server: _LogServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        segments = parts.path.strip("/").split("/")
        if len(segments) != 4 or segments[0] != "containerLogs":
            self._error(404, f"no such path {parts.path}")
            return
        _, namespace, pod, container = segments
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        run = self.server.kubelet.find(namespace, pod)
        if run is None or run.node != self.server.node:
            self._error(404, f'pod "{pod}" not found on node "{self.server.node}"')
            return
        names = [c["name"] for c in run.spec.get("containers") or []]
        if container not in names:
            self._error(400, f'container "{container}" not found in pod "{pod}"')
            return
        if container != run.container:  # a container that runs nothing has nothing to say
            self._send_head()
            return
        previous = query.get("previous") == "true"
        if previous:
            # the last container that ended before the current one; in CrashLoopBackOff the
            # current one is the container that just crashed, as the kubelet counts them
            instance = (
                run.instances[-1]
                if run.waiting == "CrashLoopBackOff"
                else run.instances[-2]
                if len(run.instances) > 1
                else None
            )
            if instance is None:
                self._error(
                    400, f'previous terminated container "{container}" in pod "{pod}" not found'
                )
                return
        else:
            instance = run.current
            if instance is None:
                reason = run.waiting or run.reason or "ContainerCreating"
                self._error(
                    400, f'container "{container}" in pod "{pod}" is waiting to start: {reason}'
                )
                return
        self._send_head()
        self._stream(instance, query, follow=query.get("follow") == "true" and not previous)

    def _send_head(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Connection", "close")
        self.end_headers()

    def _error(self, code: int, message: str) -> None:
        body = message.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, instance: Instance, query: Mapping[str, str], follow: bool) -> None:
        timestamps = query.get("timestamps") == "true"
        since = float(query["sinceSeconds"]) if "sinceSeconds" in query else None
        tail = int(query["tailLines"]) if "tailLines" in query else None
        cutoff = nano(now() - dt.timedelta(seconds=since)) if since is not None else None
        if "sinceTime" in query:  # RFC 3339, as the API server passes it on: to the second
            cutoff = nano(dt.datetime.fromisoformat(query["sinceTime"].replace("Z", "+00:00")))
        self.server.streaming.add(self)
        try:
            self._stream_from(instance, timestamps, tail, cutoff, follow)
        finally:
            self.server.streaming.discard(self)

    def _stream_from(
        self,
        instance: Instance,
        timestamps: bool,
        tail: int | None,
        cutoff: str | None,
        follow: bool,
    ) -> None:
        with instance.log.open("rb") as log:
            lines = _complete_lines(log)
            if cutoff is not None:
                lines = [line for line in lines if line.split(b" ", 1)[0].decode() >= cutoff]
            if tail is not None and tail >= 0:
                lines = lines[-tail:] if tail else []
            try:
                self._write(lines, timestamps)
                while follow and not self.server.kubelet._stop.is_set():
                    done = instance.done
                    more = _complete_lines(log)
                    self._write(more, timestamps)
                    if done and not more:
                        return
                    if not more:
                        time.sleep(0.05)
            except OSError:  # the client went away, or the stream was cut (ssl.SSLError is one)
                return

    def _write(self, lines: Sequence[bytes], timestamps: bool) -> None:
        if not lines:
            return
        out = b"".join(line if timestamps else line.split(b" ", 1)[1] for line in lines)
        self.wfile.write(out)
        self.wfile.flush()


def _complete_lines(log: Any) -> list[bytes]:
    """The whole lines that can be read from here on; a partial last line is left unread."""
    lines: list[bytes] = []
    while True:
        position = log.tell()
        line = log.readline()
        if not line:
            return lines
        if not line.endswith(b"\n"):
            log.seek(position)
            return lines
        lines.append(line)


def addresses(count: int, first: int = 1) -> Iterator[str]:
    """Loopback addresses for `count` nodes on this machine: 127.0.0.1, 127.0.0.2, ..."""
    for index in range(first, first + count):
        yield f"127.0.0.{index}"
