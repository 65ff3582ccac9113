"""`diagnose RUN` against `kubectl logs -l simpletfjob/job=RUN --all-containers --prefix
--max-log-requests 1000 --tail 10000`, on a finished run of 1000 tasks.

    KUBEBUILDER_ASSETS=$(../shared/kube/unpack) python -m bench.diagnose [--tasks 1000] [--lines 1000] [--repeats 3]

A real control plane (tests/support/control_plane, the envtest binaries) and the kubelet
stand-in (tests/support/kubelet) run one run of TASKS tasks on one node, each writing LINES
lines and ending (`seq`, so that a thousand tasks cost no thousand Pythons). Once every
task has ended, each tool reads the run as a fresh process, the two taking turns (one
warm-up each, then the medians of `--repeats`), and the wall times are printed side by
side with their ratio; the goal is diagnose <= 2x. kubectl only prints the logs; diagnose
writes the whole bundle: the same logs, the status, events, node and manifests (the Jobs'
TF_CONFIG makes them about 20 MB at 1000 tasks), the summary, compressed. It needs
$KUBEBUILDER_ASSETS and kubectl, and says it is skipped without them. Not part of bench.run.

Not a test: machines are noisy, so nothing here asserts a speed.

Measured (issue 38; 2-core machine shared with other work, load average 11 to 15; the
installed console script, medians of 3 after a warm-up each): 1000 tasks of 1000 lines,
a bundle of 49.3 MB before compression (1000 logs, manifests.yaml 19.8 MB): diagnose
15.78 s (peak RSS 363 MB), kubectl 202.18 s (233 MB): **0.08x**. kubectl reads the
logs one pod after another without -f, whatever --max-log-requests says; diagnose reads
them as `logs` does (logsources.Merger: the ended containers four at a time over kept
connections).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import compare, console_script  # noqa: E402
from tests.support.cluster import wait_for  # noqa: E402
from tests.support.control_plane import find_assets, start  # noqa: E402
from tests.support.kubelet import Kubelet, Node  # noqa: E402

RUN = "diagbench"
TEMPLATE = f"""\
apiVersion: batch/v1
kind: Job
metadata:
  name: {RUN}-<<type>>-<<index>>
spec:
  backoffLimit: 0
  template:
    spec:
      nodeName: <<node>>
      restartPolicy: Never
      containers:
        - name: main
          image: busybox
          command: [seq, -f, "<<type>>-<<index>> step %g loss 0.5", "1", "<<lines>>"]
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
          resources:
            requests:
              cpu: 1m
"""


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.diagnose")
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    assets, why = find_assets()
    kubectl = shutil.which("kubectl")
    if assets is None or kubectl is None:
        print(f"bench.diagnose: skipped: {why or 'kubectl is not on PATH'}")
        return
    work = Path(tempfile.mkdtemp(prefix="simpletfjob-bench-diagnose-"))
    plane = start(assets, work / "plane")
    try:
        namespace = plane.create_namespace("bench")
        kubeconfig = str(plane.kubeconfig(work / "kubeconfig", namespace=namespace))
        node = Node("bench-node", "127.0.0.77", cpu="64", memory="256Gi", pods=args.tasks + 10)
        with Kubelet(plane, [node], work / "kubelet", sync=1.0):
            template = work / "bench.yaml"
            template.write_text(TEMPLATE)
            began = time.perf_counter()
            subprocess.run(
                [console_script(), "apply", str(template), "--nodes", node.name,
                 "--tasks-per-host", str(args.tasks), "--psn", "0", "-N", "1",
                 "--kubeconfig", kubeconfig, "--name", RUN, "--set", f"lines={args.lines}"],
                check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip

            def finished() -> bool:
                pods = plane.pods(namespace, f"simpletfjob/job={RUN}")
                done = [p for p in pods if p.get("status", {}).get("phase") == "Succeeded"]
                return len(done) == args.tasks

            wait_for(finished, 1800, "every task to write its lines")
            print(f"{args.tasks} tasks ran in {time.perf_counter() - began:.0f} s")
            bundle = work / "bundle.tar.gz"
            ours = [
                console_script(),
                "diagnose",
                RUN,
                "-o",
                str(bundle),
                "--kubeconfig",
                kubeconfig,
            ]
            theirs = [
                kubectl, "--kubeconfig", kubeconfig, "logs", "-l", f"simpletfjob/job={RUN}",
                "--all-containers", "--prefix", "--max-log-requests", str(args.tasks),
                "--tail", "10000",
            ]  # fmt: skip
            mine, base = compare("diagnose", ours, theirs, args.repeats)
            with tarfile.open(bundle) as tar:
                sizes = {m.name: m.size for m in tar.getmembers()}
            logs = sum(1 for name in sizes if "/tasks/" in name)
    finally:
        plane.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"diagnose of {args.tasks} tasks x {args.lines} lines, median of {args.repeats} runs each"
    )
    print(
        f"  bundle: {logs} logs, {sum(sizes.values()) / 1e6:.1f} MB before compression, "
        f"{bundle_size(sizes)}"
    )
    print(f"  diagnose {mine.seconds:7.2f} s  (peak RSS {mine.peak_rss_mb:.0f} MB)")
    print(f"  kubectl  {base.seconds:7.2f} s  (peak RSS {base.peak_rss_mb:.0f} MB)")
    print(f"  ratio diagnose/kubectl: {mine.seconds / base.seconds:.2f}x (goal <= 2x)")


def bundle_size(sizes: dict[str, int]) -> str:
    """The largest members, for where the bytes are."""
    top = sorted(sizes.items(), key=lambda item: -item[1])[:3]
    return ", ".join(f"{name.split('/', 1)[1]} {size / 1e6:.1f} MB" for name, size in top)


if __name__ == "__main__":
    main(sys.argv[1:])
