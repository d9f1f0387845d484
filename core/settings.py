"""Settings every part of the platform shares: where the database is (DATABASE_URL or the
embedded server under MEASUREDB_DATA_DIR), which engine it may use, and how a bad setting is
told to the user. The collector's own settings (collector/settings.py) and the API's
(api/settings.py) extend :class:`DatabaseSettings`; no other module reads the environment.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BeforeValidator, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from core.database import normalise_database_url

REPO_ROOT = Path(__file__).resolve().parents[1]


def parse_list(value: Any) -> Any:
    """A list setting in its documented forms: comma-separated (``a, b``) or a JSON list
    (``["a", "b"]``); empty means none."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text:
        return []
    if text.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not a JSON list ({exc.msg} at character {exc.pos + 1}); write a,b or "
                             '["a", "b"], or leave it empty for none') from None
        if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
            raise ValueError('a JSON list must hold strings: ["a", "b"]')
    else:
        items = text.split(",")
    return [item.strip() for item in items if item.strip()]


def check_folder(value: Any) -> Any:
    """A folder setting may name a folder that does not exist yet (it is made), never a file."""
    if value is not None and Path(value).exists() and not Path(value).is_dir():
        raise ValueError(f"{value} is a file, not a folder")
    return value


# A list of strings read from one variable: comma-separated or JSON, empty = none (pydantic-
# settings would otherwise demand JSON and stop with its own traceback on anything else).
ListSetting = Annotated[list[str], NoDecode, BeforeValidator(parse_list)]


class DatabaseSettings(BaseSettings):
    """Where the database is: a server named by DATABASE_URL, or the embedded one."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    database_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DATABASE_URL"),
        description="postgresql://user:password@host:port/dbname; unset = embedded server",
    )
    data_dir: Path = Field(
        default=REPO_ROOT / ".data",
        validation_alias=AliasChoices("MEASUREDB_DATA_DIR"),
        description="folder of the embedded PostgreSQL data, the spool and run files; default: .data "
                    "in the project folder (whatever the current folder), a relative path is the "
                    "current folder's",
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

    @field_validator("data_dir", mode="before")
    @classmethod
    def _folder(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise ValueError("empty: name a folder (default .data), or leave the variable unset")
        return check_folder(value)

    @field_validator("database_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is None or value.strip() == "":
            return None
        return normalise_database_url(value)


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
