import json

import pytest
from gymnasium.error import ResetNeeded

from envs.judges import Judgement, JudgeError
from envs.prompts import ANSWER_NOW_CONTEXT, parse_chatml, render_chatml
from envs.protocol import format_turn
from envs.rewards import WEBSAILOR_V1_WEIGHTS
from envs.spaces import MAX_TEXT_CHARS
from envs.tasks import Task

from .conftest import TASKS


def call(name, **arguments):
    return format_turn("thinking", tool_call=(name, arguments))


def answer(text):
    return format_turn("done", answer=text)


def test_reset_returns_the_first_prompt(make_env):
    env = make_env()
    obs, info = env.reset(seed=0)
    messages = parse_chatml(obs)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages == env.messages()
    system = messages[0]["content"]
    assert system.endswith("Current date: 2025-07-18")
    tools = system.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0].splitlines()
    schemas = [json.loads(line) for line in tools]
    assert [s["function"]["name"] for s in schemas] == ["search", "visit", "echo", "broken"]
    assert schemas[0]["type"] == "function" and schemas[0]["function"]["parameters"]["required"] == ["query"]
    assert "<tool_call>" in system and "<answer>" in system
    assert messages[1]["content"] in {t["question"] for t in TASKS}
    assert info["task_id"] == env.task.id and info["num_tool_calls"] == 0
    assert obs in env.observation_space


def test_seeded_reset_picks_the_same_task(make_env):
    env = make_env()
    picks = {seed: env.reset(seed=seed)[1]["task_id"] for seed in range(12)}
    for seed, task_id in picks.items():
        assert make_env().reset(seed=seed)[1]["task_id"] == task_id
    assert len(set(picks.values())) > 1


def test_reset_options_set_the_task(make_env):
    env = make_env()
    task = {"question": "Who wrote Hamlet?", "answer": "Shakespeare"}
    obs, info = env.reset(options={"task": task})
    assert env.messages()[1]["content"] == "Who wrote Hamlet?" and env.task.answer == "Shakespeare"
    env.reset(options={"task_index": 2})
    assert env.task.id == "capital"
    with pytest.raises(ValueError, match="task_index"):
        env.reset(options={"task_index": 3})
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"tsk": task})
    with pytest.raises(ValueError, match="missing 'answer'"):
        env.reset(options={"task": {"question": "q"}})


def test_tool_call_then_answer(make_env):
    env = make_env(reward_weights=WEBSAILOR_V1_WEIGHTS)
    env.reset(options={"task_index": 2})
    obs, reward, terminated, truncated, info = env.step(call("search", query=["capital of France"]))
    assert obs.startswith("<tool_response>\nA search for 'capital of France' found")
    assert obs.endswith("\n</tool_response>") and "[Paris](https://en.wikipedia.org/wiki/Paris)" in obs
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["tool_name"] == "search" and info["tool_ok"] and info["num_tool_calls"] == 1
    assert info["tool_latency_s"] > 0 and info["format_ok"] and info["termination"] == ""
    assert info["transcript_messages"] == 4 and info["transcript_tokens"] > 0
    obs, reward, terminated, truncated, info = env.step(answer("Paris"))
    assert (obs, terminated, truncated) == ("", True, False)
    assert reward == pytest.approx(1.0) and info["is_correct"] and info["termination"] == "answer"
    assert info["episode_format_ok"] and info["answer"] == "Paris"
    assert [m["role"] for m in env.messages()] == ["system", "user", "assistant", "user", "assistant"]
    assert env.messages()[3]["content"].startswith("<tool_response>\n")


def test_format_reward_needs_every_turn_strict(make_env):
    env = make_env(reward_weights=WEBSAILOR_V1_WEIGHTS)
    env.reset(options={"task_index": 2})
    env.step('<tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>')  # no <think>
    _, reward, terminated, _, info = env.step(answer("Lyon"))
    assert terminated and not info["is_correct"] and not info["episode_format_ok"] and reward == 0.0
    env.reset(options={"task_index": 2})
    _, reward, *_ = env.step(answer("Lyon"))
    assert reward == pytest.approx(0.1)


