"""Typed settings of the collector and of the platform commands (`measuredb …`).

Everything the collector reads from the environment (or `.env`) is declared here and
nowhere else (style P9). Variables carry the prefix ``MEASUREDB_COLLECTOR_`` except the
two shared ones, ``DATABASE_URL`` and ``MEASUREDB_DATA_DIR``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from collector.database import normalise_database_url

REPO_ROOT = Path(__file__).resolve().parents[1]


class DatabaseSettings(BaseSettings):
    """Where the database is: a server named by DATABASE_URL, or the embedded one."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    database_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DATABASE_URL"),
        description="postgresql://user:password@host:port/dbname; unset = embedded server",
    )
    data_dir: Path = Field(
        default=Path(".data"),
        validation_alias=AliasChoices("MEASUREDB_DATA_DIR"),
        description="folder of the embedded PostgreSQL data, the spool and run files",
    )
    timescaledb: Literal["auto", "on", "off"] = Field(
        default="auto",
        validation_alias=AliasChoices("MEASUREDB_TIMESCALEDB"),
        description="use TimescaleDB when the server has it (auto), require it (on), or never (off)",
    )

    engine: Literal["auto", "citus", "postgresql"] = Field(
        default="auto",
        validation_alias=AliasChoices("MEASUREDB_ENGINE"),
        description="Citus when the database has it or the server preloads it (auto), require "
                    "Citus (citus), or never (postgresql)",
    )

    @field_validator("database_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is None or value.strip() == "":
            return None
        return normalise_database_url(value)


class CollectorSettings(DatabaseSettings):
    """Settings of `measuredb collector` (and of `measuredb run`, which starts it)."""

    model_config = SettingsConfigDict(
        env_prefix="MEASUREDB_COLLECTOR_", env_file=".env", extra="ignore", populate_by_name=True
    )

    node: str = Field(default="demo", description="shipped node name or path of a node file, "
                                                  "or host (this machine, docs/host-node.md)")
    workload: str | None = Field(default=None,
                                 description="workload name or file; default: the node's own")
    seed: int = Field(default=1986, ge=0, description="seed of the simulated node")
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

    @property
    def spool_path(self) -> Path:
        return self.spool_dir if self.spool_dir is not None else self.data_dir / "spool"


def describe_validation_error(exc: ValidationError, settings_cls: type[BaseSettings]) -> str:
    """One line per bad setting, naming the environment variable the user must fix."""
    prefix = settings_cls.model_config.get("env_prefix", "")
    lines = []
    for err in exc.errors():
        loc = str(err["loc"][0]) if err["loc"] else "?"
        env = (prefix + loc).upper()
        for name, info in settings_cls.model_fields.items():
            alias = info.validation_alias
            choices = alias.choices if isinstance(alias, AliasChoices) else ()
            if loc == name or loc in choices:
                env = str(choices[0]) if choices else (prefix + name).upper()
        message = err["msg"].removeprefix("Value error, ")
        shown = err.get("input")
        secret = any(word in env for word in ("URL", "PASSWORD", "TOKEN"))
        shown = "" if shown is None or secret else f" (got {shown!r})"
        lines.append(f"bad setting {env}: {message}{shown}")
    return "; ".join(lines)
