"""The suite's own parallel running: each xdist worker's ports and node addresses
(tests/support/parallel.py), the groups its scheduler makes (tests/support/scheduling.py),
how many workers a run gets, and the one line that sums up the skipped tests."""

from __future__ import annotations

import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests import conftest
from tests.support import parallel
from tests.support.scheduling import ModuleGroupScheduling, defines_shared_fixture

ROOT = Path(__file__).resolve().parents[2]


def as_worker(monkeypatch: pytest.MonkeyPatch, index: int) -> None:
    monkeypatch.delenv("SIMPLETFJOB_TEST_SESSION", raising=False)
    monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{index}")
    monkeypatch.setattr(parallel, "_cursor", None)


def test_each_worker_has_a_block_of_ports_of_its_own_outside_the_ephemeral_range() -> None:
    low, high = parallel._ephemeral()
    blocks = [parallel.port_block(index) for index in range(8)]
    for block in blocks:
        assert block.stop <= low or block.start > high, (block, low, high)
        assert block.start > 1024 and block.stop <= 65536
    taken = [port for block in blocks for port in block]
    assert len(taken) == len(set(taken))


def test_free_ports_are_consecutive_free_and_this_workers_and_not_handed_out_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    as_worker(monkeypatch, 2)
    block = parallel.port_block()
    firsts = [parallel.free_ports(3) for _ in range(20)]
    given = [first + i for first in firsts for i in range(3)]
    assert len(given) == len(set(given))  # 20 calls, 60 different ports
    assert all(port in block for port in given)
    for port in given[:6]:  # free: anyone may listen there now
        with socket.socket() as s:
            s.bind(("0.0.0.0", port))


def test_free_ports_skip_a_port_that_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    as_worker(monkeypatch, 1)
    first = parallel.free_ports(2)
    monkeypatch.setattr(parallel, "_cursor", first - parallel.port_block().start)
    with socket.socket() as held:
        held.bind(("127.0.0.1", first + 1))
        held.listen()
        again = parallel.free_ports(2)
    assert again != first and first + 1 not in (again, again + 1)


def test_a_closed_port_refuses_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    as_worker(monkeypatch, 0)
    port = parallel.closed_port()
    assert port in parallel.port_block()
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):
        s.connect(("127.0.0.1", port))


def test_node_addresses_are_the_workers_own_and_on_loopback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("SIMPLETFJOB_TEST_SESSION", raising=False)
    assert [parallel.node_address(i) for i in range(3)] == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    as_worker(monkeypatch, 3)
    assert parallel.node_address(0) == "127.0.3.2"
    monkeypatch.setenv("SIMPLETFJOB_TEST_SESSION", "2")  # a second session's workers
    assert parallel.node_address(0) == "127.0.15.2"
    assert parallel.port_block() == parallel.port_block(15)
    with socket.socket() as s:  # the whole of 127/8 is this machine
        s.bind((parallel.node_address(1), 0))


SHARED = """
import pytest

@pytest.fixture(scope="module")
def plane():
    yield 1
"""


@pytest.mark.parametrize(
    ("source", "shared"),
    [
        (SHARED, True),
        (SHARED.replace('"module"', '"class"'), True),
        (SHARED.replace("pytest.fixture", "fixture"), True),
        (SHARED.replace('"module"', '"session"'), False),
        (SHARED.replace('(scope="module")', ""), False),
        (
            "import pytest\n\n@pytest.mark.parametrize('scope', ['module'])\ndef test_x(scope): ...",
            False,
        ),
    ],
)
def test_a_module_with_a_module_scoped_fixture_is_found_from_its_source(
    source: str, shared: bool
) -> None:
    assert defines_shared_fixture(source) is shared


def test_the_scheduler_keeps_a_module_that_shares_a_fixture_on_one_worker() -> None:
    config: Any = SimpleNamespace(
        getvalue=lambda name: ["popen"] * 3 if name == "tx" else None, rootpath=ROOT
    )
    scheduler = ModuleGroupScheduling(config)
    split = scheduler._split_scope
    outage = "tests/control_plane/test_outage.py"
    assert split(f"{outage}::test_wait_rides_out_an_api_server_restart") == outage
    assert split(f"{outage}::test_wait_rides_out_more_failures[429]") == outage
    rows = "tests/process/test_adversarial.py"
    assert split(f"{rows}::test_hostile_input[files/a]") == rows
    alone = "tests/unit/test_roles.py::test_something"
    assert split(alone) == alone
    assert split(f"{alone}[a@b]") == f"{alone}[a@b]"  # an @ in a parameter is no group
    assert split(f"{alone}@together") == "together"  # pytest-xdist's own mark, where it works


@pytest.mark.parametrize(
    ("args", "workers"),
    [
        (["tests"], conftest.WORKERS),
        (["tests/unit"], conftest.WORKERS),
        (["tests/unit/test_roles.py"], 0),
        (["tests/unit/test_roles.py::test_x", "tests/unit/test_roles.py::test_y"], 0),
        (["tests/unit/test_roles.py", "tests/unit/test_room.py"], conftest.WORKERS),
    ],
)
def test_a_run_of_one_file_stays_in_one_process_and_a_larger_one_gets_the_workers(
    monkeypatch: pytest.MonkeyPatch, args: list[str], workers: int
) -> None:
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.chdir(ROOT)
    config: Any = SimpleNamespace(args=args)
    assert conftest.pytest_xdist_auto_num_workers(config) == workers
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "5")
    assert conftest.pytest_xdist_auto_num_workers(config) == 5
