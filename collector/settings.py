"""Typed settings of the collector (prefix ``MEASUREDB_COLLECTOR_``), on top of the shared
database settings (core/settings.py). Everything the collector reads from the environment (or
`.env`) is declared here and nowhere else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from core.settings import DatabaseSettings, check_folder


class CollectorSettings(DatabaseSettings):
    """Settings of `measuredb collector` (and of `measuredb run`, which starts it)."""

    model_config = SettingsConfigDict(
        env_prefix="MEASUREDB_COLLECTOR_", env_file=".env", extra="ignore", populate_by_name=True
    )

    node: str = Field(default="demo", min_length=1,
                      description="shipped node name or path of a node file, or host (this machine, "
                                  "docs/host-node.md)")
    workload: str | None = Field(default=None,
                                 description="workload name or file; default: the node's own")
    seed: int = Field(default=1986, ge=0, description="seed of the simulated node")
    anomalies: Path | None = Field(default=None,
                                   description="anomaly schedule of the simulated node (YAML or JSON, "
                                               "docs/anomalies.md); default: none")
    speed: float = Field(default=1.0, gt=0, le=100_000, description="live pacing: 1 = real time")
    backfill_days: int = Field(default=7, ge=0, le=3660,
                               description="days of history simulated on first start")
    interval_seconds: int = Field(default=60, ge=1, le=86_400,
                                  description="interval of the default measurement")
    step_seconds: int = Field(default=60, ge=1, le=3600,
                              description="the node's step grid; live mode advances on it")
    heartbeat_seconds: float = Field(default=5.0, gt=0, le=300)
    spool_dir: Path | None = Field(default=None, description="default: <data_dir>/spool")
    spool_max_bytes: int = Field(default=2 * 1024**3, ge=1024 * 1024,
                                 description="spool limit while the database is away")
    spool_full: Literal["pause", "drop-oldest"] = Field(
        default="pause",
        description="at the spool limit: pause collection until the database answers (a "
                    "simulated node then catches up, nothing lost), or drop the oldest "
                    "spooled intervals with a loud warning")
    outage_wait_seconds: float = Field(
        default=300.0, ge=0, le=7 * 86_400,
        description="`measuredb backfill`: how long to wait at the end for an unreachable "
                    "database to take the spooled copies before exiting with status 3")
    progress: Literal["auto", "bar", "lines", "off"] = Field(
        default="auto",
        description="backfill progress: a bar on a terminal (auto), log lines (as under "
                    "`measuredb run`), or nothing")
    upkeep_seconds: float = Field(default=300.0, ge=10, le=86_400,
                                  description="how often the collector packs live runs, compresses "
                                              "old TimescaleDB chunks and (daily) applies retention")
    compress_after_hours: float = Field(default=24.0, ge=0, le=24 * 3660,
                                        description="TimescaleDB: compress a day's chunk this long after it ended")

    @field_validator("workload", "spool_dir", "anomalies", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("spool_dir")
    @classmethod
    def _spool_folder(cls, value: Path | None) -> Path | None:
        return check_folder(value)

    @property
    def spool_path(self) -> Path:
        return self.spool_dir if self.spool_dir is not None else self.data_dir / "spool"
