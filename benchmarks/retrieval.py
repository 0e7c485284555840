"""Retrieval: BM25, dense and hybrid retrievers of the simulator, and SQLite FTS5, side by side.

Queries come from the corpus, each answered by one page title:

- ``description``: a page's unique short description with the title's words removed
  (:func:`benchmarks.search.description_queries`): a page described, not named;
- ``lead``: a page's first sentence with its name masked (:func:`envs.derived_tasks.masked_first_sentence`,
  the ``___`` dropped): text the page itself holds.

Queries come from held-out pages only (:func:`wiki_sim.contrast.held_out`: 10% of the pages,
by a hash of the title), the pages ``--tune contrastive`` never trains on.

Systems: ``bm25`` (the simulator's default search), ``dense-<variant>`` and
``hybrid-<variant>`` (:mod:`wiki_sim.dense`, one per embedding variant: ``input``, the
input-embedding table of SmolLM2-135M; ``hidden-L<n>``, layer n's hidden state; ``-d<dim>``,
the dimensions PCA keeps, else ``--dim``; ``-contrastive``, the table then tuned on the
simulator's pairs, :mod:`wiki_sim.contrast`, with its default settings and ``--tune-seed``), and
``fts5`` (stdlib SQLite FTS5, Porter stems, stopwords dropped, the query's words OR-ed;
:func:`benchmarks.search.build_fts5`). Recall@1 and @10 and the latency (p50/p99, one
thread, caches off) are of a k=10 search, the search tool's depth; recall@100 of a k=100
search; the systems take turns query by query. ``--dense-weights`` adds, per dense variant and
weight, ``fused-<variant>@<weight>``: the hybrid's ranking (BM25's and the dense index's top 30
fused as :meth:`wiki_sim.sim.WikiSim._hybrid` fuses them) with that dense weight, recall only
being comparable (no snippets are made), to choose :data:`wiki_sim.dense.DENSE_WEIGHT`. The simulator is copied to a temporary folder and the dense
indexes built there; the models' token vectors are cached in
``<cache>/embeddings/`` (the ``hidden`` recipe runs the model once per token).

    python -m benchmarks.retrieval --wiki data/wiki --n 300 --seed 1
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from benchmarks.search import build_fts5, description_queries, percentile, store_docs
from envs.derived_tasks import masked_first_sentence
from wiki_sim import WikiSim
from wiki_sim.common.cache import cache_dir
from wiki_sim.contrast import SPLIT_RULE, TuneConfig, held_out
from wiki_sim.dense import model_vectors, rrf
from wiki_sim.embed import build_vectors

FAMILIES = ("description", "lead")
Query = tuple[str, str]


def lead_queries(wiki: Path, n: int, seed: int) -> list[Query]:
    """First sentences with the page's name masked (and the mask dropped)."""
    with WikiSim(wiki, search_processes=0) as sim:
        leads = list(sim.iter_leads())
    out = []
    for title, lead in leads:
        masked = masked_first_sentence(title, lead)
        if masked:
            out.append((" ".join(masked.replace("___", " ").split()), title))
    random.Random(f"lead-{seed}").shuffle(out)
    return out[:n]


def held_out_queries(queries: list[Query], n: int) -> list[Query]:
    """The first ``n`` queries whose page is held out of contrastive tuning."""
    return [q for q in queries if held_out(q[1])][:n]


VARIANT = re.compile(r"(?P<recipe>input|hidden)(?:-L(?P<layer>\d+))?(?:-d(?P<dim>\d+))?(?P<tune>-contrastive)?")


def parse_variant(variant: str, dim: int) -> tuple[str, int, int, bool]:
    """``input``, ``hidden-L8``, ``input-d576``, ``input-contrastive`` -> (recipe, layer, dim, tuned)."""
    m = VARIANT.fullmatch(variant)
    if not m or (m["recipe"] == "hidden") != bool(m["layer"]):
        raise SystemExit("--variants: input or hidden-L<layer>, each optionally -d<dim> and then -contrastive; "
                         f"got {variant!r}")
    return m["recipe"], int(m["layer"] or 1), int(m["dim"] or dim), bool(m["tune"])


def fused(sim: WikiSim, weight: float) -> Callable[[str, int], list[str]]:
    """The hybrid's ranking with another dense weight (titles only, no snippets)."""
    from wiki_sim.sim import HYBRID_DEPTH

    def search(query: str, k: int) -> list[str]:
        depth = max(k, HYBRID_DEPTH)
        lexical = [h.title for h in sim.searches.search(query, depth)]
        dense = [sim.index.titles[d] for d, _ in sim.dense.search(query, depth)]
        return rrf([lexical, dense], weights=(1.0, weight))[:k]
    return search


def token_vectors(model: Path, recipe: str, layer: int) -> np.ndarray:
    """The model's raw token vectors for a recipe, cached on disk (plain .npy)."""
    name = "input" if recipe == "input" else f"hidden-L{layer}"
    path = cache_dir() / "embeddings" / f"{model.name}-{name}.npy"
    if path.is_file():
        return np.load(path, allow_pickle=False)
    vectors = model_vectors(model, recipe, layer, progress=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors, allow_pickle=False)
    return vectors


