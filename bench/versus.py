"""This install against another (an earlier version, say): a cold start and 1000 hosts, side by side.

    python -m bench.versus /path/to/other/venv/bin/simpletfjob

Both commands render the same template for the same hosts, alternately, and the
ratios are this install's median over the other's: below 1 is faster. Where
valgrind is installed, each render's instruction count (callgrind) is compared
too: a count that machine noise does not move. The two outputs must be the same
bytes, or the comparison would not be of the same work, unless --labels-differ
says that the versions label documents differently (`--no-labels` is then added
to a second, byte-checked comparison).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import compare, console_script, line
from bench.render import TEMPLATE, realistic_hosts


def instructions(argv: list[str], cwd: Path) -> int | None:
    """The instructions a run executes, counted by callgrind; None without valgrind."""
    if shutil.which("valgrind") is None:
        return None
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r"Collected : (\d+)", proc.stderr)
    return int(found[1]) if found else None


def side_by_side(label: str, ours: list[str], theirs: list[str], cwd: Path, repeats: int) -> None:
    mine, other = compare(label, ours, theirs, repeats=repeats, cwd=cwd)
    print(line(f"{label}: wall time", mine.seconds, other.seconds, "<= 1x"))
    a, b = instructions(ours, cwd), instructions(theirs, cwd)
    if a is not None and b is not None:
        print(
            f"{label + ': instructions':<44} {a / 1e6:8.1f}M vs {b / 1e6:8.1f}M  ratio {a / b:6.3f}x"
        )


def run(argv: list[str] | None = None, repeats: int = 9) -> None:
    args = sys.argv[1:] if argv is None else argv
    labels_differ = "--labels-differ" in args
    others = [a for a in args if a != "--labels-differ"]
    if len(others) != 1:
        sys.exit("usage: python -m bench.versus [--labels-differ] OTHER_SIMPLETFJOB")
    other, ours = others[0], console_script()
    if shutil.which(other) is None:
        sys.exit(f"bench: {other} is not an executable simpletfjob")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "hosts").write_text("\n".join(realistic_hosts(1000)) + "\n")
        for extra in ([], ["--no-labels"]) if labels_differ else ([],):
            common = [str(TEMPLATE), "--nodes-file", "hosts", *extra]
            for who, exe in (("ours", ours), ("theirs", other)):
                done = subprocess.run(
                    [exe, *common, "-o", f"{who}.yaml"], cwd=work, capture_output=True, text=True
                )
                if done.returncode != 0:
                    sys.exit(f"bench: {exe} failed: {done.stderr.strip()}")
            same = (work / "ours.yaml").read_bytes() == (work / "theirs.yaml").read_bytes()
            if not same and not (labels_differ and not extra):
                sys.exit("bench: the two versions render different output; see --labels-differ")
            suffix = f" {' '.join(extra)}" if extra else ""
            side_by_side(
                f"cold start (3 hosts){suffix}",
                [ours, str(TEMPLATE), "--nodes", "h1,h2,h3", *extra, "-o", "three.yaml"],
                [other, str(TEMPLATE), "--nodes", "h1,h2,h3", *extra, "-o", "three.yaml"],
                work,
                repeats * 3,
            )
            side_by_side(
                f"1000 hosts{suffix}",
                [ours, *common, "-o", "ours.yaml"],
                [other, *common, "-o", "theirs.yaml"],
                work,
                repeats,
            )


if __name__ == "__main__":
    run()
