"""Retrieval: BM25, dense and hybrid retrievers of the simulator, and SQLite FTS5, side by side.

Query families, each query answered by one page title:

- ``description``: a page's unique short description with the title's words removed
  (:func:`benchmarks.search.description_queries`): a page described, not named;
- ``lead``: a page's first sentence with its name masked (:func:`envs.derived_tasks.masked_first_sentence`,
  the ``___`` dropped): text the page itself holds;
- ``bridge``: HotpotQA-style multi-hop questions from the link graph, "Which <B's description>
  does the <A's description> mention?" for a page A linking to B (:func:`bridge_queries`);
  the evidence is A and B;
- ``clue``: per entity of a synthesized research task (``--research-tasks``, ``websailor synth``'s
  default mode), the words its question says of it: its type, dates, numbers and its
  neighbours' types (:func:`research_queries`);
- ``research``: the whole question of each research task, answered by the task's answer; the
  evidence is every entity's page (BrowseComp-Plus's evidence recall).

The description, lead and bridge answers are held-out pages (:func:`wiki_sim.contrast.held_out`:
10% of the pages, by a hash of the title), which ``--tune contrastive`` never trains on; the
research tasks' entities are any pages. ``evidence@100`` is the share of a query's evidence
pages in the top 100 (the answer alone where a family names no other). The scripted heuristic
agent then plays ``--episodes`` held-out lookups of each kind and the research tasks through
``gym.make("websailor/WikiSim-v0", retriever=...)`` with each retriever.

``--pad N`` rebuilds the simulator from JSONL (its pages' titles and texts: no aliases, no short
descriptions) with N pages recombined from its sentences after them (the scale benchmark's
pages: ``Base (word word)`` titles, each page's first sentence one of its base page's), times
the BM25 build and each dense index (``websailor wiki embed``) from outside (seconds, peak PSS),
and searches that; the queries stay the real pages'.

Systems: ``bm25`` (the simulator's default search), ``dense-<variant>`` and
``hybrid-<variant>`` (:mod:`wiki_sim.dense`, one per embedding variant: ``input``, the
input-embedding table of SmolLM2-135M; ``static``, WordLlama's table from its PyPI wheel
(:mod:`wiki_sim.static_model`); ``hidden-L<n>``, layer n's hidden state; ``-d<dim>``,
the dimensions PCA keeps, else ``--dim``; ``-contrastive``, the table then tuned on the
simulator's pairs, :mod:`wiki_sim.contrast`, with its default settings and ``--tune-seed``), and
``fts5`` (stdlib SQLite FTS5, Porter stems, stopwords dropped, the query's words OR-ed;
:func:`benchmarks.search.build_fts5`). Recall@1 and @10 and the latency (p50/p99, one
thread, caches off) are of a k=10 search, the search tool's depth; recall@100 of a k=100
search; the systems take turns query by query. ``--bm25-postings`` adds ``bm25-postings``, the
same simulator without its score table (:mod:`wiki_sim.score_table`): term scores from Whoosh's
postings, cached per term, as in a build made without the table. ``--dense-weights`` adds, per dense variant and
weight, ``fused-<variant>@<weight>``: the hybrid's ranking (BM25's and the dense index's top 30
fused as :meth:`wiki_sim.sim.WikiSim._hybrid` fuses them) with that dense weight, recall only
being comparable (no snippets are made), to choose :data:`wiki_sim.dense.DENSE_WEIGHT`. The simulator is copied to a temporary folder and the dense
indexes built there; the models' token vectors are cached in
``<cache>/embeddings/`` (the ``hidden`` recipe runs the model once per token).

    python -m benchmarks.retrieval --wiki data/wiki --n 300 --seed 1 [--pad 90000]
"""

from __future__ import annotations

import argparse
import contextlib
from collections import Counter
import json
import os
import random
import re
import shutil
import sys
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
from wiki_sim.score_table import SCORES_DIR
from wiki_sim.static_model import DEFAULT_STATIC_MODEL
from wiki_sim.sentences import sentence_spans

FAMILIES = ("description", "lead", "bridge", "clue", "research")
Query = tuple  # (query, answer title) or (query, answer title, evidence titles)


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


VARIANT = re.compile(r"(?P<recipe>input|hidden|static)(?:-L(?P<layer>\d+))?(?:-d(?P<dim>\d+))?(?P<tune>-contrastive)?")


