"""The GRPO trainer on the toy environment (tests/trainers/toy_env.py) with a tiny model on CPU:
it learns, resumes exactly, skips non-finite steps, runs from the CLI and under torchrun (DDP, gloo)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.trainers import toy_env
from trainers.grpo import GRPOConfig, GRPOTrainer, NonFiniteLoss
from trainers.metrics_log import iter_metrics

ROOT = Path(__file__).resolve().parents[2]
ONE_TASK = toy_env.TASKS[:1]  # "Code for red?" -> "cat"
FOUR_TASKS = toy_env.TASKS[:4]  # four colours, four different code words


@pytest.fixture(scope="module")
def cold_model_dir(tmp_path_factory) -> Path:
    """A 2-layer Qwen2 + ByT5 tokenizer after a format-only cold start (answers a random word of 16)."""
    from transformers import ByT5Tokenizer

    torch.set_num_threads(1)
    tok = ByT5Tokenizer()
    model = toy_env.tiny_model(tok)
    toy_env.cold_start(model, tok, tasks=toy_env.TASKS[:4], think=False)
    out = tmp_path_factory.mktemp("cold") / "model"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def load(path: Path):
    from trainers.models import load_lm as load_model

    return load_model(str(path), None, "float32")


def config(tmp_path: Path, **kw) -> GRPOConfig:
    base = dict(model="-", tasks="-", output_dir=str(tmp_path / "run"), env_id=toy_env.SPEC,
                env_kwargs=json.dumps({"max_format_errors": 1}), batch_size=32, group_size=8, micro_batch_size=32,
                learning_rate=2e-3, max_new_tokens=48, pool_size=1, save_every=0, device="cpu",
                tensorboard="off", steps=40)
    base.update(kw)
    return GRPOConfig(**base)


def test_config_validation_messages():
    with pytest.raises(ValueError, match=r"batch_size \(12\) must be divisible by group_size \(8\)"):
        GRPOConfig(model="m", tasks="t", batch_size=12, group_size=8)
    with pytest.raises(ValueError, match="env_kwargs must be a JSON object"):
        GRPOConfig(model="m", tasks="t", env_kwargs="{nope")
    with pytest.raises(ValueError, match="equal_groups must be one of"):
        GRPOConfig(model="m", tasks="t", equal_groups="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="temperature > 0"):
        GRPOConfig(model="m", tasks="t", temperature=0.0)


def test_grpo_learns_to_read_the_question_on_four_tasks(tmp_path):
    """Four tasks with four different answers: a policy that ignores the question has per-task pass
    rates summing to <= 1 (mean reward <= 0.25), so rates summing to >= 2.4, with at least three tasks
    >= 0.6, need the policy to read the question. A 2-layer Qwen2 over the toy subword tokenizer (one
    token per colour and code word) after an answer-only cold start (a random word of 16: reward near 0).

    Not every task: whether one task's group goes all-wrong early and stays so (equal rewards, no
    gradient) depends on floating-point rounding, not on the algorithm: at the same commit, micro-batches
    of 64 and 32 rows learned all four tasks and micro-batches of 16 and 8 learned three (rates 1, 1, 0, 1);
    computing each group's prompt once (the same gradient to 1e-6) changes which."""
    from trainers.tiny_lm import tiny_lm

    torch.set_num_threads(1)
    model, tok = tiny_lm(layers=2, hidden=64, heads=4, seed=0, max_positions=1024,
                         tokenizer=toy_env.toy_tokenizer("subword"))
    toy_env.cold_start(model, tok, tasks=FOUR_TASKS, think=False)
    # lockstep rollouts and a fixed pass budget (not one sized from the machine's free memory): the same
    # samples and the same passes on every run, so the test cannot pass or fail by luck
    trainer = GRPOTrainer(config(tmp_path, steps=250, batch_size=64, group_size=16, micro_batch_size=64,
                                 micro_batch_tokens=65536, learning_rate=1e-3, max_new_tokens=16, pool_size=4,
                                 retire_window=0, lockstep_rollouts=True), model, tok, FOUR_TASKS)
    rewards = []
    for _ in range(trainer.config.steps):
        rewards.append(trainer.train_step()["reward/mean"])
        if len(rewards) >= 3 and sum(rewards[-3:]) / 3 >= 0.85:
            break
    assert rewards[0] <= 0.25, rewards  # the cold start answers a random word: near 0
    rates = toy_env.pass_rates(trainer, FOUR_TASKS, 16)
    assert sum(rates.values()) >= 2.4, (rates, rewards)  # > twice what ignoring the question allows
    assert sorted(rates.values())[1] >= 0.6, rates  # three questions answered, not one answer for all


