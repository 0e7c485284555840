"""Writing a simulator's dense index (``websailor wiki embed``, ``wiki build --retriever dense|hybrid``):
the model's token vectors reduced and weighted (:mod:`wiki_sim.dense`), each page's title and lead
encoded, and ``<sim>/vectors/`` swapped in whole. Above :mod:`wiki_sim.sim`, which reads the index."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from wiki_sim.dense import (DEFAULT_DIM, DEFAULT_LAYER, DEFAULT_RECIPE, LEAD_CHARS, SIF_A, VECTOR_FILES,
                            VECTORS_DIR, VECTORS_FORMAT, Recipe, encode, encode_ids, load_tokenizer, model_vectors,
                            page_text, pca, sha256_file, sif_weights, sketch, token_ids)
from wiki_sim.contrast import TuneConfig, held_out, training_pairs, tune_record, tune_table
from wiki_sim.errors import WikiSimError
from wiki_sim.sim import WikiSim, build_fingerprint
from wiki_sim.static_model import static_record, static_table


def build_vectors(sim_dir: str | Path, model_dir: str | Path, *, recipe: Recipe = DEFAULT_RECIPE,
                  layer: int = DEFAULT_LAYER, dim: int = DEFAULT_DIM, progress: bool = False,
                  token_vectors: np.ndarray | None = None, tune: TuneConfig | None = None) -> dict[str, Any]:
    """Write ``<sim_dir>/vectors/`` for a built simulator (replacing one there); return its meta.

    ``token_vectors`` (V, H): the model's token vectors, when already computed (a benchmark
    comparing settings computes them once). ``tune``: train the table contrastively on the
    simulator's own pairs before the pages are encoded (:mod:`wiki_sim.contrast`)."""
    sim_dir = Path(sim_dir)
    if not isinstance(dim, int) or isinstance(dim, bool) or dim < 2:
        raise ValueError(f"dim must be an integer >= 2, got {dim!r}")
    started = time.perf_counter()
    if recipe == "static":  # ``model_dir`` names a static model (wiki_sim.static_model)
        raw, tokenizer_file = static_table(str(model_dir))
        model_record = static_record(str(model_dir))
    else:
        model_dir = Path(model_dir).expanduser()
        if not (model_dir / "config.json").is_file() or not (model_dir / "tokenizer.json").is_file():
            raise WikiSimError(f"{model_dir} is not a model folder (config.json and tokenizer.json needed); "
                               "the default one (SmolLM2-135M, converted) is made by `websailor model fetch`")
        tokenizer_file = model_dir / "tokenizer.json"
        raw = token_vectors if token_vectors is not None else model_vectors(model_dir, recipe, layer,
                                                                            progress=progress)
        record_file = model_dir / "websailor-model.json"
        model_record = {"dir": str(model_dir), "name": model_dir.name,
                        "record": json.loads(record_file.read_text()) if record_file.is_file() else None}
    with WikiSim(sim_dir, search_processes=0) as sim:
        titles = list(sim.index.titles)
        leads = dict(sim.iter_leads())
        fingerprint = build_fingerprint(sim.build_info)
        descriptions = [(page, value) for page, _, value, _, _ in sim.iter_facts("description")] if tune else []
    texts = [page_text(t, leads.get(t, "")) for t in titles]
    tokenizer = load_tokenizer(tokenizer_file)
    distilled = time.perf_counter()
    static = recipe == "static"
    # a static model's table is used as trained (sum-pooled; SIF weights measured no better on it), and
    # reduced only when fewer dimensions are asked for
    reduced = raw if static and dim >= raw.shape[1] else pca(raw, dim)
    counts = np.zeros(len(reduced), dtype=np.float64)
    page_ids: list[np.ndarray] = []  # kept for tuning only; else the pages are tokenized again below
    for ids in (token_ids(tokenizer, texts, len(reduced)) if not static or tune is not None else ()):
        np.add.at(counts, ids, 1)
        if tune is not None:
            page_ids.append(ids)
    table = reduced if static else reduced * sif_weights(counts)[:, None]
    tuned = None
    if tune is not None:
        tune_started = time.perf_counter()
        queries, pair_pages, pair_counts = training_pairs(titles, leads, descriptions)
        table, losses = tune_table(table, list(token_ids(tokenizer, queries, len(table))), page_ids, pair_pages, tune,
                                   progress=progress)
        tuned = tune_record(tune, pair_counts, losses, len(titles), sum(map(held_out, titles)),
                            time.perf_counter() - tune_started)
    del leads
    pages = encode_ids(table, page_ids, len(texts)) if page_ids else encode(tokenizer, table, texts)
    del page_ids
    prefix = f".{sim_dir.name}.{VECTORS_DIR}"  # beside the simulator: a killed embed leaves it untouched
    tmp = Path(tempfile.mkdtemp(prefix=f"{prefix}.building-{os.getpid()}-", dir=sim_dir.parent))
    try:
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the simulator is not
        np.save(tmp / "tokens.npy", table.astype(np.float32), allow_pickle=False)
        np.save(tmp / "pages.npy", pages, allow_pickle=False)
        np.save(tmp / "bits.npy", sketch(pages), allow_pickle=False)
        shutil.copyfile(tokenizer_file, tmp / "tokenizer.json")
        meta = {
            "format": VECTORS_FORMAT,
            "build_fingerprint": fingerprint,
            "pages": len(titles),
            "dim": int(table.shape[1]),
            "recipe": recipe,
            "layer": layer if recipe == "hidden" else None,
            "sif_a": None if static else SIF_A,
            "text": f"title + lead (first {LEAD_CHARS} characters)",
            "tune": tuned,
            "model": model_record,
            "files": {name: {"bytes": (tmp / name).stat().st_size, "sha256": sha256_file(tmp / name)}
                      for name in VECTOR_FILES},
            "durations_s": {"model": round(distilled - started, 3),
                            "total": round(time.perf_counter() - started, 3)},
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        final = sim_dir / VECTORS_DIR
        old = None
        if final.exists():
            old = Path(tempfile.mkdtemp(prefix=f"{prefix}.old-{os.getpid()}-", dir=sim_dir.parent))
            os.rmdir(old)
            os.rename(final, old)
        os.rename(tmp, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return meta
