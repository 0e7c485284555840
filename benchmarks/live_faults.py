"""Reliability of the managed live web under faults: ``python -m benchmarks.live_faults``.

2,000 tool calls (search, google_scholar, visit) from 8 workers (2 processes x 4 threads)
against the loopback fake providers (envs/live/fakeweb.py), which answer about 30% of
requests with a fault (429 with and without Retry-After, 500/503, resets, read timeouts,
slow replies, malformed JSON, truncated bodies, HTML error pages); a quarter of the way in,
Serper's credits run out for good. Every provider has a healthy fallback behind it except
the last in each chain, which still fails transiently like the others.

Reported: calls answered correctly (the right titles per query, the page's fact in the
visit), exceptions escaping the tools, the highest request rate each provider saw against
its configured limit (measured at the server), p50/p99 call latency, the cache hit rate, the
cache database's integrity check, whether any API key is in the cache files, and the layer's
own overhead on a cache hit. A table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import tempfile
import threading
import time
import traceback
from dataclasses import asdict
from pathlib import Path

from envs.live.cache import cache_files, integrity_check
from envs.live.config import LiveConfig
from envs.live.fakeweb import FakeWeb, default_corpus
from envs.live.stats import peak_rate, percentile

KEYS = {"serper": "bench-serper-key-4f8a2c", "serpapi": "bench-serpapi-key-9d1e7b",
        "jina": "bench-jina-key-3c6b0a", "summarizer": "bench-summ-key-7e2f51"}
QPS = {"serper": 40.0, "serpapi": 25.0, "wikipedia": 40.0, "jina": 30.0, "direct": 40.0, "summarizer": 40.0}
FAULT_KINDS = ("429", "429_retry_after", "500", "503", "reset", "timeout", "slow", "malformed_json", "truncated",
               "html_error")
# A direct fetch reads whatever page the site serves: a 200 "error page" or stray JSON is, to
# any client, that page's content. Those two faults are API-format faults, so the direct
# reader gets only the transport and status faults.
DIRECT_FAULTS = tuple(f for f in FAULT_KINDS if f not in ("malformed_json", "html_error"))
N_DOCS = 160
GOAL = "who founded it and when"


def make_plan(n_calls: int, seed: int, n_docs: int) -> list[tuple[str, list]]:
    """(tool, items) per call: queries are titles or two-word mixes drawn with a skew, so
    some repeat (cache hits) and most do not."""
    rng = random.Random(seed)
    pool = [f"doc:{i}" for i in range(n_docs)] + [f"mix:{i}:{j}" for i in range(n_docs) for j in range(2)]
    weights = [1.0 / (1 + i) ** 0.5 for i in range(len(pool))]
    rng.shuffle(pool)
    plan = []
    for _ in range(n_calls):
        r = rng.random()
        if r < 0.5:
            plan.append(("search", rng.choices(pool, weights, k=rng.randint(1, 3))))
        elif r < 0.65:
            plan.append(("google_scholar", rng.choices(pool, weights, k=rng.randint(1, 2))))
        else:
            pages = []
            for _ in range(rng.randint(1, 2)):
                if rng.random() < 0.03:
                    pages.append(("missing", rng.randint(1000, 1100), ""))
                else:
                    pages.append(("doc", rng.randrange(n_docs), rng.choice(["", "", ".pdf", ".txt"])))
            plan.append(("visit", pages))
    return plan


def _query(item: str, docs) -> str:
    kind, *rest = item.split(":")
    if kind == "doc":
        return docs[int(rest[0])].title
    doc = docs[int(rest[0])]
    return f"{doc.title.split()[0]} {['founded', 'river'][int(rest[1])]}"


def _check(tool: str, items: list, text: str, web: FakeWeb, base: str) -> bool:
    """Whether the observation is the right answer for the call."""
    from wiki_sim.focus import format_not_found

    if tool in ("search", "google_scholar"):
        sections = text.split("\n=======\n")
        if len(sections) != len(items):
            return False
        for item, section in zip(items, sections):
            expected = [d.title for d in web.rank(_query(item, web.docs), 10)]
            positions = [section.find(f"[{t}](") for t in expected]
            if -1 in positions or positions != sorted(positions):
                return False
        return True
    sections = text.split("\n=======\n")
    for (kind, index, suffix), section in zip(items, sections):
        url = f"{base}/pages/doc-{index}{suffix}"
        if kind == "missing":
            if section != format_not_found(url):
                return False
        elif web.docs[index].fact not in " ".join(section.split()):
            return False
    return len(sections) == len(items)


def worker_process(config_fields: dict, base: str, plans: list[list], results) -> None:
    """One process: a LiveWeb and 4 threads, each running its plan; puts one record per call."""
    from envs.live.manager import LiveWeb
    from envs.tools.search import LiveSearchTool
    from envs.tools.visit import LiveVisitTool

    live = LiveWeb(LiveConfig(**config_fields))
    tools = {"search": LiveSearchTool(live), "google_scholar": LiveSearchTool(live, scholar=True),
             "visit": LiveVisitTool(live)}
    web = FakeWeb(default_corpus(N_DOCS))  # not started: the same corpus, for the expected answers
    records: list[dict] = []
    lock = threading.Lock()

    def run(plan: list) -> None:
        for tool, items in plan:
            if tool == "visit":
                args = {"url": [f"{base}/pages/doc-{i}{s}" for _, i, s in items], "goal": GOAL}
            else:
                args = {"query": [_query(item, web.docs) for item in items]}
            start = time.perf_counter()
            try:
                result = tools[tool](args)
            except Exception:  # what the benchmark counts: nothing may escape a tool
                record = {"tool": tool, "exception": traceback.format_exc(limit=3), "latency": 0.0}
            else:
                record = {"tool": tool, "exception": None, "latency": time.perf_counter() - start,
                          "correct": _check(tool, items, result.text, web, base), "ok": result.ok,
                          "items": result.metadata.get("items", 0), "cache_hits": result.metadata.get("cache_hits", 0),
                          "degraded": result.metadata.get("degraded", False),
                          "fallback": result.metadata.get("fallback", False), "retries": result.metadata.get("retries", 0),
                          "sources": result.metadata.get("sources", [])}
                if not record["correct"]:
                    record["text"] = result.text[:400]
                    record["errors"] = result.metadata.get("errors", [])[:4]
            with lock:
                records.append(record)

    threads = [threading.Thread(target=run, args=(plan,)) for plan in plans]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    live.close()
    results.put(records)


def _hit_latencies(config_fields: dict, n: int) -> tuple[list[float], list[float]]:
    """Latencies of search and visit calls answered wholly from the cache."""
    from envs.live.manager import LiveWeb
    from envs.tools.search import LiveSearchTool
    from envs.tools.visit import LiveVisitTool

    live = LiveWeb(LiveConfig(**config_fields))
    search, visit = LiveSearchTool(live), LiveVisitTool(live)
    docs = default_corpus(N_DOCS)
    base = config_fields["base_urls"]["jina"].rsplit("/jina", 1)[0]
    warm = [d.title for d in docs[:10]]
    for q in warm:
        search({"query": [q]})
    for i in range(5):
        visit({"url": f"{base}/pages/doc-{i}", "goal": GOAL})
    times, visit_times = [], []
    for i in range(n):
        start = time.perf_counter()
        result = search({"query": [warm[i % len(warm)]]})
        elapsed = time.perf_counter() - start
        if result.metadata["cache_hit"]:
            times.append(elapsed)
    for i in range(50):
        start = time.perf_counter()
        result = visit({"url": f"{base}/pages/doc-{i % 5}", "goal": GOAL})
        if result.metadata["cache_hit"]:
            visit_times.append(time.perf_counter() - start)
    live.close()
    return times, visit_times


def cache_hit_overhead(config_fields: dict, n: int = 400) -> dict:
    """The layer's own cost on a cache hit (lookup, retry wrapper, parsing, formatting), with
    the process memo in front and with SQLite (requests-cache) alone, interleaved in rounds
    so both see the same machine load."""
    memo, sqlite, visit_memo, visit_sqlite = [], [], [], []
    for _ in range(3):
        t, v = _hit_latencies(config_fields, n // 3)
        memo += t
        visit_memo += v
        t, v = _hit_latencies({**config_fields, "memo_items": 0}, n // 3)
        sqlite += t
        visit_sqlite += v
    ms = lambda xs, q: 1000 * percentile(xs, q)  # noqa: E731
    return {"search_hits": len(memo) + len(sqlite), "search_p50_ms": ms(memo, 50), "search_p99_ms": ms(memo, 99),
            "sqlite_search_p50_ms": ms(sqlite, 50), "sqlite_search_p99_ms": ms(sqlite, 99),
            "visit_p50_ms": ms(visit_memo, 50), "sqlite_visit_p50_ms": ms(visit_sqlite, 50)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="tool calls in all")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4, help="worker threads per process")
    parser.add_argument("--fault-rate", type=float, default=0.3, help="share of requests that get a fault")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="live_faults_"))
    web = FakeWeb(default_corpus(N_DOCS), keys=KEYS, retry_after="0.2", slow_s=0.05, timeout_s=1.0, seed=args.seed).start()
    for provider in QPS:
        web.faults.random(provider, args.fault_rate, DIRECT_FAULTS if provider == "direct" else FAULT_KINDS)
    config = LiveConfig(serper_api_key=KEYS["serper"], serpapi_api_key=KEYS["serpapi"], jina_api_key=KEYS["jina"],
                        summarizer_api_key=KEYS["summarizer"], summarizer_model="fake-model", base_urls=web.base_urls(),
                        cache_path=str(tmp / "cache.sqlite"), limiter_dir=str(tmp / "limits"), qps=dict(QPS),
                        timeouts={p: 0.4 for p in QPS}, connect_timeout=0.5, deadline_s=10.0, max_attempts=6,
                        backoff_initial=0.05, backoff_max=0.4, backoff_jitter=0.05, retry_after_max=1.0,
                        exhausted_cooldown_s=3600, read_env=False, allow_private_urls=True)
    fields = asdict(config)
    n_workers = args.processes * args.threads
    plan = make_plan(args.calls, args.seed, len(web.docs))
    plans = [plan[w::n_workers] for w in range(n_workers)]

    # A quarter of the way through Serper's traffic, its credits run out for good.
    stop_watch = threading.Event()

    def exhaust_serper() -> None:
        while not stop_watch.wait(0.05):
            if len(web.requests("serper")) >= 250:
                web.faults.always("serper", "quota")
                return

    threading.Thread(target=exhaust_serper, daemon=True).start()
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    started = time.time()
    procs = [ctx.Process(target=worker_process, args=(fields, web.url, plans[p * args.threads:(p + 1) * args.threads],
                                                      results)) for p in range(args.processes)]
    for p in procs:
        p.start()
    records = [r for _ in procs for r in results.get(timeout=1800)]
    for p in procs:
        p.join(timeout=60)
    wall = time.time() - started
    stop_watch.set()

    log = web.requests()
    web.faults.clear()
    overhead = cache_hit_overhead(fields)
    web.stop()
    report(args, records, log, wall, config, overhead, tmp)


def report(args, records, log, wall, config: LiveConfig, overhead: dict, tmp: Path) -> None:
    answered = [r for r in records if r["exception"] is None]
    exceptions = len(records) - len(answered)
    correct = sum(r["correct"] for r in answered)
    latencies = [r["latency"] for r in answered]
    items = sum(r["items"] for r in answered)
    hits = sum(r["cache_hits"] for r in answered)
    faulted = sum(1 for _, _, fault, _ in log if fault)
    rates = {}
    for provider, limit in QPS.items():
        stamps = [t for t, p, _, _ in log if p == provider]
        window = max(10, int(2 * limit))
        rates[provider] = {"requests": len(stamps), "faulted": sum(1 for _, p, f, _ in log if p == provider and f),
                           "peak_qps": round(peak_rate(stamps, window), 2), "limit_qps": limit,
                           "ratio": round(peak_rate(stamps, window) / limit, 3)}
    blob = b"".join(p.read_bytes() for p in cache_files(config.resolved_cache_path()))
    key_in_cache = any(k.encode() in blob for k in KEYS.values())
    integrity = integrity_check(config.resolved_cache_path())

    print(f"live_faults: {len(records)} calls, {args.processes} processes x {args.threads} threads, "
          f"{len(log)} requests at the server, {faulted} faulted ({faulted / max(1, len(log)):.0%}), {wall:.1f}s")
    print(f"{'metric':44s} {'value':>14s}  target")
    rows = [
        ("calls answered correctly", f"{correct}/{len(records)}", "100%"),
        ("exceptions escaping the tools", str(exceptions), "0"),
        ("calls degraded (summarizer fell back)", str(sum(r['degraded'] for r in answered)), ""),
        ("calls that used a fallback source", str(sum(r['fallback'] for r in answered)), ""),
        ("call latency p50 / p99 (s)", f"{percentile(latencies, 50):.3f} / {percentile(latencies, 99):.3f}", ""),
        ("cache hit rate (queries and pages)", f"{hits / max(1, items):.1%}", ""),
        ("cache integrity_check", integrity, "ok"),
        ("API key found in the cache files", str(key_in_cache), "False"),
        ("cache-hit search call p50 / p99 (ms)", f"{overhead['search_p50_ms']:.2f} / {overhead['search_p99_ms']:.2f}",
         "p50 < 2"),
        ("  same, SQLite cache alone (no memo)",
         f"{overhead['sqlite_search_p50_ms']:.2f} / {overhead['sqlite_search_p99_ms']:.2f}", ""),
        ("cache-hit visit call p50, memo / SQLite (ms)",
         f"{overhead['visit_p50_ms']:.2f} / {overhead['sqlite_visit_p50_ms']:.2f}", ""),
    ]
    for name, value, target in rows:
        print(f"{name:44s} {value:>14s}  {target}")
    print(f"\n{'provider':12s} {'requests':>9s} {'faulted':>8s} {'peak qps':>9s} {'limit':>6s} {'ratio':>6s}")
    for provider, r in rates.items():
        print(f"{provider:12s} {r['requests']:9d} {r['faulted']:8d} {r['peak_qps']:9.2f} {r['limit_qps']:6.0f} {r['ratio']:6.3f}")
    for r in [r for r in records if r["exception"]][:3]:
        print("exception:", r["exception"])
    for r in [r for r in answered if not r["correct"]][:5]:
        print(f"wrong answer ({r['tool']}, sources {r['sources']}, errors {r['errors']}):\n  {r['text'][:300]!r}")
    print(json.dumps({
        "benchmark": "live_faults", "calls": len(records), "processes": args.processes, "threads": args.threads,
        "server_requests": len(log), "faulted_share": round(faulted / max(1, len(log)), 3),
        "correct_share": round(correct / max(1, len(records)), 4), "exceptions": exceptions,
        "latency_p50_s": round(percentile(latencies, 50), 4), "latency_p99_s": round(percentile(latencies, 99), 4),
        "cache_hit_rate": round(hits / max(1, items), 4), "integrity_check": integrity, "key_in_cache": key_in_cache,
        "max_rate_ratio": max(r["ratio"] for r in rates.values()), "rates": rates,
        "cache_hit_overhead_p50_ms": round(overhead["search_p50_ms"], 3),
        "cache_hit_overhead_p99_ms": round(overhead["search_p99_ms"], 3),
        "sqlite_hit_overhead_p50_ms": round(overhead["sqlite_search_p50_ms"], 3),
        "cache_hit_visit_p50_ms": round(overhead["visit_p50_ms"], 3),
        "sqlite_hit_visit_p50_ms": round(overhead["sqlite_visit_p50_ms"], 3), "wall_s": round(wall, 1),
    }))


if __name__ == "__main__":
    main()
