"""A provider that echoes its request puts the keys in its reply, in the spelling they
travelled in: literal (a header), percent-encoded (a query parameter), base64 (a Basic
credential). None of them reaches an observation, ``info`` or the cache files."""

from __future__ import annotations

import base64
import json

import pytest

from envs.live.cache import cache_files
from envs.liveweb import make_liveweb_env
from envs.live.fakeweb import FakeWeb
from envs.live.redact import REDACTED, register_secret, scrub, scrub_value
from tests.envs.live.support import KEYS, config_for


def spellings(key: str) -> list[bytes]:
    """Every spelling the test looks for: literal, percent-encoded (upper and lower hex),
    and the base64 of the key at each alignment."""
    out = [key.encode(), "".join(f"%{b:02X}" for b in key.encode()).encode(),
           "".join(f"%{b:02x}" for b in key.encode()).encode()]
    for prefix in ("", "u:", "us:"):
        encoded = base64.b64encode((prefix + key).encode())
        skip = {0: 0, 2: 3, 3: 4}[len(prefix)]  # characters that mix prefix bits
        out.append(encoded[skip:skip + 12])
    return out


def leaks(blob: bytes) -> list[str]:
    return [f"{name}:{s.decode()}" for name, key in KEYS.items() for s in spellings(key) if s in blob]


@pytest.mark.parametrize("text", [
    f"key {KEYS['serper']} here",
    "q=" + "".join(f"%{ord(c):02X}" for c in KEYS["serpapi"]),
    "api_key%3D" + KEYS["serpapi"].replace("-", "%2D"),
    "api_key%253D" + KEYS["serpapi"].replace("-", "%252d"),
    "Basic " + base64.b64encode(b"me:" + KEYS["jina"].encode()).decode(),
    json.dumps({"h": base64.urlsafe_b64encode(b"xy:" + KEYS["serper"].encode()).decode()})])
def test_scrub_removes_every_spelling(text):
    for key in KEYS.values():
        register_secret(key)
    clean = scrub(text)
    assert clean != text and REDACTED in clean
    assert not leaks(clean.encode()) and not leaks(scrub_value(text.encode()))
    assert scrub_value(text.encode()) != text.encode()


def test_echoing_providers_leak_no_key_into_observations_info_or_cache(tmp_path):
    with FakeWeb(keys=KEYS, echo=True) as web:
        for sources in (("serper",), ("serpapi",)):
            cfg = config_for(web, tmp_path, search_sources=sources, reader_sources=("jina",))
            env = make_liveweb_env([{"question": "q?", "answer": "a"}], tools=["search", "visit"], config=cfg)
            try:
                env.reset(seed=0)
                obs, _, _, _, info = env.step('<tool_call>\n{"name": "search", "arguments": '
                                              f'{{"query": ["{web.docs[0].title}"]}}}}\n</tool_call>')
                assert "Request echo" in obs and "You " in obs  # the echo did arrive
                assert not leaks(obs.encode()) and not leaks(json.dumps(info).encode())
                obs, _, _, _, info = env.step('<tool_call>\n{"name": "visit", "arguments": '
                                              f'{{"url": "{web.page_url("doc-0")}", "goal": "who founded it and when"}}}}'
                                              '\n</tool_call>')
                assert info["tool_ok"]
                assert not leaks(obs.encode()) and not leaks(json.dumps(info).encode())
                assert not leaks(json.dumps(env.unwrapped.messages()).encode())
            finally:
                env.close()
        blob = b"".join(p.read_bytes() for p in cache_files(tmp_path / "cache.sqlite"))
        assert len(blob) > 10_000  # the replies are there
        assert not leaks(blob)
        # The server really saw the keys it echoed (the test could fail).
        assert any(KEYS["serpapi"] in r[3] for r in web.requests("serpapi"))
