"""The Whoosh index: analysis, parallel build, OR-grouped BM25F search, snippets anywhere in a page."""

from __future__ import annotations

import random
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from whoosh.analysis import StemmingAnalyzer
from whoosh.highlight import ContextFragmenter, UppercaseFormatter, highlight
from whoosh.index import open_dir

from tests.wiki_sim.simhelpers import ENGINES, build_jsonl
from wiki_sim.analysis import STOPWORDS, WikiAnalyzer, WikiText, analyze, stem_word
from wiki_sim.forward import ForwardIndex, LazyForwardIndex, page_terms
from wiki_sim.index import IndexSearcher, build_index
from wiki_sim.tantivy_index import TantivySearcher
from wiki_sim.snippets import best_snippet, best_window, clip, find_matches

WORDS = ("river mountain city empire language music science church war king island bridge railway "
         "painter novel festival harbour cathedral desert glacier volcano treaty republic dynasty "
         "orchestra theatre museum university village fortress canal").split()


def filler(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words)) + "."


DEEP = 80_000


def corpus() -> list[tuple[str, str]]:
    rng = random.Random(7)
    long_text = filler(rng, 3000) + "\n\n## Minerals\n" + filler(rng, 8000)
    long_text = long_text[:DEEP] + " The rare zanzibarite crystal was described there. " + long_text[DEEP:]
    pages = [
        ("Xylophone", "The xylophone is a musical instrument in the percussion family that consists of wooden bars "
                      "struck by mallets. Percussionists playing it use two or four mallets."),
        ("Marimba", "The marimba is a percussion instrument with wooden bars and resonators; it is related to "
                    "the xylophone but has a lower range."),
        ("Glockenspiel", "A glockenspiel has tuned metal bars. Unlike the marimba, its bars are metal."),
        ("Long article", long_text),
        ("Bar (music)", "In musical notation, a bar is a segment of time."),
    ]
    pages += [(f"Filler {i}", filler(rng, 80)) for i in range(40)]
    return pages


@pytest.fixture(scope="module")
def small_wiki(tmp_path_factory):
    return build_jsonl(tmp_path_factory.mktemp("small"), corpus())


@pytest.fixture(scope="module", params=ENGINES)
def searcher(request, small_wiki, tmp_path_factory):
    """Each engine's searcher over the same pages (the search tests run on both)."""
    if request.param == "whoosh":
        s = IndexSearcher(small_wiki / "index")
    else:
        wiki = build_jsonl(tmp_path_factory.mktemp("small-tantivy"), corpus(), engine="tantivy")
        s = TantivySearcher(wiki / "tantivy", wiki / "store.sqlite")
    yield s
    s.close()


def titles(searcher, query, k=10):
    return [t for t, _ in searcher.search(query, k)[0]]


# --- analysis ---------------------------------------------------------------------------

REAL_TEXTS = [
    "İzmir, often still called Smyrna, is the third most populous city in Turkey.",
    "Running runners ran; the U.S.A. and e.g. 3.14 are tokens. A I x y",
    "Crème brûlée — naïve café, Straße, ΑΒΓ δέλτα, 東京 2020!",
]


def whoosh_analyzer():
    return StemmingAnalyzer(stoplist=STOPWORDS, minsize=1)


@pytest.mark.parametrize("text", REAL_TEXTS)
def test_analyzer_gives_the_same_terms_as_whooshs_stemming_analyzer(text):
    expected = [t.text for t in whoosh_analyzer()(text)]
    assert analyze(text) == expected
    assert [t.text for t in WikiAnalyzer()(text)] == expected


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="*", blacklist_categories=("Cs",)), max_size=200))
def test_analyzer_agrees_with_whoosh_on_any_text(text):
    assert analyze(text) == [t.text for t in whoosh_analyzer()(text)]


def test_single_characters_count_but_contraction_tails_do_not():
    assert analyze("Vitamin C, Type 1, Newton's laws, don't") == ["vitamin", "c", "type", "1", "newton", "law", "don"]


