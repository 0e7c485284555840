"""Offline Wikipedia simulator: corpora -> SQLite store -> Whoosh index -> WikiSim (search, visit)."""

from wiki_sim.errors import WikiSimError
from wiki_sim.records import (LinkInfo, Page, PageInfo, Redirect, canonical_title, normalize_title, title_to_url,
                              url_to_title)

__all__ = ["WikiSim", "Hit", "LinkFinder", "WikiSimError", "Page", "PageInfo", "LinkInfo", "Redirect", "canonical_title",
           "normalize_title", "title_to_url", "url_to_title"]


def __getattr__(name: str):
    # WikiSim pulls in Whoosh; keep `import wiki_sim` light for the records and errors.
    if name in ("WikiSim", "Hit"):
        from wiki_sim import sim

        return getattr(sim, name)
    if name == "LinkFinder":  # names in a text -> the titles they mention (plain title matching)
        from wiki_sim.ingest.link_finder import LinkFinder

        return LinkFinder
    raise AttributeError(f"module 'wiki_sim' has no attribute {name!r}")
