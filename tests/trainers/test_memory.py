"""Token-budget micro-batches and gradient checkpointing: same update, less memory per pass."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch

from tests.trainers import toy_env
from trainers.grpo import GRPOConfig, GRPOTrainer
from trainers import memory
from trainers.memory import budget_slices
from wiki_sim.common.errors import UserError


def test_budget_slices_by_rows_and_padded_tokens():
    assert budget_slices([5, 5, 5, 5], max_rows=2) == [slice(0, 2), slice(2, 4)]
    # 3 rows of 10 = 30 > 25: cut; the long row (40 > 25) is a slice of its own
    assert budget_slices([10, 10, 10, 40, 3, 3], max_rows=8, max_tokens=25) == [
        slice(0, 2), slice(2, 3), slice(3, 4), slice(4, 6)]
    assert budget_slices([], max_rows=4, max_tokens=10) == []
    assert budget_slices([5, 5, 5], max_rows=0) == [slice(0, 3)]  # 0: no row cap
    assert budget_slices([5, 5, 5], max_rows=0, max_tokens=10) == [slice(0, 2), slice(2, 3)]
    with pytest.raises(ValueError):
        budget_slices([1], max_rows=-1)


def _trajectories(vocab: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in (40, 12, 25, 7, 33, 18):
        ids = torch.randint(3, vocab, (n,), generator=g).tolist()
        mask = [1 if (i // 5) % 2 == 0 else 0 for i in range(n)]
        out.append(SimpleNamespace(prompt_ids=[3, 4, 5], token_ids=ids, loss_mask=mask,
                                   logprobs=[-2.0 if m else 0.0 for m in mask]))
    return out


def _updated(tmp_path, tok, model, **kw):
    cfg = GRPOConfig(model="-", tasks="-", output_dir=str(tmp_path / "run"), env_id=toy_env.SPEC, batch_size=6,
                     group_size=2, pool_size=1, device="cpu", tensorboard="off", learning_rate=1e-3,
                     max_grad_norm=0.0, **kw)
    trainer = GRPOTrainer(cfg, copy.deepcopy(model), tok, toy_env.TASKS[:1])
    trajs = _trajectories(len(tok))
    widths: list[int] = []
    trainer.model.register_forward_hook(lambda mod, args, kwargs, out: widths.append(kwargs["input_ids"].numel()),
                                        with_kwargs=True)
    metrics = trainer.update(trajs, [1.0, -1.0, 0.5, -0.5, 2.0, -2.0], [True] * 6)
    metrics["passes"] = widths
    return trainer.model, metrics


def test_token_budget_and_checkpointing_give_the_same_update(tmp_path):
    torch.manual_seed(0)
    tok = toy_env.toy_tokenizer("byte")
    model = toy_env.tiny_model(tok, hidden=32)
    ref, ref_metrics = _updated(tmp_path / "a", tok, model, micro_batch_size=6)
    small, small_metrics = _updated(tmp_path / "b", tok, model, micro_batch_size=6, micro_batch_tokens=60,
                                    gradient_checkpointing=True)
    assert any(getattr(m, "gradient_checkpointing", False) for m in small.modules())
    # rows of 43, 15, 28, 10, 36, 21 ids: padded passes of 43, 2 x 28, 10, 36, 21 (2 x 36 = 72 > 60)
    assert ref_metrics["passes"] == [6 * 43] and small_metrics["passes"] == [43, 56, 10, 36, 21]
    assert ref_metrics["train/tokens"] == small_metrics["train/tokens"] > 0
    assert abs(ref_metrics["loss/policy"] - small_metrics["loss/policy"]) < 1e-5
    assert abs(ref_metrics["grad/norm"] - small_metrics["grad/norm"]) < 1e-4 * ref_metrics["grad/norm"]
    for (name, a), b, c in zip(ref.named_parameters(), small.parameters(), model.parameters()):
        step = (a - c).abs().max()
        assert step > 0 and (a - b).abs().max() <= 0.05 * step, name  # Adam's first step is about lr x sign


def _batch(prompts, suffixes, pad=0):
    rows = [p + s for p, s in zip(prompts, suffixes)]
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad)
    att = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)], att[i, :len(r)] = torch.tensor(r), 1
    return ids, att, min(len(p) for p in prompts) - 1


def test_prefix_plan_computes_the_system_prompt_once_then_each_prompt_once():
    g = torch.Generator().manual_seed(0)
    system = torch.randint(3, 90, (200,), generator=g).tolist()
    questions = [torch.randint(3, 90, (n,), generator=g).tolist() for n in (20, 26)]
    prompts = [system + questions[i // 3] for i in range(6)]  # 2 tasks x 3 rollouts
    ids, _, first = _batch(prompts, [[5] * n for n in (9, 4, 7, 12, 3, 8)])
    levels, rows = memory.prefix_plan(ids, first)
    assert [lv.end for lv in levels] == [200, 219] and [len(lv.rows) for lv in levels] == [1, 2]
    assert levels[1].parent.tolist() == [0, 0] and len(set(rows.tolist())) == 2
    for i in range(6):  # each row reads the cache row of its own prompt
        assert torch.equal(ids[levels[1].rows[rows[i]], :first], ids[i, :first])
    # a short system prompt: one level (each extra forward call counts as 64 positions)
    levels, _ = memory.prefix_plan(ids[:, 160:], first - 160)
    assert [lv.end for lv in levels] == [59] and [len(lv.rows) for lv in levels] == [2]
    distinct = torch.randint(3, 90, (4, 30), generator=g)  # nothing shared: no split
    assert memory.prefix_plan(distinct, 29) is None
    assert memory.prefix_plan(ids[:1], first) is None


def test_a_shared_prefix_gives_the_same_logits_and_gradients():
    torch.manual_seed(0)
    tok = toy_env.toy_tokenizer("byte")
    model = toy_env.tiny_model(tok, hidden=32)
    assert memory.cache_keyword(model) in ("cache", "past_key_values")
    g = torch.Generator().manual_seed(1)
    system = torch.randint(3, 250, (24,), generator=g).tolist()
    prompts = [system + torch.randint(3, 250, (n,), generator=g).tolist() for n in (10, 17)]
    prompts = [prompts[i // 3] for i in range(6)]
    suffixes = [torch.randint(3, 250, (n,), generator=g).tolist() for n in (9, 30, 7, 12, 3, 21)]
    ids, att, first = _batch(prompts, suffixes)
    real = att[:, first + 1:].bool()
    out = []
    for share in (False, True):
        model.zero_grad()
        logits = memory.update_logits(model, ids, att, first, share_prefix=share)
        assert logits.shape == (6, ids.shape[1] - 1 - first, len(tok)) and logits.is_contiguous()
        (logits.log_softmax(-1)[..., 7] * real).sum().backward()
        out.append((logits.detach(), [p.grad.clone() for p in model.parameters()]))
    (a, ga), (b, gb) = out
    assert (a - b)[real].abs().max() < 1e-5
    for x, y in zip(ga, gb):
        assert (x - y).norm() <= 1e-5 * x.norm() + 1e-9


def test_bytes_per_token_from_the_model_shape():
    shape = memory.ModelShape(vocab=1000, hidden=10, intermediate=20, layers=3, kv_width=4, trainable=100,
                              param_bytes=4)
    layer = 4 * (10 * 10 + 5 * 20 + 4 * 4)  # 864
    assert memory.bytes_per_token(shape) == 3 * layer + 12 * 1000
    assert memory.bytes_per_token(shape, checkpointing=True) == 3 * 4 * 4 * 10 + layer + 12 * 1000
    assert memory.bytes_per_token(shape, "bfloat16") == int(3 * layer * 0.93) + 8 * 1000
    assert memory.fixed_bytes(shape, chunk=10) == 100 * 4 + 2 * 100 * 4 + 3 * 10 * 1000 * 4
    budget = memory.update_budget(toy_env.tiny_model(toy_env.toy_tokenizer("byte")), "cpu", memory_gb=2.0)
    assert budget.usable_bytes == 2 * memory.GIB - memory.GIB - memory.fixed_bytes(
        memory.model_shape(toy_env.tiny_model(toy_env.toy_tokenizer("byte"))))
    assert budget.tokens == budget.usable_bytes // budget.per_token > 0
    found, source = memory.available_memory("cpu")
    assert found > 0 and source  # MemAvailable or the cgroup's limit


def _config(tmp_path, **kw):
    base = dict(model="-", tasks="-", output_dir=str(tmp_path / "run"), env_id=toy_env.SPEC, batch_size=4,
                group_size=2, pool_size=1, device="cpu", tensorboard="off", max_new_tokens=32)
    base.update(kw)
    return GRPOConfig(**base)


def test_limits_from_memory_are_checked_before_any_rollout(tmp_path, monkeypatch, capsys):
    tok = toy_env.toy_tokenizer("byte")
    model = toy_env.tiny_model(tok)
    per_token = memory.update_budget(model, "cpu", memory_gb=4.0).per_token
    monkeypatch.setattr(GRPOTrainer, "collect", lambda *a: pytest.fail("rollouts ran"))
    # 1.25 GiB: 1 GiB margin, then the fixed part: room for this many tokens
    room = memory.update_budget(model, "cpu", memory_gb=1.25).tokens
    assert 0 < room < memory.DEFAULT_MAX_TOTAL_TOKENS, per_token
    with pytest.raises(UserError, match=r"--max-total-tokens 32768: .*does not fit one update pass.*"
                                        r"--gradient-checkpointing"):
        GRPOTrainer(_config(tmp_path, update_memory_gb=1.25, max_total_tokens=32768), model, tok, toy_env.TASKS)
    trainer = GRPOTrainer(_config(tmp_path, update_memory_gb=1.25), model, tok, toy_env.TASKS)
    assert trainer.max_total_tokens == trainer.micro_tokens == trainer.capacity == room
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("grpo: the update holds") and f"episodes end at {room} tokens (--max-total-tokens)" in line
    trainer = GRPOTrainer(_config(tmp_path, update_memory_gb=1.25, micro_batch_tokens=100, max_total_tokens=500),
                          model, tok, toy_env.TASKS)
    assert (trainer.micro_tokens, trainer.max_total_tokens) == (100, 500)
    with pytest.raises(UserError, match="less than a prompt and one turn"):
        GRPOTrainer(_config(tmp_path, update_memory_gb=1.0 + 1.1 * memory.fixed_bytes(
            memory.model_shape(model)) / memory.GIB), model, tok, toy_env.TASKS)


def test_rows_without_trained_tokens_are_not_forwarded_and_overlong_ones_are_left_out(tmp_path, capsys):
    torch.manual_seed(0)
    tok = toy_env.toy_tokenizer("byte")
    model = toy_env.tiny_model(tok, hidden=32)
    ref, ref_metrics = _updated(tmp_path / "a", tok, model, micro_batch_size=6)
    trajs = _trajectories(len(tok))
    trajs[3].loss_mask = [0] * len(trajs[3].loss_mask)  # nothing sampled to train on
    rows, advs, too_long = memory.trainable_rows(trajs, [1, 2, 3, 4, 5, 6], [True, False] + [True] * 4, capacity=40)
    assert [len(t.token_ids) for t in rows] == [25, 33, 18] and advs == [3, 5, 6] and too_long == [43]
    trainer = GRPOTrainer(_config(tmp_path / "b", batch_size=6, learning_rate=1e-3, max_grad_norm=0.0,
                                  micro_batch_tokens=1000, max_total_tokens=1000), copy.deepcopy(model), tok,
                          toy_env.TASKS[:1])
    trainer.capacity = 40
    widths: list[int] = []
    trainer.model.register_forward_hook(lambda mod, args, kwargs, out: widths.append(kwargs["input_ids"].shape[0]),
                                        with_kwargs=True)
    metrics = trainer.update(_trajectories(len(tok)), [1.0, -1.0, 0.5, -0.5, 2.0, -2.0],
                             [True, True, True, False, True, True])
    assert widths == [4] and metrics["train/too_long"] == 1  # the 43-token row out; the excluded one not forwarded
    assert "1 trajectories left out of the update (longest 43 tokens): one pass holds 40" in capsys.readouterr().out
    assert ref_metrics["train/too_long"] == 0
