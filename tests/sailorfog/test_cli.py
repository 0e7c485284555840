"""`websailor synth` end to end on real simulators: output, determinism, resume, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import networkx as nx
import pytest

import envs  # noqa: F401
from envs.protocol import parse_turn
from sailorfog.cli import SynthConfig, SynthError, run_synth
from sailorfog.text import distinctive_words, leaks
from tests.sailorfog.chat_server import ChatServer
from tests.wiki_sim.simhelpers import build_jsonl

ROOT = Path(__file__).resolve().parents[2]
FIELDS = {"id", "question", "answer", "aliases", "uncertainty", "subgraph", "wl_hash", "target_orbit", "target_role",
          "hops", "clues",
          "uniqueness", "distractor", "oracle", "difficulty", "generator"}


def config(wiki, out, **kw) -> SynthConfig:
    base = dict(wiki=str(wiki), out=str(out), n=4, seed=1, graph_nodes=60, max_nodes=5, workers=1, progress=False)
    return SynthConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def default_run(default_wiki, tmp_path_factory):
    out = tmp_path_factory.mktemp("synth") / "tasks.jsonl"
    summary = run_synth(config(default_wiki, out))
    return out, summary


def replay(env, record) -> dict:
    """Play the oracle trajectory's assistant turns again in a fresh episode; the last info."""
    env.reset(options={"task": {k: record[k] for k in ("id", "question", "answer", "aliases")}})
    info = {}
    for message in record["oracle"]["messages"][2:]:
        if message["role"] == "assistant":
            _, _, terminated, truncated, info = env.step(message["content"])
            if terminated or truncated:
                break
    return info


def test_default_corpus_tasks_are_complete_loadable_and_solvable(default_wiki, default_run):
    out, summary = default_run
    assert summary["tasks"] == 4 and not Path(str(out) + ".partial").exists()
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 4 and all(FIELDS <= set(r) for r in records)
    for r in records:
        assert r["uniqueness"]["steps"][-1]["candidates"] == 1 and r["generator"]["seed"] == 1
        assert len(r["generator"]["corpus"]) == 16
        assert leaks(r["question"], [r["answer"], *r["aliases"]], distinctive_words(r["answer"])) == []
        hidden = [n["title"] for n in r["subgraph"]["nodes"] if n["label"] != "X"]
        assert leaks(r["question"], [h for h in hidden if len(h) >= 4]) == []
        assert r["difficulty"]["oracle_tool_calls"] >= 3  # a search and a visit per entity on the way, at least
        assert r["difficulty"]["hops_required"] >= 1 and r["uniqueness"]["answer_own_clues_candidates"] >= 2
        assert all(n["url"].startswith("https://en.wikipedia.org/wiki/") for n in r["subgraph"]["nodes"])
    # The environments load the file unchanged, and the gold trajectories still solve their tasks.
    env = gym.make("websailor/WikiSim-v0", wiki_dir=str(default_wiki), tasks=str(out), tools=["search", "visit"])
    try:
        assert len(env.unwrapped.tasks) == 4
        for r in records:
            assert replay(env, r)["is_correct"], r["id"]
            assert all(parse_turn(m["content"]).strict for m in r["oracle"]["messages"] if m["role"] == "assistant")
    finally:
        env.close()


