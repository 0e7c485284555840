"""benchmarks/gpu_train.py: one line and exit 2 without vLLM on a GPU; ``--dry-run`` runs its whole code path
on CPU (the stand-in engine, a tiny model, a simulator it builds, Qwen3's template on a BPE tokenizer)."""

from __future__ import annotations

import json

import pytest
import torch

from benchmarks import gpu_train


def _has_vllm_gpu() -> bool:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.is_available()


def test_without_vllm_on_a_gpu_it_says_so_in_one_line(capsys):
    if _has_vllm_gpu():
        pytest.skip("vLLM and a GPU are present: the benchmark would run")
    assert gpu_train.main([]) == 2
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu_train: ") and "websailor-gym[vllm]" in lines[0]
    assert "--dry-run" in lines[0] and out.out == ""


def test_dry_run_runs_the_same_path_on_cpu(capsys):
    rc = gpu_train.main(["--dry-run", "--tokenizer", "subword", "--subword-vocab", "400", "--pages", "12",
                         "--episodes", "2",
                         "--max-new-tokens", "4", "--long-tokens", "64"])
    assert rc == 0
    lines = capsys.readouterr().out.strip().splitlines()
    result = json.loads(lines[-1])
    assert lines[0].startswith("measure") and result["benchmark"] == "gpu_train"
    assert result["engine"] == "standin-cpu" and result["template"] == "qwen3" and result["tokenizer"] == "subword"
    assert result["bare_tokens_per_s"] > 0 and result["rollout_tokens_per_s"] > 0 and result["rollout_turns"] >= 2
    assert result["step_sync_mb"] > 0 and result["step_train_tokens"] > 0  # the step pushed weights and trained
    assert result["long_tokens"] == 64 and result["long_finite"]


def test_websailor_bench_skips_it_without_vllm_on_a_gpu(tmp_path):
    from websailor.cli import main

    if _has_vllm_gpu():
        pytest.skip("vLLM and a GPU are present: the benchmark would run")
    out = tmp_path / "bench"
    assert main(["bench", "--only", "gpu_train", "--out", str(out)]) == 0
    [record] = json.loads((out / "bench.json").read_text())["benchmarks"]
    assert record["name"] == "gpu_train" and record["status"] == "skipped" and "vLLM" in record["reason"]
