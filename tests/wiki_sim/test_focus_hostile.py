"""Goal-focused reading stays linear in the page and the goal (pytest-timeout catches a
quadratic version: each case below took minutes to hours before)."""

from __future__ import annotations

import pytest

from wiki_sim.focus import MAX_PAGE_CHARS, Passage, extract, rank_passages, split_passages


@pytest.mark.timeout(60)
def test_a_paragraph_without_sentence_ends_is_cut_in_linear_time():
    text = "x" * (64 << 20)  # re-slicing the remainder per piece: ~5 minutes
    passages = split_passages(text, max_chars=700)
    assert sum(len(p.text) for p in passages) == len(text)
    assert all(len(p.text) <= 1400 for p in passages)


def test_long_sentences_are_cut_as_before():
    passages = split_passages("y" * 5000, max_chars=700)
    assert [len(p.text) for p in passages] == [700] * 6 + [800]
    assert [p.position for p in passages] == list(range(7))


@pytest.mark.timeout(60)
def test_ranking_many_passages_against_a_long_goal_is_linear():
    words = [f"w{i}" for i in range(400)]
    passages = [Passage(" ".join(words[i % 7::7][:60]), "", i) for i in range(10000)]
    goal = " ".join(words) * 200  # every goal word is in thousands of passages
    scores = rank_passages(passages, goal)  # document frequency per (passage, word): hours
    assert len(scores) == 10000 and max(scores) > 0


def test_ranking_matches_bm25_by_hand():
    passages = [Passage("apple banana", "", 0), Passage("apple apple cherry", "", 1), Passage("date", "", 2)]
    scores = rank_passages(passages, "apple cherry")
    import math
    n, avg = 3, 2.0
    idf_apple = math.log(1 + (n - 2 + 0.5) / 2.5)
    idf_cherry = math.log(1 + (n - 1 + 0.5) / 1.5)
    bm = lambda tf, length: tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / avg))  # noqa: E731
    assert scores[0] == pytest.approx(idf_apple * bm(1, 2))
    assert scores[1] == pytest.approx(idf_apple * bm(2, 3) + idf_cherry * bm(1, 3))
    assert scores[2] == 0.0


@pytest.mark.timeout(60)
def test_a_huge_page_is_read_up_to_the_cap():
    filler = "Filler words about nothing in particular. " * ((MAX_PAGE_CHARS // 42) + 10)
    page = filler + "\n\nThe secret answer is Zanzibar. " + "More filler text here. " * (2 << 20)  # ~50 MB
    focused = extract(page, "secret answer")
    assert "Zanzibar" not in focused.evidence  # beyond the cap: never read
    near = extract("Intro.\n\nThe secret answer is Zanzibar.\n\n" + filler, "secret answer")
    assert "Zanzibar" in near.evidence


@pytest.mark.timeout(30)
@pytest.mark.parametrize("reply", ["<think>" * (1 << 20), "```" * (1 << 20), "```json" + " " * (8 << 20) + "{"])
def test_model_replies_of_unclosed_tags_and_fences_parse_in_linear_time(reply):
    from wiki_sim.summarizers import SummaryError, parse_answer

    with pytest.raises(SummaryError):
        parse_answer(reply)


def test_reply_parsing_matches_the_regexes_it_replaces():
    import re

    from wiki_sim.summarizers import _fenced, _without_think

    fence = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
    think = re.compile(r"<think>.*?</think>", re.DOTALL)
    for text in ["a```json\n {\"x\": 1}```b```", "````", "``````", "```json```", "x<think>a</think>y<think>b", "```js\n1```",
                 "<think><think></think></think>", "no fence", "```\n\n```", "``` json {} ```"]:
        m = fence.search(text)
        assert _fenced(text) == (m.group(1) if m else None), text
        assert _without_think(text) == think.sub("", text), text
