"""EntityLinker: derived links name their entities (issue 17's false relations), checked on real wikilinks."""

from __future__ import annotations

import gc
import hashlib
import json

import numpy as np
import pytest

from wiki_sim import WikiSim
from wiki_sim.ingest.entity_links import EntityLinker
from wiki_sim.ingest.name_usage import own_usage, sentence_start
from wiki_sim.ingest import open_source
from wiki_sim.ingest.link_finder import LinkFinder
from wiki_sim.ingest.name_table import SeenTitles, TitleList
from wiki_sim.sources import fetch_default_corpus

TITLES = ["Thought", "Party", "Shape", "Switch", "River", "Amazon River", "Peanuts", "Peanut", "Berlin",
          "Berlin (band)", "Mercury (planet)", "Queen (band)", "Queen (chess)", "Mammal", "Albedo", "Water",
          "Theory of relativity", "Theory", "Asia", "Apollo", "Ada (programming language)", "Aberdeen (disambiguation)"]
OWN_TEXT = {
    "Peanuts": "Peanuts is a comic strip. Schulz drew Peanuts for fifty years.",
    "Mammal": "A mammal is an animal. Every mammal has hair.",
    "Water": "Water is a compound. Life needs water.",
    "Berlin": "Berlin is the capital of Germany. People moved to Berlin.",
    "Thought": "In their view, thought is a mental process.",
}


@pytest.fixture(scope="module")
def linker():
    linker = EntityLinker(TITLES)
    linker.learn(OWN_TEXT.items())
    return linker


def _find(linker, text):
    return [(f.target, f.anchor) for f in linker.find(text)]


@pytest.mark.parametrize("text, expected", [
    # Everyday words in lower case are not their articles.
    ("It is thought of as the party that holds them; switch track shapes the river.", []),
    # Peanuts (the strip) is written capitalized by its own page: "peanuts" is the snack.
    ("He ate peanuts while reading Peanuts.", [("Peanuts", "Peanuts")]),
    # Plain title wins over its disambiguated variant; the variant needs its qualifier.
    ("The band played in Berlin.", [("Berlin", "Berlin")]),
    ("Mercury is the smallest planet.", [("Mercury (planet)", "Mercury")]),
    ("Mercury rose in price.", []),
    ("The rock band Queen toured.", [("Queen (band)", "Queen")]),
    # Part of a longer name: not the article.
    ("They sailed the Amazon River.", [("Amazon River", "Amazon River")]),
    ("Freddie Mercury sang about a planet.", []),
    ("Apollo 13 flew around the Moon.", []),
    # A common noun's plural; a rare term in lower case; longest match.
    ("Most mammals and albedo, by the theory of relativity.",
     [("Mammal", "mammals"), ("Albedo", "albedo"), ("Theory of relativity", "theory of relativity")]),
    # An everyday word's title links in proper-noun case mid-sentence ("Switch", whose page we have not
    # read); not where its page writes it as a common noun ("thought": the journal Thought is another
    # entity), and not at a sentence start, where any word is capitalized.
    ("They read Thought, a journal, on the Switch. Water flows.", [("Switch", "Switch")]),
    ("Sugar dissolves in Water Street.", []),
    # Never to a disambiguation page, never glued to a hyphenated word.
    ("Aberdeen and Asia-Pacific trade.", []),
])
def test_links_name_their_entities(linker, text, expected):
    assert _find(linker, text) == expected


def test_offsets_self_links_and_first_occurrence(linker):
    text = "Berlin is big. Asia is vast, and Asia again, Berlin too."
    found = linker.find(text, self_title="Berlin")
    # "Asia" is frequent in English and unread here: at the sentence start it is not taken, mid-sentence it is.
    assert [(f.target, f.start, f.end) for f in found] == [("Asia", 33, 37)]
    assert all(text[f.start:f.end] == f.anchor for f in found)


