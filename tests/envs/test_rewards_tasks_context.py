import json
from pathlib import Path

import pytest

from envs.context import TokenCounter, estimate_tokens
from envs.prompts import render_chatml
from envs.rewards import DEFAULT_WEIGHTS, WEBSAILOR_V1_WEIGHTS, check_weights, episode_reward
from envs.tasks import Task, load_tasks, task_from_dict, write_jsonl_tasks

REFERENCE = Path(__file__).resolve().parents[2] / "../shared/reference"


def test_reward_formula():
    assert DEFAULT_WEIGHTS == (0.0, 1.0) and WEBSAILOR_V1_WEIGHTS == (0.1, 0.9)
    assert episode_reward(WEBSAILOR_V1_WEIGHTS, True, 1.0) == pytest.approx(1.0)
    assert episode_reward(WEBSAILOR_V1_WEIGHTS, True, 0.0) == pytest.approx(0.1)
    assert episode_reward(WEBSAILOR_V1_WEIGHTS, False, 0.5) == pytest.approx(0.45)
    assert episode_reward(DEFAULT_WEIGHTS, True, 0.0) == 0.0
    assert episode_reward((1.0, 1.0), False, 7.0) == 1.0  # the answer score is clipped to [0, 1]
    for bad in [(-0.1, 1.0), (float("nan"), 1.0), (1.0,), "ab"]:
        with pytest.raises(ValueError, match="reward_weights"):
            check_weights(bad)


@pytest.mark.parametrize("name, rows, extra", [
    ("sailorfog_qa_sample.jsonl", 20, set()),
    ("webdancer_sample_qa.jsonl", 200, {"tag"}),
    ("webshaper_500.jsonl", 500, {"formalization", "urls"}),
])
def test_released_task_files_load_unchanged(name, rows, extra):
    path = REFERENCE / name
    tasks = load_tasks(path)
    raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(tasks) == len(raw) == rows
    for task, record in zip(tasks, raw):
        assert task.question == record["question"].strip() and task.answer == str(record["answer"]).strip()
        assert set(task.metadata) == extra
        if "id" in record:
            assert task.id == record["id"]
    assert len({t.id for t in tasks}) == rows


def test_task_ids_aliases_and_round_trip(tmp_path):
    task = task_from_dict({"question": "Q?", "answer": 1964, "aliases": "nineteen sixty-four", "tag": "x"})
    assert task.answer == "1964" and task.aliases == ("nineteen sixty-four",) and task.metadata == {"tag": "x"}
    assert task.id == task_from_dict({"question": "Q?", "answer": "y"}).id  # stable hash of the question
    assert task.answers == ["1964", "nineteen sixty-four"]
    write_jsonl_tasks(tmp_path / "t.jsonl", [task])
    assert load_tasks(tmp_path / "t.jsonl") == [task]
    assert load_tasks([task.to_dict(), task]) == [task, task]


@pytest.mark.parametrize("content, message", [
    ('{"question": "q"}\n', r"t.jsonl:1: missing 'answer'"),
    ('{"question": "q", "answer": "a"}\n{oops\n', r"t.jsonl:2: not valid JSON"),
    ('{"question": "", "answer": "a"}\n', "'question' is empty"),
    ('{"question": "q", "answer": ["a"]}\n', "'answer' must be a string or a number"),
    ('{"question": "q", "answer": "a", "aliases": {"x": 1}}\n', "'aliases' must be a list"),
    ("\n\n", "no tasks"),
    ("[1, 2]\n", "expected a JSON object"),
])
def test_bad_task_files_fail_with_the_line(tmp_path, content, message):
    path = tmp_path / "t.jsonl"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_tasks(path)


def test_bad_task_arguments():
    with pytest.raises(ValueError, match="not found"):
        load_tasks("/nonexistent/tasks.jsonl")
    with pytest.raises(ValueError, match="empty"):
        load_tasks([])
    with pytest.raises(ValueError, match="single dict"):
        load_tasks({"question": "q", "answer": "a"})
    assert isinstance(load_tasks([{"question": "q", "answer": "a"}])[0], Task)


def test_estimate_is_documented_formula():
    assert estimate_tokens("abcd" * 10) == 10
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("日本語") == 3
    counter = TokenCounter()
    assert not counter.exact
    assert counter.message_tokens("user", "abcd") == 1 + 1 + 4  # content + role + framing


def test_tokenizer_counts_sum_to_the_whole_transcript():
    from transformers import ByT5Tokenizer

    tokenizer = ByT5Tokenizer()
    counter = TokenCounter(tokenizer)
    messages = [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Où est Paris?"},
                {"role": "assistant", "content": "<think>x</think><answer>France</answer>"}]
    total = sum(counter.message_tokens(m["role"], m["content"]) for m in messages)
    assert total == len(tokenizer.encode(render_chatml(messages), add_special_tokens=False))
    assert TokenCounter(lambda text: len(text)).message_tokens("user", "ab") == len("<|im_start|>user\nab<|im_end|>\n")
    with pytest.raises(ValueError, match="tokenizer"):
        TokenCounter(42)