def _names(title: str, text: str) -> bool:
    """Whether ``text`` holds a word of ``title`` (4+ letters)."""
    words = {w.lower() for w in re.findall(r"\w+", text)}
    return any(w.lower() in words for w in re.findall(r"\w{4,}", title))


def bridge_queries(wiki: Path, n: int, seed: int) -> list[Query]:
    """HotpotQA-style bridge questions built from the link graph: "Which <B's description> does the
    <A's description> mention?" for a page A that links to B (both described, neither named), answered
    by B; the evidence is A and B. B is a held-out page."""
    described = {page: text for text, page in description_queries(wiki, 10 ** 9, seed)}
    out: list[Query] = []
    with WikiSim(wiki, search_processes=0) as sim:
        for b in sorted(described):
            if not held_out(b):
                continue
            sources = sorted(a for a in {link["source"] for link in sim.links(b, "in")} & described.keys()
                             if a != b and not _names(b, described[a]) and not _names(a, described[b]))
            if sources:
                a = random.Random(f"bridge-{seed}-{b}").choice(sources)
                out.append((f"Which {described[b]} does the {described[a]} mention?", b, (a, b)))
    random.Random(f"bridge-{seed}").shuffle(out)
    return out[:n]


def research_tasks(wiki: Path, n: int, seed: int, work: Path) -> list[dict[str, Any]]:
    """``n`` research tasks synthesized by ``websailor synth`` (its default research mode), with their graphs."""
    from sailorfog.cli import SynthConfig, run_synth

    out = work / "research.jsonl"
    with contextlib.redirect_stdout(sys.stderr):  # its summary line is not this benchmark's output
        run_synth(SynthConfig(wiki=str(wiki), out=str(out), n=n, seed=seed, workers=1, progress=False,
                              heuristic=False))
    return [json.loads(line) for line in out.open(encoding="utf-8")]


def research_queries(tasks: list[dict[str, Any]]) -> dict[str, list[Query]]:
    """Two families from synthesized research tasks:

    - ``clue``: one query per entity of a task's graph, the words its question says of it (its type,
      its dates and numbers, its neighbours' types), answered by the entity's page;
    - ``research``: the whole question, answered by the task's answer; the evidence is every entity's
      page (BrowseComp-Plus's evidence recall)."""
    clue: list[Query] = []
    research: list[Query] = []
    for t in tasks:
        nodes = {node["label"]: node["title"] for node in t["subgraph"]["nodes"]}
        research.append((t["question"], t["subgraph"].get("target") or t["answer"], tuple(nodes.values())))
        types = {c["subject"]: c["value"] for c in t["clues"] if c["kind"] == "type"}
        for label, title in nodes.items():
            words = [types.get(label, "")]
            words += [c["value"] for c in t["clues"] if c["subject"] == label and c["kind"] in ("date", "number")]
            words += [types.get(c["object"] if c["subject"] == label else c["subject"], "") for c in t["clues"]
                      if c["kind"] == "relation" and label in (c["subject"], c["object"])]
            clue.append((" ".join(w for w in words if w), title))
    return {"clue": clue, "research": research}


def lookup_tasks(wiki: Path, n: int, seed: int) -> list[tuple[str, dict[str, Any]]]:
    """``n`` derived title lookups of each kind (:func:`envs.derived_tasks.derive_tasks`) on held-out pages."""
    from envs.derived_tasks import derive_tasks

    out: list[tuple[str, dict[str, Any]]] = []
    for kind in ("description", "lead"):
        tasks = [t for t in derive_tasks(wiki, 10 ** 9, seed=seed, kind=kind) if held_out(t.answer)][:n]
        out += [(f"lookup-{kind}", {"id": t.id, "question": t.question, "answer": t.answer}) for t in tasks]
    return out


def heuristic_success(sims: dict[str, tuple[Path, str]],
                      tasks: list[tuple[str, dict[str, Any]]]) -> dict[str, dict[str, float]]:
    """The scripted heuristic agent's success through ``gym.make`` with each retriever, per task kind."""
    import gymnasium as gym

    import envs  # noqa: F401
    from envs.baselines import HeuristicAgent
    from envs.episode import run_episode

    out: dict[str, dict[str, float]] = {}
    for name, (wiki, retriever) in sims.items():
        env = gym.make("websailor/WikiSim-v0", wiki_dir=str(wiki), tasks=[task for _, task in tasks],
                       retriever=retriever, tools=["search", "visit"], share_sim=False)
        solved: dict[str, list[bool]] = {}
        try:
            for kind, task in tasks:
                episode = run_episode(env, HeuristicAgent(), options={"task": task})
                solved.setdefault(kind, []).append(bool(episode.is_correct))
        finally:
            env.close()
        out[name] = {kind: round(sum(v) / len(v), 3) for kind, v in solved.items()}
    return out


