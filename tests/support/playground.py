"""A local cluster to try simpletfjob on: the real control plane and the kubelet stand-in.

    python -m tests.support.playground --nodes 3 [--gpus N] [--python PATH] [--dir DIR]

It starts etcd, kube-apiserver and kube-controller-manager from $KUBEBUILDER_ASSETS, as the
tests do (control_plane.py), and the kubelet stand-in (kubelet.py) for NODES nodes named
node-1, node-2, ... on this machine's loopback addresses, whose pods run as local processes
and serve their logs. It prints `KUBECONFIG=<path>` on a line of its own on stdout (what it
tells besides goes to stderr), and runs until Ctrl-C (SIGINT) or SIGTERM, which stop the
pods' processes, the stand-in and the control plane, in that order, and remove the directory
it made (a --dir is kept).

A container's `python` is `--python`'s interpreter (default: the one running this), with
its directory first on PATH (torchrun). Every task shares this machine's network: the
nodes' names do not resolve, so tasks reach each other by `--address internal-ip`, and two
tasks that listen on one port go on one node with `--tasks-per-host`.

What it needs, each refused in one line naming what to do: the three binaries
(`setup-envtest`, as the README's Tests section says) and the nodes' loopback addresses,
which Linux routes whole (127.0.0.0/8); elsewhere it says so.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from tests.support.control_plane import ASSETS_VARIABLE, ControlPlaneError, find_assets, start
from tests.support.kubelet import Kubelet, Node
from tests.support.parallel import node_address

PROGRAM = "playground"
SETUP = (
    "it needs kube-apiserver, etcd and kube-controller-manager there: get them with setup-envtest "
    "(go install sigs.k8s.io/controller-runtime/tools/setup-envtest@latest; "
    'export KUBEBUILDER_ASSETS="$(setup-envtest use -p path 1.20.x)") and add '
    "kube-controller-manager of the same version to that directory"
)


def loopback_problem(addresses: Sequence[str]) -> str | None:
    """Why the nodes cannot have these addresses here, or None: a listener must bind each."""
    for address in addresses:
        with socket.socket() as probe:
            try:
                probe.bind((address, 0))
            except OSError as e:
                where = "Linux" if sys.platform.startswith("linux") else sys.platform
                return (
                    f"the nodes need this machine's loopback addresses, and {address} cannot be "
                    f"bound on {where} ({e.strerror}); the playground runs on Linux, where "
                    "127.0.0.0/8 is all loopback"
                )
    return None


def nodes(count: int, gpus: int) -> list[Node]:
    """node-1, node-2, ... on loopback addresses of their own, with `gpus` GPUs each."""
    return [Node(f"node-{i + 1}", node_address(i), gpus=gpus) for i in range(count)]


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=f"python -m tests.support.{PROGRAM}",
        description="A local cluster to try simpletfjob on: the real control plane, and nodes "
        "whose pods run as local processes. Ctrl-C stops it.",
    )
    parser.add_argument("--nodes", type=int, default=3, help="how many nodes (default 3)")
    parser.add_argument("--gpus", type=int, default=0, help="nvidia.com/gpu on each node")
    parser.add_argument("--python", default=sys.executable, help="what a container's `python` runs")
    parser.add_argument("--dir", help="where its files go, kept at the end (default: a temp dir)")
    args = parser.parse_args(argv)
    if not 1 <= args.nodes <= 250 or args.gpus < 0:
        parser.error("--nodes is 1 to 250, --gpus 0 or more")
    if shutil.which(args.python) is None:
        parser.error(f"--python {args.python!r} is no program here")
    return args


def say(line: str) -> None:
    print(f"{PROGRAM}: {line}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    assets, why = find_assets()
    if assets is None:
        unset = not os.environ.get(ASSETS_VARIABLE)
        say(f"${ASSETS_VARIABLE} is not set; {SETUP}" if unset else f"{why}; {SETUP}")
        return 1
    chosen = nodes(args.nodes, args.gpus)
    problem = loopback_problem([node.address for node in chosen])
    if problem:
        say(problem)
        return 1
    stop = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: stop.set())
    made = args.dir is None
    directory = Path(args.dir or tempfile.mkdtemp(prefix="simpletfjob-playground-"))
    say(f"starting the control plane in {directory} ...")
    try:
        plane = start(assets, directory / "control-plane")
    except ControlPlaneError as e:
        say(f"the control plane did not start: {str(e).splitlines()[0]}")
        return 1
    try:
        kubeconfig = plane.kubeconfig(directory / "kubeconfig")
        with Kubelet(plane, chosen, directory / "kubelet", python=args.python):
            shown = ", ".join(f"{node.name} ({node.address})" for node in chosen)
            say(f"{len(chosen)} nodes: {shown}; their pods' python is {args.python}")
            say("Ctrl-C stops the nodes' pods, the nodes and the control plane")
            if not stop.is_set():
                print(f"KUBECONFIG={kubeconfig}", flush=True)
            while not stop.wait(0.5):
                pass
            say("stopping ...")
    finally:
        plane.stop()
        if made:
            shutil.rmtree(directory, ignore_errors=True)
    say("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
