"""Following a run's logs: `simpletfjob logs -f` against `kubectl logs -l … --prefix -f`.

    KUBEBUILDER_ASSETS=$(../shared/kube/unpack) python -m bench.logs

A real control plane (tests/support/control_plane, the envtest binaries) and the kubelet
stand-in (tests/support/kubelet) run one run of 100 tasks, each writing 1,000 lines. Once
every task has written them, each client follows the run's logs to the end as a fresh
process, alternately, and prints lines per second (wall time) and CPU seconds (user +
system, from wait4), each side by side:

- `simpletfjob logs RUN -f` (every task at once, no stream limit; it ends with the run);
- `kubectl logs -l simpletfjob/job=RUN --prefix -f --max-log-requests 100`.

Both read the same 100,000 lines through pods/log; each run's output is counted to check it.
Not a test: machines are noisy, so nothing here asserts a speed.

Before the bytecode is measured, it is written (`bench.common.compile_bytecode`, for every bench), as pip writes it at
install: an editable install run with PYTHONDONTWRITEBYTECODE set (as here) would compile
its modules again on every run, 0.1 to 0.15 s of CPU that no installed copy spends.

Measured before issue 27's work (2-core machine shared with other work, load 1.4 to 3.9;
median of 3, bytecode not written): simpletfjob 3.78 s wall and 1.49 s of CPU, kubectl
18.28 s wall and 0.84 s of CPU: wall 0.21x, CPU 1.78x. Where simpletfjob's CPU went
(cProfile of every thread with a CPU clock, and `python -X importtime`):

- compiling its own modules, no bytecode being written: 0.1 to 0.15 s (see above);
- importing the kubernetes client, 0.40 to 0.47 s in a fresh Python: `kubernetes/__init__`
  imports all of the client, its dynamic client (and with it kubernetes_validate and
  jsonschema, 70 ms), watch, stream, informer and leader election; `kubernetes.utils` its
  YAML creator; the parts simpletfjob uses pull in pydantic, dateutil, oauthlib and
  requests_oauthlib (through the kubeconfig loader) and multiprocessing's pool;
- click and simpletfjob's own modules on the logs path: 0.15 to 0.2 s;
- 100 streams, each with a thread of its own, and 37 TLS handshakes for 102 requests (a
  connection is kept only when a stream ended before the next began), each loading the CA;
- the main thread prefixing 100,000 lines one by one (a check and a join per line).

What changed: the client's packages are registered without their `__init__`, which runs on
first need (kube/deferred.py, since removed, issue 36): its import is 811 -> 586 million instructions (callgrind,
after simpletfjob's own modules), 0.336 s -> 0.231 s of CPU (medians of 10, load 12); the logs of ended containers are read four at a time over kept connections
(runs/logsources.py): 4 connections for 100 pods in all, lists and watches included,
and 4 reader threads; a batch of lines is prefixed with one replace over the joined batch.

Measured after, twice (medians of 3): at load 6 to 10, simpletfjob 1.93 s wall and 0.85 s
of CPU, kubectl 18.42 s wall and 0.83 s of CPU: wall 0.10x, CPU 1.02x; at load 7 to 20,
simpletfjob 2.28 s and 0.81 s, kubectl 18.41 s and 0.86 s: wall 0.12x, CPU 0.95x. By hand on the same scene
(median of 6, load 5 to 9): 0.60 s of CPU against kubectl's 0.75 to 0.88 s. What is left:
the client's import (0.23 s: pydantic, dateutil, oauthlib, urllib3; with the garbage
collector off during it, 1% fewer instructions: not worth it), click and
simpletfjob's modules (0.2 s), the interpreter's start (0.03 s), and 102 requests through
the client's REST layer.
"""

from __future__ import annotations

import os
import shutil
import statistics
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
from tests.support.kubelet import Kubelet, Node  # noqa: E402

