"""A queue of waiting clients, and the requests a second it puts on the API server.

    python -m bench.queue                    # 50 clients, a 120 s window
    python -m bench.queue --clients 10 --seconds 60

On the real control plane (it needs $KUBEBUILDER_ASSETS), one node with one GPU is taken by a
run applied first (its pod stays Pending: there is no kubelet, and the fit counts it). Then
`--clients` processes of `simpletfjob run --queue team`, each a run asking that GPU, enter the
queue and wait: none fits. They reach the API server through a counting proxy
(tests/support/faultproxy.py), so that only their requests are counted: while they enter,
then over a window of `--seconds` once every entry is there (the steady state: each client's
watch, its renewals, and the head's tries). Then each is sent SIGTERM, which removes its
entry. The goal (issue 39): at most 10 requests a second for 50 waiting clients.

Measured on a 2-core machine shared with other work (load average 12 to 40), 50 clients:
entering, a few at a time, 1603 requests in 176 s; then, waiting, 7.09 requests a second:
5.28 updates of leases (each entry renewed every 10 s, and the lock taken and given back by
the head's tries), 0.83 watches (each client's watch opened again every 60 s, from its last
resourceVersion), and the head's try every 5 s (0.2 each of get and list of leases, and of the
lists of nodes, pods and Jobs its plan reads).

This is not a test: machines are noisy, and nothing here asserts a figure.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import console_script  # noqa: E402
from tests.support.cluster import wait_for  # noqa: E402
from tests.support.control_plane import find_assets, start  # noqa: E402
from tests.support.faultproxy import FaultProxy  # noqa: E402

TEMPLATE = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: <<name>>-<<type>>-<<index>>
spec:
  template:
    spec:
      nodeName: <<node>>
      restartPolicy: Never
      containers:
        - name: main
          image: busybox
          resources:
            limits:
              nvidia.com/gpu: 1
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
"""


def main(argv: list[str]) -> None:
    import trustme

    parser = argparse.ArgumentParser(prog="python -m bench.queue")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=120.0)
    args = parser.parse_args(argv)
    assets, why = find_assets()
    if assets is None:
        sys.exit(f"bench: skipped: {why}")
    script = console_script()
    work = Path(tempfile.mkdtemp(prefix="simpletfjob-bench-queue-"))
    plane = start(assets, work / "plane")
    clients: list[subprocess.Popen[bytes]] = []
    try:
        ns = plane.create_namespace("bench")
        plane.create_node("qbench-0", gpus=1, labels={"qbench": "1"})
        template = work / "q.yaml"
        template.write_text(TEMPLATE)
        common = ["-N", "1", "--psn", "0", "-l", "qbench=1", str(template)]
        direct = str(plane.kubeconfig(work / "admin", namespace=ns))
        subprocess.run(
            [script, "apply", "--name", "blocker", "--kubeconfig", direct, *common],
            check=True, capture_output=True,
        )  # fmt: skip
        with FaultProxy(plane.url, ca_file=plane.ca_file, tls=trustme.CA()) as proxy:
            kubeconfig = str(proxy.kubeconfig(work / "kc", token=plane.admin_token, namespace=ns))

            def entries() -> int:
                try:
                    leases = plane.admin.get(
                        f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
                        labelSelector="simpletfjob/queue=team",
                    )["items"]
                except OSError:  # a loaded machine: the next look
                    return -1
                return sum(not x["metadata"]["name"].endswith(".lock") for x in leases)

            began = time.monotonic()
            for i in range(args.clients):  # a few at a time, so that their starts do not pile up
                clients.append(
                    subprocess.Popen(
                        [script, "run", "--name", f"w{i}", "--kubeconfig", kubeconfig, *common,
                         "--queue", "team", "--logs", "none"],
                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                        stderr=(work / f"w{i}.err").open("wb"),
                    )
                )  # fmt: skip
                if len(clients) % 5 == 0 or len(clients) == args.clients:
                    wait_for(lambda: entries() == len(clients), timeout=600, what="clients in")
            entered = time.monotonic() - began
            entering = len(proxy.requests)
            print(f"{args.clients} clients entered the queue in {entered:.1f} s: {entering} "
                  f"requests ({entering / entered:.1f}/s)")  # fmt: skip
            time.sleep(15)  # each client's first watch is up, its first renewal made
            first = len(proxy.requests)
            time.sleep(args.seconds)
            window = proxy.requests[first:]
            alive = sum(c.poll() is None for c in clients)
            print(f"waiting, over {args.seconds:.0f} s ({alive} of {args.clients} clients alive, "
                  f"{entries()} entries): {len(window)} requests, "
                  f"{len(window) / args.seconds:.2f}/s")  # fmt: skip
            kinds = collections.Counter(f"{r.verb} {r.resource}" for r in window)
            for kind, n in kinds.most_common():
                print(f"  {kind:24} {n:6}  {n / args.seconds:6.2f}/s")
            for client in clients:
                client.send_signal(signal.SIGTERM)
            codes = collections.Counter(client.wait(timeout=300) for client in clients)
            print(f"SIGTERM: exit statuses {dict(codes)}; {entries()} entries left")
    finally:
        for client in clients:
            if client.poll() is None:
                client.kill()
        plane.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