def test_exact_resume_reproduces_the_next_steps(cold_model_dir, tmp_path):
    kw = dict(batch_size=16, group_size=4, micro_batch_size=8, steps=3, save_every=2, lockstep_rollouts=True,
              equal_groups="dupo", pool_size=4, retire_window=1, seed=5)
    model, tok = load(cold_model_dir)
    straight = GRPOTrainer(config(tmp_path / "a", **kw), model, tok, toy_env.TASKS)
    full = straight.train()
    assert [m["step"] for m in full] == [1, 2, 3]
    # a run that stopped after the step-2 checkpoint, resumed from it
    resumed_dir = tmp_path / "b" / "run"
    resumed_dir.mkdir(parents=True)
    shutil.copytree(tmp_path / "a" / "run" / "checkpoint-2", resumed_dir / "checkpoint-2")
    model2, tok2 = load(cold_model_dir)
    again = GRPOTrainer(config(tmp_path / "b", **kw), model2, tok2, toy_env.TASKS)
    rest = again.train()
    assert [m["step"] for m in rest] == [3]
    skip = {"time/rollout_s", "time/update_s"}
    assert {k: v for k, v in rest[0].items() if k not in skip} == {k: v for k, v in full[2].items() if k not in skip}
    for (name, p), q in zip(straight.model.named_parameters(), again.model.parameters()):
        assert torch.equal(p, q), name
    assert again.pool.state_dict() == straight.pool.state_dict()


def test_a_signal_saves_the_step_and_resume_continues_exactly(cold_model_dir, tmp_path):
    from trainers.checkpoint_io import latest_checkpoint
    from trainers.interrupt import TrainingInterrupted

    kw = dict(batch_size=16, group_size=4, micro_batch_size=8, steps=3, save_every=0, lockstep_rollouts=True,
              equal_groups="dupo", pool_size=4, retire_window=1, seed=5)
    model, tok = load(cold_model_dir)
    straight = GRPOTrainer(config(tmp_path / "a", **kw), model, tok, toy_env.TASKS)
    full = straight.train()
    model, tok = load(cold_model_dir)
    stopped = GRPOTrainer(config(tmp_path / "b", **kw), model, tok, toy_env.TASKS)
    step = stopped.train_step

    def step_then_sigterm():
        metrics = step()
        if metrics["step"] == 1:
            os.kill(os.getpid(), signal.SIGTERM)  # arrives during the step: the step finishes first
        return metrics

    stopped.train_step = step_then_sigterm
    with pytest.raises(TrainingInterrupted, match="after step 1 of 3") as err:
        stopped.train()
    assert err.value.signum == signal.SIGTERM and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert latest_checkpoint(tmp_path / "b" / "run").name == "checkpoint-1"  # save_every=0: the signal's
    assert not (tmp_path / "b" / "run" / "model").exists()
    model, tok = load(cold_model_dir)
    again = GRPOTrainer(config(tmp_path / "b", **kw), model, tok, toy_env.TASKS)
    rest = again.train()
    assert [m["step"] for m in rest] == [2, 3]
    skip = {"time/rollout_s", "time/update_s"}
    assert [{k: v for k, v in m.items() if k not in skip} for m in rest] == \
        [{k: v for k, v in m.items() if k not in skip} for m in full[1:]]
    for (name, p), q in zip(straight.model.named_parameters(), again.model.parameters()):
        assert torch.equal(p, q), name


def test_non_finite_loss_is_skipped_then_stops(cold_model_dir, tmp_path):
    model, tok = load(cold_model_dir)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}

    def poison(module, args, output):  # only in training forwards; rollouts (eval mode) stay clean
        if module.training:
            output.logits = output.logits * float("nan")
        return output

    model.register_forward_hook(poison)
    trainer = GRPOTrainer(config(tmp_path, steps=5, max_bad_steps=2, batch_size=8, micro_batch_size=8), model, tok,
                          ONE_TASK)
    with pytest.raises(NonFiniteLoss, match="2 steps in a row"):
        trainer.train()
    rows = list(iter_metrics(tmp_path / "run" / "metrics.jsonl"))
    assert [r["train/skipped"] for r in rows] == [1, 1]
    for n, p in model.named_parameters():
        assert torch.equal(p, before[n]), n


def test_cli_runs_with_kl_and_writes_metrics_and_model(cold_model_dir, tmp_path):
    from websailor.cli import main

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in ONE_TASK))
    out = tmp_path / "out"
    rc = main(["grpo", str(cold_model_dir), str(tasks), "--output-dir", str(out), "--env-id", toy_env.SPEC,
               "--steps", "2", "--batch-size", "8", "--group-size", "4", "--micro-batch-size", "4",
               "--learning-rate", "1e-3", "--max-new-tokens", "48", "--kl-beta", "0.1", "--device", "cpu",
               "--tensorboard", "off", "--pool-size", "1"])
    assert rc in (0, None)
    rows = list(iter_metrics(out / "metrics.jsonl"))
    assert [r["step"] for r in rows] == [1, 2]
    for key in ("reward/mean", "rollout/length", "policy/entropy", "loss/policy", "policy/kl", "groups/all_equal"):
        assert key in rows[-1], key
    assert rows[-1]["policy/kl"] >= 0
    assert (out / "model" / "config.json").exists() and (out / "checkpoint-2" / "trainer_state.pt").exists()


def test_cli_bad_input_is_one_line_error(tmp_path, capsys):
    from websailor.cli import main

    rc = main(["grpo", str(tmp_path / "missing"), str(tmp_path / "t.jsonl"), "--batch-size", "12"])
    assert rc != 0
    err = capsys.readouterr().err
    assert "batch_size (12) must be divisible by group_size (8)" in err


