"""The simulator's search engines: which one a build uses, and opening it.

``whoosh`` (the default the design names) or ``tantivy`` (optional, for rollouts at
scale). ``websailor wiki build --engine`` chooses; ``--engine auto`` picks by the corpus's
size once its pages are stored (:func:`choose_engine`: tantivy above
:data:`AUTO_TANTIVY_PAGES`); build.json records the engine built under ``index.engine``;
:func:`open_engine` opens what the build recorded (``whoosh`` for builds that predate the
choice). A corpus over an engine's :data:`MAX_PAGES` is refused before it is indexed, with
the size and the engine to use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from wiki_sim.errors import WikiSimError

EngineName = Literal["whoosh", "tantivy"]
ENGINES: tuple[str, ...] = ("whoosh", "tantivy")
BUILD_ENGINES: tuple[str, ...] = ENGINES + ("auto",)
AUTO_TANTIVY_PAGES = 200_000
"""``--engine auto`` builds the tantivy engine above this many pages. Whoosh's search time
grows with the corpus (measured on 2 cores, `benchmarks.scale`, before the score table of
:mod:`wiki_sim.score_table`: p50 about 1.55 ms + 15.8 us per 1,000 pages; with it, descriptions take
0.66 ms at 10k pages and 1.45 ms at 100k), so at 200,000 pages its median query (about 4.7 ms)
already costs what the tantivy engine's does at 1M pages, and its build writes about 25x its index in temporary files."""
MAX_PAGES = {"whoosh": 2_000_000, "tantivy": 2 ** 31 - 1}
"""Largest corpus each engine builds. Whoosh: extrapolated from 1M pages (510 s, 10.2 GB of
temporary files, p50/p99 17/234 ms), 2M pages take about 20 min and 20 GB of temporary disk
with searches around 33 ms; tantivy: its document ids (2^31)."""


def check_engine(engine: str, choices: tuple[str, ...] = ENGINES) -> None:
    if engine not in choices:
        raise WikiSimError(f"engine must be one of {', '.join(choices)}; got {engine!r}")


def tantivy_installed() -> bool:
    try:
        import tantivy  # noqa: F401
    except ImportError:
        return False
    return True


def choose_engine(engine: str, pages: int) -> str:
    """The engine to build for a corpus of ``pages`` pages: ``engine``, or for ``auto`` the
    tantivy engine above :data:`AUTO_TANTIVY_PAGES` (Whoosh below, or where tantivy is not
    installed); a corpus over the engine's :data:`MAX_PAGES` is refused, naming the size and
    the engine to use."""
    check_engine(engine, BUILD_ENGINES)
    if engine == "auto":
        engine = "tantivy" if pages > AUTO_TANTIVY_PAGES and (tantivy_installed() or pages > MAX_PAGES["whoosh"]) \
            else "whoosh"
    if pages > MAX_PAGES[engine]:
        if engine == "whoosh":
            raise WikiSimError(f"the corpus has {pages:,} pages, over the Whoosh engine's limit of "
                               f"{MAX_PAGES['whoosh']:,}; build it with --engine tantivy (or --engine auto)"
                               + ("" if tantivy_installed() else f"; {_install_hint()}"))
        raise WikiSimError(f"the corpus has {pages:,} pages, over the tantivy engine's limit of "
                           f"{MAX_PAGES['tantivy']:,} documents; split it into several simulators")
    return engine


def recommendation(engine: str, pages: int) -> str | None:
    """The line ``wiki build`` prints after building a large corpus with Whoosh, else ``None``."""
    if engine != "whoosh" or pages <= AUTO_TANTIVY_PAGES:
        return None
    return (f"note: {pages:,} pages is above {AUTO_TANTIVY_PAGES:,}, where the tantivy engine searches faster "
            f"than Whoosh (whose search time grows with the corpus); rebuild with --engine tantivy or --engine auto")


def _install_hint() -> str:
    from wiki_sim.tantivy_index import INSTALL_HINT

    return INSTALL_HINT


def index_dir_name(engine: str) -> str:
    from wiki_sim.index import INDEX_DIR
    from wiki_sim.tantivy_index import TANTIVY_DIR

    return TANTIVY_DIR if engine == "tantivy" else INDEX_DIR


def build_engine_index(engine: str, store_path: Path, out_dir: Path, *, workers: int, progress: bool,
                       memory_bytes: int | None = None) -> dict[str, Any]:
    """Index the store with ``engine`` into ``out_dir``/<its index directory>, its writers
    holding about ``memory_bytes`` in all (``None``: the engine's default)."""
    check_engine(engine)
    budget = {} if memory_bytes is None else {"memory_bytes": memory_bytes}
    if engine == "tantivy":
        from wiki_sim.tantivy_index import build_tantivy_index

        info = build_tantivy_index(store_path, out_dir / index_dir_name(engine), threads=workers, progress=progress,
                                   **budget)
        from wiki_sim.tantivy_index import TantivySearcher

        vocabulary = TantivySearcher(out_dir / index_dir_name(engine), store_path).vocabulary()
        return {**info, "spelling": build_engine_spelling(vocabulary, out_dir)}
    from wiki_sim.index import build_index, index_vocabulary

    info = build_index(store_path, out_dir / index_dir_name(engine), procs=workers, progress=progress, **budget)
    return {**info, "spelling": build_engine_spelling(index_vocabulary(out_dir / index_dir_name(engine)), out_dir)}


def build_engine_spelling(vocabulary: list[tuple[str, int]], out_dir: Path) -> dict[str, Any]:
    """An engine's spelling index (:mod:`wiki_sim.spelling`) of ``vocabulary`` (term, document
    frequency) into ``out_dir``/spelling."""
    from wiki_sim.spelling import SPELLING_DIR, build_spelling_index

    return build_spelling_index(vocabulary, out_dir / SPELLING_DIR)


def open_engine(path: Path, build_info: dict[str, Any], term_cache_bytes: int | None = None) -> tuple[str, Any]:
    """(engine name, searcher) for the simulator directory ``path`` as its build recorded;
    the searcher reads titles from the shared title table and caches at most
    ``term_cache_bytes`` of per-term data (``None``: its default)."""
    from wiki_sim.forward import FORWARD_DIR, open_titles
    from wiki_sim.store import STORE_FILE

    index_info = build_info.get("index")
    engine = index_info.get("engine", "whoosh") if isinstance(index_info, dict) else "whoosh"
    check_engine(engine)
    titles = open_titles(path / FORWARD_DIR)
    cache = {} if term_cache_bytes is None else {"max_cache_bytes": term_cache_bytes}
    if engine == "tantivy":
        from wiki_sim.tantivy_index import TantivySearcher

        return engine, TantivySearcher(path / index_dir_name(engine), path / STORE_FILE, titles=titles, **cache)
    from wiki_sim.index import IndexSearcher

    return engine, IndexSearcher(path / index_dir_name(engine), titles=titles, **cache)


def open_forward_index(path: Path, documents: int) -> Any | None:
    """The simulator's forward index, or ``None`` (built before it existed, or not matching
    the index: the search then computes page terms from the text as it goes)."""
    from wiki_sim.forward import FORWARD_DIR, ForwardIndex

    if not (path / FORWARD_DIR / "offsets.i64").is_file():
        return None
    try:
        forward = ForwardIndex(path / FORWARD_DIR)
    except (OSError, ValueError):
        return None
    return forward if len(forward) == documents else None
