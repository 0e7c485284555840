"""Thought reconstruction against a loopback OpenAI-compatible server started by the test."""

from __future__ import annotations

import json

import pytest

from envs.protocol import format_turn, parse_turn
from tests.chat_server import chat_server
from trainers.thoughts import (ThoughtError, ThoughtOptions, ThoughtsConfig, reconstruct_thoughts, run_thoughts,
                               split_turn, thought_prompt)
from wiki_sim.common.chat import ChatClient

SEARCH = format_turn("I wonder, perhaps, maybe I should look this up in many ways " * 20,
                     tool_call=("search", {"query": ["1964 Epsom Derby winner"]}))
ANSWER = format_turn("So the answer is the horse.", answer="Santa Claus")
MESSAGES = [
    {"role": "system", "content": "You are a research agent."},
    {"role": "user", "content": "Which horse won the 1964 Epsom Derby?"},
    {"role": "assistant", "content": SEARCH},
    {"role": "user", "content": "<tool_response>\n1. [Santa Claus (horse)](https://en.wikipedia.org/wiki/Santa_Claus_(horse))\n</tool_response>"},
    {"role": "assistant", "content": ANSWER},
]


def _reply(body: dict) -> str | None:
    prompt = body["messages"][-1]["content"]
    if body["model"] == "down":
        return None
    if body["model"] == "empty":
        return "  <think> </think> "
    action = prompt.split("# Action taken\n", 1)[1].split("\n\n# Result", 1)[0]
    kind = "answer" if "<answer>" in action else "search"
    return f"<think>Short thought before the {kind}.</think>"


def test_split_turn_keeps_the_action_bytes():
    thought, rest = split_turn(SEARCH)
    assert thought.startswith("I wonder") and rest.startswith("<tool_call>")
    assert split_turn("<answer>x</answer>") == (None, "<answer>x</answer>")


def test_prompt_holds_history_action_and_next_observation_bounded():
    options = ThoughtOptions(max_message_chars=200, max_history_chars=300)
    prompt = thought_prompt(MESSAGES, 2, options)
    assert "Which horse won" in prompt and '"1964 Epsom Derby winner"' in prompt
    assert "Santa_Claus_(horse)" in prompt  # the next observation
    assert "I wonder" not in prompt  # the old thought is not shown
    huge = [*MESSAGES[:2], {"role": "user", "content": "x" * 100_000}, *MESSAGES[2:]]
    assert len(thought_prompt(huge, 3, options)) < 3000


def test_rewrites_thoughts_and_keeps_actions_unchanged():
    with chat_server(_reply) as server:
        client = ChatClient(server.base_url, "rewriter")
        out = reconstruct_thoughts(MESSAGES, client)
        assert len(server.requests) == 2
    assert [m["role"] for m in out] == [m["role"] for m in MESSAGES]
    for old, new in zip(MESSAGES, out):
        if old["role"] != "assistant":
            assert new == old
            continue
        assert split_turn(new["content"])[1] == split_turn(old["content"])[1]  # the action, byte for byte
        assert parse_turn(new["content"]).strict
    assert split_turn(out[2]["content"])[0] == "Short thought before the search."
    assert split_turn(out[4]["content"])[0] == "Short thought before the answer."
    assert MESSAGES[2]["content"] == SEARCH  # the input is not modified


def test_empty_reply_and_dead_endpoint_raise():
    with chat_server(_reply) as server:
        with pytest.raises(ThoughtError, match="empty"):
            reconstruct_thoughts(MESSAGES, ChatClient(server.base_url, "empty"))
        with pytest.raises(ThoughtError, match="turn 2"):
            reconstruct_thoughts(MESSAGES, ChatClient(server.base_url, "down"))


def test_cli_run_rewrites_a_file_and_skips_failed_records(tmp_path):
    src = tmp_path / "in.jsonl"
    records = [{"type": "chatml", "messages": MESSAGES, "answer": [["Santa Claus"]], "tag": "t"},
               {"type": "chatml", "messages": MESSAGES[:3] + [{"role": "user", "content": "FAIL"}], "answer": ["x"]}]
    src.write_text("".join(json.dumps(r) + "\n" for r in records))

    def reply(body: dict) -> str | None:
        return None if "FAIL" in body["messages"][-1]["content"] else _reply(body)

    with chat_server(reply) as server:
        summary = run_thoughts(ThoughtsConfig(str(src), str(tmp_path / "out.jsonl"), server.base_url, "m",
                                              max_retries=0))
    assert summary["read"] == 2 and summary["written"] == 1 and summary["failed"] == 1
    assert "in.jsonl:2" in summary["errors"][0]
    (out,) = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert out["tag"] == "t" and out["answer"] == [["Santa Claus"]]
    assert split_turn(out["messages"][4]["content"])[1] == "<answer>Santa Claus</answer>"
    assert not (tmp_path / "out.jsonl.tmp").exists()


def test_malformed_input_line_names_file_and_line(tmp_path):
    src = tmp_path / "bad.jsonl"
    src.write_text(json.dumps({"type": "chatml", "messages": MESSAGES, "answer": ["x"]}) + "\n{not json\n")
    with chat_server(_reply) as server, pytest.raises(ValueError, match=r"bad.jsonl:2"):
        run_thoughts(ThoughtsConfig(str(src), str(tmp_path / "o.jsonl"), server.base_url, "m"))
    assert not (tmp_path / "o.jsonl").exists()


def test_websailor_sft_thoughts_command(tmp_path, capsys):
    from websailor.cli import main

    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"type": "chatml", "messages": MESSAGES, "answer": ["Santa Claus"]}) + "\n")
    with chat_server(_reply) as server:
        rc = main(["sft", "thoughts", "--input", str(src), "--output", str(tmp_path / "out.jsonl"),
                   "--base-url", server.base_url, "--model", "m"])
    assert rc == 0 and json.loads(capsys.readouterr().out.strip().splitlines()[-1])["written"] == 1
    rc = main(["sft", "thoughts", "--input", str(tmp_path / "nope.jsonl"), "--output", "x", "--base-url",
               "http://127.0.0.1:1/v1", "--model", "m"])
    assert rc == 2 and "not found" in capsys.readouterr().err
