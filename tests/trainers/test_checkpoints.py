"""Checkpoints inside a stage: a signal saves and stops, --resume continues with the same steps;
loading never runs code from a planted file; a garbage checkpoint is a one-line error."""

from __future__ import annotations

import os
import pickle
import random
import signal
from pathlib import Path

import numpy as np
import pytest
import torch

from trainers.checkpoint_io import CheckpointError, load_state, rng_state, save_state, set_rng_state
from trainers.interrupt import TrainingInterrupted
from trainers.sft import train
from trainers.models import load_lm
from trainers.tiny_lm import save_tiny_lm, tiny_lm
from websailor.cli import main

from .test_sft import _config, _record, _write


class Payload:
    """Unpickling this creates ``path``: the proof that a load ran code."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


def _plant(path: Path, marker: Path, how: str = "torch") -> None:
    """A checkpoint whose loading with ``weights_only=False`` would create ``marker``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"step": 1, "bad_in_row": 0, "pool": {}, "optimizer": {}, "scheduler": {}, "model": Payload(marker)}
    if how == "torch":
        torch.save(state, path)
    else:
        with path.open("wb") as fh:
            pickle.dump(state, fh)
    try:  # the plant works: the unsafe load runs the payload (a bare pickle then fails torch's magic number)
        torch.load(path, weights_only=False)
    except RuntimeError:
        pass
    assert marker.exists()
    marker.unlink()


def test_rng_state_round_trips_through_a_weights_only_load(tmp_path):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    save_state(tmp_path / "s.pt", {"rng": rng_state()})
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    set_rng_state(load_state(tmp_path / "s.pt")["rng"])  # weights_only=True inside
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


@pytest.fixture
def default_sigint():
    """Python's own SIGINT handler for the test: a runner started under ``nohup`` (or some CI runners) ignores
    SIGINT, and the trainer rightly keeps an ignored signal ignored."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_sft_signal_saves_the_step_and_resume_matches_an_uninterrupted_run(tmp_path, signum, default_sigint):
    data = _write(tmp_path / "t.jsonl", [_record(i, calls=1 + i % 2) for i in range(6)])
    model, tok = tiny_lm(hidden=32, seed=1)
    train(_config(tmp_path / "a", data, save_every=100), model=model, tokenizer=tok)

    def signal_at_3(metrics):
        if metrics["step"] == 3:
            os.kill(os.getpid(), signum)

    model, tok = tiny_lm(hidden=32, seed=1)
    with pytest.raises(TrainingInterrupted, match="after step 3 of 6") as err:
        train(_config(tmp_path / "b", data, save_every=100), model=model, tokenizer=tok, on_step=signal_at_3)
    assert err.value.signum == signum
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored
    assert not (tmp_path / "b" / "out" / "model").exists()  # nothing that looks finished
    fresh, tok = tiny_lm(hidden=32, seed=99)
    resumed = train(_config(tmp_path / "b", data, save_every=100), model=fresh, tokenizer=tok)
    assert [h["step"] for h in resumed.history] == [4, 5, 6]
    a, b = (load_lm(tmp_path / d / "out" / "model")[0].state_dict() for d in ("a", "b"))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_sft_planted_pickle_does_not_run(tmp_path, capsys):
    marker = tmp_path / "pwned"
    out = tmp_path / "run"
    _plant(out / "checkpoint.pt", marker, how="pickle")
    data = _write(tmp_path / "t.jsonl", [_record(i) for i in range(2)])
    model, tok = tiny_lm(hidden=32)
    with pytest.raises(CheckpointError, match="checkpoint.pt: not a readable checkpoint"):  # a bare pickle
        train(_config(tmp_path, data, output_dir=str(out)), model=model, tokenizer=tok)
    assert not marker.exists()
    _plant(out / "checkpoint.pt", marker)
    model_dir = save_tiny_lm(tmp_path / "tiny", hidden=32)
    rc = main(["sft", "train", "--data", data, "--model", model_dir, "--output-dir", str(out), "--tensorboard", "off"])
    err = capsys.readouterr().err.strip().splitlines()[-1]  # (transformers' loading bars come before it)
    assert rc == 2 and err.startswith("websailor sft train: error: ") and "checkpoint.pt: refused" in err
    assert "Unsupported global" in err and "--no-resume" in err and "weights_only=False" not in err
    assert not marker.exists()


def _grpo_checkpoint(tmp_path: Path) -> tuple[Path, Path]:
    """A real GRPO checkpoint directory of a tiny model (``checkpoint-1``) and that model's folder."""
    from trainers.checkpoint_io import save_checkpoint

    model, tok = tiny_lm(hidden=32)
    model_dir = Path(save_tiny_lm(tmp_path / "tiny", hidden=32))
    path = save_checkpoint(tmp_path / "run", 1, model, tok, {"step": 1, "bad_in_row": 0, "pool": {},
                                                             "optimizer": {}, "scheduler": {}}, keep=2)
    return path, model_dir