def test_positions_count_kept_tokens_and_chars_point_at_words():
    text = "The xylophones of the orchestra"
    tokens = [(t.text, t.pos, text[t.startchar:t.endchar])
              for t in WikiAnalyzer()(text, positions=True, chars=True)]
    assert tokens == [("xylophone", 0, "xylophones"), ("orchestra", 1, "orchestra")]
    whole = [t.text for t in whoosh_analyzer()("Mallets", tokenize=False)]
    assert [t.text for t in WikiAnalyzer()("Mallets", tokenize=False)] == whole == ["mallet"]
    assert list(WikiAnalyzer()("the", tokenize=False)) == []


def test_wikitext_field_counts_terms_with_the_field_boost():
    items = {w: (f, wt) for w, f, wt, _ in WikiText(field_boost=3.0).index("Runs, the run ran; mallets.")}
    assert items == {b"run": (2, 6.0), b"ran": (1, 3.0), b"mallet": (1, 3.0)}


# --- snippets ---------------------------------------------------------------------------

def test_best_window_prefers_distinct_rare_terms():
    text = "alpha alpha alpha alpha. " + "pad " * 50 + "alpha beta gamma here."
    weights = {"alpha": 1.0, "beta": 3.0, "gamma": 3.0}
    matches = find_matches(text, weights)
    assert [m[2] for m in matches] == ["alpha"] * 5 + ["beta", "gamma"]
    start, end = best_window(matches, weights, width=40)
    assert text[start:end] == "alpha beta gamma"


@pytest.mark.parametrize("word", ["cities", "ability", "running", "happily", "relational", "organization",
                                  "hopping", "ponies", "generously", "Sensitivity", "ELECTRICITY", "U.S.A"])
def test_matches_are_found_through_their_stems(word):
    text = f"Some filler text, then {word} here, and more filler."
    term = stem_word(word)
    matches = find_matches(text, {term: 1.0})
    assert [(text[s:e], t) for s, e, t in matches] == [(word, term)]


@pytest.mark.parametrize("text", [
    "İzmir and Izmir; ſtate and state; the KELVIN and Kelvin; ıi", "O'Neil met x_city, CITY and city's mayor",
    "Zürich, ZÜRICH and zurich — 1990–2000 Cities", "cities" * 50 + " cities", "", "   ", "_city 2city city2 city_",
])
@pytest.mark.parametrize("words", ["city state kelvin", "izmir neil mayor", "zürich zurich cities", "o'neil x"])
def test_matches_equal_those_of_the_one_pattern_per_query(text, words):
    """The matches are found with ``str.find`` on the lower-case text where that is exact (ASCII terms,
    none of the four letters that IGNORECASE maps to ASCII ones): they equal the candidate pattern's."""
    from wiki_sim.search import query_terms
    from wiki_sim.snippets import _candidates_for

    weights = {t: 1.0 for t in query_terms(words)}
    reference = [(m.start(), m.end(), stem_word(m.group())) for m in
                 _candidates_for(tuple(sorted(weights))).finditer(text)] if text else []
    assert find_matches(text, weights) == [m for m in reference if m[2] in weights]


def test_clip_widens_to_width_and_marks_cuts():
    text = "one two three four five six seven eight nine ten eleven twelve"
    s = clip(text, text.index("six"), text.index("six") + 3, width=20)
    assert "six" in s and s.startswith("... ") and s.endswith(" ...")
    assert len(s) <= 20 + 8
    assert clip("short", 0, 5, 300) == "short"
    assert clip("## Heading\nBody text", 0, 5, 300) == "Heading Body text"


def test_snippet_without_a_match_is_the_beginning():
    assert best_snippet("First words. Then more.", {"zzz": 1.0}, width=12).startswith("First words.")


