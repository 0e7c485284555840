"""Search: the simulator (Whoosh and tantivy engines) against SQLite FTS5, tantivy and bm25s,
on query families shaped like an agent's, side by side in one run.

The corpus (the embedded default unless ``--source/--path`` say otherwise) is built into the
simulator twice (the Whoosh index, the default, and ``--engine tantivy``) and, from the
simulator's store, into each other engine. Query families, built deterministically from
the corpus (``--seed``); each query's answer is one page:

- ``kw2``, ``kw3``, ``kw4``: 2, 3 or 4 consecutive content words (not stopwords, not words
  of the title) of a sentence of the page's body, as an agent types keywords;
- ``named``: the page's title and 1 or 2 content words of its body (an entity and an
  aspect of it, the commonest search an agent makes);
- ``description``: the page's short description, when no other page has the same one,
  without the title's words (a phrase that names the page without its title);
- ``question``: the questions the simulator derives (``envs.derived_tasks``: short
  description and masked first sentence, in question form);
- ``clue``: clue sentences as the synthesizer writes them (``sailorfog.clues`` over its
  entity graph: the quoted evidence clause or description, entities masked; the answer is
  the page the clue is read on). Left out, and the JSON says why, in a tree without the
  clue writer (issue 8).

Each engine returns its top 10 with a snippet; queries are interleaved engine by engine so
machine noise hits them alike. Measured per family: recall@10, MRR@10, p50/p99 latency
(snippets included). Then, for every engine side by side, the throughput of 8 threads
searching at once against one thread (no cache; engines interleaved, repeated, medians;
the load average of the machine reported with them), and, as a sanity line, a repeated
query served by the simulator's cache.

Engines:
- ``simulator``: ``wiki_sim.WikiSim`` on the Whoosh index (BM25F, title and proximity
  re-ranking, spelling retry), the default build;
- ``simulator-postings``: the same build with its score table removed
  (:mod:`wiki_sim.score_table`): term scores computed from Whoosh's postings on first use
  and cached per term, as in builds made without the table;
- ``simulator-tantivy``: the same ``WikiSim`` built with ``--engine tantivy``;
- ``fts5``: stdlib sqlite3 FTS5, ``porter unicode61`` tokenizer (Porter stems), the
  query's words OR-ed, ``bm25(title 1.5, body 1)``, ``snippet()``; ``fts5-stopwords``:
  the same with the simulator's stopwords dropped from the query (the best-configured
  baseline: same stopwords and stemming);
- ``tantivy``: plain tantivy, ``en_stem`` fields, title boost 1.5, OR query parser,
  ``SnippetGenerator``;
- ``bm25s``: title and body as one text, the same stopwords and Porter stemmer; the
  simulator's snippet function on its hits.

Targets (ratios in one run on the default corpus), per family: simulator recall@10 >= the
better FTS5's; simulator p50 <= 1.5x fts5-stopwords'; 8 threads >= 1.5x one thread's
throughput (median of the paired rounds; the machine's load average is reported beside it:
on a machine whose cores other jobs keep busy no engine gets a speed-up). Usage: ``python -m benchmarks.search [--source ...] [--path FILE]
[--queries 200] [--seed 0] [--engines ...]``; tantivy and bm25s: ``pip install
'websailor-gym[bench]'``. Prints a table, then one line of JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from wiki_sim import WikiSim
from wiki_sim.analysis import STOPWORDS, analyze
from wiki_sim.build import build
from wiki_sim.index import TITLE_BOOST
from wiki_sim.score_table import SCORES_DIR
from wiki_sim.snippets import best_snippet

ENGINES = ("simulator", "simulator-postings", "simulator-tantivy", "fts5", "fts5-stopwords", "tantivy", "bm25s")
FAMILIES = ("kw2", "kw3", "kw4", "named", "description", "question", "clue")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"\w+")

Search = Callable[[str, int], list[tuple[str, str]]]
Query = tuple[str, str]  # (query, answer title)


# --- query families ---------------------------------------------------------------------

def _content_words(sentence: str, title_words: set[str]) -> list[str]:
    return [w for w in _WORD.findall(sentence)
            if w.lower() not in STOPWORDS and w.lower() not in title_words and not w.isdigit()]


def keyword_queries(docs: list[tuple[str, str]], n_words: int, n: int, seed: int) -> list[Query]:
    """``n`` queries of ``n_words`` consecutive content words of one sentence of a page."""
    rng = random.Random(f"kw{n_words}-{seed}")
    order = list(range(len(docs)))
    rng.shuffle(order)
    queries = []
    for i in order:
        title, text = docs[i]
        title_words = {w.lower() for w in _WORD.findall(title)}
        sentences = [s for s in _SENTENCE.split(text.replace("\n", " ")) if not s.lstrip().startswith("#")]
        rng.shuffle(sentences)
        for sentence in sentences:
            words = _content_words(sentence, title_words)
            if len(words) >= n_words:
                start = rng.randrange(len(words) - n_words + 1)
                queries.append((" ".join(words[start:start + n_words]), title))
                break
        if len(queries) == n:
            break
    return queries


def named_queries(docs: list[tuple[str, str]], n: int, seed: int) -> list[Query]:
    """The page's title (its parenthetical dropped) and 1 or 2 content words of its body:
    a search for a named entity and an aspect of it."""
    rng = random.Random(f"named-{seed}")
    queries = []
    for keywords, title in keyword_queries(docs, 2, n, seed + 1000):
        name = re.sub(r"\s*\([^)]*\)$", "", title) or title
        words = keywords.split()[: rng.choice((1, 2))]
        queries.append((" ".join([name] + words), title))
    return queries


def description_queries(wiki: Path, n: int, seed: int) -> list[Query]:
    """Unique short descriptions without the title's words (at least 2 content words left)."""
    conn = sqlite3.connect(f"file:{wiki / 'store.sqlite'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT page, value FROM facts WHERE key = 'description' ORDER BY page").fetchall()
    finally:
        conn.close()
    by_value: dict[str, set[str]] = {}
    for page, value in rows:
        by_value.setdefault(" ".join(str(value).lower().split()), set()).add(page)
    candidates = []
    for page, value in rows:
        if len(by_value[" ".join(str(value).lower().split())]) != 1:
            continue
        title_words = {w.lower() for w in _WORD.findall(page)}
        words = [w for w in _WORD.findall(str(value)) if w.lower() not in title_words]
        if len(_content_words(" ".join(words), title_words)) >= 2:
            candidates.append((" ".join(words), page))
    random.Random(f"description-{seed}").shuffle(candidates)
    return candidates[:n]


