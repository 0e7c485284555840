"""A failing judge or policy endpoint (loopback servers) is counted, shown and left out of the
metrics and the loss, never scored as a wrong answer; a run where such errors dominate exits
non-zero."""

from __future__ import annotations

import json
import random
import re
import socket
import time
from types import SimpleNamespace

import pytest

from envs.tasks import task_from_dict, write_jsonl_tasks
from tests.envs.conftest import TASKS
from trainers.grpo_data import impute_error_rewards, prepare_step
from trainers.grpo_state import rollout_metrics
from websailor.cli import main
from wiki_sim.common.fake_chat import FakeChatServer

from .conftest import MINI_ENV_ID

FENCE = re.compile(r"<<<RESPONSE (\w+)>>>\n(.*)\n<<<END RESPONSE \1>>>", re.DOTALL)


@pytest.fixture()
def task_file(tmp_path):
    path = tmp_path / "tasks.jsonl"
    write_jsonl_tasks(path, [task_from_dict(t) for t in TASKS])
    return path


def _eval(task_file, out, *extra):
    return main(["eval", "--tasks", str(task_file), "--env-id", MINI_ENV_ID, "--out", str(out), "--num-envs", "3",
                 *extra])


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_a_failing_judge_is_counted_and_fails_the_run(task_file, tmp_path, capsys):
    with FakeChatServer(mode="fail") as judge:
        code = _eval(task_file, tmp_path / "eval", "--policy", "heuristic", "--judge", "llm",
                     "--judge-base-url", judge.base_url, "--judge-model", "grader")
    captured = capsys.readouterr()
    assert code != 0 and "3 of 3 episodes ended without a verdict (judge_error=3)" in captured.err
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert summary["errors"] == {"judge_error": 3} and summary["error_share"] == 1.0
    assert summary["pass@1"] is None and summary["scored_tasks"] == 0  # not 0.000: there was no verdict
    assert "episodes without a verdict (left out of pass@k): 3 (judge_error=3)" in captured.out
    rows = [json.loads(line) for line in (tmp_path / "eval" / "heuristic.jsonl").read_text().splitlines()]
    assert all(r["errors"] == 1 and r["pass@1"] is None for r in rows)


def test_some_judge_errors_are_left_out_of_pass_at_1(task_file, tmp_path, capsys):
    def grader(body):
        prompt = body["messages"][0]["content"]
        if "Epsom Derby" in prompt:  # the grader cannot grade this one
            return "I am not sure.", "stop"
        response = FENCE.search(prompt).group(2)
        gold = prompt.split("[correct_answer]: ", 1)[1].split("\n", 1)[0]
        return f"correct: {'yes' if response.lower() in gold.lower() else 'no'}", "stop"

    with FakeChatServer(grader) as judge:
        code = _eval(task_file, tmp_path / "eval", "--policy", "heuristic", "--judge", "llm",
                     "--judge-base-url", judge.base_url, "--judge-model", "grader")
    summary = _last_json(capsys)
    assert code == 0 and summary["errors"] == {"judge_error": 1} and summary["scored_tasks"] == 2
    rows = {r["id"]: r for r in map(json.loads, (tmp_path / "eval" / "heuristic.jsonl").read_text().splitlines())}
    assert rows["horse"]["pass@1"] is None and rows["horse"]["terminations"] == ["judge_error"]
    assert summary["pass@1"] == pytest.approx((rows["sdo"]["pass@1"] + rows["capital"]["pass@1"]) / 2)


def test_a_policy_endpoint_that_is_down_is_a_policy_error(task_file, tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = _eval(task_file, tmp_path / "eval", "--policy", "openai", "--model", "agent",
                 "--base-url", f"http://127.0.0.1:{port}/v1")
    captured = capsys.readouterr()
    assert code != 0 and "policy_error=3" in captured.err
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert summary["terminations"] == {"policy_error": 3} and summary["pass@1"] is None


def _traj(reward, termination="answer"):
    return SimpleNamespace(reward=reward, prompt_ids=[1, 2], token_ids=[5, 6], loss_mask=[1, 1],
                           logprobs=[-0.5, -0.25], termination=termination, truncated=termination != "answer")


def test_grpo_leaves_error_trajectories_out_of_the_loss_and_the_baseline():
    group = [_traj(1.0), _traj(0.0), _traj(0.0, "judge_error"), _traj(0.0)]
    assert impute_error_rewards(group, 4) == [1.0, 0.0, pytest.approx(1 / 3), 0.0]
    chosen, advs, include, stats = prepare_step(group, 4, advantage="loo", scale_std=False, equal_groups="keep",
                                                exclude_truncated=True, rng=random.Random(0))
    assert include == [True, True, False, True] and stats.error_trajectories == 1
    assert stats.excluded_trajectories == 0
    # leave-one-out: 1 - mean(0, 1/3, 0) = 8/9 for the correct one
    assert advs[0] == pytest.approx(1 - 1 / 9)
    # a group whose only "difference" is an error has no signal: dropped, nothing to learn
    flat = [_traj(0.0), _traj(0.0, "policy_error"), _traj(0.0, "judge_error"), _traj(0.0)]
    chosen, advs, include, stats = prepare_step(flat, 4, advantage="loo", scale_std=False, equal_groups="drop",
                                                exclude_truncated=True, rng=random.Random(0))
    assert chosen == [] and stats.all_equal == 1


def test_grpo_reward_metrics_leave_errors_out():
    rows = [{"reward": 1.0, "correct": True, "termination": "answer", "length": 4, "sampled": 2, "tool_calls": 1,
             "truncated": False},
            {"reward": 0.0, "correct": False, "termination": "judge_error", "length": 4, "sampled": 2,
             "tool_calls": 1, "truncated": True}]
    metrics = rollout_metrics([rows])
    assert metrics["reward/mean"] == 1.0 and metrics["reward/correct_frac"] == 1.0
    assert metrics["rollout/error_frac"] == 0.5 and metrics["rollout/termination/judge_error"] == 0.5


def test_a_dribbling_policy_endpoint_cannot_hold_an_eval_turn_past_the_episode_limit(task_file, tmp_path, capsys):
    with FakeChatServer(lambda body: ("<answer>Paris</answer>" * 20, "stop"), mode="dribble", interval=0.2) as server:
        start = time.monotonic()
        code = _eval(task_file, tmp_path / "eval", "--policy", "openai", "--model", "agent",
                     "--base-url", server.base_url, "--max-episode-seconds", "1", "--limit", "1")
        elapsed = time.monotonic() - start
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code != 0 and summary["terminations"] == {"policy_error": 1}
    # 3 attempts of at most 1 s each and backoffs of 1 + 2 s; the reply alone takes 90 s at 0.2 s a byte
    assert elapsed < 20
