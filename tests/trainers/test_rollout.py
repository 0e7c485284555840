"""trainers.rollout: exact ids over multi-turn episodes, log-probabilities in place, async refill."""

from __future__ import annotations

import json
import threading
import time

import gymnasium as gym
import pytest
import torch

from envs.protocol import format_turn
from envs.tokens import stop_sequences, tokenize_messages
from envs.tools.base import ToolResult
from trainers.policies import Generation, TransformersPolicy
from trainers.rollout import RolloutConfig, Trajectory, collect, iter_collect, rollout_metrics

from tests.envs.conftest import TASKS

from .conftest import MINI_ENV_ID, make_mini_env, small_subword_tokenizer

ANSWERS = {t["question"]: t["answer"] for t in TASKS}


def _segments(traj: Trajectory) -> list[tuple[int, int]]:
    """(start, end) of each run of loss-mask ones in token_ids."""
    runs, start = [], None
    for i, m in enumerate(traj.loss_mask + [0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append((start, i))
            start = None
    return runs


class LoggingPolicy:
    """Wraps a policy and remembers every (prompt, generated ids) pair."""

    def __init__(self, inner):
        self.inner, self.tokenizer, self.log, self.batches = inner, inner.tokenizer, {}, []

    def generate(self, prompts, **kwargs):
        gens = self.inner.generate(prompts, **kwargs)
        self.batches.append(len(prompts))
        for p, g in zip(prompts, gens):
            self.log.setdefault(tuple(p), []).append(g)
        return gens

    def sampled_at(self, prefix, ids):
        """The generation at this prefix that produced ``ids`` (identical prompts of a group share a key)."""
        matches = [g for g in self.log[tuple(prefix)] if g.token_ids == ids]
        assert matches, "these ids were not sampled at this position"
        return matches[0]


class ScriptedPolicy:
    """A token policy that plays search -> visit -> answer (answer from the question), as ids."""

    def __init__(self, tokenizer, slow_first: str | None = None):
        self.tokenizer, self.slow_first = tokenizer, slow_first

    def _turn(self, prompt_text: str) -> str:
        question = next(q for q in ANSWERS if q in prompt_text)
        turn = prompt_text.count("<|im_start|>assistant\n") - 1
        if self.slow_first and self.slow_first in question and turn == 0:
            return format_turn("wait", tool_call=("slow", {}))
        if self.slow_first is not None or turn >= 2:
            return format_turn("done — é", answer=ANSWERS[question])
        if turn == 0:
            return format_turn("search first", tool_call=("search", {"query": [question[:40]]}))
        return format_turn("read", tool_call=("visit", {"url": "https://en.wikipedia.org/wiki/Paris", "goal": "g"}))

    def generate(self, prompts, *, max_new_tokens, temperature, top_p, stop_ids=()):
        out = []
        for p in prompts:
            text = self._turn(self.tokenizer.decode(p)) + "<|im_end|>"
            ids = self.tokenizer.encode(text, add_special_tokens=False)[:max_new_tokens]
            out.append(Generation(ids, [-0.001 * (i + 1) for i in range(len(ids))], text, "stop"))
        return out


@pytest.fixture(scope="module", params=["bytes", "subword"])
def any_tokenizer(request, tokenizer):
    """ByT5 (markers are ten ids each) and the local subword tokenizer (markers and tags one id each)."""
    return tokenizer if request.param == "bytes" else small_subword_tokenizer()


def test_scripted_multi_turn_ids_are_the_sampled_ids(any_tokenizer):
    tokenizer = any_tokenizer
    policy = LoggingPolicy(ScriptedPolicy(tokenizer))
    config = RolloutConfig(env_id=MINI_ENV_ID, num_envs=2, tool_workers=2, max_new_tokens=512)
    trajs = collect(policy, TASKS, config, group_size=2, progress=False)
    assert [t.index for t in trajs] == list(range(6))
    assert [t.task["id"] for t in trajs] == [t["id"] for t in TASKS for _ in range(2)]
    for traj in trajs:
        assert (traj.termination, traj.is_correct, traj.reward, traj.truncated) == ("answer", True, 1.0, False)
        assert traj.num_turns == 3 and traj.num_tool_calls == 2
        assert len(traj.token_ids) == len(traj.loss_mask) == len(traj.logprobs)
        segments = _segments(traj)
        assert len(segments) == 3
        for start, end in segments:  # each run of ones is exactly what the policy sampled at that point
            sampled = policy.sampled_at(traj.prompt_ids + traj.token_ids[:start], traj.token_ids[start:end])
            assert traj.logprobs[start:end] == sampled.logprobs
        assert all(lp == 0.0 for lp, m in zip(traj.logprobs, traj.loss_mask) if m == 0)
        # A trainer re-tokenizing the transcript gets the same ids and mask (the scripted text round-trips).
        whole = tokenize_messages(traj.messages, tokenizer)
        newline = tokenizer.encode("\n", add_special_tokens=False)
        assert whole.input_ids.tolist() == traj.prompt_ids + traj.token_ids + newline
        assert whole.loss_mask.tolist() == [0] * len(traj.prompt_ids) + traj.loss_mask + [0]
        record = json.loads(json.dumps(traj.to_record()))
        assert record["termination"] == "answer" and record["token_ids"] == traj.token_ids
        assert record["messages"] == traj.messages and record["policy"] == "policy"
    metrics = rollout_metrics(trajs)
    assert metrics["env/accuracy"] == 1.0 and metrics["termination/answer"] == 1.0


def test_tiny_model_rollout_exact_ids_logprobs_and_round_trip(model, any_tokenizer):
    tokenizer = any_tokenizer
    assert len(tokenizer) <= model.config.vocab_size
    policy = LoggingPolicy(TransformersPolicy(model, tokenizer))
    config = RolloutConfig(env_id=MINI_ENV_ID, env_kwargs={"system_prompt": "Answer with tools."}, num_envs=3,
                           tool_workers=2, max_new_tokens=12, temperature=0.9)
    torch.manual_seed(0)
    trajs = collect(policy, TASKS[:2], config, group_size=2, progress=False)
    assert len(trajs) == 4 and max(policy.batches) > 1  # generation was batched across episodes
    reencoded_differs = False
    for traj in trajs:
        assert traj.termination == "format_error" and traj.truncated and traj.num_turns == 3
        assistant = [m["content"] for m in traj.messages if m["role"] == "assistant"]
        segments = _segments(traj)
        assert len(segments) == len(assistant) == 3
        for (start, end), content in zip(segments, assistant):
            ids = traj.token_ids[start:end]
            sampled = policy.sampled_at(traj.prompt_ids + traj.token_ids[:start], ids)
            assert traj.logprobs[start:end] == sampled.logprobs
            # The environment saw exactly the decoded sampled ids, less the stop sequence that ended the turn.
            stop = next((s for s in stop_sequences(tokenizer) if ids[-len(s):] == s), [])
            assert content == tokenizer.decode(ids[: len(ids) - len(stop)], skip_special_tokens=False)
            reencoded_differs |= tokenizer.encode(content, add_special_tokens=False) != ids
        # Log-probabilities sit on the right positions: one forward pass over the whole sequence.
        seq = torch.tensor([traj.prompt_ids + traj.token_ids])
        with torch.no_grad():
            logits = model(seq).logits[0, :-1].float() / 0.9
        lp = torch.log_softmax(logits, -1).gather(-1, seq[0, 1:, None]).squeeze(-1)[len(traj.prompt_ids) - 1:]
        mask = torch.tensor(traj.loss_mask, dtype=torch.bool)
        assert torch.allclose(lp[mask], torch.tensor(traj.logprobs)[mask], atol=2e-4)
    # Why ids are never re-tokenized: decoding then encoding what a model samples does not give its ids back.
    assert reencoded_differs


class SlowTool:
    name = "slow"
    description = "waits until released"
    parameters = {"type": "object", "properties": {}}

    def __init__(self, release: threading.Event, sleep_s: float = 0.0):
        self.release, self.sleep_s = release, sleep_s

    def __call__(self, arguments):
        time.sleep(self.sleep_s)
        released = self.release.wait(timeout=30)
        return ToolResult("released" if released else "timed out")


def test_async_refill_does_not_wait_for_a_slow_episode(tokenizer):
    release = threading.Event()
    env_id = "test/MiniWikiSlow-v0"
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=lambda **kw: make_mini_env(tools=[SlowTool(kw.pop("release"))], **kw))
    config = RolloutConfig(env_id=env_id, env_kwargs={"release": release}, num_envs=2, tool_workers=2)
    policy = ScriptedPolicy(tokenizer, slow_first="Solar Dynamics")
    order = []
    for traj in iter_collect(policy, [TASKS[1], TASKS[0], TASKS[2], TASKS[0]], config, progress=False):
        order.append(traj.task["id"])
        if len(order) == 3:
            release.set()  # only now can the slow episode finish
    assert order == ["horse", "capital", "horse", "sdo"]


def test_limits_end_episodes(tokenizer):
    # The prompt is ~2,430 byte tokens, the first turn ~150, its search results ~400.
    tight = RolloutConfig(env_id=MINI_ENV_ID, num_envs=1, max_total_tokens=2700, max_new_tokens=512)
    traj = collect(ScriptedPolicy(tokenizer), TASKS[:1], tight, progress=False)[0]
    assert traj.termination == "context_limit" and traj.truncated and traj.reward == 0.0 and traj.num_turns == 1
    assert len(traj.prompt_ids) + sum(traj.loss_mask) <= 2700 < len(traj.prompt_ids) + len(traj.token_ids)
    released = threading.Event()
    released.set()
    env_id = "test/MiniWikiSleepy-v0"
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=lambda **kw: make_mini_env(tools=[SlowTool(kw.pop("release"), 0.5)], **kw))
    config = RolloutConfig(env_id=env_id, env_kwargs={"release": released}, num_envs=1, max_episode_seconds=0.2)
    traj = collect(ScriptedPolicy(tokenizer, slow_first="Solar"), TASKS[1:2], config, progress=False)[0]
    assert traj.termination == "time_limit" and traj.truncated and traj.num_tool_calls == 1