def test_tool_budget_gives_one_last_turn_then_truncates(make_env):
    env = make_env(max_tool_calls=2)
    env.reset(options={"task_index": 0})
    obs, *_, info = env.step(call("echo", text="one"))
    assert not info["final_turn"]
    obs, reward, terminated, truncated, info = env.step(call("echo", text="two"))
    assert info["final_turn"] and "used all 2 tool calls" in obs and "<tool_response>\ntwo\n</tool_response>" in obs
    assert not terminated and not truncated
    obs, reward, terminated, truncated, info = env.step(call("echo", text="three"))
    assert (obs, reward, terminated, truncated) == ("", 0.0, False, True)
    assert info["termination"] == "max_tool_calls" and info["num_tool_calls"] == 2
    with pytest.raises(ResetNeeded):
        env.step(answer("x"))


def test_answer_on_the_last_turn_terminates(make_env):
    env = make_env(max_tool_calls=1)
    env.reset(options={"task_index": 0})
    env.step(call("echo", text="one"))
    _, reward, terminated, truncated, info = env.step(answer("Santa Claus"))
    assert terminated and not truncated and reward == 1.0 and info["termination"] == "answer"


def test_context_budget_replaces_the_observation(make_env):
    env = make_env(max_context_tokens=700)
    obs, info = env.reset(options={"task_index": 0})
    assert info["transcript_tokens"] < 700
    obs, _, terminated, truncated, info = env.step(call("echo", text="x" * 4000))
    assert obs == ANSWER_NOW_CONTEXT and info["final_turn"] and not (terminated or truncated)
    _, _, terminated, truncated, info = env.step("still thinking")
    assert truncated and not terminated and info["termination"] == "context_limit"


def test_context_budget_counts_with_the_tokenizer(make_env):
    def count(text):
        return len(text.split())

    env = make_env(max_context_tokens=500, tokenizer=count)
    _, info = env.reset(options={"task_index": 0})
    words = sum(len(render_chatml([m]).split()) for m in env.messages())
    assert info["transcript_tokens"] == words
    obs, *_, info = env.step(call("echo", text="word " * 500))
    assert obs == ANSWER_NOW_CONTEXT


def test_format_errors_in_a_row_end_the_episode(make_env):
    env = make_env(max_format_errors=3)
    env.reset(options={"task_index": 0})
    obs, _, _, truncated, info = env.step("I will just chat")
    assert not truncated and obs.startswith("Error: your last turn could not be used")
    assert "<tool_call>" in obs and "Available tools: search, visit, echo, broken" in obs
    assert not info["format_ok"] and info["format_problems"]
    env.step(call("echo", text="resets the count"))
    env.step("chat")
    env.step("chat")
    _, reward, terminated, truncated, info = env.step("chat")
    assert truncated and not terminated and info["termination"] == "format_error" and reward == 0.0


@pytest.mark.parametrize("action, expected", [
    (call("nosuch", x=1), "there is no tool named 'nosuch'. Available tools: search, visit, echo, broken"),
    (call("search"), "search needs 'query'"),
    (call("search", query=[1, 2]), "'query' must be a list of strings"),
    (call("search", query=["q"] * 50), "at most 10 items"),
    (call("visit", url="https://en.wikipedia.org/wiki/Paris"), "visit needs 'goal'"),
    (call("search", query=["x" * 10000]), "at most 500 characters"),
    ("<think>t</think><tool_call>{not json}</tool_call>", "Error: the tool call is not valid JSON"),
    ('<tool_call>{"arguments": {}}</tool_call>', 'the tool call has no "name" string'),
])
def test_bad_calls_get_an_error_observation_that_teaches(make_env, action, expected):
    env = make_env()
    env.reset(options={"task_index": 0})
    obs, reward, terminated, truncated, info = env.step(action)
    assert obs.startswith("<tool_response>\n") and expected in obs, obs
    assert not (terminated or truncated) and reward == 0.0
    assert '"name": ' in obs or "Split" in obs or "shorter" in obs  # says how to call correctly


def test_raising_tool_is_caught(make_env):
    env = make_env()
    env.reset(options={"task_index": 0})
    obs, _, terminated, truncated, info = env.step(call("broken", x=1))
    assert "the broken tool failed (RuntimeError: disk on fire)" in obs and '"name": "broken"' in obs
    assert info["tool_error"] == "RuntimeError: disk on fire" and not info["tool_ok"]
    assert not (terminated or truncated)


