"""Research tasks: described statements, uniqueness on exactly the stated clues, hidden hops, no quotes or
names, gold trajectories without privileged pages, attackers, and the LLM writer on a loopback server."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from urllib.parse import unquote

import gymnasium as gym
import pytest

import envs  # noqa: F401
from sailorfog.attacks import (ClauseAgent, answer_kind, clauses, content_query, name_constraints, neighbour_titles,
                               shortcut_ranks, type_neighbour_rank)
from sailorfog.constraints import candidates
from sailorfog.corpus_index import open_corpus_index
from sailorfog.describe import date_event, defining_type, other_names, predicate
from sailorfog.prose import DescribedWriter
from sailorfog.prose_llm import DescribedLLMWriter, problems
from sailorfog.report import count_words
from sailorfog.research import ResearchSynthesizer, answer_order, name_leaks, quotes
from sailorfog.statements import Statement
from sailorfog.writers import WriterError
from tests.sailorfog.chat_server import ChatServer
from wiki_sim import WikiSim
from wiki_sim.common.chat import ChatClient


def test_defining_type_predicate_and_dates():
    assert defining_type("The Velmora is a natural stream of fresh water that flows.") == ["natural", "stream"]
    assert defining_type("Mikhail Gorbachev was a Soviet and Russian politician who led.") == ["Russian",
                                                                                              "politician"]
    assert defining_type("Sundanese is an Austronesian language spoken by people.") == ["Austronesian", "language"]
    assert defining_type("Fuzhou is the capital of Fujian.") == ["capital"]
    assert defining_type("Lincoln was the 16th President of the United States.") == ["president"]
    assert defining_type("Punjab is a geographical area.") == ["geographical", "area"]
    assert defining_type("Strait X is a narrow.") == []  # an adjective is no type
    assert defining_type("Strait X is a narrow, deep channel.") == ["deep", "channel"]  # the head after the comma
    assert defining_type("Ozone depletion consists of two events.") == []
    assert predicate("The tomato is a member of the nightshade family.", "nightshade family") == "is a member of"
    assert predicate("He was born in Tarnis in 1851.", "Tarnis") == "was born in"
    assert predicate("It lies near Tarnis.", "Tarnis") is None
    assert date_event("The observatory was founded in 1887 by Idris Kallan.", 1887) == "founded"
    assert date_event("The town had 3,000 people in 1887.", 1887) is None
    assert other_names("An opinion poll, often simply referred to as a Survey, is a survey.") == ["Survey"]


def test_quotes_and_leaks_in_any_form():
    page = "Velmora Observatory is an astronomical observatory founded in 1887 on Mount Ostrel."
    assert quotes("Which astronomical observatory founded in 1887 on a mountain is it?", [page]) == [
        "astronomical observatory founded in 1887 on"]
    assert quotes("Which observatory on a mountain was founded in the 1880s?", [page]) == []
    assert name_leaks("Is it the VO?", ["Velmora Observatory"], {}, "Velmora Observatory") == ["VO"]
    assert "non-Latin letters" in name_leaks("Its name is 東京.", ["Tokyo"], {}, "Tokyo")
    assert name_leaks("A city on a bay.", ["Tokyo"], {"Tokyo": ["Edo"]}, "Tokyo") == []
    assert "Edo" in name_leaks("Once called Edo, this city ...", ["Tokyo"], {"Tokyo": ["Edo"]}, "Tokyo")


def test_cjk_text_counts_by_character():
    assert count_words("这是一个问题") == 6 and count_words("What is it?") == 3
    assert count_words("它是 a city") == 4


@pytest.fixture(scope="module")
def research(default_wiki):
    sim = WikiSim(default_wiki)
    index = open_corpus_index(sim)  # what `websailor synth` runs on
    env = gym.make("websailor/WikiSim-v0", wiki_dir=str(default_wiki), tasks=[{"question": "placeholder", "answer": "placeholder"}],
                   tools=["search", "visit"])
    synth = ResearchSynthesizer(index, sim, seed=3)
    order = answer_order(index, 3)
    records, reasons = [], Counter()
    for i, pid in enumerate(order[:1000]):
        out = synth.attempt(i, index.titles[pid], env, DescribedWriter())
        if out.record:
            records.append(out.record)
        else:
            reasons[out.reason.split(":")[0]] += 1
        if len(records) >= 4:
            break
    yield sim, index, env, synth, records, reasons
    env.close()
    sim.close()


def test_answers_are_long_tail_and_never_repeat(research):
    _, index, *_ = research
    order = answer_order(index, 3)
    assert len(order) == len(set(order)) and order == answer_order(index, 3)
    inbound = sorted(index.inbound)
    hub = inbound[int(0.99 * (len(inbound) - 1))]
    assert all(index.inbound[p] <= hub for p in order)
    head = sorted(index.inbound[p] for p in order[:300])
    assert head[len(head) // 2] <= inbound[len(inbound) // 2]  # drawn against popularity


def test_the_stated_clues_alone_single_out_the_answer_through_a_hidden_entity(research):
    sim, index, _, _, records, reasons = research
    assert len(records) >= 3, reasons  # about 1 answer in 100 makes a task on this corpus (benchmarks: 46 of 4,181)
    for r in records:
        stated = [Statement(**c) for c in r["clues"]]
        labels = sorted({lab for s in stated for lab in s.labels})
        checks = [c for s in stated for c in s.checks]
        assert candidates(index, checks, labels) == {index.ids[r["subgraph"]["target"]]}
        own = [c for s in stated if s.labels == ["X"] for c in s.checks]
        assert len(candidates(index, own, ["X"])) >= 2  # the answer's own clues do not decide
        assert r["difficulty"]["hops_required"] >= 1 and r["hops"] >= 1
        assert {s.kind for s in stated} >= {"type", "relation"} and all(s.alone >= 1 for s in stated)
        assert 40 <= len(r["question"].split()) <= 110
        # no letter labels (the article "A" before a word is a word; quoted first letters are clues)
        assert not re.search(r"\b(?!A [A-Za-z])[A-Z]\b(?![”’])", r["question"].replace("“", " ")), r["question"]
        titles = [n["title"] for n in r["subgraph"]["nodes"]]
        assert quotes(r["question"], [sim.page(t)["text"] for t in titles]) == []
        assert name_leaks(r["question"], titles, {}, r["subgraph"]["target"]) == []
        assert r["subgraph"]["target"] in r["aliases"] and r["answer"] in r["aliases"]


def test_gold_trajectories_use_no_privileged_page(research):
    *_, records, _ = research
    for r in records:
        urls = {n["url"] for n in r["subgraph"]["nodes"]}
        hidden = [n["title"] for n in r["subgraph"]["nodes"]]
        seen = ""
        assert r["oracle"]["is_correct"]
        for m in r["oracle"]["messages"][2:]:
            if m["role"] == "user":
                seen += m["content"]
                continue
            call = re.search(r"<tool_call>\s*(\{.*\})\s*</tool_call>", m["content"], re.S)
            if not call:
                continue
            tool = json.loads(call.group(1))
            if tool["name"] == "visit":
                assert tool["arguments"]["goal"] and set(tool["arguments"]["url"]) <= urls
                # a page is visited only once a search result or a page read has shown its name
                assert all(u in seen or unquote(u.rsplit("/", 1)[-1]).replace("_", " ").lower() in seen.lower()
                           for u in tool["arguments"]["url"])
            else:  # searches describe; they name only what an earlier tool response showed
                for q in tool["arguments"]["query"]:
                    assert all(t not in q or t in seen for t in hidden), q
            think = m["content"].split("</think>")[0]
            assert len(think.split()) <= 40


def test_attacks_find_a_quoting_question_and_not_the_research_ones(research):
    sim, _, env, _, records, _ = research
    page = sim.page("Tomato")["text"]
    quoting = "Which plant is this? " + " ".join(page.split()[:14])
    assert shortcut_ranks(sim, quoting, {"Tomato"})["whole"] is not None
    for r in records:
        assert set(shortcut_ranks(sim, r["question"], {r["subgraph"]["target"]}).values()) == {None}
    q = "There is a city whose two-word name begins with “S”. What is this city?"
    assert name_constraints(q, "city") == ("S", 2) and content_query(clauses(q)[0]) == "city"
    from envs.episode import run_episode

    info = run_episode(env, ClauseAgent(), options={"task": {"question": quoting, "answer": "Tomato"}}).info
    assert info["termination"] == "answer"


def test_no_task_falls_to_its_type_searched_with_a_neighbours_title(research):
    """A reader who knows a neighbour ("officer" + "Burkina Faso" -> Thomas Sankara) finds no research answer."""
    sim, _, _, synth, records, _ = research
    known = {"answer": "Thomas Sankara", "clues": [{"kind": "type", "subject": "X", "value": "officer"}],
             "subgraph": {"target": "Thomas Sankara", "edges": [{"source": "Thomas Sankara", "target": "Burkina Faso"},
                                                                {"source": "Burkina Faso", "target": "Mali"}]}}
    assert answer_kind(known) == "officer" and neighbour_titles(known) == ["Burkina Faso"]
    assert type_neighbour_rank(sim, "officer", ["Burkina Faso"], {"Thomas Sankara"}) is not None
    assert type_neighbour_rank(sim, "", ["Burkina Faso"], {"Thomas Sankara"}) is None  # nothing to search
    assert synth.type_neighbour_finds("officer", "Burkina Faso", "Thomas Sankara")
    for r in records:
        assert neighbour_titles(r) and answer_kind(r)
        assert type_neighbour_rank(sim, answer_kind(r), neighbour_titles(r), {r["subgraph"]["target"]}) is None


def test_curriculum_level_writes_one_hop_tasks(research):
    sim, index, env, *_ = research
    easy = ResearchSynthesizer(index, sim, seed=3, depth=0)
    order = answer_order(index, 3)
    kept = [o.record for o in (easy.attempt(i, index.titles[p], env, DescribedWriter()) for i, p in
                               enumerate(order[:80])) if o.record]
    assert kept and all(r["generator"]["depth"] == 0 for r in kept)
    assert all(len(r["subgraph"]["nodes"]) == 2 for r in kept)


def _llm(server, model: str, attempts: int = 3) -> DescribedLLMWriter:
    return DescribedLLMWriter(ChatClient(server.base_url, model, timeout=5, max_retries=0), max_attempts=attempts)


def test_llm_writer_keeps_every_statement_and_hides_names(research):
    *_, records, _ = research
    r = records[0]
    stated = [Statement(**c) for c in r["clues"]]
    types = {s.subject: s.value for s in stated if s.kind == "type"}
    target = r["subgraph"]["target"]
    check = lambda text: [f"names {target}"] if target.lower() in text.lower() else []  # noqa: E731
    with ChatServer() as server:
        question = _llm(server, "faithful").write(stated, types, check=check)
        assert problems(question, stated, check, types) == [] and server.bodies[-1]["model"] == "faithful"
        server.answer = target
        assert target not in _llm(server, "leaky-once").write(stated, types, check=check)
        assert "rejected" in server.bodies[-1]["messages"][-1]["content"]
        with pytest.raises(WriterError, match="lost"):
            _llm(server, "drops-clue", attempts=2).write(stated, types, check=check)
    assert any("adds figures" in p for p in problems(question + " It had 12345 rooms.", stated))


def test_statements_that_read_the_same_are_written_once():
    """Two dated statements blurred to the same period must not read 'tied to a date in X, tied to a date
    in X'."""
    from sailorfog.prose import _clauses

    class S:
        def __init__(self, sid):
            self.id, self.kind, self.value, self.predicate, self.subject = sid, "date", "the 1850s", "", "a"
            self.checks = []

    assert _clauses([S("d1"), S("d2")], person=True) == ["tied to a date in the 1850s"]


