"""Scale: the simulator's two engines against SQLite FTS5, bm25s and plain tantivy at 10k-1M pages.

Corpora of ``--sizes`` pages recombined from real sentences (``benchmarks/_scale_corpus.py``: 3-8
sentences of the default corpus per page, about 116 words, titles ``Base (word word)``), the same
pages for every system. Everything is measured from the outside, one process tree per system:

- build: the simulator through ``websailor wiki build --source jsonl --engine whoosh|tantivy``
  (with ``--memory-mb`` when the CLI has it), the baselines through ``benchmarks._scale_systems
  build``; wall time, peak memory of the process tree (PSS summed over its processes, polled from
  /proc every 0.2 s; RSS beside it), peak disk of the build's folder (its ``TMPDIR`` inside it)
  and final disk (du); *temporary* disk = peak - final (the free space a build needs beyond its
  result);
- open: time to open and answer a first query, and the memory of the process then;
- queries: each system in its own serving process, all alive at once, queries interleaved
  system by system; p50/p99 (search call with snippets, timed inside the server) and recall@10
  against the query's known page, per family (``title``, ``long``, ``misspelt``) and overall;
  ``fts5`` and ``fts5-stopwords`` serve one FTS5 index;
- environment: ``gym.make("websailor/WikiSim-v0")`` played by the scripted heuristic agent, 1
  environment and an ``AsyncVectorEnv`` of 4, each sub-environment playing its share of
  ``--tasks`` distinct target pages in order (no task twice while they last, so no search comes
  from the simulator's cache): sub-environment steps per second, creation time, peak memory of
  the process tree;
- fits: per system, least squares ``y = a + b * words`` over the sizes (build s, peak MB, disk,
  p50), extrapolated to wiki-18 (21M passages of 100 words = 2.1e9 words, about 18M of these pages).

Targets (issue 23, at 1M pages on 2 cores; printed met/MISSED at the largest size run, with the
size): build <= 10 min in <= 2 GB peak and temporary disk <= 2x final (each engine);
simulator-tantivy p50 <= 5 ms with recall@10 >= the better FTS5's; 4 async sub-environments in
<= 2x the memory of one; wiki-18 extrapolated build <= 3 h in <= 8 GB.

Usage: ``python -m benchmarks.scale [--sizes 10000,100000] [--sentences-from data/wiki] [--quick]``
(``--sizes 1000000`` for the big run). Prints a table, then one line of JSON.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks._scale_corpus import FAMILIES, family_queries, load_pool, write_corpus, write_tasks
from wiki_sim.records import normalize_title

REPO = Path(__file__).resolve().parents[1]
SIMULATORS = {"simulator": "whoosh", "simulator-tantivy": "tantivy"}
BASELINES = ("fts5", "tantivy", "bm25s")
SERVED = ("simulator", "simulator-tantivy", "fts5", "fts5-stopwords", "tantivy", "bm25s")
WIKI18_WORDS = 21_000_000 * 100
MB = 1024 * 1024


# --- measuring a process tree from the outside --------------------------------------------

def _proc_memory(pid: int) -> tuple[int, int]:
    """(PSS, RSS) bytes of one process from /proc/PID/smaps_rollup (0, 0 once it is gone)."""
    pss = rss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
                elif line.startswith("Rss:"):
                    rss = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return pss, rss


def _children(pid: int) -> list[int]:
    """``pid`` and all its descendants (from /proc/*/stat parent ids)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(parents.get(p, []))
    return out


def tree_memory(pid: int) -> tuple[int, int]:
    """(PSS, RSS) summed over ``pid``'s process tree: PSS counts a page shared by n processes 1/n each."""
    total_pss = total_rss = 0
    for p in _children(pid):
        pss, rss = _proc_memory(p)
        total_pss, total_rss = total_pss + pss, total_rss + rss
    return total_pss, total_rss


def disk_usage(path: Path) -> int:
    """Bytes allocated under ``path`` (st_blocks, as du counts), 0 if it is gone; tolerant of files vanishing."""
    total = 0
    stack = [str(path)]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for e in it:
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(e.path)
                        else:
                            total += e.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        continue
        except OSError:
            continue
    return total


class Monitor:
    """Polls a process tree's memory (and a folder's disk use) until stopped; keeps the peaks."""

    def __init__(self, pid: int, folder: Path | None = None, interval: float = 0.2):
        self.pid, self.folder, self.interval = pid, folder, interval
        self.peak_pss = self.peak_rss = self.peak_disk = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            pss, rss = tree_memory(self.pid)
            self.peak_pss, self.peak_rss = max(self.peak_pss, pss), max(self.peak_rss, rss)
            if self.folder is not None:
                self.peak_disk = max(self.peak_disk, disk_usage(self.folder))
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _env(tmpdir: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    return env


def timed_build(cmd: list[str], area: Path, result: Path) -> dict[str, Any]:
    """Run a build command with its TMPDIR inside ``area``; peaks of memory and of ``area``'s disk."""
    tmpdir = area / "tmp"
    tmpdir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, env=_env(tmpdir), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    mon = Monitor(proc.pid, area)
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    mon.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"build failed ({proc.returncode}): {' '.join(cmd)}\n{(err or out)[-2000:]}")
    final = disk_usage(result)
    peak = max(mon.peak_disk, disk_usage(area))
    return {"build_s": round(wall, 2), "peak_pss_mb": round(mon.peak_pss / MB, 1),
            "peak_rss_mb": round(mon.peak_rss / MB, 1), "final_mb": round(final / MB, 1),
            "peak_disk_mb": round(peak / MB, 1), "temp_mb": round(max(0, peak - final) / MB, 1)}


def build_all(corpus: Path, work: Path, systems: list[str], memory_mb: int | None) -> dict[str, dict[str, Any]]:
    builds: dict[str, dict[str, Any]] = {}
    for system in systems:
        area = work / system
        if system in SIMULATORS:
            result = area / "wiki"
            cmd = [sys.executable, "-m", "websailor.cli", "wiki", "build", "--source", "jsonl", str(corpus),
                   "--out", str(result), "--no-progress", "--workers", "2", "--engine", SIMULATORS[system]]
            if memory_mb:
                cmd += ["--memory-mb", str(memory_mb)]
        else:
            result = area / "index"
            cmd = [sys.executable, "-m", "benchmarks._scale_systems", "build", system, str(corpus), str(result)]
        builds[system] = {**timed_build(cmd, area, result), "path": str(result)}
        if system in SIMULATORS:  # the build's own stage times, as its build.json records them
            info = json.loads((result / "build.json").read_text(encoding="utf-8"))
            builds[system]["stages_s"] = info.get("durations_s", {})
        print(f"  built {system}: {builds[system]}", file=sys.stderr, flush=True)
    return builds


# --- serving and querying -------------------------------------------------------------------

class Server:
    """One serving child process (``_scale_systems serve``)."""

    def __init__(self, system: str, path: str):
        self.system = system
        self.proc = subprocess.Popen([sys.executable, "-m", "benchmarks._scale_systems", "serve", system, path],
                                     cwd=REPO, env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        start = time.perf_counter()
        ready = self._read()
        self.open = {"ready_s": round(time.perf_counter() - start, 3), **ready}
        pss, rss = tree_memory(self.proc.pid)
        self.open.update(pss_mb=round(pss / MB, 1), rss_mb=round(rss / MB, 1))

    def _read(self) -> dict[str, Any]:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.system} server ended (exit {self.proc.wait()})")
        return json.loads(line)

    def ask(self, query: str) -> dict[str, Any]:
        self.proc.stdin.write(json.dumps({"q": query}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> dict[str, float]:
        pss, rss = tree_memory(self.proc.pid)
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        return {"pss_mb": round(pss / MB, 1), "rss_mb": round(rss / MB, 1)}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def query_all(paths: dict[str, str], families: dict[str, list[tuple[str, str]]]) -> dict[str, dict[str, Any]]:
    servers = {}
    try:
        for system, path in paths.items():
            servers[system] = Server(system, path)
        warm = [q for qs in families.values() for q, _ in qs[:10]]
        for q in warm:
            for s in servers.values():
                s.ask(q)
        lat = {s: {f: [] for f in families} for s in servers}
        hit = {s: {f: 0 for f in families} for s in servers}
        for family, queries in families.items():
            for query, answer in queries:
                for system, server in servers.items():
                    r = server.ask(query)
                    lat[system][family].append(r["ms"])
                    hit[system][family] += normalize_title(answer) in {normalize_title(t) for t in r["titles"]}
        out = {}
        for system, server in servers.items():
            fam = {f: {"recall_at_10": round(hit[system][f] / len(qs), 4), "p50_ms": round(statistics.median(qs_l), 3),
                       "p99_ms": round(percentile(qs_l, 0.99), 3)}
                   for f, qs in families.items() if (qs_l := lat[system][f])}
            every = [x for f in families for x in lat[system][f]]
            n = sum(len(qs) for qs in families.values())
            out[system] = {"open": server.open, "families": fam,
                           "all": {"recall_at_10": round(sum(hit[system].values()) / n, 4),
                                   "p50_ms": round(statistics.median(every), 3),
                                   "p99_ms": round(percentile(every, 0.99), 3)}}
        for system, server in list(servers.items()):
            out[system]["after_queries"] = server.close()
            del servers[system]
        return out
    finally:
        for server in servers.values():
            server.proc.kill()


def env_steps(wiki: str, tasks: Path, num_envs: int, seconds: float) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks._scale_systems", "env", wiki, str(tasks), str(num_envs), str(seconds)]
    proc = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    mon = Monitor(proc.pid)
    out, err = proc.communicate()
    mon.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"env run failed ({proc.returncode}): {err[-2000:]}")
    return {**json.loads(out.strip().splitlines()[-1]), "peak_pss_mb": round(mon.peak_pss / MB, 1),
            "peak_rss_mb": round(mon.peak_rss / MB, 1)}


# --- one size, fits, targets ----------------------------------------------------------------

def run_size(pool, n_pages: int, args: argparse.Namespace, systems: list[str], root: Path) -> dict[str, Any]:
    start = time.perf_counter()
    work = root / f"n{n_pages}"
    work.mkdir(parents=True)
    corpus = work / "corpus.jsonl"
    t = time.perf_counter()
    targets, stats = write_corpus(pool, n_pages, corpus, queries=max(args.queries, args.tasks), seed=args.seed)
    stats["write_s"] = round(time.perf_counter() - t, 2)
    families = family_queries(targets[:args.queries])  # a uniform sample too: targets are a random set
    tasks = work / "tasks.jsonl"
    write_tasks(targets[:args.tasks], tasks)
    builds = build_all(corpus, work, [s for s in (*SIMULATORS, *BASELINES) if s in systems or
                                      (s == "fts5" and "fts5-stopwords" in systems)], args.memory_mb)
    paths = {s: builds["fts5" if s == "fts5-stopwords" else s]["path"] for s in SERVED if s in systems}
    queries = query_all(paths, families)
    env: dict[str, dict[str, Any]] = {}
    for system in SIMULATORS:
        if system in systems:
            env[system] = {str(n): env_steps(builds[system]["path"], tasks, n, args.env_seconds) for n in (1, 4)}
            print(f"  env {system}: {env[system]}", file=sys.stderr, flush=True)
    if args.keep:
        print(f"  kept: {', '.join(str(work / s) for s in builds)}", file=sys.stderr, flush=True)
    else:
        for system in builds:
            shutil.rmtree(work / system, ignore_errors=True)
    corpus.unlink()
    return {"pages": n_pages, "corpus": stats, "queries": {f: len(q) for f, q in families.items()},
            "builds": {s: {k: v for k, v in b.items() if k != "path"} for s, b in builds.items()},
            "search": queries, "env": env, "wall_s": round(time.perf_counter() - start, 1),
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float] | None:
    """Least squares ``(a, b)`` of ``y = a + b x``; None with fewer than 2 distinct x."""
    if len(set(xs)) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


FIT_METRICS = {"build_s": lambda r, s: r["builds"].get(s, {}).get("build_s"),
               "peak_pss_mb": lambda r, s: r["builds"].get(s, {}).get("peak_pss_mb"),
               "final_mb": lambda r, s: r["builds"].get(s, {}).get("final_mb"),
               "temp_mb": lambda r, s: r["builds"].get(s, {}).get("temp_mb"),
               "open_pss_mb": lambda r, s: r["search"].get(s, {}).get("open", {}).get("pss_mb"),
               "p50_ms": lambda r, s: r["search"].get(s, {}).get("all", {}).get("p50_ms")}


def fits(runs: list[dict[str, Any]], systems: list[str]) -> dict[str, dict[str, Any]]:
    """Per system and metric: ``y = a + b * words`` and its value at 1M pages and at wiki-18's 2.1e9 words."""
    out: dict[str, dict[str, Any]] = {}
    words_per_page = statistics.fmean(r["corpus"]["words_per_page"] for r in runs)
    for system in systems:
        for metric, get in FIT_METRICS.items():
            points = [(r["corpus"]["words"], get(r, system)) for r in runs]
            points = [(x, y) for x, y in points if y is not None]
            fit = linear_fit([x for x, _ in points], [y for _, y in points])
            if fit:
                a, b = fit
                out.setdefault(system, {})[metric] = {
                    "a": round(a, 4), "b_per_million_words": round(b * 1e6, 4),
                    "at_1m_pages": round(a + b * 1e6 * words_per_page, 2), "at_wiki18": round(a + b * WIKI18_WORDS, 1)}
    return out


def targets(runs: list[dict[str, Any]], fitted: dict[str, dict[str, Any]]) -> dict[str, bool]:
    last = runs[-1]
    out: dict[str, bool] = {}
    for system, engine in SIMULATORS.items():
        b = last["builds"].get(system)
        if b:
            out[f"build_le_10min_{engine}"] = b["build_s"] <= 600
            out[f"build_peak_le_2GB_{engine}"] = b["peak_pss_mb"] <= 2048
            out[f"temp_disk_le_2x_final_{engine}"] = b["temp_mb"] <= 2 * b["final_mb"]
        e = last["env"].get(system)
        if e:
            out[f"async4_memory_le_2x_one_{engine}"] = e["4"]["peak_pss_mb"] <= 2 * e["1"]["peak_pss_mb"]
        f = fitted.get(system, {})
        if "build_s" in f:
            out[f"wiki18_build_le_3h_{engine}"] = f["build_s"]["at_wiki18"] <= 3 * 3600
            out[f"wiki18_peak_le_8GB_{engine}"] = f["peak_pss_mb"]["at_wiki18"] <= 8192
    s = last["search"]
    if "simulator-tantivy" in s:
        out["tantivy_engine_p50_le_5ms"] = s["simulator-tantivy"]["all"]["p50_ms"] <= 5
        fts = [s[x]["all"]["recall_at_10"] for x in ("fts5", "fts5-stopwords") if x in s]
        if fts:
            out["tantivy_engine_recall_ge_fts5"] = s["simulator-tantivy"]["all"]["recall_at_10"] >= max(fts)
    return out


def print_table(r: dict[str, Any]) -> None:
    for run in r["runs"]:
        c = run["corpus"]
        print(f"\n{run['pages']} pages ({c['words']} words, {c['words_per_page']}/page, from {c['sentence_pool']} "
              f"real sentences); {run['wall_s']} s; load average {run['load_average']}")
        print(f"{'system':<19}{'build s':>9}{'peak MB':>9}{'final MB':>9}{'temp MB':>9}{'open s':>8}{'open MB':>8}"
              f"{'p50 ms':>8}{'p99 ms':>8}{'R@10':>7}  " + "  ".join(f"{f} p50/p99/R" for f in FAMILIES))
        for system in SERVED:
            b = run["builds"].get("fts5" if system == "fts5-stopwords" else system)
            s = run["search"].get(system)
            if not s:
                continue
            fam = "  ".join(f"{x['p50_ms']:.1f}/{x['p99_ms']:.0f}/{x['recall_at_10']:.2f}"
                            for f in FAMILIES if (x := s["families"].get(f)))
            print(f"{system:<19}{b['build_s']:>9.1f}{b['peak_pss_mb']:>9.0f}{b['final_mb']:>9.0f}{b['temp_mb']:>9.0f}"
                  f"{s['open']['ready_s']:>8.2f}{s['open']['pss_mb']:>8.0f}{s['all']['p50_ms']:>8.2f}"
                  f"{s['all']['p99_ms']:>8.1f}{s['all']['recall_at_10']:>7.3f}  {fam}")
        for system, e in run["env"].items():
            print(f"env {system}: " + "; ".join(f"{n} sub-env: {x['steps_per_s']} steps/s, {x['peak_pss_mb']:.0f} MB, "
                                              f"created in {x['create_s']} s, success {x['success']}"
                                              for n, x in e.items()))
    if r["fits"]:
        print("\nlinear fits over words (a + b per million words); at 1M pages; at wiki-18 (2.1e9 words)")
        for system, metrics in r["fits"].items():
            print(f"{system:<19}" + "; ".join(f"{m} {v['at_1m_pages']} / {v['at_wiki18']}" for m, v in metrics.items()))
    if r.get("estimated_1m_run_s"):
        print(f"estimated duration of `--sizes 1000000` (fit of this run's wall time): {r['estimated_1m_run_s']:.0f} s")
    print(f"\ntargets (issue 23: at 1M pages; this run's largest size: {r['targets_at_pages']} pages)")
    for key, ok in r["targets"].items():
        print(f"  {key}: {'met' if ok else 'MISSED'}")
    for system, why in r["left_out"].items():
        print(f"left out {system}: {why}")


def _sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(x.replace("_", "")) for x in text.split(",") if x.strip()})
    except ValueError:
        raise SystemExit(f"--sizes: expected page counts separated by commas (e.g. 10000,100000), got {text!r}") from None
    if not sizes or sizes[0] < 100:
        raise SystemExit(f"--sizes: each size must be >= 100 pages, got {text!r}")
    return sizes


def _cli_has(option: str) -> bool:
    help_text = subprocess.run([sys.executable, "-m", "websailor.cli", "wiki", "build", "--help"], cwd=REPO, env=_env(),
                               capture_output=True, text=True, timeout=120).stdout
    return option in help_text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="corpus sizes in pages, e.g. 10000,100000 or 1000000")
    parser.add_argument("--sentences-from", action="append", default=None, metavar="WIKI_DIR",
                        help="simulator(s) whose pages give the sentences (default: data/wiki)")
    parser.add_argument("--queries", type=int, default=200, help="queries per family (target pages)")
    parser.add_argument("--tasks", type=int, default=20_000,
                        help="distinct tasks (pages) for the env runs, each played at most once while they last")
    parser.add_argument("--env-seconds", type=float, default=20.0, help="seconds of scripted-agent steps per env run")
    parser.add_argument("--memory-mb", type=int, default=1536,
                        help="passed to `wiki build --memory-mb` when the CLI has that option")
    parser.add_argument("--systems", default=",".join(SERVED))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work-dir", default=None, help="where corpora and indexes are built (default: a temp dir)")
    parser.add_argument("--quick", action="store_true", help="2,000 pages, 12 queries per family, 2 s env runs")
    parser.add_argument("--keep", action="store_true",
                        help="keep what was built under --work-dir (e.g. the 1M-page simulator for "
                             "benchmarks.synth_scale --large-wiki); needs --work-dir")
    args = parser.parse_args(argv)
    if args.keep and not args.work_dir:
        raise SystemExit("--keep needs --work-dir: say where the builds should stay")
    if args.quick:
        args.sizes, args.queries, args.env_seconds, args.tasks = "2000", 12, 2.0, 2000
    sizes = _sizes(args.sizes)
    if args.queries < 1 or args.tasks < 1 or not args.env_seconds > 0:
        raise SystemExit(f"--queries and --tasks must be >= 1 and --env-seconds > 0, got {args.queries}, "
                         f"{args.tasks}, {args.env_seconds}")
    if args.work_dir:
        work = Path(args.work_dir)
        if work.exists() and not work.is_dir():
            raise SystemExit(f"--work-dir {work}: not a folder; give a folder (it is created when missing)")
        work.mkdir(parents=True, exist_ok=True)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if set(systems) - set(SERVED) or not systems:
        raise SystemExit(f"--systems: choose from {', '.join(SERVED)}; got {args.systems}")
    left_out = {}
    for system, module in (("simulator-tantivy", "tantivy"), ("tantivy", "tantivy"), ("bm25s", "bm25s")):
        if system in systems and importlib.util.find_spec(module) is None:
            systems.remove(system)
            left_out[system] = f"needs {module}: pip install -e '.[bench]'"
    args.memory_mb = args.memory_mb if _cli_has("--memory-mb") else None
    pool = load_pool([Path(d) / "store.sqlite" for d in (args.sentences_from or ["data/wiki"])])
    root = Path(tempfile.mkdtemp(prefix="bench-scale-", dir=args.work_dir))
    runs = []
    try:
        for n in sizes:
            print(f"size {n}...", file=sys.stderr, flush=True)
            runs.append(run_size(pool, n, args, systems, root))
            print(json.dumps({"size_done": runs[-1]}), file=sys.stderr, flush=True)  # kept if a later size is cut short
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    fitted = fits(runs, systems)
    wall = linear_fit([r["pages"] for r in runs], [r["wall_s"] for r in runs])
    result = {"benchmark": "scale", "sizes": sizes, "systems": systems, "left_out": left_out,
              "build_memory_mb": args.memory_mb, "cores": os.cpu_count(), "runs": runs, "fits": fitted,
              "estimated_1m_run_s": round(wall[0] + wall[1] * 1_000_000) if wall else None,
              "targets_at_pages": sizes[-1], "targets": targets(runs, fitted)}
    print_table(result)
    print(json.dumps(result))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
