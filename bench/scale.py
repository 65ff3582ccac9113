"""Acting on a large run, against the real control plane with 1000 Node objects: `apply`
against `kubectl apply --server-side -f` of the very same render, and `delete --wait`
against `kubectl delete jobs,services -l simpletfjob/job=NAME --wait`, at 10, 100 and 1000
tasks, side by side in one run.

    python -m bench.run scale        # or: python -m bench.scale [--tasks 10,100] [--repeats 3]

It needs $KUBEBUILDER_ASSETS (../shared/kube/unpack prints it) and kubectl on PATH; both
tools are given the same kubeconfig. Each apply goes to a fresh namespace, so that both
create every object; the render kubectl applies is `simpletfjob render` of the same
template, hosts and namespace. Each timing is the median of `--repeats` fresh processes,
the two tools taking turns. There is no kubelet: the Jobs' pods stay Pending.

Where apply's time went, counted under cProfile at 1000 tasks on a loaded 2-core machine
(the API server on the same cores):
- before: 4002 requests, one after the other: a GET of each object the run's list did not
  have (whether a name is taken by another's object), a server dry run of each, then for
  each a GET again and the apply; and the client's token hook set the host before every
  request, which read the whole environment for a proxy again (1 ms a request).
  In-process, 54 s of wall time (the machine busy): 12 s of dry runs, 22 s of applies (each
  with its GET), the first GETs the rest; 1.6 s in the proxy reads of the main thread alone.
- after: the same requests, the proxy read once per connection (2 reads in all, not 4000),
  and the GETs and dry runs `in_flight` (8) at a time, in the render's order; the real
  applies still go one at a time, each after a GET, and are now most of the time.

Measured on 2026-11-27, the machine loaded by other work (2 cores), one repeat each:

    apply, 10 tasks                3.07 s vs  0.96 s   3.20x   (goal <= 0.5x)
    delete --wait, 10 tasks        1.32 s vs  0.43 s   3.05x   (goal <= 1.0x)
    apply, 100 tasks               4.75 s vs  1.57 s   3.03x
    delete --wait, 100 tasks       1.99 s vs 19.27 s   0.10x
    apply, 1000 tasks             32.42 s vs 34.66 s   0.94x   (1.57x before)
    delete --wait, 1000 tasks     20.66 s vs 218.8 s   0.09x

At 10 and 100 tasks most of apply's time is what kubectl does not do: the plan, which reads
the 1000 nodes and their pods to choose the hosts, and the client's import.

Not a test: machines are noisy, so nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import console_script, line  # noqa: E402
from tests.support.control_plane import find_assets, start  # noqa: E402

NODES = 1000
TASKS = (10, 100, 1000)
TEMPLATE = ROOT / "examples" / "mnist.yaml"
PORTS = itertools.count(20000)


def _timed(argv: Sequence[str], env: dict[str, str]) -> float:
    began = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"bench: {' '.join(argv)} failed: {done.stderr.strip()[-500:]}")
    return took


def run(
    report: Callable[[str], object] = print,
    tasks: Sequence[int] = TASKS,
    repeats: int = 1,
) -> dict[str, float]:
    assets, why = find_assets()
    kubectl = shutil.which("kubectl")
    if assets is None or kubectl is None:
        report(f"  skipped: {why or 'kubectl is not on PATH'}")
        return {}
    ours = console_script()
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        plane = start(assets, work / "plane")
        try:
            kubeconfig = plane.kubeconfig(work / "kubeconfig")
            env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
            began = time.perf_counter()
            for i in range(NODES):
                plane.create_node(f"node-{i:04d}")
            report(f"  {NODES} nodes made in {time.perf_counter() - began:.1f} s")
            for count in tasks:
                figures.update(_one_size(report, plane, ours, kubectl, env, work, count, repeats))
        finally:
            plane.stop()
    return figures


def _one_size(
    report: Callable[[str], object],
    plane: object,
    ours: str,
    kubectl: str,
    env: dict[str, str],
    work: Path,
    count: int,
    repeats: int,
) -> dict[str, float]:
    create_namespace = plane.create_namespace  # type: ignore[attr-defined]
    times: dict[str, list[float]] = {
        "apply": [],
        "kubectl apply": [],
        "delete": [],
        "kubectl delete": [],
    }
    name = f"scale{count}"
    for _ in range(repeats):
        # Without a kubelet, the pods of a deleted run stay, holding their host port: each
        # run takes a port of its own, so that every node stays eligible.
        hosts = ["-N", str(count), "--name", name, "--port", str(next(PORTS))]
        ns = create_namespace(prefix=f"s{count}")
        times["apply"].append(_timed([ours, "apply", str(TEMPLATE), *hosts, "-n", ns], env))
        times["delete"].append(_timed([ours, "delete", name, "-n", ns, "--wait"], env))
        hosts = ["-N", str(count), "--name", name, "--port", str(next(PORTS))]
        ns = create_namespace(prefix=f"k{count}")
        rendered = work / f"{ns}.yaml"
        _timed([ours, "render", str(TEMPLATE), *hosts, "-n", ns, "-o", str(rendered)], env)
        apply_argv = [kubectl, "apply", "--server-side", "-f", str(rendered), "-n", ns]
        times["kubectl apply"].append(_timed(apply_argv, env))
        selector = f"simpletfjob/job={name}"
        delete_argv = [kubectl, "delete", "jobs,services", "-l", selector, "-n", ns, "--wait"]
        times["kubectl delete"].append(_timed(delete_argv, env))
    median = {what: statistics.median(seconds) for what, seconds in times.items()}
    report(line(f"apply, {count} tasks", median["apply"], median["kubectl apply"], "<= 0.5x"))
    report(
        line(f"delete --wait, {count} tasks", median["delete"], median["kubectl delete"], "<= 1.0x")
    )
    return {f"{what} {count}": seconds for what, seconds in median.items()}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scale")
    parser.add_argument("--tasks", default=",".join(map(str, TASKS)))
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)
    run(tasks=[int(t) for t in args.tasks.split(",")], repeats=args.repeats)


if __name__ == "__main__":
    main(sys.argv[1:])
