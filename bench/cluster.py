"""Reading 5000 nodes from a cluster: simpletfjob against the default client and kubectl, and its memory.

    python -m bench.cluster        # or: python bench/cluster.py

A loopback API server (tests/support/kubeapi) serves 5000 realistic nodes (about
9 KB of JSON each, 46 MB in all) over https with a bearer token, in this process; every client runs as a
fresh process against it, alternately, and the median wall time is taken:

- a whole `simpletfjob` run (an offline template, -N 8, written to a file)
  against a script that calls `CoreV1Api().list_node()` the default way;
- the same run against `kubectl get nodes -o name` (if kubectl is installed),
  after one warm-up run so that kubectl has its discovery cache;
- the peak RSS of the simpletfjob run.

Not a test: machines are noisy, so nothing here asserts a speed.

Measured (2-core machine shared with other work): 2.46 s vs 8.96 s, 0.27x, at load 2 to 7
(the goal is 0.15x); 4.6x faster than kubectl. Two more runs at load 7 to 25 gave 0.27x for
this version and 0.22x for the previous one, minutes apart: too noisy to tell them apart.
Where the run's time goes (cProfile, 2.0 s profiled): importing, 0.82 s (the kubernetes
client is 0.35 to 0.47 s of CPU on its own); reading the two pages, 0.97 s: json 0.24 s,
the Node values 0.30 s, cutting the images 0.16 s, waiting for the next page 0.10 s.
Changed: the server is named once for the whole list's messages, not formatted and
redacted for each of the 5000 nodes, and the images patterns are compiled once per page,
not looked up in re's cache twice per node. The client's import is what is left to win.

Then (2026-11-27): the bytecode of simpletfjob is written before anything is measured, as
pip writes it at install (bench.common.compile_bytecode: this machine sets
PYTHONDONTWRITEBYTECODE, and an editable install then compiled every module again on each
run); the client's package __init__ was no longer run (kube/deferred.py, since removed, issue 36); and each page is
decoded by msgspec straight into the fields simpletfjob reads (hosts/nodepage.py, since folded), the
careful decoder kept for any page with something unusual in them. Where the run's time
went before that last step (cProfile, 1.2 s wall): json 0.22 s, the Node values 0.29 s,
cutting the images 0.07 s, importing most of the rest. Side by side, load 1.5 to 3:

    before msgspec:  1.124 s vs 6.480 s   0.173x
    after:           0.906 s vs 7.166 s   0.126x   (goal <= 0.15x); 10.2x faster than kubectl
    again:           0.926 s vs 7.772 s   0.119x

Then (2026-11-29, issue 36: one decoding per kind of object): nodepage.py's second node
decoder is gone; msgspec skims each page to the fields read (hosts/pages.py) and the one
decoder, `node_from_object`, reads them. The two side by side, the same interpreter and
server, 13 runs each at load 6 to 7: CPU 0.713 s before vs 0.732 s after (medians; minima
0.681 s vs 0.620 s), wall too noisy to tell; bench.cluster right after, 0.653 s before vs
0.623 s after (0.135x and 0.098x of list_node(), whose own time ran 4.3 to 6.4 s). In
process, the ten pages alone take about 60 ms the old way and 140 ms the new. Again at the
end of that round's cuts, 15 runs each at load 5: wall 1.329 s before vs 1.292 s after,
CPU 0.683 s vs 0.687 s (medians).
"""

from __future__ import annotations

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

from bench.common import compile_bytecode  # noqa: E402
from tests.support.kubeapi import write_kubeconfig  # noqa: E402

NODES = 5000
TOKEN = "bench-token"
# The original tool's mnist template, the one the figures were measured with.
TEMPLATE = ROOT / "examples" / "mnist" / "mnist.yaml"

DEFAULT_CLIENT = """\
import sys
from kubernetes import client, config
config.load_kube_config(config_file=sys.argv[1])
nodes = client.CoreV1Api().list_node()
print(len(nodes.items), file=sys.stderr)
"""


def _simpletfjob() -> list[str]:
    compile_bytecode()
    beside = Path(sys.executable).parent / "simpletfjob"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("simpletfjob")
    return [found] if found else [sys.executable, "-m", "simpletfjob"]


def _run_once(argv: Sequence[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one fresh process; fails loudly if it fails."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env
    )
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"bench: {' '.join(argv)} failed: {err.strip()}")
    return elapsed, usage.ru_maxrss / 1024


