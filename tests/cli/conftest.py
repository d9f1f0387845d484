"""The MEASCOM tests' database (tests/meascom_fixtures.py)."""

from tests.meascom_fixtures import db, url  # noqa: F401 - fixtures
