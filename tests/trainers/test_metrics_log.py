"""The metrics files SFT and GRPO share: what happens without TensorBoard, and a resumed run's lines."""

from __future__ import annotations

import sys

import pytest

from trainers.metrics_log import MetricsLogger, iter_metrics


@pytest.fixture
def no_tensorboard(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # importing it raises ImportError


def test_without_tensorboard_auto_says_so_in_one_line_and_on_is_an_error(tmp_path, no_tensorboard, capsys):
    logger = MetricsLogger(tmp_path, "auto")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install tensorboard" in err and "metrics.jsonl only" in err
    logger.log({"step": 1, "loss/sft": 0.5})
    assert list(iter_metrics(tmp_path / "metrics.jsonl")) == [{"step": 1, "loss/sft": 0.5}]
    assert not (tmp_path / "tensorboard").exists()
    with pytest.raises(ValueError, match="pip install tensorboard"):
        MetricsLogger(tmp_path, "on")
    MetricsLogger(tmp_path, "off")
    assert capsys.readouterr().err == ""
    with pytest.raises(ValueError, match=r"tensorboard must be one of \['auto', 'on', 'off'\], got 'yes'"):
        MetricsLogger(tmp_path, "yes")


def test_truncate_after_keeps_the_steps_a_resumed_run_does_not_redo(tmp_path):
    logger = MetricsLogger(tmp_path, "off")
    for step in (1, 2, 3):
        logger.log({"step": step})
    logger.truncate_after(2)
    assert [r["step"] for r in iter_metrics(logger.path)] == [1, 2]
    logger.truncate_after(0)  # a fresh run in the same folder starts an empty file
    assert logger.path.read_text() == ""