def test_snippet_finds_a_match_beyond_whooshs_32k_highlight_limit():
    text = dict(corpus())["Long article"]
    assert text.index("zanzibarite") > 2 ** 15
    term = stem_word("zanzibarite")
    # Whoosh's own highlighter stops at 32K characters and finds nothing ...
    whoosh_snippet = highlight(text, {term}, WikiAnalyzer(), ContextFragmenter(), UppercaseFormatter())
    assert "ZANZIBARITE" not in whoosh_snippet
    # ... the simulator's snippet is the passage around the match.
    snippet = best_snippet(text, {term: 4.0})
    assert "zanzibarite crystal" in snippet
    assert len(snippet) <= 310


# --- build and search -------------------------------------------------------------------

def test_index_holds_every_page_in_one_segment_per_writer(small_wiki, tmp_path):
    ix = open_dir(str(small_wiki / "index"))
    assert ix.doc_count() == len(corpus())
    assert len(ix.reader().leaf_readers()) == 2
    single = tmp_path / "single"
    info = build_index(small_wiki / "store.sqlite", single, procs=1, progress=False)
    assert info["documents"] == len(corpus()) and info["segments"] == 1


def test_two_writer_processes_rank_exactly_as_one(small_wiki, tmp_path):
    build_index(small_wiki / "store.sqlite", tmp_path / "one", procs=1, progress=False)
    one, two = IndexSearcher(tmp_path / "one"), IndexSearcher(small_wiki / "index")
    for query in ("percussion mallets", "wooden bars resonators", "river cathedral glacier", "zanzibarite"):
        a, b = one.search(query, 10)[0], two.search(query, 10)[0]
        assert [t for t, _ in a] == [t for t, _ in b]
        assert [round(s, 6) for _, s in a] == [round(s, 6) for _, s in b]


def _without_score_table(index_dir, tmp_path):
    """A copy of an index with its score table removed (the searcher then reads Whoosh's postings)."""
    from wiki_sim.score_table import SCORES_DIR

    copy = tmp_path / "plain-index"
    shutil.copytree(index_dir, copy)
    shutil.rmtree(copy / SCORES_DIR)
    return copy


def test_score_table_gives_every_terms_scores_exactly_as_the_postings_do(small_wiki, tmp_path):
    from wiki_sim.index import _index_terms

    table = IndexSearcher(small_wiki / "index")
    plain = IndexSearcher(_without_score_table(small_wiki / "index", tmp_path))
    assert table.has_score_table and not plain.has_score_table
    terms = list(_index_terms(plain._reader))
    assert len(terms) > 100 and terms == sorted(set(terms), key=str.encode)
    for term in terms + ["zzzznotaterm", "", "x" * 100]:
        (a_ids, a_scores), (b_ids, b_scores) = plain.term_scores(term), table.term_scores(term)
        assert a_ids.tolist() == b_ids.tolist() and a_scores.tolist() == b_scores.tolist(), term
        assert plain.idf(term) == table.idf(term) and plain.known(term) == table.known(term)
    for query in ("percussion mallets", "wooden bars resonators marimba", "zanzibarite crystal", "the of", "qqq"):
        assert table.search(query, 10) == plain.search(query, 10)
    assert table.cache_bytes == 0  # the table's arrays are mapped, not cached


def test_score_table_is_used_only_with_the_parameters_it_was_computed_with(small_wiki):
    assert not IndexSearcher(small_wiki / "index", B=0.75).has_score_table
    assert not IndexSearcher(small_wiki / "index", head_boost=3).has_score_table


@pytest.mark.parametrize("damage", ["truncate_scores", "meta_documents", "meta_garbage", "drop_terms",
                                    "doc_out_of_range", "offsets_backwards"])
