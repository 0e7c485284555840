"""The static recipe of the dense index: WordLlama's token table from its PyPI wheel, fetched by
setup (`websailor wiki fetch`) into the cache and read from there (no download here)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.wiki_sim.dense_helpers import PAGES
from tests.wiki_sim.simhelpers import build_jsonl
from wiki_sim import WikiSimError
from wiki_sim.dense import VECTORS_DIR
from wiki_sim.embed import build_vectors
from wiki_sim.sim import WikiSim
from wiki_sim.static_model import DEFAULT_STATIC_MODEL, WORDLLAMA_L2_256, static_files, static_table


@pytest.fixture(scope="module")
def wiki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_jsonl(tmp_path_factory.mktemp("static"), PAGES)


def _top(sim: WikiSim, query: str, k: int = 3) -> list[str]:
    return [h.title for h in sim.search([query], k=k)[0]]


def test_the_fetched_table_is_wordllamas(tmp_path: Path):
    table, tokenizer = static_table(DEFAULT_STATIC_MODEL)
    assert table.shape == (32000, 256) and table.dtype == np.float32 and np.isfinite(table).all()
    assert json.loads(tokenizer.read_text(encoding="utf-8"))["model"]["type"] == "BPE"


def test_static_recipe_finds_pages_by_description_with_no_causal_lm(wiki: Path, tmp_path: Path):
    copy = tmp_path / "w"
    shutil.copytree(wiki, copy)
    meta = build_vectors(copy, DEFAULT_STATIC_MODEL, recipe="static")
    assert (meta["recipe"], meta["dim"], meta["sif_a"]) == ("static", 256, None)
    assert meta["model"]["name"] == "wordllama-l2-256" and meta["model"]["license"] == "MIT"
    assert meta["model"]["source"] == "wordllama==0.4.0.post1"
    with WikiSim(copy, retriever="dense") as dense:
        # described, not named: no query shares a word with the answer's title
        for query, title in [("scientist who worked out relativity", "Albert Einstein"),
                             ("the tallest peak on the planet", "Mount Everest"),
                             ("how green leaves turn sunlight into sugar", "Photosynthesis"),
                             ("improvised African-American musical style", "Jazz")]:
            assert _top(dense, query, 1) == [title], query
    reduced = tmp_path / "r"
    shutil.copytree(wiki, reduced)
    assert build_vectors(reduced, DEFAULT_STATIC_MODEL, recipe="static", dim=16)["dim"] == 16  # PCA only here


def test_a_missing_or_altered_static_model_names_the_fetch_command(tmp_path: Path):
    with pytest.raises(WikiSimError, match="is missing; fetch it with `websailor wiki fetch`"):
        static_files(DEFAULT_STATIC_MODEL, tmp_path)
    (tmp_path / WORDLLAMA_L2_256.weights.filename).write_bytes(b"not the table")
    with pytest.raises(WikiSimError, match="does not match its pinned sha256"):
        static_files(DEFAULT_STATIC_MODEL, tmp_path)
    with pytest.raises(WikiSimError, match="unknown static embedding model 'glove'; expected one of wordllama-l2-256"):
        static_table("glove")


def test_cli_embed_static_then_hybrid_search(wiki: Path, tmp_path: Path, capsys):
    from wiki_sim.cli import EmbedConfig, SearchConfig, run_embed, run_search

    copy = tmp_path / "w"
    shutil.copytree(wiki, copy)
    assert run_embed(EmbedConfig(str(copy), progress=False)) == 0  # the default recipe
    assert "static recipe from wordllama-l2-256" in capsys.readouterr().out
    assert (copy / VECTORS_DIR / "meta.json").is_file()
    assert run_search(SearchConfig(str(copy), ["the tallest peak on the planet"], k=2, json=True,
                                   retriever="hybrid")) == 0
    # BM25 ranks pages sharing "the"; the fusion brings in the dense index's first page
    assert "Mount Everest" in [h["title"] for h in json.loads(capsys.readouterr().out)[0]["hits"]]
    with pytest.raises(ValueError, match="--recipe must be auto, hidden, input or static"):
        EmbedConfig(str(copy), recipe="glove")