def test_own_usage_and_sentence_start():
    assert own_usage("Peanuts", OWN_TEXT["Peanuts"]) == (1, 0)
    assert own_usage("Mammal", OWN_TEXT["Mammal"]) == (0, 2)
    assert own_usage("Berlin (band)", "Fans of Berlin. Berlin played.") == (1, 0)
    assert sentence_start("One. Two", 5) and sentence_start("x\n(Two", 3) and not sentence_start("one two", 4)


def test_hostile_text_stays_linear_and_bounded(linker):
    # Candidate tokens everywhere, one sentence of 300 KB: each sentence's words are read once.
    text = ("Mercury planet band Queen Berlin peanuts Peanuts Thought " * 5000)
    found = linker.find(text)
    assert len(found) <= len(TITLES) and len({f.target for f in found}) == len(found)


def _slice_precision(sim: WikiSim, make, pages: int = 30) -> tuple[float, float, int]:
    """(strict, anchor-consistent) precision of a finder on the first ``pages`` articles, against
    their real wikilinks; titles: every title the sample links to (about 19,000)."""
    gold: dict[str, set[str]] = {}
    anchors: dict[str, set[str]] = {}
    for link in list(sim.iter_links()) + sim.dangling_links():
        gold.setdefault(link.source, set()).add(link.target)
        anchors.setdefault(link.target, set()).add(link.anchor)
    titles = sim.store.titles()
    universe = titles + sorted({t for ts in gold.values() for t in ts} - set(titles))
    texts = [(t, sim.page(t)["text"]) for t in titles]
    find = make(universe, texts)
    derived = strict = consistent = 0
    for title, text in texts[:pages]:
        for target, anchor in find(text, title):
            derived += 1
            strict += target in gold.get(title, ())
            consistent += target in gold.get(title, ()) or anchor in anchors.get(target, ())
    return strict / derived, consistent / derived, derived


def _entity(universe, texts):
    linker = EntityLinker(universe)
    linker.learn(texts)
    return lambda text, title: [(f.target, f.anchor) for f in linker.find(text, title)]


def _titles_only(universe, texts):
    finder = LinkFinder(universe)
    finder.drop_common_words([t for _, t in texts], max_df=0.02)
    return finder.find


def test_precision_against_real_wikilinks(gensim_wiki):
    """Strip the gensim sample's wikilinks, derive, compare (benchmarks/links.py does all 106 pages)."""
    with WikiSim(gensim_wiki) as sim:
        strict, consistent, derived = _slice_precision(sim, _entity)
        old_strict, old_consistent, _ = _slice_precision(sim, _titles_only)
    assert derived > 1000
    # Strict counts every true mention that Wikipedia's editors left unlinked as wrong.
    assert strict >= 0.8 and consistent >= 0.9
    assert consistent > old_consistent and strict > old_strict


# --- the compact tables (issue 23: a link pass whose memory does not grow by Python objects per title) ----------
# Links that the dict-based EntityLinker (before the compact tables, commit 9c63cdd) derived from real text:
# their count and the sha256 (first 16 hex digits) of their JSON list. The compact tables must give the same,
# plus one: sentences keep initials inside (wiki_sim.sentences.NOT_AN_ABBREVIATION), so "the novel by L. Frank
# Baum, it was primarily directed by Victor Fleming, who left production to take over the troubled Gone with the
# Wind." is one sentence, and that sentence links Gone with the Wind (film) from The Wizard of Oz.
_PREVIOUS_API = (3382, "9b7673ae0b539756")
_PREVIOUS_JSONL = (1013, "18d60c742f1a2f66")  # the same one more link


