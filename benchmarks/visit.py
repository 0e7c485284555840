"""Visit: does the evidence hold what the goal asks for? The simulator's goal-focused reader
against a lead-only reader and plain BM25 over passages, side by side in one run.

Triples (page, goal, expected text) come from the corpora themselves, deterministically:
a sentence of the page that holds a year (family ``when``: goal "when <3-4 content words of
the sentence>", expected the year) or a name (family ``who``: goal "who <content words>",
expected a capitalized name from the sentence that is not in the goal). The goal's words
never include the expected text or the page title's words. Built from the gensim enwiki
sample (full articles, where the answer usually lies beyond the lead) and the embedded
default corpus (lead sections only).

Readers, each with the same 3,000-character evidence budget the visit tool uses:
- ``simulator``: ``wiki_sim.evidence.focus`` (what ``WikiSim.visit`` returns);
- ``bm25``: the page's paragraphs (long ones cut at sentence ends), BM25-ranked against
  the goal's words, best ones within the budget in page order (the simulator's reader
  before issue 12);
- ``lead``: the first 3,000 characters of the page.

Measured per corpus and family: ``hit`` (the expected text is in the evidence) and
``hit_first`` (it is in the first 400 characters, what a reader sees first), and the
median time per visit. Usage: ``python -m benchmarks.visit [--n 300] [--seed 0]``.
Prints a table, then one line of JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

from wiki_sim import WikiSim
from wiki_sim.build import build
from wiki_sim.evidence import STOPWORDS, focus, split_sentences
from wiki_sim.focus import rank_passages, split_passages

BUDGET = 3000
FIRST_CHARS = 400
PER_PAGE = 6
"""Sentences drawn per page (the gensim sample has about 100 articles)."""
_WORD = re.compile(r"\w+")
_YEAR = re.compile(r"\b(1[5-9][0-9]{2}|20[0-2][0-9])\b")
_NAME = re.compile(r"(?<=[a-z,;] )([A-Z][a-z]{2,}(?: [A-Z][a-z]{2,})*)")

Reader = Callable[[dict, str], str]


def make_triples(sim: WikiSim, n: int, seed: int) -> list[dict]:
    """Up to ``n`` triples per family, from sentences after the first 300 characters of each page."""
    rng = random.Random(seed)
    pages = [p.title for p in sim.iter_pages()] if hasattr(sim, "iter_pages") else sim.random_pages(100_000, seed=seed)
    rng.shuffle(pages)
    out: dict[str, list[dict]] = {"when": [], "who": []}
    for title in pages:
        if all(len(v) >= n for v in out.values()):
            break
        page = sim.page(title)
        title_words = {w.lower() for w in _WORD.findall(title)}
        sentences = [s.text for s in split_sentences(page["text"][300:]) if 60 <= len(s.text) <= 400]
        if not sentences:
            continue
        for sentence in rng.sample(sentences, min(len(sentences), PER_PAGE)):
            _add_triple(out, title, title_words, sentence, n, rng)
    return [t | {"family": f} for f, ts in out.items() for t in ts]


def _add_triple(out: dict[str, list[dict]], title: str, title_words: set[str], sentence: str, n: int,
                rng: random.Random) -> None:
    for family, pattern in (("when", _YEAR), ("who", _NAME)):
        found = pattern.findall(sentence)
        if not found or len(out[family]) >= n:
            continue
        expected = found[0]
        banned = title_words | {w.lower() for w in _WORD.findall(expected)}
        words = [w for w in _WORD.findall(sentence) if w.lower() not in STOPWORDS and w.lower() not in banned
                 and not w.isdigit()]
        if len(words) < 3:
            continue
        chosen = sorted(rng.sample(range(len(words)), min(len(words), rng.choice((3, 4)))))
        goal = f"{family} " + " ".join(words[i] for i in chosen)
        out[family].append({"title": title, "goal": goal, "expected": expected})
        return


def read_simulator(page: dict, goal: str) -> str:
    return focus(page["text"], goal, title=page["title"], lead=page["lead"], budget=BUDGET)[0]


def read_bm25(page: dict, goal: str) -> str:
    passages = split_passages(page["text"])
    scores = rank_passages(passages, goal)
    chosen, used = [], 0
    for i in sorted(range(len(passages)), key=lambda i: (-scores[i], i)):
        if chosen and scores[i] <= 0:
            break
        cost = len(passages[i].text) + 8
        if used + cost > BUDGET and chosen:
            continue
        chosen.append(i)
        used += cost
    return "\n\n".join(passages[i].text for i in sorted(chosen))[:BUDGET]


def read_lead(page: dict, goal: str) -> str:
    return page["text"][:BUDGET]


READERS: dict[str, Reader] = {"simulator": read_simulator, "bm25": read_bm25, "lead": read_lead}


def run(sim: WikiSim, triples: list[dict]) -> dict:
    results: dict[str, dict] = {}
    for family in sorted({t["family"] for t in triples}):
        subset = [t for t in triples if t["family"] == family]
        row: dict[str, dict] = {}
        times: dict[str, list[float]] = {name: [] for name in READERS}
        hits = {name: [0, 0] for name in READERS}
        for t in subset:
            page = sim.page(t["title"])
            for name, reader in READERS.items():  # interleaved: noise hits all readers alike
                start = time.perf_counter()
                evidence = reader(page, t["goal"])
                times[name].append(time.perf_counter() - start)
                hits[name][0] += t["expected"] in evidence
                hits[name][1] += t["expected"] in evidence[:FIRST_CHARS]
        for name in READERS:
            row[name] = {"hit": round(hits[name][0] / len(subset), 3),
                         "hit_first": round(hits[name][1] / len(subset), 3),
                         "p50_ms": round(1000 * statistics.median(times[name]), 3)}
        results[family] = {"triples": len(subset), "readers": row}
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=300, help="triples per family and corpus (default: 300)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    report: dict = {"benchmark": "visit", "budget_chars": BUDGET, "first_chars": FIRST_CHARS, "corpora": {}}
    with tempfile.TemporaryDirectory(prefix="bench-visit-") as tmp:
        for corpus in ("gensim-sample", "default"):
            out = Path(tmp) / corpus
            build(corpus, None, out, workers=2, progress=False)
            with WikiSim(out) as sim:
                triples = make_triples(sim, args.n, args.seed)
                report["corpora"][corpus] = run(sim, triples)
    print(f"{'corpus':<14} {'family':<6} {'n':>4}  " + "  ".join(f"{r + ' hit/first':>22}" for r in READERS))
    wins = []
    for corpus, families in report["corpora"].items():
        for family, res in families.items():
            cells = "  ".join(f"{v['hit']:>9.3f} / {v['hit_first']:.3f} {v['p50_ms']:>5.1f}ms"
                              for v in res["readers"].values())
            print(f"{corpus:<14} {family:<6} {res['triples']:>4}  {cells}")
            r = res["readers"]
            wins.append(r["simulator"]["hit"] >= max(r["bm25"]["hit"], r["lead"]["hit"])
                        and r["simulator"]["hit_first"] >= max(r["bm25"]["hit_first"], r["lead"]["hit_first"]))
    report["targets"] = {"simulator_ge_baselines_everywhere": all(wins)}
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
