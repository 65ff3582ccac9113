"""A real, throwaway Kubernetes control plane on loopback, the envtest way.

`find_assets()` looks for etcd, kube-apiserver and kube-controller-manager in
$KUBEBUILDER_ASSETS; `start()` runs them on free loopback ports in a directory and returns
a ControlPlane once /readyz answers; `ControlPlane.stop()` stops them by their process ids.
`kill_apiserver()` and `start_apiserver()` make an outage: the API server goes away, then
comes back on the same port, with the same certificate and the same etcd.
The flags are those of ../shared/kube/start (a tested reference):

- kube-apiserver serves https with a certificate it signs itself (--cert-dir), trusts the
  tokens in tokens.csv (the admin in system:masters, and the test users in USERS, with no
  rights until a test grants them), and authorizes with RBAC;
- kube-controller-manager runs only the job, garbagecollector and ttl-after-finished
  controllers; there is no scheduler and no kubelet (see tests/support/cluster.py).

Each process is started with PR_SET_PDEATHSIG, so it dies with the test run even if the
run is killed before it can stop them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.client import Client
from tests.support.cluster import ADMIN, ADMIN_TOKEN, USERS, Cluster
from tests.support.parallel import free_ports

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
ASSETS_VARIABLE = "KUBEBUILDER_ASSETS"


class ControlPlaneError(RuntimeError):
    """The control plane did not start; the message names the log to read."""


def find_assets(environ: Mapping[str, str] = os.environ) -> tuple[Path | None, str]:
    """(the directory holding the three binaries, "") or (None, why they are not there)."""
    value = environ.get(ASSETS_VARIABLE)
    if not value:
        return (
            None,
            f"${ASSETS_VARIABLE} is not set (../shared/kube/unpack prints a directory for it)",
        )
    directory = Path(value)
    missing = [b for b in BINARIES if not os.access(directory / b, os.X_OK)]
    if missing:
        return None, f"${ASSETS_VARIABLE}={value} has no executable {', '.join(missing)}"
    return directory, ""


def _free_ports(count: int) -> list[int]:
    """Ports for etcd and kube-apiserver from this xdist worker's own block, outside the
    ephemeral range: a port picked with bind(0) and closed may be taken, before the server
    binds it or while it is stopped for a restart, by any connection the machine opens."""
    first = free_ports(count)
    return list(range(first, first + count))


def _die_with_parent() -> None:
    """In the child, before exec: get SIGTERM when the test process goes away."""
    # Without glibc there is no prctl here; the fixture's teardown still stops the process.
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _service_account_key(directory: Path) -> Path:
    """A key to sign service account tokens with; kube-apiserver reads its public half from it."""
    import trustme  # its CA's key will do: ECDSA, in PEM

    key = directory / "sa.key"
    trustme.CA().private_key_pem.write_to_path(str(key))
    return key


@dataclass
class ControlPlane(Cluster):
    """etcd, kube-apiserver and kube-controller-manager, running; a Cluster for the tests."""

    directory: Path = Path()
    admin_kubeconfig: Path = Path()
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    commands: dict[str, list[str]] = field(default_factory=dict)  # each process's command line
    started_in: float = 0.0  # seconds from the first process to /readyz
    apiserver_starts: int = 0  # how many times start_apiserver started it again

    def launch(self, name: str, command: list[str]) -> None:
        """Start one process, its output appended to NAME.log and its id written to NAME.pid.

        It dies with the thread that starts it (PR_SET_PDEATHSIG belongs to the forking
        thread): start it from one that lives as long as it must.
        """
        log = open(self.directory / f"{name}.log", "ab")  # noqa: SIM115 -- the child keeps it open
        try:
            self.processes[name] = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.directory,
                preexec_fn=_die_with_parent,
            )
        finally:
            log.close()
        self.commands[name] = command
        (self.directory / f"{name}.pid").write_text(str(self.processes[name].pid))

    def kill_apiserver(self) -> None:
        """Kill kube-apiserver by its process id (SIGKILL, as a crash), and wait until it is gone.

        etcd and the controllers keep running; the port is free for `start_apiserver`.
        """
        process = self.processes["kube-apiserver"]
        process.kill()
        process.wait(timeout=10)

    def start_apiserver(self, timeout: float = 60.0) -> None:
        """Start kube-apiserver again as it was (same port, certificate, tokens and etcd); return
        once /readyz answers. The controllers find it again by themselves."""
        if self.processes["kube-apiserver"].poll() is None:
            raise ControlPlaneError("kube-apiserver is still running")
        self.launch("kube-apiserver", self.commands["kube-apiserver"])
        self.apiserver_starts += 1
        _wait_ready(self, time.monotonic() + timeout)

    def restart_controllers(self) -> None:
        """Stop kube-controller-manager and start it again as it was.

        After an API server outage the controllers find it again by themselves, but their
        informers retry with a back-off that grows to 30 s, so a Job created soon after may
        get its pods that much later; started again, they list everything at once. From a
        thread that outlives it, as `launch` says.
        """
        process = self.processes["kube-controller-manager"]
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        self.launch("kube-controller-manager", self.commands["kube-controller-manager"])

    def stop(self) -> None:
        """Stop what `start` started, by process id: the controllers first, etcd last."""
        for name in ("kube-controller-manager", "kube-apiserver", "etcd"):
            process = self.processes.get(name)
            if process is None or process.poll() is not None:
                continue
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)

    def log(self, name: str, lines: int = 20) -> str:
        """The end of a process's log, for failure messages."""
        path = self.directory / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def start(
    assets: Path,
    directory: Path,
    *,
    users: Mapping[str, str] = USERS,
    timeout: float = 180.0,
    feature_gates: str = "TTLAfterFinished=true",
) -> ControlPlane:
    """Start the control plane under `directory`; stop what was started if it does not come up.

    `timeout` is generous: on a 2-core machine loaded by other work, kube-apiserver's first TLS
    handshakes have been seen to take over a minute, and one worker's control plane that does
    not come up errors every test that worker runs.

    `feature_gates` go to kube-apiserver and kube-controller-manager ('' for v1.20's defaults,
    under which the TTL-after-finished controller is off and its field dropped).
    """
    gates = [f"--feature-gates={feature_gates}"] if feature_gates else []
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "certs").mkdir(exist_ok=True)
    etcd_port, peer_port, api_port = _free_ports(3)
    url = f"https://127.0.0.1:{api_port}"
    lines = [f'{ADMIN_TOKEN},{ADMIN},admin-uid,"system:masters"']
    lines += [f"{token},{user},{user}-uid" for user, token in users.items()]
    (directory / "tokens.csv").write_text("\n".join(lines) + "\n")
    key = _service_account_key(directory)
    plane = ControlPlane(
        url=url,
        ca_file=directory / "certs" / "apiserver.crt",
        tokens=dict(users),
        name="test",
        directory=directory,
        admin_kubeconfig=directory / "kubeconfig",
    )

    def run(name: str, *args: str) -> None:
        plane.launch(name, [str(assets / name), *args])

    began = time.monotonic()
    try:
        etcd = f"http://127.0.0.1:{etcd_port}"
        peer = f"http://127.0.0.1:{peer_port}"
        run(
            "etcd",
            "--name=test", f"--data-dir={directory / 'etcd'}",
            f"--listen-client-urls={etcd}", f"--advertise-client-urls={etcd}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=test={peer}",
        )  # fmt: skip
        run(
            "kube-apiserver",
            f"--etcd-servers={etcd}",
            "--bind-address=127.0.0.1", f"--secure-port={api_port}", "--advertise-address=127.0.0.1",
            f"--cert-dir={directory / 'certs'}", "--endpoint-reconciler-type=none",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={key}", f"--service-account-signing-key-file={key}",
            f"--token-auth-file={directory / 'tokens.csv'}", "--authorization-mode=RBAC",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--disable-admission-plugins=ServiceAccount",
            *gates,
        )  # fmt: skip
        _wait_ready(plane, began + timeout)
        plane.kubeconfig(plane.admin_kubeconfig, ADMIN)
        run(
            "kube-controller-manager",
            f"--kubeconfig={plane.admin_kubeconfig}",
            "--controllers=job,garbagecollector,ttl-after-finished",
            "--leader-elect=false", "--port=0", "--secure-port=0",
            "--use-service-account-credentials=false",
            *gates,
        )  # fmt: skip
    except BaseException:
        plane.stop()
        raise
    plane.started_in = time.monotonic() - began
    return plane


def _wait_ready(plane: ControlPlane, deadline: float) -> None:
    client = Client(plane.url, ADMIN_TOKEN, plane.ca_file, timeout=2.0)
    last = "no answer"
    while time.monotonic() < deadline:
        for name, process in plane.processes.items():
            if process.poll() is not None:
                raise ControlPlaneError(
                    f"{name} exited with {process.returncode}; see {plane.directory / (name + '.log')}:\n"
                    + plane.log(name)
                )
        if plane.ca_file is not None and plane.ca_file.exists():
            try:
                response = client.request("GET", "/readyz")
                if response.code == 200:
                    return
                last = f"{response.code} {str(response.body)[:200]}"
            except OSError as e:
                last = str(e)
        time.sleep(0.1)
    raise ControlPlaneError(
        f"kube-apiserver was not ready in time (last: {last}); see "
        f"{plane.directory / 'kube-apiserver.log'}:\n" + plane.log("kube-apiserver")
    )
