"""Reading usage: 2000 nodes and 60,000 realistic pods, simpletfjob against kubectl, and its memory.

    python -m bench.usage          # or: python -m bench.run usage

A loopback API server (tests/support/kubeapi, its own process) serves a realistic
cluster over https with a bearer token: daemons on every node (node-exporter on the
host network), web pods with sidecars and init containers, finished Jobs, pending
pods, other runs' TensorFlow workers on host port 2222, and GPU training filling a
quarter of the GPU nodes. Every client runs as a fresh process, alternately, and
the median wall time is taken:

- `simpletfjob nodes -o json` (one paginated list of every non-terminated pod)
  against `kubectl get pods -A -o json` alone, and its peak RSS;
- `-N 4 --gpus 8` on the mostly free cluster (the pods of the candidate nodes,
  node by node) against the same run with `--no-usage`;
- how `nodes -o json` grows from 500 to 2000 nodes (30 pods a node).

Not a test: machines are noisy, so nothing here asserts a speed.

2026-11-29 (issue 36), two tricks of kube/lists.py measured, each variant run in
turns, 9 times, in the same minute (load 3 to 4), `nodes -o json` here:
- the next page fetched while this one is parsed: without it, wall medians 2.616 s
  vs 2.415 s, 2.404 vs 2.293, 2.573 vs 2.461 (5 runs): 0.1 to 0.2 s slower, CPU the
  same. It stays, its thread now an inflight.Pool's. A fourth run (load 1): 3.436 s
  without vs 3.473 s before and 3.277 s with the Pool; bench.cluster, 5000 nodes:
  0.839 s without vs 0.992 s, noise.
- the garbage collector off while pages are read (and a nodes file parsed): 2.389 s
  without vs 2.293 s, CPU 1.816 s vs 1.867 s; bench.cluster 0.769 s vs 0.839 s; a
  10,000-node --nodes-file, 1.052 s vs 1.049 s: below the rule; removed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.cluster import _line, _medians, _simpletfjob  # noqa: E402
from tests.support.kubeapi import write_kubeconfig  # noqa: E402

NODES = 2000
PODS = 60_000
TOKEN = "bench-token"
GROWTH = (500, 1000, 2000)  # nodes, at PODS / NODES pods each

# A run on the pod network: the GPUs decide, not a host port.
TEMPLATE = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: bench-<<type>>-<<index>>
spec:
  template:
    spec:
      nodeName: <<node>>
      tolerations:
        - key: nvidia.com/gpu
          operator: Exists
          effect: NoSchedule
      containers:
        - name: tf
          image: tensorflow/tensorflow
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
          resources:
            limits:
              nvidia.com/gpu: 8
      restartPolicy: Never
"""


class Server:
    """The loopback API server with a realistic cluster, as its own process, until closed."""

    def __init__(self, work: Path, nodes: int, pods: int) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable, "-m", "tests.support.kubeapi",
                "--nodes", str(nodes), "--pods", str(pods), "--token", TOKEN, "--tls", str(work),
            ],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        url, _, pod_bytes = self.process.stdout.readline().split()
        self.pod_mb = int(pod_bytes) / 1e6
        self.kubeconfig = write_kubeconfig(
            work / f"kubeconfig-{nodes}", url, token=TOKEN, ca_file=work / "ca.crt"
        )

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


def run(report: Callable[[str], object] = print, repeats: int = 5) -> dict[str, float]:
    """Measure and report each figure as a line; return the figures."""
    figures: dict[str, float] = {"nodes": NODES, "pods": PODS}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "bench.yaml").write_text(TEMPLATE)
        env = {**os.environ, "HOME": str(work)}
        for name in ("KUBERNETES_SERVICE_HOST", "KUBECONFIG"):
            env.pop(name, None)
        server = Server(work, NODES, PODS)
        try:
            report(
                f"{NODES} nodes, {PODS} pods ({server.pod_mb:.0f} MB of pod JSON), "
                "from a loopback API server over https"
            )
            figures.update(_measure(report, work, server.kubeconfig, env, repeats))
        finally:
            server.close()
        figures.update(_growth(report, work, env, max(1, repeats // 2)))
    return figures


def _measure(
    report: Callable[[str], object],
    work: Path,
    kubeconfig: Path,
    env: dict[str, str],
    repeats: int,
) -> dict[str, float]:
    ours = [*_simpletfjob(), "nodes", "-o", "json", "--kubeconfig", str(kubeconfig)]
    render = [*_simpletfjob(), str(work / "bench.yaml"), "--kubeconfig", str(kubeconfig)]
    render += ["-N", "4", "--gpus", "8", "-o", str(work / "out.yaml")]
    commands: dict[str, Sequence[str]] = {
        "nodes": ours,
        "render": render,
        "render --no-usage": [*render, "--no-usage"],
    }
    counts = dict.fromkeys(commands, repeats)
    kubectl = shutil.which("kubectl")
    if kubectl:
        commands["kubectl"] = [
            kubectl, "get", "pods", "-A", "-o", "json", "--kubeconfig", str(kubeconfig),
            "--cache-dir", str(work / "kube-cache"),
        ]  # fmt: skip
        counts["kubectl"] = max(1, repeats // 2)
    results = _medians(commands, counts, env)
    figures: dict[str, float] = {}
    mine, peak = results["nodes"]
    figures.update(nodes_seconds=mine, nodes_peak_rss_mb=peak)
    if "kubectl" in results:
        base, _ = results["kubectl"]
        figures.update(kubectl_pods_seconds=base, nodes_vs_kubectl=mine / base)
        report(_line("nodes -o json vs kubectl get pods -A -o json", mine, base, "<= 0.25x"))
    else:
        report(f"nodes -o json: {mine:.3f}s (kubectl is not installed: no comparison)")
    report(f"{'peak RSS, nodes -o json':<52} {peak:7.1f}MB (goal <= 300 MB)")
    used, _ = results["render"]
    alone, _ = results["render --no-usage"]
    figures.update(render_seconds=used, no_usage_seconds=alone, render_ratio=used / alone)
    report(_line("-N 4 --gpus 8 vs the same with --no-usage", used, alone, "<= 1.5x"))
    return figures


def _growth(
    report: Callable[[str], object], work: Path, env: dict[str, str], repeats: int
) -> dict[str, float]:
    figures: dict[str, float] = {}
    per_node = PODS // NODES
    for nodes in GROWTH:
        server = Server(work, nodes, nodes * per_node)
        try:
            argv = [*_simpletfjob(), "nodes", "-o", "json", "--kubeconfig", str(server.kubeconfig)]
            seconds, peak = _medians({"nodes": argv}, {"nodes": repeats}, env)["nodes"]
        finally:
            server.close()
        figures[f"nodes_{nodes}_seconds"] = seconds
        report(
            f"{'nodes -o json, ' + str(nodes) + ' nodes, ' + str(nodes * per_node) + ' pods':<52}"
            f" {seconds:7.3f}s  {peak:6.1f}MB"
        )
    return figures


if __name__ == "__main__":
    run()
