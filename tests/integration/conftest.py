"""Fixtures for tests against a real control plane (and the loopback server beside it).

The control plane starts once per test session, the first time a test asks for it, and
stops at the end. Without $KUBEBUILDER_ASSETS (or without the binaries in it), every test
that needs it is skipped with the reason; `.ci/run` sets the variable from
../shared/kube/unpack.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.cluster import Cluster, loopback_cluster
from tests.support.control_plane import ControlPlane, find_assets, start


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """etcd, kube-apiserver and kube-controller-manager on loopback, for the whole session."""
    assets, reason = find_assets()
    if assets is None:
        pytest.skip(reason)
    plane = start(assets, tmp_path_factory.mktemp("control-plane"))
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The control plane for one test: the nodes the test creates are deleted after it."""
    control_plane.delete_nodes()
    yield control_plane
    control_plane.delete_nodes()


@pytest.fixture
def namespace(kube: ControlPlane) -> str:
    """A fresh namespace on the control plane, for one test."""
    return kube.create_namespace()


@pytest.fixture(params=["loopback", "real"])
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """The same test against the loopback server and against the real control plane."""
    if request.param == "real":
        yield request.getfixturevalue("kube")
        return
    with loopback_cluster() as loopback:
        yield loopback