def test_a_damaged_score_table_is_refused_with_a_rebuild_hint(small_wiki, tmp_path, damage):
    import json

    from wiki_sim.errors import WikiSimError
    from wiki_sim.score_table import SCORES_DIR

    copy = tmp_path / "index"
    shutil.copytree(small_wiki / "index", copy)
    scores = copy / SCORES_DIR
    if damage == "truncate_scores":
        data = (scores / "scores.f64").read_bytes()
        (scores / "scores.f64").write_bytes(data[:-8])
    elif damage == "meta_documents":
        meta = json.loads((scores / "meta.json").read_text())
        (scores / "meta.json").write_text(json.dumps({**meta, "documents": meta["documents"] + 1}))
    elif damage in ("doc_out_of_range", "offsets_backwards"):  # same sizes, bad numbers
        import numpy as np

        name, dtype = ("docs.i32", "<i4") if damage == "doc_out_of_range" else ("offsets.i64", "<i8")
        values = np.fromfile(scores / name, dtype=dtype)
        values[1] = 10 ** 9 if damage == "doc_out_of_range" else values[-1] + 5
        values.tofile(scores / name)
    elif damage == "meta_garbage":
        (scores / "meta.json").write_text("{not json")
    else:
        (scores / "terms.bin").unlink()
    with pytest.raises(WikiSimError, match="rebuild the simulator"):
        IndexSearcher(copy)


def test_score_table_row_cache_stays_bounded(small_wiki, monkeypatch):
    import wiki_sim.score_table as st_module

    monkeypatch.setattr(st_module, "ROW_CACHE", 3)
    searcher = IndexSearcher(small_wiki / "index")
    words = [analyze(w)[0] for w in ("percussion", "mallets", "river", "glacier")] + ["zzzznotaterm", "y" * 100]
    for word in words * 2:
        searcher.term_scores(word)
        assert len(searcher._table._rows) <= 3
    assert "y" * 100 not in searcher._table._rows
    assert [searcher.known(w) for w in words] == [True, True, True, True, False, False]


@pytest.mark.parametrize("query", ["percussion mallets", "wooden bars resonators marimba", "river cathedral glacier",
                                   "zanzibarite", "marimba marimba xylophone", "the of"])
def test_numpy_scores_equal_whooshs_own_bm25f_search(small_wiki, query):
    """The per-term score arrays give exactly the scores of Whoosh's own OR query with the
    same weighting (title boost as indexed), in the same order."""
    from wiki_sim.index import TITLE_BOOST, DocumentIdfBM25F, _use_array_matchers, whoosh_parser

    fast = IndexSearcher(small_wiki / "index", head_boost=TITLE_BOOST, B=0.75)
    reference = fast.ix.searcher(weighting=DocumentIdfBM25F(max_cached_docs=0))
    expected = [(hit["title"], hit.score)
                for hit in reference.search(_use_array_matchers(whoosh_parser(fast.ix).parse(query)), limit=10)]
    got = fast.search(query, 10)[0]
    assert [t for t, _ in got] == [t for t, _ in expected]
    assert [round(s, 6) for _, s in got] == [round(s, 6) for _, s in expected]


def test_title_matches_count_head_boost_at_search_time(small_wiki):
    low, high = IndexSearcher(small_wiki / "index", head_boost=0.5), IndexSearcher(small_wiki / "index", head_boost=3)
    (_, s_low), = [h for h in low.search("glockenspiel", 10)[0] if h[0] == "Glockenspiel"]
    (_, s_high), = [h for h in high.search("glockenspiel", 10)[0] if h[0] == "Glockenspiel"]
    assert s_high > s_low


def test_forward_index_holds_each_pages_terms_in_page_order(small_wiki):
    import sqlite3

    forward, lazy = ForwardIndex(small_wiki / "terms"), LazyForwardIndex()
    rows = sqlite3.connect(small_wiki / "store.sqlite").execute("SELECT title, text FROM pages ORDER BY id").fetchall()
    assert len(forward) == len(rows) == IndexSearcher(small_wiki / "index").doc_count()
    vocab = list(forward.vocab)
    assert vocab == sorted(vocab, key=lambda t: t.encode()) and vocab[0] == ""
    for doc, (title, text) in enumerate(rows):
        terms = page_terms(title, text)
        assert [vocab[i] for i in forward.sequence(doc)] == terms
        assert forward.ids(terms) == [vocab.index(t) for t in terms]
        assert len(lazy.sequence(doc, title, text)) == len(terms)
    assert IndexSearcher(small_wiki / "index").titles == [t for t, _ in rows]
    # the term-id cache answers as the table does, for known, unknown and over-long terms, when full too
    import wiki_sim.forward as fw

    fresh, size = ForwardIndex(small_wiki / "terms"), fw.TERM_ID_CACHE
    fw.TERM_ID_CACHE = 3
    try:
        asked = vocab[1:6] + ["zzzznotaterm", "x" * 100] + vocab[1:6]
        assert fresh.ids(asked) == [vocab.index(t) for t in asked if t in vocab]
        assert len(fresh._term_ids) <= 3 and "x" * 100 not in fresh._term_ids
    finally:
        fw.TERM_ID_CACHE = size


