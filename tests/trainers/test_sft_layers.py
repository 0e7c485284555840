"""SFT with --train-layers: only the top layers and the final norm change; the checkpoint holds only them
(and their optimizer state) and still resumes exactly."""

from __future__ import annotations

import json

import pytest
import torch

from tests.trainers.test_sft import _config, _record, _write
from trainers.layers import frozen_names, trainable_top
from trainers.models import load_lm
from trainers.sft import train
from trainers.tiny_lm import save_tiny_lm, tiny_lm
from tests.trainers.conftest import tiny_qwen2


def test_trainable_top_freezes_all_but_the_top_layers_and_norm():
    model = tiny_qwen2()
    sizes = trainable_top(model, 1)
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trained and all(n.startswith(("model.layers.1.", "model.norm.")) for n in trained)
    assert sizes["trainable"] == sum(p.numel() for p in model.parameters() if p.requires_grad) < sizes["parameters"]
    assert "lm_head.weight" in frozen_names(model)  # tied to the embeddings: frozen under both names
    assert trainable_top(tiny_qwen2(), 0)["trainable"] == sizes["parameters"]
    assert trainable_top(tiny_qwen2(), 5)["trainable"] == sizes["parameters"]  # more than it has: all
    with pytest.raises(ValueError, match="layers must be an integer >= 0, got -1"):
        trainable_top(model, -1)


def test_train_layers_trains_the_top_only_saves_less_and_resumes_exactly(tmp_path):
    data = _write(tmp_path / "t.jsonl", [_record(i, calls=1 + i % 2) for i in range(6)])
    model, tok = tiny_lm(hidden=32, seed=1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    full = train(_config(tmp_path / "a", data, train_layers=1), model=model, tokenizer=tok)
    top = len(model.model.layers) - 1
    after = load_lm(tmp_path / "a" / "out" / "model")[0].state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.startswith((f"model.layers.{top}.", "model.norm.")) for k in changed)
    summary = json.loads((tmp_path / "a" / "out" / "summary.json").read_text())
    assert 0 < summary["trainable"] < summary["parameters"]
    state = torch.load(tmp_path / "a" / "out" / "checkpoint.pt", weights_only=True)
    assert set(state["model"]) == {k for k in before if k.startswith((f"model.layers.{top}.", "model.norm."))}
    trained = sum(v.numel() for v in state["model"].values())
    moments = sum(t.numel() for s in state["optimizer"]["state"].values() for t in s.values() if t.dim() > 0)
    assert moments == 2 * trained  # AdamW's two moments, for the trained weights only

    class Interrupt(Exception):
        pass

    def stop_at_3(metrics):
        if metrics["step"] == 3:
            raise Interrupt

    model, tok = tiny_lm(hidden=32, seed=1)
    with pytest.raises(Interrupt):
        train(_config(tmp_path / "b", data, train_layers=1), model=model, tokenizer=tok, on_step=stop_at_3)
    model, tok = tiny_lm(hidden=32, seed=1)  # the same starting model: the frozen weights come from it
    resumed = train(_config(tmp_path / "b", data, train_layers=1), model=model, tokenizer=tok)
    assert [h["step"] for h in resumed.history] == [3, 4, 5, 6]
    b = load_lm(tmp_path / "b" / "out" / "model")[0].state_dict()
    assert all(torch.equal(after[k], b[k]) for k in after)
    assert [h["loss/sft"] for h in resumed.history] == [h["loss/sft"] for h in full.history[2:]]
    other, tok = tiny_lm(hidden=32, seed=99)  # another starting model: its frozen weights are not those trained on
    with pytest.raises(ValueError, match="frozen weights differ"):
        train(_config(tmp_path / "b", data, train_layers=1), model=other, tokenizer=tok)
    model, tok = tiny_lm(hidden=32, seed=1)
    with pytest.raises(ValueError, match="another --train-layers"):
        train(_config(tmp_path / "b", data, train_layers=2), model=model, tokenizer=tok)


def test_cli_train_layers_and_bad_values(tmp_path, capsys):
    from websailor.cli import main

    model_dir = save_tiny_lm(tmp_path / "tiny", hidden=32)
    data = _write(tmp_path / "t.jsonl", [_record(i) for i in range(3)])
    rc = main(["sft", "train", "--data", data, "--model", model_dir, "--output-dir", str(tmp_path / "run"),
               "--lr", "1e-3", "--batch-size", "2", "--max-steps", "2", "--tensorboard", "off", "--train-layers", "1"])
    assert rc == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["trainable"] < summary["parameters"]
    capsys.readouterr()
    rc = main(["sft", "train", "--data", data, "--model", model_dir, "--output-dir", str(tmp_path / "r2"),
               "--train-layers", "-1"])
    assert rc == 2 and "train_layers must be an integer >= 0, got -1" in capsys.readouterr().err
