"""The shipped live configs load with the real loader, and the offline recipe of docs/live-web.md
(``python -m envs.live.offline``) runs LiveWeb-v0 against the fake providers with no network."""

from __future__ import annotations

import ipaddress
import socket
import subprocess
import sys
import time
import tomllib
from dataclasses import fields
from pathlib import Path

import gymnasium as gym
import pytest

import envs  # noqa: F401  (registers the environments)
from envs.live.config import LiveConfig
from envs.live.offline import EXAMPLE, FAKE_KEY, main, offline_config_toml
from envs.protocol import format_turn

ROOT = Path(__file__).resolve().parents[3]
LIVE_EXAMPLE = ROOT / "examples" / "live.toml"
KEY_FIELDS = ("serper_api_key", "serpapi_api_key", "jina_api_key", "summarizer_api_key")


@pytest.fixture
def no_network(monkeypatch):
    """Any connection or name lookup that is not loopback fails the test."""
    def loopback(host) -> bool:
        try:
            return ipaddress.ip_address(str(host).strip("[]")).is_loopback
        except ValueError:
            return host == "localhost"

    real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and not loopback(address[0]):
            raise AssertionError(f"network access to {address!r}")
        return real_connect(self, address)

    def getaddrinfo(host, *args, **kwargs):
        if host is not None and not loopback(host):
            raise AssertionError(f"name lookup of {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def test_example_live_toml_is_every_default_and_no_key():
    text = LIVE_EXAMPLE.read_text()
    assert LiveConfig.from_file(LIVE_EXAMPLE, read_env=False) == LiveConfig(read_env=False)
    missing = [f.name for f in fields(LiveConfig) if f.name not in text]
    assert not missing, f"examples/live.toml does not document {missing}"
    raw = tomllib.loads(text)
    assert not set(KEY_FIELDS) & set(raw)  # keys come from the environment only
    for var in ("SERPER_API_KEY", "SERPAPI_API_KEY", "JINA_API_KEY", "WEBSAILOR_SUMMARIZER_API_KEY",
                "WEBSAILOR_SUMMARIZER_MODEL", "WEBSAILOR_<PROVIDER>_BASE_URL", "WEBSAILOR_LIVE_CONFIG"):
        assert var in text


def test_example_live_toml_keys_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("SERPER_API_KEY", "env-serper-key-example")
    monkeypatch.setenv("WEBSAILOR_SUMMARIZER_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("WEBSAILOR_SUMMARIZER_MODEL", "qwen-example")
    monkeypatch.setenv("WEBSAILOR_LIVE_CONFIG", str(LIVE_EXAMPLE))
    cfg = LiveConfig.coerce(None)
    assert cfg.serper_api_key == "env-serper-key-example" and cfg.has_key("summarizer")
    # The file's [base_urls] wins over the environment for the providers it names.
    monkeypatch.setenv("WEBSAILOR_SERPER_BASE_URL", "http://127.0.0.1:9/serper")
    assert LiveConfig.coerce(None).base_urls["serper"] == "https://google.serper.dev"


def test_shipped_offline_example_is_what_serve_prints():
    assert EXAMPLE.read_text() == offline_config_toml()
    cfg = LiveConfig.from_file(EXAMPLE, read_env=False)
    assert cfg.allow_private_urls and not cfg.cache and cfg.search_sources == ("serper",)
    assert all(url.startswith("http://127.0.0.1:8765/") for url in cfg.base_urls.values())
    assert cfg.serper_api_key is None  # the key comes from the environment


def test_offline_episode_searches_visits_and_answers_with_no_network(no_network, capsys):
    assert main(["episode", "--doc", "3"]) == 0
    out = capsys.readouterr().out
    assert "source=serper" in out and "source=jina" in out  # a search, then a visit through the reader
    assert "(model)" in out  # summarized by the fake OpenAI-compatible endpoint
    assert "reward 1.0, correct True" in out


def test_episode_with_a_broken_config_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("search_sources = ['altavista']\n")
    assert main(["episode", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "search_sources" in err and len(err.strip().splitlines()) == 1


def test_serve_then_your_own_agent_on_its_config(tmp_path, no_network):
    target = tmp_path / "offline.toml"
    proc = subprocess.Popen([sys.executable, "-m", "envs.live.offline", "serve", "--port", "0", "--seconds", "60",
                             "--write-config", str(target), "--state-dir", str(tmp_path / "state")],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()  # written once the server listens and the config is written
        assert line.startswith("# fake providers on http://127.0.0.1:"), line
        url = line.split()[4]
        cfg = LiveConfig.from_file(target, serper_api_key=FAKE_KEY, read_env=False)
        assert cfg.base_urls["serper"] == f"{url}/serper"
        assert cfg.resolved_limiter_dir() == tmp_path / "state" / "limits"
        task = {"question": "Who founded it?", "answer": "nobody"}
        env = gym.make("websailor/LiveWeb-v0", tasks=[task], config=cfg, tools=["search", "visit"])
        try:
            env.reset(seed=0)
            obs, *_, info = env.step(format_turn("s", tool_call=("search", {"query": ["Observatory"]})))
            assert info["tool_ok"] and f"]({url}/pages/doc-" in obs
            page = obs.split(f"]({url}/pages/", 1)[1].split(")", 1)[0]
            obs, *_, info = env.step(format_turn("v", tool_call=("visit", {"url": f"{url}/pages/{page}",
                                                                           "goal": "who founded it"})))
            assert info["tool_ok"] and " was founded in " in obs
        finally:
            env.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
