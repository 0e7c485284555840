"""Visit: does what a reader returns hold the passage that answers the goal? The simulator's
goal-focused reader against a lead-only reader and plain BM25 over passages, side by side in
one run, on triples shaped like an agent's visits.

Triples (page, goal, expected answer with its context) come from the corpora themselves,
deterministically. A sentence of the page that holds a year (family ``when``) or a name
(family ``who``: a capitalized name inside the sentence) gives the expected answer; the
goal is phrased as an agent writes one (the released WebDancer trajectories: "Find the year
...", "Identify who ...", "Confirm ..."): an imperative, the kind of answer, the page's
subject by name, and only two content words of the sentence (drawn among its four longest,
never the answer's words or the title's). Families ``when-bare`` and ``who-bare`` ask the
same with the same words but without naming the subject.

- ``gensim-sample``: full enwiki articles longer than twice the evidence budget, and only
  sentences that start past the budget, so the answer lies deep in a page that does not fit
  (a lead-only reader cannot reach it except by chance repetition);
- ``default``: the embedded lead sections. Every page there fits the budget, so every reader
  returns the whole page and ``hit`` is 1.0 by construction; on this corpus only
  ``hit_first`` and ``hit_summary`` can separate the readers (the table marks ``hit`` so).

A hit needs the answer *with its context*: the answer and up to 30 characters of its own
sentence on each side (whitespace-normalized), so a year that merely recurs elsewhere on the
page does not count.

Readers, each with the 3,000-character evidence budget of the visit tool, each returning
(evidence, summary):
- ``simulator``: ``wiki_sim.evidence.focus`` (what ``WikiSim.visit`` returns);
- ``bm25``: the page's paragraphs (long ones cut at sentence ends), BM25-ranked against the
  goal's words (no stemming), best ones within the budget in page order (the simulator's
  reader before issue 12); its summary is the best passage;
- ``lead``: the first 3,000 characters of the page; its summary the first 600.

Measured per corpus and family: ``hit`` (in the evidence), ``hit_first`` (in the evidence's
first 400 characters, what a reader sees first), ``hit_summary`` (in the summary, at most
600 characters), and the median time per visit. Usage:
``python -m benchmarks.visit [--n 300] [--seed 0] [--misses K]``. Prints a table, then one
line of JSON; ``--misses K`` also prints K triples the simulator missed and BM25 hit.
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
SUMMARY_CHARS = 600
FIRST_CHARS = 400
CONTEXT_CHARS = 30
"""Characters of the answer's own sentence kept on each side of it in the expected text."""
PER_PAGE = 8
"""Sentences drawn per page (the gensim sample has about 90 articles longer than 6,000 characters)."""
GOAL_WORDS = 2
"""Content words of the answering sentence in a goal (an agent rarely knows more)."""
_WORD = re.compile(r"\w+")
_YEAR = re.compile(r"\b(1[5-9][0-9]{2}|20[0-2][0-9])\b")
_NAME = re.compile(r"(?<=[a-z,;] )([A-Z][a-z]{2,}(?: [A-Z][a-z]{2,})*)")
_VAGUE = frozenset("able after against another around before being between both came during either even first "
                   "having however later like made make many much near often over since still their them then "
                   "there these they though through under until upon well were what when where while whose with "
                   "within without would years".split())
TEMPLATES = {
    "when": ("Find the year {title} {words}", "Determine when {title} {words}",
             "Identify the date of {words} ({title})", "Confirm when {words} for {title}"),
    "who": ("Identify who {words} {title}", "Find the person {words} in {title}",
            "Determine who {words} ({title})", "Confirm who {words} for {title}"),
}
BARE_TEMPLATES = {"when": ("Find the year {words}", "Determine when {words}"),
                  "who": ("Identify who {words}", "Find the person {words}")}
"""The same goals without the page's subject (family ``<kind>-bare``, same sentences and words)."""

Reader = Callable[[dict, str], tuple[str, str]]


def _norm(text: str) -> str:
    return " ".join(text.split())


