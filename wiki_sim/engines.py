"""The simulator's search engines: which one a build uses, and opening it.

``whoosh`` (the default the design names) or ``tantivy`` (optional, for rollouts at
scale). ``websailor wiki build --engine`` chooses; build.json records the choice under
``index.engine``; :func:`open_engine` opens what the build recorded (``whoosh`` for builds
that predate the choice).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from wiki_sim.errors import WikiSimError

EngineName = Literal["whoosh", "tantivy"]
ENGINES: tuple[str, ...] = ("whoosh", "tantivy")


def check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise WikiSimError(f"engine must be one of {', '.join(ENGINES)}; got {engine!r}")


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

        return build_tantivy_index(store_path, out_dir / index_dir_name(engine), threads=workers, progress=progress,
                                   **budget)
    from wiki_sim.index import build_index

    return build_index(store_path, out_dir / index_dir_name(engine), procs=workers, progress=progress, **budget)


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

        return engine, TantivySearcher(path / index_dir_name(engine), path / STORE_FILE, titles=titles)
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
