"""Search as a person expects it, on both engines: titles first, phrases above scattered
words, spelling retried and announced; engines chosen at build time; threads."""

from __future__ import annotations

import json
import sys
import threading

import pytest

from envs.formatting import format_search
from tests.wiki_sim.simhelpers import ENGINES, build_jsonl
from wiki_sim import WikiSim
from wiki_sim.errors import WikiSimError
from wiki_sim.index import query_terms
from wiki_sim.spelling import edit_distance
from wiki_sim.search import title_similarity

FILLER = ("The committee met in the old town hall to discuss the harbour, the railway and the new "
          "museum. Visitors came by boat and by train. ")

PAGES = [
    ("Albert Einstein", "Albert Einstein was a German-born theoretical physicist who developed the theory "
                        "of relativity. He received the Nobel Prize in Physics. " + FILLER * 3),
    # Albert Ellis, a short page, says "Albert" and "Einstein" often: plain BM25 prefers him.
    ("Albert Ellis", "Albert Ellis was an American psychologist. Albert read Einstein; Albert "
                     "wrote that Albert admired Einstein, and Einstein's letters to Albert."),
    ("Albert Camus", "Albert Camus was a French philosopher and author. Albert Camus admired Einstein."),
    ("Einstein (crater)", "Einstein is a lunar impact crater named after the physicist."),
    ("Mahatma Gandhi", "Mohandas Karamchand Gandhi was an Indian lawyer and anti-colonial nationalist. Gandhi "
                       "led the campaign for India's independence."),
    ("Grand Canal", "The Grand Canal is a grand waterway; grand barges, grand bridges and grand locks."),
    # The phrase "wooden bars" once, against the two words many times apart.
    ("Xylophone", "The xylophone has wooden bars struck by mallets."),
    ("Timber yard", "Wooden crates, wooden fences and wooden sheds stand in the yard. Iron bars close the "
                    "gates; steel bars hold the roof; the bars rust in the rain. " + FILLER),
] + [(f"Town {i}", FILLER * (1 + i % 3)) for i in range(12)]


@pytest.fixture(scope="module", params=ENGINES)
def sim(request, tmp_path_factory):
    wiki = build_jsonl(tmp_path_factory.mktemp(request.param), PAGES, engine=request.param)
    with WikiSim(wiki, cache_size=0) as s:
        yield s


def titles(sim, query, k=10):
    return [h.title for h in sim.search(query, k)[0]]


def test_build_records_the_engine_and_the_simulator_opens_it(sim):
    engine = json.loads((sim.path / "build.json").read_text())["index"]["engine"]
    assert engine == sim.engine_name == sim.stats()["engine"]
    assert (sim.path / ("tantivy" if engine == "tantivy" else "index")).is_dir()


@pytest.mark.parametrize("query", ["Albert Einstein", "albert einstein", "Einstein, Albert",
                                   "Albert Einstein physicist"])
def test_a_query_that_is_a_title_finds_that_page_first(sim, query):
    assert titles(sim, query)[0] == "Albert Einstein"


def test_the_title_rise_is_needed_plain_bm25_ranks_another_albert_first(sim):
    plain = [t for t, _ in sim.index.search("Albert Einstein", 10)[0]]
    assert plain[0] != "Albert Einstein"  # the test corpus really separates the two rankings


def test_a_title_with_a_parenthetical_is_found_by_its_name(sim):
    assert titles(sim, "Einstein crater")[0] == "Einstein (crater)"


def test_a_phrase_ranks_above_scattered_words(sim):
    plain = [t for t, _ in sim.index.search("wooden bars", 10)[0]]
    assert plain.index("Timber yard") < plain.index("Xylophone")  # more of both words, apart
    assert titles(sim, "wooden bars")[0] == "Xylophone"


@pytest.mark.parametrize(("query", "fixed", "first"), [
    ("Einstien", "Einstein", "Einstein (crater)"),  # the page named "Einstein", here
    ("Ghandi", "Gandhi", "Mahatma Gandhi"),  # not "grand": same letters beat a commoner word
    ("Albert Einstien", "Albert Einstein", "Albert Einstein"),
])
def test_a_misspelled_word_is_retried_and_the_observation_says_so(sim, query, fixed, first):
    [hits] = sim.search([query])
    assert hits and hits[0].title == first
    assert hits.corrected_query == fixed
    text = format_search(query, hits)
    assert f"No results found for '{query}'; showing results for '{fixed}'" in text
    assert f"[{first}]" in text