def anchor(sentence: str, answer: str, at: int) -> str:
    """``answer`` (at ``at`` in ``sentence``) with up to ``CONTEXT_CHARS`` of the sentence on
    each side, cut at word boundaries, whitespace-normalized."""
    start, end = max(0, at - CONTEXT_CHARS), min(len(sentence), at + len(answer) + CONTEXT_CHARS)
    if start > 0:
        space = sentence.find(" ", start, at)
        start = space + 1 if space >= 0 else at
    if end < len(sentence):
        space = sentence.rfind(" ", at + len(answer), end)
        end = space if space >= 0 else at + len(answer)
    return _norm(sentence[start:end])


def make_triples(sim: WikiSim, n: int, seed: int, *, min_page_chars: int = 0, min_offset: int = 300) -> list[dict]:
    """Up to ``n`` triples per family, from pages of at least ``min_page_chars`` characters and
    sentences that start at least ``min_offset`` characters into the page."""
    rng = random.Random(seed)
    pages = sorted(p.title for p in sim.iter_pages())
    rng.shuffle(pages)
    out: dict[str, list[dict]] = {family: [] for family in TEMPLATES}
    for title in pages:
        if all(len(out[f]) >= n for f in TEMPLATES):
            break
        text = sim.page(title)["text"]
        if len(text) < min_page_chars:
            continue
        title_words = {w.lower() for w in _WORD.findall(title)}
        body = text[min_offset:]
        sentences = [s.text for s in split_sentences(body) if 60 <= len(s.text) <= 400]
        for sentence in rng.sample(sentences, min(len(sentences), PER_PAGE)):
            _add_triple(out, title, title_words, sentence, n, rng)
    return [t | {"family": f} for f, ts in out.items() for t in ts]


def _add_triple(out: dict[str, list[dict]], title: str, title_words: set[str], sentence: str, n: int,
                rng: random.Random) -> None:
    for family, pattern in (("when", _YEAR), ("who", _NAME)):
        match = pattern.search(sentence)
        if not match or len(out[family]) >= n:
            continue
        expected = match.group(1)
        banned = title_words | {w.lower() for w in _WORD.findall(expected)}
        tokens = _WORD.findall(sentence)
        # The words an agent would know: content words of 4+ letters, not the sentence's first
        # word (capitalized only by position), drawn among the sentence's longest (most specific).
        words = list(dict.fromkeys(w for w in tokens[1:] if len(w) >= 4 and w.lower() not in STOPWORDS
                                   and w.lower() not in banned and not w.isdigit() and w.lower() not in _VAGUE))
        if len(words) < GOAL_WORDS:
            continue
        specific = sorted(words, key=lambda w: (-len(w), words.index(w)))[:2 * GOAL_WORDS]
        chosen = sorted(rng.sample(specific, GOAL_WORDS), key=words.index)
        words_text = " ".join(chosen)
        goal = rng.choice(TEMPLATES[family]).format(title=title, words=words_text)
        bare = rng.choice(BARE_TEMPLATES[family]).format(words=words_text)
        triple = {"title": title, "expected": expected, "anchor": anchor(sentence, expected, match.start(1)),
                  "sentence": sentence}
        out[family].append(triple | {"goal": goal})
        out.setdefault(f"{family}-bare", []).append(triple | {"goal": bare})
        return


def read_simulator(page: dict, goal: str) -> tuple[str, str]:
    return focus(page["text"], goal, title=page["title"], lead=page["lead"], budget=BUDGET,
                 summary_chars=SUMMARY_CHARS)


def read_bm25(page: dict, goal: str) -> tuple[str, str]:
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
    evidence = "\n\n".join(passages[i].text for i in sorted(chosen))[:BUDGET]
    return evidence, passages[chosen[0]].text[:SUMMARY_CHARS] if chosen else ""


def read_lead(page: dict, goal: str) -> tuple[str, str]:
    return page["text"][:BUDGET], page["text"][:SUMMARY_CHARS]


READERS: dict[str, Reader] = {"simulator": read_simulator, "bm25": read_bm25, "lead": read_lead}
METRICS = ("hit", "hit_first", "hit_summary")


