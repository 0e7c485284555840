"""Synthesis at scale: this tree against a base checkout (``--base-tree``), at the default
corpus and at a recombined one ``--scale`` times its size, side by side in one run.

The large corpus (JSONL, built into a simulator with derived links): the default corpus's
pages unchanged, then, for each copy ``k`` >= 1 and each page P, a page titled ``P (k)``
(the same display name, as Wikipedia's namesakes) whose text is P's first (defining)
sentence and 3 to 6 real sentences drawn from other pages of the corpus; links are derived
from the text as for any JSONL corpus, so they point at the real pages the sentences name.

Per corpus: the corpus index written once (by this tree: the one-time cost), then
**subgraph mode**: ``benchmarks.synth`` of each tree in its own process (setup, peak RSS of
the main process and the largest worker, verified tasks per minute with 2 workers and per
CPU-minute of the one-process row, per-stage seconds; ``--index-modes memory`` adds the
index built per run), and **research mode** (the default): ``websailor synth --n
RESEARCH_N --workers 2`` of each tree (wall and CPU seconds of all its processes, verified
tasks per minute and per CPU-minute, peak RSS of the largest process, peak PSS and private
memory of all its processes together, and whether both trees wrote the same tasks).
Target (issue 23): at 1M pages <= 2 GB and >= 100 verified tasks per minute; measured
at 10k and 100k, the 1M memory is the linear fit of the two (said so); measured at 1M with
``--large-wiki DIR`` (a 1M-page simulator, e.g. the one ``benchmarks.scale --sizes 1000000
--work-dir W`` built) or ``--scale 100`` (built here with ``--engine``, default auto: the
tantivy engine at that size). Usage: ``python -m benchmarks.synth_scale [--scale 10]
[--attempts 120] [--research-n 30] [--base-tree ../main] [--wiki data/wiki] [--work
/tmp/synth-scale] [--engine auto] [--large-wiki DIR]``; prints a table, then one line of JSON.
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


def _tree_env(tree: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": tree}


def synth_run(wiki: Path, corpus_index: str, attempts: int, tree: str) -> dict[str, Any]:
    """``benchmarks.synth`` (subgraph mode) from the source tree ``tree``."""
    cmd = [sys.executable, "-m", "benchmarks.synth", "--wiki", str(wiki), "--attempts", str(attempts),
           "--corpus-index", corpus_index]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=tree, env=_tree_env(tree))
    sys.stderr.write(done.stdout)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["wall_s"] = round(time.perf_counter() - start, 1)
    return out


def _tree_memory(root: int) -> tuple[int, int]:
    """(proportional set size, private bytes) of process ``root`` and its descendants, from
    ``/proc/PID/smaps_rollup``: pages shared between processes (the memory-mapped index, the
    page cache of the simulator's files) are counted once in the PSS sum, not once per process."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in tree:
                tree.add(child)
                frontier.append(child)
    pss = private = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    key, _, rest = line.partition(":")
                    if key == "Pss":
                        pss += int(rest.split()[0]) * 1024
                    elif key in ("Private_Clean", "Private_Dirty"):
                        private += int(rest.split()[0]) * 1024
        except OSError:
            continue
    return pss, private


def research_run(wiki: Path, tree: str, n: int, out: Path) -> dict[str, Any]:
    """``websailor synth`` (research mode, 2 workers) from the source tree ``tree``: end-to-end
    wall seconds (setup included), CPU seconds of all its processes, peak RSS of its largest
    process, peak PSS and private memory of all its processes together (sampled every 0.2 s),
    verified tasks per minute, and the tasks' file digest."""
    import hashlib

    out.unlink(missing_ok=True)
    cmd = ["/usr/bin/time", "-f", "%M %e %U %S", sys.executable, "-m", "websailor.cli", "synth", "--wiki", str(wiki),
           "--n", str(n), "--out", str(out), "--workers", "2", "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tree,
                            env=_tree_env(tree))
    peak_pss = peak_private = 0
    while proc.poll() is None:
        pss, private = _tree_memory(proc.pid)
        peak_pss, peak_private = max(peak_pss, pss), max(peak_private, private)
        time.sleep(0.2)
    stdout, stderr = proc.communicate()
    if proc.returncode:
        raise RuntimeError(f"websailor synth failed in {tree}: {stderr[-2000:]}")
    rss_kb, wall, user, system = stderr.strip().splitlines()[-1].split()
    tasks = json.loads(stdout.strip().splitlines()[-1])["tasks"]
    return {"tasks": tasks, "wall_s": float(wall), "cpu_s": round(float(user) + float(system), 1),
            "peak_rss_mb": round(int(rss_kb) / 1024), "peak_tree_pss_mb": round(peak_pss / 2 ** 20),
            "peak_tree_private_mb": round(peak_private / 2 ** 20),
            "verified_per_min": round(60 * tasks / float(wall), 1),
            "verified_per_cpu_min": round(60 * tasks / max(float(user) + float(system), 1e-9), 1),
            "tasks_sha256": hashlib.sha256(out.read_bytes()).hexdigest()[:16]}


def measure(wiki: Path, attempts: int, trees: dict[str, str], modes: list[str]) -> dict[str, Any]:
    shutil.rmtree(wiki / "synth_index", ignore_errors=True)
    first = synth_run(wiki, "disk", max(10, attempts // 4), trees["this"])
    row: dict[str, Any] = {"index_write_s": first["corpus_index_s"],
                           "index_disk_mb": round(sum(p.stat().st_size for p in (wiki / "synth_index").iterdir())
                                                  / 2 ** 20, 1)}
    for label, tree in trees.items():
        for mode in modes:
            r = synth_run(wiki, mode, attempts, tree)
            row[f"{label}/{mode}"] = {
                "setup_index_s": r["corpus_index_s"], "setup_s": r["setup_s"], "peak_rss_mb": r["peak_rss_mb"],
                "verified_per_min": r["verified_per_min"],
                "verified_per_cpu_min_1_worker": r["verified_per_cpu_min_1_worker"], "yield": r["yield"],
                "stage_s_per_attempt": r["stage_s_per_attempt"], "load": r["load_average"]}
    return row


def _fit_1m(results: dict[str, Any], scale: int) -> dict[str, float]:
    """Research-mode memory of this tree at 1M pages, on the line through the two corpora."""
    small, large = results.get("1x", {}).get("research", {}), results.get(f"{scale}x", {}).get("research", {})
    if "this" not in small or "this" not in large:
        return {}
    x0, x1 = results["1x"]["pages"], results[f"{scale}x"]["pages"]
    out = {}
    for key in ("peak_tree_pss_mb", "peak_tree_private_mb", "peak_rss_mb"):
        y0, y1 = small["this"][key], large["this"][key]
        out[key] = round(y0 + (y1 - y0) * (1_000_000 - x0) / (x1 - x0))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wiki", default="data/wiki", help="the default corpus's simulator (copied, not changed)")
    parser.add_argument("--scale", type=int, default=10, help="the large corpus is this many times the default")
    parser.add_argument("--attempts", type=int, default=120)
    parser.add_argument("--work", default="/tmp/synth-scale", help="where the simulators are built (kept)")
    parser.add_argument("--corpora", default="1x,large", help="which to measure: 1x, large, or both")
    parser.add_argument("--research-n", type=int, default=30, help="research tasks per `websailor synth` run (0: skip)")
    parser.add_argument("--base-tree", default=None,
                        help="another checkout (e.g. main's) whose synthesis runs beside this tree's")
    parser.add_argument("--engine", default="auto", choices=("whoosh", "tantivy", "auto"),
                        help="search engine of the large corpus's simulator (auto: tantivy above 200k pages)")
    parser.add_argument("--large-wiki", default=None, metavar="DIR",
                        help="measure this simulator as the large corpus instead of building the recombined one "
                             "(e.g. the 1M-page one benchmarks.scale built: --work-dir W keeps it under W)")
    parser.add_argument("--index-modes", default="disk",
                        help="subgraph-mode corpus index: disk (memory-mapped), memory (built per run), or both")
    args = parser.parse_args()
    from wiki_sim import WikiSim
    from wiki_sim.build import build

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    small = work / "wiki-1x"
    if not (small / "build.json").is_file():
        shutil.copytree(args.wiki, small, ignore=shutil.ignore_patterns("synth_index"))
    large = Path(args.large_wiki) if args.large_wiki else work / f"wiki-{args.scale}x"
    wanted = {c.strip() for c in args.corpora.split(",")}
    if args.large_wiki and not (large / "build.json").is_file():
        parser.error(f"--large-wiki {large} is not a built simulator (no build.json)")
    if "large" in wanted and not (large / "build.json").is_file():
        corpus = work / f"corpus-{args.scale}x.jsonl"
        recombined_corpus(str(small), args.scale, corpus)
        build("jsonl", corpus, large, progress=False, engine=args.engine)
    trees = {"this": str(Path(__file__).resolve().parents[1])}
    if args.base_tree:
        trees["base"] = str(Path(args.base_tree).resolve())
    modes = [m.strip() for m in args.index_modes.split(",") if m.strip()]
    results = {}
    for name, wiki in [(n, w) for n, w in (("1x", small), ("large", large)) if n in wanted]:
        name = name if name == "1x" else "large" if args.large_wiki else f"{args.scale}x"
        with WikiSim(wiki) as sim:
            pages = sim.stats()["pages"]
        results[name] = {"pages": pages, **measure(wiki, args.attempts, trees, modes)}
        if args.research_n:
            runs = {label: research_run(wiki, tree, args.research_n, work / f"research-{label}.jsonl")
                    for label, tree in trees.items()}
            if "base" in runs:
                runs["same_tasks_as_base"] = runs["this"]["tasks_sha256"] == runs["base"]["tasks_sha256"]
            results[name]["research"] = runs
    fit = _fit_1m(results, args.scale)
    if fit:
        results["linear_fit_1m"] = fit
    print(f"subgraph mode (benchmarks.synth, {args.attempts} attempts)")
    print(f"{'corpus':<6} {'pages':>8} {'tree/index':>11} {'setup s':>8} {'RSS MB main/worker':>19} "
          f"{'verified/min':>12} {'per CPU-min, 1 proc':>19}")
    for name, r in results.items():
        for key in [k for k in r if "/" in k]:
            m = r[key]
            print(f"{name:<6} {r['pages']:>8} {key:>11} {m['setup_index_s']:>8} "
                  f"{m['peak_rss_mb']['main']:>9}/{m['peak_rss_mb']['largest_worker']:<9} "
                  f"{m['verified_per_min']:>12} {m['verified_per_cpu_min_1_worker']:>19}")
    print(f"research mode (websailor synth --n {args.research_n} --workers 2)")
    print(f"{'corpus':<6} {'tree':<6} {'tasks':>6} {'wall s':>7} {'CPU s':>7} {'per CPU-min':>11} "
          f"{'verified/min':>12} {'RSS MB':>7} {'PSS MB, all':>11} {'private MB':>10}")
    for name, r in results.items():
        for label, m in r.get("research", {}).items():
            if isinstance(m, dict):
                print(f"{name:<6} {label:<6} {m['tasks']:>6} {m['wall_s']:>7} {m['cpu_s']:>7} "
                      f"{m['verified_per_cpu_min']:>11} {m['verified_per_min']:>12} {m['peak_rss_mb']:>7} "
                      f"{m['peak_tree_pss_mb']:>11} {m['peak_tree_private_mb']:>10}")
        if "same_tasks_as_base" in r.get("research", {}):
            print(f"{name}: same research tasks as the base tree: {r['research']['same_tasks_as_base']}")
    if fit:
        print("research mode at 1M pages, linear fit of the two corpora (not measured): " +
              ", ".join(f"{k} {v}" for k, v in fit.items()))
    print(json.dumps({"benchmark": "synth_scale", "results": results}))


if __name__ == "__main__":
    main()
