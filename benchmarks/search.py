"""Search: the Whoosh simulator against SQLite FTS5, tantivy and bm25s, side by side in one run.

The same corpus (the embedded default unless ``--source/--path`` say otherwise) is built
into the simulator (the full build: parse, store, index) and, from the simulator's store,
into each other engine. The query set comes from the corpus itself: a sentence of a random
article with the article title's words removed; its answer is that article. All engines
answer the same queries, interleaved query by query so machine noise hits them alike, and
each returns the top 10 with a snippet.

Measured: build time, p50/p99 query latency (snippets included), recall@10 and MRR@10
(where in the top 10 the answer is); for the
simulator also a repeated query (served by its LRU cache) against its first run.

Engines, each as it comes:
- ``simulator``: ``wiki_sim.WikiSim`` (Whoosh BM25F, title x3, stemming and stopwords, OR).
- ``fts5``: stdlib sqlite3 FTS5, ``porter unicode61`` tokenizer, the query's words OR-ed,
  ``bm25(title 3, body 1)``, ``snippet()``. FTS5 has no stopword list, so common words
  match most pages; ``fts5-stopwords`` drops the simulator's stopwords from its queries.
- ``tantivy``: ``en_stem`` fields, title boost 3, OR query parser, ``SnippetGenerator``.
- ``bm25s``: title and body as one text, English stopwords, the same Porter stemmer; it
  has no snippets, so the simulator's snippet function is applied to its hits.

Targets (ratios from one run, on the default corpus): simulator p50 <= 2x FTS5's, recall@10
>= FTS5's, repeated query >= 50x faster than its first run, whole default build < 30 s.

Usage: ``python -m benchmarks.search [--source default|dump|jsonl|gensim-sample] [--path FILE]
[--queries 300] [--seed 0] [--engines simulator,fts5,...]``. tantivy and bm25s come with
``pip install 'websailor-gym[bench]'``. Prints a table, then one line of JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from wiki_sim import WikiSim
from wiki_sim.analysis import STOPWORDS, analyze
from wiki_sim.build import build
from wiki_sim.index import TITLE_BOOST, build_index
from wiki_sim.snippets import best_snippet

ENGINES = ("simulator", "fts5", "fts5-stopwords", "tantivy", "bm25s")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"\w+")

Search = Callable[[str, int], list[tuple[str, str]]]


def make_queries(docs: list[tuple[str, str]], n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` (query, answer title): a sentence of the answer's text minus the title's words.

    The sentence must keep at least 6 content words (not stopwords): a shorter one, such as
    "was an American poet and author", names no particular article."""
    rng = random.Random(seed)
    order = list(range(len(docs)))
    rng.shuffle(order)
    queries = []
    for i in order:
        title, text = docs[i]
        title_words = {w.lower() for w in _WORD.findall(title)}
        sentences = [s for s in _SENTENCE.split(text.replace("\n", " ")) if not s.lstrip().startswith("#")]
        rng.shuffle(sentences)
        for sentence in sentences:
            words = [w for w in _WORD.findall(sentence) if w.lower() not in title_words]
            content = [w for w in words if w.lower() not in STOPWORDS]
            if len(content) >= 6 and len(words) <= 40:
                queries.append((" ".join(words), title))
                break
        if len(queries) == n:
            break
    return queries


