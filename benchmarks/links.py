"""Derived links against real wikilinks: the gensim enwiki sample, links stripped, derived, compared.

The sample's 106 articles keep their real wikilinks; the plain text the simulator stores
has none. Both link finders run on that text side by side: the old title matcher
(:class:`~wiki_sim.ingest.link_finder.LinkFinder`, as the default corpus used it, with
its corpus-frequency filter) and :class:`~wiki_sim.ingest.entity_links.EntityLinker`.
A derived link (page, target) is correct when the page really links to that target.

Two title universes:

- ``sample``: the 106 articles themselves, the situation of a corpus without links
  (every title has its page, so the linker learns from every page how it writes its name);
- ``linked``: those plus every title the articles link to (about 15,000 real article
  titles, most without a page here, so most are judged by English frequency alone):
  a much larger and harder vocabulary.

``precision`` counts as wrong every derived link the page does not carry, including true
mentions that Wikipedia's editors left unlinked (Wikipedia links a term once, and not
everyday ones or places everyone knows), so it is a lower bound. ``consistent_precision``
also accepts a link whose anchor is one the sample's editors used for that target elsewhere.
``audited_precision`` takes the links the page does not carry as judged by hand in
``benchmarks/links_audit.tsv`` (does the mention name the target?): all of them for
``sample``, a random 50 for ``linked`` (there: gold + the unlinked links times the share the
audit found true); ``unaudited`` counts the links the file does not cover (after a change of
the linker: judge them and add them). ``anchor_agreement`` is judged only where the derived
mention overlaps a real link: the share whose target is that link's.

    python -m benchmarks.links            # table, then one JSON line
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable

from wiki_sim.ingest import open_source
from wiki_sim.ingest.entity_links import EntityLinker
from wiki_sim.ingest.link_finder import LinkFinder
from wiki_sim.records import Page, Redirect, normalize_title

AUDIT = Path(__file__).with_name("links_audit.tsv")
Finder = Callable[[str, str], list[tuple[str, int, int]]]
"""(text, own title) -> [(target, start, end)]."""


@dataclass
class Article:
    title: str
    text: str
    gold: set[str]
    """Targets of the article's visible wikilinks (redirects followed)."""
    spans: list[tuple[int, int, str]]
    """(start, end, target) of each visible wikilink's anchor in ``text``."""


def load_sample() -> list[Article]:
    pages: list[Page] = []
    redirects: dict[str, str] = {}
    for record in open_source("gensim-sample", progress=False):
        if isinstance(record, Redirect):
            redirects[normalize_title(record.title)] = normalize_title(record.target)
        else:
            pages.append(record)
    articles = []
    for p in pages:
        gold, spans, cursor = set(), [], 0
        for i, (target, anchor) in enumerate(p.links):
            if i in p.hidden_links or not target:
                continue
            target = redirects.get(target, target)
            gold.add(target)
            pos = p.text.find(anchor, cursor) if anchor else -1
            if pos >= 0:
                spans.append((pos, pos + len(anchor), target))
                cursor = pos + len(anchor)
        articles.append(Article(p.title, p.text, gold, spans))
    return articles


def old_finder(titles: list[str], articles: list[Article]) -> Finder:
    finder = LinkFinder(titles)
    finder.drop_common_words([a.text for a in articles], max_df=0.02)

    def find(text: str, own: str) -> list[tuple[str, int, int]]:
        out, cursor = [], 0
        for target, anchor in finder.find(text, own):  # the old finder gives anchors only: locate them
            pos = text.find(anchor, cursor)
            pos = pos if pos >= 0 else text.find(anchor)
            out.append((target, pos, pos + len(anchor)))
            cursor = max(cursor, pos + len(anchor))
        return out

    return find


def new_finder(titles: list[str], articles: list[Article]) -> Finder:
    linker = EntityLinker(titles)
    linker.learn((a.title, a.text) for a in articles)
    return lambda text, own: [(f.target, f.start, f.end) for f in linker.find(text, own)]


def load_audit() -> dict[tuple[str, str, str], bool]:
    """(universe, page, target) -> whether the derived mention names the target, as judged by hand."""
    audit = {}
    for line in AUDIT.read_text(encoding="utf-8").splitlines()[3:]:
        universe, page, target, _anchor, names_it, _note = line.split("\t")
        audit[(universe, page, target)] = names_it == "yes"
    return audit


