"""Hostile web replies against the managed live web: ``python -m benchmarks.hostile``.

Cases, each a ``visit`` (or, for the echo, a ``search`` and a ``visit``) served by the
loopback fake web (envs/live/fakeweb.py, envs/live/hostile.py), side by side with a normal
page in one run:

- ``normal``: an ordinary HTML page (the reference);
- ``large_ok``: a legitimate 7 MiB page, just under the cap (read, summarized and cached);
- ``bomb``: about 1 MiB of gzip that inflates to 1 GiB;
- ``huge_declared`` / ``huge_streamed``: 200 MiB of HTML, with and without Content-Length;
- ``dribble``: declares 1000 bytes, sends one every 2 s;
- ``internal``: an internal address (127.0.0.2, spelled ``0x7f.0.0.2``);
- ``redirect_internal``: a page that redirects to the internal address;
- ``echo_key``: providers and reader that echo each request, keys included.

The fake web at 127.0.0.1 plays the public internet (the policy is told 127.0.0.1 is public);
the "internal" service listens on 127.0.0.2. Each case runs in a fresh process with its own
cache database, for two systems: ``websailor`` (LiveWeb with the default policy,
``max_page_bytes`` 8 MB, a 10 s visit deadline) and ``requests`` (what the layer did before:
``requests.get`` with a (5 s, 20 s) timeout, no cap; killed after 40 s). Reported per case:
seconds to the agent's answer, peak memory growth of the process during the call (the RSS
high-water mark, reset just before the call, minus the RSS then), bytes of the reply that reached the cache, API keys (in any
spelling) in the observation or the cache, and requests the internal service received.
Targets (websailor): answered within the deadline + 2 s, peak growth < 2 x max_page_bytes +
100 MB, 0 hostile bytes cached, 0 keys, 0 internal requests. A table, then one JSON line.

Usage: ``python -m benchmarks.hostile [--cases normal,bomb,...]`` (default: every case).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import tempfile
import time
from pathlib import Path

KEYS = {"serper": "bench-serper-key-4f8a2c", "serpapi": "bench-serpapi-key-9d1e7b",
        "jina": "bench-jina-key-3c6b0a", "summarizer": "bench-summ-key-7e2f51"}
MAX_PAGE_BYTES = 8_000_000
DEADLINE_S = 10.0
BASELINE_KILL_S = 40.0
GOAL = "who founded it and when"


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _rss() -> int:
    """RSS now, after resetting the high-water mark (so :func:`_peak` measures from here)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:  # then the peak since the process started (over-, never under-estimates growth)
        pass
    return _status("VmRSS")


def _peak() -> int:
    """The RSS high-water mark since :func:`_rss` reset it."""
    return _status("VmHWM")


def run_websailor(case: dict, base_urls: dict, cache_path: str, out) -> None:
    """One case through LiveWeb's tools, in this (fresh) process."""
    from envs.live import netpolicy
    from envs.live.config import LiveConfig
    from envs.live.manager import LiveWeb
    from envs.tools.search import LiveSearchTool
    from envs.tools.visit import LiveVisitTool

    real = netpolicy.address_kind
    netpolicy.address_kind = lambda ip: None if str(ip) == "127.0.0.1" else real(ip)  # the "internet"
    config = LiveConfig(serper_api_key=KEYS["serper"], serpapi_api_key=KEYS["serpapi"], jina_api_key=KEYS["jina"],
                        base_urls=base_urls, cache_path=cache_path, limiter_dir=cache_path + ".limits",
                        deadline_s=DEADLINE_S, max_page_bytes=MAX_PAGE_BYTES, read_env=False,
                        search_sources=("serper", "serpapi"), max_attempts=2, backoff_initial=0.05)
    live = LiveWeb(config)
    visit, search = LiveVisitTool(live), LiveSearchTool(live)
    before = _rss()
    start = time.perf_counter()
    texts = []
    if case["kind"] == "search+visit":
        for sources in (("serper",), ("serpapi",)):
            live.search_chain = [a for a in live.search_chain if a.name in sources]
            texts.append(search({"query": [case["query"]]}).text)
            live.search_chain = __import__("envs.live.adapters.search", fromlist=["x"]).search_adapters(
                live.transport, config)
    result = visit({"url": [case["url"]], "goal": GOAL})
    texts.append(result.text)
    elapsed = time.perf_counter() - start
    out.put({"seconds": elapsed, "peak_growth": max(0, _peak() - before), "ok": result.ok,
             "text": "\n".join(texts), "summary": _summary(result.text)})
    live.close()


