"""OpenAPI enums and lookups derived from the counter catalogue (never restated)."""

from __future__ import annotations

from enum import StrEnum

from core.catalog import load_catalog

EntityName = StrEnum("EntityName", {e.name: e.name for e in load_catalog()})  # type: ignore[misc]  # an enum of names from the catalogue (functional API)
EntityName.__doc__ = "Entity type (catalogue name, schema/catalog/entities.csv)"
