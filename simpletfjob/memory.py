"""The process's memory once a run is read and about to be followed, maybe for hours.

Two steps, both taken by runs/watch.py's `follow` after its first lists, both doing nothing
where the system cannot:

- `release_freed`: the pages the lists' parsing left freed go back to the system (glibc's
  `malloc_trim`), so that a follower does not hold them all along.
- `fold_for_exit`: in the console script's process only (streams.exits_at_once), the memory
  it keeps is folded into 2 MiB pages, in a thread of its own, while the run is followed.

Why the second: the moment a run's verdict is due, what is left is the end of the process,
and the system takes it down a 4 KiB page at a time. Measured here, that costs about 0.13 ms
per resident MB: 10 to 13 ms for `wait` following 1000 tasks (80 MB, 41 of them the Python
interpreter and the kubernetes client), where `kubectl wait`'s whole reaction after the event
is 5 to 8 ms. The same memory held in 2 MiB pages ends in a tenth of that. Linux (6.1 and
later) folds a range in place on `madvise(MADV_COLLAPSE)`, whatever the system's setting for
huge pages but "never"; it costs 30 to 120 ms of one thread's time, once, and the resident
size hardly moves, because only the 2 MiB ranges that are at least half there are folded.

It is not done from the Python API: that process is the caller's (a notebook, a pipeline
step), which goes on after the run, and whose memory is not the library's to rearrange.
"""

from __future__ import annotations

import os
import sys
import threading

from simpletfjob import streams

HUGE = 2 << 20  # bytes in a huge page (x86-64 and arm64 with 4 KiB pages)
PAGE = 4096
MADV_COLLAPSE = 25
_FOLDED = [False]


def release_freed() -> None:
    """Give the memory a list's pages left freed back to the system, where the C library can.

    A list of 1000 Jobs and pods is parsed page by page, and what of each page is not kept is
    freed; the C library's allocator keeps the freed pages for itself (RSS), and a caller that
    then follows the run for hours holds them all along, and pays for them again at exit. glibc's
    `malloc_trim` returns them (about 1 ms, 15 to 20 MB at 1000 tasks); elsewhere, nothing.
    """
    try:
        import ctypes

        trim = ctypes.CDLL(None).malloc_trim
    except (ImportError, OSError, AttributeError, TypeError):  # not glibc, or no ctypes
        return
    trim(0)


def fold_for_exit() -> threading.Thread | None:
    """In the console script's process, on Linux, fold the memory it holds into huge pages,
    in a daemon thread (returned; None where nothing is done). Once per process."""
    if not streams.exits_at_once() or not sys.platform.startswith("linux") or _FOLDED[0]:
        return None
    if os.sysconf("SC_PAGE_SIZE") != PAGE:
        return None
    _FOLDED[0] = True
    thread = threading.Thread(target=fold, name="simpletfjob-fold", daemon=True)
    thread.start()
    return thread


def fold() -> int:
    """Fold each 2 MiB range of this process's own writable memory that is at least half
    resident into a huge page; the number folded (0 where the system cannot)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        madvise.restype = ctypes.c_int
        ranges = list(foldable(_anonymous()))
    except (ImportError, OSError, AttributeError, ValueError):
        return 0
    folded = 0
    for start in ranges:
        if madvise(start, HUGE, MADV_COLLAPSE) == 0:
            folded += 1
        elif ctypes.get_errno() in (22, 1, 38):  # EINVAL, EPERM, ENOSYS: not on this system
            break
    return folded


def _anonymous() -> list[tuple[int, int]]:
    """The 2 MiB-aligned parts of this process's private writable memory that no file backs
    (the C heap, Python's arenas, threads' stacks): (start, end) pairs."""
    regions = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) < 5 or fields[1] != "rw-p" or fields[4] != "0":  # inode 0: no file
                continue
            if len(fields) > 5 and fields[5] != "[heap]":  # [stack], [vvar], ...
                continue
            low, high = (int(x, 16) for x in fields[0].split("-"))
            low = -(-low // HUGE) * HUGE
            high = high // HUGE * HUGE
            if high > low:
                regions.append((low, high))
    return regions


def foldable(regions: list[tuple[int, int]], pagemap: str = "/proc/self/pagemap") -> list[int]:
    """The starts of the 2 MiB ranges of `regions` with at least half their pages resident
    (bit 63 of each page's entry in /proc/self/pagemap): a range mostly empty, such as the
    unused depth of a thread's stack, would be made wholly resident by folding it."""
    starts = []
    with open(pagemap, "rb", buffering=0) as entries:
        for low, high in regions:
            for start in range(low, high, HUGE):
                entries.seek(start // PAGE * 8)
                data = entries.read(HUGE // PAGE * 8)
                present = sum(data[i] >> 7 for i in range(7, len(data), 8))
                if present * 2 >= HUGE // PAGE:
                    starts.append(start)
    return starts