def run_requests(case: dict, out) -> None:
    """The same URL with plain requests (no cap, per-read timeout, redirects followed)."""
    import requests

    before = _rss()
    start = time.perf_counter()
    try:
        response = requests.get(case["url"], timeout=(5, 20))
        text, ok = response.text, response.ok
    except requests.RequestException as e:
        text, ok = f"{type(e).__name__}", False
    out.put({"seconds": time.perf_counter() - start, "peak_growth": max(0, _peak() - before), "ok": ok,
             "text": text[:100_000], "summary": _summary(text)})


def _summary(text: str) -> str:
    return " ".join(text.split())[:70]


def _in_process(target, args: tuple, kill_after: float) -> dict:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, out), daemon=True)
    start = time.perf_counter()
    proc.start()
    try:
        return out.get(timeout=kill_after)
    except Exception:
        return {"seconds": time.perf_counter() - start, "peak_growth": None, "ok": False, "text": "",
                "summary": f"(killed after {kill_after:.0f} s)"}
    finally:
        proc.kill()
        proc.join()


def _cache_bytes(path: Path, needle: str) -> int:
    """Bytes of cached replies whose URL contains ``needle`` (0 when nothing or no file)."""
    if not path.exists():
        return 0
    from envs.live.cache import open_cache

    cache = open_cache(path)
    try:
        return sum(len(r.content or b"") for r in cache.filter(valid=True, expired=True) if needle in r.url)
    finally:
        cache.close()


def _keys_in(blob: bytes) -> int:
    import base64

    found = 0
    for key in KEYS.values():
        spellings = [key.encode(), "".join(f"%{b:02X}" for b in key.encode()).encode()]
        spellings += [base64.b64encode((p + key).encode())[s:s + 12] for p, s in (("", 0), ("u:", 3), ("us:", 4))]
        found += sum(blob.count(s) for s in spellings)
    return found


def cases(web, internal) -> list[dict]:
    port2 = internal.url.rsplit(":", 1)[1]
    return [
        {"name": "normal", "kind": "visit", "url": web.page_url("doc-0"), "needle": "/pages/doc-0"},
        {"name": "large_ok", "kind": "visit", "url": f"{web.url}/hostile/huge?mib=7&length=1", "needle": "/hostile/"},
        {"name": "bomb", "kind": "visit", "url": f"{web.url}/hostile/bomb?mib=1024", "needle": "/hostile/"},
        {"name": "huge_declared", "kind": "visit", "url": f"{web.url}/hostile/huge?mib=200&length=1", "needle": "/hostile/"},
        {"name": "huge_streamed", "kind": "visit", "url": f"{web.url}/hostile/huge?mib=200&length=0", "needle": "/hostile/"},
        {"name": "dribble", "kind": "visit", "url": f"{web.url}/hostile/dribble?n=1000&every=2", "needle": "/hostile/"},
        {"name": "internal", "kind": "visit", "url": f"http://0x7f.0.0.2:{port2}/pages/doc-1", "needle": "doc-1"},
        {"name": "redirect_internal", "kind": "visit", "needle": "doc-2",
         "url": f"{web.url}/hostile/redirect?to=http://127.0.0.2:{port2}/pages/doc-2"},
        {"name": "echo_key", "kind": "search+visit", "url": web.page_url("doc-3"), "query": web.docs[3].title,
         "needle": "\0"},
    ]


CASE_NAMES = ("normal", "large_ok", "bomb", "huge_declared", "huge_streamed", "dribble", "internal",
              "redirect_internal", "echo_key")


