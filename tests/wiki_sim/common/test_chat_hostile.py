"""Hostile OpenAI-compatible endpoints on 127.0.0.1 against the shared chat client and the
policy client: a dribbling server meets the total deadline, a huge reply is refused unread,
and an API key never follows a redirect to another origin."""

from __future__ import annotations

import time

import pytest

from trainers.policies import OpenAIPolicy, PolicyError
from wiki_sim.common.chat import ChatClient, ChatError, post_json
from wiki_sim.common.fake_chat import FakeChatServer

KEY = "sk-hostile-test-key"


def _policy_turn(policy: OpenAIPolicy) -> str:
    return policy.generate_text([[{"role": "user", "content": "hi"}]], max_new_tokens=8)[0].text


def test_a_dribbling_server_is_cut_off_at_the_total_deadline():
    with FakeChatServer(lambda body: ("x" * 200, "stop"), mode="dribble", interval=0.1) as server:
        start = time.monotonic()
        with pytest.raises(ChatError, match="no answer within 1 s"):
            ChatClient(server.base_url, "m", timeout=1.0).complete("hi")
        assert time.monotonic() - start < 3.0  # the reply alone takes 20+ s at one byte per 0.1 s
        start = time.monotonic()
        with pytest.raises(PolicyError, match="no answer within 1 s"):
            _policy_turn(OpenAIPolicy(server.base_url, "m", timeout=1.0, max_retries=0))
        assert time.monotonic() - start < 3.0


def test_a_silent_server_is_cut_off_at_the_deadline():
    with FakeChatServer(mode="hang", interval=5.0) as server:
        start = time.monotonic()
        with pytest.raises(ChatError, match="no answer within 0.5 s"):
            ChatClient(server.base_url, "m", timeout=0.5).complete("hi")
        assert time.monotonic() - start < 2.5


@pytest.mark.parametrize("mode", ["huge", "huge_declared"])
def test_a_huge_reply_is_refused_without_reading_it_whole(mode):
    with FakeChatServer(mode=mode, huge_bytes=64 << 20) as server:
        with pytest.raises(ChatError, match="cap of 1048576"):
            ChatClient(server.base_url, "m", timeout=20, max_bytes=1 << 20).complete("hi")


def test_the_key_does_not_follow_a_redirect_to_another_origin():
    with FakeChatServer(lambda body: ("elsewhere", "stop")) as other:
        for status in (302, 307):
            with FakeChatServer(mode="redirect", redirect_to=other.base_url + "/chat/completions",
                                redirect_status=status) as server:
                with pytest.raises(ChatError, match="another origin") as info:
                    ChatClient(server.base_url, "m", api_key=KEY, max_retries=2, backoff=0).complete("hi")
                assert KEY not in str(info.value)
                with pytest.raises(PolicyError, match="another origin"):
                    _policy_turn(OpenAIPolicy(server.base_url, "m", api_key=KEY, max_retries=2))
                assert server.requests[0][1].get("Authorization") == f"Bearer {KEY}"
                # without a key there is nothing to leak: the redirect is followed
                assert ChatClient(server.base_url, "m").complete("hi") == "elsewhere"
        assert all("Authorization" not in headers for _, headers in other.requests)


def test_same_origin_redirects_keep_the_key_and_are_bounded():
    same = FakeChatServer(mode="redirect")
    same.redirect_to = same.base_url.replace("/v1", "/v2") + "/chat/completions"
    try:
        with pytest.raises(ChatError, match="more than 3 redirects"):
            post_json(same.base_url + "/chat/completions", {}, api_key=KEY, timeout=5)
        assert len(same.requests) == 4  # the first request and three same-origin redirects
        assert all(h.get("Authorization") == f"Bearer {KEY}" for _, h in same.requests)
    finally:
        same.close()


def test_a_failing_server_is_a_policy_error_naming_the_status():
    with FakeChatServer(mode="fail") as server:
        with pytest.raises(PolicyError, match="HTTP 500"):
            _policy_turn(OpenAIPolicy(server.base_url, "m", max_retries=0))
        with pytest.raises(ChatError, match="after 2 attempt.*HTTP 500"):
            ChatClient(server.base_url, "m", max_retries=1, backoff=0).complete("hi")
        assert len(server.requests) == 3