class EchoTextPolicy:
    def generate_text(self, conversations, *, max_new_tokens, temperature, top_p, stop=()):
        return [Generation([], [], format_turn("t", answer=ANSWERS[c[1]["content"]]), "stop") for c in conversations]


def test_text_policy_rollouts_have_no_ids():
    config = RolloutConfig(env_id=MINI_ENV_ID, num_envs=2, temperature=0.85, top_p=0.95)
    trajs = collect(EchoTextPolicy(), TASKS, config, progress=False)
    assert all(t.is_correct and t.token_ids == [] and t.prompt_ids == [] and t.num_turns == 1 for t in trajs)


def test_bad_config_and_policy():
    with pytest.raises(ValueError, match="num_envs"):
        RolloutConfig(num_envs=0)
    with pytest.raises(ValueError, match="temperature"):
        RolloutConfig(temperature=-1)
    with pytest.raises(ValueError, match="max_episode_seconds"):
        RolloutConfig(max_episode_seconds=0)
    with pytest.raises(ValueError, match="group_size"):
        list(iter_collect(EchoTextPolicy(), TASKS, RolloutConfig(env_id=MINI_ENV_ID), group_size=0))
    with pytest.raises(ValueError, match="Policy"):
        collect(object(), TASKS, RolloutConfig(env_id=MINI_ENV_ID), progress=False)