def _digest(items) -> tuple[int, str]:
    return len(items), hashlib.sha256(json.dumps(items).encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def default_articles():
    data = json.loads(fetch_default_corpus().read_text(encoding="utf-8"))
    return [(v["title"], v["extract"]) for v in data.values() if v.get("extract")]


def test_links_equal_the_dict_based_linkers_on_real_text(default_articles, tmp_path):
    articles = default_articles
    extra = ["Mercury (planet)", "Mercury (element)", "Queen (band)", "Berlin (band)", "Paris (mythology)",
             "Water (disambiguation)", "Apple", "Apple"]  # variants, a disambiguation page, a repeated title
    linker = EntityLinker([t for t, _ in articles] + extra)
    linker.learn(articles)
    found = [(t, f.target, f.anchor, f.start) for t, x in articles[:1000] for f in linker.find(x, t)]
    assert (len(found), _digest(found)[1]) == _PREVIOUS_API
    # The JSONL ingest (titles streamed into a TitleList, usage as one byte a page), renamed namesakes included.
    path = tmp_path / "c.jsonl"
    with path.open("w") as fh:
        for title, text in articles[:1200]:
            fh.write(json.dumps({"title": title, "text": text}) + "\n")
        for i, (title, text) in enumerate(articles[1200:1500]):
            fh.write(json.dumps({"title": f"{articles[i][0]} ({title.split()[0].lower()})", "text": text}) + "\n")
    pages = [(p.title, p.links, p.link_starts) for p in open_source("jsonl", path, progress=False)]
    assert (sum(len(p[1]) for p in pages), _digest(pages)[1]) == _PREVIOUS_JSONL


def _synthetic_titles(n: int) -> list[str]:
    words = ["river", "stone", "north", "castle", "music", "garden", "Lake", "Saint", "valley", "bridge"]
    return [f"{words[i % 10].capitalize()} {words[i // 10 % 10]} ({i})" if i % 3 else f"{words[i % 10]}{i}"
            for i in range(n)]


def test_the_link_tables_hold_no_python_objects_per_title():
    """The linker of 6,000 titles holds as many Python objects as that of 1,000, in under 200 bytes a title."""
    counts, sizes = [], []
    for n in (1000, 6000):
        titles = _synthetic_titles(n)
        gc.collect()
        before = len(gc.get_objects())
        linker = EntityLinker(titles)
        linker.find("Castle music and river7 were near Stone north.")
        gc.collect()
        counts.append(len(gc.get_objects()) - before)
        sizes.append(linker.nbytes / n)
        del linker
    assert counts[1] - counts[0] < 50, counts
    assert max(sizes) < 200, sizes


def test_title_list_and_seen_titles_round_trip():
    titles = ["Ångström", "北京", "A (b)", "", "x" * 300]
    tl = TitleList(titles)
    assert list(tl) == titles and [tl[i] for i in range(len(tl))] == titles and len(tl) == 5
    seen = SeenTitles(recent=4)  # merges into the sorted arrays every few titles
    for i in range(50):
        seen.add(f"t{i}", i * 7)
    assert len(seen) == 50 and all(seen.get(f"t{i}") == i * 7 for i in range(50))
    assert seen.get("t50") is None and "t3" in seen and "nope" not in seen
    seen.add("t3", 2 ** 32 + 5)  # a crc32 is 32 bits; newer value wins over the merged one
    assert seen.get("t3") == 5


def test_plain_title_matching_is_public_api():
    # sailorfog's graph reads mentions through `wiki_sim.LinkFinder`, not the ingest internals.
    from wiki_sim import LinkFinder

    assert LinkFinder(["Paris", "France"]).find("Paris is the capital of France.", "Paris") == [("France", "France")]


def _own_usage_by_regex(title, text):
    # The per-title regular expression own_usage replaced (same counts, 18x slower).
    import re

    from wiki_sim.ingest.name_usage import QUALIFIED, lower_first

    m = QUALIFIED.match(title)
    name = m.group(1) if m else title
    cap = lower = 0
    for hit in re.finditer(r"(?<!\w)" + re.escape(name) + r"(?!\w)", text, re.IGNORECASE):
        found = hit.group(0)
        if not sentence_start(text, hit.start()) and found in (name, lower_first(name)):
            lower, cap = (lower + 1, cap) if found.lower() == found else (lower, cap + 1)
    return cap, lower


def test_own_usage_counts_word_bounded_mentions_without_overlaps():
    # Mid-sentence mentions as written or lower-first only; touching word characters or a sentence start do not count.
    cases = [("A A (thing)", "The A A A rule. a a is here; x_A A and A Ax. Then A A."),
             ("Peanuts", "PEANUTS and peanuts, Peanuts_x, the Peanuts."), ("İstanbul", "in İstanbul and istanbul"),
             ("Peanuts", "the peanuts"), ("(x)", "a (x) b"), *OWN_TEXT.items()]
    assert own_usage(*cases[0]) == (2, 0) and own_usage(*cases[1]) == (1, 1)
    for title, text in cases:
        assert own_usage(title, text) == _own_usage_by_regex(title, text), title


def test_a_base_with_thousands_of_qualified_titles_is_looked_up_not_scanned(monkeypatch):
    """A base named by thousands of ``X (qualifier)`` titles: the sentence's words are looked up in
    the group (the scan would cost the group's size on every mention), with the scan's answers."""
    import random

    import wiki_sim.ingest.entity_links as el

    rng = random.Random(0)
    vocab = [f"{a}{b}{c}" for a in "bcdfgklmnprstv" for b in "aeiou" for c in "bdgklmnprstxz"]
    qualifiers = {" ".join(rng.sample(vocab, rng.randint(2, 3))) for _ in range(4000)}
    titles = [f"Mercury ({q})" for q in sorted(qualifiers)] + ["Mercury (planet)", "Venus"]
    linker = EntityLinker(titles)
    # Scanned and looked up, the same answers on random sentences (supported by one, several or no option).
    group = int(linker._value[linker._table_positions(
        np.array([hash(("Mercury",))], dtype=np.int64), np.ones(len(linker._keys), dtype=bool))[0]])
    lo, hi = int(linker._var_offsets[group]), int(linker._var_offsets[group + 1])
    queries = []
    for _ in range(300):
        words = rng.sample(vocab, rng.randint(1, 40)) + (["planet"] if rng.random() < 0.3 else [])
        if rng.random() < 0.5:  # a sentence that names one option's qualifier
            words = words[:3] + rng.choice(sorted(qualifiers)).split()
        queries.append((group, frozenset(hash(w) for w in words)))
    looked_up = linker._looked_up_supported(queries)
    assert looked_up == [linker._scan_supported(lo, hi, words) for _, words in queries]
    assert len({t for t in looked_up if t >= 0}) > 50  # the sentences did single out options

    def no_scan(*args):
        raise AssertionError("a group this large is not scanned")
    monkeypatch.setattr(EntityLinker, "_scan_supported", no_scan)
    assert [(f.target, f.anchor) for f in linker.find("Mercury is the smallest planet.")] == \
        [("Mercury (planet)", "Mercury")]
    assert linker.find("Mercury rose in price.") == []


@pytest.mark.parametrize("spread", [True, False])
def test_sorted_hashes_find_what_a_binary_search_finds(spread):
    """Bucketed by top bits (uniform hashes) or, for keys that do not spread (small ints), binary
    searched: every present key found at its place, every absent one -1."""
    from wiki_sim.ingest.name_table import SortedHashes

    rng = np.random.default_rng(0)
    keys = np.unique(rng.integers(-2 ** 63, 2 ** 63 - 1, 50_000, dtype=np.int64) if spread
                     else np.arange(50_000, dtype=np.int64) * 3)
    index = SortedHashes(keys)
    assert (index._offsets is not None) == spread  # small ints all fall in one bucket: binary search
    query = np.r_[keys[rng.integers(0, len(keys), 3000)], rng.integers(-2 ** 63, 2 ** 63 - 1, 3000, dtype=np.int64),
                  keys[:1], keys[-1:], np.array([-2 ** 63, 2 ** 63 - 1], dtype=np.int64)]
    expected = np.searchsorted(keys, query)
    expected = np.where((expected < len(keys)) & (keys[np.minimum(expected, len(keys) - 1)] == query), expected, -1)
    assert np.array_equal(index.positions(query), expected)
    assert (expected >= 0).sum() >= 3002
