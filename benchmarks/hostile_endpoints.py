"""Hostile OpenAI-compatible endpoints against the judge and the policy client:
``python -m benchmarks.hostile_endpoints``.

Cases, each one call served by a loopback server (:mod:`wiki_sim.common.fake_chat`), side by side
with a healthy server in one run:

- ``healthy``: an ordinary chat completion (the reference);
- ``dribble``: declares the reply, then sends one byte every 0.5 s;
- ``huge``: a 100 MB chat completion, streamed without Content-Length;
- ``huge_declared``: the same with its Content-Length;
- ``redirect``: HTTP 302 to another origin (another port), which records what it receives;
- ``failing``: HTTP 500 every time.

Two callers, each in a fresh process: ``judge`` (:class:`envs.judges.LLMJudge`, 2 s
timeout, one retry) and ``policy`` (:class:`trainers.policies.OpenAIPolicy`, 2 s timeout,
one retry); and two systems: ``websailor`` (the shared client: total deadline per request, reply
cap, no key across origins) and ``urllib`` (what both callers did before: ``urlopen`` with a
per-read timeout, the reply read whole (the policy's read was capped at 64 MB), redirects
followed with the key; killed after 40 s). Reported per case: seconds to the caller's
outcome, peak memory growth of the process during the call (RSS high-water mark, reset just
before the call, minus the RSS then), whether the API key reached the other origin, and the
outcome. Targets (websailor): every call ends within (retries + 1) x (timeout + 0.5 s) plus
the 1 s backoff, peak growth < the caller's reply cap + 16 MB (judge 1 MiB, policy 64 MiB), the
key never reaches another origin, a healthy call succeeds. A table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time

from benchmarks.hostile import _peak, _rss

KEY = "bench-endpoint-key-5b9e21"
TIMEOUT_S = 2.0
RETRIES = 1
BACKOFF_S = 1.0
KILL_S = 40.0
HUGE_BYTES = 100 * 1024 * 1024
CASES = ("healthy", "dribble", "huge", "huge_declared", "redirect", "failing")
CAPS = {"judge": 1024 * 1024, "policy": 64 * 1024 * 1024}
"""Reply caps: LLMJudge.max_reply_bytes and trainers.policies.MAX_REPLY_BYTES (checked in main)."""
PROMPT = {"model": "m", "messages": [{"role": "user", "content": "Which race did Santa Claus win?"}]}


def _healthy(body: dict) -> tuple[str, str]:
    return "extracted_final_answer: Epsom Derby\nreasoning: same\ncorrect: yes\nconfidence: 90", "stop"


def _legacy_post(url: str, max_bytes: int | None) -> str:
    """What both callers did before: urlopen with a per-read timeout, redirects followed (the
    key included), the reply read whole (the policy capped its read at 64 MB), 429/5xx retried."""
    import urllib.error
    import urllib.request

    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"}
    data = json.dumps(PROMPT).encode()
    error = ""
    for attempt in range(RETRIES + 1):
        if attempt:
            time.sleep(BACKOFF_S)
        request = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                raw = response.read() if max_bytes is None else response.read(max_bytes)
            return "ok: " + json.loads(raw)["choices"][0]["message"]["content"][:40]
        except urllib.error.HTTPError as exc:
            error = f"HTTP {exc.code}"
        except (OSError, ValueError, KeyError) as exc:
            error = type(exc).__name__
    return f"error: {error}"


def run_case(caller: str, system: str, base_url: str, out) -> None:
    """One call, in this (fresh) process; imports and set-up happen before the clock starts."""
    from envs.judges import LLMJudge
    from trainers.policies import OpenAIPolicy

    judge = LLMJudge(base_url, "grader", api_key=KEY, timeout=TIMEOUT_S, max_retries=RETRIES, backoff=BACKOFF_S)
    policy = OpenAIPolicy(base_url, "agent", api_key=KEY, timeout=TIMEOUT_S, max_retries=RETRIES)
    url = base_url.rstrip("/") + "/chat/completions"
    before = _rss()
    start = time.perf_counter()
    try:
        if system == "urllib":
            outcome = _legacy_post(url, None if caller == "judge" else 64 * 1024 * 1024)
        elif caller == "judge":
            outcome = f"ok: correct={judge('Which race?', 'Epsom Derby', ['Epsom Derby']).is_correct}"
        else:
            outcome = "ok: " + policy.generate_text([PROMPT["messages"]], max_new_tokens=16)[0].text[:40]
    except Exception as exc:  # the outcome is what the caller would see
        outcome = f"error: {type(exc).__name__}: {exc}"
    out.put({"seconds": time.perf_counter() - start, "peak_growth": max(0, _peak() - before),
             "outcome": " ".join(outcome.split())})


def _in_process(args: tuple) -> dict:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=run_case, args=(*args, out), daemon=True)
    start = time.perf_counter()
    proc.start()
    try:
        return out.get(timeout=KILL_S + 10)  # + the process's start-up
    except Exception:
        return {"seconds": time.perf_counter() - start, "peak_growth": None, "outcome": f"(killed after {KILL_S:.0f} s)"}
    finally:
        proc.kill()
        proc.join()


def _server(case: str, other_url: str):
    from wiki_sim.common.fake_chat import FakeChatServer

    mode = {"healthy": "ok", "failing": "fail"}.get(case, case)
    return FakeChatServer(_healthy, mode=mode, interval=0.5, huge_bytes=HUGE_BYTES,
                          redirect_to=other_url + "/chat/completions", redirect_status=302)


def main(argv: list[str] | None = None) -> None:
    from wiki_sim.common.fake_chat import FakeChatServer

    parser = argparse.ArgumentParser(prog="python -m benchmarks.hostile_endpoints",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, some of {','.join(CASES)}")
    parser.add_argument("--callers", default="judge,policy", help="comma-separated, some of judge,policy")
    args = parser.parse_args(argv)
    from envs.judges import LLMJudge
    from trainers.policies import MAX_REPLY_BYTES

    assert CAPS == {"judge": LLMJudge.max_reply_bytes, "policy": MAX_REPLY_BYTES}, "update CAPS"
    cases = [c for c in args.cases.split(",") if c]
    callers = [c for c in args.callers.split(",") if c]
    if not cases or set(cases) - set(CASES) or not callers or set(callers) - {"judge", "policy"}:
        parser.error(f"expected --cases from {','.join(CASES)} and --callers from judge,policy")
    rows = []
    with FakeChatServer(_healthy) as other:
        for case in cases:
            for caller in callers:
                for system in ("websailor", "urllib"):
                    with other.lock:
                        other.requests.clear()
                    with _server(case, other.base_url) as server:
                        result = _in_process((caller, system, server.base_url))
                    leaked = sum(h.get("Authorization") == f"Bearer {KEY}" for _, h in other.requests)
                    rows.append({"case": case, "caller": caller, "system": system,
                                 "seconds": round(result["seconds"], 2),
                                 "peak_growth_mb": None if result["peak_growth"] is None
                                 else round(result["peak_growth"] / 1e6, 1),
                                 "key_to_other_origin": leaked, "outcome": result["outcome"][:110]})
    _report(rows)


def _report(rows: list[dict]) -> None:
    header = f"{'case':<14} {'caller':<7} {'system':<10} {'seconds':>8} {'peak MB':>8} {'key leak':>8}  outcome"
    print(header)
    print("-" * len(header))
    for r in rows:
        peak = "-" if r["peak_growth_mb"] is None else f"{r['peak_growth_mb']:.1f}"
        print(f"{r['case']:<14} {r['caller']:<7} {r['system']:<10} {r['seconds']:>8.2f} {peak:>8} "
              f"{r['key_to_other_origin']:>8}  {r['outcome']}")
    ours = [r for r in rows if r["system"] == "websailor"]
    bound = (RETRIES + 1) * (TIMEOUT_S + 0.5) + BACKOFF_S
    targets = {
        f"every_call_ends_within_{bound:g}s": all(r["seconds"] <= bound for r in ours),
        "peak_growth_under_reply_cap_plus_16mb": all(
            r["peak_growth_mb"] is not None and r["peak_growth_mb"] < (CAPS[r["caller"]] + (16 << 20)) / 1e6
            for r in ours),
        "no_key_to_another_origin": all(r["key_to_other_origin"] == 0 for r in ours),
        "healthy_calls_succeed": all(r["outcome"].startswith("ok") for r in ours if r["case"] == "healthy"),
    }
    print()
    for name, met in targets.items():
        print(f"{name:<45} {'met' if met else 'MISSED'}")
    print(json.dumps({"benchmark": "hostile_endpoints", "timeout_s": TIMEOUT_S, "retries": RETRIES,
                      "huge_bytes": HUGE_BYTES, "targets": targets, "all_targets_met": all(targets.values()),
                      "rows": [{k: v for k, v in r.items() if k != "outcome"} for r in rows]}))


if __name__ == "__main__":
    main()
