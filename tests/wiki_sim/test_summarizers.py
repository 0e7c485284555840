"""OpenAISummarizer against a real chat-completions server on 127.0.0.1 (started by the test)."""

from __future__ import annotations

import json
import time

import pytest

from tests.chat_server import ChatServer, Raw, chat_server
from wiki_sim import WikiSim
from wiki_sim.focus import Summarizer
from wiki_sim.summarizers import OpenAISummarizer, SummaryError, parse_answer

GOOD = {"rational": "The page says when he got the prize.", "evidence": "He received the 1921 Nobel Prize in Physics.",
        "summary": "Einstein won the Nobel Prize in 1921."}


def _reply(body: dict) -> str | Raw | None:
    """Plays the summarizing model: answers according to the requested model name."""
    model = body["model"]
    if model == "http-500":
        return None
    if model == "not-completion":
        return Raw(200, {"unexpected": True})
    if model == "slow":
        time.sleep(2.0)
        return json.dumps(GOOD)
    return {
        "good": json.dumps(GOOD),
        "fenced": "```json\n" + json.dumps(GOOD) + "\n```",
        "prose": "Sure! Here is the JSON you asked for: " + json.dumps(GOOD) + " Hope it helps.",
        "list-evidence": json.dumps({**GOOD, "evidence": ["first quote", "second quote"]}),
        "bad-json": '{"evidence": "unterminated',
        "missing-fields": json.dumps({"rational": "nothing"}),
        "empty": "",
    }.get(model)


@pytest.fixture(scope="module")
def server():
    with chat_server(_reply) as srv:
        yield srv


PAGE = dict(url="https://en.wikipedia.org/wiki/Albert_Einstein", title="Albert Einstein",
            text="Albert Einstein was a physicist.\n\n## Awards\nHe received the 1921 Nobel Prize in Physics.",
            lead="Albert Einstein was a physicist.", goal="When did he win the Nobel Prize?")


def test_is_a_summarizer():
    assert isinstance(OpenAISummarizer("http://127.0.0.1:1/v1", "m"), Summarizer)


@pytest.mark.parametrize("model", ["good", "fenced", "prose"])
def test_model_answer_becomes_evidence_and_summary(server, model):
    s = OpenAISummarizer(server.base_url, model, api_key="sk-test", timeout=5)
    focused = s(**PAGE)
    assert focused.evidence == GOOD["evidence"] and focused.summary == GOOD["summary"]
    assert s.calls == 1 and s.fallbacks == 0
    request = server.requests[-1]
    assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer sk-test"
    prompt = request["body"]["messages"][0]["content"]
    assert PAGE["goal"] in prompt and "1921 Nobel Prize" in prompt and '"rational", "evidence", "summary"' in prompt
    assert request["body"]["model"] == model


def test_evidence_list_is_joined(server):
    focused = OpenAISummarizer(server.base_url, "list-evidence", timeout=5)(**PAGE)
    assert focused.evidence == "first quote\n\nsecond quote"
    assert server.requests[-1]["auth"] is None


@pytest.mark.parametrize("model, reason", [
    ("bad-json", "not JSON"), ("missing-fields", 'lacks string "evidence"'), ("empty", "empty answer"),
    ("http-500", "HTTP 500"), ("not-completion", "not a chat completion"), ("slow", "no answer within 0.5 s"),
])
def test_failures_fall_back_to_the_extractive_result_and_say_so(server, model, reason):
    s = OpenAISummarizer(server.base_url, model, timeout=0.5)
    focused = s(**PAGE)
    assert "1921 Nobel Prize" in focused.evidence  # the extractive evidence
    assert focused.summary.startswith("[extractive fallback: ") and reason in focused.summary
    assert s.fallbacks == 1 and reason in s.last_error


def test_unreachable_endpoint_falls_back():
    srv = ChatServer(_reply)  # bound, then closed: nothing listens on the port any more
    url = srv.base_url
    srv.server_close()
    focused = OpenAISummarizer(url, "good", timeout=2)(**PAGE)
    assert focused.summary.startswith("[extractive fallback: request failed")


def test_long_pages_are_cut_to_goal_relevant_passages(server):
    filler = "\n\n".join(f"Paragraph {i} talks about gardening and tomatoes in great detail." for i in range(800))
    text = filler + "\n\n## Awards\nHe received the 1921 Nobel Prize in Physics.\n\n" + filler
    s = OpenAISummarizer(server.base_url, "good", timeout=5, max_input_chars=2000)
    s(**{**PAGE, "text": text})
    prompt = server.requests[-1]["body"]["messages"][0]["content"]
    assert "1921 Nobel Prize" in prompt
    assert len(prompt) < 2000 + 2500  # page budget + the instructions


def test_wikisim_visit_uses_the_model(server, gensim_wiki):
    with WikiSim(gensim_wiki, summarizer=OpenAISummarizer(server.base_url, "good", timeout=5)) as sim:
        text = sim.visit("https://en.wikipedia.org/wiki/Albert_Einstein", "Nobel Prize year")
    assert f"Evidence in page: \n{GOOD['evidence']}" in text and GOOD["summary"] in text


@pytest.mark.parametrize("kwargs, message", [
    (dict(base_url="ftp://x", model="m"), "http"), (dict(base_url="http://x/v1", model=""), "model"),
    (dict(base_url="http://x/v1", model="m", timeout=0), "timeout"),
    (dict(base_url="http://x/v1", model="m", max_input_chars=10), "max_input_chars"),
])
def test_config_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        OpenAISummarizer(**kwargs)


def test_parse_answer_rejects_non_objects():
    with pytest.raises(SummaryError):
        parse_answer("[1, 2]")
    with pytest.raises(SummaryError):
        parse_answer("no braces at all")


def test_parse_answer_accepts_what_either_former_parser_accepted():
    reply = '<think>maybe {"x": 1}</think>\nHere: ```json\n{"evidence": ["a", "b"], "summary": 3}\n``` done'
    assert parse_answer(reply) == ("a\n\nb", "3")
    assert parse_answer(reply, list_joiner="\n") == ("a\nb", "3")
    assert parse_answer('{"evidence": "only evidence"}') == ("only evidence", "")
    with pytest.raises(SummaryError, match="empty answer"):
        parse_answer(None)


def test_openai_summarizer_repr_has_no_key():
    from wiki_sim.summarizers import OpenAISummarizer

    key = "sk-summarizer-secret-0123456789"
    summarizer = OpenAISummarizer("http://127.0.0.1:9/v1", "small-model", api_key=key)
    for text in (repr(summarizer), str(summarizer), repr([summarizer])):
        assert key not in text
    assert "small-model" in repr(summarizer)
