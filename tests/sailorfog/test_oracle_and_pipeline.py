"""Uniqueness, the oracle's gold trajectory, and one synthesis attempt end to end (toy simulator)."""

from __future__ import annotations

import json
import random

from envs.prompts import parse_chatml
from envs.protocol import parse_turn
from sailorfog.clues import build_clues
from sailorfog.constraints import candidates
from sailorfog.oracle import run_oracle
from sailorfog.synth import Synthesizer, obfuscate
from sailorfog.uncertainty import all_checks, consistent
from sailorfog.verify import make_unique
from sailorfog.writers import TemplateWriter
from tests.sailorfog.conftest import subgraph

NODES = ("Velmora Observatory", "Idris Kallan", "Mount Ostrel", "Harlow Optics")


def test_make_unique_strengthens_and_records_counts(toy_G, toy_index_):
    nodes = ("Edwin Harlow", "Tarnis")
    cs = consistent(build_clues(toy_G, nodes, subgraph(toy_G, nodes).edges, "Edwin Harlow"), toy_index_)
    base = len(candidates(toy_index_, all_checks(cs), cs.titles))
    assert base > 1  # Tarnis is linked to several pages
    result = make_unique(cs, toy_index_, random.Random(0))
    assert result.clues is not None and result.candidate_counts[0] == base and result.candidate_counts[-1] == 1
    assert result.candidate_counts == sorted(result.candidate_counts, reverse=True)
    assert candidates(toy_index_, all_checks(result.clues), result.clues.titles) == {toy_index_.ids["Edwin Harlow"]}


def test_make_unique_gives_up_on_an_ambiguous_set(toy_G, toy_index_):
    nodes = ("Edwin Harlow", "Tarnis")
    cs = consistent(build_clues(toy_G, nodes, subgraph(toy_G, nodes).edges, "Edwin Harlow"), toy_index_)
    cs.pool = []
    result = make_unique(cs, toy_index_, random.Random(0))
    if result.clues is None:
        assert "candidate answers remain" in result.reason and result.candidate_counts[-1] > 1


def test_oracle_reaches_every_clue_with_the_env_tools(toy_G, toy_index_, toy_env):
    edges = subgraph(toy_G, NODES).edges
    cs = make_unique(consistent(build_clues(toy_G, NODES, edges, "Mount Ostrel"), toy_index_), toy_index_,
                     random.Random(0)).clues
    task = {"id": "t1", "question": TemplateWriter().write(cs), "answer": cs.answer}
    result = run_oracle(toy_env, task, cs, toy_G, edges, toy_index_)
    assert result.solved, result.reason
    assert set(result.evidence) == {c.id for c in cs.clues}
    record = result.record
    assert record["policy"] == "oracle" and record["is_correct"] and record["termination"] == "answer"
    assert record["num_tool_calls"] == result.tool_calls >= len(NODES)
    messages = record["messages"]
    assert [m["role"] for m in messages[:2]] == ["system", "user"] and messages[1]["content"] == task["question"]
    for m in messages[2:]:
        if m["role"] == "assistant":
            turn = parse_turn(m["content"])
            assert turn.strict and turn.kind in ("tool_call", "answer")
        else:
            assert m["content"].startswith("<tool_response>")
    visited = {json.dumps(parse_turn(m["content"]).tool_call.arguments) for m in messages
               if m["role"] == "assistant" and parse_turn(m["content"]).kind == "tool_call"}
    for title in NODES:
        assert any(toy_G.nodes[title]["url"] in v for v in visited), title
    assert parse_chatml  # the transcript is plain ChatML messages


def test_one_attempt_end_to_end_is_deterministic(toy_G, toy_index_, toy_env):
    sub = subgraph(toy_G, NODES)
    records = []
    for _ in range(2):
        synth = Synthesizer(toy_G, toy_index_, toy_env, TemplateWriter(), seed=3, aliases={})
        outcome = synth.attempt(5, sub, "Idris Kallan", 1)
        assert outcome.record is not None, outcome.reason
        records.append(json.dumps(outcome.record, sort_keys=True))
    assert records[0] == records[1]
    record = json.loads(records[0])
    assert record["answer"] == "Idris Kallan" and record["target_orbit"] == 1 and record["wl_hash"] == sub.wl_hash
    assert record["generator"] == {"version": "sailorfog-0.1", "seed": 3, "index": 5, "writer": "template"}
    assert record["uniqueness"]["steps"][-1]["candidates"] == 1
    assert record["difficulty"]["oracle_tool_calls"] == record["oracle"]["num_tool_calls"]
    assert isinstance(record["difficulty"]["heuristic_solved"], bool)
    assert {n["title"] for n in record["subgraph"]["nodes"]} == set(NODES)
    assert record["uncertainty"] and "Idris" not in record["question"]


def test_obfuscate_records_what_it_applies(toy_G, toy_index_):
    cs = consistent(build_clues(toy_G, NODES, subgraph(toy_G, NODES).edges, "Harlow Optics"), toy_index_)
    seen = set()
    for seed in range(20):
        out = obfuscate(cs, random.Random(seed), toy_index_)
        seen |= set(out.uncertainty)
        assert set(out.uncertainty) <= {"entity_by_description", "partial_names", "relative_time", "comparison",
                                        "vague_time", "fuzzy_quantities"}
    assert {"entity_by_description", "vague_time", "partial_names"} <= seen
