"""LiveConfig: environment variables, files, precedence, validation, and keys kept out of repr."""

from __future__ import annotations

import importlib.util
import json

import pytest

from envs.live.config import DEFAULT_BASE_URLS, LiveConfig


def test_defaults_work_without_keys(monkeypatch):
    for var in ("SERPER_API_KEY", "SERPAPI_API_KEY", "JINA_API_KEY", "WEBSAILOR_SUMMARIZER_MODEL"):
        monkeypatch.delenv(var, raising=False)
    cfg = LiveConfig()
    assert not cfg.has_key("serper") and not cfg.has_key("serpapi") and not cfg.has_key("summarizer")
    assert cfg.has_key("wikipedia") and cfg.has_key("direct")
    assert cfg.base_urls["serper"] == DEFAULT_BASE_URLS["serper"]
    assert cfg.qps["jina"] < 0.5  # keyless Jina is limited to 20 requests a minute


def test_keys_and_base_urls_from_environment(monkeypatch):
    monkeypatch.setenv("SERPER_API_KEY", "env-serper-key-1")
    monkeypatch.setenv("WEBSAILOR_SERPER_BASE_URL", "http://127.0.0.1:9/proxy/")
    monkeypatch.setenv("WEBSAILOR_SUMMARIZER_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("WEBSAILOR_SUMMARIZER_MODEL", "qwen")
    cfg = LiveConfig()
    assert cfg.serper_api_key == "env-serper-key-1"
    assert cfg.base_urls["serper"] == "http://127.0.0.1:9/proxy"
    assert cfg.has_key("summarizer")
    # An explicit argument wins over the environment; read_env=False ignores it.
    assert LiveConfig(base_urls={"serper": "http://127.0.0.1:8"}).base_urls["serper"] == "http://127.0.0.1:8"
    assert LiveConfig(read_env=False).serper_api_key is None


def test_keys_never_in_repr():
    cfg = LiveConfig(serper_api_key="secret-serper-123", serpapi_api_key="secret-serpapi-456",
                     jina_api_key="secret-jina-789", summarizer_api_key="secret-summ-000", read_env=False)
    text = repr(cfg)
    assert "secret-" not in text and "LiveConfig(" in text


def test_from_toml_and_json_merge_tables(tmp_path):
    toml = tmp_path / "live.toml"
    toml.write_text('search_sources = ["wikipedia"]\nqps = {wikipedia = 2.5}\ndeadline_s = 9\n'
                    '[base_urls]\nwikipedia = "http://127.0.0.1:1/w"\n')
    cfg = LiveConfig.from_file(toml, read_env=False)
    assert cfg.search_sources == ("wikipedia",) and cfg.qps["wikipedia"] == 2.5 and cfg.qps["serper"] == 5.0
    assert cfg.base_urls["wikipedia"] == "http://127.0.0.1:1/w" and cfg.base_urls["jina"] == "https://r.jina.ai"
    js = tmp_path / "live.json"
    js.write_text(json.dumps({"reader_sources": "direct", "cache_expiry": {"direct": 0}, "read_env": False}))
    cfg = LiveConfig.from_file(js)
    assert cfg.reader_sources == ("direct",) and cfg.cache_expiry["direct"] == 0


@pytest.mark.parametrize("fields, message", [
    ({"search_sources": ("serper", "bing")}, "search_sources: expected distinct sources"),
    ({"qps": {"serper": 0}}, "qps['serper']: expected a rate > 0, got 0"),
    ({"qps": {"google": 1}}, "unknown provider(s) ['google']"),
    ({"base_urls": {"jina": "ftp://x"}}, "expected an http(s) URL"),
    ({"cache_expiry": {"serper": -5}}, "expected seconds >= 0 or -1"),
    ({"max_attempts": 0}, "max_attempts: expected > 0, got 0"),
    ({"wikipedia_api": "graphql"}, "expected 'rest' or 'action'"),
])
def test_validation_says_expected_and_actual(fields, message):
    with pytest.raises(ValueError) as info:
        LiveConfig(read_env=False, **fields)
    assert message in str(info.value)


def test_bad_files_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("qps = {")
    with pytest.raises(ValueError, match="not valid TOML"):
        LiveConfig.from_file(bad)
    unknown = tmp_path / "u.json"
    unknown.write_text('{"serper_key": "x"}')
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['serper_key'\]"):
        LiveConfig.from_file(unknown)
    with pytest.raises(ValueError, match="cannot read"):
        LiveConfig.from_file(tmp_path / "missing.toml")


@pytest.mark.skipif(importlib.util.find_spec("ddgs") is not None, reason="ddgs is installed")
def test_ddgs_without_the_package_says_what_to_install():
    with pytest.raises(ValueError, match="pip install ddgs"):
        LiveConfig(search_sources=("ddgs",), read_env=False)


def test_coerce_reads_the_file_named_by_the_environment(tmp_path, monkeypatch):
    path = tmp_path / "c.json"
    path.write_text('{"deadline_s": 7, "read_env": false}')
    monkeypatch.setenv("WEBSAILOR_LIVE_CONFIG", str(path))
    assert LiveConfig.coerce(None).deadline_s == 7
    assert LiveConfig.coerce({"deadline_s": 3, "read_env": False}).deadline_s == 3
    with pytest.raises(ValueError, match="expected a LiveConfig"):
        LiveConfig.coerce(42)


@pytest.mark.parametrize("field, value, message", [
    ("max_attempts", "four", "LiveConfig.max_attempts: expected an integer, got 'four'"),
    ("cache", "yes", "LiveConfig.cache: expected true or false, got 'yes'"),
    ("deadline_s", True, "LiveConfig.deadline_s: expected a number, got True"),
    ("qps", {"serper": "fast"}, "LiveConfig.qps['serper']: expected a number, got 'fast'"),
    ("base_urls", {"serper": 3}, "LiveConfig.base_urls['serper']: expected a URL string, got 3"),
    ("search_sources", 5, "LiveConfig.search_sources: expected a list of source names, got 5"),
    ("summarizer_model", 7, "LiveConfig.summarizer_model: expected a string (or no value), got 7"),
])
def test_a_value_of_the_wrong_type_is_one_clear_error(tmp_path, field, value, message):
    # A hand-edited live.toml gets the field, the expected type and the value, not a TypeError.
    with pytest.raises(ValueError) as info:
        LiveConfig.from_dict({field: value, "read_env": False})
    assert str(info.value) == message