def test_several_calls_run_the_first_and_say_so(make_env):
    env = make_env()
    env.reset(options={"task_index": 0})
    obs, *_, info = env.step(call("echo", text="first") + call("echo", text="second"))
    assert "first" in obs and "second" not in obs.split("Note")[0] and "only the first was run" in obs
    assert info["num_tool_calls"] == 1 and not info["format_ok"]


def test_judge_failure_is_reported_not_raised(make_env):
    def failing_judge(question, prediction, answers):
        raise JudgeError("grader down")

    failing_judge.name = "failing"
    env = make_env(judge=failing_judge)
    env.reset(options={"task_index": 0})
    _, reward, terminated, _, info = env.step(answer("Santa Claus"))
    assert terminated and reward == 0.0 and info["judge_error"] == "JudgeError: grader down"
    assert info["termination"] == "judge_error" and not info["is_correct"]  # no verdict: not an "answer"


def test_custom_judge_and_aliases(make_env):
    seen = []

    def judge(question, prediction, answers):
        seen.append(list(answers))
        return Judgement(0.5, False, {"why": "half"})

    judge.name = "half"
    env = make_env(judge=judge)
    env.reset(options={"task_index": 0})
    _, reward, *_, info = env.step(answer("x"))
    assert reward == 0.5 and seen == [["Santa Claus", "Santa Claus (horse)"]] and info["judge_details"] == {"why": "half"}


def test_observations_stay_in_the_space(make_env):
    env = make_env()
    env.reset(options={"task": {"question": "Why \x00 and \ud800 and 🙂?", "answer": "a"}})
    assert env.messages()[1]["content"] == "Why \ufffd and \ufffd and 🙂?"
    obs, *_ = env.step(call("echo", text="\x07" + "y" * (MAX_TEXT_CHARS + 10)))
    assert obs in env.observation_space and len(obs) <= MAX_TEXT_CHARS and "characters cut" in obs
    assert obs.startswith("<tool_response>\n\ufffdyyy") and obs.endswith("\n</tool_response>")


def test_render_and_messages_are_copies(make_env):
    env = make_env(render_mode="ansi")
    env.reset(options={"task_index": 0})
    env.step(call("echo", text="hi"))
    text = env.render()
    assert text == render_chatml(env.messages()) and text.count("<|im_start|>") == 4
    env.messages()[0]["content"] = "changed"
    assert env.messages()[0]["content"] != "changed"


def test_bad_construction_and_api_misuse(make_env, mini_tools):
    with pytest.raises(ValueError, match="max_tool_calls"):
        make_env(max_tool_calls=0)
    with pytest.raises(ValueError, match="render_mode"):
        make_env(render_mode="human")
    with pytest.raises(ValueError, match="current_date"):
        make_env(current_date="18/07/2025")
    with pytest.raises(ValueError, match="two tools are named"):
        make_env(tools=[mini_tools[0], mini_tools[0]])
    with pytest.raises(ValueError, match="expected Tool objects"):
        make_env(tools=[object()])
    env = make_env()
    with pytest.raises(ResetNeeded):
        env.step("x")
    env.reset()
    with pytest.raises(TypeError, match="must be a string"):
        env.step(42)


def test_system_prompt_override_and_no_tools(make_env):
    env = make_env(system_prompt="Be brief.")
    assert env.reset()[0].startswith("<|im_start|>system\nBe brief.<|im_end|>")
    env = make_env(tools=[])
    env.reset(options={"task_index": 0})
    obs, *_ = env.step("<think>t</think><tool_call>{\"name\": \"search\", \"arguments\": {}}</tool_call>")
    assert "there is no tool named 'search'. Available tools: (none)" in obs
    assert isinstance(env.task, Task)


def test_add_closer_runs_each_closer_once_on_close(make_env):
    env = make_env()
    calls = []

    def first():
        calls.append("first")

    env.add_closer(first)
    env.add_closer(first)  # already registered: not added twice
    env.add_closer(lambda: calls.append("second"))
    with pytest.raises(ValueError, match="callable"):
        env.add_closer("not a function")
    env.close()
    env.close()
    assert calls == ["first", "second"]