def padded_build(wiki: Path, pad: int, seed: int, work: Path) -> tuple[Path, dict[str, Any]]:
    """Rebuild ``wiki``'s pages from JSONL (title and text) with ``pad`` pages recombined from its
    sentences (:func:`benchmarks._scale_corpus.write_corpus`) after them, none opening with a real
    page's first sentence (so that a first-sentence lookup keeps one answer); return the simulator
    and the build's time and peak memory (``websailor wiki build --source jsonl``, measured from
    outside)."""
    from benchmarks._scale_corpus import load_pool, write_corpus
    from benchmarks.scale import timed_build

    corpus = work / "corpus.jsonl"
    extra = work / "recombined.jsonl"
    docs = store_docs(wiki)
    if pad:  # twice as many drawn: a page that opens with a real page's first sentence is left out
        write_corpus(load_pool([wiki / "store.sqlite"]), 2 * pad, extra, queries=0, seed=seed)
    leads: dict[str, list[str]] = {}  # real first sentences by their first 12 characters
    for _, text in docs:
        for start, end in sentence_spans(text)[:1]:
            lead = text[start:end].strip()
            leads.setdefault(lead[:12], []).append(lead)
    written = 0
    with corpus.open("w", encoding="utf-8") as fh:
        for title, text in docs:
            fh.write(json.dumps({"title": title, "text": text}, ensure_ascii=False) + "\n")
        if pad:
            with extra.open(encoding="utf-8") as recombined:
                for line in recombined:
                    text = json.loads(line)["text"]
                    if written < pad and not any(text.startswith(lead) for lead in leads.get(text[:12], ())):
                        fh.write(line)
                        written += 1
            extra.unlink()
    if written < pad:
        raise SystemExit(f"--pad {pad}: only {written} recombined pages open with no real page's first sentence")
    out = work / "padded" / "wiki"
    build = timed_build([sys.executable, "-m", "websailor.cli", "wiki", "build", "--source", "jsonl", str(corpus),
                         "--out", str(out), "--no-progress", "--workers", "2"], out.parent, out)
    corpus.unlink()
    return out, build


def embed_command(sim: Path, model: Path, variant: str, dim: int, tune_seed: int) -> list[str]:
    """The ``websailor wiki embed`` command line that writes a variant's dense index."""
    recipe, layer, dim, tuned = parse_variant(variant, dim)
    cmd = [sys.executable, "-m", "websailor.cli", "wiki", "embed", str(sim), "--model", embed_model(recipe, model),
           "--recipe", recipe, "--layer", str(layer), "--dim", str(dim), "--no-progress"]
    return cmd + (["--tune", "contrastive", "--seed", str(tune_seed)] if tuned else [])


def embed_model(recipe: str, model: Path) -> str:
    """The ``--model`` of a variant's embed: the static model's name for ``static``, else the LM folder."""
    return DEFAULT_STATIC_MODEL if recipe == "static" else str(model)


