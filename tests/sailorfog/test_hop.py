"""One-hop tasks (sailorfog.hop) on the simulator built from the embedded default corpus: one answer,
readable from the compact search's hit of the described page or from its compact visit, never named by the
question."""

from __future__ import annotations

import json

import gymnasium as gym

import envs  # noqa: F401  (registration)
from sailorfog.hop import HOP_QUERY_WORDS, OPENING_CHARS, _given_away, derive_hop_tasks, hop_tasks
from websailor.cli import main
from websailor.recipe import compact_env_kwargs
from wiki_sim import WikiSim


def test_hop_tasks_go_through_a_described_page_to_one_answer_the_search_shows(default_wiki):
    """One hop: the page is given by its short description only, the answer is the one page of the asked type
    its opening words name, and the compact search for the description shows that page, with the answer in its
    snippet (read: hit; a strong agent's two turns win) or in its compact visit (read: visit; three turns win);
    the page's own title loses."""
    with WikiSim(default_wiki) as sim:
        tasks = hop_tasks(sim)
        assert len(tasks) >= 300 and sum(t.metadata["read"] == "hit" for t in tasks) >= 30
        for task in tasks:
            via, kind = task.metadata["via"], task.metadata["type"]
            description = task.question.split('"')[1]
            assert via.lower() not in task.question.lower() and task.answer.lower() not in task.question.lower()
            assert f"Which {kind} does" in task.question and task.answer != via
            assert task.answer.split(" (")[0] in " ".join(sim.page(via)["lead"].split())[:OPENING_CHARS]
            assert sim.resolve(task.answer) == task.answer and description
    assert derive_hop_tasks(default_wiki, 5, seed=3) == derive_hop_tasks(default_wiki, 5, seed=3) == \
        [t for t in derive_hop_tasks(default_wiki, 500, seed=3)][:5]
    played = [t for t in tasks if t.metadata["read"] == "hit"][:4] + [t for t in tasks if t.metadata["read"] == "visit"][:4]
    env = gym.make("websailor/WikiSim-v0", tasks=[t.to_dict() for t in played], **compact_env_kwargs(str(default_wiki)))
    try:
        for task in played:
            words = task.question.split('"')[1].split()[:HOP_QUERY_WORDS]
            env.reset(options={"task": task.to_dict()})
            search = {"name": "search", "arguments": {"query": [" ".join(words)]}}
            obs = env.step(f"<think>s</think>\n<tool_call>\n{json.dumps(search)}\n</tool_call>")[0]
            assert f"[{task.metadata['via']}]" in obs
            if task.metadata["read"] == "visit":
                url = obs.split(f"[{task.metadata['via']}](", 1)[1].split(")\n", 1)[0]
                visit = {"name": "visit", "arguments": {"url": [url], "goal": task.metadata["type"]}}
                obs = env.step(f"<think>v</think>\n<tool_call>\n{json.dumps(visit)}\n</tool_call>")[0]
                obs = obs.split("Evidence in page:", 1)[1]
            assert task.answer.split(" (")[0] in obs
            assert env.step(f"<think>r</think>\n<answer>{task.answer}</answer>")[1] == 1.0
            env.reset(options={"task": task.to_dict()})
            assert env.step(f"<think>r</think>\n<answer>{task.metadata['via']}</answer>")[1] == 0.0
    finally:
        env.close()


def test_a_description_that_names_the_answer_gives_it_away():
    france = "France, officially the French Republic, is a country in Western Europe."
    assert _given_away("France", "French overseas collectivity in the Pacific", france)  # its page opens with it
    assert _given_away("United States", "U.S. territory in Micronesia", "")  # initials
    assert _given_away("Athens", "Classical Athenian statesman", "")  # a stem
    assert _given_away("Sun Yat-sen", "Wife of Sun Yat-sen", "")  # the name itself
    assert _given_away("United States", "American territory in Polynesia", "The United States of America (USA)")
    assert _given_away("Myanmar", "Tibeto-Burman language", "Myanmar, also known as Burma, is a country.")
    assert not _given_away("Myanmar", "Tibeto-Burman language", "Myanmar, officially ... is a country.")


def test_synth_hop_mode_writes_the_tasks_and_refuses_nothing_found(default_wiki, tmp_path, capsys):
    out = tmp_path / "hop.jsonl"
    assert main(["synth", "--wiki", str(default_wiki), "--out", str(out), "--mode", "hop", "--n", "5"]) == 0
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(written) == 5 and {r["kind"] for r in written} == {"hop"} and all(r["via"] for r in written)
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == {"mode": "hop", "out": str(out),
                                                                            "tasks": 5}
    assert main(["synth", "--wiki", str(default_wiki), "--out", str(out), "--mode", "hop", "--n", "100000"]) == 0
    assert "warning: " in capsys.readouterr().err and 300 <= len(out.read_text().splitlines()) < 100000
