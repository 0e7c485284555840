"""The project's cache folder: fetched corpora and models, the live web's cache, derived indexes."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def cache_dir(override: str | os.PathLike | None = None) -> Path:
    """Where fetched corpora live: ``override``, else ``$WEBSAILOR_CACHE``, else ``~/.cache/websailor-gym``."""
    if override is not None:
        return Path(override).expanduser()
    env = os.environ.get("WEBSAILOR_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "websailor-gym"


def derived_cache_dir(sim_dir: str | os.PathLike, kind: str) -> Path:
    """Where files derived from the simulator at ``sim_dir`` go when its folder is read-only:
    ``<cache>/<kind>/<key>``, keyed by the folder's path and its ``build.json`` (a rebuild gets a new key)."""
    sim_dir = Path(sim_dir)
    record = sim_dir / "build.json"
    stamp = record.read_bytes() if record.is_file() else b""
    key = hashlib.sha256(str(sim_dir).encode() + b"\0" + stamp).hexdigest()[:24]
    return cache_dir() / kind / key


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()
