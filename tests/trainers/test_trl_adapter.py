"""The simulator environment trains under TRL's GRPOTrainer through rollout_func (tiny model, CPU)."""

from __future__ import annotations

import pytest
import torch

trl = pytest.importorskip("trl")
pytest.importorskip("datasets")

from envs.derived_tasks import derive_tasks  # noqa: E402
from trainers.adapters.trl import (EnvRollout, call_seed, env_reward, make_grpo_trainer,  # noqa: E402
                                   rollout_outputs)
from trainers.adapters.trl_generation import vllm_installed  # noqa: E402
from envs.compact import COMPACT_SYSTEM_PROMPT  # noqa: E402
from trainers.rollout import RolloutConfig, Trajectory  # noqa: E402
from trainers.tiny_lm import tiny_lm  # noqa: E402


def _traj(**kw) -> Trajectory:
    base = dict(task={}, messages=[], prompt_ids=[1, 2], token_ids=[3, 4, 5], loss_mask=[1, 0, 1],
                logprobs=[-0.5, 0.0, -0.2], reward=1.0, is_correct=True, termination="answer", num_tool_calls=1,
                truncated=False, info={})
    base.update(kw)
    return Trajectory(**base)


def test_rollout_outputs_keep_ids_masks_and_rewards():
    out = rollout_outputs([_traj(), _traj(reward=0.0, is_correct=False)])
    assert out["completion_ids"] == [[3, 4, 5]] * 2 and out["env_mask"] == [[1, 0, 1]] * 2
    assert out["env_reward"] == [1.0, 0.0]
    assert env_reward([], [], env_reward=out["env_reward"]) == [1.0, 0.0]
    with pytest.raises(ValueError, match=r"loss_mask \(2\)"):
        rollout_outputs([_traj(loss_mask=[1, 0])])


def test_episodes_left_out_of_the_loss_get_a_zero_env_mask():
    kept = [_traj(), _traj(termination="format_error", reward=0.0), _traj(termination="answer", last_turn_cut=False),
            _traj(termination="judge_error", reward=0.0, last_turn_cut=False)]  # an ungradable answer: wrong
    cut = [_traj(termination=t, reward=0.0) for t in ("max_tool_calls", "context_limit", "time_limit", "token_limit",
                                                        "env_error", "policy_error")]
    cut.append(_traj(termination="format_error", last_turn_cut=True))
    out = rollout_outputs(kept + cut)
    assert out["env_mask"][:4] == [[1, 0, 1]] * 4 and out["env_mask"][4:] == [[0, 0, 0]] * len(cut)
    assert out["in_loss"] == [True] * 4 + [False] * len(cut) and out["env_reward"][3] == 0.0
    assert rollout_outputs(cut, mask_excluded=False)["env_mask"] == [[1, 0, 1]] * len(cut)
    failed = _traj(prompt_ids=[], token_ids=[], loss_mask=[], logprobs=[], termination="env_error", reward=0.0)
    out = rollout_outputs([_traj(), failed], filler_id=7)  # the reset raised: no prompt, no turn
    assert out["prompt_ids"][1] == out["completion_ids"][1] == [7]
    assert out["env_mask"][1] == [0] and out["in_loss"] == [True, False]
    with pytest.raises(ValueError, match="no completion ids"):
        rollout_outputs([failed])


def test_each_process_step_and_call_samples_with_its_own_seed():
    seeds = {call_seed(0, rank, step, call) for rank in range(4) for step in range(50) for call in range(1, 4)}
    assert len(seeds) == 4 * 50 * 3 and call_seed(0, 1, 2, 3) == call_seed(0, 1, 2, 3) != call_seed(1, 1, 2, 3)


def test_prompts_map_back_to_tasks():
    tasks = [{"question": "Q1?", "answer": "a"}, {"question": "Q2?", "answer": "b"}]
    with pytest.raises(ValueError, match="share the question"):
        EnvRollout([*tasks, {"question": "Q1?", "answer": "other"}], RolloutConfig())
    rollout = EnvRollout(tasks, RolloutConfig())
    assert [row["prompt"][0]["content"] for row in rollout.dataset()] == ["Q1?", "Q2?"]


