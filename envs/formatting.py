"""Tool output formats shared by the simulator and the live web (identical on purpose)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping


def _field(hit: Any, name: str) -> str:
    if isinstance(hit, Mapping):
        return str(hit.get(name, "") or "")
    return str(getattr(hit, name, "") or "")


def format_search(query: str, hits: Iterable[Any]) -> str:
    """One query's results, as the reference agent's search tool writes them.

    ``hits`` are objects or mappings with ``title``, ``url``, ``snippet`` (and optionally
    ``date``). No hits gives a message that suggests a broader query. When the search
    replaced a misspelled word (``hits.corrected_query``, set by the simulator), the
    observation says which query the results are for.
    """
    corrected = getattr(hits, "corrected_query", None)
    hits = list(hits)
    if not hits:
        return (f"No results found for '{query}'. Try a shorter or more general query, "
                "or different keywords.")
    if corrected and corrected != query:
        head = (f"No results found for '{query}'; showing results for '{corrected}' (spelling corrected). "
                f"The search found {len(hits)} results:")
    else:
        head = f"A search for '{query}' found {len(hits)} results:"
    lines = [f"{head}\n\n## Web Results"]
    for i, hit in enumerate(hits, 1):
        entry = f"{i}. [{_field(hit, 'title')}]({_field(hit, 'url')})"
        date = _field(hit, "date")
        if date:
            entry += f"\nDate published: {date}"
        snippet = _field(hit, "snippet").strip()
        if snippet:
            entry += f"\n{snippet}"
        lines.append(entry)
    return "\n\n".join(lines)


def format_search_batch(queries: list[str], results: list[list[Any]]) -> str:
    """Several queries' results in one observation, separated by a rule."""
    return "\n=======\n".join(format_search(q, hits) for q, hits in zip(queries, results))