def store_docs(wiki: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(f"file:{wiki / 'store.sqlite'}?mode=ro", uri=True)
    try:
        return [(t, x) for t, x in conn.execute("SELECT title, text FROM pages ORDER BY id")]
    finally:
        conn.close()


# --- engines: build(docs, workdir) -> search(query, k) -> [(title, snippet)] -------------

def build_fts5(docs: list[tuple[str, str]], workdir: Path, stopwords: bool = False) -> Search:
    from whoosh.analysis.filters import STOP_WORDS

    db = sqlite3.connect(workdir / "fts5.sqlite", check_same_thread=False)
    db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(title, body, tokenize='porter unicode61')")
    if not db.execute("SELECT count(*) FROM docs").fetchone()[0]:
        db.executemany("INSERT INTO docs(title, body) VALUES (?, ?)", docs)
        db.commit()
    sql = (f"SELECT title, snippet(docs, 1, '', '', '...', 48) FROM docs WHERE docs MATCH ? "
           f"ORDER BY bm25(docs, {TITLE_BOOST}, 1.0) LIMIT ?")

    def search(query: str, k: int) -> list[tuple[str, str]]:
        words = [w for w in _WORD.findall(query) if not (stopwords and w.lower() in STOP_WORDS)]
        if not words:
            return []
        return db.execute(sql, (" OR ".join(f'"{w}"' for w in words), k)).fetchall()

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

    corpus = [f"{title}\n{text}" for title, text in docs]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False),
                    show_progress=False)

    def search(query: str, k: int) -> list[tuple[str, str]]:
        tokens = bm25s.tokenize([query], stopwords="en", stemmer=stemmer, show_progress=False)
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


