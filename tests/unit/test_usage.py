"""The counting rules of usage.py, case by case, as `kubectl describe node` counts a pod."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simpletfjob.errors import InputError
from simpletfjob.hosts.usage import (
    EMPTY,
    NOBODY,
    Own,
    Tally,
    held_ports,
    job_use,
    pinned_jobs,
    pod_request,
    pod_use,
)
from simpletfjob.quantity import parse_quantity

GPU = "nvidia.com/gpu"


def container(
    name: str, gpus: int | None = None, *, limit: int | None = None, **extra: Any
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if gpus is not None:
        resources["requests"] = {GPU: str(gpus), "cpu": "100m"}
    if limit is not None:
        resources["limits"] = {GPU: str(limit)}
    return {"name": name, "image": "x", "resources": resources, **extra}


def sidecar(name: str, gpus: int) -> dict[str, Any]:
    return container(name, gpus, restartPolicy="Always")


def pod(
    name: str = "p",
    node: str = "n1",
    phase: str = "Running",
    namespace: str = "ml",
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    spec.setdefault("containers", [container("main", 1)])
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"nodeName": node, **spec},
        "status": {"phase": phase},
    }


def use(obj: dict[str, Any]) -> Any:
    return pod_use(obj, GPU, "simpletfjob/job", "the pod list")


# ---- requests -------------------------------------------------------------------------------


def test_the_containers_requests_are_summed() -> None:
    spec = {"containers": [container("a", 2), container("b", 3), container("c")]}
    assert pod_request(spec, GPU) == 5


def test_a_limit_without_a_request_counts_as_the_request() -> None:
    # The API server defaults a missing request to the limit: GPUs are usually given so.
    spec = {"containers": [container("a", limit=4), container("b", 1, limit=2)]}
    assert pod_request(spec, GPU) == 5


def test_init_containers_count_as_their_largest_request() -> None:
    spec = {
        "initContainers": [container("fetch", 6), container("warm", 2)],
        "containers": [container("a", 1), container("b", 1)],
    }
    assert pod_request(spec, GPU) == 6  # the first step needs more than the run
    spec["initContainers"] = [container("fetch", 1)]
    assert pod_request(spec, GPU) == 2  # the containers need more than any step


def test_sidecars_add_to_the_sum_and_to_the_init_steps_after_them() -> None:
    spec = {
        "initContainers": [container("before", 3), sidecar("proxy", 1), container("after", 4)],
        "containers": [container("a", 2)],
    }
    # Running: a + proxy = 3. Start-up: 'before' alone 3; 'after' beside proxy 5.
    assert pod_request(spec, GPU) == 5
    spec["initContainers"] = [sidecar("proxy", 1)]
    assert pod_request(spec, GPU) == 3


def test_pod_overhead_is_added() -> None:
    spec = {"containers": [container("a", 1)], "overhead": {GPU: "1", "cpu": "250m"}}
    assert pod_request(spec, GPU) == 2
    assert pod_request({**spec, "overhead": {"cpu": "250m"}}, GPU) == 1


def test_only_the_resource_asked_about_is_counted() -> None:
    spec = {"containers": [container("a", 2)]}
    assert pod_request(spec, "amd.com/gpu") == 0
    assert pod_request(spec, "cpu") == Fraction(1, 10)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("8", 8),
        (8, 8),
        ("500m", Fraction(1, 2)),
        ("1k", 1000),
        ("1Ki", 1024),
        ("2e3", 2000),
        ("2E3", 2000),
        ("6E", 6 * 1000**6),
        ("6Ei", 6 * 1024**6),
        ("0.5", Fraction(1, 2)),
    ],
)
def test_quantities(text: object, value: Fraction) -> None:
    assert parse_quantity(text) == value


def test_a_fraction_of_a_device_occupies_a_whole_one() -> None:
    def gpus(*requests: str) -> int:
        containers = [
            {"name": f"c{i}", "image": "x", "resources": {"requests": {GPU: r}}}
            for i, r in enumerate(requests)
        ]
        return int(Tally().add_all([use(pod(containers=containers))]).node("n1").requested)

    assert gpus("500m") == 1
    assert gpus("1500m", "2500m") == 4
    assert gpus("4") == 4


def test_a_malformed_quantity_names_the_pod_and_field() -> None:
    bad = pod(containers=[{"name": "a", "resources": {"requests": {GPU: "lots"}}}])
    with pytest.raises(
        InputError,
        match=r"pod ml/p: spec.containers\[0\].resources.requests\['nvidia.com/gpu'\]: 'lots' is not a quantity",
    ):
        use(bad)


# ---- which pods count ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "counts"),
    [
        ("Running", True),
        ("Pending", True),
        ("Unknown", True),
        ("", True),
        ("Succeeded", False),
        ("Failed", False),
    ],
)
def test_terminated_pods_do_not_count_and_the_others_do(phase: str, counts: bool) -> None:
    tally = Tally().add_all([use(pod("p", phase=phase))])
    assert tally.node("n1").requested == (1 if counts else 0)
    assert tally.node("n1").pods == (1 if counts else 0)


def test_a_pending_pod_counts_only_once_it_is_scheduled() -> None:
    tally = Tally().add_all(
        [use(pod("waiting", node="", phase="Pending")), use(pod("bound", phase="Pending"))]
    )
    assert tally.node("n1") == (1, 1, {}, {})
    assert tally.node("") == EMPTY


def job(
    name: str = "j",
    namespace: str = "ml",
    labels: dict[str, str] | None = None,
    deleting: bool = False,
    conditions: tuple[str, ...] = (),
    status: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A Job whose pod template pins node n1 and asks for 1 GPU and host port 2222."""
    ports = [{"containerPort": 2222, "hostPort": 2222}]
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    metadata["labels"] = labels or {}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec.setdefault(
        "template", {"spec": {"nodeName": "n1", "containers": [container("a", 1, ports=ports)]}}
    )
    found = [{"type": c, "status": "True"} for c in conditions]
    return {"metadata": metadata, "spec": spec, "status": {"conditions": found, **(status or {})}}