def test_grpo_planted_pickle_does_not_run_and_garbage_is_one_line(tmp_path, capsys):
    from trainers.checkpoint_io import STATE_FILE, load_checkpoint

    path, model_dir = _grpo_checkpoint(tmp_path)
    model, _ = tiny_lm(hidden=32)
    assert load_checkpoint(path, model)["step"] == 1  # the genuine one loads
    marker = tmp_path / "pwned"
    _plant(path / STATE_FILE, marker)
    with pytest.raises(CheckpointError, match="refused"):
        load_checkpoint(path, model)
    assert not marker.exists()
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"question": "q?", "answer": "a"}\n')
    argv = ["grpo", str(model_dir), str(tasks), "--output-dir", str(tmp_path / "run"), "--env-id",
            "tests.trainers.toy_env:ToyColor-v0", "--steps", "1", "--batch-size", "2", "--group-size", "2",
            "--tensorboard", "off", "--device", "cpu"]
    for garbage in (b"\x00garbage" * 10, b""):
        (path / STATE_FILE).write_bytes(garbage)
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err.startswith("websailor grpo: error: ") and str(path / STATE_FILE) in err, err
        assert "not a readable checkpoint" in err
    _grpo_checkpoint(tmp_path)  # a good state file again, now with damaged weights
    (path / "model.safetensors").write_bytes(b"\xff" * 64)
    with pytest.raises(CheckpointError, match="model.safetensors: not a readable weights file"):
        load_checkpoint(path, model)
    assert not marker.exists()


# ---------------------------------------------------------------- a full disk

def _full_disk_once(monkeypatch, fail_calls: set[int]) -> list[int]:
    """``torch.save`` whose calls numbered in ``fail_calls`` (from 1) write to ``/dev/full``: the real
    out-of-space error of torch's zip writer, as a full disk gives it."""
    real, calls = torch.save, []

    def save(obj, f, *args, **kwargs):
        calls.append(1)
        return real(obj, "/dev/full") if len(calls) in fail_calls else real(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save)
    return calls


