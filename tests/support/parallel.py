"""What each pytest-xdist worker has to itself, so that tests run side by side without meeting.

The README's test command runs the suite on several workers (`-n auto` in pyproject.toml's
addopts, the count chosen in tests/conftest.py). Each worker is a process with its own
session: its own control plane, fork server, loopback servers and `tmp_path`s. What the
workers share is this machine's network, so a test that listens on a port, or starts a
process that does (a framework's task run by the kubelet stand-in), takes its ports here:

- `free_ports(count)`: the first of `count` consecutive ports, free now, from this worker's
  own block. The blocks lie below the kernel's ephemeral range (ip_local_port_range), so no
  connection's own port and no `bind(0)` elsewhere ever lands in one, and two workers never
  hand out the same port. Within a worker, each call moves on past the ports it gave.
- `closed_port()`: a port from the same block that nothing listens on, for "nothing there".
- `node_address(index)`: a loopback address for a node of the kubelet stand-in,
  127.0.W.(index + 2) for worker W (127.0.0.2, 127.0.0.3, ... outside xdist), so that each
  worker's nodes have addresses of their own.

Outside xdist (`-n 0`, `-p no:xdist`, a single test file) the worker is number 0. Two pytest
sessions on one machine (two checkouts tested at once) set `SIMPLETFJOB_TEST_SESSION` to
different numbers (0 to 8): session S's workers are numbered from 6 * S, so that their blocks
and addresses do not meet. Stdlib only: the benchmark imports it.
"""

from __future__ import annotations

import os
import random
import socket
import threading

# Ports this module hands out, by worker, where the ephemeral range leaves room.
_LOWEST, _HIGHEST = 10000, 65535
_BLOCK = 400
_lock = threading.Lock()
_cursor: int | None = None


def worker_index() -> int:
    """This process's xdist worker number (gw0 -> 0, gw3 -> 3; 0 outside xdist), after the
    session's first (6 * SIMPLETFJOB_TEST_SESSION)."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else 0
    session = os.environ.get("SIMPLETFJOB_TEST_SESSION", "0")
    return index + 6 * (int(session) if session.isascii() and session.isdigit() else 0)


def _ephemeral() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(part) for part in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def port_block(index: int | None = None) -> range:
    """The ports worker `index` (this one by default) hands out: outside the ephemeral range
    when there is room for a block per worker there, else inside it (the check that each port
    is free still holds)."""
    index = worker_index() if index is None else index
    low, high = _ephemeral()
    regions = [range(_LOWEST, low), range(high + 1, _HIGHEST + 1)]
    region = max(regions, key=len)
    if len(region) < 2 * _BLOCK:
        region = range(_LOWEST, _HIGHEST + 1)
    count = len(region) // _BLOCK
    start = region.start + (index % count) * _BLOCK
    return range(start, start + _BLOCK)


def _free(port: int) -> bool:
    """Nothing is bound to `port` on any address (nor waiting to close on it)."""
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_ports(count: int = 1) -> int:
    """The first of `count` consecutive ports of this worker's block, each free now."""
    global _cursor
    block = port_block()
    if count > len(block) // 2:
        raise ValueError(f"{count} ports at once: the block has {len(block)}")
    span = len(block) - count + 1
    with _lock:
        if _cursor is None:  # two sessions on one machine rarely start at the same place
            _cursor = random.randrange(span)
        for _ in range(span):
            first = block.start + _cursor % span
            _cursor = (_cursor + count) % span
            if all(_free(port) for port in range(first, first + count)):
                return first
    raise AssertionError(f"no {count} free ports in a row in {block}")


def closed_port() -> int:
    """A local port that nothing listens on, from this worker's block."""
    return free_ports(1)


def node_address(index: int) -> str:
    """The loopback address of this worker's node number `index` (0, 1, ...): 127.0.W.(index + 2)."""
    if not 0 <= index < 250:
        raise ValueError(f"node index {index} is out of 0..249")
    return f"127.0.{worker_index() % 256}.{index + 2}"


def free_port() -> int:
    """A port no one listens on now, the two above it free too: this xdist worker's own."""
    return free_ports(3)