def main(argv: list[str] | None = None) -> None:
    from envs.live.cache import cache_files
    from envs.live.fakeweb import FakeWeb
    from envs.live.hostile import gzip_bomb

    parser = argparse.ArgumentParser(prog="python -m benchmarks.hostile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASE_NAMES),
                        help=f"comma-separated cases to run (default: all of {','.join(CASE_NAMES)})")
    args = parser.parse_args(argv)
    chosen = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(chosen) - set(CASE_NAMES))
    if unknown or not chosen:
        parser.error(f"--cases: expected some of {','.join(CASE_NAMES)}, got {args.cases!r}")
    tmp = Path(tempfile.mkdtemp(prefix="hostile_"))
    if "bomb" in chosen:
        gzip_bomb(1024)  # built before any clock starts
    rows = []
    with FakeWeb(keys=KEYS, timeout_s=1.0) as web, FakeWeb(host="127.0.0.2") as internal:
        base_urls = web.base_urls()
        base_urls.pop("summarizer")
        for case in cases(web, internal):
            if case["name"] not in chosen:
                continue
            web.echo = case["name"] == "echo_key"
            for system in ("websailor", "requests"):
                if system == "requests" and case["kind"] != "visit":
                    continue
                internal.clear_log()
                db = tmp / f"{case['name']}-{system}.sqlite"
                if system == "websailor":
                    result = _in_process(run_websailor, (case, base_urls, str(db)), BASELINE_KILL_S)
                else:
                    result = _in_process(run_requests, (case,), BASELINE_KILL_S)
                blob = b"".join(p.read_bytes() for p in cache_files(db))
                needle = case["needle"]
                rows.append({"case": case["name"], "system": system, "seconds": round(result["seconds"], 2),
                             "peak_growth_mb": None if result["peak_growth"] is None else round(result["peak_growth"] / 1e6, 1),
                             "answered": bool(result["summary"]) and "killed" not in result["summary"],
                             "page_ok": result["ok"],
                             "cached_bytes": _cache_bytes(db, needle) if system == "websailor" and needle != "\0" else 0,
                             "keys": _keys_in(result["text"].encode()) + _keys_in(blob),
                             "internal_requests": len(internal.requests()),
                             "echo_arrived": "You sent" in result["text"] or "You asked" in result["text"],
                             "observation": result["summary"]})
    _report(rows)


def _report(rows: list[dict]) -> None:
    header = f"{'case':<18} {'system':<10} {'answer s':>8} {'peak MB':>8} {'cached B':>9} {'keys':>4} {'int.req':>7}  observation"
    print(header)
    print("-" * len(header))
    for r in rows:
        peak = "-" if r["peak_growth_mb"] is None else f"{r['peak_growth_mb']:.1f}"
        print(f"{r['case']:<18} {r['system']:<10} {r['seconds']:>8.2f} {peak:>8} {r['cached_bytes']:>9} {r['keys']:>4} "
              f"{r['internal_requests']:>7}  {r['observation']}")
    ours = [r for r in rows if r["system"] == "websailor"]
    hostile = [r for r in ours if r["case"] not in ("normal", "large_ok")]
    limit_mb = (2 * MAX_PAGE_BYTES + 100e6) / 1e6
    targets = {
        "answered_within_deadline_plus_2s": all(r["answered"] and r["seconds"] <= DEADLINE_S + 2 for r in ours),
        "peak_growth_under_2x_max_page_plus_100mb": all((r["peak_growth_mb"] or 0) < limit_mb for r in ours),
        "no_hostile_bytes_cached": all(r["cached_bytes"] == 0 for r in hostile),
        "no_keys": all(r["keys"] == 0 for r in ours) and (any(r["echo_arrived"] for r in ours)
                                                          or not any(r["case"] == "echo_key" for r in ours)),
        "no_internal_requests": all(r["internal_requests"] == 0 for r in ours),
        "normal_pages_ok_and_cached": all(r["page_ok"] and r["cached_bytes"] > 0 for r in ours
                                          if r["case"] in ("normal", "large_ok")),
    }
    print()
    for name, met in targets.items():
        print(f"{name:<45} {'met' if met else 'MISSED'}")
    print(json.dumps({"benchmark": "hostile", "max_page_bytes": MAX_PAGE_BYTES, "deadline_s": DEADLINE_S,
                      "targets": targets, "all_targets_met": all(targets.values()),
                      "rows": [{k: v for k, v in r.items() if k != "observation"} for r in rows]}))


if __name__ == "__main__":
    main()