def test_a_full_disk_is_one_line_and_leaves_no_half_written_checkpoint(tmp_path, monkeypatch):
    from trainers.checkpoint_io import (CheckpointWriteError, latest_checkpoint, load_checkpoint, save_checkpoint,
                                        save_model)

    model, tok = tiny_lm(hidden=32)
    state = {"step": 1, "bad_in_row": 0, "pool": {}, "optimizer": {}, "scheduler": {}}
    for step in (1, 2):
        save_checkpoint(tmp_path / "run", step, model, tok, {**state, "step": step}, keep=2)
    save_state(tmp_path / "state.pt", {"step": 7})
    _full_disk_once(monkeypatch, {1, 2})
    with pytest.raises(CheckpointWriteError) as err:
        save_checkpoint(tmp_path / "run", 3, model, tok, {**state, "step": 3}, keep=2)
    message = str(err.value)
    assert "\n" not in message and "checkpoint-3: not written (RuntimeError" in message
    assert "GiB free there" in message and "free disk space" in message
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["checkpoint-2"]  # no checkpoint-3(.tmp)
    assert latest_checkpoint(tmp_path / "run").name == "checkpoint-2"
    assert load_checkpoint(tmp_path / "run" / "checkpoint-2", tiny_lm(hidden=32)[0])["step"] == 2
    with pytest.raises(CheckpointWriteError, match=r"state\.pt: not written"):
        save_state(tmp_path / "state.pt", {"step": 8})
    assert load_state(tmp_path / "state.pt") == {"step": 7}  # the old file, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "state.pt"]

    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(type(model), "save_pretrained", no_space)
    with pytest.raises(CheckpointWriteError, match=r"model: not written \(OSError: \[Errno 28\] No space left"):
        save_model(model, tok, tmp_path / "model")
    assert not (tmp_path / "model").exists() and not (tmp_path / "model.tmp").exists()


def test_keep_two_never_holds_three_checkpoints(tmp_path, monkeypatch):
    from trainers import checkpoint_io

    model, tok = tiny_lm(hidden=32)
    seen = []
    real = checkpoint_io._write_model

    def write(tmp, *args):  # what is on disk while a new checkpoint is being written
        seen.append(sorted(p.name for p in tmp.parent.iterdir() if not p.name.endswith(".tmp")))
        return real(tmp, *args)

    monkeypatch.setattr(checkpoint_io, "_write_model", write)
    for step in (1, 2, 3, 4):
        checkpoint_io.save_checkpoint(tmp_path, step, model, tok, {"step": step}, keep=2)
    assert seen == [[], ["checkpoint-1"], ["checkpoint-2"], ["checkpoint-3"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-3", "checkpoint-4"]


def test_sft_goes_on_when_a_checkpoint_cannot_be_written(tmp_path, monkeypatch, capsys):
    data = _write(tmp_path / "t.jsonl", [_record(i) for i in range(4)])
    model, tok = tiny_lm(hidden=32, seed=1)
    _full_disk_once(monkeypatch, {1})  # the step-2 checkpoint
    result = train(_config(tmp_path, data, save_every=2), model=model, tokenizer=tok)
    out = capsys.readouterr().out
    assert "sft: step 2: checkpoint not saved: " in out and "training goes on" in out
    assert result.steps == 6 and load_state(tmp_path / "out" / "checkpoint.pt")["step"] == 6
    assert (tmp_path / "out" / "model" / "config.json").exists()
    assert not any(p.name.endswith(".tmp") for p in (tmp_path / "out").iterdir())


def test_grpo_goes_on_when_a_checkpoint_cannot_be_written(tmp_path, monkeypatch, capsys):
    from trainers.checkpoint_io import latest_checkpoint
    from trainers.grpo import GRPOConfig, GRPOTrainer

    from . import toy_env

    model, tok = tiny_lm(hidden=32, seed=1)
    cfg = GRPOConfig(model="-", tasks="-", output_dir=str(tmp_path / "run"), env_id=toy_env.SPEC, batch_size=4,
                     group_size=2, micro_batch_size=4, max_new_tokens=8, pool_size=2, save_every=1, steps=3,
                     device="cpu", tensorboard="off")
    _full_disk_once(monkeypatch, {2})  # the step-2 checkpoint's trainer state
    trainer = GRPOTrainer(cfg, model, tok, toy_env.TASKS[:2])
    assert [m["step"] for m in trainer.train()] == [1, 2, 3]
    out = capsys.readouterr().out
    assert "grpo: step 2: checkpoint not saved: " in out and "newest checkpoint on disk: checkpoint-1" in out
    assert trainer.checkpoint_failures == 1 and latest_checkpoint(tmp_path / "run").name == "checkpoint-3"
    assert (tmp_path / "run" / "model" / "config.json").exists()
