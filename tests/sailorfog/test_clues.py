"""Clue sets: masking, leakage, consistency with the pages they come from."""

from __future__ import annotations

import re

import pytest

from sailorfog.clues import TARGET_LABEL, assign_labels, build_clues, question_leaks
from sailorfog.constraints import satisfied_by
from sailorfog.text import clause_around, distinctive_words, leaks, mask, numbers, years
from sailorfog.uncertainty import consistent
from sailorfog.writers import TemplateWriter
from tests.sailorfog.conftest import subgraph

NODES = ("Velmora Observatory", "Idris Kallan", "Mount Ostrel", "Harlow Optics")


def test_text_helpers():
    assert mask("Idris Kallan met idris kallan's heir", ["Idris Kallan"], "{A}") == "{A} met {A}'s heir"
    assert distinctive_words("Tasmanian devil (animal)") == ["tasmanian", "devil"]
    assert leaks("an island called Tasmania", ["Tasmanian devil"], ["tasmanian"]) == ["tasmanian"]
    assert leaks("nothing here", ["Tasmanian devil"], ["tasmanian", "devil"]) == []
    assert years("born in 1851, died 1899; 84,000 people; 2,450 m") == [1851, 1899]
    assert numbers("84,000 people, 2,450 m and 3.5 km") == [84000.0, 2450.0, 3.5]
    # a reader reads a scale word: "2.04 million" is also 2,040,000 (the literal stays)
    assert numbers("a population of 2.04 million and 1,200 Thousand; 5 millions") == [
        2.04, 2040000.0, 1200.0, 1200000.0, 5.0]
    long = " ".join(f"w{i}" for i in range(100)) + " TARGET " + " ".join(f"v{i}" for i in range(100))
    piece = clause_around(long, "TARGET", max_words=10)
    assert "TARGET" in piece and len(piece.split()) <= 12


def test_labels_are_bfs_from_the_target(toy_G):
    titles = assign_labels(toy_G, NODES, "Idris Kallan")
    assert titles["X"] == "Idris Kallan"
    assert sorted(titles) == ["B", "C", "D", "X"]
    # Neighbours of the target come first.
    assert titles["B"] in set(toy_G.neighbors("Idris Kallan"))


@pytest.mark.parametrize("target", NODES)
def test_no_clue_names_the_answer_or_another_entity(toy_G, toy_index_, target):
    cs = consistent(build_clues(toy_G, NODES, subgraph(toy_G, NODES).edges, target), toy_index_)
    assert cs.clues, "every edge of this subgraph has an evidence sentence"
    phrases, words = cs.forbidden()
    for clue in cs.clues + cs.pool:
        plain = re.sub(r"\{[A-Z]\}", " ", clue.text)
        assert not leaks(plain, phrases, words), (clue.id, clue.text)
    question = TemplateWriter().write(cs)
    assert question_leaks(question, cs) == []
    assert target not in question


def test_relation_clues_hold_for_the_true_entities(toy_G, toy_index_):
    cs = consistent(build_clues(toy_G, NODES, subgraph(toy_G, NODES).edges, "Mount Ostrel"), toy_index_)
    assert all(any(k["type"] == "link" for k in c.checks) for c in cs.clues)
    for clue in cs.clues + cs.pool:
        assert all(satisfied_by(toy_index_, k, cs.titles) for k in clue.checks)
    # The pool has the facts of single entities: years and numbers among them.
    kinds = {c.kind for c in cs.pool}
    assert {"date", "number", "description"} <= kinds


def test_target_must_be_in_the_subgraph(toy_G):
    with pytest.raises(ValueError, match="not a node of the subgraph"):
        build_clues(toy_G, NODES, [], "Tarnis")


def test_a_full_date_is_one_span_and_blurs_cleanly():
    import random

    from sailorfog.clues import Clue, ClueSet, _year_spans
    from sailorfog.uncertainty import vague_time

    checks: list = []
    clause = "It was founded on 30 April 1948 and renamed in 1970."
    spans = _year_spans(clause, "B", checks)
    assert [s["text"] for s in spans] == ["on 30 April 1948", "1970"] and len(checks) == 2
    cs = ClueSet("T", "T", [], {"X": "T", "B": "U"}, [Clue("r", "relation", clause, checks, spans=spans)], [])
    out = vague_time(cs, random.Random(0))
    text = out.clues[0].text
    assert "April" not in text and "30" not in text and "1948" not in text
    assert not re.search(r"\b1970\b", text)  # "the 1970s" says the decade, not the year
    assert " in the " in text