def parse_variant(variant: str, dim: int) -> tuple[str, int, int, bool]:
    """``input``, ``hidden-L8``, ``input-d576``, ``input-contrastive``, ``static`` -> (recipe, layer, dim, tuned)."""
    m = VARIANT.fullmatch(variant)
    if not m or (m["recipe"] == "hidden") != bool(m["layer"]):
        raise SystemExit("--variants: input, static or hidden-L<layer>, each optionally -d<dim> and then "
                         f"-contrastive; got {variant!r}")
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
    hits = {name: np.zeros(4) for name in systems}
    times: dict[str, list[float]] = {name: [] for name in systems}
    names = list(systems)
    for i, (query, answer, *evidence) in enumerate(queries):
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order:
            start = time.perf_counter()
            top = systems[name](query, 10)
            times[name].append(time.perf_counter() - start)
            deep = systems[name](query, 100)
            pages = evidence[0] if evidence else (answer,)
            hits[name] += (int(answer in top[:1]), int(answer in top), int(answer in deep),
                           sum(p in deep for p in pages) / len(pages))
    n = max(1, len(queries))
    return {name: {"recall@1": round(hits[name][0] / n, 3), "recall@10": round(hits[name][1] / n, 3),
                   "recall@100": round(hits[name][2] / n, 3), "evidence@100": round(hits[name][3] / n, 3),
                   "p50_ms": round(1000 * percentile(times[name], 0.5), 2),
                   "p99_ms": round(1000 * percentile(times[name], 0.99), 2)} for name in names}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.scale import timed_build

    wiki = Path(args.wiki)
    model = Path(args.model).expanduser()
    work = Path(tempfile.mkdtemp(prefix="retrieval-", dir=args.work_dir))
    sims: list[WikiSim] = []
    try:
        every = 10 ** 9
        families = {"description": held_out_queries(description_queries(wiki, every, args.seed), args.n),
                    "lead": held_out_queries(lead_queries(wiki, every, args.seed), args.n),
                    "bridge": bridge_queries(wiki, args.n, args.seed)}
        research = research_tasks(wiki, args.research_tasks, args.seed, work) if args.research_tasks else []
        families.update({k: v for k, v in research_queries(research).items() if v})
        played = lookup_tasks(wiki, args.episodes, args.seed) if args.episodes else []
        played += [("research", {k: t[k] for k in ("id", "question", "answer", "aliases") if k in t})
                   for t in research]
        builds: dict[str, dict[str, Any]] = {}
        searched = wiki
        if args.pad is not None:
            searched, builds["bm25"] = padded_build(wiki, args.pad, args.seed, work)
            print(f"built {searched}: {builds['bm25']}", file=sys.stderr, flush=True)
        agent_sims = {"bm25": (searched, "bm25")}
        fts5 = build_fts5(store_docs(searched), work, stopwords=True)
        systems: dict[str, Callable[[str, int], list[str]]] = {}

        def simulator(sim: WikiSim) -> Callable[[str, int], list[str]]:
            sims.append(sim)
            return lambda q, k: [h.title for h in sim.search([q], k=k)[0]]

        systems["bm25"] = simulator(WikiSim(searched, search_processes=0, cache_size=0))
        if args.bm25_postings:  # the same build without its score table: Whoosh's postings, cached per term
            plain = work / "wiki-postings"
            shutil.copytree(searched, plain, ignore=shutil.ignore_patterns(SCORES_DIR, "synth_index"),
                            copy_function=os.link if args.pad is not None else shutil.copy2)
            systems["bm25-postings"] = simulator(WikiSim(plain, search_processes=0, cache_size=0))
        if args.pad is not None:
            info = json.loads((searched / "build.json").read_text(encoding="utf-8"))
            builds["bm25"]["score_table"] = info["index"].get("score_table")
        embed_s: dict[str, float] = {}
        tunes: dict[str, Any] = {}
        for variant in args.variants:
            copy = work / f"wiki-{variant}"
            recipe, layer, dim, tuned = parse_variant(variant, args.dim)
            if args.pad is not None:  # the padded build is this run's own: share its files
                shutil.copytree(searched, copy, copy_function=os.link)
                builds[variant] = timed_build(embed_command(copy, model, variant, args.dim, args.tune_seed),
                                              work / f"embed-{variant}", copy / "vectors")
                print(f"embedded {variant}: {builds[variant]}", file=sys.stderr, flush=True)
                meta = json.loads((copy / "vectors" / "meta.json").read_text(encoding="utf-8"))
                embed_s[variant] = builds[variant]["build_s"]
            else:
                shutil.copytree(wiki, copy, ignore=shutil.ignore_patterns("synth_index"))
                vectors = token_vectors(model, recipe, layer) if recipe != "static" else None
                started = time.perf_counter()
                meta = build_vectors(copy, embed_model(recipe, model), recipe=recipe, layer=layer, dim=dim, token_vectors=vectors,
                                     tune=TuneConfig(seed=args.tune_seed) if tuned else None, progress=tuned)
                embed_s[variant] = round(time.perf_counter() - started, 1)
            if meta["tune"]:
                tunes[variant] = meta["tune"]
            for mode in ("dense", "hybrid"):
                systems[f"{mode}-{variant}"] = simulator(WikiSim(copy, retriever=mode, search_processes=0,
                                                                 cache_size=0))
                agent_sims[f"{mode}-{variant}"] = (copy, mode)
            for weight in args.dense_weights:
                systems[f"fused-{variant}@{weight:g}"] = fused(sims[-1], weight)
        systems["fts5"] = lambda q, k: [t for t, _ in fts5(q, k)]
        results = {family: measure(systems, queries) for family, queries in families.items()}
        ratios = {variant: {family: round(rows[f"hybrid-{variant}"]["p50_ms"] / max(rows["bm25"]["p50_ms"], 1e-9), 2)
                            for family, rows in results.items()} for variant in args.variants}
        agent = heuristic_success(agent_sims, played) if played else {}
        return {"benchmark": "retrieval", "wiki": str(wiki), "pages": sims[0].store.count(),
                "pad": args.pad, "builds": builds,
                "queries": {f: len(q) for f, q in families.items()}, "seed": args.seed,
                "query_pages": f"description, lead, bridge answers: held out of contrastive tuning ({SPLIT_RULE}); "
                               "clue, research: any page",
                "dim": args.dim, "model": model.name, "page_embed_s": embed_s, "tune": tunes, "results": results,
                "hybrid_p50_over_bm25": ratios,
                "heuristic": agent, "episodes": dict(Counter(kind for kind, _ in played)),
                "note": "latency on a shared 2-core machine: noisy; compare ratios within one run"}
    finally:
        for sim in sims:
            sim.close()
        shutil.rmtree(work, ignore_errors=True)


