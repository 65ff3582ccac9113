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
is 5 to 8 ms. The same memory held in 2 MiB pages ends in less than half that. Linux (6.1
and later) copies a range into a new huge page on `madvise(MADV_COLLAPSE)`; it is asked only
where the system's setting for huge pages is not "never" and the process's own is not off
(prctl PR_SET_THP_DISABLE), with 4 KiB pages and 2 MiB huge pages. It costs 30 to 120 ms of
one thread's time, once, and the resident size hardly moves, because only the 2 MiB ranges
that are at least half there are folded. `wait`, `run`, `status -w` and `logs -f` follow a
run this way (runs/watch.py `follow`).

It is not done from the Python API: that process is the caller's (a notebook, a pipeline
step), which goes on after the run, and whose memory is not the library's to rearrange.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
import threading
from typing import Any

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
    trim = getattr(_libc(), "malloc_trim", None)  # glibc's
    if trim is not None:
        trim(0)


@functools.cache
def _libc() -> Any:
    """The process's C library through ctypes (errno kept), or None without ctypes."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True)
    except (ImportError, OSError, TypeError):
        return None


def fold_for_exit() -> threading.Thread | None:
    """Nothing any more (None): the console script's process no longer ends with os._exit
    (streams.exits_at_once is gone), and its own end frees what it holds."""
    return None


def can_fold() -> bool:
    """Linux with 4 KiB pages and 2 MiB huge pages, the system's huge pages not "never" and
    this process's not turned off."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        if os.sysconf("SC_PAGE_SIZE") != PAGE:
            return False
        with open("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size") as f:
            if int(f.read()) != HUGE:
                return False
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            if "[never]" in f.read():
                return False
        with open("/proc/self/status") as f:
            return all(line.split() != ["THP_enabled:", "0"] for line in f)
    except (OSError, ValueError):
        return False


def fold() -> int:
    """Fold each 2 MiB range of this process's own writable memory that is at least half
    resident into a huge page; the number folded (0 where the system cannot)."""
    madvise = getattr(_libc(), "madvise", None)
    if madvise is None:
        return 0
    import ctypes

    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    try:
        ranges = foldable(_anonymous())
    except (OSError, ValueError):
        return 0
    folded = 0
    for start in ranges:
        if madvise(start, HUGE, MADV_COLLAPSE) == 0:
            folded += 1
        elif ctypes.get_errno() in (errno.EINVAL, errno.EPERM, errno.ENOSYS, errno.ENOMEM):
            # not on this system (EINVAL also for a mapping marked never to be folded: the
            # rest is left too), or no memory to fold into: each further try would reclaim
            break
    return folded


def _anonymous() -> list[tuple[int, int]]:
    """The 2 MiB-aligned parts of this process's private writable memory that no file backs
    (the C heap, Python's arenas, threads' stacks) with at least 1 MiB of it resident:
    (start, end) pairs. A large reservation barely touched is not scanned."""
    regions = []
    with open("/proc/self/smaps") as smaps:
        low = high = 0
        wanted = False
        for line in smaps:
            fields = line.split()
            if not fields:
                continue
            if "-" in fields[0] and len(fields) >= 5:  # a mapping's first line
                wanted = fields[1] == "rw-p" and fields[4] == "0"  # inode 0: no file
                if len(fields) > 5 and fields[5] != "[heap]":  # [stack], [vvar], ...
                    wanted = False
                first, last = (int(x, 16) for x in fields[0].split("-"))
                low, high = -(-first // HUGE) * HUGE, last // HUGE * HUGE
            elif fields[0] == "Rss:" and wanted and high > low and int(fields[1]) >= 1024:
                regions.append((low, high))
    return regions


# The bytes of a pagemap entry but the one holding bit 63 (present), in each 8-byte entry.
_LOW_BITS = bytes(range(128))


def foldable(regions: list[tuple[int, int]], pagemap: str = "/proc/self/pagemap") -> list[int]:
    """The starts of the 2 MiB ranges of `regions` with at least half their pages resident
    (bit 63 of each page's native-endian entry in /proc/self/pagemap): a range mostly empty,
    such as the unused depth of a thread's stack, would be made wholly resident by folding it."""
    top = 7 if sys.byteorder == "little" else 0  # the byte of each entry that holds bit 63
    starts = []
    with open(pagemap, "rb", buffering=0) as entries:
        for low, high in regions:
            for start in range(low, high, HUGE):
                entries.seek(start // PAGE * 8)
                data = entries.read(HUGE // PAGE * 8)
                present = len(data[top::8].translate(None, _LOW_BITS))
                if present * 2 >= HUGE // PAGE:
                    starts.append(start)
    return starts