def test_document_level_idf_for_title_terms(small_wiki):
    from wiki_sim.index import DocumentIdfBM25F

    from whoosh.scoring import BM25F

    s = IndexSearcher(small_wiki / "index")._searcher
    model = DocumentIdfBM25F()
    # "marimba" is in 1 title and 2 bodies: the title term gets the body's (lower) idf.
    assert model.idf(s, "title", "marimba") == model.idf(s, "body", "marimba") < BM25F().idf(s, "title", "marimba")
    assert model.idf(s, "body", "marimba") == BM25F().idf(s, "body", "marimba")


def test_build_refuses_an_existing_index_dir(small_wiki):
    with pytest.raises(FileExistsError):
        build_index(small_wiki / "store.sqlite", small_wiki / "index", procs=1, progress=False)


def test_search_by_body_words_with_stemming(searcher):
    assert titles(searcher, "percussionist plays mallets")[0] == "Xylophone"


def test_title_is_boosted(searcher):
    # "marimba" is the title of one page and in the body of two others.
    assert titles(searcher, "marimba")[0] == "Marimba"


def test_long_queries_use_or_grouping(searcher):
    query = "which wooden instrument with resonators has a lower range than its cousin in jazz bands of Peru"
    assert titles(searcher, query)[0] == "Marimba"


def test_match_deep_in_a_long_article(searcher):
    assert titles(searcher, "zanzibarite")[:1] == ["Long article"]


def test_search_hit_snippet_from_beyond_32k(small_wiki):
    from wiki_sim import WikiSim

    with WikiSim(small_wiki) as sim:
        [hits] = sim.search(["zanzibarite crystal"])
    assert hits[0].title == "Long article" and "zanzibarite crystal" in hits[0].snippet


@pytest.mark.parametrize("query", [
    "who invented the xylophone?", "xylophone*", "title:xylophone", "xylophone^3", '"xylophone bars',
    "(xylophone", "xylophone AND", "NOT xylophone", "xylophone's bars", "[xylophone TO z]", "{xylophone}",
])
def test_agent_typed_syntax_is_plain_text(searcher, query):
    assert "Xylophone" in titles(searcher, query)


@pytest.mark.parametrize("query", ["", "   ", "the of and", "???", "*", "()", "AND OR NOT", '"'])
def test_queries_with_no_terms_return_nothing(searcher, query):
    assert searcher.search(query, 10)[0] == []


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=120))
def test_no_query_string_raises(searcher, query):
    hits, weights = searcher.search(query, 5)
    assert len(hits) <= 5
    assert all(isinstance(w, float) for w in weights.values())


def test_k_limits_results_and_weights_are_idf(searcher):
    hits, weights = searcher.search("river mountain city", 3)
    assert len(hits) == 3
    assert set(weights) == {"river", "mountain", "citi"}
    assert all(w > 0 for w in weights.values())


def test_missing_index_is_a_clear_error(tmp_path):
    from wiki_sim.errors import WikiSimError

    with pytest.raises(WikiSimError, match="no search index"):
        IndexSearcher(tmp_path)


def test_copy_of_index_is_usable(small_wiki, tmp_path):
    shutil.copytree(small_wiki / "index", tmp_path / "index")
    assert titles(IndexSearcher(tmp_path / "index"), "glockenspiel metal")[0] == "Glockenspiel"
