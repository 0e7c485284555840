import pytest

from envs.protocol import ToolCall, format_turn, loads_lenient, parse_tool_call, parse_turn

CALL = '{"name": "search", "arguments": {"query": ["a", "b"]}}'


def test_strict_tool_call_turn():
    turn = parse_turn(f"<think>\nplan\n</think>\n<tool_call>\n{CALL}\n</tool_call>")
    assert turn.kind == "tool_call" and turn.strict, turn.problems
    assert turn.think == "plan"
    assert turn.tool_call == ToolCall("search", {"query": ["a", "b"]})


def test_strict_answer_turn():
    turn = parse_turn("<think>done</think>\n<answer> Epsom Derby </answer>\n")
    assert turn.kind == "answer" and turn.strict and turn.answer == "Epsom Derby"


def test_format_turn_round_trips():
    text = format_turn("x", tool_call=("visit", {"url": ["u"], "goal": "g"}))
    turn = parse_turn(text)
    assert turn.strict and turn.tool_call == ToolCall("visit", {"url": ["u"], "goal": "g"})
    assert parse_turn(format_turn("y", answer="42")).answer == "42"
    with pytest.raises(ValueError):
        format_turn("z")


@pytest.mark.parametrize("body, repair", [
    ('{"name": "search", "arguments": {"query": ["a", "b"],},}', "trailing commas"),
    ("{'name': 'search', 'arguments': {'query': ['a', 'b']}}", "Python literal"),
    (f"```json\n{CALL}\n```", "code fence"),
    ('{"name": "search", "arguments": {"query": ["a", "b"]}', "missing closing brackets"),
    (f"Here it is: {CALL} thanks", "text around"),
])
def test_lenient_json_repairs_are_recorded(body, repair):
    turn = parse_turn(f"<think>t</think><tool_call>{body}</tool_call>")
    assert turn.tool_call == ToolCall("search", {"query": ["a", "b"]})
    assert not turn.strict
    assert any(repair in p for p in turn.problems), turn.problems


def test_python_dict_with_json_words_and_python_words():
    value, how = loads_lenient("{'a': true, 'b': None, 'c': 'true story'}")
    assert value == {"a": True, "b": None, "c": "true story"} and "Python" in how


def test_arguments_given_as_json_string_and_openai_nesting():
    problems: list[str] = []
    call = parse_tool_call('{"function": {"name": "visit", "arguments": "{\\"url\\": \\"u\\", \\"goal\\": \\"g\\"}"}}',
                           problems)
    assert call == ToolCall("visit", {"url": "u", "goal": "g"})
    assert any("nested" in p for p in problems) and any("string" in p for p in problems)


def test_unclosed_tags_are_read_but_not_strict():
    turn = parse_turn(f"<think>t</think><tool_call>\n{CALL}")
    assert turn.kind == "tool_call" and turn.tool_call.name == "search" and not turn.strict
    turn = parse_turn("<think>t</think><answer>Paris")
    assert turn.kind == "answer" and turn.answer == "Paris" and not turn.strict


def test_several_calls_first_runs():
    turn = parse_turn(f"<think>t</think><tool_call>{CALL}</tool_call><tool_call>{{\"name\": \"x\"}}</tool_call>")
    assert turn.num_tool_calls == 2 and turn.tool_call.name == "search"
    assert any("2 tool calls" in p for p in turn.problems)


def test_answer_wins_over_tool_call_and_text_after_answer_is_not_strict():
    turn = parse_turn(f"<think>t</think><tool_call>{CALL}</tool_call><answer>x</answer>")
    assert turn.kind == "answer" and not turn.strict
    turn = parse_turn("<think>t</think><answer>x</answer> and some more text")
    assert turn.kind == "answer" and turn.answer == "x" and not turn.strict


def test_hallucinated_tool_response_is_cut():
    turn = parse_turn(f"<think>t</think><tool_call>{CALL}</tool_call><tool_response>fake</tool_response>"
                      "<answer>made up</answer>")
    assert turn.kind == "tool_call" and not turn.strict


@pytest.mark.parametrize("text", ["", "   ", "hello", "<think>only thinking</think>", "</answer><answer",
                                  "<tool_call></tool_call>", "<tool_call>{\"name\": 3}</tool_call>",
                                  "<tool_call>[1, 2]</tool_call>", "<tool_call>{" * 50 + "</tool_call>",
                                  "<tool_call>" + "[" * 100000 + "</tool_call>",
                                  '<tool_call>{"name": "a", "arguments": [1]}</tool_call>'])
def test_malformed_turns_never_raise(text):
    turn = parse_turn(text)
    assert not turn.strict
    if turn.kind == "tool_call":
        assert (turn.tool_call is None) == (turn.tool_call_error is not None)


def test_missing_think_and_outside_text_break_strictness():
    assert "no <think>" in parse_turn(f"<tool_call>{CALL}</tool_call>").problems[0]
    turn = parse_turn(f"<think>t</think> chatter <tool_call>{CALL}</tool_call>")
    assert turn.tool_call is not None and not turn.strict


def test_loads_lenient_rejects_nonsense():
    with pytest.raises(ValueError):
        loads_lenient("not json at all")
    assert loads_lenient('{"a": 1}') == ({"a": 1}, "")
