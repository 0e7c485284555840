"""A failing policy endpoint (loopback servers) is counted, shown and left out of the metrics and
the loss; an answer the judge cannot grade scores as wrong everywhere (pass@k, GRPO's advantages
and loss), its rate is reported, and a run above the stated rate stops early and exits non-zero."""

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


def test_a_failing_judge_stops_the_run_at_once_and_fails_it(task_file, tmp_path, capsys):
    with FakeChatServer(mode="fail") as judge:
        code = _eval(task_file, tmp_path / "eval", "--policy", "heuristic", "--judge", "llm", "--num-envs", "1",
                     "--judge-base-url", judge.base_url, "--judge-model", "grader", "--judge-retries", "0")
        requests = len(judge.requests)
    captured = capsys.readouterr()
    assert code != 0 and len(captured.err.strip().splitlines()) == 1
    assert "the judge could not grade 1 of 3 answers" in captured.err and "stopped after 1 episodes" in captured.err
    assert requests == 1  # stopped early: the other two episodes never ran
    assert (tmp_path / "eval" / "heuristic.trajectories.jsonl.partial").is_file()


def _naive_grader(body):
    """A grader that answers without a verdict whenever the response is wrong (what a hostile answer
    can make a naive grader do)."""
    prompt = body["messages"][0]["content"]
    response = FENCE.search(prompt).group(2)
    gold = prompt.split("[correct_answer]: ", 1)[1].split("\n", 1)[0]
    return ("correct: yes", "stop") if response.lower() in gold.lower() else ("I am not sure.", "stop")


def test_answers_that_break_the_judge_score_as_wrong(tmp_path, capsys):
    """The red team's attack: the wrong answers make the judge reply without a verdict. They count as
    wrong in pass@1; the summary reports the judge-error rate; above the stated rate the run fails."""
    task_file = tmp_path / "tasks.jsonl"  # the heuristic answers "Paris": wrong here, so it breaks the grader
    write_jsonl_tasks(task_file, [task_from_dict({**t, "answer": "Lyon"} if t["id"] == "capital" else t)
                                  for t in TASKS])
    with FakeChatServer(_naive_grader) as judge:
        code = _eval(task_file, tmp_path / "eval", "--policy", "heuristic", "--judge", "llm", "--k", "2",
                     "--judge-base-url", judge.base_url, "--judge-model", "grader", "--max-judge-error-rate", "1")
    summary = _last_json(capsys)
    rows = {r["id"]: r for r in map(json.loads, (tmp_path / "eval" / "heuristic.jsonl").read_text().splitlines())}
    assert code == 0 and summary["judge_errors"] == 2 and summary["errors"] == {}  # not "no verdict"
    assert summary["judge_error_rate"] == pytest.approx(2 / 6)
    assert rows["capital"]["correct"] == 0 and rows["capital"]["judge_errors"] == 2
    assert summary["pass@1"] == pytest.approx(2 / 3)  # not 1.000
    assert all(r["pass@1"] is not None and r["scored"] == 2 for r in rows.values())
    with FakeChatServer(_naive_grader) as judge:  # the default rate (2%): the same run fails
        code = _eval(task_file, tmp_path / "again", "--policy", "heuristic", "--judge", "llm", "--k", "2",
                     "--judge-base-url", judge.base_url, "--judge-model", "grader")
    assert code != 0 and "--max-judge-error-rate" in capsys.readouterr().err


def test_a_hanging_judge_costs_what_the_command_line_says(task_file, tmp_path, capsys):
    with FakeChatServer(mode="hang", interval=30) as judge:
        start = time.monotonic()
        code = _eval(task_file, tmp_path / "eval", "--policy", "heuristic", "--judge", "llm", "--limit", "1",
                     "--judge-base-url", judge.base_url, "--judge-model", "grader", "--judge-timeout-s", "1",
                     "--judge-retries", "1")
        elapsed = time.monotonic() - start
    assert code != 0 and "could not grade 1 of 1" in capsys.readouterr().err
    assert elapsed < 10  # two attempts of 1 s and one backoff of 1 s, not 4 x 60 s and 7 s of backoff


