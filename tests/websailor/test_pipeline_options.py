"""The main job's sampling options come from trainers.rollout_options; a run recorded before one existed resumes."""

from __future__ import annotations

import json

import pytest

from websailor.pipeline import RUN_FILE, PipelineConfig, open_run


def test_a_run_recorded_without_a_newer_option_resumes_at_its_default(tmp_path):
    run = tmp_path / "run"
    open_run(PipelineConfig(out=str(run), model="tiny"))
    state = json.loads((run / RUN_FILE).read_text())
    del state["config"]["max_new_tokens"]  # as a run recorded before --max-new-tokens existed
    (run / RUN_FILE).write_text(json.dumps(state))
    open_run(PipelineConfig(out=str(run), model="tiny"))  # the default: the same run
    with pytest.raises(ValueError, match=r"holds a run with other settings \(max_new_tokens\)"):
        open_run(PipelineConfig(out=str(run), model="tiny", max_new_tokens=32))
    with pytest.raises(ValueError, match="--top-p must be 1 in the main job"):
        PipelineConfig(out=str(run), model="tiny", top_p=0.5)


def test_sampling_options_are_checked_once_for_every_command():
    with pytest.raises(ValueError, match="top_p must be in"):
        PipelineConfig(out="x", model="tiny", top_p=0.0)
    with pytest.raises(ValueError, match="max_new_tokens must be a positive integer, got 0"):
        PipelineConfig(out="x", model="tiny", max_new_tokens=0)
    with pytest.raises(ValueError, match="--grpo-kl-beta must be >= 0, got -0.1"):
        PipelineConfig(out="x", model="tiny", grpo_kl_beta=-0.1)
    with pytest.raises(ValueError, match="--grpo-levels: expected LEVEL=SHARE"):
        PipelineConfig(out="x", model="tiny", grpo_levels="hop=1")
    assert PipelineConfig(out="x", model="tiny", grpo_levels="lookup-hop=1").grpo_levels == "lookup-hop=1"


def test_device_auto_resolves_and_cuda_without_a_gpu_is_one_line(tmp_path, monkeypatch):
    import torch

    from websailor.stages import model_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert model_device(PipelineConfig(out="x", model="tiny")) == "cpu"  # auto, no GPU
    with pytest.raises(ValueError, match="--device cuda was asked for but CUDA is not available"):
        PipelineConfig(out="x", model="tiny", device="cuda")
    with pytest.raises(ValueError, match="--device must be"):
        PipelineConfig(out="x", model="tiny", device="tpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert model_device(PipelineConfig(out="x", model="tiny")) == "cuda"
    assert model_device(PipelineConfig(out="x", model="tiny", device="cpu")) == "cpu"
    # where it runs is no setting of the run: a run started on a GPU resumes on a CPU
    run = tmp_path / "run"
    open_run(PipelineConfig(out=str(run), model="tiny", device="cuda"))
    open_run(PipelineConfig(out=str(run), model="tiny", device="cpu"))


def test_probe_and_grpo_draw_only_tasks_sft_never_saw(tmp_path):
    from websailor.stages import unseen_train_tasks, write_jsonl

    train = [{"id": f"t{i}", "question": "q", "answer": "a", "level": "lookup-lead"} for i in range(12)]
    write_jsonl(tmp_path / "trajectories" / "gold.jsonl",
                [{"id": f"t{i}", "task": {"id": f"t{i}"}, "messages": []} for i in range(6)])
    config = PipelineConfig(out="x", model="tiny", probe=2, grpo_tasks_per_step=4)
    assert [t["id"] for t in unseen_train_tasks(config, tmp_path, train)] == [f"t{i}" for i in range(6, 12)]
    with pytest.raises(ValueError, match=r"only 6 train task\(s\) are not in SFT's gold set \(6 are\)"):
        unseen_train_tasks(PipelineConfig(out="x", model="tiny", probe=4, grpo_tasks_per_step=4), tmp_path, train)


@pytest.mark.parametrize("free_gib, cores, expected", [(24, 2, 2), (24, 8, 4), (13, 8, 2), (4, 8, 1), (0, 2, 2)])
def test_default_evaluations_at_once_fit_the_cores_and_the_free_memory(monkeypatch, free_gib, cores, expected):
    import trainers.memory
    from websailor import stages

    monkeypatch.setattr(trainers.memory, "available_memory", lambda device: (free_gib << 30, "test"))
    monkeypatch.setattr(stages.os, "cpu_count", lambda: cores)
    assert stages.default_eval_workers() == expected
    config = type("C", (), {"workers": 0, "device": "cpu"})()
    assert stages.eval_workers(config) == expected and stages.eval_workers(config, asked=3) == 3
