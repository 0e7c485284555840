"""Build and open costs of the simulator at scale: peak RSS, temporary disk, open time, shared memory.

Corpora of ``--pages`` pages are made from real sentences of the default simulator's pages
(``--wiki-dir``) as ``benchmarks.scale`` makes them (:mod:`benchmarks._scale_corpus`: 3-8
sentences a page, titles ``Base (w1 w2)``).
For each corpus and engine, ``websailor wiki build`` runs in a child process while a
sampler reads, every 0.2 s, the resident memory of the build's whole process tree (its
index writer processes included) and the size of its temporary build directory:

- ``build_s``, ``ingest_s``, ``peak_rss_mb``, ``peak_pss_mb``: wall time and the largest summed RSS and PSS
  of the tree (``ingest_s``: build.json's ``parse_and_store``, the corpus read, links derived
  and store written; PSS also per phase of the build: parse and store, which is the JSONL ingest and
  link pass, finalize the store, index, forward index); ``ingest_peak_rss_mb``: the build
  process's own peak RSS when the store is written, before indexing (``build.json``; codes
  before it leave it ``None``);
- ``final_mb``, ``peak_disk_mb``, ``temp_ratio``: the finished simulator's size, the largest
  size of the build directory while it ran and ``(peak - final) / final`` (what the build
  wrote beyond its result, relative to it);
- ``open_first_s``/``open_next_s``: ``WikiSim(path)`` (modules already imported) in a first
  process, then in a second one started while the first is alive (the page cache is warm);
- ``open_rss_mb``, ``open_private_mb``: the second process's RSS and its private memory
  (what it does not share with the first through the page cache), after the search;
- ``procs3_pss_mb``: the summed proportional set size of three processes holding the
  simulator open (shared pages counted once over the three), against 3x one process's RSS.

``--code DIR`` adds a second checkout run side by side (for example the previous release,
to compare: ``--code /path/to/old/checkout``); its builds run without ``--memory-mb`` when
its CLI lacks the option. Last line: one JSON object.

    python -m benchmarks.build_memory --pages 10000,100000
    python -m benchmarks.build_memory --pages 10000 --engines whoosh,tantivy --code ../old
    python -m benchmarks.build_memory --pages 20000 --engines tantivy --code ../old --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


def make_corpus(wiki_dir: Path, pages: int, seed: int, path: Path) -> Path:
    """Write a JSONL corpus of ``pages`` pages recombined from the sentences of ``wiki_dir``
    (:func:`benchmarks._scale_corpus.write_corpus`, the corpora of ``benchmarks.scale``)."""
    from benchmarks._scale_corpus import load_pool, write_corpus

    write_corpus(load_pool([wiki_dir / "store.sqlite"]), pages, path, queries=0, seed=seed)
    return path


def _tree_memory(pid: int) -> tuple[int, int]:
    """Summed RSS and PSS (bytes) of ``pid`` and all its descendants (PSS counts a page shared by
    several of them, or mapped from the page cache by others, once in all)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    rss = pss = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith(("Rss:", "Pss:")):
                        value = int(line.split()[1]) * 1024
                        rss, pss = (rss + value, pss) if line.startswith("Rss:") else (rss, pss + value)
        except OSError:
            pass
        todo.extend(children.get(p, []))
    return rss, pss


def _dir_size(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def _phase_peaks(series: list[tuple[float, int]], info: dict[str, Any], seconds: float) -> dict[str, int]:
    """Peak tree memory (MB) in each phase of the build, placed by build.json's durations (the
    phases end ``seconds - total`` after the start: the time spent before, importing)."""
    d = info.get("durations_s", {})
    at = seconds - d.get("total", 0)
    ends = {}
    for phase in ("parse_and_store", "finalize_store", "index", "forward_index"):
        at += d.get(phase, 0)
        ends[phase] = at
    peaks: dict[str, int] = {}
    for t, rss in series:
        phase = next((p for p, end in ends.items() if t <= end), "forward_index")
        peaks[phase] = max(peaks.get(phase, 0), round(rss / 2 ** 20))
    return peaks


def _supports_memory_mb(code: Path) -> bool:
    return "memory_mb" in (code / "wiki_sim" / "cli.py").read_text(encoding="utf-8")


def run_build(code: Path, corpus: Path, out: Path, engine: str, memory_mb: int | None) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "websailor.cli", "wiki", "build", "--source", "jsonl", str(corpus), "--out", str(out),
           "--engine", engine, "--no-progress"]
    if memory_mb is not None and _supports_memory_mb(code):
        cmd += ["--memory-mb", str(memory_mb)]
    env = {**os.environ, "PYTHONPATH": str(code)}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=code, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = {"rss": 0, "pss": 0, "disk": 0}
    done = threading.Event()

    series: list[tuple[float, int]] = []

    def sample() -> None:
        while not done.is_set():
            rss, pss = _tree_memory(proc.pid)
            series.append((time.perf_counter() - start, pss))
            peak["rss"], peak["pss"] = max(peak["rss"], rss), max(peak["pss"], pss)
            for entry in out.parent.glob(f".{out.name}.building-*"):
                peak["disk"] = max(peak["disk"], _dir_size(entry))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = proc.communicate()
    done.set()
    sampler.join()
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"build failed ({proc.returncode}): {output.strip()[-500:]}")
    final = _dir_size(out)
    info = json.loads((out / "build.json").read_text(encoding="utf-8"))
    return {"build_s": round(seconds, 1), "ingest_s": info.get("durations_s", {}).get("parse_and_store"),
            "segments": info.get("counts", {}).get("index_segments"),
            "peak_rss_mb": round(peak["rss"] / 2 ** 20), "peak_pss_mb": round(peak["pss"] / 2 ** 20),
            "peak_pss_mb_by_phase": _phase_peaks(series, info, seconds),
            "ingest_peak_rss_mb": info.get("ingest_peak_rss_mb"),
            "final_mb": round(final / 2 ** 20, 1), "peak_disk_mb": round(max(peak["disk"], final) / 2 ** 20, 1),
            "temp_ratio": round(max(0, peak["disk"] - final) / final, 2)}