def _medians(
    commands: dict[str, Sequence[str]], repeats: dict[str, int], env: dict[str, str]
) -> dict[str, tuple[float, float]]:
    """Each command once to warm up, then in turns; the median time and the largest RSS of each."""
    for argv in commands.values():
        _run_once(argv, env)
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for turn in range(max(repeats.values())):
        for name, argv in commands.items():
            if turn < repeats[name]:
                runs[name].append(_run_once(argv, env))
    return {
        name: (statistics.median(t for t, _ in r), max(m for _, m in r)) for name, r in runs.items()
    }


def _line(label: str, mine: float, base: float, goal: str) -> str:
    return f"{label:<52} {mine:7.3f}s vs {base:7.3f}s  ratio {mine / base:6.3f}x  (goal {goal})"


def _start_server(work: Path) -> tuple[subprocess.Popen[str], str, float]:
    """The loopback API server as its own process (tests/support/kubeapi/__main__.py); its URL and MB served."""
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.kubeapi",
            "--nodes",
            str(NODES),
            "--token",
            TOKEN,
            "--tls",
            str(work),
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    url, node_bytes, _pod_bytes = server.stdout.readline().split()
    return server, url, int(node_bytes) / 1e6


def run(report: Callable[[str], object] = print, repeats: int = 5) -> dict[str, float]:
    """Measure and report each figure as a line; return the figures."""
    figures: dict[str, float] = {"nodes": NODES}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        # The server runs in its own process: Linux counts a parent's memory at
        # fork in a child's peak RSS, so this process must stay small.
        server, url, size_mb = _start_server(work)
        try:
            figures["node_list_mb"] = size_mb
            # https, as clusters are: kubectl sends no bearer token over plain http.
            kubeconfig = write_kubeconfig(
                work / "kubeconfig", url, token=TOKEN, ca_file=work / "ca.crt"
            )
            figures.update(_measure(report, work, kubeconfig, size_mb, repeats))
        finally:
            assert server.stdin is not None
            server.stdin.close()
            server.wait(timeout=30)
    return figures


def _measure(
    report: Callable[[str], object], work: Path, kubeconfig: Path, size_mb: float, repeats: int
) -> dict[str, float]:
    script = work / "default_client.py"
    script.write_text(DEFAULT_CLIENT)
    env = {**os.environ, "HOME": str(work), "KUBECONFIG": str(kubeconfig)}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    ours = [*_simpletfjob(), str(TEMPLATE), "--kubeconfig", str(kubeconfig)]
    ours += ["-N", "8", "-o", str(work / "out.yaml")]
    commands: dict[str, Sequence[str]] = {
        "simpletfjob": ours,
        "default client": [sys.executable, str(script), str(kubeconfig)],
    }
    counts = {"simpletfjob": repeats, "default client": max(1, repeats // 2)}
    kubectl = shutil.which("kubectl")
    if kubectl:
        commands["kubectl"] = [
            kubectl, "get", "nodes", "-o", "name", "--kubeconfig", str(kubeconfig),
            "--cache-dir", str(work / "kube-cache"),
        ]  # fmt: skip
        counts["kubectl"] = max(1, repeats // 2)
    report(f"{NODES} nodes, {size_mb:.0f} MB of node JSON, from a loopback API server over https")
    results = _medians(commands, counts, env)

    figures: dict[str, float] = {}
    mine, peak = results["simpletfjob"]
    base, base_peak = results["default client"]
    figures.update(
        simpletfjob_seconds=mine,
        default_client_seconds=base,
        default_client_ratio=mine / base,
        peak_rss_mb=peak,
        default_client_peak_rss_mb=base_peak,
    )
    report(_line("simpletfjob run vs CoreV1Api().list_node()", mine, base, "<= 0.15x"))
    if "kubectl" in results:
        kube, _ = results["kubectl"]
        figures.update(kubectl_seconds=kube, kubectl_speedup=kube / mine)
        report(_line("simpletfjob run vs kubectl get nodes -o name", mine, kube, "<= 0.2x"))
        report(f"{'':<52} simpletfjob is {kube / mine:.1f}x faster than kubectl (goal >= 5x)")
    else:
        report("kubectl is not installed: no comparison with kubectl")
    report(
        f"{'peak RSS, simpletfjob with ' + str(NODES) + ' nodes':<52} {peak:7.1f}MB "
        f"(goal <= 200 MB; the default client: {base_peak:.0f} MB)"
    )
    return figures


if __name__ == "__main__":
    run()