class _BreaksOnSdo(gym.Wrapper):
    """An environment whose step raises on one task (a bug in an environment, not in a tool)."""

    def step(self, action):
        if self.env.unwrapped.task.id == "sdo":
            raise RuntimeError("environment bug")
        return self.env.step(action)


def test_a_broken_environment_ends_only_its_episode(tokenizer):
    env_id = "test/MiniWikiBroken-v0"
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=lambda **kw: _BreaksOnSdo(make_mini_env(**kw)))
    config = RolloutConfig(env_id=env_id, num_envs=1)
    trajs = collect(ScriptedPolicy(tokenizer), TASKS, config, progress=False)
    assert [t.termination for t in trajs] == ["answer", "env_error", "answer"]
    assert "environment bug" in trajs[1].info["error"] and trajs[1].truncated
    assert json.loads(json.dumps(trajs[1].to_record()))["termination"] == "env_error"


class SearchThenAnswer:
    """A text policy: one search, then the answer "a"."""

    def generate_text(self, conversations, *, max_new_tokens, temperature, top_p, stop=()):
        out = []
        for c in conversations:
            turn = (format_turn("t", answer="a") if any(m["role"] == "assistant" for m in c)
                    else format_turn("t", tool_call=("search", {"query": ["anarchism"]})))
            out.append(Generation([], [], turn, "stop"))
        return out


