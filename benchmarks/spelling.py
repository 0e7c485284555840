"""Spelling retry: the engines' scans (every term with the word's first letter: the tantivy
engine's in Python, the Whoosh engine's ``terms_within``) against the deletion index
(:mod:`wiki_sim.spelling`), per misspelt word, side by side in one run, at three vocabularies:

- ``default``: the tantivy simulator of the embedded default corpus (built into a temporary
  directory, or ``--wiki DIR`` for an existing tantivy build);
- ``large``: a real tantivy index whose vocabulary is the default corpus's terms plus
  ``--large-terms`` compounds of two of its words (``rivermuseum``; Zipf-like frequencies),
  the size of a Wikipedia-scale vocabulary (wiki-18 has millions of distinct terms);
- ``default-whoosh``: the Whoosh simulator of the embedded default corpus (``--whoosh-wiki DIR``
  for an existing one; ``--no-whoosh`` to skip), its title and body terms.

Misspellings: vocabulary words (letters only, 3+) with 1 to 3 random edits, unknown to the
index, the same for both methods; the two are interleaved word by word. Reported per
vocabulary: terms, index build seconds and disk, per-word mean / p50 / p99 ms of each
method, the ratio, and how many answers agree (they must all). Target: the index answers
every word as the scan does, >= 10x faster per word at the large vocabulary.
Usage: ``python -m benchmarks.spelling [--words 300] [--large-terms 2000000] [--wiki DIR]``.
Prints a table, then one line of JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from wiki_sim.spelling import SPELLING_DIR, SpellingIndex, build_spelling_index
from wiki_sim.tantivy_index import TantivySearcher, _open, _schema, import_tantivy

ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def misspell(rng: random.Random, word: str) -> str:
    for _ in range(rng.choice((1, 2, 2, 3))):
        i, c, op = rng.randrange(len(word)), rng.choice(ALPHABET), rng.randrange(4)
        if op == 0:
            word = word[:i] + c + word[i + 1:]
        elif op == 1:
            word = word[:i] + c + word[i:]
        elif op == 2 and len(word) > 3:
            word = word[:i] + word[i + 1:]
        elif i + 1 < len(word):
            word = word[:i] + word[i + 1] + word[i] + word[i + 2:]
    return word


def default_simulator(workdir: Path, engine: str = "tantivy") -> Path:
    from wiki_sim.build import build

    out = workdir / f"default-{engine}"
    build("default", None, out, progress=False, engine=engine)
    return out


def large_index(base: list[str], n_terms: int, workdir: Path, seed: int) -> Path:
    """A tantivy simulator directory (index + a store of titles) with ``base`` plus compounds,
    ``n_terms`` distinct terms in all."""
    tantivy = import_tantivy()
    rng = random.Random(seed)
    alpha = [w for w in base if w.isalpha() and 3 <= len(w) <= 10]
    terms = set(base)
    while len(terms) < n_terms:
        terms.add(rng.choice(alpha) + rng.choice(alpha))
    terms_list = sorted(terms)
    rng.shuffle(terms_list)
    out = workdir / "large"
    index = _open(tantivy, _mkdir(out / "tantivy"), _schema(tantivy))
    writer = index.writer(heap_size=200_000_000, num_threads=1)
    docs, per_doc = 0, 200
    for start in range(0, len(terms_list), per_doc):
        words = terms_list[start:start + per_doc]
        # Zipf-like document frequencies: the first terms recur in more documents.
        for _ in range(1 + int(3 / (1 + start / 50_000))):
            doc = tantivy.Document()
            doc.add_text("text", " ".join(words))
            doc.add_unsigned("pid", docs)
            writer.add_document(doc)
            docs += 1
    writer.commit()
    writer.wait_merging_threads()
    with sqlite3.connect(out / "store.sqlite") as conn:
        conn.execute("CREATE TABLE pages (id INTEGER PRIMARY KEY, title TEXT)")
        conn.executemany("INSERT INTO pages VALUES (?, ?)", ((i, f"Page {i}") for i in range(docs)))
    return out


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def measure(sim_dir: Path, words_n: int, seed: int, engine_name: str = "tantivy") -> dict[str, Any]:
    if engine_name == "whoosh":
        from wiki_sim.index import IndexSearcher

        engine: Any = IndexSearcher(sim_dir / "index")
    else:
        engine = TantivySearcher(sim_dir / "tantivy", sim_dir / "store.sqlite")
    vocabulary = engine.vocabulary()
    shutil.rmtree(sim_dir / SPELLING_DIR, ignore_errors=True)
    start = time.perf_counter()
    built = build_spelling_index(vocabulary, sim_dir / SPELLING_DIR)
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    index = SpellingIndex(sim_dir / SPELLING_DIR)
    open_ms = (time.perf_counter() - start) * 1000
    rng = random.Random(seed)
    alpha = [w for w, _ in vocabulary if w.isalpha() and len(w) >= 3]
    words: list[str] = []
    while len(words) < words_n:
        w = misspell(rng, rng.choice(alpha))
        if w.isalpha() and 3 <= len(w) <= 40 and not engine.known(w):
            words.append(w)
    scan_ms, index_ms, agree, corrected = [], [], 0, 0
    for w in words:
        t0 = time.perf_counter()
        a = engine.suggest_by_scan(w)
        t1 = time.perf_counter()
        b = index.suggest(w)
        t2 = time.perf_counter()
        scan_ms.append((t1 - t0) * 1000)
        index_ms.append((t2 - t1) * 1000)
        agree += a == b
        corrected += a is not None
    disk = sum(p.stat().st_size for p in (sim_dir / SPELLING_DIR).iterdir())
    row = {"terms": built["terms"], "keys": built["keys"], "index_build_s": round(build_s, 2),
           "index_disk_mb": round(disk / 2 ** 20, 1), "index_open_ms": round(open_ms, 2), "words": len(words),
           "corrected": corrected, "agree": agree}
    for name, ms in (("scan", scan_ms), ("index", index_ms)):
        qs = statistics.quantiles(ms, n=100)
        row[name] = {"mean_ms": round(statistics.fmean(ms), 3), "p50_ms": round(qs[49], 3), "p99_ms": round(qs[98], 3)}
    row["speedup_mean"] = round(row["scan"]["mean_ms"] / max(row["index"]["mean_ms"], 1e-9), 1)
    return row


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-spelling-") as tmp:
        workdir = Path(tmp)
        if args.wiki:
            sim = workdir / "default-tantivy"
            shutil.copytree(args.wiki, sim)
        else:
            sim = default_simulator(workdir)
        results = {"default": measure(sim, args.words, args.seed)}
        if args.whoosh:
            whoosh = workdir / "default-whoosh"
            if args.whoosh_wiki:
                shutil.copytree(args.whoosh_wiki, whoosh, ignore=shutil.ignore_patterns("synth_index", "vectors"))
            else:
                whoosh = default_simulator(workdir, "whoosh")
            results["default-whoosh"] = measure(whoosh, args.words, args.seed, "whoosh")
        base = [w for w, _ in TantivySearcher(sim / "tantivy", sim / "store.sqlite").vocabulary()]
        if args.large_terms > 0:
            results["large"] = measure(large_index(base, args.large_terms, workdir, args.seed), args.words, args.seed)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--words", type=int, default=300, help="misspelt words per vocabulary")
    parser.add_argument("--large-terms", type=int, default=2_000_000, help="terms of the large vocabulary (0: skip)")
    parser.add_argument("--wiki", default=None, help="an existing tantivy simulator of the default corpus")
    parser.add_argument("--whoosh", action=argparse.BooleanOptionalAction, default=True,
                        help="also the Whoosh engine's scan against the index on the default corpus")
    parser.add_argument("--whoosh-wiki", default=None, help="an existing Whoosh simulator of the default corpus")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    results = run(args)
    print(f"{'vocabulary':<15} {'terms':>9} {'build s':>8} {'disk MB':>8} {'scan mean/p50/p99 ms':>24} "
          f"{'index mean/p50/p99 ms':>24} {'x':>6} {'agree':>9}")
    for name, r in results.items():
        s, i = r["scan"], r["index"]
        print(f"{name:<15} {r['terms']:>9} {r['index_build_s']:>8} {r['index_disk_mb']:>8} "
              f"{s['mean_ms']:>8}/{s['p50_ms']}/{s['p99_ms']:<8} {i['mean_ms']:>8}/{i['p50_ms']}/{i['p99_ms']:<8} "
              f"{r['speedup_mean']:>6} {r['agree']:>4}/{r['words']}")
    large = results.get("large", results["default"])
    targets = {"same_answers": all(r["agree"] == r["words"] for r in results.values()),
               "large_speedup_10x": large["speedup_mean"] >= 10}
    print(json.dumps({"benchmark": "spelling", "results": results, "targets": targets,
                      "targets_met": all(targets.values())}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