def job_of(obj: dict[str, Any]) -> Any:
    return job_use(obj, GPU, "simpletfjob/job", "the job list")


def owned(obj: dict[str, Any], owner: str, deleting: bool = False) -> dict[str, Any]:
    """The pod as its Job's pod: a controller ownerReference (and a deletionTimestamp)."""
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": owner, "uid": f"uid-{owner}"}
    obj["metadata"]["ownerReferences"] = [{**ref, "controller": True}]
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return obj


OURS = {"simpletfjob/job": "mnist"}


def test_the_pods_of_the_run_being_placed_do_not_count() -> None:
    jobs = [job_of(job("mnist-worker-0", labels=OURS)), job_of(job("x", "team", labels=OURS))]
    own = Own("mnist", frozenset({"ml"})).knowing(jobs)
    pods = [
        owned(pod("mnist-worker-0", labels=OURS), "mnist-worker-0"),  # ours
        owned(pod("other-ns", namespace="team", labels=OURS), "x"),  # another run
        pod("other-run", labels={"simpletfjob/job": "resnet"}),
    ]
    tally = Tally(own).add_all(use(p) for p in pods)
    assert tally.node("n1").requested == 2
    assert Tally().add_all(use(p) for p in pods).node("n1").requested == 3


@pytest.mark.parametrize(
    "jobs",
    [
        [],  # the Job is gone: deleted, its pod still stopping
        [job("mnist-worker-0", labels=OURS, deleting=True)],  # foreground deletion, a finalizer
    ],
)
def test_a_pod_whose_job_is_gone_or_being_deleted_is_not_the_runs_own(
    jobs: list[dict[str, Any]],
) -> None:
    own = Own("mnist", frozenset({"ml"})).knowing(job_of(j) for j in jobs)
    ports = [{"containerPort": 2222, "hostPort": 2222}]
    stopping = owned(
        pod("mnist-worker-0-abc", labels=OURS, containers=[container("a", 3, ports=ports)]),
        "mnist-worker-0",
        deleting=True,
    )
    usage = Tally(own).add_all([use(stopping)]).node("n1")
    assert usage == (3, 1, {(2222, "TCP"): "ml/mnist-worker-0-abc"}, {})
    # A bare pod with the run's label has no Job at all: it counts too.
    assert Tally(own).add_all([use(pod("bare", labels=OURS))]).node("n1").requested == 1


