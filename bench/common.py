"""Helpers for the benchmarks: run a command as a fresh process, time it, read its peak RSS."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Run:
    seconds: float
    peak_rss_mb: float


def console_script() -> str:
    """The installed `simpletfjob`, its bytecode written (compile_bytecode)."""
    beside = Path(sys.executable).parent / "simpletfjob"
    found = str(beside) if beside.exists() else shutil.which("simpletfjob")
    if not found:
        sys.exit("bench: install the project first (pip install .)")
    compile_bytecode()
    return found


@cache
def compile_bytecode() -> None:
    """Write the bytecode of the simpletfjob that runs, as pip does when it installs it: an
    editable install run with PYTHONDONTWRITEBYTECODE set has none, and each run would
    compile its modules again (0.1 to 0.15 s of CPU, which no installed copy spends). Once
    per bench process."""
    where = subprocess.run(
        [sys.executable, "-c", "import simpletfjob, os; print(os.path.dirname(simpletfjob.__file__))"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    subprocess.run([sys.executable, "-m", "compileall", "-q", where], check=True)


def run_once(argv: Sequence[str], cwd: Path | None = None) -> Run:
    """Start argv, wait for it, and return its wall time and its own peak RSS."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        sys.exit(f"bench: {' '.join(argv)} failed: {err.strip()}")
    return Run(elapsed, usage.ru_maxrss / 1024)


def compare(
    label: str, ours: Sequence[str], baseline: Sequence[str], repeats: int, cwd: Path | None = None
) -> tuple[Run, Run]:
    """Run both commands alternately `repeats` times; return the medians (time) and max RSS."""
    run_once(ours, cwd)  # warm the page cache and the bytecode cache
    run_once(baseline, cwd)
    a: list[Run] = []
    b: list[Run] = []
    for _ in range(repeats):
        a.append(run_once(ours, cwd))
        b.append(run_once(baseline, cwd))
    mine = Run(statistics.median(r.seconds for r in a), max(r.peak_rss_mb for r in a))
    base = Run(statistics.median(r.seconds for r in b), max(r.peak_rss_mb for r in b))
    return mine, base


def line(label: str, mine: float, base: float, goal: str, unit: str = "s") -> str:
    ratio = mine / base if base else float("inf")
    return f"{label:<44} {mine:8.3f}{unit} vs {base:8.3f}{unit}  ratio {ratio:6.2f}x  (goal {goal})"