def test_rollouts_on_the_simulator_share_one_wikisim(gensim_wiki):
    from envs.wikisim import SHARED_SIMS

    before = SHARED_SIMS.open_count()
    sim, release = SHARED_SIMS.acquire(gensim_wiki)  # held here to read its cache afterwards
    try:
        config = RolloutConfig(env_kwargs={"wiki_dir": str(gensim_wiki), "tools": ["search", "visit"]}, num_envs=3)
        tasks = [{"id": "x", "question": "Which philosophy?", "answer": "a"}]
        first = collect(SearchThenAnswer(), tasks, config, group_size=1, progress=False)
        trajs = first + collect(SearchThenAnswer(), tasks, config, group_size=3, progress=False)
        assert [t.termination for t in trajs] == ["answer"] * 4 and all(t.is_correct for t in trajs)
        assert all("<tool_response>" in t.messages[3]["content"] for t in trajs)
        # Every environment searched through the one simulator: the second run's searches were cache hits.
        assert sim.stats()["search_cache"]["hits"] >= 3
    finally:
        release()
    assert SHARED_SIMS.open_count() == before


class _FixedTurn:
    """Returns ``text`` (then ``tail`` ids) every turn, cut at ``max_new_tokens``."""

    def __init__(self, tokenizer, text, tail=()):
        self.tokenizer, self.text, self.tail = tokenizer, text, list(tail)

    def generate(self, prompts, *, max_new_tokens, temperature, top_p, stop_ids=()):
        ids = (self.tokenizer.encode(self.text, add_special_tokens=False) + self.tail)[:max_new_tokens]
        return [Generation(ids, [-0.1] * len(ids), self.text, "stop") for _ in prompts]


def test_an_answer_cut_by_the_token_limit_is_truncated_not_answered(tokenizer):
    from trainers.grpo_data import is_cut_off

    answer = TASKS[0]["answer"]
    text = format_turn("sure", answer=answer)
    cut = len(tokenizer.encode(text, add_special_tokens=False)) - len("</answer>")  # ByT5: one id per byte
    config = RolloutConfig(env_id=MINI_ENV_ID, num_envs=1, tool_workers=1, max_new_tokens=cut)
    [traj] = collect(_FixedTurn(tokenizer, text), TASKS[:1], config, progress=False)
    assert traj.last_turn_cut and traj.truncated and is_cut_off(traj)
    # The environment took the unclosed (and here complete-looking) answer; the rollout scores it as none.
    assert traj.termination == "token_limit" and traj.reward == 0.0 and not traj.is_correct
    assert traj.info["cut_answer"] == {"reward": 1.0, "is_correct": True}
    config = RolloutConfig(env_id=MINI_ENV_ID, num_envs=1, tool_workers=1, max_new_tokens=4096)
    [whole] = collect(_FixedTurn(tokenizer, text + "<|im_end|>"), TASKS[:1], config, progress=False)
    assert whole.termination == "answer" and not whole.last_turn_cut and not is_cut_off(whole)


def test_format_errors_are_treated_the_same_whatever_the_last_token(tokenizer):
    from trainers.grpo_data import is_cut_off

    config = RolloutConfig(env_id=MINI_ENV_ID, env_kwargs={"max_format_errors": 1}, num_envs=1, tool_workers=1,
                           max_new_tokens=4096)
    out = []
    for policy in (_FixedTurn(tokenizer, "no tags at all<|im_end|>"),
                   _FixedTurn(tokenizer, "no tags at all", [tokenizer.eos_token_id])):
        [traj] = collect(policy, TASKS[:1], config, progress=False)
        assert traj.termination == "format_error" and not traj.last_turn_cut
        out.append(is_cut_off(traj))
    assert out == [False, False]