def question_queries(wiki: Path, n: int, seed: int) -> list[Query]:
    from envs.derived_tasks import derive_tasks

    return [(t.question, t.answer) for t in derive_tasks(wiki, n, seed=seed, kind="mixed")]


def clue_queries(wiki: Path, n: int, seed: int) -> tuple[list[Query], str | None]:
    """Clue sentences as the synthesizer writes them, and the page each can be read on.

    The synthesizer (``sailorfog``) builds its entity graph over the simulator, samples
    subgraphs and writes clues; the quoted part of each clue (the evidence clause or
    description, every entity masked) is the query, the clue's evidence page its answer.
    Returns ``([], reason)`` when this tree has no clue writer or the corpus is too small for its graph."""
    try:
        from sailorfog.clues import build_clues
        from sailorfog.graph import GraphConfig, build_graph
        from sailorfog.sampling import sample_subgraphs
    except ImportError as exc:
        return [], f"no clue writer in this tree ({exc.name} is missing; issue 8, branch synth-tasks)"
    from sailorfog.graph import GraphError

    with WikiSim(wiki) as sim:
        try:
            G = build_graph(sim, GraphConfig(seed=seed))
        except GraphError as exc:  # a corpus too small for the synthesizer's entity graph (gensim-sample)
            return [], f"no entity graph on this corpus: {exc}"
        queries: dict[str, str] = {}
        for sub in sample_subgraphs(G, max(1, n // 2), seed=seed):
            cs = build_clues(G, sub.nodes, sub.edges, sorted(sub.nodes)[0])
            for clue in cs.clues + cs.pool:
                quoted = " ".join(re.findall(r"“([^”]+)”", clue.text))
                text = " ".join(re.sub(r"\{[A-Z]\}", " ", quoted).split())
                page = sim.resolve(clue.evidence.get("title", ""))
                if page and len(_content_words(text, set())) >= 3:
                    queries.setdefault(text, page)
    ordered = sorted(queries.items())
    random.Random(f"clue-{seed}").shuffle(ordered)
    return ordered[:n], None


def store_docs(wiki: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(f"file:{wiki / 'store.sqlite'}?mode=ro", uri=True)
    try:
        return [(t, x) for t, x in conn.execute("SELECT title, text FROM pages ORDER BY id")]
    finally:
        conn.close()


# --- baseline engines: build(docs, workdir) -> search(query, k) -> [(title, snippet)] ----

def build_fts5(docs: list[tuple[str, str]], workdir: Path, stopwords: bool = False) -> Search:
    path = workdir / "fts5.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(title, body, tokenize='porter unicode61')")
    if not db.execute("SELECT count(*) FROM docs").fetchone()[0]:
        db.executemany("INSERT INTO docs(title, body) VALUES (?, ?)", docs)
        db.commit()
    db.close()
    sql = (f"SELECT title, snippet(docs, 1, '', '', '...', 48) FROM docs WHERE docs MATCH ? "
           f"ORDER BY bm25(docs, {TITLE_BOOST}, 1.0) LIMIT ?")
    local = threading.local()  # a connection per thread: one shared connection serializes its users

    def search(query: str, k: int) -> list[tuple[str, str]]:
        words = [w for w in _WORD.findall(query) if not (stopwords and w.lower() in STOPWORDS)]
        if not words:
            return []
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        return conn.execute(sql, (" OR ".join(f'"{w}"' for w in words), k)).fetchall()

    return search


def build_tantivy(docs: list[tuple[str, str]], workdir: Path, threads: int) -> Search:
    import tantivy

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("title", stored=True, tokenizer_name="en_stem")
    sb.add_text_field("body", stored=True, tokenizer_name="en_stem")
    schema = sb.build()
    path = workdir / "tantivy"
    path.mkdir(exist_ok=True)
    index = tantivy.Index(schema, path=str(path))
    writer = index.writer(heap_size=256_000_000, num_threads=threads)
    for title, text in docs:
        writer.add_document(tantivy.Document(title=title, body=text))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()

    def search(query: str, k: int) -> list[tuple[str, str]]:
        q, _errors = index.parse_query_lenient(query, ["title", "body"], field_boosts={"title": TITLE_BOOST})
        generator = tantivy.SnippetGenerator.create(searcher, q, schema, "body")
        generator.set_max_num_chars(300)
        out = []
        for _score, address in searcher.search(q, k).hits:
            doc = searcher.doc(address)
            out.append((doc["title"][0], generator.snippet_from_doc(doc).fragment()))
        return out

    return search


def build_bm25s(docs: list[tuple[str, str]], workdir: Path) -> Search:
    import bm25s
    from whoosh.lang.porter import stem

    def stemmer(words: list[str]) -> list[str]:
        return [stem(w) for w in words]

    stop = sorted(STOPWORDS)
    corpus = [f"{title}\n{text}" for title, text in docs]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(corpus, stopwords=stop, stemmer=stemmer, show_progress=False), show_progress=False)

    def search(query: str, k: int) -> list[tuple[str, str]]:
        tokens = bm25s.tokenize([query], stopwords=stop, stemmer=stemmer, show_progress=False)
        if not tokens.vocab:
            return []
        ids, _scores = retriever.retrieve(tokens, k=min(k, len(docs)), show_progress=False, n_threads=1)
        weights = {t: 1.0 for t in analyze(query)}
        return [(docs[i][0], best_snippet(docs[i][1], weights)) for i in ids[0]]

    return search


# --- measurement ------------------------------------------------------------------------

def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def throughput(search: Callable[[str], Any], queries: list[str], threads: int) -> float:
    """Queries per second with ``threads`` threads sharing the queries."""
    chunks = [queries[i::threads] for i in range(threads)]
    barrier = threading.Barrier(threads + 1)

    def work(chunk: list[str]) -> None:
        barrier.wait()
        for q in chunk:
            search(q)

    workers = [threading.Thread(target=work, args=(c,)) for c in chunks]
    for w in workers:
        w.start()
    barrier.wait()
    t = time.perf_counter()
    for w in workers:
        w.join()
    return len(queries) / (time.perf_counter() - t)


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.threads < 2 or args.thread_repeats < 1 or not args.thread_seconds > 0:
        raise SystemExit(f"--threads must be >= 2, --thread-repeats >= 1 and --thread-seconds > 0; got "
                         f"{args.threads}, {args.thread_repeats}, {args.thread_seconds}")
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if set(engines) - set(ENGINES) or "simulator" not in engines or not {"fts5", "fts5-stopwords"} <= set(engines):
        raise SystemExit(f"--engines: choose from {', '.join(ENGINES)} (simulator, fts5 and fts5-stopwords "
                         f"required); got {args.engines}")
    for module, engine in (("tantivy", "tantivy"), ("tantivy", "simulator-tantivy"), ("bm25s", "bm25s")):
        if engine in engines:
            try:
                __import__(module)
            except ImportError:
                raise SystemExit(f"{engine} needs {module}: pip install 'websailor-gym[bench]' "
                                 f"(or leave it out with --engines)") from None
    workdir = Path(tempfile.mkdtemp(prefix="bench-search-"))
    try:
        return measure(args, engines, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _families(wiki: Path, docs: list[tuple[str, str]], n: int, seed: int,
              left_out: dict[str, str] | None = None) -> dict[str, list[Query]]:
    families = {f"kw{m}": keyword_queries(docs, m, n, seed) for m in (2, 3, 4)}
    families["named"] = named_queries(docs, n, seed)
    families["description"] = description_queries(wiki, n, seed)
    families["question"] = question_queries(wiki, n, seed)
    families["clue"], why = clue_queries(wiki, n, seed)
    if why and left_out is not None:
        left_out["clue"] = why
    return {name: qs for name, qs in families.items() if qs}


def measure_threads(searches: dict[str, Search], sims: dict[str, WikiSim], queries: list[str],
                    args: argparse.Namespace) -> tuple[dict[str, dict[str, Any]], dict[str, float]]:
    """Throughput of ``args.threads`` threads against one, for every engine, without caches.

    Each engine runs the same queries (a prefix of the families' shuffled mix, long enough
    for about ``args.thread_seconds`` of one thread, at least 200) with 1 and with
    ``args.threads`` threads. Engines and thread counts are interleaved within each of
    ``args.thread_repeats`` rounds and the medians kept: the machine is shared and its load
    drifts; the two runs of a round are back to back (in alternating order), and the
    median of the rounds' ratios (``speedup_paired_median``, the target) is the figure
    least sensitive to other jobs starting and stopping. First a warm-up with every thread count (the simulators' helper processes start
    on the first concurrent searches and warm their term caches: start-up is not a
    per-query cost). Returns the per-engine numbers and the 1-minute load average (min,
    median, max over the rounds)."""
    n = args.threads
    counts: dict[str, int] = {}
    for name, search in searches.items():
        qps = throughput(lambda q: search(q, args.k), queries[:200], 1)
        counts[name] = max(min(200, len(queries)), min(len(queries), round(qps * args.thread_seconds)))
        throughput(lambda q: search(q, args.k), queries[:counts[name]], n)
        sim = sims.get(name)
        if sim is not None:
            deadline = time.monotonic() + 120
            while sim.searches.helpers() < sim.searches.processes and time.monotonic() < deadline:
                time.sleep(0.2)
            throughput(lambda q: search(q, args.k), queries[:counts[name]], n)
    qps: dict[str, dict[int, list[float]]] = {name: {1: [], n: []} for name in searches}
    loads = []
    for round_ in range(args.thread_repeats):
        loads.append(os.getloadavg()[0])
        for name, search in searches.items():
            for count in ((1, n) if round_ % 2 == 0 else (n, 1)):  # ABBA: a linear drift cancels in pairs
                qps[name][count].append(throughput(lambda q: search(q, args.k), queries[:counts[name]], count))
    loads.append(os.getloadavg()[0])
    out: dict[str, dict[str, Any]] = {}
    for name, runs in qps.items():
        one, many = statistics.median(runs[1]), statistics.median(runs[n])
        paired = [b / a for a, b in zip(runs[1], runs[n])]
        out[name] = {"queries": counts[name], "qps_1": round(one, 1), f"qps_{n}": round(many, 1),
                     "speedup": round(many / one, 3), "speedup_paired_median": round(statistics.median(paired), 3),
                     "speedups": [round(x, 3) for x in paired]}
        if name in sims:
            out[name]["helper_processes"] = sims[name].searches.helpers()
    load = {"min": round(min(loads), 2), "median": round(statistics.median(loads), 2), "max": round(max(loads), 2),
            "cores": os.cpu_count() or 0}
    return out, load


def measure(args: argparse.Namespace, engines: list[str], workdir: Path) -> dict[str, Any]:
    wiki = workdir / "wiki"
    builds: dict[str, float] = {}
    t = time.perf_counter()
    build(args.source, args.path, wiki, workers=args.workers, progress=False)
    builds["simulator"] = time.perf_counter() - t
    sims = {"simulator": WikiSim(wiki, cache_size=0)}
    if "simulator-postings" in engines:  # the same build without its score table: Whoosh's postings, cached per term
        shutil.copytree(wiki, workdir / "wiki-postings", ignore=shutil.ignore_patterns(SCORES_DIR))
        sims["simulator-postings"] = WikiSim(workdir / "wiki-postings", cache_size=0)
    if "simulator-tantivy" in engines:
        t = time.perf_counter()
        build(args.source, args.path, workdir / "wiki-tantivy", workers=args.workers, progress=False,
              engine="tantivy")
        builds["simulator-tantivy"] = time.perf_counter() - t
        sims["simulator-tantivy"] = WikiSim(workdir / "wiki-tantivy", cache_size=0)
    docs = store_docs(wiki)
    left_out: dict[str, str] = {}
    families = _families(wiki, docs, args.queries, args.seed, left_out)

    searches: dict[str, Search] = {
        name: (lambda sim: lambda q, k: [(h.title, h.snippet) for h in sim.search([q], k)[0]])(sim)
        for name, sim in sims.items()}
    builders = {"fts5": lambda: build_fts5(docs, workdir),
                "fts5-stopwords": lambda: build_fts5(docs, workdir, stopwords=True),
                "tantivy": lambda: build_tantivy(docs, workdir, args.workers),
                "bm25s": lambda: build_bm25s(docs, workdir)}
    for name in engines:
        if name in builders:
            t = time.perf_counter()
            searches[name] = builders[name]()
            builds[name] = time.perf_counter() - t

    for name in engines:  # warm up: first-call costs (imports, term caches) are not per-query costs
        for qs in families.values():
            for query, _ in qs[:20]:
                searches[name](query, args.k)
    results: dict[str, dict[str, Any]] = {}
    for family, queries in families.items():
        lat: dict[str, list[float]] = {name: [] for name in engines}
        found = dict.fromkeys(engines, 0)
        rr = dict.fromkeys(engines, 0.0)
        for query, answer in queries:
            for name in engines:
                t = time.perf_counter()
                hits = searches[name](query, args.k)
                lat[name].append(time.perf_counter() - t)
                titles = [title for title, _ in hits]
                if answer in titles:
                    found[name] += 1
                    rr[name] += 1 / (titles.index(answer) + 1)
        results[family] = {name: {"recall_at_10": round(found[name] / len(queries), 4),
                                  "mrr_at_10": round(rr[name] / len(queries), 4),
                                  "p50_ms": round(statistics.median(lat[name]) * 1e3, 3),
                                  "p99_ms": round(percentile(lat[name], 0.99) * 1e3, 3)} for name in engines}

    mix = [q for qs in families.values() for q, _ in qs]
    random.Random(args.seed).shuffle(mix)
    threads, load = measure_threads(searches, sims, mix, args)

    cached = WikiSim(wiki, cache_size=4 * len(mix) + 16)
    first, again = [], []
    for q in mix[:200]:
        t = time.perf_counter()
        cached.search([q], args.k)
        first.append(time.perf_counter() - t)
    for q in mix[:200]:
        t = time.perf_counter()
        cached.search([q], args.k)
        again.append(time.perf_counter() - t)
    cache_speedup = statistics.median(a / max(b, 1e-9) for a, b in zip(first, again))

    targets: dict[str, bool] = {}
    ratios: dict[str, float] = {}
    for family, r in results.items():
        best_fts = max(r["fts5"]["recall_at_10"], r["fts5-stopwords"]["recall_at_10"])
        for name in sims:
            suffix = "" if name == "simulator" else "_" + name.split("-", 1)[1]
            ratios[f"{family}_p50_vs_fts5_stopwords{suffix}"] = round(
                r[name]["p50_ms"] / r["fts5-stopwords"]["p50_ms"], 3)
            ratios[f"{family}_recall_minus_fts5{suffix}"] = round(r[name]["recall_at_10"] - best_fts, 4)
        targets[f"{family}_recall_ge_fts5"] = ratios[f"{family}_recall_minus_fts5"] >= 0
        targets[f"{family}_p50_le_1.5x_fts5_stopwords"] = ratios[f"{family}_p50_vs_fts5_stopwords"] <= 1.5
    targets[f"threads_{args.threads}_ge_1.5x"] = threads["simulator"]["speedup_paired_median"] >= 1.5
    return {"benchmark": "search", "source": args.source, "pages": len(docs), "k": args.k, "seed": args.seed,
            "queries": {f: len(q) for f, q in families.items()},
            "families_left_out": left_out,
            "build_s": {n: round(v, 3) for n, v in builds.items()}, "families": results, "threads": threads,
            "load_average": load,
            "cache_speedup_median": round(cache_speedup, 1), "ratios": ratios, "targets": targets}


def print_table(r: dict[str, Any]) -> None:
    print(f"search benchmark: {r['pages']} pages ({r['source']}), top {r['k']}, snippets included; queries "
          + ", ".join(f"{f} {n}" for f, n in r["queries"].items()))
    print(f"{'family':<13}{'engine':<19}{'recall@10':>10}{'MRR@10':>8}{'p50 ms':>9}{'p99 ms':>9}")
    for family, engines in r["families"].items():
        for name, e in engines.items():
            print(f"{family:<13}{name:<19}{e['recall_at_10']:>10.3f}{e['mrr_at_10']:>8.3f}{e['p50_ms']:>9.3f}"
                  f"{e['p99_ms']:>9.3f}")
    for name, t in r["threads"].items():
        print(f"threads {name}: " + ", ".join(f"{k} {v}" for k, v in t.items()))
    la = r["load_average"]
    print(f"load average (1 min) during the throughput runs: min {la['min']}, median {la['median']}, "
          f"max {la['max']} on {la['cores']} cores")
    print(f"build s: " + ", ".join(f"{k} {v}" for k, v in r["build_s"].items()))
    print(f"sanity: a repeated query is {r['cache_speedup_median']:.0f}x faster (LRU cache, median)")
    for family, why in r["families_left_out"].items():
        print(f"family {family} left out: {why}")
    for key, ok in r["targets"].items():
        print(f"  target {key}: {'met' if ok else 'MISSED'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default="default", choices=["default", "dump", "jsonl", "gensim-sample"])
    parser.add_argument("--path", default=None, help="corpus file for --source dump/jsonl")
    parser.add_argument("--queries", type=int, default=200, help="queries per family")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--thread-seconds", type=float, default=1.5,
                        help="about how long one single-thread throughput run lasts (sets each engine's query count)")
    parser.add_argument("--thread-repeats", type=int, default=9,
                        help="interleaved rounds of throughput runs (medians reported)")
    parser.add_argument("--engines", default=",".join(ENGINES))
    args = parser.parse_args(argv)
    result = run(args)
    print_table(result)
    print(json.dumps(result))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