TASKS = 100
LINES = 1000
RUN = "logbench"
REPEATS = 3

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
          image: python
          command:
            - python
            - -c
            - |
              import json, os, sys
              task = json.loads(os.environ["TF_CONFIG"])["task"]
              out = sys.stdout
              for i in range({LINES}):
                  out.write(f"{{task['type']}}-{{task['index']}} step {{i}} loss 0.{{i:04d}}\\n")
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
          resources:
            requests:
              cpu: 1m
"""


def measure(argv: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system) and lines printed by one fresh process."""
    began = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    lines = sum(1 for _ in proc.stdout)
    said = proc.stderr.read().decode(errors="replace").splitlines()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - began
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench: {' '.join(argv)} failed: {said[-1:]}")
    if lines != TASKS * LINES:
        print(f"  {argv[0]} printed {lines} lines; it said: {said[:3]}", file=sys.stderr)
    return wall, usage.ru_utime + usage.ru_stime, lines


def main() -> None:
    assets, why = find_assets()
    if assets is None:
        sys.exit(f"bench: {why}")
    kubectl = shutil.which("kubectl")
    work = Path(tempfile.mkdtemp(prefix="simpletfjob-bench-logs-"))
    plane = start(assets, work / "plane")
    try:
        namespace = plane.create_namespace("bench")
        kubeconfig = plane.kubeconfig(work / "kubeconfig", namespace=namespace)
        node = Node("bench-node", "127.0.0.2", cpu="64", memory="256Gi", pods=TASKS + 10)
        with Kubelet(plane, [node], work / "kubelet"):
            template = work / "bench.yaml"
            template.write_text(TEMPLATE)
            subprocess.run(
                [console_script(), "apply", str(template), "--nodes", node.name,
                 "--tasks-per-host", str(TASKS), "--psn", "0", "-N", "1",
                 "--kubeconfig", str(kubeconfig), "--name", RUN],
                check=True, stdout=subprocess.DEVNULL,
            )  # fmt: skip

            def finished() -> bool:
                pods = plane.pods(namespace, f"simpletfjob/job={RUN}")
                done = [p for p in pods if p.get("status", {}).get("phase") == "Succeeded"]
                return len(done) == TASKS

            wait_for(finished, 300, "every task to write its lines")
            ours = [console_script(), "logs", RUN, "-f", "--kubeconfig", str(kubeconfig)]
            theirs = [
                kubectl or "kubectl", "--kubeconfig", str(kubeconfig), "logs", "-l",
                f"simpletfjob/job={RUN}", "--prefix", "-f", "--max-log-requests", str(TASKS),
                "--tail", "-1",
            ]  # fmt: skip
            ours_all = [*ours, "--tail", "-1"]
            results: dict[str, list[tuple[float, float, int]]] = {"ours": [], "kubectl": []}
            for _ in range(REPEATS):
                results["ours"].append(measure(ours_all))
                if kubectl:
                    results["kubectl"].append(measure(theirs))
    finally:
        plane.stop()
        shutil.rmtree(work, ignore_errors=True)
    _report(results)


def _report(results: dict[str, list[tuple[float, float, int]]]) -> None:
    total = TASKS * LINES
    print(f"logs -f of {TASKS} tasks x {LINES} lines, median of {REPEATS} runs each")
    medians = {}
    for who, runs in results.items():
        if not runs:
            print(f"  {who}: not installed")
            continue
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        seen = {r[2] for r in runs}
        medians[who] = (wall, cpu)
        print(
            f"  {who:<8} {total / wall:10,.0f} lines/s  {wall:6.2f} s wall  {cpu:6.2f} s CPU  "
            f"lines printed {sorted(seen)}"
        )
    if len(medians) == 2:
        (w1, c1), (w2, c2) = medians["ours"], medians["kubectl"]
        print(f"  ratio ours/kubectl: wall {w1 / w2:.2f}x, CPU {c1 / c2:.2f}x (lower is better)")


if __name__ == "__main__":
    main()
