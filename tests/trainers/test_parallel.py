"""FSDP2 (and DDP) with two gloo processes on CPU: the weights after an update equal one process's on
the same global batch; full-state checkpoints resume under FSDP and load back in one process;
the README's torchrun and accelerate lines run as written."""

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

    tok = ByT5Tokenizer()
    model = toy_env.tiny_model(tok)
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


def test_decoder_layers_are_the_no_split_modules(model_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    layers = parallel.decoder_layers(model)
    assert [type(m).__name__ for m in layers] == ["Qwen2DecoderLayer"] * model.config.num_hidden_layers
    with pytest.raises(ValueError, match="use --parallel ddp"):
        parallel.decoder_layers(torch.nn.Linear(2, 2))
