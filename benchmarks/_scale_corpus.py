"""Corpora for ``benchmarks.scale``: pages recombined from real sentences, and their queries.

Sentences come from built simulators' stores (by default the embedded Vital Articles corpus in
``data/wiki``, built from ``~/.cache/websailor-gym/summaries_en-us.json``: about 36k sentences of
6-60 words, 21 words on average). Page ``i`` of a corpus (``seed`` fixed, so a size is the same
corpus on every run):

- a *base* page of the source, drawn uniformly; the page's first sentence is one of the base's
  own sentences, then 2 to 7 sentences drawn uniformly from the whole pool (3-8 in all, about
  116 words: the ~121-word pages of issue 23);
- its title ``Base (w1 w2)``: the base's title and two distinct content words (4+ letters, not
  stopwords, not words of the base title) of the page's own sentences, so that a title names
  its page the way ``Mercury (planet)`` does and titles that share a base (``Paris (...)``:
  about N / 10k pages each) make title searches harder as the corpus grows; a title already
  taken gets `` 2``, `` 3``... appended;
- the text: the sentences joined, one JSON line ``{"title", "text"}`` (``--source jsonl``; the
  simulator derives links from titles it finds in the text, as for any JSONL corpus).

Query families, for ``queries`` target pages drawn before the corpus is written (each query's
known target is its page; a sentence recurs in about N * 5.5 / 36k pages, so queries combine
what only their page has):

- ``title``: the base title and one of the two title words (a short title-ish query);
- ``long``: agent-style: 3 consecutive content words from each of 3 of the page's sentences
  (about 9 words; fewer sentences on 3-sentence pages with 4 words each);
- ``misspelt``: the ``title`` query with its longest word (5+ letters) misspelt (two inner
  letters swapped, or one dropped when swapping changes nothing).
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from wiki_sim.analysis import STOPWORDS
from wiki_sim.common.jsonl import atomic_open

FAMILIES = ("title", "long", "misspelt")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[^\W\d_]+")
_PAREN = re.compile(r"\s*\([^)]*\)$")
MIN_WORDS, MAX_WORDS = 6, 60
"""A sentence of the pool has this many words (shorter: fragments; longer: lists, tables)."""


@dataclass
class Pool:
    """The real sentences pages are made of."""

    sentences: list[str]
    bases: list[tuple[str, list[int]]]
    """(source title, indices of its sentences in ``sentences``), for titles with at least one."""


@dataclass
class Target:
    """A page with queries: its title and queries per family."""

    title: str
    queries: dict[str, str]


def load_pool(stores: list[Path]) -> Pool:
    """Sentences of the pages of these simulator stores (``store.sqlite``), deduplicated."""
    sentences: list[str] = []
    seen: dict[str, int] = {}
    bases: list[tuple[str, list[int]]] = []
    for store in stores:
        if not store.is_file():
            raise SystemExit(f"--sentences-from: no simulator store at {store}; build one first "
                             "(`websailor wiki build --out data/wiki`) or pass another simulator directory")
        conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT title, text FROM pages ORDER BY id").fetchall()
        finally:
            conn.close()
        for title, text in rows:
            own = []
            for line in str(text).splitlines():
                if line.lstrip().startswith("#"):
                    continue
                for s in _SENTENCE.split(line.strip()):
                    if MIN_WORDS <= len(s.split()) <= MAX_WORDS and s[:1].isupper():
                        if s not in seen:
                            seen[s] = len(sentences)
                            sentences.append(s)
                        own.append(seen[s])
            if own:
                bases.append((str(title), own))
    if len(sentences) < 100:
        raise SystemExit(f"--sentences-from: only {len(sentences)} usable sentences in {', '.join(map(str, stores))}; "
                         "need at least 100 (use a larger simulator, e.g. the default data/wiki)")
    return Pool(sentences, bases)


def content_words(text: str, exclude: set[str] = frozenset()) -> list[str]:
    """Words of 4+ letters that are not stopwords nor in ``exclude`` (lower case), in order."""
    return [w for w in _WORD.findall(text)
            if len(w) >= 4 and w.lower() not in STOPWORDS and w.lower() not in exclude]


def misspell(word: str) -> str:
    """``word`` with two inner letters swapped (or, when that changes nothing, one dropped)."""
    i = len(word) // 2
    swapped = word[:i - 1] + word[i] + word[i - 1] + word[i + 1:]
    return swapped if swapped.lower() != word.lower() else word[:i] + word[i + 1:]


def _queries(base: str, title_word: str, sentences: list[str], rng: random.Random) -> dict[str, str]:
    name = _PAREN.sub("", base) or base
    title_query = f"{name} {title_word}"
    base_words = {w.lower() for w in _WORD.findall(name)}
    picked = rng.sample(sentences, min(3, len(sentences)))
    run = 3 if len(picked) == 3 else 4
    parts = []
    for s in picked:
        words = content_words(s, base_words)
        if words:
            start = rng.randrange(max(1, len(words) - run + 1))
            parts.extend(words[start:start + run])
    longest = max(title_query.split(), key=len)
    misspelt = title_query.replace(longest, misspell(longest), 1) if len(longest) >= 5 else ""
    out = {"title": title_query, "long": " ".join(parts)}
    if misspelt:
        out["misspelt"] = misspelt
    return out


def write_corpus(pool: Pool, n_pages: int, path: Path, *, queries: int, seed: int = 0) -> tuple[list[Target], dict]:
    """Write ``n_pages`` recombined pages to ``path`` (JSONL); return the query targets and stats."""
    rng = random.Random(f"scale-{seed}")
    chosen = set(rng.sample(range(n_pages), min(queries, n_pages)))
    titles: set[str] = set()
    targets: list[Target] = []
    words_total = 0
    n_sentences = len(pool.sentences)
    with atomic_open(path, "w") as fh:
        for i in range(n_pages):
            base, own = pool.bases[rng.randrange(len(pool.bases))]
            count = rng.randint(3, 8)
            idx = [own[rng.randrange(len(own))]] + [rng.randrange(n_sentences) for _ in range(count - 1)]
            sentences = [pool.sentences[j] for j in idx]
            text = " ".join(sentences)
            base_words = {w.lower() for w in _WORD.findall(base)}
            candidates = list(dict.fromkeys(w.lower() for w in content_words(text, base_words)))
            pair = rng.sample(candidates, 2) if len(candidates) >= 2 else (candidates + ["page", str(i)])[:2]
            title = f"{base} ({pair[0]} {pair[1]})"
            if title in titles:
                k = 2
                while f"{title} {k}" in titles:
                    k += 1
                title = f"{title} {k}"
            titles.add(title)
            words_total += len(text.split())
            fh.write(json.dumps({"title": title, "text": text}, ensure_ascii=False) + "\n")
            if i in chosen:
                targets.append(Target(title, _queries(base, pair[0], sentences, rng)))
    stats = {"pages": n_pages, "words": words_total, "words_per_page": round(words_total / n_pages, 1),
             "sentence_pool": n_sentences, "bases": len(pool.bases), "bytes": path.stat().st_size}
    return targets, stats


def family_queries(targets: list[Target]) -> dict[str, list[tuple[str, str]]]:
    """Family -> [(query, target title)] (queries a family could not make are left out)."""
    return {f: [(t.queries[f], t.title) for t in targets if t.queries.get(f)] for f in FAMILIES}


def write_tasks(targets: list[Target], path: Path) -> int:
    """Tasks for ``websailor/WikiSim-v0`` (question, answer = the target page's title)."""
    with path.open("w", encoding="utf-8") as fh:
        for t in targets:
            q = t.queries["long"] or t.queries["title"]
            fh.write(json.dumps({"question": f"Which page mentions {q}?", "answer": t.title}) + "\n")
    return len(targets)
