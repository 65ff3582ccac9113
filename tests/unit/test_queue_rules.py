"""A queue's pure rules (runs/queue.py): entry names and their order, what an entry holds,
expiry judged as client-go's leader election judges it, the waiting line, and the listings."""

from __future__ import annotations

import json
from typing import Any

import pytest

from simpletfjob.kube.leases import Seen, lease_body
from simpletfjob.runs.queue import (
    ASKS,
    NAMESPACE,
    QUEUE_LABEL,
    RUN,
    Ask,
    asks_of,
    entries_of,
    entry_annotations,
    entry_name,
    listing,
    lock_name,
    number_of,
    ordinal,
    place_in,
    waiting_line,
)


def lease(
    queue: str, name: str, run: str = "r", ns: str = "ml", version: str = "1", **spec: Any
) -> dict[str, Any]:
    """A Lease as the server lists it."""
    asks = [Ask("worker", 2, {"cpu": "10"})]
    body = lease_body(name, name, 30, {QUEUE_LABEL: queue}, entry_annotations(run, ns, asks))
    body["metadata"].update(resourceVersion=version, creationTimestamp="2024-05-01T12:00:00Z")
    body["spec"].update(spec)
    return body


def test_an_entry_is_named_by_its_queue_and_number_and_read_back() -> None:
    assert entry_name("team", 42) == "simpletfjob-queue-team-000042"
    assert number_of("team", "simpletfjob-queue-team-000042") == 42
    assert number_of("team", entry_name("team", 1234567)) == 1234567  # past six digits
    for other in (
        lock_name("team"),  # simpletfjob-queue-team.lock: the lock is no entry
        "simpletfjob-queue-team-42",  # too few digits
        "simpletfjob-queue-team-000042-000001",  # an entry of queue team-000042
        "simpletfjob-queue-teams-000042",
        "something-else",
    ):
        assert number_of("team", other) is None, other
    # Queue 'a-000001' has its own entries, never one of queue 'a'.
    assert number_of("a", entry_name("a-000001", 1)) is None
    assert number_of("a-000001", entry_name("a-000001", 1)) == 1


def test_the_lowest_number_is_the_head_by_number_not_by_name() -> None:
    names = [entry_name("q", n) for n in (1000000, 999999, 7)]
    leases = [lease("q", name) for name in names] + [lease("q", lock_name("q"))]
    assert [e.number for e in entries_of("q", leases)] == [7, 999999, 1000000]


def test_an_entry_holds_the_run_its_namespace_and_what_it_asks_per_role() -> None:
    (entry,) = entries_of("q", [lease("q", entry_name("q", 3), run="mnist", ns="team-a")])
    assert (entry.run, entry.namespace, entry.lease, entry.version) == (
        "mnist",
        "team-a",
        30.0,
        "1",
    )
    assert entry.asks == (Ask("worker", 2, {"cpu": "10"}),)
    body = lease("q", entry_name("q", 3))
    assert body["metadata"]["labels"] == {QUEUE_LABEL: "q"}
    assert json.loads(body["metadata"]["annotations"][ASKS]) == [
        {"role": "worker", "tasks": 2, "requests": {"cpu": "10"}}
    ]
    assert body["spec"]["renewTime"].endswith("Z") and len(body["spec"]["renewTime"]) == 27


def test_an_entry_whose_asks_cannot_be_read_asks_nothing_it_can_say() -> None:
    body = lease("q", entry_name("q", 1))
    for wrong in (
        "{not json",
        "[1]",
        '[{"role": "worker"}]',
        '[{"role": "w", "tasks": 1, "requests": []}]',
    ):
        body["metadata"]["annotations"][ASKS] = wrong
        (entry,) = entries_of("q", [body])
        assert entry.asks == (), wrong


def test_asks_count_each_roles_tasks_and_write_quantities_as_a_manifest_would() -> None:
    roles = ["chief", "worker", "worker", "ps"]
    per_role = [("worker", (("cpu", 1500), ("memory", 2 << 30), ("nvidia.com/gpu", 1)))]
    assert asks_of(roles, per_role) == [
        Ask("chief", 1, {}),
        Ask("worker", 2, {"cpu": "1500m", "memory": "2Gi", "nvidia.com/gpu": "1"}),
        Ask("ps", 1, {}),
    ]
    assert [a.text() for a in asks_of(roles, per_role)] == [
        "1 chief",
        "2 worker × (cpu 1500m, memory 2Gi, nvidia.com/gpu 1)",
        "1 ps",
    ]