def score(evidence: str, summary: str, expected_anchor: str) -> tuple[bool, bool, bool]:
    """(hit, hit_first, hit_summary) of one reader's output."""
    ev = _norm(evidence)
    return expected_anchor in ev, expected_anchor in _norm(evidence[:FIRST_CHARS]), expected_anchor in _norm(summary)


def run(sim: WikiSim, triples: list[dict], misses: list[dict] | None = None) -> dict:
    results: dict[str, dict] = {}
    for family in sorted({t["family"] for t in triples}):
        subset = [t for t in triples if t["family"] == family]
        times: dict[str, list[float]] = {name: [] for name in READERS}
        hits = {name: [0, 0, 0] for name in READERS}
        for t in subset:
            page = sim.page(t["title"])
            got = {}
            for name, reader in READERS.items():  # interleaved: noise hits all readers alike
                start = time.perf_counter()
                evidence, summary = reader(page, t["goal"])
                times[name].append(time.perf_counter() - start)
                got[name] = score(evidence, summary, t["anchor"])
                for m in range(3):
                    hits[name][m] += got[name][m]
            if misses is not None and got["bm25"][0] and not got["simulator"][0]:
                misses.append(t)
        row = {name: {**{m: round(hits[name][i] / len(subset), 3) for i, m in enumerate(METRICS)},
                      "p50_ms": round(1000 * statistics.median(times[name]), 3)} for name in READERS}
        results[family] = {"triples": len(subset), "readers": row}
    return results


CORPORA = {
    # (min_page_chars, min_offset): deep answers in pages longer than the budget
    "gensim-sample": (2 * BUDGET, BUDGET),
    # every default page fits the budget: answers past the first sentence or two
    "default": (0, 300),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=300, help="triples per family and corpus (default: 300)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--misses", type=int, default=0, help="print this many triples the simulator missed and BM25 hit")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error(f"--n: expected at least 1, got {args.n}")
    report: dict = {"benchmark": "visit", "budget_chars": BUDGET, "first_chars": FIRST_CHARS,
                    "summary_chars": SUMMARY_CHARS, "corpora": {}}
    missed: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-visit-") as tmp:
        for corpus, (min_chars, min_offset) in CORPORA.items():
            out = Path(tmp) / corpus
            build(corpus, None, out, workers=2, progress=False)
            with WikiSim(out) as sim:
                fits = [len(sim.page(t)["text"]) <= BUDGET for t in (p.title for p in sim.iter_pages())]
                triples = make_triples(sim, args.n, args.seed, min_page_chars=min_chars, min_offset=min_offset)
                missed[corpus] = []
                report["corpora"][corpus] = {"pages_fitting_budget": round(sum(fits) / len(fits), 3),
                                             "families": run(sim, triples, missed[corpus])}
    print(f"{'corpus':<14} {'family':<9} {'n':>4}  " + "  ".join(f"{r + ' hit/first/summary':>30}" for r in READERS))
    wins = []
    for corpus, res_corpus in report["corpora"].items():
        whole_pages = res_corpus["pages_fitting_budget"] == 1.0
        for family, res in res_corpus["families"].items():
            cells = "  ".join(f"{v['hit']:>6.3f}{'*' if whole_pages else ' '}/ {v['hit_first']:.3f} / "
                              f"{v['hit_summary']:.3f} {v['p50_ms']:>5.1f}ms" for v in res["readers"].values())
            print(f"{corpus:<14} {family:<9} {res['triples']:>4}  {cells}")
            r = res["readers"]
            for metric in METRICS:
                if metric == "hit" and whole_pages:
                    continue  # every reader returns the whole page: this cannot separate them
                wins.append(r["simulator"][metric] >= max(r["bm25"][metric], r["lead"][metric]))
    print("* every page of the corpus fits the budget: each reader returns it whole, hit is 1.0 by construction")
    for corpus, triples in missed.items():
        for t in triples[:args.misses]:
            print(f"missed ({corpus}): {t['title']!r} goal={t['goal']!r} expected={t['anchor']!r}")
    report["targets"] = {"simulator_ge_baselines_on_every_separating_metric": all(wins)}
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
