"""Synthesis at scale: the corpus index built per run in memory (``sailorfog.corpus``, what
``websailor synth`` did before) against the one written once per simulator and
memory-mapped (``sailorfog.corpus_index``), at the default corpus and at a recombined one
``--scale`` times its size, side by side in one run.

The large corpus (JSONL, built into a simulator with derived links): the default corpus's
pages unchanged, then, for each copy ``k`` >= 1 and each page P, a page titled ``P (k)``
(the same display name, as Wikipedia's namesakes) whose text is P's first (defining)
sentence and 3 to 6 real sentences drawn from other pages of the corpus; links are derived
from the text as for any JSONL corpus, so they point at the real pages the sentences name.

Each configuration runs ``benchmarks.synth`` in its own process (its table and JSON) on
the same simulator: the disk index first once to write it (the one-time cost), then
``memory`` and ``disk`` for the measurement. Reported per corpus: pages, the one-time
write, corpus index setup seconds, peak RSS (main process; largest worker), verified tasks
per minute with 2 workers, and per CPU-minute of the one-process row (what machine load
does not change). Target (issue 23): at 1M pages <= 2 GB and >= 100 verified
tasks per minute; measured here at 10k and 100k (the 1M figure is the linear fit of
the two, said so). Usage: ``python -m benchmarks.synth_scale [--scale 10] [--attempts 120]
[--wiki data/wiki] [--work /tmp/synth-scale]``; prints a table, then one line of JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def recombined_corpus(wiki: str, scale: int, out: Path, seed: int = 0) -> int:
    """Write the recombined JSONL corpus (``scale`` times the pages of ``wiki``); returns its pages."""
    from sailorfog.text import sentences
    from wiki_sim import WikiSim

    rng = random.Random(seed)
    with WikiSim(wiki) as sim:
        pages = [(info.title, (sim.page(info.title) or {}).get("text", "")) for info in sim.iter_pages()]
    split = [sentences(text) for _, text in pages]
    pool = [s for ss in split for s in ss[1:] if 40 <= len(s) <= 400]
    n = 0
    with open(out, "w", encoding="utf-8") as f:
        for k in range(scale):
            for (title, text), ss in zip(pages, split):
                if k == 0:
                    body = text
                elif ss:
                    body = " ".join([ss[0]] + rng.sample(pool, rng.randint(3, 6)))
                else:
                    continue
                f.write(json.dumps({"title": title if k == 0 else f"{title} ({k})", "text": body}) + "\n")
                n += 1
    return n


def synth_run(wiki: Path, corpus_index: str, attempts: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.synth", "--wiki", str(wiki), "--attempts", str(attempts),
           "--corpus-index", corpus_index]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    sys.stderr.write(done.stdout)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["wall_s"] = round(time.perf_counter() - start, 1)
    return out


def research_run(wiki: Path, tree: str, n: int, out: Path) -> dict[str, Any]:
    """``websailor synth`` (research mode, 2 workers) from the source tree ``tree``: end-to-end
    wall seconds (setup included), peak RSS of its largest process, verified tasks per minute."""
    out.unlink(missing_ok=True)
    cmd = ["/usr/bin/time", "-f", "%M %e %U %S", sys.executable, "-m", "websailor.cli", "synth", "--wiki", str(wiki),
           "--n", str(n), "--out", str(out), "--workers", "2", "--no-progress"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=tree,
                          env={**os.environ, "PYTHONPATH": tree})
    rss_kb, wall, user, system = done.stderr.strip().splitlines()[-1].split()
    tasks = json.loads(done.stdout.strip().splitlines()[-1])["tasks"]
    return {"tasks": tasks, "wall_s": float(wall), "cpu_s": round(float(user) + float(system), 1),
            "peak_rss_mb": round(int(rss_kb) / 1024), "verified_per_min": round(60 * tasks / float(wall), 1)}


def measure(wiki: Path, attempts: int) -> dict[str, Any]:
    shutil.rmtree(wiki / "synth_index", ignore_errors=True)
    first = synth_run(wiki, "disk", max(10, attempts // 4))
    row: dict[str, Any] = {"index_write_s": first["corpus_index_s"],
                           "index_disk_mb": round(sum(p.stat().st_size for p in (wiki / "synth_index").iterdir())
                                                  / 2 ** 20, 1)}
    for mode in ("memory", "disk"):
        r = synth_run(wiki, mode, attempts)
        row[mode] = {"setup_index_s": r["corpus_index_s"], "setup_s": r["setup_s"], "peak_rss_mb": r["peak_rss_mb"],
                     "verified_per_min": r["verified_per_min"],
                     "verified_per_cpu_min_1_worker": r["verified_per_cpu_min_1_worker"], "yield": r["yield"], "load": r["load_average"]}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wiki", default="data/wiki", help="the default corpus's simulator (copied, not changed)")
    parser.add_argument("--scale", type=int, default=10, help="the large corpus is this many times the default")
    parser.add_argument("--attempts", type=int, default=120)
    parser.add_argument("--work", default="/tmp/synth-scale", help="where the simulators are built (kept)")
    parser.add_argument("--corpora", default="1x,large", help="which to measure: 1x, large, or both")
    parser.add_argument("--research-n", type=int, default=30, help="research tasks per `websailor synth` run (0: skip)")
    parser.add_argument("--base-tree", default=None,
                        help="another checkout (e.g. main's) whose `websailor synth` runs beside this tree's")
    args = parser.parse_args()
    from wiki_sim import WikiSim
    from wiki_sim.build import build

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    small = work / "wiki-1x"
    if not (small / "build.json").is_file():
        shutil.copytree(args.wiki, small, ignore=shutil.ignore_patterns("synth_index"))
    large = work / f"wiki-{args.scale}x"
    wanted = {c.strip() for c in args.corpora.split(",")}
    if "large" in wanted and not (large / "build.json").is_file():
        corpus = work / f"corpus-{args.scale}x.jsonl"
        recombined_corpus(str(small), args.scale, corpus)
        build("jsonl", corpus, large, progress=False)
    results = {}
    for name, wiki in [(n, w) for n, w in (("1x", small), ("large", large)) if n in wanted]:
        name = name if name == "1x" else f"{args.scale}x"
        with WikiSim(wiki) as sim:
            pages = sim.stats()["pages"]
        results[name] = {"pages": pages, **measure(wiki, args.attempts)}
        if args.research_n:
            trees = {"this": str(Path(__file__).resolve().parents[1])}
            if args.base_tree:
                trees["base"] = str(Path(args.base_tree).resolve())
            results[name]["research"] = {label: research_run(wiki, tree, args.research_n, work / "research.jsonl")
                                         for label, tree in trees.items()}
    print(f"{'corpus':<6} {'pages':>8} {'write s':>8} {'index':>7} {'setup s':>8} {'RSS MB main/worker':>19} "
          f"{'verified/min':>12} {'per CPU-min, 1 proc':>19}")
    for name, r in results.items():
        for mode in ("memory", "disk"):
            m = r[mode]
            print(f"{name:<6} {r['pages']:>8} {r['index_write_s'] if mode == 'disk' else '':>8} {mode:>7} "
                  f"{m['setup_index_s']:>8} {m['peak_rss_mb']['main']:>9}/{m['peak_rss_mb']['largest_worker']:<9} "
                  f"{m['verified_per_min']:>12} {m['verified_per_cpu_min_1_worker']:>19}")
    print(f"{'corpus':<6} {'tree':<6} {'research tasks':>14} {'wall s':>8} {'CPU s':>7} {'peak RSS MB':>11} "
          f"{'verified/min':>12}")
    for name, r in results.items():
        for label, m in r.get("research", {}).items():
            print(f"{name:<6} {label:<6} {m['tasks']:>14} {m['wall_s']:>8} {m['cpu_s']:>7} {m['peak_rss_mb']:>11} "
                  f"{m['verified_per_min']:>12}")
    print(json.dumps({"benchmark": "synth_scale", "results": results}))


if __name__ == "__main__":
    main()
