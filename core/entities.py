"""What identifies a measured entity, as the collector and import both store it.

* :func:`entity_key`: an entity's identifying fields (the catalogue's ``id_fields`` of its
  type) as one text key, ``cpu=0|pin=17|process_name=$SRV1|…``.
* :func:`entity_id`: the 63-bit id derived from system, type and key (the same entity always
  gets the same id, whoever registers it first).
* :data:`ID_FIELD_RANGES`: the integer identifying fields and their ranges.
* :data:`USER_COUNTER_TYPES`: the counter types of ADD COUNTER (USERDEF elements).
"""

from __future__ import annotations

import hashlib
from typing import Any

ID_FIELD_RANGES: dict[str, tuple[int, int]] = {
    "cpu": (0, 15),
    "opener_cpu": (0, 15),
    "pin": (0, 65535),
    "opener_pin": (0, 65535),
    "priority": (1, 255),
    "file_number": (0, 65535),
    "ocb_number": (0, 65535),
    "remote_system": (0, 254),
    "index": (0, 255),
    "device_type": (0, 63),
    "statement_index": (0, 65535),
    "fcb_number": (0, 65535),
}

USER_COUNTER_TYPES = ("ACCUM", "FACCUM", "BUSY", "QUEUE", "QBUSY")


def entity_key(id_fields: tuple[str, ...], ids: dict[str, Any]) -> str:
    return "|".join(f"{f}={ids.get(f, '')}" for f in id_fields)


def entity_id(system_id: int, type_code: int, key: str) -> int:
    digest = hashlib.blake2b(f"{system_id}/{type_code}/{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFF_FFFF_FFFF_FFFF
