"""`status` of a 1000-task run against `kubectl get jobs,pods -l simpletfjob/job=NAME -o json`,
and the requests `wait` makes.

    python -m bench.run runs       # or: python -m bench.runs

A loopback API server (tests/support/kubeapi) in this process serves one run of 1000
tasks over https with a bearer token: a Job per task and its pod, as the API server
returns them (managedFields and all), with a few runs beside it. Each client runs as a
fresh process, alternately, and the median wall time is taken; kubectl runs once first
so that it has its discovery cache.

Then `wait --timeout 5s` runs against the same server, and the requests it made are
counted: one list per resource at start, then watches (nothing polls).

Not a test: machines are noisy, so nothing here asserts a speed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import compare, console_script, line  # noqa: E402
from tests.support.kubeapi import KubeAPI, make_job, make_pod, serve, write_kubeconfig  # noqa: E402

TASKS = 1000
RUN = "bigrun"
TOKEN = "bench-token"
NS = "default"


def load_run(api: KubeAPI, run: str, tasks: int) -> None:
    """A run as apply and the Job controller leave it: 2 ps, the rest workers, each pod running."""
    jobs, pods = [], []
    for i in range(tasks):
        role, index = ("ps", i) if i < 2 else ("worker", i - 2)
        labels = {
            "app.kubernetes.io/managed-by": "simpletfjob",
            "simpletfjob/job": run,
            "simpletfjob/role": role,
            "simpletfjob/index": str(index),
        }
        job = make_job(
            f"{run}-{role}-{index}",
            NS,
            labels=labels,
            annotations={"simpletfjob/success-policy": "worker0"},
        )
        jobs.append(job)
        pods.append(
            make_pod(f"{run}-{role}-{index}-abcde", NS, node=f"node-{i}", owner=job, labels=labels)
        )
    api.load("jobs", jobs)
    api.load("pods", pods)


def run(report: Callable[[str], object] = print, repeats: int = 5) -> dict[str, float]:
    import trustme

    api = KubeAPI()
    api.add_admin(TOKEN, "bench")
    load_run(api, RUN, TASKS)
    for other in range(5):  # other runs in the namespace, which the label selector leaves out
        load_run(api, f"other{other}", 20)
    figures: dict[str, float] = {"tasks": TASKS}
    ca = trustme.CA()
    with tempfile.TemporaryDirectory() as tmp, serve(api, tls=ca):
        work = Path(tmp)
        ca.cert_pem.write_to_path(str(work / "ca.crt"))
        kubeconfig = write_kubeconfig(
            work / "kubeconfig", api.url, token=TOKEN, ca_file=work / "ca.crt", namespace=NS
        )
        ours = [console_script(), "status", RUN, "--kubeconfig", str(kubeconfig)]
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            report("kubectl is not installed: no comparison with kubectl")
        else:
            theirs = [
                kubectl, "get", "jobs,pods", "-l", f"simpletfjob/job={RUN}", "-o", "json",
                "--kubeconfig", str(kubeconfig), "--cache-dir", str(work / "kube-cache"),
            ]  # fmt: skip
            report(f"one run of {TASKS} tasks (a Job and a running pod each), over https")
            mine, base = compare("status", ours, theirs, repeats)
            figures.update(
                status_seconds=mine.seconds,
                kubectl_seconds=base.seconds,
                ratio=mine.seconds / base.seconds,
            )
            report(
                line(
                    f"status of {TASKS} tasks vs kubectl get jobs,pods",
                    mine.seconds,
                    base.seconds,
                    "<= 0.5x",
                )
            )
        figures.update(_wait_requests(report, api, kubeconfig))
    return figures


def _wait_requests(
    report: Callable[[str], object], api: KubeAPI, kubeconfig: Path
) -> dict[str, float]:
    """The requests of one `wait` that times out after 5 s: lists and watches per resource."""
    api.requests.clear()
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    done = subprocess.run(
        [console_script(), "wait", RUN, "--timeout", "5s"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    if done.returncode != 3:
        sys.exit(f"bench: wait should have timed out (exit 3): {done.returncode} {done.stderr}")
    # A list read in pages is one list: its later pages carry `continue`.
    counts = {
        (resource, verb): len(
            [r for r in api.requests_for(resource, verb) if "continue" not in r.query]
        )
        for resource in ("jobs", "pods")
        for verb in ("list", "watch")
    }
    pages = {r: len(api.requests_for(r, "list")) for r in ("jobs", "pods")}
    report(
        "wait on the same run, for 5 s: "
        + ", ".join(f"{n} {verb} of {resource}" for (resource, verb), n in counts.items())
        + f" (lists in {pages['jobs']} and {pages['pods']} pages; "
        + "goal: at most 1 list per resource, then watches)"
    )
    return {f"wait_{verb}_{resource}": float(n) for (resource, verb), n in counts.items()}


if __name__ == "__main__":
    run()
