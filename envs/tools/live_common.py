"""What the live-web tools share: per-call metrics for ``info`` and a result with every API
key scrubbed (a provider may echo its request back)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from envs.live.redact import scrub
from envs.live.stats import Outcome
from envs.tools.base import ToolResult


def live_metadata(tool: str, outcomes: list[Outcome], latency_s: float, degraded: list[str]) -> dict[str, Any]:
    """Source, cache, retry, fallback and degradation metrics of one call's outcomes; an item
    that every source failed makes the call degraded, with the reasons first."""
    sources = [o.source for o in outcomes if o.source]
    failed = [o for o in outcomes if not o.ok]
    degraded = [f"every source failed: {o.reasons()}" for o in failed] + degraded
    return {
        "tool": tool,
        "source": Counter(sources).most_common(1)[0][0] if sources else None,
        "sources": sources,
        "cache_hit": bool(outcomes) and all(o.ok and o.cache_hit for o in outcomes),
        "cache_hits": sum(o.ok and o.cache_hit for o in outcomes),
        "retries": sum(o.retries for o in outcomes),
        "fallback": any(o.ok and o.errors for o in outcomes),
        "latency_s": latency_s,
        "degraded": bool(degraded),
        "degraded_reasons": degraded,
        "items": len(outcomes),
        "failed_items": len(failed),
        "errors": [str(e) for o in outcomes for e in o.errors],
    }


def scrubbed_result(text: str, ok: bool, metadata: dict[str, Any], data: dict[str, Any]) -> ToolResult:
    """The tool's result with every API key (in every spelling) scrubbed from what the model
    and ``info`` see."""
    metadata = {k: ([scrub(x) for x in v] if isinstance(v, list) and v and isinstance(v[0], str) else v)
                for k, v in metadata.items()}
    error = "" if ok else scrub(metadata["degraded_reasons"][0] if metadata.get("degraded_reasons") else "")
    return ToolResult(scrub(text), ok=ok, metadata=metadata, error=error, data=scrub_data(data))


def scrub_data(value: Any) -> Any:
    """``value`` (nested dicts and lists of str) with keys scrubbed from every string."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: scrub_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_data(v) for v in value]
    return value
