"""GRPO with a colocated rollout engine (``--rollout-engine vllm``), on CPU against
:class:`trainers.engine_standin.StandInLLM` (vLLM's interface, its own copy of a tiny transformers
model): sleep/wake around the update, the weights pushed before every rollout (LoRA merged), the
sampled log-probabilities taken from the engine, the mismatch metrics and TIS."""

from __future__ import annotations

import copy

import pytest
import torch

from tests.trainers import toy_env
from trainers import lora, rollout_engine
from trainers.engine_standin import SamplingParams, StandInLLM, standin_factory
from trainers.grpo import GRPOConfig, GRPOTrainer


class _Varied(GRPOTrainer):
    """Rewards 1, 0, 1, 0, ... whatever a random model answered, so every step has signal and moves the weights
    (this file tests the engine, not learning) and every sampled id the engine returned is kept."""

    def collect(self, tasks):
        trajectories = super().collect(tasks)
        for i, t in enumerate(trajectories):
            t.reward, t.is_correct = float(i % 2), bool(i % 2)
        self.last_trajectories = trajectories
        return trajectories


def _trainer(tmp_path, *, dtype=torch.float32, **kw):
    torch.manual_seed(0)
    tok = toy_env.toy_tokenizer("byte")
    model = toy_env.tiny_model(tok, hidden=32)
    base = dict(model="-", tasks="-", output_dir=str(tmp_path / "run"), env_id=toy_env.SPEC, batch_size=4,
                group_size=2, micro_batch_size=4, pool_size=2, device="cpu", tensorboard="off", learning_rate=1e-2,
                max_new_tokens=12, exclude_truncated=False, save_every=0, rollout_engine="vllm", steps=3)
    base.update(kw)
    cfg = GRPOConfig(**base)
    return _Varied(cfg, model, tok, toy_env.TASKS[:2], engine_factory=standin_factory(dtype, record_weights=True,
                                                                                        tokenizer=tok))


def _engine_view(trainer) -> dict[str, torch.Tensor]:
    """The trainer's weights as the engine should hold them (LoRA merged, tied head once)."""
    merged = lora.merged(trainer.model)
    return {n: p.detach().clone() for n, p in merged.named_parameters()}


def test_the_loop_pushes_the_weights_before_every_rollout_and_sleeps_for_the_update(tmp_path):
    trainer = _trainer(tmp_path)
    llm = trainer.engine.llm
    expected = [_engine_view(trainer)]
    for _ in range(3):
        metrics = trainer.train_step()
        assert metrics["train/skipped"] == 0 and metrics["engine/sync_tensors"] > 0
        assert not llm.weights_awake and not llm.kv_awake  # asleep during and after the update
        expected.append(_engine_view(trainer))
    assert len(llm.weights_at_generate) == 3 and trainer.engine.syncs == 3
    for step, seen in enumerate(llm.weights_at_generate):  # step k's rollout ran on the weights after step k-1
        assert seen.keys() == expected[step].keys()
        for name, tensor in seen.items():
            assert torch.equal(tensor, expected[step][name]), (step, name)
    assert not all(torch.equal(expected[0][n], expected[3][n]) for n in expected[0])  # the weights did move
    assert llm.events[:4] == ["sleep2", "wake:weights", "wake:kv_cache", "reset_prefix_cache"]
    assert llm.events.count("sleep2") == 4  # built asleep, then once after each rollout


def test_sampled_logprobs_come_from_the_engine_and_the_mismatch_is_measured(tmp_path):
    trainer = _trainer(tmp_path, dtype=torch.bfloat16, steps=1)
    returned: list[float] = []
    generate = trainer.engine.llm.generate

    def spy(prompts, sampling_params=None, use_tqdm=False):
        outs = generate(prompts, sampling_params, use_tqdm)
        for out in outs:
            returned.extend(next(iter(e.values())).logprob for e in out.outputs[0].logprobs)
        return outs

    trainer.engine.llm.generate = spy
    metrics = trainer.train_step()
    kept = [lp for t in trainer.last_trajectories for lp, m in zip(t.logprobs, t.loss_mask) if m]
    assert kept and sorted(kept) == sorted(returned)
    # bf16 engine against fp32 trainer: a real, measured difference; k3 >= 0
    assert 1e-4 < metrics["mismatch/abs_mean"] <= metrics["mismatch/abs_max"] < 5
    assert metrics["mismatch/kl_k3"] >= 0
    fp32 = _trainer(tmp_path / "fp32", steps=1).train_step()
    assert fp32["mismatch/abs_mean"] < metrics["mismatch/abs_mean"] / 10  # same weights: only kernel noise


def test_tis_trains_and_reports_its_weights(tmp_path):
    trainer = _trainer(tmp_path, dtype=torch.bfloat16, tis_cap=2.0, steps=1)
    before = _engine_view(trainer)
    metrics = trainer.train_step()
    assert metrics["train/skipped"] == 0
    assert 0 < metrics["mismatch/tis_weight_mean"] <= 2.0 and 0 <= metrics["mismatch/tis_capped_frac"] <= 1
    # the clipped ratio is against the trainer's own log-probabilities: 1, never clipped
    assert metrics["policy/ratio_mean"] == pytest.approx(1.0) and metrics["policy/clip_frac_high"] == 0
    assert not all(torch.equal(before[n], p) for n, p in _engine_view(trainer).items())


