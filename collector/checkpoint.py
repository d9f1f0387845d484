"""Checkpoint files: the node, MEASMON and the pipeline pickled at a slice boundary whose
copies are all stored, so that a restart resumes there instead of replaying from the origin.

A file is only resumed by the same code (:func:`code_fingerprint`), for the same origin, and
when it is not ahead of the database's durable watermark; anything else (a damaged, stale or
foreign file) is ignored and the collector replays. One file per collector and seed, under
``<data_dir>/checkpoints/``, replaced atomically.

A checkpoint is a pickle (live objects: the node's arrays, MEASMON's state), so it is only ever
read from a folder of the collector's own that no one else can write (mode 0700, the
collector's user; :func:`collector.sink.private_folder`), and only a file of its own that no one
else can write: anything else is not unpickled, and the collector replays (data that others
could have written never runs as code; the spool holds no pickles at all, collector/slice.py).
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collector.measure.measmon import Measmon
from collector.sink import Pipeline, private_folder

log = logging.getLogger(__name__)

COLLECTOR_DIR = Path(__file__).resolve().parent


def code_fingerprint() -> str:
    """A hash of the simulation and MEASURE code: a checkpoint pickled by other code is not
    resumed (its objects may lack what this code expects); the collector replays instead."""
    h = hashlib.sha256()
    for path in sorted([*COLLECTOR_DIR.glob("node/*.py"), *COLLECTOR_DIR.glob("measure/*.py"),
                        COLLECTOR_DIR / "sink.py"]):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def checkpoint_path(data_dir: Path, collector_id: str, seed: int) -> Path:
    safe = collector_id.replace("\\", "")
    return data_dir / "checkpoints" / f"{safe}-{seed}.pickle"


@dataclass
class Restored:
    node: Any
    measmon: Measmon
    pipeline: Pipeline


def save(path: Path, epoch_us: int, node: Any, measmon: Measmon, pipeline: Pipeline) -> bool:
    """Write the checkpoint; False (and a warning) when it cannot be pickled or its folder is
    not the collector's own."""
    data = dumps(epoch_us, node, measmon, pipeline)
    return data is not None and write(path, data)


def dumps(epoch_us: int, node: Any, measmon: Measmon, pipeline: Pipeline) -> bytes | None:
    """The checkpoint's bytes (the state now; a backfill writes them once the slices up to
    now are stored); None (and a warning) when it cannot be pickled."""
    callbacks = measmon.sink, measmon.on_state
    # they hold the writer's connection: detached while pickling, put back below
    measmon.sink = measmon.on_state = None  # type: ignore[assignment]  # None only while pickling
    try:
        return pickle.dumps({"epoch_us": epoch_us, "code": code_fingerprint(), "node": node,
                             "measmon": measmon, "pipeline": pipeline}, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        log.warning("checkpoint not written (%s); a restart replays from the origin", exc)
        return None
    finally:
        measmon.sink, measmon.on_state = callbacks


def write(path: Path, data: bytes) -> bool:
    """Write checkpoint bytes (dumps) to path: a private file replaced whole; False (and a
    warning) when its folder is not the collector's own."""
    try:
        private_folder(path.parent, "MEASUREDB_DATA_DIR")
    except PermissionError as exc:
        log.warning("checkpoint not written: %s; a restart replays from the origin", exc)
        return False
    tmp = path.with_suffix(".tmp")
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return True


def load(path: Path, epoch_us: int, durable_until_us: int) -> Restored | None:
    """The checkpoint, when there is a usable one (its MEASMON without callbacks: the caller
    attaches its own)."""
    if not path.exists():
        return None
    try:
        private_folder(path.parent, "MEASUREDB_DATA_DIR")
        st = path.stat()
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise PermissionError(f"{path} is not the collector's own file, or others may write it")
    except PermissionError as exc:
        log.warning("checkpoint not loaded (%s); replaying from the origin", exc)
        return None
    try:
        with path.open("rb") as f:
            saved = pickle.load(f)
    except Exception as exc:  # noqa: BLE001 - a damaged or stale file: replay instead
        log.warning("checkpoint %s unreadable (%s); replaying from the origin", path, exc)
        return None
    if (saved.get("code") != code_fingerprint() or saved["epoch_us"] != epoch_us
            or saved["node"].now_us > durable_until_us):
        return None
    return Restored(saved["node"], saved["measmon"], saved["pipeline"])
