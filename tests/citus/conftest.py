"""A Citus cluster for tests/citus: a coordinator and two workers started from the wheel on
free ports of 127.0.0.1 (tests/citus/cluster.py), data under MEASUREDB_TEST_CITUS_DATA_DIR
(default .data/test-citus). Citus is installed into the wheel from ../shared/citus when it is
not yet; without it every test here is skipped, saying why."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.citus.cluster import Cluster, install_citus, start_cluster

REPO = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.citus)


@pytest.fixture(scope="session")
def citus_cluster() -> Iterator[Cluster]:
    reason = install_citus()
    if reason:
        pytest.skip(f"Citus cannot be had: {reason}")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    base = Path(os.environ.get("MEASUREDB_TEST_CITUS_DATA_DIR", REPO / ".data" / "test-citus"))
    cluster = start_cluster(base / worker, workers=2)
    yield cluster
    cluster.stop()