def test_expiry_is_how_long_this_client_saw_the_lease_unchanged_never_its_renew_time() -> None:
    seen = Seen()
    # A renewTime years ago says nothing: this client has only just seen the Lease.
    assert not seen.expired("e", "5", 30, now=100.0)
    assert not seen.expired("e", "5", 30, now=129.9)
    assert seen.expired("e", "5", 30, now=130.0)
    # A renewal (another resourceVersion) starts the time again.
    assert not seen.expired("e", "6", 30, now=131.0)
    assert not seen.expired("e", "6", 30, now=160.0)
    assert seen.expired("e", "6", 30, now=161.0)
    # Seen again unchanged does not start it again; forgotten, it does.
    seen.saw("e", "6", now=170.0)
    assert seen.expired("e", "6", 30, now=171.0)
    seen.forget("e")
    assert not seen.expired("e", "6", 30, now=172.0)


@pytest.mark.parametrize(
    ("n", "word"),
    [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"), (13, "13th"),
     (21, "21st"), (22, "22nd"), (101, "101st"), (111, "111th")],
)  # fmt: skip
def test_ordinals(n: int, word: str) -> None:
    assert ordinal(n) == word


def test_the_waiting_line_says_the_place_and_what_the_run_needs_or_why_the_head_waits() -> None:
    asks = [Ask("worker", 2, {"cpu": "10"})]
    assert (
        waiting_line("team", 2, 3, asks, 1)
        == 'waiting in queue "team": 2nd of 3; needs 2 × cpu 10 on 1 node'
    )
    # at the head, what it is short of, as the fit found it
    assert (
        waiting_line("team", 1, 3, asks, 1, "2 workers ask 10 cpu each", ("cpu", "2"))
        == 'waiting in queue "team": 1st of 3; needs 2 × cpu 10 on 1 node, the most free on one '
        "node is cpu 2"
    )
    # a refusal that names no one resource is said as it is
    why = "no seating gives 2 workers a slot each on the nodes they may use (a, b)"
    assert (
        waiting_line("team", 1, 3, asks, 2, why)
        == f'waiting in queue "team": 1st of 3; needs 2 × cpu 10 on 2 nodes; {why}'
    )
    # several roles: each is named
    roles = [Ask("ps", 1, {}), Ask("worker", 4, {"nvidia.com/gpu": "8"})]
    assert (
        waiting_line("team", 2, 2, roles, 4)
        == 'waiting in queue "team": 2nd of 2; needs 1 ps, 4 worker × nvidia.com/gpu 8 on 4 nodes'
    )
    assert waiting_line("team", 1, 1, [], 1) == 'waiting in queue "team": 1st of 1'


def test_the_listing_numbers_the_entries_from_one_and_says_who_holds_the_lock() -> None:
    first, second = entry_name("q", 8), entry_name("q", 9)
    lock = lease("q", lock_name("q"), holderIdentity=first)
    listed = listing("q", [lease("q", second, run="b"), lock, lease("q", first, run="a")])
    assert [(e["position"], e["run"], e["state"]) for e in listed] == [
        (1, "a", "Admitting"),
        (2, "b", "Waiting"),
    ]
    assert listed[0] == {
        "position": 1,
        "run": "a",
        "namespace": "ml",
        "since": "2024-05-01T12:00:00Z",
        "asks": [{"role": "worker", "tasks": 2, "requests": {"cpu": "10"}}],
        "state": "Admitting",
    }
    released = {**lock, "spec": {"leaseDurationSeconds": 30}}  # given back: held by no one
    assert [e["state"] for e in listing("q", [lease("q", first), released])] == ["Waiting"]


def test_a_runs_place_is_found_in_its_queue_among_every_queues_leases() -> None:
    leases = [
        lease("a", entry_name("a", 1), run="x"),
        lease("a", entry_name("a", 2), run="mnist", ns="other"),  # another namespace's run
        lease("a", entry_name("a", 3), run="mnist"),
        lease("b", entry_name("b", 1), run="y"),
        lease("a", lock_name("a")),
    ]
    assert place_in(leases, "mnist", "ml") == {"name": "a", "position": 3, "of": 3}
    assert place_in(leases, "y", "ml") == {"name": "b", "position": 1, "of": 1}
    assert place_in(leases, "z", "ml") is None
    assert place_in([], "mnist", "ml") is None


def test_annotations_name_the_run_and_its_namespace() -> None:
    notes = entry_annotations("mnist", "ml", [])
    assert (notes[RUN], notes[NAMESPACE], json.loads(notes[ASKS])) == ("mnist", "ml", [])