def test_torchrun_two_processes_gloo(cold_model_dir, tmp_path):
    """DDP on CPU: two ranks, each rolls out half the groups; the weights stay identical across ranks."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in toy_env.TASKS))
    out = tmp_path / "ddp"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "tests.trainers.ddp_worker", str(cold_model_dir), str(tasks), str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    digests = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert digests[0]["param_sum"] == digests[1]["param_sum"]
    assert digests[0]["world_size"] == 2 and digests[0]["changed"]
    rows = list(iter_metrics(out / "metrics.jsonl"))
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[0]["rollout/trajectories"] == 16  # both ranks' trajectories are counted


@pytest.mark.parametrize("mode,flag", [("keep", "train/no_signal"), ("drop", "train/empty")])
def test_steps_without_signal_leave_the_weights_alone(cold_model_dir, tmp_path, mode, flag):
    model, tok = load(cold_model_dir)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    never = [{"id": "z", "question": "Code for red?", "answer": "zebra crossing"}]  # no sampled word can match
    trainer = GRPOTrainer(config(tmp_path, steps=2, batch_size=8, micro_batch_size=8, equal_groups=mode), model, tok,
                          never)
    rows = trainer.train()
    assert all(r[flag] == 1 and r["groups/all_equal"] == 1 for r in rows), rows
    for n, p in model.named_parameters():
        assert torch.equal(p, before[n]), n


def test_nucleus_sampling_is_refused_for_training():
    with pytest.raises(ValueError, match="top_p must be 1 for training"):
        GRPOConfig(model="m", tasks="t", top_p=0.9)


def test_dynamic_sampling_draws_more_tasks_until_groups_have_signal(cold_model_dir, tmp_path):
    model, tok = load(cold_model_dir)
    never = [{"id": f"z{i}", "question": "Code for red?", "answer": "zebra crossing"} for i in range(3)]
    trainer = GRPOTrainer(config(tmp_path, steps=1, batch_size=8, micro_batch_size=8, pool_size=3,
                                 dynamic_sampling_rounds=3), model, tok, never)
    row = trainer.train()[0]
    # no group can have signal: every round is spent, each collecting another task's group
    assert row["data/sampling_rounds"] == 3 and row["data/signal_groups"] == 0
    assert row["rollout/trajectories"] == 3 * 8 and row["train/empty"] == 1
    model, tok = load(cold_model_dir)
    trainer = GRPOTrainer(config(tmp_path / "b", steps=1, batch_size=8, micro_batch_size=8,
                                 dynamic_sampling_rounds=4), model, tok, ONE_TASK)
    row = trainer.train()[0]
    assert row["data/signal_groups"] >= 1 or row["data/sampling_rounds"] == 4
    assert row["rollout/trajectories"] == 8 * row["data/sampling_rounds"]
    with pytest.raises(ValueError, match="dynamic_sampling_rounds must be an integer >= 1"):
        GRPOConfig(model="m", tasks="t", dynamic_sampling_rounds=0)


def test_update_epochs_take_more_clipped_steps_on_one_batch(cold_model_dir, tmp_path):
    kw = dict(steps=1, batch_size=32, group_size=8, micro_batch_size=32, pool_size=4, seed=3, lockstep_rollouts=True)
    rows = {}
    for epochs in (1, 3):
        model, tok = load(cold_model_dir)
        trainer = GRPOTrainer(config(tmp_path / f"e{epochs}", update_epochs=epochs, **kw), model, tok, FOUR_TASKS)
        calls, step = [], trainer.optimizer.step
        trainer.optimizer.step = lambda *a, **k: (calls.append(1), step(*a, **k))[1]
        rows[epochs] = trainer.train()[0], len(calls)
    (one, one_steps), (three, three_steps) = rows[1], rows[3]
    assert one["data/signal_groups"] >= 1, "the seed must give a group with signal"
    # the same rollouts (same seed and weights), then 1 vs 3 optimizer steps on them
    assert (one["reward/mean"], one["rollout/length"]) == (three["reward/mean"], three["rollout/length"])
    assert (one["train/optimizer_steps"], one_steps) == (1, 1) and (three["train/optimizer_steps"], three_steps) == (3, 3)
    assert one["policy/ratio_mean_last"] == pytest.approx(1.0, abs=1e-4)  # on-policy: the sampler's own weights
    assert three["policy/ratio_mean_last"] != pytest.approx(1.0, abs=1e-4)  # after two updates: off-policy, clipped
    assert three["loss/policy"] == pytest.approx(one["loss/policy"], rel=1e-5)  # the first epoch is the same


def test_update_epochs_are_checked():
    with pytest.raises(ValueError, match="update_epochs must be an integer >= 1, got 0"):
        GRPOConfig(model="m", tasks="t", update_epochs=0)
    with pytest.raises(ValueError, match="update_epochs > 1 needs tis_cap 0"):
        GRPOConfig(model="m", tasks="t", update_epochs=2, tis_cap=2.0)