def test_same_seed_same_bytes_whatever_the_workers_and_hash_seed(default_wiki, default_run, tmp_path):
    out, _ = default_run
    again = tmp_path / "again.jsonl"
    cmd = [sys.executable, "-m", "websailor.cli", "synth", "--wiki", str(default_wiki), "--out", str(again),
           "--n", "4", "--seed", "1", "--graph-nodes", "60", "--max-nodes", "5", "--workers", "2", "--no-progress"]
    env = {"PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "123", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["tasks"] == 4
    assert again.read_bytes() == out.read_bytes()


def test_resume_from_a_torn_partial_file(default_wiki, default_run, tmp_path):
    out, _ = default_run
    lines = out.read_bytes().splitlines(keepends=True)
    target = tmp_path / "t.jsonl"
    (tmp_path / "t.jsonl.partial").write_bytes(b"".join(lines[:2]) + lines[2][:100])
    summary = run_synth(config(default_wiki, target))
    assert summary["resumed_from"] > 0 and target.read_bytes() == out.read_bytes()
    (tmp_path / "t.jsonl.partial").write_bytes(lines[0])
    with pytest.raises(SynthError, match="seed 1"):
        run_synth(config(default_wiki, target, seed=2))


def test_dump_corpus_with_infobox_facts(gensim_wiki, tmp_path):
    from wiki_sim import WikiSim

    with WikiSim(gensim_wiki) as sim:  # long, well-linked articles: the default seed criteria want obscure ones
        seeds = sim.random_pages(4, seed=0, min_links=5)
    summary = run_synth(config(gensim_wiki, tmp_path / "g.jsonl", n=2, graph_nodes=80, max_attempts=40,
                               seeds=seeds, mode="subgraph"))
    assert summary["tasks"] >= 1
    records = [json.loads(line) for line in (tmp_path / "g.jsonl").read_text().splitlines()]
    assert all(r["oracle"]["is_correct"] for r in records)


def test_tiny_corpus_missing_seed_and_no_subgraph(tmp_path, default_wiki):
    tiny = build_jsonl(tmp_path, [(f"Page {i}", f"Page {i} is a page about the number {i}.") for i in range(3)])
    with pytest.raises(SynthError, match="at least 10"):
        run_synth(config(tiny, tmp_path / "a.jsonl"))
    with pytest.raises(ValueError, match="not a page"):
        run_synth(config(default_wiki, tmp_path / "b.jsonl", seeds=["No Such Page Anywhere"], mode="subgraph"))
    from sailorfog.graph import save_graph

    lonely = nx.Graph()
    lonely.add_nodes_from(["Paris", "Rome", "Oslo"])
    save_graph(lonely, tmp_path / "g.json")
    with pytest.raises(SynthError, match="no connected subgraph"):
        run_synth(config(default_wiki, tmp_path / "c.jsonl", graph=str(tmp_path / "g.json"), mode="subgraph"))
    with pytest.raises(ValueError, match="not a built simulator"):
        config(tmp_path / "nowhere", tmp_path / "d.jsonl")


def test_unreachable_llm_endpoint_keeps_what_was_written(default_wiki, tmp_path):
    with ChatServer() as server:
        server.limit = 2  # serves two questions, then fails
        with pytest.raises(SynthError, match="LLM endpoint failed.*kept in"):
            run_synth(config(default_wiki, tmp_path / "l.jsonl", writer="llm", llm_base_url=server.base_url,
                             llm_model="faithful", llm_timeout=5, mode="subgraph"))
    partial = tmp_path / "l.jsonl.partial"
    kept = [json.loads(line) for line in partial.read_text().splitlines()]
    assert 1 <= len(kept) <= 2 and all(r["generator"]["writer"] == "llm" for r in kept)
    assert not (tmp_path / "l.jsonl").exists()
    with pytest.raises(SynthError, match="cannot reach|failed"):
        run_synth(config(default_wiki, tmp_path / "m.jsonl", writer="llm", llm_base_url="http://127.0.0.1:9/v1",
                         llm_model="m", llm_timeout=2))  # research mode: the first question reaches the endpoint


def test_cli_prints_one_line_errors(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "websailor.cli", "synth", "--wiki", str(tmp_path), "--out",
                           str(tmp_path / "x.jsonl")], env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "not a built simulator" in proc.stderr and proc.stderr.count("\n") == 1


def test_drop_advice_names_the_main_reasons_and_what_to_try():
    from sailorfog.cli import drop_advice

    advice = drop_advice({"shallow": 90, "no type": 40, "oracle": 3})
    assert advice.startswith("90 x shallow: ") and "--depth 0" in advice
    assert "40 x no type" in advice and "--mode subgraph" in advice
    assert "oracle" not in advice  # the two most frequent
    assert "--depth 0" not in drop_advice({"shortcut": 5, "not unique": 2}, depth=0)
    assert drop_advice({"error ValueError": 2}) == "see the reasons above"
    assert "larger corpus" in drop_advice({"given away: a search of the answer's type 'city' ...": 7})


def test_a_small_corpus_that_yields_nothing_says_what_to_try(gensim_wiki, tmp_path):
    """106 articles: too few look-alikes to hide a research task's answer; the error gives the counts and advice."""
    with pytest.raises(SynthError, match=r"no task passed verification in 12 attempt\(s\): \{.*\}\. What to try: "
                       r"\d+ x no type: .*--mode subgraph"):
        run_synth(config(gensim_wiki, tmp_path / "r.jsonl", n=3, max_attempts=12, mode="research"))
