"""Offline rendering: cold start, 1000 hosts to a file, and the memory that takes.

Where the 1000-host render of examples/mnist/mnist.yaml spends its time (cProfile,
one run each; a 2-core machine with other work, load 2 to 3):

- before (each task rendered on its own): 1.06 s profiled, of which 0.74 s rendering
  the tasks (0.38 s composing and checking each task's YAML, the rest jinja and the
  labels), 0.20 s importing, 0.11 s writing the 49 MB (0.04 s of it the fsync) and
  0.10 s compiling the template (with jinja's environment);
- after (a role of many tasks rendered once as a skeleton, each task's values written
  in: manifest/skeleton.py): 0.42 s profiled, of which 0.10 s for the tasks (two full
  renders for the workers' skeleton, 0.04 s filling in 999 tasks), and the same
  imports (0.18 s), writing (0.13 s) and compiling (0.09 s), which are now most of it.

In instructions (`python -m bench.versus` against the previous install, valgrind):
1689M before, 691M after (0.41x); the 3-host cold start, where every role has fewer
than skeleton.MIN_TASKS tasks, is unchanged (478M and 480M; `python -c pass` is 88M,
importing click, jinja2 and yaml alone 403M).

Side by side in one run (this module, load about 2): 1000 hosts vs copy+fsync 0.38 s
vs 0.17 s, 2.22x (the previous install, in the same minute: 3.70x); cold start 4.39x
(4.63x); peak RSS 28 MB.

Issue 36 (2026-05, load about 1, non-editable installs side by side, the fastest of 30
runs; 1000 hosts: of 8): the console script no longer leaves with os._exit nor raises the
collector's threshold, and the option groups are dataclasses. A 3-host render against
`python -c pass`, before: 97.5 to 100.7 ms, 9.2x to 9.4x; after, without `gc.freeze()` as
the process ends: 126.9 ms, 12.1x; with it (streams.leave): 112.3 to 116.7 ms, 10.5x to
11.0x. The 1000-host render: 184 to 199 ms before; 260 ms without gc.freeze; 206 to 232
ms with it. In instructions (callgrind), the 3-host render: 488M before, 581M after; the
interpreter's own end +41M (most of it its last collections over every object, which
gc.freeze skips: -31M); the dataclasses +76M; `python -c pass` is 38M, and importing
click, jinja2 and yaml alone 334M of the 581M.

Later in issue 36 (the same installs side by side, the median of 20 paired runs, load
about 2): a template of text and bare `<<name>>` alone, as the mnist examples are, is
written out without importing or compiling jinja (template/bare.py). The 3-host render
against `python -c pass`: before, 118 ms vs 11.1 ms, 10.6x; after, 91 ms vs 11.2 ms,
8.15x (in CPU time 10.9x and 8.2x); at load 3 to 5, 133 ms (11.0x) and 96 ms (8.3x). The 1000-host render: 240 ms before, 208 ms after
(load 4). In instructions (`bench.versus`): 590M before, 457M after (0.775x); 817M and
685M for 1000 hosts. Of the 457M, importing click and yaml alone is 272M; the rest is
our own imports, most of all the option groups' dataclasses (about 50M: their methods
are generated and compiled at import) and, within yaml's share, the one regular
expression yaml/reader.py compiles at import (`Reader.NON_PRINTABLE`, about 57M; not
ours to avoid: the package imports it whatever loader is used).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import ROOT, compare, console_script, line, run_once

# The original tool's mnist template, the one the figures were measured with.
TEMPLATE = ROOT / "examples" / "mnist" / "mnist.yaml"


def realistic_hosts(n: int) -> list[str]:
    """Node names as a cloud provider gives them (about 38 characters)."""
    return [f"ip-10-{i // 250}-{i % 250}-{i % 7}.us-west-2.compute.internal" for i in range(n)]


def run(report: Any = print, repeats: int = 7) -> dict[str, float]:
    exe = console_script()
    py = sys.executable
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        out3 = work / "three.yaml"
        ours, base = compare(
            "cold start",
            [exe, str(TEMPLATE), "--nodes", "h1,h2,h3", "-o", str(out3)],
            [py, "-c", "pass"],
            repeats=repeats * 3,
        )
        figures["cold_start_ratio"] = ours.seconds / base.seconds
        report(
            line("cold start: 3-host render vs python -c pass", ours.seconds, base.seconds, "<= 8x")
        )
        floor, base = compare(
            "floor",
            [py, "-c", "import click, yaml"],
            [py, "-c", "pass"],
            repeats=repeats * 3,
        )
        figures["import_floor_ratio"] = floor.seconds / base.seconds
        report(line("  the floor: importing click and yaml", floor.seconds, base.seconds, "-"))

        hosts = work / "hosts"
        hosts.write_text("\n".join(realistic_hosts(1000)) + "\n")
        out = work / "out.yaml"
        render = [exe, str(TEMPLATE), "--nodes-file", str(hosts), "-o", str(out)]
        run_once(render)
        size_mb = out.stat().st_size / 1e6
        copy_fsync = (
            "import os,sys\n"
            "d=open(sys.argv[1],'rb').read()\n"
            "with open(sys.argv[2],'wb') as f:\n"
            " f.write(d); f.flush(); os.fsync(f.fileno())\n"
        )
        copy_plain = (
            "import sys\nd=open(sys.argv[1],'rb').read()\nopen(sys.argv[2],'wb').write(d)\n"
        )
        copy = str(work / "copy.yaml")
        ours, base = compare(
            "1000", render, [py, "-c", copy_fsync, str(out), copy], repeats=repeats
        )
        figures["hosts_1000_ratio"] = ours.seconds / base.seconds
        figures["hosts_1000_peak_rss_mb"] = ours.peak_rss_mb
        figures["hosts_1000_output_mb"] = size_mb
        report(
            line(
                f"1000 hosts ({size_mb:.0f} MB) vs copy+fsync",
                ours.seconds,
                base.seconds,
                "<= 3x",
            )
        )
        _, plain = compare("1000", render, [py, "-c", copy_plain, str(out), copy], repeats=repeats)
        figures["hosts_1000_ratio_no_fsync"] = ours.seconds / plain.seconds
        report(
            line(
                "1000 hosts vs copy without fsync (we fsync)",
                ours.seconds,
                plain.seconds,
                "for reference",
            )
        )
        report(
            f"{'peak RSS, 1000-host render':<44} {ours.peak_rss_mb:8.1f}MB  (goal <= 150 MB; "
            f"the copying process: {base.peak_rss_mb:.1f} MB)"
        )
        # The same template for PyTorch: its env entries where TF_CONFIG's entry stood.
        torch_template = work / "mnist-pytorch.yaml"
        torch_template.write_text(pytorch_variant(TEMPLATE.read_text()))
        torch_out = work / "torch.yaml"
        torch_render = [
            exe, str(torch_template), "--framework", "pytorch",
            "--nodes-file", str(hosts), "-o", str(torch_out),
        ]  # fmt: skip
        torch, tf = compare("1000 pytorch", torch_render, render, repeats=repeats)
        figures["pytorch_1000_vs_tensorflow_ratio"] = torch.seconds / tf.seconds
        report(
            line(
                f"1000 hosts, pytorch ({torch_out.stat().st_size / 1e6:.1f} MB) vs tensorflow",
                torch.seconds,
                tf.seconds,
                "<= 1x",
            )
        )
    return figures


def pytorch_variant(text: str) -> str:
    """The template with its TF_CONFIG env entry replaced by PyTorch's env entries."""
    entry = "            - name: TF_CONFIG\n              value: >\n<<TF_CONFIG>>\n"
    assert entry in text, "the bench template's TF_CONFIG entry has moved"
    return text.replace(entry, "            <<TORCH_ENV>>\n")


if __name__ == "__main__":
    run()
