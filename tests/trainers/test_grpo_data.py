"""trainers.grpo_data: group selection, loss inclusion, batch tensors, the task pool."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from trainers.grpo_data import TaskPool, build_batch, is_cut_off, prepare_step, select_groups


def traj(reward, prompt=(1, 2), ids=(5, 6), mask=(1, 1), lps=(-0.5, -0.25), termination="answer"):
    return SimpleNamespace(reward=reward, prompt_ids=list(prompt), token_ids=list(ids), loss_mask=list(mask),
                           logprobs=list(lps), termination=termination, truncated=termination != "answer")


def test_select_groups_keep_drop_dupo():
    rewards = [1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 1]  # groups of 2: equal, equal, signal, signal, equal, signal
    keep, s = select_groups(rewards, 2, "keep", random.Random(0))
    assert keep == [0, 1, 2, 3, 4, 5] and s.all_equal == 3 and s.dropped == 0
    rewards = [1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 1]
    drop, s = select_groups(rewards, 2, "drop", random.Random(0))
    assert drop == [2, 3, 5] and s.all_equal == 3 and s.dropped == 3 and s.duplicated == 0
    dupo, s = select_groups(rewards, 2, "dupo", random.Random(0))
    assert len(dupo) == 6 and dupo[:3] == [2, 3, 5] and set(dupo[3:]) <= {2, 3, 5} and s.duplicated == 3
    none, s = select_groups([0, 0, 1, 1], 2, "dupo", random.Random(0))
    assert none == [] and s.dropped == 2


def test_cut_off_rule():
    assert not is_cut_off(traj(1.0))
    assert is_cut_off(traj(0.0, termination="max_tool_calls"))
    assert is_cut_off(traj(0.0, termination="context_limit"))
    # the last turn hit the token limit: the rollout closed it with unsampled end-of-turn ids (mask 0)
    assert is_cut_off(traj(0.0, ids=(5, 6, 9), mask=(1, 1, 0), lps=(-1, -1, 0), termination="format_error"))
    # a malformed turn that ended by itself stays in the loss (its reward 0 pushes bad format down)
    assert not is_cut_off(traj(0.0, termination="format_error"))


def test_prepare_step_advantages_and_exclusion():
    ts = [traj(1.0), traj(0.0, termination="max_tool_calls"), traj(0.0), traj(0.0)]
    chosen, adv, inc, stats = prepare_step(ts, 4, advantage="loo", scale_std=False, equal_groups="keep",
                                           exclude_truncated=True, rng=random.Random(0))
    assert adv == pytest.approx([1.0, -1 / 3, -1 / 3, -1 / 3])  # the cut-off one still counts in the baseline
    assert inc == [True, False, True, True] and stats.excluded_trajectories == 1
    _, _, inc, stats = prepare_step(ts, 4, advantage="mean", scale_std=False, equal_groups="keep",
                                    exclude_truncated=False, rng=random.Random(0))
    assert inc == [True] * 4 and stats.excluded_trajectories == 0


def test_build_batch_alignment_and_masks():
    # prompt [1, 2, 3]; turn 1 sampled [10, 11]; tool response [20, 21] (mask 0); turn 2 sampled [12]
    t = traj(1.0, prompt=(1, 2, 3), ids=(10, 11, 20, 21, 12), mask=(1, 1, 0, 0, 1), lps=(-1, -2, 0, 0, -3))
    short = traj(0.0, prompt=(1, 2), ids=(10,), mask=(1,), lps=(-4,))
    b = build_batch([t, short], [0.5, -0.5], [True, True], pad_id=0)
    assert b.input_ids.tolist() == [[1, 2, 3, 10, 11, 20, 21, 12], [1, 2, 10, 0, 0, 0, 0, 0]]
    assert b.attention_mask.tolist() == [[1] * 8, [1, 1, 1, 0, 0, 0, 0, 0]]
    # position t predicts input_ids[t + 1]
    assert b.loss_mask.tolist() == [[0, 0, 1, 1, 0, 0, 1], [0, 1, 0, 0, 0, 0, 0]]
    assert b.old_logprobs.tolist() == [[0, 0, -1, -2, 0, 0, -3], [0, -4, 0, 0, 0, 0, 0]]
    assert b.first_target == 1 and b.num_tokens == 4
    excluded = build_batch([t, short], [0.5, -0.5], [False, True], pad_id=0)
    assert excluded.loss_mask[0].sum() == 0 and excluded.num_tokens == 1
    mb = b.slice(slice(1, 2))
    assert mb.input_ids.tolist() == [[1, 2, 10]] and mb.loss_mask.tolist() == [[0, 1]]
    with pytest.raises(ValueError, match="same length"):
        build_batch([traj(1.0, mask=(1,))], [0.0], [True], 0)


def tasks(n):
    return [{"id": f"t{i}", "question": f"q{i}", "answer": f"a{i}"} for i in range(n)]


def test_pool_round_robin_and_retirement():
    pool = TaskPool(tasks(6), pool_size=3, window=2, min_active=2, seed=1)
    assert pool.active == [0, 1, 2]
    first = pool.draw(3)
    assert sorted(first) == [0, 1, 2]
    # task 0 always solved, task 1 never, task 2 mixed -> 0 and 1 retire, 3 and 4 join
    retired = pool.record([0, 0, 1, 1, 2, 2], [1, 1, 0, 0, 1, 0])
    assert retired == 2 and pool.active == [2, 3, 4] and pool.next_fresh == 5
    # one outcome is not enough to judge a task
    assert pool.record([3], [1]) == 0


def test_pool_never_shrinks_below_min_active_and_filters():
    pool = TaskPool(tasks(3), pool_size=2, window=1, min_active=2)
    assert pool.record([0, 1], [1, 1]) == 1  # only one fresh task left; min_active keeps the other
    assert len(pool.active) == 2
    keep_odd = lambda batch: [dict(t, filtered=True) for t in batch if int(t["id"][1:]) % 2 == 1]
    pool = TaskPool(tasks(8), pool_size=2, window=1, task_filter=keep_odd)
    assert [pool.task(i)["id"] for i in pool.active] == ["t1", "t3"] and pool.task(0)["filtered"]
    with pytest.raises(ValueError, match="kept none"):
        TaskPool(tasks(2), pool_size=2, window=1, task_filter=lambda b: [])


def test_pool_state_round_trip():
    a = TaskPool(tasks(10), pool_size=3, window=2, seed=3)
    a.draw(2)
    a.record([0, 0], [1, 1])
    b = TaskPool(tasks(10), pool_size=3, window=2, seed=3)
    b.load_state_dict(a.state_dict())
    assert [a.draw(1) for _ in range(7)] == [b.draw(1) for _ in range(7)]



def test_a_dry_pool_resumed_with_more_tasks_draws_the_new_ones():
    # every task retired down to min_active: the source is dry, so one step draws the same 2 tasks
    a = TaskPool(tasks(4), pool_size=4, window=1, min_active=2, seed=0)
    a.record([0, 1, 2, 3], [1, 1, 0, 1])
    assert len(a.active) == 2 and a.next_fresh == 4
    assert sorted(set(a.draw(4))) == sorted(a.active)
    # resumed from that state with four more tasks in its source: they join before the next draw
    b = TaskPool(tasks(8), pool_size=4, window=1, min_active=2, seed=0)
    b.load_state_dict(a.state_dict())
    drawn = b.draw(4)
    assert len(b.active) == 4 and b.next_fresh == 6
    assert sorted(drawn) == sorted(b.active) and {b.task(i)["id"] for i in b.active} >= {"t4", "t5"}
    # a pool whose source is dry stays as it is
    assert a.draw(2) and len(a.active) == 2

def test_cut_off_rule_follows_the_rollouts_flag_not_the_last_token():
    eos_closed = dict(ids=(5, 6, 9), mask=(1, 1, 0), lps=(-1, -1, 0))  # ended on EOS; the rollout added the marker
    for shape in ({}, eos_closed):
        t = traj(0.0, termination="format_error", **shape)
        t.last_turn_cut = False
        assert not is_cut_off(t)  # a malformed turn that ended by itself: same whatever its last token
        t.last_turn_cut = True
        assert is_cut_off(t)  # cut by the token limit: truncated
    answered = traj(1.0)
    answered.last_turn_cut = True  # an answer cut mid-way is truncated, not answered
    assert is_cut_off(answered) and is_cut_off(traj(0.0, termination="token_limit"))


def test_overlong_penalize_keeps_turns_the_token_limit_cut_and_only_those():
    cut_turn = traj(0.0, termination="format_error")
    cut_turn.last_turn_cut = True
    budget = traj(0.0, termination="max_tool_calls")
    budget.last_turn_cut = True  # the environment's budget ended it: still out of the loss
    for t in (traj(0.0, termination="token_limit"), cut_turn):
        assert is_cut_off(t) and not is_cut_off(t, "penalize")
    for t in (budget, traj(0.0, termination="context_limit"), traj(0.0, termination="time_limit")):
        assert is_cut_off(t) and is_cut_off(t, "penalize")
    ts = [traj(1.0), traj(0.0, termination="token_limit"), traj(0.0, termination="max_tool_calls"), traj(0.0)]
    _, adv, inc, stats = prepare_step(ts, 4, advantage="loo", scale_std=False, equal_groups="keep",
                                      exclude_truncated=True, rng=random.Random(0), overlong="penalize")
    assert inc == [True, True, False, True] and stats.excluded_trajectories == 1
    assert adv[1] == pytest.approx(-1 / 3)  # pushed down like a wrong answer
