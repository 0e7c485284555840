"""ChatClient errors against closed ports on 127.0.0.1: clear, and never showing the API key."""

from __future__ import annotations

import socket

import pytest

from wiki_sim.common.chat import ChatClient, ChatError


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_endpoint_error_names_the_url_not_the_key():
    client = ChatClient(f"http://127.0.0.1:{_closed_port()}/v1", "m", api_key="sk-SECRET", timeout=2,
                        max_retries=1, backoff=0.0)
    with pytest.raises(ChatError, match="after 2 attempt") as info:
        client.complete("hi")
    assert "cannot reach" in str(info.value) and "/v1/chat/completions" in str(info.value)
    assert "sk-SECRET" not in str(info.value)


@pytest.mark.parametrize("kwargs, message", [
    (dict(base_url="ftp://x", model="m"), "http"), (dict(base_url="http://x/v1", model=""), "model"),
    (dict(base_url="http://x/v1", model="m", timeout=0), "timeout"),
    (dict(base_url="http://x/v1", model="m", max_retries=-1), "max_retries"),
])
def test_config_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ChatClient(**kwargs)
