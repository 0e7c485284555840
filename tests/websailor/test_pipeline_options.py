"""The main job's sampling options come from trainers.rollout_options; a run recorded before one existed resumes."""

from __future__ import annotations

import json

import pytest

from websailor.pipeline import RUN_FILE, PipelineConfig, open_run


def test_a_run_recorded_without_a_newer_option_resumes_at_its_default(tmp_path):
    run = tmp_path / "run"
    open_run(PipelineConfig(out=str(run), model="tiny"))
    state = json.loads((run / RUN_FILE).read_text())
    del state["config"]["top_p"]  # as a run recorded before --top-p existed
    (run / RUN_FILE).write_text(json.dumps(state))
    open_run(PipelineConfig(out=str(run), model="tiny"))  # the default: the same run
    with pytest.raises(ValueError, match=r"holds a run with other settings \(top_p\)"):
        open_run(PipelineConfig(out=str(run), model="tiny", top_p=0.5))


def test_sampling_options_are_checked_once_for_every_command():
    with pytest.raises(ValueError, match="top_p must be in"):
        PipelineConfig(out="x", model="tiny", top_p=0.0)
    with pytest.raises(ValueError, match="max_new_tokens must be a positive integer, got 0"):
        PipelineConfig(out="x", model="tiny", max_new_tokens=0)
