"""The memory a follower keeps, folded into huge pages for a quick end (simpletfjob/memory.py).

What is folded: only the 2 MiB ranges at least half resident, read from a pagemap (unit).
What folding does to a process (its own, so the test process's memory is left alone): its
anonymous memory ends up in huge pages and its resident size hardly moves, where the
system can; and only the console script's process folds (the Python API's caller's does not).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from simpletfjob import memory, streams
from tests.conftest import ROOT, cannot_fold

HUGE = memory.HUGE
ENTRIES = HUGE // memory.PAGE  # pagemap entries in one 2 MiB range
PRESENT = (1 << 63).to_bytes(8, sys.byteorder)  # pagemap's entries are native-endian
ABSENT = bytes(8)


def pagemap(path: Path, chunks: list[int]) -> Path:
    """A pagemap of consecutive 2 MiB ranges from address 0, `chunks[i]` pages of range i present."""
    data = b"".join(PRESENT * n + ABSENT * (ENTRIES - n) for n in chunks)
    path.write_bytes(data)
    return path


def test_only_ranges_at_least_half_resident_are_foldable(tmp_path: Path) -> None:
    half = ENTRIES // 2
    entries = pagemap(tmp_path / "pagemap", [ENTRIES, half, half - 1, 0, 3, ENTRIES])
    starts = memory.foldable([(0, 3 * HUGE), (4 * HUGE, 6 * HUGE)], str(entries))
    assert starts == [0, HUGE, 5 * HUGE]


def test_the_ranges_are_the_aligned_parts_of_private_anonymous_memory() -> None:
    regions = memory._anonymous()
    assert regions, "a Python process has a heap and arenas"
    for low, high in regions:
        assert low % HUGE == 0 and high % HUGE == 0 and high > low
    maps = Path("/proc/self/maps").read_text().splitlines()
    files = [line for line in maps if len(line.split()) > 5 and line.split()[5].startswith("/")]
    for line in files:  # no range of a file's mapping is ever taken
        low, high = (int(x, 16) for x in line.split()[0].split("-"))
        assert all(high <= a or b <= low for a, b in regions), line


def test_the_python_api_never_folds() -> None:
    assert not streams.exits_at_once()  # main() in-process, as the API's caller runs it
    assert memory.fold_for_exit() is None


# A process of its own: 96 MiB of its memory written, then folded as `wait` folds it.
CHILD = """
import json, sys
from simpletfjob import memory, streams

def rollup():
    out = {}
    for line in open("/proc/self/smaps_rollup"):
        parts = line.split()
        if len(parts) == 3 and parts[2] == "kB":
            out[parts[0].rstrip(":")] = int(parts[1])
    return out

held = [bytearray(b"x" * 4096) for _ in range(24 * 1024)]
before = rollup()
streams.exit_at_once() if sys.argv[1] == "console" else None
thread = memory.fold_for_exit()
if thread is not None:
    thread.join()
again = memory.fold_for_exit()
print(json.dumps({"thread": thread is not None, "again": again is not None,
                  "before": before, "after": rollup()}))
"""


def run_child(mode: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen: dict[str, Any] = json.loads(done.stdout)
    return seen


def test_the_console_scripts_process_folds_its_memory_once_and_stays_its_size() -> None:
    why = cannot_fold()
    if why:
        pytest.skip(why)
    seen = run_child("console")
    assert seen["thread"] and not seen["again"]  # a thread, once per process
    before, after = seen["before"], seen["after"]
    assert after["AnonHugePages"] >= 64 * 1024  # most of its 96 MiB, in kB
    assert after["Rss"] <= before["Rss"] + 8 * 1024  # at most a few ranges made whole


def test_a_process_that_is_not_the_console_scripts_does_not_fold() -> None:
    seen = run_child("api")
    assert not seen["thread"] and not seen["again"]
    assert seen["after"]["AnonHugePages"] <= seen["before"]["AnonHugePages"]