def print_table(r: dict[str, Any]) -> None:
    padded = f" rebuilt with {r['pad']} recombined pages" if r["pad"] is not None else ""
    print(f"retrieval on {r['wiki']}{padded} ({r['pages']} pages), queries {r['queries']} (seed {r['seed']}), "
          f"dense dim {r['dim']}")
    for name, b in r["builds"].items():
        print(f"  build {name}: {b['build_s']} s, peak {b['peak_pss_mb']} MB (PSS), {b['final_mb']} MB on disk")
    for family, rows in r["results"].items():
        print(f"\n{family}:")
        print(f"{'system':<28}{'R@1':>7}{'R@10':>7}{'R@100':>7}{'E@100':>7}{'p50 ms':>9}{'p99 ms':>9}")
        for name, m in rows.items():
            print(f"{name:<28}{m['recall@1']:>7.3f}{m['recall@10']:>7.3f}{m['recall@100']:>7.3f}"
                  f"{m['evidence@100']:>7.3f}{m['p50_ms']:>9.2f}{m['p99_ms']:>9.2f}")
    if r["hybrid_p50_over_bm25"]:
        print("\nhybrid p50 / bm25 p50: " + "; ".join(
            f"{variant}: " + ", ".join(f"{family} {ratio:.2f}x" for family, ratio in by_family.items())
            for variant, by_family in r["hybrid_p50_over_bm25"].items()))
    if r["heuristic"]:
        print(f"\nheuristic agent's success through gym.make ({r['episodes']} episodes):")
        for name, by_kind in r["heuristic"].items():
            print(f"{name:<28}" + "  ".join(f"{k} {v:.3f}" for k, v in by_kind.items()))


def main(argv: list[str] | None = None) -> int:
    from wiki_sim.cli import default_model_dir

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wiki", default="data/wiki")
    parser.add_argument("--n", type=int, default=300, help="queries per family")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=default_model_dir())
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--variants", nargs="*",
                        default=["input", "input-contrastive", "static", "static-contrastive"],
                        help="embedding variants: input, static or hidden-L<layer>, each optionally -d<dim> (else --dim) "
                             "and then -contrastive (tuned on the simulator's pairs)")
    parser.add_argument("--tune-seed", type=int, default=0, help="the -contrastive variants' training seed")
    parser.add_argument("--research-tasks", type=int, default=40,
                        help="research tasks to synthesize for the clue and research families (0: none)")
    parser.add_argument("--episodes", type=int, default=50,
                        help="held-out lookups of each kind the heuristic agent plays per retriever (0: none)")
    parser.add_argument("--pad", type=int, default=None,
                        help="rebuild the simulator from JSONL (titles and texts) with this many pages recombined "
                             "from its sentences after them (benchmarks/scale.py's pages; 90000: 100k in all), "
                             "timing the BM25 build and each dense index; the queries stay the real pages'")
    parser.add_argument("--work-dir", default=None, help="where the temporary simulators go (default: $TMPDIR)")
    parser.add_argument("--bm25-postings", action="store_true",
                        help="also search a copy of the simulator without its score table (bm25-postings: term "
                             "scores from Whoosh's postings, cached per term), to see what the table buys")
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