def test_lora_adapters_are_merged_into_the_engine(tmp_path):
    pytest.importorskip("peft")
    trainer = _trainer(tmp_path, lora_r=4, lora_alpha=8, lora_targets=["q_proj", "v_proj"], steps=2)
    for _ in range(2):
        trainer.train_step()
    trainer.engine.prepare(trainer.model)  # what the next rollout would sample from
    engine = dict(trainer.engine.llm.model.named_parameters())
    merged = _engine_view(trainer)
    assert engine.keys() == merged.keys() and not any("lora_" in n for n in engine)
    for name, tensor in merged.items():
        assert torch.allclose(engine[name], tensor, atol=1e-7, rtol=0), name
    base = dict(toy_env.tiny_model(trainer.tokenizer, hidden=32).named_parameters())
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(engine[q], base[q])  # the adapters' delta reached the engine
    frozen = dict(lora.savable(trainer.model).named_parameters())
    assert torch.equal(frozen[q.replace(".weight", ".base_layer.weight")], base[q])  # the trainer's base untouched


def test_standin_follows_vllms_sleep_and_logprob_semantics():
    tok = toy_env.toy_tokenizer("byte")
    model = toy_env.tiny_model(tok, hidden=32)
    llm = StandInLLM(model, tok)
    prompt = tok.encode("Code for red?", add_special_tokens=False)
    params = SamplingParams(max_tokens=6, temperature=0.7, logprobs=0, seed=3)
    out = llm.generate([{"prompt_token_ids": prompt}], params)
    ids = out[0].outputs[0].token_ids
    lps = [next(iter(e.values())).logprob for e in out[0].outputs[0].logprobs]
    with torch.no_grad():
        logits = model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1].float() / 0.7
    full = torch.log_softmax(logits, -1).gather(1, torch.tensor(ids)[:, None]).squeeze(1)
    assert torch.allclose(torch.tensor(lps), full, atol=1e-4)  # processed (temperature) log-probabilities
    llm.sleep(level=2)
    with pytest.raises(RuntimeError, match="sleeping"):
        llm.generate([{"prompt_token_ids": prompt}], SamplingParams(max_tokens=2))
    llm.wake_up()
    assert all(torch.isnan(p).all() for p in llm.model.parameters())  # level 2 discarded them: a push is needed
    with pytest.raises(KeyError, match="base_model"):
        rollout_engine.engine_model(llm).load_weights([("base_model.model.lm_head.weight", torch.zeros(1))])


def test_no_vllm_or_no_gpu_is_one_line_saying_what_to_install(tmp_path, capsys):
    from websailor.cli import main

    try:
        import vllm  # noqa: F401
        has_vllm = torch.cuda.is_available()
    except ImportError:
        has_vllm = False
    if has_vllm:
        pytest.skip("vLLM and a GPU are present")
    with pytest.raises(ValueError, match=r"pip install 'websailor-gym\[vllm\]'"):
        rollout_engine.require_vllm_gpu()
    tasks = tmp_path / "t.jsonl"
    tasks.write_text('{"question": "q", "answer": "a"}\n')
    rc = main(["grpo", str(tmp_path / "no-model"), str(tasks), "--rollout-engine", "vllm"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1 and "websailor-gym[vllm]" in err[0] and "GPU" in err[0]


def test_config_refuses_bad_engine_settings():
    with pytest.raises(ValueError, match="rollout_engine"):
        GRPOConfig(model="m", tasks="t", rollout_engine="sglang")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tis_cap"):
        GRPOConfig(model="m", tasks="t", tis_cap=0.5)


def test_sync_names_are_the_checkpoints_and_ddp_is_refused():
    tok = toy_env.toy_tokenizer("byte")
    model = toy_env.tiny_model(tok, hidden=32)
    names = [n for n, _ in rollout_engine.weights_to_sync(model)]
    assert names == [n for n, _ in model.named_parameters()]  # tied head once, as named_parameters gives it
    wrapped = torch.nn.Module()
    wrapped.module = model  # what DDP looks like
    assert [n for n, _ in rollout_engine.weights_to_sync(wrapped)] == names
    with pytest.raises(ValueError, match="one process"):
        rollout_engine.build(standin_factory(), model, seed=0, world_size=2)


def test_make_vllm_builds_a_colocated_in_process_engine_asleep(monkeypatch):
    """Against a fake ``vllm`` module (vLLM cannot run here): the arguments TRL's colocate mode uses."""
    import sys
    import types

    created: list[dict] = []

    class LLM:
        def __init__(self, **kwargs):
            created.append(kwargs)
            self.slept: list[int] = []
            runner = types.SimpleNamespace(model=types.SimpleNamespace(load_weights=lambda w: set()))
            self.llm_engine = types.SimpleNamespace(
                model_executor=types.SimpleNamespace(driver_worker=types.SimpleNamespace(model_runner=runner)))

        def sleep(self, level=1):
            self.slept.append(level)

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for key in ("VLLM_ENABLE_V1_MULTIPROCESSING", "RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)  # make_vllm sets them; undone after the test
    llm = rollout_engine.make_vllm("/models/m", seed=3, gpu_memory_utilization=0.4, max_model_len=4096, model=object())
    [kwargs] = created
    assert kwargs["model"] == "/models/m" and kwargs["enable_sleep_mode"] is True and kwargs["seed"] == 3
    assert kwargs["logprobs_mode"] == "processed_logprobs"
    assert kwargs["distributed_executor_backend"] == "external_launcher"
    assert kwargs["gpu_memory_utilization"] == 0.4 and kwargs["max_model_len"] == 4096 and "model_kwargs" not in kwargs
    assert llm.slept == [2] and __import__("os").environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    with pytest.raises(ValueError, match="folder"):
        rollout_engine.make_vllm("", model=object())
