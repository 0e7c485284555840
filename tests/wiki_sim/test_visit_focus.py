"""Visit reads a page for its goal: the passage that answers comes first, the summary answers,
nothing is said twice, and a wrong title gets "did you mean" with the goal."""

from __future__ import annotations

import pytest

from wiki_sim import WikiSim
from wiki_sim.evidence import Goal, focus, score_sentences, split_sentences
from wiki_sim.records import title_to_url


def _first_passage(text: str) -> str:
    evidence = text.split("Evidence in page: \n", 1)[1].split("\n\nSummary:", 1)[0]
    return evidence.split("\n\n")[0]


def test_the_answering_passage_comes_first_not_the_keyword(gensim_wiki):
    with WikiSim(gensim_wiki) as sim:
        text = sim.visit(title_to_url("Aristotle"), "who was his teacher")
        lead = sim.page("Aristotle")["lead"]
    assert "Plato" in _first_passage(text)
    summary = text.split("Summary: \n", 1)[1].strip()
    assert "Plato" in summary and not lead.startswith(summary[:80])


def test_the_relation_counts_more_than_a_repeated_keyword():
    sentences = split_sentences(
        "He was revered as The First Teacher by later scholars. The First Teacher title stuck. "
        "At seventeen he joined the Academy and studied under Plato for twenty years.")
    scores = score_sentences(sentences, Goal.parse("who was his teacher"), subject="Aristotle")
    assert max(range(len(scores)), key=scores.__getitem__) == 2


def test_naming_the_pages_subject_in_the_goal_does_not_pull_the_lead_first(default_wiki):
    # Agents name the subject in their goals; on its own page that matches every sentence.
    with WikiSim(default_wiki) as sim:
        for title, goal, expected in (
                ("Gabriel García Márquez", "Confirm when Gabriel García Márquez married Mercedes", "In 1958, he married"),
                ("Apple Inc.", "Find the year Apple Inc. expanded from computers", "adopted in 2007")):
            page = sim.page(title)
            evidence, summary = focus(page["text"], goal, title=title, lead=page["lead"])
            assert expected in summary, (title, summary)
    # A goal that is only the subject still finds the sentences that name it.
    evidence, summary = focus("Aristotle was a philosopher. Chairs have legs.", "Aristotle", title="Aristotle")
    assert summary.startswith("Aristotle was a philosopher")


def test_short_pages_do_not_repeat_evidence_as_summary(default_wiki):
    with WikiSim(default_wiki) as sim:
        for title in ("Chair", "Boson", "Albert Einstein"):
            page = sim.page(title)
            evidence, summary = focus(page["text"], "when was it first described", title=title, lead=page["lead"])
            assert summary.strip() and summary.strip() != evidence.strip()
            assert summary.strip() != page["lead"].strip()


def test_a_page_that_does_not_mention_the_goal_says_so():
    evidence, summary = focus("Chairs have legs. They are made of wood.", "orbital period of the moon")
    assert evidence.startswith("Chairs have legs") and "No passage of this page mentions" in summary


def test_wrong_title_names_the_closest_pages_and_the_goal(default_wiki):
    with WikiSim(default_wiki) as sim:
        text = sim.visit("https://en.wikipedia.org/wiki/Albert_Einstien", "his birthplace")
    assert "page not found" in text and "his birthplace" in text
    assert "Did you mean: Albert Einstein (https://en.wikipedia.org/wiki/Albert_Einstein)" in text


@pytest.mark.timeout(60)
def test_focus_is_linear_on_hostile_pages():
    for page in ("word " * 1_600_000, "a" * 8_000_000, ". " * 4_000_000, "\n" * 8_000_000):
        evidence, summary = focus(page, "word count of the page")
        assert len(evidence) <= 3100 and len(summary) <= 700