def run(args: argparse.Namespace) -> dict[str, Any]:
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = set(engines) - set(ENGINES)
    if unknown or "simulator" not in engines:
        raise SystemExit(f"--engines: choose from {', '.join(ENGINES)} (simulator required); got {args.engines}")
    for module, engine in (("tantivy", "tantivy"), ("bm25s", "bm25s")):
        if engine in engines:
            try:
                __import__(module)
            except ImportError:
                raise SystemExit(f"{engine} is not installed: pip install 'websailor-gym[bench]' "
                                 f"(or leave it out with --engines)") from None
    workdir = Path(tempfile.mkdtemp(prefix="bench-search-"))
    try:
        return measure(args, engines, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def measure(args: argparse.Namespace, engines: list[str], workdir: Path) -> dict[str, Any]:
    wiki = workdir / "wiki"
    t = time.perf_counter()
    info = build(args.source, args.path, wiki, workers=args.workers, progress=False)
    builds: dict[str, float] = {"simulator": time.perf_counter() - t}
    t = time.perf_counter()
    build_index(wiki / "store.sqlite", workdir / "index-1-writer", procs=1, progress=False)
    one_writer_index_s = time.perf_counter() - t
    docs = store_docs(wiki)
    queries = make_queries(docs, args.queries, args.seed)

    searches: dict[str, Search] = {}
    sim = WikiSim(wiki, cache_size=4 * len(queries) + 16)
    searches["simulator"] = lambda q, k: [(h.title, h.snippet) for h in sim.search([q], k)[0]]
    builders = {"fts5": lambda: build_fts5(docs, workdir),
                "fts5-stopwords": lambda: build_fts5(docs, workdir, stopwords=True),
                "tantivy": lambda: build_tantivy(docs, workdir, args.workers),
                "bm25s": lambda: build_bm25s(docs, workdir)}
    for name in engines:
        if name != "simulator":
            t = time.perf_counter()
            searches[name] = builders[name]()
            builds[name] = time.perf_counter() - t

    for name in engines:  # warm up: first-call costs (imports, caches) are not per-query costs
        searches[name]("warm up query words", args.k)
    latencies: dict[str, list[float]] = {name: [] for name in engines}
    found: dict[str, int] = {name: 0 for name in engines}
    reciprocal: dict[str, float] = {name: 0.0 for name in engines}
    repeat: list[float] = []
    for query, answer in queries:
        for name in engines:
            t = time.perf_counter()
            hits = searches[name](query, args.k)
            latencies[name].append(time.perf_counter() - t)
            titles = [title for title, _ in hits]
            if answer in titles:
                found[name] += 1
                reciprocal[name] += 1 / (titles.index(answer) + 1)
    for query, _ in queries:  # the same queries again: the simulator's LRU cache answers
        t = time.perf_counter()
        searches["simulator"](query, args.k)
        repeat.append(time.perf_counter() - t)

    results = {name: {"build_s": round(builds[name], 3),
                      "p50_ms": round(statistics.median(latencies[name]) * 1e3, 3),
                      "p99_ms": round(percentile(latencies[name], 0.99) * 1e3, 3),
                      "recall_at_10": round(found[name] / len(queries), 4),
                      "mrr_at_10": round(reciprocal[name] / len(queries), 4)} for name in engines}
    speedups = [first / max(again, 1e-9) for first, again in zip(latencies["simulator"], repeat)]
    sim_r = results["simulator"]
    simulator = {
        "build_total_s": round(builds["simulator"], 3),
        "build_stages_s": info["durations_s"],
        "index_1_writer_s": round(one_writer_index_s, 3),
        "repeat_p50_ms": round(statistics.median(repeat) * 1e3, 4),
        "repeat_speedup_median": round(statistics.median(speedups), 1),
        "repeat_speedup_min": round(min(speedups), 1),
    }
    ratios: dict[str, float] = {}
    for other in ("fts5", "fts5-stopwords", "tantivy", "bm25s"):
        if other in results:
            ratios[f"p50_vs_{other}"] = round(sim_r["p50_ms"] / results[other]["p50_ms"], 3)
            ratios[f"recall_minus_{other}"] = round(sim_r["recall_at_10"] - results[other]["recall_at_10"], 4)
    targets = {}
    if "fts5" in results:
        targets["p50_le_2x_fts5"] = ratios["p50_vs_fts5"] <= 2.0
        targets["recall_ge_fts5"] = ratios["recall_minus_fts5"] >= 0
    targets["repeat_ge_50x"] = simulator["repeat_speedup_median"] >= 50
    if args.source == "default" and args.path is None:
        targets["default_build_lt_30s"] = builds["simulator"] < 30
    return {"benchmark": "search", "source": args.source, "pages": len(docs), "queries": len(queries),
            "k": args.k, "workers": args.workers, "engines": results, "simulator": simulator,
            "ratios": ratios, "targets": targets}


def print_table(r: dict[str, Any]) -> None:
    print(f"search benchmark: {r['pages']} pages ({r['source']}), {r['queries']} queries, top {r['k']}, "
          f"snippets included")
    print(f"{'engine':<16}{'build s':>9}{'p50 ms':>10}{'p99 ms':>10}{'recall@10':>11}{'MRR@10':>9}")
    for name, e in r["engines"].items():
        print(f"{name:<16}{e['build_s']:>9.2f}{e['p50_ms']:>10.2f}{e['p99_ms']:>10.2f}{e['recall_at_10']:>11.3f}"
              f"{e['mrr_at_10']:>9.3f}")
    s = r["simulator"]
    print(f"{'simulator cached':<16}{'':>9}{s['repeat_p50_ms']:>10.4f}")
    st = s["build_stages_s"]
    print(f"simulator build: {s['build_total_s']:.2f} s total (parse+store {st['parse_and_store']:.2f} s, "
          f"index {st['index']:.2f} s with {r['workers']} writers; one writer: {s['index_1_writer_s']:.2f} s)")
    print(f"repeated query: {s['repeat_speedup_median']:.0f}x faster than its first run (median; min "
          f"{s['repeat_speedup_min']:.0f}x)")
    for key, value in r["ratios"].items():
        print(f"  {key}: {value}")
    for key, ok in r["targets"].items():
        print(f"  target {key}: {'met' if ok else 'MISSED'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default="default", choices=["default", "dump", "jsonl", "gensim-sample"])
    parser.add_argument("--path", default=None, help="corpus file for --source dump/jsonl")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--engines", default=",".join(ENGINES))
    args = parser.parse_args(argv)
    result = run(args)
    print_table(result)
    print(json.dumps(result))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