def evaluate(make: Callable[[list[str], list[Article]], Finder], titles: list[str],
             articles: list[Article], universe_name: str = "", audit: dict | None = None) -> dict[str, Any]:
    universe = set(titles)
    t0 = time.perf_counter()
    find = make(titles, articles)
    t1 = time.perf_counter()
    derived = {a.title: find(a.text, a.title) for a in articles}
    t2 = time.perf_counter()
    anchors_of: dict[str, set[str]] = {}
    for a in articles:
        for gs, ge, g in a.spans:
            anchors_of.setdefault(g, set()).add(a.text[gs:ge])
    predicted = correct = gold_total = gold_found = judged = agreed = consistent = 0
    audited_true = audited = 0
    wrong: list[str] = []
    for a in articles:
        links = derived[a.title]
        targets = {t for t, _, _ in links}
        gold = {t for t in a.gold if t in universe and t != a.title}
        predicted += len(targets)
        correct += len(targets & gold)
        gold_total += len(gold)
        gold_found += len(gold & targets)
        for t in targets - gold:
            verdict = (audit or {}).get((universe_name, a.title, t))
            if verdict is not None:
                audited += 1
                audited_true += verdict
        for t, s, e in links:
            overlap = [g for gs, ge, g in a.spans if gs < e and s < ge]
            if overlap:
                judged += 1
                agreed += t in overlap
                ok = t in overlap
            else:
                ok = t in gold or a.text[s:e] in anchors_of.get(t, ())
            consistent += ok
            if not ok:
                wrong.append(f"{a.title} -> {t} ({a.text[max(0, s - 50):e + 30]!r})")
    chars = sum(len(a.text) for a in articles)
    unlinked = predicted - correct
    share = audited_true / audited if audited else 0.0
    audited_precision = (correct + share * unlinked) / predicted if predicted and audited else None
    return {"titles": len(universe), "derived": predicted, "correct": correct,
            "precision": round(correct / predicted, 4) if predicted else 0.0,
            "consistent_precision": round(consistent / predicted, 4) if predicted else 0.0,
            "audited_precision": round(audited_precision, 4) if audited_precision is not None else None,
            "audited": audited, "unaudited": unlinked - audited,
            "recall": round(gold_found / gold_total, 4) if gold_total else 0.0, "gold": gold_total,
            "anchor_agreement": round(agreed / judged, 4) if judged else 0.0, "judged": judged,
            "setup_s": round(t1 - t0, 3), "find_s": round(t2 - t1, 3), "chars": chars, "wrong_examples": wrong}


def hostile_scaling(make: Callable[[list[str], list[Article]], Finder], titles: list[str],
                    articles: list[Article]) -> float:
    """time(2 MB) / time(1 MB) on a text that is nothing but candidate names and qualifier bait (2.0: linear)."""
    find = make(titles, articles)
    unit = "Berlin band Mercury planet Thought the Party of Peanuts peanuts Albert Einstein Albert Albert. "
    times = []
    for mb in (1.0, 2.0):
        text = unit * int(mb * 1_000_000 / len(unit))
        best = float("inf")
        for _ in range(3):  # best of 3: the machines are shared
            t0 = time.perf_counter()
            find(text, "")
            best = min(best, time.perf_counter() - t0)
        times.append(best)
    return round(times[1] / times[0], 2)


def main() -> None:
    articles = load_sample()
    sample_titles = [a.title for a in articles]
    linked_titles = sample_titles + sorted({t for a in articles for t in a.gold} - set(sample_titles))
    rows = []
    audit = load_audit()
    for universe, titles in (("sample", sample_titles), ("linked", linked_titles)):
        for name, make in (("old LinkFinder", old_finder), ("EntityLinker", new_finder)):
            r = evaluate(make, titles, articles, universe, audit if name == "EntityLinker" else None)
            rows.append({"universe": universe, "finder": name, **r})
    print(f"{'universe':8} {'finder':15} {'titles':>7} {'derived':>8} {'correct':>8} {'precision':>9} "
          f"{'consist.':>8} {'audited':>7} {'recall':>7} {'anchor agr.':>11} {'find s':>7}")
    for r in rows:
        print(f"{r['universe']:8} {r['finder']:15} {r['titles']:7d} {r['derived']:8d} {r['correct']:8d} "
              f"{r['precision']:9.3f} {r['consistent_precision']:8.3f} "
              f"{(format(r['audited_precision'], '7.3f') if r['audited_precision'] is not None else '      -')} "
              f"{r['recall']:7.3f} {r['anchor_agreement']:11.3f} {r['find_s']:7.2f}")
    for r in rows:
        if r["universe"] == "linked":
            print(f"\n{r['finder']}, linked universe: {len(r['wrong_examples'])} derived links neither the page "
                  f"carries nor any page names so, e.g.:")
            for w in r["wrong_examples"][:: max(1, len(r["wrong_examples"]) // 12)][:12]:
                print("  ", w)
    for r in rows:
        if r["audited"]:
            print(f"{r['universe']} {r['finder']}: {r['audited']} unlinked derived links judged by hand, "
                  f"{r['unaudited']} not judged")
    scaling = {name: hostile_scaling(make, linked_titles, articles)
               for name, make in (("old", old_finder), ("new", new_finder))}
    print(f"\nhostile text, time(2 MB) / time(1 MB) (2.0 = linear): {scaling}")
    summary = {"benchmark": "links", "corpus": "gensim enwiki sample (106 articles)",
               "results": [{k: v for k, v in r.items() if k != "wrong_examples"} for r in rows],
               "hostile_time_ratio_2x_text": scaling}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
