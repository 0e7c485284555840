"""The spelling retry's deletion index: the same corrections as scanning every term with the
word's first letter, built with the tantivy engine's simulator, bounded in word length."""

from __future__ import annotations

import random
import shutil

import numpy as np
import pytest

from tests.wiki_sim.simhelpers import build_jsonl
from tests.wiki_sim.test_search import PAGES
from wiki_sim import WikiSim
from wiki_sim.search import SUGGEST_MAX_LETTERS
from wiki_sim.spelling import (MAX_WORD_LETTERS, SPELLING_DIR, SpellingIndex, bounded_distance,
                               build_spelling_index, edit_distance, letters_apart, open_spelling_index)


def scan(vocabulary: list[tuple[str, int]], word: str) -> str | None:
    """The retry as it was: every term with the word's first letter, checked one by one."""
    maxdist = 2 if len(word) >= 5 else 1
    best = None
    for cand, df in vocabulary:
        if cand[:1] != word[:1] or cand == word or abs(len(cand) - len(word)) > maxdist:
            continue
        dist = edit_distance(word, cand)
        if dist <= maxdist:
            key = (dist, letters_apart(word, cand), -df, cand)
            if best is None or key < best:
                best = key
    return best[-1] if best else None


def mangle(rng: random.Random, word: str, alphabet: str) -> str:
    """``word`` with 1 to 3 random substitutions, insertions, deletions or transpositions."""
    for _ in range(rng.choice((1, 2, 2, 3))):
        i, c = rng.randrange(len(word)), rng.choice(alphabet)
        op = rng.randrange(4)
        if op == 0:
            word = word[:i] + c + word[i + 1:]
        elif op == 1:
            word = word[:i] + c + word[i:]
        elif op == 2 and len(word) > 3:
            word = word[:i] + word[i + 1:]
        elif i + 1 < len(word):
            word = word[:i] + word[i + 1] + word[i] + word[i + 2:]
    return word


def dense_vocabulary(rng: random.Random, alphabet: str, n: int) -> list[tuple[str, int]]:
    """``n`` words over a small alphabet (many near neighbours and ties), lengths 1 to 16."""
    words = {"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 16))) for _ in range(n)}
    return [(w, rng.randint(1, 50)) for w in sorted(words)]


def test_the_banded_distance_is_the_edit_distance_within_its_bound():
    rng = random.Random(5)
    for _ in range(3000):
        a = "".join(rng.choice("abc") for _ in range(rng.randint(0, 9)))
        b = mangle(rng, a, "abc") if a and rng.random() < 0.7 else "".join(rng.choice("abc") for _ in range(rng.randint(0, 9)))
        k = rng.randint(0, 3)
        d = edit_distance(a, b)
        assert bounded_distance(a, b, k) == (d if d <= k else k + 1), (a, b, k)


def test_lists_the_same_limit_as_the_search_layer():
    assert MAX_WORD_LETTERS == SUGGEST_MAX_LETTERS


@pytest.mark.parametrize("alphabet", ["abcde", "aeilnorst", "ßäöüéa"])
def test_suggests_what_the_scan_suggests(tmp_path, alphabet):
    rng = random.Random(len(alphabet))
    vocabulary = dense_vocabulary(rng, alphabet, 2500)
    build_spelling_index(vocabulary, tmp_path / "spelling")
    index = SpellingIndex(tmp_path / "spelling")
    known = {w for w, _ in vocabulary}
    words = [mangle(rng, rng.choice(vocabulary)[0] + "x", alphabet) for _ in range(400)]
    words = [w for w in words if w not in known][:250]
    expected = [scan(vocabulary, w) for w in words]
    assert [index.suggest(w) for w in words] == expected
    assert sum(e is not None for e in expected) > len(words) // 2  # the misspellings mostly have a correction


def test_words_over_the_length_limit_are_not_looked_up(tmp_path):
    term = "a" * MAX_WORD_LETTERS
    build_spelling_index([(term, 3), ("abc", 1)], tmp_path / "s")
    index = SpellingIndex(tmp_path / "s")
    assert index.suggest(term[:-1] + "b") == term  # at the limit: looked up
    assert index.suggest(term + "a") is None  # over it: not, though one deletion away


def test_a_broken_index_is_refused(tmp_path):
    build_spelling_index([("river", 2)], tmp_path / "s")
    np.zeros(1, np.uint32).tofile(tmp_path / "s" / "rows.u32")
    with pytest.raises(ValueError, match="inconsistent; rebuild"):
        SpellingIndex(tmp_path / "s")


@pytest.fixture(scope="module")
def tantivy_sim(tmp_path_factory):
    return build_jsonl(tmp_path_factory.mktemp("spell"), PAGES, engine="tantivy")


@pytest.fixture(scope="module")
def whoosh_sim(tmp_path_factory):
    return build_jsonl(tmp_path_factory.mktemp("spell-whoosh"), PAGES, engine="whoosh")


@pytest.mark.parametrize("engine", ["tantivy", "whoosh"])
def test_builds_use_the_index_with_the_scans_answers(engine, request):
    built = request.getfixturevalue(f"{engine}_sim")
    assert (built / SPELLING_DIR / "keys.u64").is_file()
    with WikiSim(built, cache_size=0) as sim:
        engine = sim.index
        vocabulary = engine.vocabulary()
        rng = random.Random(3)
        words = [mangle(rng, w, "abcdefghijklmnopqrstuvwxyz") for w, _ in vocabulary if w.isalpha() and len(w) > 2]
        words = [w for w in words if w.isalpha() and 3 <= len(w) and not engine.known(w)]
        assert len(words) > 50
        assert [engine.suggest(w) for w in words] == [engine.suggest_by_scan(w) for w in words]
        hits = sim.search("Albert Einstien")[0]
        assert hits.corrected_query == "Albert Einstein" and hits[0].title == "Albert Einstein"


def test_search_layer_never_retries_an_over_long_word(tantivy_sim, monkeypatch):
    with WikiSim(tantivy_sim, cache_size=0) as sim:
        asked = []
        monkeypatch.setattr(sim.index, "suggest", lambda w: asked.append(w))
        sim.searcher.search("einsteinn " + "x" * (SUGGEST_MAX_LETTERS + 1))
        assert asked == ["einsteinn"]


def test_a_simulator_without_the_index_builds_it_once_on_first_use(tantivy_sim, tmp_path):
    copy = tmp_path / "wiki"
    shutil.copytree(tantivy_sim, copy)
    shutil.rmtree(copy / SPELLING_DIR)
    with WikiSim(copy, cache_size=0) as sim:
        assert sim.search("Mahatma Ghandi")[0][0].title == "Mahatma Gandhi"
    assert (copy / SPELLING_DIR / "keys.u64").is_file()
    calls = []
    index = open_spelling_index(copy, lambda: calls.append(1) or [])
    assert calls == [] and index.suggest("ghandi") == "gandhi"
