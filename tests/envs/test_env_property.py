"""Property: any action string at all gets an observation in the space, never an exception."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envs.protocol import format_turn

TAGS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<answer>", "</answer>", "<tool_response>",
        "</tool_response>", "```json", "```", "{", "}", "[", "]", ",", ":", "'", '"', "\n", "null", "True"]
NAMES = ["search", "visit", "echo", "broken", "python", "", "Search", "x" * 300]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


def _code_points(data: bytes) -> str:
    """Any code points at all (lone surrogates and controls included) from random bytes: a cheap draw."""
    return "".join(chr(int.from_bytes(data[i:i + 3], "little") % 0x110000) for i in range(0, len(data) - 2, 3))


any_text = st.binary(max_size=600).map(_code_points) | st.text(max_size=20)


@st.composite
def tool_call_turns(draw):
    arguments = draw(st.dictionaries(st.sampled_from(["query", "queries", "url", "goal", "text", "x", "code"]),
                                     json_values, max_size=3) | json_values)
    call = {"name": draw(st.sampled_from(NAMES)), "arguments": arguments}
    body = json.dumps(call, ensure_ascii=draw(st.booleans()))
    body = draw(st.sampled_from([body, body[:-1], body.replace('"', "'"), body + ",", f"```json\n{body}\n```"]))
    turn = f"<think>{draw(any_text)}</think>\n<tool_call>\n{body}\n</tool_call>"
    return turn * draw(st.integers(1, 2))


fragments = st.lists(st.sampled_from(TAGS) | any_text, max_size=12).map("".join)
HUGE = format_turn("big", tool_call=("echo", {"text": "é" * 150_000}))
valid = st.sampled_from([
    format_turn("s", tool_call=("search", {"query": ["Epsom Derby", "Solar Dynamics Observatory"]})),
    format_turn("v", tool_call=("visit", {"url": ["https://en.wikipedia.org/wiki/Paris"], "goal": "capital"})),
    format_turn("a", answer="Paris"),
])
# Enormous turns are rare (1 in 40 of this branch): each costs tens of milliseconds.
rare = st.integers(0, 39).map(lambda i: HUGE if i == 0 else "<answer>")
actions = st.one_of(any_text, fragments, tool_call_turns(), valid, rare, st.just(""))

INFO_KEYS = {"is_correct", "format_ok", "num_tool_calls", "tool_name", "tool_latency_s", "termination",
             "transcript_tokens", "transcript_messages"}


def test_thousands_of_generated_actions_never_raise(make_env):
    env = make_env(max_tool_calls=8, max_context_tokens=20_000)
    env.reset(seed=0)
    counts = {"steps": 0, "episodes": 0}

    @settings(max_examples=400, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.function_scoped_fixture])
    @given(st.lists(actions, min_size=1, max_size=10))
    def run(batch):
        for action in batch:
            obs, reward, terminated, truncated, info = env.step(action)
            counts["steps"] += 1
            assert obs in env.observation_space
            assert isinstance(reward, float) and 0.0 <= reward <= 1.0
            assert isinstance(terminated, bool) and isinstance(truncated, bool) and not (terminated and truncated)
            assert INFO_KEYS <= set(info)
            if terminated or truncated:
                assert obs == "" and info["termination"] in {"answer", "max_tool_calls", "context_limit",
                                                             "format_error"}
                assert terminated == (info["termination"] == "answer")
                counts["episodes"] += 1
                env.reset()
            else:
                assert obs and info["termination"] == ""

    run()
    assert counts["steps"] >= 2000 and counts["episodes"] >= 50, counts
