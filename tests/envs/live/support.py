"""Shared helpers of the live-web tests (a module, so that worker processes can import it)."""

from __future__ import annotations

from envs.live.config import LiveConfig
from envs.live.fakeweb import FakeWeb

KEYS = {"serper": "sk-serper-5f2c9a7e41d3", "serpapi": "serpapi-9b7e6d5c4a3f21", "jina": "jina_0a1b2c3d4e5f6789",
        "summarizer": "sk-summ-77aa88bb99cc"}
FAST = {"serper": 200.0, "serpapi": 200.0, "wikipedia": 200.0, "jina": 200.0, "direct": 200.0, "summarizer": 200.0}


def config_for(web: FakeWeb, tmp_path, **overrides) -> LiveConfig:
    """A config pointing every provider at ``web``, with all keys, fast limits and retries."""
    fields = dict(serper_api_key=KEYS["serper"], serpapi_api_key=KEYS["serpapi"], jina_api_key=KEYS["jina"],
                  summarizer_api_key=KEYS["summarizer"], summarizer_model="fake-model",
                  base_urls=web.base_urls(), cache_path=str(tmp_path / "cache.sqlite"),
                  limiter_dir=str(tmp_path / "limits"), qps=dict(FAST),
                  timeouts={p: 0.5 for p in FAST}, connect_timeout=0.5, deadline_s=5.0,
                  backoff_initial=0.01, backoff_max=0.05, backoff_jitter=0.01, retry_after_max=2.0,
                  read_env=False, allow_private_urls=True)
    fields.update(overrides)
    return LiveConfig(**fields)
