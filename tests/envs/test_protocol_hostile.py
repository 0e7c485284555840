"""Parsing is linear in the turn: big hostile turns finish fast (pytest-timeout catches a
quadratic parser), and the Tongyi DeepResearch python call runs the python tool."""

from __future__ import annotations

import pytest

from envs.protocol import MAX_REPAIR_CHARS, ToolCall, loads_lenient, parse_turn
from envs.spaces import MAX_TEXT_CHARS

MB8 = 8 << 20

HOSTILE = {
    "unclosed think (action space)": "<think>" * (MAX_TEXT_CHARS // 7),
    "unclosed think (8 MiB)": "<think>" * (MB8 // 7),
    "unclosed tool_call": "<tool_call>" * (MB8 // 11),
    "unclosed answer": "<answer>" * (MB8 // 8),
    "mixed unclosed tags": ("<think><tool_call><answer></think" * (MB8 // 33)),
    "fence over whitespace": "<think>a</think><tool_call>```" + " " * MB8 + "x</tool_call>",
    "escaped quotes": "<think>a</think><tool_call>{'a': '" + "\\'" * (MB8 // 2) + "</tool_call>",
    "alternating quotes": "<think>a</think><tool_call>{\"a\": " + "\"'" * (MB8 // 2) + "</tool_call>",
    "commas": "<think>a</think><tool_call>{" + ",  " * (MB8 // 3) + "</tool_call>",
    "open brackets": "<think>a</think><tool_call>" + "[" * MB8 + "</tool_call>",
    "long literal list": "<think>a</think><tool_call>{'a': [" + "1," * (MB8 // 2) + "</tool_call>",
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_turns_parse_in_linear_time(name):
    turn = parse_turn(HOSTILE[name])  # quadratic parsing of any of these takes minutes to hours
    assert not turn.strict


@pytest.mark.timeout(30)
@pytest.mark.parametrize("body", [
    "{'a': [" + "1," * (MAX_REPAIR_CHARS // 2 - 8),
    "{'a': {" + "'k': 1, " * (MAX_REPAIR_CHARS // 8 - 8),
    "{'a': '" + "\\'" * (MAX_REPAIR_CHARS // 2 - 8),
])
def test_repairs_up_to_the_cap_stay_cheap(body):
    for _ in range(10):  # ten of the costliest repairable calls: well under a second each
        parse_turn(f"<think>a</think><tool_call>{body}</tool_call>")


def test_a_long_call_must_be_strict_json_and_the_error_says_so():
    code = "print('x')\n" * (MAX_REPAIR_CHARS // 8)
    strict = parse_turn('<think>a</think><tool_call>{"name": "python", "arguments": {"code": %s}}</tool_call>'
                        % __import__("json").dumps(code))
    assert strict.tool_call == ToolCall("python", {"code": code}) and strict.strict
    loose = parse_turn("<think>a</think><tool_call>{'name': 'python', 'arguments': {'code': %r}}</tool_call>" % code)
    assert loose.tool_call is None and "repairs are tried only on calls up to" in loose.tool_call_error


def test_python_literals_with_quotes_and_escapes_keep_their_strings():
    value, how = loads_lenient("{'a': 'it\\'s true', \"b\": true, 'c': \"null 'q'\", 'd': null}")
    assert value == {"a": "it's true", "b": True, "c": "null 'q'", "d": None} and "Python" in how


TONGYI = ('<think>compute</think>\n<tool_call>\n{"name": "PythonInterpreter", "arguments": {}}\n'
          '<code>\n    x = {"a": 1}\n    print(x["a"])\n</code>\n</tool_call>')


def test_tongyi_python_call_puts_the_code_block_into_the_arguments():
    turn = parse_turn(TONGYI)
    assert turn.kind == "tool_call" and turn.strict, turn.problems
    assert turn.tool_call == ToolCall("PythonInterpreter", {"code": 'x = {"a": 1}\nprint(x["a"])'})
    unclosed = parse_turn('<think>t</think><tool_call>{"name": "PythonInterpreter", "arguments": {}}<code>print(2)')
    assert unclosed.tool_call == ToolCall("PythonInterpreter", {"code": "print(2)"})


def test_code_tag_inside_a_json_string_is_not_taken_for_a_code_block():
    turn = parse_turn('<think>t</think><tool_call>{"name": "search", "arguments": {"query": ["<code> tag"]}}'
                      "</tool_call>")
    assert turn.tool_call == ToolCall("search", {"query": ["<code> tag"]}) and turn.strict


def test_tongyi_python_call_runs_the_python_tool(make_env):
    from envs.env import ResearchEnv
    from envs.tools.base import ToolResult

    class FakePython:  # the alias lookup is the environment's; the real tool is tested with the sandbox
        name = "python"
        aliases = ("PythonInterpreter",)
        description = "Runs code."
        parameters = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}

        def __call__(self, arguments):
            return ToolResult(f"ran: {arguments['code']}")

    env = make_env(tools=[FakePython()])
    env.reset(options={"task_index": 0})
    obs, *_, info = env.step(TONGYI)
    assert 'ran: x = {"a": 1}' in obs and info["tool_name"] == "python" and info["tool_ok"]
    assert isinstance(env, ResearchEnv)


@pytest.mark.timeout(30)
def test_grader_reply_with_a_long_run_of_blanks_parses_in_linear_time():
    from envs.judges import JudgeError, parse_grader_reply

    with pytest.raises(JudgeError):
        parse_grader_reply("correct:" + " " * (4 << 20) + "maybe")  # two overlapping blank runs: hours
    assert parse_grader_reply("extracted_final_answer: Paris\ncorrect: ** yes**") == (True, "Paris")


def _regex_reference():
    import re

    return {tag: re.compile(rf"<{tag}>(.*?)</{tag}>", re.DOTALL) for tag in ("think", "tool_call", "answer")}


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

PIECES = st.sampled_from(["<think>", "</think>", "<tool_call>", "</tool_call>", "<answer>", "</answer>", "x", " ",
                          "{", "}", "'", '"', "\\", "<", ">", "\n"])


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, max_size=30).map("".join))
def test_block_scanning_matches_the_non_greedy_regex(text):
    from envs.protocol import _contents, _split_quoted, _spans, _without

    for tag, pattern in _regex_reference().items():
        spans = _spans(text, tag)
        assert _contents(text, tag, spans) == pattern.findall(text)
        assert _without(text, spans) == pattern.sub("", text)
    import re
    reference = re.split(r"(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')", text.replace("\n", " "))
    assert _split_quoted(text.replace("\n", " ")) == reference


@pytest.mark.timeout(30)
def test_heuristic_policy_reads_a_question_with_long_blank_runs_in_linear_time():
    from envs.baselines import _CAPITALIZED

    assert _CAPITALIZED.findall("A" + " " * (4 << 20)) == []  # two adjacent blank runs: hours
    assert _CAPITALIZED.findall("Which Bank of America branch met the Duke of Wellington?") == [
        "Which Bank of America", "Duke of Wellington"]
