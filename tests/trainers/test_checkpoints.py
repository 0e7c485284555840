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