def test_bad_judge_options_are_one_line_errors(task_file, tmp_path, capsys):
    for flag, value in (("--judge-timeout-s", "0"), ("--judge-retries", "-1"), ("--max-judge-error-rate", "2")):
        code = _eval(task_file, tmp_path / "eval", "--policy", "heuristic", flag, value)
        err = capsys.readouterr().err
        assert code != 0 and flag in err and len(err.strip().splitlines()) == 1


def test_a_policy_endpoint_that_is_down_is_a_policy_error(task_file, tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = _eval(task_file, tmp_path / "eval", "--policy", "openai", "--model", "agent",
                 "--base-url", f"http://127.0.0.1:{port}/v1")
    captured = capsys.readouterr()
    assert code != 0 and "2 of 3 episodes ended without a verdict (policy_error" in captured.err
    assert "stopped after 2 episodes" in captured.err and len(captured.err.strip().splitlines()) == 1


def _traj(reward, termination="answer"):
    return SimpleNamespace(reward=reward, prompt_ids=[1, 2], token_ids=[5, 6], loss_mask=[1, 1],
                           logprobs=[-0.5, -0.25], termination=termination, truncated=termination != "answer")


def test_grpo_leaves_error_trajectories_out_of_the_loss_and_the_baseline():
    group = [_traj(1.0), _traj(0.0), _traj(0.0, "policy_error"), _traj(0.0)]
    assert impute_error_rewards(group, 4) == [1.0, 0.0, pytest.approx(1 / 3), 0.0]
    chosen, advs, include, stats = prepare_step(group, 4, advantage="loo", scale_std=False, equal_groups="keep",
                                                exclude_truncated=True, rng=random.Random(0))
    assert include == [True, True, False, True] and stats.error_trajectories == 1
    assert stats.excluded_trajectories == 0
    # leave-one-out: 1 - mean(0, 1/3, 0) = 8/9 for the correct one
    assert advs[0] == pytest.approx(1 - 1 / 9)
    # a group whose only "difference" is an error has no signal: dropped, nothing to learn
    flat = [_traj(0.0), _traj(0.0, "policy_error"), _traj(0.0, "env_error"), _traj(0.0)]
    chosen, advs, include, stats = prepare_step(flat, 4, advantage="loo", scale_std=False, equal_groups="drop",
                                                exclude_truncated=True, rng=random.Random(0))
    assert chosen == [] and stats.all_equal == 1


def _answered(reward, termination):
    """An answered episode as the rollout records it (the answer turn sampled, not cut)."""
    return SimpleNamespace(reward=reward, prompt_ids=[1, 2], token_ids=[5, 6], loss_mask=[1, 1],
                           logprobs=[-0.5, -0.25], termination=termination, truncated=False, last_turn_cut=False)


def test_grpo_scores_an_answer_that_broke_the_judge_as_wrong():
    """The red team's attack on GRPO: an answer that makes the judge fail must not escape the loss
    with advantage 0 while a plain wrong answer is pushed down."""
    group = [_answered(1.0, "answer"), _answered(0.0, "answer"), _answered(0.0, "judge_error"),
             _answered(0.0, "answer")]
    assert impute_error_rewards(group, 4) == [1.0, 0.0, 0.0, 0.0]
    chosen, advs, include, stats = prepare_step(group, 4, advantage="loo", scale_std=False, equal_groups="keep",
                                                exclude_truncated=True, rng=random.Random(0))
    assert include == [True, True, True, True] and stats.error_trajectories == 0
    assert advs[2] == pytest.approx(advs[1]) and advs[2] < 0  # the same push down as the wrong answer


def test_grpo_reward_metrics_leave_errors_out():
    rows = [{"reward": 1.0, "correct": True, "termination": "answer", "length": 4, "sampled": 2, "tool_calls": 1,
             "truncated": False},
            {"reward": 0.0, "correct": False, "termination": "policy_error", "length": 4, "sampled": 2,
             "tool_calls": 1, "truncated": True},
            {"reward": 0.0, "correct": False, "termination": "judge_error", "length": 4, "sampled": 2,
             "tool_calls": 1, "truncated": False}]
    metrics = rollout_metrics([rows])
    assert metrics["reward/mean"] == 0.5 and metrics["reward/correct_frac"] == 0.5  # the judge error is wrong
    assert metrics["rollout/error_frac"] == pytest.approx(1 / 3)
    assert metrics["rollout/termination/judge_error"] == pytest.approx(1 / 3)


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
