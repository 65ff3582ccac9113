"""A saved 10,000-node NodeList in JSON (--nodes-file nodes.json) against json.load of the same file.

    python -m bench.nodelist       # or: python -m bench.run nodelist

The nodes are those of tests/support/kubeapi's `realistic_cluster`, written as
`kubectl get nodes -o json` writes them (a v1 List, indented by 4). Two files:
the nodes as kubelet reports them, each with its list of 36 images, and the
same nodes without their images (kubelet reports none on a fresh node). Each
whole render (`-N 4`, to a file) runs side by side with a fresh Python that
does `json.load` of the same file, and the median time and the peak RSS of
each are reported.

Not a test: machines are noisy, so nothing here asserts a speed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import ROOT, compare, console_script, line

NODES = 10_000
# The original tool's mnist template, the one the figures were measured with.
TEMPLATE = ROOT / "examples" / "mnist" / "mnist.yaml"
JSON_LOAD = "import json, sys\nwith open(sys.argv[1]) as f:\n    json.load(f)\n"


def write_node_list(path: Path, images: bool) -> float:
    """Write the saved list in a process of its own; returns its size in MB.

    Linux counts a parent's memory at fork in a child's peak RSS, so the nodes
    are not built in this process, which starts every measured run.
    """
    argv = [sys.executable, "-m", "bench.nodelist", "--write", str(path)]
    subprocess.run([*argv, "--images"] if images else argv, cwd=ROOT, check=True)
    return path.stat().st_size / 1e6


def _write(path: str, images: bool) -> None:
    from tests.support.kubeapi import realistic_cluster

    items = []
    for node in realistic_cluster(NODES):
        if not images:
            node["status"]["images"] = []
        items.append({"apiVersion": "v1", "kind": "Node", **node})
    document = {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {}}
    with open(path, "w") as f:
        json.dump(document, f, indent=4)


def run(report: Any = print, repeats: int = 3) -> dict[str, float]:
    exe = console_script()
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for images in (False, True):
            saved = work / "nodes.json"
            size = write_node_list(saved, images)
            what = "with" if images else "without"
            ours, base = compare(
                "nodelist",
                [exe, str(TEMPLATE), "--nodes-file", str(saved), "-N", "4", "-o", str(work / "out.yaml")],
                [sys.executable, "-c", JSON_LOAD, str(saved)],
                repeats=repeats,
            )  # fmt: skip
            key = "images" if images else "no_images"
            figures[f"nodelist_{key}_mb"] = size
            figures[f"nodelist_{key}_ratio"] = ours.seconds / base.seconds
            figures[f"nodelist_{key}_peak_rss_mb"] = ours.peak_rss_mb
            report(
                line(
                    f"{NODES} nodes {what} images ({size:.0f} MB) vs json.load",
                    ours.seconds,
                    base.seconds,
                    "<= 2x",
                )
            )
            report(
                f"{'  peak RSS of that render':<44} {ours.peak_rss_mb:8.1f}MB  (goal <= 300 MB; "
                f"json.load alone: {base.peak_rss_mb:.1f} MB)"
            )
            saved.unlink()
    return figures


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write"]:
        _write(sys.argv[2], "--images" in sys.argv[3:])
    else:
        run()