def test_grpo_trainer_trains_on_the_wikisim_environment(default_wiki, tmp_path):
    tasks = [t.to_dict() for t in derive_tasks(default_wiki, 2, seed=3)]
    config = RolloutConfig(env_kwargs={"wiki_dir": str(default_wiki), "tasks": tasks, "tools": ["search"],
                                       "system_prompt": COMPACT_SYSTEM_PROMPT, "max_tool_calls": 2,
                                       "current_date": "2025-01-01"},
                           max_new_tokens=24, num_envs=4, tool_workers=2, max_total_tokens=4096)
    seen: list[dict] = []

    class Recording(EnvRollout):
        def __call__(self, prompts, trainer):
            out = super().__call__(prompts, trainer)
            seen.append(out)
            return out

    def brevity(completions, **kwargs):  # a shaped reward with variance, so the step has a gradient
        return [-len(c[-1]["content"]) / 1000.0 for c in completions]

    model, tokenizer = tiny_lm(hidden=32, seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    args = trl.GRPOConfig(output_dir=str(tmp_path / "trl"), per_device_train_batch_size=4, num_generations=4,
                          max_steps=1, learning_rate=1e-2, logging_steps=1, report_to="none", save_strategy="no",
                          use_cpu=True, bf16=False, max_completion_length=4096, seed=0)
    # A random tiny model's episodes are all cut off (turns cut by max_new_tokens, budget spent): kept in the
    # loss here (mask_excluded=False) so that the step has a gradient; the default is tested below.
    trainer = make_grpo_trainer(model, tokenizer, Recording(tasks, config, mask_excluded=False), args,
                                reward_funcs=[brevity])
    trainer.train()
    (out,) = seen
    assert len(out["completion_ids"]) == 4  # one episode per (repeated) prompt
    for ids, mask, logps in zip(out["completion_ids"], out["env_mask"], out["logprobs"]):
        assert len(ids) == len(mask) == len(logps) and 0 in mask and 1 in mask  # observations are masked
        assert all(lp == 0.0 for lp, m in zip(logps, mask) if m == 0)
    after = trainer.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert logged and all(torch.isfinite(torch.tensor(h["loss"])) for h in logged)


class StandInVLLMGeneration:
    """TRL's ``VLLMGeneration`` interface (trl/generation/vllm_generation.py, TRL 1.16): ``sync_weights()``,
    ``generate(prompts, images, num_generations, profiler)`` -> ``(prompt_ids, completion_ids, logprobs,
    logprob_token_ids)`` with ``logprobs`` per token as a list (the sampled token's first, ``logprobs=0``),
    and its sampling settings as attributes read at each call. The engine holds its own copy of the
    weights, which only ``sync_weights`` updates; a CPU sampler stands in for vLLM."""

    mode = "colocate"

    def __init__(self, trainer_model, tokenizer, args):
        import copy

        self.source, self.tokenizer = trainer_model, tokenizer
        self.model = copy.deepcopy(trainer_model)
        with torch.no_grad():
            for p in self.model.parameters():
                p.zero_()  # stale weights: sampling before a sync would be visibly wrong
        self.temperature, self.top_p = args.temperature, args.top_p
        self.max_completion_length = args.max_completion_length
        self.generation_kwargs = dict(args.generation_kwargs or {})
        self.logprobs = 0
        self.events: list[tuple] = []

    def sync_weights(self):
        self.model.load_state_dict(self.source.state_dict())
        self.events.append(("sync",))

    def generate(self, prompts, images, num_generations, profiler=None):
        from trainers.policies import TransformersPolicy

        assert images is None and num_generations == 1
        gens = TransformersPolicy(self.model, self.tokenizer).generate(
            prompts, max_new_tokens=self.max_completion_length, temperature=self.temperature, top_p=self.top_p,
            stop_ids=self.generation_kwargs.get("stop_token_ids", []))
        self.events.append(("generate", self.max_completion_length, [g.logprobs for g in gens]))
        return (prompts, [g.token_ids for g in gens], [[[lp] for lp in g.logprobs] for g in gens],
                [[[t] for t in g.token_ids] for g in gens])


def _rollout_setup(default_wiki, max_tool_calls=2):
    tasks = [t.to_dict() for t in derive_tasks(default_wiki, 2, seed=3)]
    config = RolloutConfig(env_kwargs={"wiki_dir": str(default_wiki), "tasks": tasks, "tools": ["search"],
                                       "system_prompt": COMPACT_SYSTEM_PROMPT, "max_tool_calls": max_tool_calls,
                                       "current_date": "2025-01-01"},
                           max_new_tokens=24, num_envs=4, tool_workers=2, max_total_tokens=4096)
    return tasks, config


def test_use_vllm_samples_through_the_trainers_vllm_generation(default_wiki, tmp_path, monkeypatch):
    """With use_vllm the episodes are sampled by the trainer's vllm_generation (after TRL's weight sync),
    with the rollout's per-turn budget, and its log-probs reach TRL; the trainer's model never generates."""
    import trainers.adapters.trl_generation as generation

    def no_hf(trainer):
        raise AssertionError("sampled with transformers although use_vllm is set")

    monkeypatch.setattr(generation, "transformers_policy", no_hf)
    tasks, config = _rollout_setup(default_wiki)
    seen: list[dict] = []

    class Recording(EnvRollout):
        def __call__(self, prompts, trainer):
            seen.append(super().__call__(prompts, trainer))
            return seen[-1]

    model, tokenizer = tiny_lm(hidden=32, seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    args = trl.GRPOConfig(output_dir=str(tmp_path / "trl"), per_device_train_batch_size=4, num_generations=4,
                          max_steps=1, learning_rate=1e-2, logging_steps=1, report_to="none", save_strategy="no",
                          use_cpu=True, bf16=False, max_completion_length=4096, seed=0)
    brevity = lambda completions, **kw: [-len(c[-1]["content"]) / 1e3 for c in completions]  # noqa: E731
    trainer = make_grpo_trainer(model, tokenizer, Recording(tasks, config), args, reward_funcs=[brevity])
    engine = StandInVLLMGeneration(trainer.model, tokenizer, args)
    trainer.use_vllm, trainer.vllm_mode, trainer.vllm_generation = True, "colocate", engine
    trainer._last_loaded_step = -1
    trainer.train()
    (out,) = seen
    kinds = [e[0] for e in engine.events]
    assert kinds[0] == "sync" and kinds.count("generate") >= 2  # weights synced first; one call per turn
    assert all(e[1] <= 24 for e in engine.events if e[0] == "generate")  # the turn budget, not 4096
    assert engine.max_completion_length == 4096 and "stop_token_ids" not in engine.generation_kwargs  # restored
    returned = {lp for e in engine.events if e[0] == "generate" for lps in e[2] for lp in lps}
    sampled = [lp for lps in out["logprobs"] for lp in lps if lp != 0.0]  # 0.0: environment ids
    assert sampled and set(sampled) <= returned  # TRL got vLLM's log-probs, not recomputed ones
    # The default masks cut-off episodes (all of a random model's) through env_mask, and TRL honours it:
    # no gradient, the weights unchanged.
    assert out["in_loss"] == [False] * 4 and all(set(m) == {0} for m in out["env_mask"])
    after = trainer.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_vllm_requested_but_missing_is_one_clear_error(tmp_path):
    if vllm_installed():
        pytest.skip("vLLM is installed here")
    model, tokenizer = tiny_lm(hidden=32, seed=0)
    args = trl.GRPOConfig(output_dir=str(tmp_path / "trl"), use_vllm=True, use_cpu=True, report_to="none",
                          per_device_train_batch_size=2, num_generations=2)
    with pytest.raises(ImportError, match=r"use_vllm=True\) needs vLLM.*pip install 'websailor-gym\[vllm\]'"):
        make_grpo_trainer(model, tokenizer, EnvRollout([{"question": "Q?", "answer": "a"}], RolloutConfig()), args)

    from types import SimpleNamespace

    trainer = SimpleNamespace(use_vllm=True, args=args, processing_class=tokenizer)  # vLLM never came up
    with pytest.raises(ImportError, match="needs vLLM"):
        EnvRollout([{"question": "Q?", "answer": "a"}], RolloutConfig())([[{"role": "user", "content": "Q?"}]], trainer)
    engine = SimpleNamespace(llm=SimpleNamespace(llm_engine=SimpleNamespace(model_config=SimpleNamespace(
        max_model_len=2048))))  # where TRL reads a colocated engine's context length
    trainer = SimpleNamespace(use_vllm=True, args=args, processing_class=tokenizer, vllm_generation=engine,
                              accelerator=SimpleNamespace(num_processes=1))
    with pytest.raises(ValueError, match=r"max_total_tokens \(4096\) exceeds vLLM's max_model_len \(2048\)"):
        EnvRollout([{"question": "Q?", "answer": "a"}], RolloutConfig(max_total_tokens=4096))(
            [[{"role": "user", "content": "Q?"}]], trainer)


@pytest.mark.parametrize("engine_kind", ["vllm", "transformers"])
def test_generation_calls_stay_in_lockstep_across_processes(engine_kind):
    """Two processes (threads here) with different numbers of turns: every vLLM call is collective in
    server mode (transformers' generate under ZeRO-3/FSDP too), so both make the same calls with the same
    number of prompts, and the one that is done first keeps answering until the other is done
    (accelerate's gather stood in for by a barrier)."""
    import threading

    from trainers.adapters.trl_generation import TRLTransformersPolicy, TRLVLLMPolicy
    from trainers.policies import Generation

    _, tokenizer = tiny_lm(hidden=32, seed=0)
    barrier, lock = threading.Barrier(2, timeout=20), threading.Lock()
    slots: list = [None, None]
    calls: list[list[tuple[int, int]]] = [[], []]

    def gather(rank, tensor):
        slots[rank] = tensor
        barrier.wait()
        out = torch.cat([slots[0], slots[1]])
        barrier.wait()
        return out

    class Engine:  # VLLMGeneration's interface; each call is collective, as in server mode
        temperature, top_p, logprobs, generation_kwargs = 1.0, 1.0, 0, {}

        def __init__(self, rank):
            self.rank, self.max_completion_length = rank, 99

        def generate(self, prompts, images, num_generations, profiler=None):
            with lock:
                calls[self.rank].append((len(prompts), self.max_completion_length))
            barrier.wait()
            ids = [[5 + i] * self.max_completion_length for i in range(len(prompts))]
            return prompts, ids, [[[-0.5]] * len(x) for x in ids], None

    errors: list[BaseException] = []

    class HF:  # TransformersPolicy's interface; collective calls, as generate with synced_gpus
        def __init__(self, rank):
            self.rank, self.tokenizer = rank, tokenizer

        def generate(self, prompts, *, max_new_tokens, temperature=1.0, top_p=1.0, stop_ids=(), generators=None):
            with lock:
                calls[self.rank].append((len(prompts), max_new_tokens))
            barrier.wait()
            return [Generation([5] * max_new_tokens, [-0.5] * max_new_tokens, "", "length") for _ in prompts]

    def run(rank, turns):
        try:
            play(rank, turns)
        except BaseException as exc:  # noqa: BLE001  (reported below, from the test's thread)
            errors.append(exc)

    def play(rank, turns):
        acc = type("Acc", (), {"num_processes": 2, "device": "cpu", "gather": lambda self, t: gather(rank, t)})()
        trainer = type("T", (), {"vllm_generation": Engine(rank), "processing_class": tokenizer,
                                 "accelerator": acc})()
        policy = TRLVLLMPolicy(trainer) if engine_kind == "vllm" else TRLTransformersPolicy(HF(rank), acc)
        for n, budget in turns:
            gens = policy.generate([[1, 2, 3]] * n, max_new_tokens=budget)
            assert len(gens) == n and all(len(g.token_ids) == budget == len(g.logprobs) for g in gens)
        policy.finish()

    threads = [threading.Thread(target=run, args=(0, [(2, 4), (1, 6), (1, 3)])),
               threading.Thread(target=run, args=(1, [(3, 5)]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads) and not errors, errors
    assert [c[0] for c in calls[0]] == [c[0] for c in calls[1]] == [3, 1, 1]  # same calls, same prompt counts
    if engine_kind == "vllm":  # one request for all: the largest budget asked, each cut to its own
        assert calls[0] == calls[1] == [(3, 5), (1, 6), (1, 3)]
