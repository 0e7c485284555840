"""trainers.decode: the KV engine samples what ``model.generate`` samples, and reuses what it may."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from tests.trainers.conftest import MINI_SHORT_ENV_ID, TASKS, tiny_qwen2
from trainers import decode
from trainers.policies import TransformersPolicy
from trainers.rollout import RolloutConfig, collect

SYSTEM = "You are a careful research agent. Search, read, then answer. " * 2


def _prompts(tokenizer, questions):
    return [tokenizer.encode(SYSTEM + q, add_special_tokens=False) for q in questions]


def _both(model, tokenizer, prompts, seeds, keys=None, policy=None, **kwargs):
    """(generate engine, kv engine) generations of ``prompts``, each row from its own seeded generator."""
    gens = lambda: [torch.Generator().manual_seed(s) for s in seeds]  # noqa: E731
    old = TransformersPolicy(model, tokenizer, engine="generate").generate(prompts, generators=gens(), **kwargs)
    policy = policy or TransformersPolicy(model, tokenizer, engine="kv")
    new = policy.generate(prompts, generators=gens(), cache_keys=keys, **kwargs)
    return old, new


def _assert_same(old, new):
    for a, b in zip(old, new, strict=True):
        assert a.token_ids == b.token_ids
        assert a.finish_reason == b.finish_reason
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.9), (0.0, 1.0)])
def test_kv_engine_samples_what_generate_samples(model, tokenizer, temperature, top_p):
    prompts = _prompts(tokenizer, ["who is A?", "who wrote the book B?", "who is A?", "x"])
    stops = [tokenizer.encode("<|im_end|>", add_special_tokens=False), [1]]
    old, new = _both(model, tokenizer, prompts, [3, 4, 5, 6], max_new_tokens=24, temperature=temperature,
                     top_p=top_p, stop_ids=stops)
    _assert_same(old, new)


def test_rows_that_stop_at_different_steps_leave_the_batch(model, tokenizer):
    prompts = _prompts(tokenizer, [f"question {i}" for i in range(9)])
    stops = list(range(150, 260))  # many one-token stops: rows end at scattered steps
    old, new = _both(model, tokenizer, prompts, range(9), max_new_tokens=30, temperature=1.0, top_p=1.0,
                     stop_ids=stops)
    _assert_same(old, new)
    lengths = {len(g.token_ids) for g in new}
    assert len(lengths) > 2 and any(g.finish_reason == "stop" for g in new)


def test_a_second_turn_runs_only_its_new_tokens(model, tokenizer):
    policy = TransformersPolicy(model, tokenizer, engine="kv")
    prompts = _prompts(tokenizer, ["who is A?", "who is A?", "what is C?"])
    keys = ["e0", "e1", "e2"]
    kwargs = dict(max_new_tokens=12, temperature=1.0, top_p=1.0, stop_ids=[[1]])
    first = policy.generate(prompts, generators=[torch.Generator().manual_seed(s) for s in (0, 1, 2)],
                            cache_keys=keys, **kwargs)
    store = policy.store
    assert set(store.entries) == set(keys) and len(store.prefixes) == 1  # the shared system prompt, once
    # the two identical first prompts were prefilled once: prefix + two unique suffixes
    assert store.prefilled_tokens == len(prompts[0]) + len(prompts[2]) - len(next(iter(store.prefixes)))
    follow = tokenizer.encode("<tool_response>\nA is a painter\n</tool_response>", add_special_tokens=False)
    second = [p + g.token_ids + follow for p, g in zip(prompts, first)]
    before = store.prefilled_tokens
    old, new = _both(model, tokenizer, second, [7, 8, 9], keys=keys, policy=policy, **kwargs)
    _assert_same(old, new)
    # each row reused its own first turn (all but the last sampled token) and ran the rest
    assert store.prefilled_tokens - before == sum(len(follow) + 1 for _ in keys)


def test_kept_states_are_dropped_when_the_weights_change(tokenizer):
    model = tiny_qwen2(seed=5)
    policy = TransformersPolicy(model, tokenizer, engine="kv")
    prompts = _prompts(tokenizer, ["who is A?"])
    kwargs = dict(max_new_tokens=8, temperature=0.0, top_p=1.0)
    first = policy.generate(prompts, cache_keys=["e"], **kwargs)
    assert policy.store.entries
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.5)  # an optimizer step moves the parameters in place
    second = [prompts[0] + first[0].token_ids + [40, 41, 42]]
    old, new = _both(model, tokenizer, second, [0], keys=["e"], policy=policy, **kwargs)
    _assert_same(old, new)
    assert policy.store.reused_tokens == 0  # the first turn's states were computed by other weights


def test_the_store_stays_within_its_bytes(model, tokenizer):
    policy = TransformersPolicy(model, tokenizer, engine="kv", cache_bytes=30_000)
    prompts = _prompts(tokenizer, [f"q{i}" for i in range(6)])
    policy.generate(prompts, max_new_tokens=4, temperature=1.0, top_p=1.0, cache_keys=list(range(6)))
    assert policy.store.nbytes() <= 30_000
    policy.release(list(range(6)))
    assert not policy.store.entries


def test_models_it_cannot_run_use_generate(tokenizer):
    config = Qwen2Config(vocab_size=384, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, use_sliding_window=True, sliding_window=16,
                         max_window_layers=0, layer_types=["sliding_attention", "sliding_attention"])
    sliding = Qwen2ForCausalLM(config)
    assert not decode.supports(sliding)
    assert TransformersPolicy(sliding, tokenizer).engine == "generate"
    with pytest.raises(ValueError, match="engine 'kv'"):
        TransformersPolicy(sliding, tokenizer, engine="kv")
    with pytest.raises(ValueError, match="engine must be"):
        TransformersPolicy(tiny_qwen2(), tokenizer, engine="fast")


def test_sample_rows_by_hand():
    logp = torch.log(torch.tensor([[0.5, 0.3, 0.2, 0.0], [0.1, 0.1, 0.1, 0.7]]))
    assert decode.sample_rows(logp, 0.0, None).tolist() == [0, 3]
    g = [torch.Generator().manual_seed(0), torch.Generator().manual_seed(1)]
    u = [float(torch.rand((), generator=torch.Generator().manual_seed(s), dtype=torch.float64)) for s in (0, 1)]
    expected = [int(torch.searchsorted(torch.cumsum(row.double().exp(), 0), x, right=True)) for row, x in zip(logp, u)]
    assert decode.sample_rows(logp, 1.0, g).tolist() == expected
    never = torch.log(torch.tensor([[1.0, 0.0, 0.0]]))
    assert decode.sample_rows(never, 1.0, [torch.Generator().manual_seed(2)]).tolist() == [0]


def test_rollouts_with_the_kv_engine_match_the_generate_engine(model, tokenizer):
    config = RolloutConfig(env_id=MINI_SHORT_ENV_ID, num_envs=4, max_new_tokens=16, temperature=1.0, seed=3,
                           schedule="lockstep")
    runs = {}
    for engine in ("generate", "kv"):
        policy = TransformersPolicy(model, tokenizer, engine=engine)
        runs[engine] = collect(policy, TASKS[:2], config, group_size=2, progress=False)
        if engine == "kv":
            assert not policy.store.entries  # every episode's states were released when it ended
    for a, b in zip(runs["generate"], runs["kv"], strict=True):
        assert a.token_ids == b.token_ids and a.num_turns == b.num_turns
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)
    assert max(t.num_turns for t in runs["kv"]) > 1


def _two_turns_match_generate(model, tokenizer, policy):
    """Four prompts of different lengths, then their second turns, sampled by ``policy`` (kept states reused)
    and by the generate engine: the same samples."""
    prompts = _prompts(tokenizer, ["a", "who wrote the long book B?", "c?", "what is the capital of D?"])
    keys = ["a", "b", "c", "d"]
    kwargs = dict(max_new_tokens=10, temperature=1.0, top_p=1.0, stop_ids=[[1]])
    old, new = _both(model, tokenizer, prompts, [1, 2, 3, 4], keys=keys, policy=policy, **kwargs)
    _assert_same(old, new)
    second = [p + g.token_ids + [50, 51, 52] * (i + 1) for i, (p, g) in enumerate(zip(prompts, new))]
    old, new = _both(model, tokenizer, second, [5, 6, 7, 8], keys=keys, policy=policy, **kwargs)
    _assert_same(old, new)


def test_prefill_in_chunks_of_rows_gives_the_same_samples(model, tokenizer):
    """A small prefill budget runs the rows a few at a time (each chunk through its own view of the cache)."""
    policy = TransformersPolicy(model, tokenizer, engine="kv")
    policy._decoder = decode.Decoder(model, policy.device, prefill_tokens=40)
    _two_turns_match_generate(model, tokenizer, policy)
    assert policy.store.reused_tokens > 0


def test_transformers_without_per_row_logits_to_keep_samples_the_same(model, tokenizer):
    """Before transformers read a 2-D ``logits_to_keep`` per row (5.17 on the GPU machines), a tensor is
    one set of positions for every row: the decoder keeps the rows' distinct positions and gathers each
    row's own, sampling what ``model.generate`` samples (prompts of different lengths, second turns)."""
    policy = TransformersPolicy(model, tokenizer, engine="kv")
    policy._decoder = decode.Decoder(model, policy.device)
    policy._decoder.per_row_keep = False
    _two_turns_match_generate(model, tokenizer, policy)
