"""Question writers: the template writer, and the LLM writer against a loopback chat server."""

from __future__ import annotations

import random

import pytest

from sailorfog.clues import build_clues
from sailorfog.uncertainty import consistent, fuzzy_quantities, partial_names, vague_time
from sailorfog.writers import LLMWriter, TemplateWriter, WriterError, missing_terms, render
from tests.sailorfog.chat_server import ChatServer
from tests.sailorfog.conftest import subgraph
from wiki_sim.common.chat import ChatClient, ChatError

NODES = ("Kallan Catalogue", "Idris Kallan", "Tarnis", "Edwin Harlow")


@pytest.fixture()
def clue_set(toy_G, toy_index_):
    cs = consistent(build_clues(toy_G, NODES, subgraph(toy_G, NODES).edges, "Idris Kallan"), toy_index_)
    cs.clues += [c for c in cs.pool if c.kind in ("date", "number")][:2]
    cs = vague_time(cs, random.Random(0)) or cs
    cs = fuzzy_quantities(cs, random.Random(0)) or cs
    return partial_names(cs, random.Random(3))


@pytest.fixture(scope="module")
def server():
    with ChatServer() as srv:
        yield srv


def test_template_writer_keeps_every_clue_and_is_deterministic(clue_set):
    question = TemplateWriter().write(clue_set)
    assert question == TemplateWriter().write(clue_set.copy())
    assert question.endswith("?") or question.endswith("X.")
    for clue in clue_set.clues:
        assert render(clue.text) in question
        assert missing_terms(question, clue) == []
    assert "Kallan" not in question and "Idris" not in question


def test_missing_terms_notices_a_lost_value(clue_set):
    clue = next(c for c in clue_set.clues if c.spans)
    question = TemplateWriter().write(clue_set).replace(clue.spans[0]["text"], "some time")
    assert clue.spans[0]["text"] in missing_terms(question, clue)


def test_llm_writer_accepts_a_faithful_question(server, clue_set):
    writer = LLMWriter(ChatClient(server.base_url, "faithful", timeout=5))
    question = writer.write(clue_set)
    assert question.startswith("In a story") and writer.problems(question, clue_set) == []
    sent = server.bodies[-1]["messages"][-1]["content"]
    assert all(c.id in sent for c in clue_set.clues)  # the clue set goes in as structured input


def test_llm_writer_retries_a_question_that_names_the_answer(server, clue_set):
    server.answer = "Idris Kallan"
    before = len(server.requests)
    question = LLMWriter(ChatClient(server.base_url, "leaky-once", timeout=5)).write(clue_set)
    assert "Idris Kallan" not in question
    assert len(server.requests) - before == 2
    assert "names the answer" in server.bodies[-1]["messages"][-1]["content"]


def test_llm_writer_gives_up_when_a_clue_stays_lost(server, clue_set):
    with pytest.raises(WriterError, match=f"clue {clue_set.clues[-1].id} lost"):
        LLMWriter(ChatClient(server.base_url, "drops-clue", timeout=5), max_attempts=2).write(clue_set)


def test_llm_writer_unreachable_endpoint(clue_set):
    with pytest.raises(ChatError, match="cannot reach"):
        LLMWriter(ChatClient("http://127.0.0.1:9/v1", "m", timeout=2)).write(clue_set)
    with pytest.raises(ValueError, match="max_attempts"):
        LLMWriter(ChatClient("http://127.0.0.1:9/v1", "m"), max_attempts=0)
