"""The errors a caller of the collector handles (the command line turns them into one line)."""

from __future__ import annotations


class CollectorConfigError(RuntimeError):
    """The collector cannot start with these settings (message says why and what to do)."""


class SpooledDataLeft(RuntimeError):
    """A backfill ended with copies still in the spool (the database did not come back)."""
