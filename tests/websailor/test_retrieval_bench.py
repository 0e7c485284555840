"""benchmarks/retrieval.py's query families and its padded rebuild, on the default simulator."""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks.retrieval import bridge_queries, measure, padded_build, research_queries
from wiki_sim import WikiSim
from wiki_sim.contrast import held_out


def test_bridge_queries_ask_for_a_held_out_page_that_the_described_bridge_links_to(default_wiki: Path):
    queries = bridge_queries(default_wiki, 25, seed=3)
    assert len(queries) == 25
    with WikiSim(default_wiki, search_processes=0) as sim:
        for question, answer, (bridge, again) in queries:
            assert again == answer and held_out(answer) and bridge != answer
            assert answer in {link["target"] for link in sim.links(bridge)}
            assert question.startswith("Which ") and question.endswith(" mention?")
            for title in (answer, bridge):  # described, never named
                for word in re.findall(r"\w{4,}", title):
                    assert not re.search(rf"\b{re.escape(word)}\b", question, re.IGNORECASE), (word, question)
    assert bridge_queries(default_wiki, 25, seed=3) == queries


def test_research_queries_describe_each_entity_with_what_the_question_says_of_it():
    task = {"question": "A novelist ... Who is this politician?", "answer": "Fidel Castro",
            "subgraph": {"target": "Fidel Castro", "nodes": [{"label": "X", "title": "Fidel Castro"},
                                                             {"label": "B", "title": "Alejo Carpentier"}]},
            "clues": [{"kind": "type", "subject": "X", "object": "", "value": "politician"},
                      {"kind": "type", "subject": "B", "object": "", "value": "novelist"},
                      {"kind": "relation", "subject": "B", "object": "X", "value": ""},
                      {"kind": "date", "subject": "X", "object": "", "value": "the 1950s"},
                      {"kind": "name", "subject": "X", "object": "", "value": "F"}]}
    families = research_queries([task])
    assert families["clue"] == [("politician the 1950s novelist", "Fidel Castro"),
                                ("novelist politician", "Alejo Carpentier")]
    assert families["research"] == [(task["question"], "Fidel Castro", ("Fidel Castro", "Alejo Carpentier"))]


def test_measure_counts_the_answer_and_the_share_of_evidence_in_the_top_100():
    ranking = {"q1": ["A", "B"] + [f"x{i}" for i in range(200)], "q2": [f"x{i}" for i in range(99)] + ["C"]}
    result = measure({"fake": lambda q, k: ranking[q][:k]},
                     [("q1", "B", ("A", "B", "Z")), ("q2", "C")])["fake"]
    assert (result["recall@1"], result["recall@10"], result["recall@100"]) == (0.0, 0.5, 1.0)
    assert result["evidence@100"] == round((2 / 3 + 1) / 2, 3)


def test_padded_build_keeps_the_real_pages_and_adds_recombined_ones(default_wiki: Path, tmp_path: Path):
    sim_dir, build = padded_build(default_wiki, 300, seed=0, work=tmp_path)
    with WikiSim(default_wiki, search_processes=0) as real, WikiSim(sim_dir, search_processes=0) as padded:
        assert padded.store.count() == real.store.count() + 300
        assert padded.page("Fidel Castro") is not None
    assert build["build_s"] > 0 and build["peak_pss_mb"] > 0
    assert not (tmp_path / "corpus.jsonl").exists()


def test_padded_pages_never_open_with_a_real_pages_first_sentence(default_wiki: Path, tmp_path: Path):
    from wiki_sim.sentences import sentence_spans

    sim_dir, _ = padded_build(default_wiki, 500, seed=1, work=tmp_path)
    with WikiSim(default_wiki, search_processes=0) as real, WikiSim(sim_dir, search_processes=0) as padded:
        titles = {p.title for p in real.iter_pages()}
        firsts = set()
        for title in titles:
            text = real.page(title)["text"]
            firsts.update(text[s:e].strip() for s, e in sentence_spans(text)[:1])
        added = [p.title for p in padded.iter_pages() if p.title not in titles]
        assert len(added) == 500
        for title in added:
            text = padded.page(title)["text"]
            assert not any(text.startswith(first) for first in firsts if text[:20] == first[:20])