def test_without_the_job_list_a_pod_is_the_runs_own_while_it_has_a_job_and_is_not_stopping() -> (
    None
):
    own = Own("mnist", frozenset({"ml"}))  # the Jobs were not listed
    running = owned(pod("a", labels=OURS), "mnist-worker-0")
    stopping = owned(pod("b", labels=OURS), "mnist-worker-1", deleting=True)
    bare = pod("c", labels=OURS)
    assert Tally(own).add_all([use(running)]).node("n1") == EMPTY
    assert Tally(own).add_all([use(stopping), use(bare)]).node("n1").requested == 2


# ---- Jobs whose pods do not exist yet -----------------------------------------------------------


def test_a_job_pinned_to_a_node_holds_what_its_missing_pods_will_take() -> None:
    jobs = [job_of(job("other-worker-0", parallelism=3))]
    tally = Tally(NOBODY, pinned_jobs(jobs, NOBODY))
    ports = [{"containerPort": 2222, "hostPort": 2222}]
    made = owned(
        pod("other-worker-0-a", containers=[container("a", 1, ports=ports)]), "other-worker-0"
    )
    stopping = owned(pod("other-worker-0-b"), "other-worker-0", deleting=True)
    tally.add_all([use(made), use(stopping)])
    # 3 wanted, 1 live: 2 to come hold 1 GPU each, beside the 2 pods that exist.
    assert tally.node("n1") == (
        4,
        2,
        {(2222, "TCP"): "ml/other-worker-0 (Job, pod not created yet)"},
        {},
    )
    assert tally.node("n2") == EMPTY
    # With no pod at all, the default parallelism of 1 holds one pod's room.
    alone = Tally(NOBODY, pinned_jobs([job_of(job("j"))], NOBODY))
    assert alone.node("n1") == (1, 0, {(2222, "TCP"): "ml/j (Job, pod not created yet)"}, {})


@pytest.mark.parametrize(
    "obj",
    [
        job("done", conditions=("Complete",)),
        job("failed", conditions=("Failed",)),
        job("deleting", deleting=True),
        job("suspended", suspend=True),
        job("unpinned", template={"spec": {"containers": [container("a", 1)]}}),
        job("completed", completions=2, status={"succeeded": 2}),
        job("ours", labels=OURS),  # the run being placed: its pods to come are its own
    ],
)
def test_jobs_that_make_no_more_pods_or_are_the_runs_own_hold_nothing(obj: dict[str, Any]) -> None:
    own = Own("mnist", frozenset({"ml"}))
    jobs = [job_of(obj)]
    assert Tally(own.knowing(jobs), pinned_jobs(jobs, own)).node("n1") == EMPTY


def test_a_job_wants_no_more_pods_than_the_completions_still_to_come() -> None:
    obj = job("j", parallelism=4, completions=5, status={"succeeded": 3})
    assert job_of(obj).wanted == 2
    assert Tally(NOBODY, pinned_jobs([job_of(obj)], NOBODY)).node("n1").requested == 2


def test_a_malformed_job_is_one_line_naming_it() -> None:
    with pytest.raises(InputError, match=r"job ml/j: spec.parallelism must be a whole number"):
        job_of(job("j", parallelism="2"))


# ---- host ports -------------------------------------------------------------------------------


