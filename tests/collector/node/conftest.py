"""Fixtures for the simulated-node tests."""

from __future__ import annotations

import pytest

from .node_helpers import START_US


@pytest.fixture
def start_us() -> int:
    return START_US


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: minutes of real time (the host node against sysstat); deselect with -m 'not slow'")