_OPENER = r"""
import sys, time, json
from wiki_sim import WikiSim
import wiki_sim.index, wiki_sim.search, whoosh.index
t = time.perf_counter()
sim = WikiSim(sys.argv[1], search_processes=0)
seconds = time.perf_counter() - t
sim.search(["history of the river valley and its first settlements"])
mem = {}
for line in open("/proc/self/smaps_rollup"):
    parts = line.split()
    if parts[0] in ("Rss:", "Pss:", "Private_Clean:", "Private_Dirty:"):
        mem[parts[0][:-1]] = int(parts[1]) * 1024
print(json.dumps({"open_s": seconds, **mem}), flush=True)
sys.stdin.readline()
"""


def _open_process(code: Path, wiki: Path) -> tuple[subprocess.Popen, dict[str, Any]]:
    proc = subprocess.Popen([sys.executable, "-c", _OPENER, str(wiki)], cwd=code, env={**os.environ,
                            "PYTHONPATH": str(code)}, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"opening {wiki} failed")
    return proc, json.loads(line)


def _pss(pid: int) -> int:
    for line in open(f"/proc/{pid}/smaps_rollup"):
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    return 0


def measure_open(code: Path, wiki: Path) -> dict[str, Any]:
    procs = []
    try:
        first = _open_process(code, wiki)
        procs.append(first[0])
        second = _open_process(code, wiki)
        procs.append(second[0])
        procs.append(_open_process(code, wiki)[0])
        pss = sum(_pss(p.pid) for p in procs)
        m = second[1]
        return {"open_first_s": round(first[1]["open_s"], 2), "open_next_s": round(m["open_s"], 2),
                "open_rss_mb": round(m["Rss"] / 2 ** 20), "open_private_mb": round(
                    (m["Private_Clean"] + m["Private_Dirty"]) / 2 ** 20), "procs3_pss_mb": round(pss / 2 ** 20),
                "procs3_rss_mb": round(3 * m["Rss"] / 2 ** 20)}
    finally:
        for p in procs:
            p.stdin.close()
            p.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", default="10000", help="corpus sizes, comma-separated")
    ap.add_argument("--engines", default="whoosh", help="whoosh,tantivy")
    ap.add_argument("--wiki-dir", default="data/wiki", help="simulator whose sentences make the corpora")
    ap.add_argument("--memory-mb", type=int, default=1024)
    ap.add_argument("--code", action="append", default=[], help="another checkout to run side by side")
    ap.add_argument("--work", default=None, help="scratch directory (default: a new one under /tmp)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=1,
                    help="build each corpus this many times per code, alternating which code goes first")
    args = ap.parse_args(argv)
    codes = [Path.cwd()] + [Path(c).resolve() for c in args.code]
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="build-memory-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for pages in [int(p) for p in args.pages.split(",")]:
        corpus = work / f"corpus-{pages}.jsonl"
        if not corpus.is_file():
            make_corpus(Path(args.wiki_dir), pages, args.seed, corpus)
        for engine, rnd in [(e, r) for e in args.engines.split(",") for r in range(args.rounds)]:
            order = list(enumerate(codes))
            for k, code in (order if rnd % 2 == 0 else order[::-1]):
                out = work / f"wiki-{pages}-{engine}-{k}"
                row = {"pages": pages, "engine": engine, "code": "this" if k == 0 else str(code), "round": rnd,
                       "load": round(os.getloadavg()[0], 1)}
                row.update(run_build(code, corpus, out, engine, args.memory_mb))
                row.update(measure_open(code, out))
                rows.append(row)
                print("  ".join(f"{key}={value}" for key, value in row.items()), flush=True)
                shutil.rmtree(out, ignore_errors=True)
    print(json.dumps({"benchmark": "build_memory", "memory_mb": args.memory_mb, "load": os.getloadavg()[0],
                      "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