def measure(systems: dict[str, Callable[[str, int], list[str]]], queries: list[Query]) -> dict[str, Any]:
    """Recall@1 and @10 of the k=10 search (timed), recall@100 of a k=100 search, the systems
    taking turns per query."""
    hits = {name: np.zeros(3) for name in systems}
    times: dict[str, list[float]] = {name: [] for name in systems}
    names = list(systems)
    for i, (query, answer) in enumerate(queries):
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order:
            start = time.perf_counter()
            top = systems[name](query, 10)
            times[name].append(time.perf_counter() - start)
            hits[name] += (int(answer in top[:1]), int(answer in top), int(answer in systems[name](query, 100)))
    n = max(1, len(queries))
    return {name: {"recall@1": round(hits[name][0] / n, 3), "recall@10": round(hits[name][1] / n, 3),
                   "recall@100": round(hits[name][2] / n, 3),
                   "p50_ms": round(1000 * percentile(times[name], 0.5), 2),
                   "p99_ms": round(1000 * percentile(times[name], 0.99), 2)} for name in names}


def run(args: argparse.Namespace) -> dict[str, Any]:
    wiki = Path(args.wiki)
    model = Path(args.model).expanduser()
    work = Path(tempfile.mkdtemp(prefix="retrieval-"))
    sims: list[WikiSim] = []
    try:
        every = 10 ** 9
        families = {"description": held_out_queries(description_queries(wiki, every, args.seed), args.n),
                    "lead": held_out_queries(lead_queries(wiki, every, args.seed), args.n)}
        fts5 = build_fts5(store_docs(wiki), work, stopwords=True)
        systems: dict[str, Callable[[str, int], list[str]]] = {}

        def simulator(sim: WikiSim) -> Callable[[str, int], list[str]]:
            sims.append(sim)
            return lambda q, k: [h.title for h in sim.search([q], k=k)[0]]

        systems["bm25"] = simulator(WikiSim(wiki, search_processes=0, cache_size=0))
        embed_s: dict[str, float] = {}
        tunes: dict[str, Any] = {}
        for variant in args.variants:
            copy = work / f"wiki-{variant}"
            shutil.copytree(wiki, copy, ignore=shutil.ignore_patterns("synth_index"))
            recipe, layer, dim, tuned = parse_variant(variant, args.dim)
            vectors = token_vectors(model, recipe, layer)
            started = time.perf_counter()
            meta = build_vectors(copy, model, recipe=recipe, layer=layer, dim=dim, token_vectors=vectors,
                                 tune=TuneConfig(seed=args.tune_seed) if tuned else None, progress=tuned)
            embed_s[variant] = round(time.perf_counter() - started, 1)
            if meta["tune"]:
                tunes[variant] = meta["tune"]
            for mode in ("dense", "hybrid"):
                systems[f"{mode}-{variant}"] = simulator(WikiSim(copy, retriever=mode, search_processes=0,
                                                                 cache_size=0))
            for weight in args.dense_weights:
                systems[f"fused-{variant}@{weight:g}"] = fused(sims[-1], weight)
        systems["fts5"] = lambda q, k: [t for t, _ in fts5(q, k)]
        results = {family: measure(systems, queries) for family, queries in families.items()}
        return {"benchmark": "retrieval", "wiki": str(wiki), "pages": sims[0].store.count(),
                "queries": {f: len(q) for f, q in families.items()}, "seed": args.seed,
                "query_pages": f"held out of contrastive tuning ({SPLIT_RULE})", "dim": args.dim,
                "model": model.name, "page_embed_s": embed_s, "tune": tunes, "results": results,
                "note": "latency on a shared 2-core machine: noisy; compare ratios within one run"}
    finally:
        for sim in sims:
            sim.close()
        shutil.rmtree(work, ignore_errors=True)


def print_table(r: dict[str, Any]) -> None:
    print(f"retrieval on {r['wiki']} ({r['pages']} pages), queries {r['queries']} (seed {r['seed']}) of "
          f"held-out pages, dense dim {r['dim']}")
    for family, rows in r["results"].items():
        print(f"\n{family}:")
        print(f"{'system':<28}{'R@1':>7}{'R@10':>7}{'R@100':>7}{'p50 ms':>9}{'p99 ms':>9}")
        for name, m in rows.items():
            print(f"{name:<28}{m['recall@1']:>7.3f}{m['recall@10']:>7.3f}{m['recall@100']:>7.3f}"
                  f"{m['p50_ms']:>9.2f}{m['p99_ms']:>9.2f}")


def main(argv: list[str] | None = None) -> int:
    from wiki_sim.cli import default_model_dir

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wiki", default="data/wiki")
    parser.add_argument("--n", type=int, default=300, help="queries per family")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=default_model_dir())
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--variants", nargs="+", default=["input", "input-contrastive"],
                        help="embedding variants: input or hidden-L<layer>, each optionally -d<dim> (else --dim) "
                             "and then -contrastive (tuned on the simulator's pairs)")
    parser.add_argument("--tune-seed", type=int, default=0, help="the -contrastive variants' training seed")
    parser.add_argument("--dense-weights", type=float, nargs="*", default=[],
                        help="also rank each variant's hybrid with these dense weights (fused-<variant>@<w>)")
    args = parser.parse_args(argv)
    for v in args.variants:
        parse_variant(v, args.dim)
    result = run(args)
    print_table(result)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
