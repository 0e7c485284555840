"""Contrastive tuning of the dense index (``websailor wiki embed --tune contrastive``) on the
gensim enwiki sample, with a tiny model made from a config whose word-level tokenizer is
trained on the sample's own text (tests/wiki_sim/dense_helpers.py: no download)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.wiki_sim.dense_helpers import tiny_model
from websailor.cli import main
from wiki_sim.contrast import HELD_OUT_PERCENT, TuneConfig, batches, held_out, info_nce, training_pairs
from wiki_sim.dense import VECTORS_DIR, sha256_file
from wiki_sim.embed import build_vectors
from wiki_sim.sim import WikiSim

TUNE = TuneConfig(steps=40, batch=32, lr=0.05, seed=3)


@pytest.fixture(scope="module")
def sample(gensim_wiki: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("contrast")
    with WikiSim(gensim_wiki, search_processes=0) as sim:
        titles = list(sim.index.titles)
        leads = dict(sim.iter_leads())
        descriptions = [(p, v) for p, _, v, _, _ in sim.iter_facts("description")]
    model = tiny_model(root / "model", [(t, leads.get(t, "")[:2000]) for t in titles])
    wiki = root / "wiki"
    shutil.copytree(gensim_wiki, wiki)
    meta = build_vectors(wiki, model, recipe="input", dim=16, tune=TUNE)
    return {"root": root, "model": model, "wiki": wiki, "meta": meta, "titles": titles, "leads": leads,
            "descriptions": descriptions}


def test_the_loss_falls_and_meta_records_the_tuning(sample):
    tune = sample["meta"]["tune"]
    assert tune["method"] == "contrastive" and tune["steps"] == 40 and tune["seed"] == 3
    assert tune["loss"]["last_20_mean"] < 0.8 * tune["loss"]["first_20_mean"], tune["loss"]
    assert tune["split"]["training"] + tune["split"]["held_out"] == len(sample["titles"])
    assert tune["pairs"]["first_sentence"] > 50


def test_training_pages_and_held_out_pages_are_disjoint_and_fixed(sample):
    titles = sample["titles"]
    queries, pages, _ = training_pairs(titles, sample["leads"], sample["descriptions"])
    trained = {titles[d] for d in pages.tolist()}
    held = {t for t in titles if held_out(t)}
    assert trained and held and not trained & held
    assert 0 < len(held) < 3 * HELD_OUT_PERCENT * len(titles) / 100
    assert len(held) == sample["meta"]["tune"]["split"]["held_out"]
    # the split is the title's hash: fixed across runs, seeds and corpora
    assert [held_out(t) for t in ("Rome", "Paris", "Anarchism", "Abraham Lincoln")] == [True, False, False, False]
    assert {t for t in titles if held_out(t)} == held
    # no query names its page by the title's words
    for query, d in zip(queries, pages.tolist()):
        assert not {w.lower() for w in titles[d].split()} & {w.lower() for w in query.split()} - {""}, query


def test_batches_hold_distinct_pages_and_follow_the_seed():
    pair_pages = np.asarray([0, 0, 1, 2, 2, 3, 4, 5])
    first = [b.tolist() for b in batches(pair_pages, 4, 5, seed=1)]
    assert first == [b.tolist() for b in batches(pair_pages, 4, 5, seed=1)]
    assert first != [b.tolist() for b in batches(pair_pages, 4, 5, seed=2)]
    for b in first:
        assert len(b) == 4 and len(set(pair_pages[b].tolist())) == 4


def test_info_nce_by_hand():
    import math

    import torch

    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    p = torch.tensor([[2.0, 0.0], [0.0, 3.0]])  # cosines: identity
    expected = -math.log(math.exp(1 / 0.5) / (math.exp(1 / 0.5) + math.exp(0.0)))
    assert float(info_nce(q, p, 0.5)) == pytest.approx(expected)


def test_the_tuned_index_opens_searches_and_is_deterministic(sample, tmp_path: Path):
    wiki = sample["wiki"]
    with WikiSim(wiki, retriever="dense") as sim:
        hits = sim.search(["a political philosophy and movement sceptical of authority"], k=5)[0]
        assert len(hits) == 5 and all(h.title in sample["titles"] for h in hits)
    again = tmp_path / "wiki"
    shutil.copytree(wiki, again)
    build_vectors(again, sample["model"], recipe="input", dim=16, tune=TUNE)
    name = "tokens.npy"
    assert sha256_file(again / VECTORS_DIR / name) == sha256_file(wiki / VECTORS_DIR / name)
    other = TuneConfig(steps=TUNE.steps, batch=TUNE.batch, lr=TUNE.lr, seed=TUNE.seed + 1)
    build_vectors(again, sample["model"], recipe="input", dim=16, tune=other)
    assert sha256_file(again / VECTORS_DIR / name) != sha256_file(wiki / VECTORS_DIR / name)


def test_cli_embed_with_tune_and_bad_options_are_one_line(sample, tmp_path: Path, capsys):
    wiki = tmp_path / "wiki"
    shutil.copytree(sample["wiki"], wiki)
    assert main(["wiki", "embed", str(wiki), "--model", str(sample["model"]), "--dim", "8", "--tune", "contrastive",
                 "--steps", "3", "--batch", "8", "--no-progress"]) == 0
    assert "tuned contrastively" in capsys.readouterr().out
    meta = json.loads((wiki / VECTORS_DIR / "meta.json").read_text())
    assert meta["tune"]["steps"] == 3 and meta["dim"] == 8
    for option, value, needle in [("--steps", "-1", "--steps must be"), ("--batch", "1", "--batch must be"),
                                  ("--lr", "0", "--lr must be"), ("--temperature", "nan", "--temperature must be")]:
        assert main(["wiki", "embed", str(wiki), "--tune", "contrastive", option, value]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and needle in err, err


def test_counted_ids_weighted_by_their_counts_sum_to_the_texts_rows():
    import torch

    from wiki_sim.contrast import _bags, counted

    table = torch.randn(12, 4, dtype=torch.float64).float()
    texts = [np.array([3, 5, 3, 3, 11]), np.array([0]), np.array([7, 7])]
    bag = torch.nn.EmbeddingBag.from_pretrained(table, mode="sum")
    got = bag(*_bags([counted(ids) for ids in texts]))
    want = torch.stack([table[torch.from_numpy(ids)].sum(0) for ids in texts])
    assert torch.allclose(got, want, atol=1e-6)
    assert counted(np.array([3, 5, 3]))[0].tolist() == [3, 5] and counted(np.array([3, 5, 3]))[1].tolist() == [2, 1]
