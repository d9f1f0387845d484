"""Fixtures for the simulated-node tests."""

from __future__ import annotations

import pytest

from .node_helpers import START_US


@pytest.fixture
def start_us() -> int:
    return START_US
