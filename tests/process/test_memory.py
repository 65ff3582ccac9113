"""The memory a follower keeps, folded into huge pages for a quick end (simpletfjob/memory.py).

What is folded: only the 2 MiB ranges at least half resident, read from a pagemap (unit).
What folding does to a process (its own, so the test process's memory is left alone): its
anonymous memory ends up in huge pages and its resident size hardly moves, where the
system can; and only the console script's process folds (the Python API's caller's does not).
"""

from __future__ import annotations

import sys
from pathlib import Path

from simpletfjob import memory

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
