"""Dense and hybrid retrieval on a tiny built simulator, with a tiny model made from a config
(tests/wiki_sim/dense_helpers.py: no download)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.wiki_sim.dense_helpers import PAGES, tiny_model
from tests.wiki_sim.simhelpers import build_jsonl
from wiki_sim import WikiSimError
from wiki_sim.build import build
from wiki_sim.dense import VECTORS_DIR, rrf, sha256_file
from wiki_sim.embed import build_vectors
from wiki_sim.records import title_to_url
from wiki_sim.sim import WikiSim

@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("dense")
    model = tiny_model(root / "model")
    wiki = build_jsonl(root, PAGES)
    build_vectors(wiki, model, recipe="hidden", layer=1, dim=16)
    return wiki, model


def _top(sim: WikiSim, query: str, k: int = 3) -> list[str]:
    return [h.title for h in sim.search([query], k=k)[0]]


def test_hybrid_and_dense_find_obvious_pages(built):
    wiki, _ = built
    with WikiSim(wiki, retriever="hybrid") as hybrid, WikiSim(wiki, retriever="dense") as dense:
        for query, title in [("German-born theoretical physicist relativity", "Albert Einstein"),
                             ("highest mountain Himalayas", "Mount Everest"),
                             ("plants convert light energy", "Photosynthesis"),
                             ("music genre New Orleans", "Jazz")]:
            assert _top(hybrid, query)[0] == title, query
            assert title in _top(dense, query), query
        hit = hybrid.search("capital of Japan")[0][0]
        assert (hit.title, hit.url) == ("Tokyo", title_to_url("Tokyo"))  # the live web's URL
        assert "Japan" in hit.snippet
        assert hybrid.stats()["retriever"] == "hybrid" and "retriever='hybrid'" in repr(hybrid)
        queries = ["capital of Japan", "plants convert light energy", "Einstien physicist"]
        for sim in (hybrid, dense):  # the ranked titles of the searches the retriever makes
            assert sim.ranked_titles(queries, k=5) == [[h.title for h in hits] for hits in sim.search(queries, k=5)]


def test_bm25_stays_the_default_and_hybrid_keeps_the_spelling_retry(built):
    wiki, _ = built
    with WikiSim(wiki) as plain, WikiSim(wiki, retriever="bm25") as bm25, WikiSim(wiki, retriever="hybrid") as hyb:
        assert plain.retriever == "bm25" and plain.dense is None
        assert plain.search("river Vienna")[0] == bm25.search("river Vienna")[0]
        fixed = hyb.search("Einstien physicist")[0]
        assert fixed.corrected_query == plain.search("Einstien physicist")[0].corrected_query is not None
        assert fixed[0].title == "Albert Einstein"
        with pytest.raises(ValueError, match="retriever must be one of bm25, dense, hybrid"):
            WikiSim(wiki, retriever="colbert")


def test_hybrid_makes_snippets_only_for_the_pages_it_returns_and_returns_what_full_searches_fuse(built):
    """The hybrid ranks BM25's top 30 without snippets; its hits equal those of fusing a full BM25
    search of depth 30 (snippets, scores and the corrected query included)."""
    from wiki_sim.dense import DENSE_WEIGHT
    from wiki_sim.sim import HYBRID_DEPTH

    wiki, _ = built
    with WikiSim(wiki, retriever="hybrid", search_processes=0, cache_size=0) as sim:
        for query in ("German-born theoretical physicist relativity", "Einstien physicist", "capital of Japan",
                      "river Vienna music", "qqqq zzzz"):
            for k in (1, 3, 10):
                lexical = sim.searcher.search(query, max(k, HYBRID_DEPTH))
                dense = {sim.index.titles[d]: d for d, _ in sim.dense.search(query, max(k, HYBRID_DEPTH))}
                fused = rrf([[h.title for h in lexical], list(dense)], weights=(1.0, DENSE_WEIGHT))[:k]
                by_title = {h.title: h for h in lexical}
                by_title.update((h.title, h) for h in sim.searcher.hits(
                    query, [(dense[t], 0.0) for t in fused if t not in by_title]))
                got = sim.search([query], k=k)[0]
                assert list(got) == [by_title[t] for t in fused if t in by_title], (query, k)
                assert got.corrected_query == lexical.corrected_query


def test_rrf_by_hand():
    # k=60: a: 1/61 + 1/62; b: 1/62 + 1/61; c: 1/63; d: 1/63 (ties keep first-seen order)
    assert rrf([["a", "b", "c"], ["b", "a", "d"]], k=60) == ["a", "b", "c", "d"]
    assert rrf([["x"], ["y", "x"]], k=0) == ["x", "y"]  # 1 + 1/2 against 1
    # the hybrid's setting, k=1, dense weight 0.3: BM25's first page (1/2) stays above its second
    # even when the dense ranking puts that one first (1/3 + 0.3/2 = 0.483)
    assert rrf([["a", "b"], ["b", "c"]], k=1, weights=(1.0, 0.3)) == ["a", "b", "c"]
    assert rrf([["a", "b"], ["b", "c"]], k=60, weights=(1.0, 0.3))[0] == "b"
    with pytest.raises(ValueError, match="2 rankings but 1 weights"):
        rrf([["a"], ["b"]], weights=(1.0,))


def test_a_retriever_the_build_lacks_is_one_line_naming_the_option(tmp_path: Path):
    wiki = build_jsonl(tmp_path, PAGES[:3])
    for retriever in ("dense", "hybrid"):
        with pytest.raises(WikiSimError) as err:
            WikiSim(wiki, retriever=retriever)
        message = str(err.value)
        assert "\n" not in message and f"--retriever {retriever}" in message and "wiki embed" in message


def _copy(built: tuple[Path, Path], tmp_path: Path) -> Path:
    import shutil

    wiki = tmp_path / "wiki"
    shutil.copytree(built[0], wiki)
    return wiki


def _refused(wiki: Path, needle: str) -> None:
    with pytest.raises(WikiSimError) as err:
        WikiSim(wiki, retriever="dense")
    assert "\n" not in str(err.value) and needle in str(err.value), str(err.value)


def test_damaged_foreign_and_pickled_vectors_are_refused(built, tmp_path: Path):
    wiki = _copy(built, tmp_path)
    pages = wiki / VECTORS_DIR / "pages.npy"
    meta_file = wiki / VECTORS_DIR / "meta.json"
    meta = json.loads(meta_file.read_text())
    data = bytearray(pages.read_bytes())
    data[-1] ^= 0xFF
    pages.write_bytes(bytes(data))
    _refused(wiki, "does not match the size and sha256")

    # an object array whose checksum was recorded: np.load refuses it without unpickling
    np.save(pages, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    meta["files"]["pages.npy"] = {"bytes": pages.stat().st_size, "sha256": sha256_file(pages)}
    meta_file.write_text(json.dumps(meta))
    _refused(wiki, "not a plain .npy array")

    np.save(pages, np.zeros((3, 16), dtype=np.float32))  # right type, wrong shape
    meta["files"]["pages.npy"] = {"bytes": pages.stat().st_size, "sha256": sha256_file(pages)}
    meta_file.write_text(json.dumps(meta))
    _refused(wiki, "expected float32")

    meta["build_fingerprint"] = "0" * 32
    meta_file.write_text(json.dumps(meta))
    _refused(wiki, "made for another build")
    meta_file.write_text("{not json")
    _refused(wiki, "meta.json is unreadable")


def test_a_simulator_with_vectors_can_be_rebuilt(built, tmp_path: Path):
    wiki = _copy(built, tmp_path)
    corpus = tmp_path / "again.jsonl"
    corpus.write_text("".join(json.dumps({"title": t, "text": x}) + "\n" for t, x in PAGES[:2]))
    build("jsonl", corpus, wiki, progress=False)
    assert not (wiki / VECTORS_DIR).exists()  # the rebuild replaced the folder; its vectors went with it
    with pytest.raises(WikiSimError, match="--retriever hybrid"):
        WikiSim(wiki, retriever="hybrid")


def test_cli_build_with_retriever_and_search(built, tmp_path: Path, capsys):
    from wiki_sim.cli import BuildConfig, SearchConfig, run_build, run_search

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"title": t, "text": x}) + "\n" for t, x in PAGES))
    out = tmp_path / "w"
    assert run_build(BuildConfig(str(corpus), source="jsonl", out=str(out), retriever="hybrid",
                                 model=str(built[1]), progress=False)) == 0
    meta = json.loads((out / VECTORS_DIR / "meta.json").read_text())
    assert meta["pages"] == len(PAGES) and meta["files"]["pages.npy"]["sha256"] == sha256_file(
        out / VECTORS_DIR / "pages.npy")
    capsys.readouterr()
    assert run_search(SearchConfig(str(out), ["highest mountain Himalayas"], k=2, json=True,
                                   retriever="hybrid")) == 0
    assert json.loads(capsys.readouterr().out)[0]["hits"][0]["title"] == "Mount Everest"
    with pytest.raises(ValueError, match="--retriever must be"):
        SearchConfig(str(out), ["x"], retriever="splade")


def test_a_folder_that_is_no_model_is_refused(built, tmp_path: Path):
    with pytest.raises(WikiSimError, match="is not a model folder"):
        build_vectors(built[0], tmp_path)
    with pytest.raises(ValueError, match="dim must be"):
        build_vectors(built[0], built[1], dim=1)


def test_input_recipe_needs_no_forward_pass(built, tmp_path: Path):
    wiki = _copy(built, tmp_path)
    meta = build_vectors(wiki, built[1], recipe="input", dim=8)
    assert meta["recipe"] == "input" and meta["layer"] is None and meta["dim"] == 8
    with WikiSim(wiki, retriever="hybrid") as sim:
        assert _top(sim, "Mount Everest")[0] == "Mount Everest"


def test_the_input_table_is_read_alone_and_equals_the_models(built, tmp_path: Path, monkeypatch):
    import torch
    import transformers

    from wiki_sim.dense import ENCODE_CHUNK, encode, load_tokenizer, model_vectors, token_ids

    model_dir = built[1]
    expected = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32) \
        .get_input_embeddings().weight.detach().numpy()

    def no_model(*args, **kwargs):
        raise AssertionError("the model was built")

    with monkeypatch.context() as m:
        m.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_model)
        np.testing.assert_array_equal(model_vectors(model_dir, "input"), expected)
    sharded = tmp_path / "sharded"  # no one-file checkpoint: built through transformers
    sharded.mkdir()
    for f in model_dir.iterdir():
        if f.name != "model.safetensors":
            (sharded / f.name).symlink_to(f)
    with monkeypatch.context() as m:
        m.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_model)
        with pytest.raises(AssertionError, match="the model was built"):
            model_vectors(sharded, "input")
    tokenizer = load_tokenizer(model_dir / "tokenizer.json")  # chunked tokenizing: the same ids in order
    texts = [f"page {i} about Mount Everest" for i in range(ENCODE_CHUNK + 5)]
    ids = list(token_ids(tokenizer, texts, len(expected)))
    assert len(ids) == len(texts) and [list(x) for x in ids[-2:]] == [
        list(np.asarray(e.ids)[np.asarray(e.ids) < len(expected)]) for e in tokenizer.encode_batch(texts[-2:],
                                                                                                      add_special_tokens=False)]
    assert encode(tokenizer, expected, texts).shape == (len(texts), expected.shape[1])


def test_a_stored_table_of_another_shape_is_not_read(built, tmp_path: Path):
    from safetensors.numpy import save_file

    from wiki_sim.dense import stored_input_table

    save_file({"model.embed_tokens.weight": np.zeros((3, 4), np.float32)}, str(tmp_path / "model.safetensors"))
    assert stored_input_table(tmp_path, 3, 4).shape == (3, 4)
    assert stored_input_table(tmp_path, 5, 4) is None
    (tmp_path / "model.safetensors").write_bytes(b"\xff" * 64)  # not a safetensors file
    assert stored_input_table(tmp_path, 3, 4) is None


def test_sketch_packs_the_sign_of_every_dimension_word_major():
    from wiki_sim.dense import sketch

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((5, 70)).astype(np.float32)  # 70 dimensions: a second, padded word
    bits = sketch(vectors, chunk=2)
    assert bits.dtype == np.uint64 and bits.shape == (2, 5)
    unpacked = np.unpackbits(np.ascontiguousarray(bits.T).view(np.uint8), axis=1)
    assert (unpacked[:, :70] == (vectors > 0)).all() and not unpacked[:, 70:].any()


def test_candidates_are_every_page_up_to_the_distance_that_admits_k():
    from wiki_sim.dense import candidates, sketch

    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((400, 128)).astype(np.float32)
    query = vectors[7] + 0.3 * rng.standard_normal(128).astype(np.float32)
    bits, query_bits = sketch(vectors), sketch(query[None])
    distance = np.array([int(np.sum((v > 0) != (query > 0))) for v in vectors])
    chosen = candidates(bits, query_bits, 25)
    assert len(chosen) >= 25 and 7 in chosen
    threshold = distance[chosen].max()
    assert sorted(chosen.tolist()) == np.flatnonzero(distance <= threshold).tolist()
    assert (distance <= threshold).sum() - (distance == threshold).sum() < 25  # the smallest such distance
    assert len(candidates(bits, query_bits, 10_000)) == 400


def test_a_large_index_scores_the_sign_bit_candidates_exactly(built, monkeypatch):
    from wiki_sim import dense

    wiki, _ = built
    with WikiSim(wiki, retriever="dense") as sim:
        index = sim.dense
        exact = index.search("capital of Austria on the river", 8)
        monkeypatch.setattr(dense, "EXACT_PAGES", 0)
        monkeypatch.setattr(dense, "SKETCH_CANDIDATES", len(PAGES))  # every page a candidate: the exact ranking
        assert index.search("capital of Austria on the river", 3) == exact[:3]
        monkeypatch.setattr(dense, "SKETCH_CANDIDATES", 2)  # fewer: exact cosines of the candidates, best first
        approx = index.search("capital of Austria on the river", 1)
        scores = dict(exact)
        assert len(approx) == 1 and approx[0][1] == pytest.approx(scores[approx[0][0]], abs=1e-6)


def test_missing_or_altered_sign_bits_and_an_older_format_are_refused(built, tmp_path: Path):
    wiki = _copy(built, tmp_path)
    bits = wiki / VECTORS_DIR / "bits.npy"
    meta_file = wiki / VECTORS_DIR / "meta.json"
    meta = json.loads(meta_file.read_text())
    saved = bits.read_bytes()
    bits.write_bytes(saved[:-1] + bytes([saved[-1] ^ 1]))
    _refused(wiki, "bits.npy does not match the size and sha256")
    bits.unlink()
    _refused(wiki, "bits.npy is missing")
    bits.write_bytes(saved)
    meta_file.write_text(json.dumps({**meta, "format": 1}))  # made before the sign bits: embed again
    _refused(wiki, "is not format 2")
