"""A node list page decoded the fast way says exactly what the careful way says, or leaves it
to the careful way: it never decides anything node_from_object would not."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from simpletfjob.errors import InputError
from simpletfjob.hosts.nodepage import decode_nodes
from simpletfjob.hosts.nodes import node_from_object
from tests.support.kubeapi import realistic_cluster

ORIGIN = "https://k8s.example:6443: the node list's items"
GPU = "nvidia.com/gpu"


def page(items: list[Any], token: str | None = "abc", version: str = "42") -> bytes:
    meta = {"resourceVersion": version, **({"continue": token} if token else {})}
    return json.dumps({"kind": "NodeList", "apiVersion": "v1", "metadata": meta, "items": items})


def careful(items: list[Any]) -> list[Any]:
    return [node_from_object(item, f"{ORIGIN}[{i}]", GPU) for i, item in enumerate(items)]


def test_a_realistic_page_decodes_to_the_very_nodes_the_careful_way_gives() -> None:
    items = realistic_cluster(200)
    fast = decode_nodes(page(items).encode(), ORIGIN, GPU)
    assert fast is not None
    assert fast.value == careful(items)
    assert [n.origin for n in fast.value][:2] == [f"{ORIGIN}[0]", f"{ORIGIN}[1]"]
    assert (fast.token, fast.resource_version) == ("abc", "42")
    assert any(n.gpus == 8 for n in fast.value) and any(not n.ready for n in fast.value)
    assert any(n.taints for n in fast.value) and any(n.unschedulable for n in fast.value)
    last = decode_nodes(page(items, token=None).encode(), ORIGIN, GPU)
    assert last is not None and last.token is None


# Where a node's JSON can go wrong in the fields simpletfjob reads, and what it can hold there.
PLACES = [
    ("metadata",), ("metadata", "name"), ("metadata", "labels"), ("spec",), ("spec", "taints"),
    ("spec", "unschedulable"), ("status",), ("status", "conditions"), ("status", "addresses"),
    ("status", "allocatable"), ("status", "allocatable", GPU), ("metadata", "labels", "zone"),
]  # fmt: skip
ODD = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 10**20), st.floats(allow_nan=False),
    st.text(max_size=4), st.sampled_from(["", "4", "2k", "1.5", "-1", "8Gi"]),
    st.lists(st.one_of(st.none(), st.text(max_size=3), st.fixed_dictionaries(
        {"key": st.text(max_size=3), "type": st.sampled_from(["Ready", "InternalIP", 1])},
        optional={"status": st.sampled_from(["True", "False", None]),
                  "address": st.one_of(st.none(), st.text(max_size=3))})), max_size=2),
    st.dictionaries(st.text(max_size=3), st.one_of(st.none(), st.text(max_size=3), st.integers()),
                    max_size=2),
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(changes=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(PLACES), ODD), max_size=3))
def test_an_odd_field_is_decoded_as_the_careful_way_decodes_it_or_left_to_it(
    changes: list[tuple[int, tuple[str, ...], Any]],
) -> None:
    items = copy.deepcopy(realistic_cluster(3))
    for index, place, value in changes:
        into: dict[str, Any] = items[index]
        for key in place[:-1]:
            if not isinstance(into.get(key), dict):
                into[key] = {}
            into = into[key]
        into[place[-1]] = value
    try:
        expected: Any = careful(items)
    except InputError as e:
        expected = e
    fast = decode_nodes(page(items).encode(), ORIGIN, GPU)
    if fast is not None:  # it decided: so had the careful way, the same
        assert not isinstance(expected, InputError), f"fast took what is wrong: {expected}"
        assert fast.value == expected


def test_what_is_not_a_node_list_is_left_to_the_careful_way() -> None:
    for data in (b"[]", b"{", b'{"items": null}', b'{"items": [1]}', b'{"items": [], "metadata": {"continue": 3}}'):  # fmt: skip
        assert decode_nodes(data, ORIGIN, GPU) is None
    assert decode_nodes(b'{"items": []}', ORIGIN, GPU) is not None