def test_a_group_is_also_answered_by_its_name_without_the_group_noun(research, default_wiki):
    """"French" answers "name this language" (the judge read "French" as wrong against French language)."""
    sim = WikiSim(default_wiki)
    try:
        synth = ResearchSynthesizer(open_corpus_index(sim), sim, seed=3)
        # "Spanish or Castilian is a Romance language": the name opens sentences only (blind play, seed 10101:
        # "Spanish" read as wrong against Spanish language)
        for title, short in (("French language", "French"), ("Qing dynasty", "Qing"), ("Yoruba people", "Yoruba"),
                             ("Spanish language", "Spanish")):
            assert short in synth.aliases(title) and title in synth.aliases(title)
        for title in ("Paris", "Sign language", "New York City"):
            assert all(n.split()[-1] in title.split() for n in synth.aliases(title)[:2])
        assert "Sign" not in synth.aliases("Sign language")  # no capitalized name before the noun
    finally:
        sim.close()


def test_a_side_branch_on_a_hidden_entity_is_described(research):
    """"A city is associated with a state." tells a reader nothing (blind play, seed 9191): a side branch on a
    hidden intermediate carries a date, quantity or word count of its own in the stated base, or is left out."""
    _, index, _, synth, _, _ = research
    rng, branches = random.Random(5), 0
    for pid in answer_order(index, 5)[:300]:
        chain = synth.chain(index.titles[pid], rng)
        if isinstance(chain, str):
            continue
        for label in set(chain.titles) - set(chain.path) - {"X"}:
            ties = [s for s in chain.base if s.kind == "relation" and label in s.labels]
            anchors = {lab for s in ties for lab in s.labels} - {label}
            if "X" not in anchors:
                branches += 1
                assert any(s.kind in ("date", "number", "name_words") and s.subject == label
                           for s in chain.base), chain.titles
    assert branches >= 3


def test_research_questions_stay_within_ninety_words(research):
    """Seed-0 synthesis wrote a question of 98 words (seven associations among three countries, a peninsula, a
    waterway, a sea and a city); the issue asks for 51-90."""
    *_, records, _ = research
    assert records and all(51 <= len(r["question"].split()) <= 90 for r in records)
    assert ResearchSynthesizer.max_words == 90
