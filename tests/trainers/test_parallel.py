"""FSDP2 (and DDP) with two gloo processes on CPU: the weights after an update equal one process's on
the same global batch; full-state checkpoints resume under FSDP and load back in one process;
the torchrun and accelerate lines of docs/training.md run as written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.trainers import fsdp_worker
from trainers import parallel

ROOT = Path(__file__).resolve().parents[2]
TOL = dict(rtol=1e-4, atol=1e-6)


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")


def torchrun(*args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *args]
    proc = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def assert_close(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    keys = [k for k in want if k in got]
    assert len(keys) >= len(want) - 1, (sorted(got), sorted(want))  # a tied LM head may be saved once
    for k in keys:
        torch.testing.assert_close(got[k], want[k].to(got[k].dtype), **TOL, msg=k)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    from transformers import ByT5Tokenizer

    from tests.trainers import toy_env

    torch.set_num_threads(1)
    tok = ByT5Tokenizer()
    model = toy_env.tiny_model(tok)
    toy_env.cold_start(model, tok, tasks=toy_env.TASKS[:4], think=False)  # answers in format: rewards vary
    out = tmp_path_factory.mktemp("fsdp") / "model"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def test_grpo_fsdp_update_matches_one_process_and_resumes(model_dir, tmp_path):
    torch.set_num_threads(1)
    trajs, advantages = fsdp_worker.fixed_batch(str(model_dir))
    ref = fsdp_worker.make_trainer(str(model_dir), str(tmp_path / "ref"), "fsdp")
    first = fsdp_worker.update(ref, trajs, advantages)
    after_one = {k: v.clone() for k, v in ref.model.state_dict().items()}
    fsdp_worker.update(ref, trajs, advantages)
    after_two = {k: v.clone() for k, v in ref.model.state_dict().items()}

    out = tmp_path / "fsdp"
    torchrun("-m", "tests.trainers.fsdp_worker", str(model_dir), str(out), "fsdp")
    report = json.loads((out / "worker.json").read_text())
    assert report["world_size"] == 2 and report["metrics"][0]["train/skipped"] == 0
    for key in ("loss/policy", "grad/norm", "policy/entropy", "train/tokens"):  # AdamW hides a gradient's scale
        assert report["metrics"][0][key] == pytest.approx(first[key], rel=1e-4), key
    assert not torch.equal(after_one["model.layers.0.mlp.up_proj.weight"], weights(model_dir)[
        "model.layers.0.mlp.up_proj.weight"])  # the update moved the weights: the comparison means something
    assert_close(weights(out / "checkpoint-1"), after_one)
    assert_close(weights(out / "checkpoint-2"), after_two)  # resumed under FSDP: optimizer state sharded back

    # the FSDP checkpoint (full state dicts) resumes in one process and continues as the one-process run
    fsdp_worker.update(ref, trajs, advantages)
    alone = fsdp_worker.make_trainer(str(model_dir), str(out), "fsdp")
    assert alone.load_latest() and alone.step == 2
    fsdp_worker.update(alone, trajs, advantages)
    assert_close(alone.model.state_dict(), ref.model.state_dict())


def test_fsdp_with_lora_is_one_line_error():
    with pytest.raises(ValueError, match="LoRA with --parallel fsdp is not supported"):
        parallel.check_supported("fsdp", lora=True)
    with pytest.raises(ValueError, match="parallel must be one of"):
        parallel.check_supported("zero3", lora=False)


def test_cli_fsdp_with_lora_is_one_line_error(capsys, tmp_path):
    from websailor.cli import main

    assert main(["grpo", str(tmp_path / "m"), str(tmp_path / "t.jsonl"), "--parallel", "fsdp", "--lora-r", "4"]) != 0
    assert main(["sft", "train", "--data", str(tmp_path / "d.jsonl"), "--model", "m", "--output-dir", str(tmp_path),
                 "--parallel", "fsdp", "--lora"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("LoRA with --parallel fsdp is not supported" in line for line in err), err


def test_sft_bfloat16_keeps_fp32_master_weights(sft_ref, tmp_path):
    from trainers.sft import SFTConfig, train
    from trainers.models import load_lm

    model, tok = load_lm(sft_ref["model"])
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = train(SFTConfig(data=[str(sft_ref["data"])], model=str(sft_ref["model"]), output_dir=str(tmp_path),
                             max_steps=1, batch_size=6, micro_batch_size=3, lr=1e-3, tensorboard="off",
                             dtype="bfloat16"), model=model, tokenizer=tok)
    assert result.final_loss is not None and result.skipped_steps == 0
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert not torch.equal(model.state_dict()["model.norm.weight"], before["model.norm.weight"])


def test_decoder_layers_are_the_no_split_modules(model_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    layers = parallel.decoder_layers(model)
    assert [type(m).__name__ for m in layers] == ["Qwen2DecoderLayer"] * model.config.num_hidden_layers
    with pytest.raises(ValueError, match="use --parallel ddp"):
        parallel.decoder_layers(torch.nn.Linear(2, 2))


# ------------------------------------------------- the command lines of docs/training.md

GRPO_LINE = ("grpo {model} {tasks} --env-id tests.trainers.toy_env:websailor-test/Toy-v0 --batch-size 8 "
             "--group-size 2 --dtype bfloat16 --gradient-checkpointing --micro-batch-tokens 2048 --device cpu "
             "--steps 2 --parallel fsdp --output-dir {out} --max-new-tokens 48 --tensorboard off")
"""The GRPO line of docs/training.md (torchrun ... -m websailor.cli, then this), on the toy environment."""


def test_readme_torchrun_grpo_fsdp_line(model_dir, tmp_path):
    from tests.trainers import toy_env
    from trainers.checkpoint_io import load_checkpoint
    from trainers.metrics_log import iter_metrics

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in toy_env.TASKS[:4]))
    out = tmp_path / "grpo"
    torchrun("-m", "websailor.cli", *GRPO_LINE.format(model=model_dir, tasks=tasks, out=out).split())
    rows = list(iter_metrics(out / "metrics.jsonl"))
    assert [r["step"] for r in rows] == [1, 2] and rows[0]["rollout/trajectories"] == 8
    assert any(r["train/skipped"] == 0 for r in rows), rows  # at least one update with signal ran under FSDP
    from transformers import AutoModelForCausalLM

    alone = AutoModelForCausalLM.from_pretrained(out / "model")  # the final model loads in one process
    load_checkpoint(out / "checkpoint-2", alone)  # and so does the checkpoint
    assert_close(weights(out / "checkpoint-2"), weights(out / "model"))
    assert not torch.equal(weights(out / "model")["model.norm.weight"], weights(model_dir)["model.norm.weight"])


def _sft_args(data: Path, model: Path, out: Path, *extra: str) -> list[str]:
    return ["sft", "train", "--data", str(data), "--model", str(model), "--output-dir", str(out), "--max-steps", "2",
            "--batch-size", "6", "--micro-batch-size", "2", "--lr", "1e-3", "--min-lr", "1e-3", "--warmup-ratio", "0",
            "--save-every", "1", "--tensorboard", "off", *extra]


class _Stop(Exception):
    pass


@pytest.fixture(scope="module")
def sft_ref(tmp_path_factory) -> dict:
    """7 trajectories (batches of 6 then 1: a rank with nothing in step 2), a tiny model, and one process's
    2-step run, plus its checkpoint after step 1."""
    from tests.trainers.test_sft import _record, _write
    from trainers.sft import SFTConfig, train
    from trainers.tiny_lm import save_tiny_lm
    from websailor.cli import main

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("sft")
    data = Path(_write(root / "data.jsonl", [_record(i, calls=1 + i % 2) for i in range(7)]))
    model = Path(save_tiny_lm(root / "tiny", hidden=32))
    assert main(_sft_args(data, model, root / "ref")) in (0, None)

    def stop(metrics):
        if metrics["step"] == 1:
            raise _Stop

    with pytest.raises(_Stop):
        train(SFTConfig(data=[str(data)], model=str(model), output_dir=str(root / "half"), max_steps=2, batch_size=6,
                        micro_batch_size=2, lr=1e-3, min_lr=1e-3, warmup_ratio=0, save_every=1, tensorboard="off"),
              on_step=stop)
    return {"data": data, "model": model, "ref": root / "ref", "half": root / "half" / "checkpoint.pt"}


@pytest.mark.parametrize("mode", ["fsdp", "ddp"])
def test_readme_torchrun_sft_line_matches_one_process(sft_ref, tmp_path, mode):
    from trainers.checkpoint_io import load_state

    out = tmp_path / mode
    torchrun("-m", "websailor.cli", *_sft_args(sft_ref["data"], sft_ref["model"], out, "--parallel", mode))
    assert_close(weights(out / "model"), weights(sft_ref["ref"] / "model"))
    got = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    want = [json.loads(line) for line in (sft_ref["ref"] / "metrics.jsonl").read_text().splitlines()]
    for g, w in zip(got, want, strict=True):
        for key in ("loss/sft", "train/grad_norm", "train/tokens"):
            assert g[key] == pytest.approx(w[key], rel=1e-4), key
    # the checkpoint holds full state dicts in the single-process format
    ckpt, ref = load_state(out / "checkpoint.pt"), load_state(sft_ref["ref"] / "checkpoint.pt")
    assert_close(ckpt["model"], ref["model"])
    assert sorted(ckpt["optimizer"]["state"]) == sorted(ref["optimizer"]["state"])
    for k, row in ref["optimizer"]["state"].items():
        assert_close(ckpt["optimizer"]["state"][k], row)


def test_readme_accelerate_line_resumes_a_single_process_checkpoint_under_fsdp(sft_ref, tmp_path):
    """``accelerate launch --multi_gpu --num_processes 2`` (torchrun underneath; gloo on CPU) continues the
    step-1 checkpoint of a single process under FSDP and ends where one process ends."""
    out = tmp_path / "acc"
    out.mkdir()
    shutil.copy(sft_ref["half"], out / "checkpoint.pt")
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2", "-m", "websailor.cli", *_sft_args(sft_ref["data"], sft_ref["model"], out, "--parallel", "fsdp")]
    proc = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads((out / "summary.json").read_text())["resumed_from"] == 1
    assert_close(weights(out / "model"), weights(sft_ref["ref"] / "model"))