def test_correct_queries_are_not_corrected(sim):
    [hits] = sim.search(["theoretical physicist"])
    assert hits[0].title == "Albert Einstein" and hits.corrected_query is None
    assert format_search("theoretical physicist", hits).startswith("A search for 'theoretical physicist' found")


def test_a_word_nothing_resembles_still_gives_no_results(sim):
    [hits] = sim.search(["qqxzv zzkjw"])
    assert hits == [] and hits.corrected_query is None
    assert format_search("qqxzv zzkjw", hits).startswith("No results found for 'qqxzv zzkjw'. Try")


def test_cached_results_keep_the_correction(tmp_path):
    wiki = build_jsonl(tmp_path, PAGES[:6])
    with WikiSim(wiki) as s:
        first, again = s.search(["Einstien"])[0], s.search(["Einstien"])[0]
    assert again == first and again.corrected_query == first.corrected_query == "Einstein"


def test_snippets_hold_the_query_words(sim):
    [hits] = sim.search(["Nobel Prize physics"])
    assert hits[0].title == "Albert Einstein" and "Nobel Prize" in hits[0].snippet
    assert hits[0].url == "https://en.wikipedia.org/wiki/Albert_Einstein"


def test_threads_searching_at_once_get_what_one_thread_gets(sim):
    queries = ["Albert Einstein", "wooden bars", "Ghandi", "harbour railway museum", "rational therapy",
               "grand canal barges", "lunar crater", "Indian lawyer nationalist"] * 4
    expected = {q: titles(sim, q) for q in queries}
    errors, got = [], {}

    def work(chunk):
        try:
            for q in chunk:
                got[(q, threading.get_ident())] = titles(sim, q)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(queries[i::8],)) for i in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors
    assert all(result == expected[q] for (q, _), result in got.items()) and len(got) >= len(set(queries))


def test_long_queries_score_a_bounded_number_of_terms():
    words = [f"word{i}x" for i in range(500)]
    terms = query_terms(" ".join(words))
    assert len(terms) == 32 and terms[0] == "word0x"
    assert query_terms("river river River rivers") == ["river"]


def test_title_similarity():
    assert title_similarity({"albert", "einstein"}, "Albert Einstein") == 1.0
    assert title_similarity({"einstein"}, "Einstein (crater)") == 1.0
    assert title_similarity({"albert", "einstein", "physicist"}, "Albert Einstein") == 0.5
    assert title_similarity({"albert", "einstein"}, "Albert Ellis") == 0.0
    assert title_similarity({"empir", "war"}, "Empire") == 0.0


@pytest.mark.parametrize(("a", "b", "d"), [("einstien", "einstein", 1), ("ghandi", "gandhi", 2),
                                           ("kitten", "sitting", 3), ("", "abc", 3), ("same", "same", 0)])
def test_edit_distance_counts_a_transposition_once(a, b, d):
    assert edit_distance(a, b) == d


def test_missing_tantivy_is_a_clear_error(tmp_path, monkeypatch):
    from tests.wiki_sim.simhelpers import write_jsonl
    from wiki_sim.build import build

    monkeypatch.setitem(sys.modules, "tantivy", None)
    corpus = write_jsonl(tmp_path / "c.jsonl", PAGES[:3])
    with pytest.raises(WikiSimError, match=r"pip install 'websailor-gym\[tantivy\]'"):
        build("jsonl", corpus, tmp_path / "wiki", progress=False, engine="tantivy")
    assert not (tmp_path / "wiki").exists()


def test_unknown_engine_is_refused(tmp_path):
    from wiki_sim.build import build

    with pytest.raises(WikiSimError, match="engine must be one of whoosh, tantivy, auto; got 'lucene'"):
        build("jsonl", tmp_path / "none.jsonl", tmp_path / "wiki", progress=False, engine="lucene")


def test_cli_builds_with_the_tantivy_engine(tmp_path, capsys):
    from tests.wiki_sim.simhelpers import write_jsonl
    from wiki_sim.cli import BuildConfig, run_build

    corpus = write_jsonl(tmp_path / "c.jsonl", PAGES[:4])
    assert run_build(BuildConfig(path=str(corpus), source="jsonl", out=str(tmp_path / "w"), engine="tantivy",
                                 progress=False)) == 0
    with WikiSim(tmp_path / "w") as s:
        assert s.engine_name == "tantivy" and s.search("Albert Camus")[0][0].title == "Albert Camus"
    with pytest.raises(ValueError, match="--engine must be whoosh, tantivy or auto"):
        BuildConfig(engine="lucene")
