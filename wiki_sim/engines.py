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


def build_engine_index(engine: str, store_path: Path, out_dir: Path, *, workers: int, progress: bool) -> dict[str, Any]:
    """Index the store with ``engine`` into ``out_dir``/<its index directory>."""
    check_engine(engine)
    if engine == "tantivy":
        from wiki_sim.tantivy_index import build_tantivy_index

        info = build_tantivy_index(store_path, out_dir / index_dir_name(engine), threads=workers, progress=progress)
        return {**info, "spelling": build_engine_spelling(out_dir, store_path)}
    from wiki_sim.index import build_index

    return build_index(store_path, out_dir / index_dir_name(engine), procs=workers, progress=progress)


def build_engine_spelling(out_dir: Path, store_path: Path) -> dict[str, Any]:
    """The tantivy engine's spelling index (:mod:`wiki_sim.spelling`) into ``out_dir``/spelling."""
    from wiki_sim.spelling import SPELLING_DIR, build_spelling_index
    from wiki_sim.tantivy_index import TantivySearcher

    searcher = TantivySearcher(out_dir / index_dir_name("tantivy"), store_path)
    return build_spelling_index(searcher.vocabulary(), out_dir / SPELLING_DIR)


def open_engine(path: Path, build_info: dict[str, Any]) -> tuple[str, Any]:
    """(engine name, searcher) for the simulator directory ``path`` as its build recorded."""
    from wiki_sim.store import STORE_FILE

    index_info = build_info.get("index")
    engine = index_info.get("engine", "whoosh") if isinstance(index_info, dict) else "whoosh"
    check_engine(engine)
    if engine == "tantivy":
        from wiki_sim.tantivy_index import TantivySearcher

        return engine, TantivySearcher(path / index_dir_name(engine), path / STORE_FILE)
    from wiki_sim.index import IndexSearcher

    return engine, IndexSearcher(path / index_dir_name(engine))


def open_forward_index(path: Path, documents: int) -> Any | None:
    """The simulator's forward index, or ``None`` (built before it existed, or not matching
    the index: the search then computes page terms from the text as it goes)."""
    from wiki_sim.forward import FORWARD_DIR, ForwardIndex

    if not (path / FORWARD_DIR / "offsets.npy").is_file():
        return None
    try:
        forward = ForwardIndex(path / FORWARD_DIR)
    except (OSError, ValueError):
        return None
    return forward if len(forward) == documents else None