def test_host_ports_are_hostports_or_every_port_on_the_host_network() -> None:
    ports = [{"containerPort": 8080}, {"containerPort": 2222, "hostPort": 2222}]
    spec = {"containers": [container("a", ports=ports)]}
    assert held_ports(spec) == ((2222, "TCP"),)
    assert held_ports({**spec, "hostNetwork": True}) == ((8080, "TCP"), (2222, "TCP"))
    udp = {
        "containers": [
            container("dns", ports=[{"containerPort": 53, "hostPort": 53, "protocol": "UDP"}])
        ]
    }
    assert held_ports(udp) == ((53, "UDP"),)


def test_sidecars_hold_their_host_ports_and_init_steps_do_not() -> None:
    spec = {
        "hostNetwork": True,
        "initContainers": [
            container("setup", ports=[{"containerPort": 9000}]),
            container("proxy", restartPolicy="Always", ports=[{"containerPort": 15001}]),
        ],
        "containers": [container("a")],
    }
    assert held_ports(spec) == ((15001, "TCP"),)


def test_a_held_port_names_one_holder_whatever_the_lists_order() -> None:
    ports = [{"containerPort": 2222, "hostPort": 2222}]
    a = use(pod("b-pod", containers=[container("a", ports=ports)]))
    b = use(pod("a-pod", containers=[container("a", ports=ports)]))
    assert Tally().add_all([a, b]).node("n1").ports == {(2222, "TCP"): "ml/a-pod"}
    assert Tally().add_all([b, a]).node("n1").ports == {(2222, "TCP"): "ml/a-pod"}
    assert Tally().add_all([a, b]).node("n1").port_numbers == [2222]


def test_a_terminated_pod_holds_no_port() -> None:
    ports = [{"containerPort": 2222, "hostPort": 2222}]
    done = use(pod("done", phase="Succeeded", containers=[container("a", ports=ports)]))
    assert Tally().add_all([done]).node("n1") == EMPTY


# ---- the rules against the start-up they stand for ------------------------------------------------

_steps = st.lists(st.tuples(st.booleans(), st.integers(0, 8)), max_size=5)  # (sidecar?, GPUs)


@given(st.lists(st.integers(0, 8), max_size=4), _steps, st.integers(0, 2))
def test_a_pod_asks_for_the_most_its_start_up_and_its_run_hold_at_once(
    mains: list[int], inits: list[tuple[bool, int]], overhead: int
) -> None:
    """The kubelet runs the init steps in order, each sidecar staying up once started, then the
    containers beside every sidecar: the request is the most held at any moment, plus overhead."""
    held_at_moments = []
    sidecars = 0
    for is_sidecar, gpus in inits:
        if is_sidecar:
            sidecars += gpus
            held_at_moments.append(sidecars)
        else:
            held_at_moments.append(sidecars + gpus)
    held_at_moments.append(sidecars + sum(mains))
    spec: dict[str, Any] = {
        "containers": [container(f"c{i}", g) for i, g in enumerate(mains)],
        "initContainers": [
            sidecar(f"i{i}", g) if is_sidecar else container(f"i{i}", g)
            for i, (is_sidecar, g) in enumerate(inits)
        ],
    }
    if overhead:
        spec["overhead"] = {GPU: str(overhead)}
    assert pod_request(spec, GPU) == max(held_at_moments) + overhead


def test_a_huge_exponent_is_an_amount_no_node_has_not_a_number_built_digit_by_digit() -> None:
    from simpletfjob.quantity import MOST, parse_quantity_count

    assert parse_quantity("1e999999999") == MOST
    assert parse_quantity("-1e999999999") == -MOST
    assert parse_quantity("1e-999999999") > 0
    assert parse_quantity_count("1e999999999") == MOST
    assert parse_quantity_count("1Ki") == 1024
    assert parse_quantity_count("500m") == 0
    assert parse_quantity_count("lots") is None
