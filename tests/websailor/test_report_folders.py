"""`websailor report DIR` on eval, SFT and GRPO output folders; a folder with nothing known is one line."""

from __future__ import annotations

import json
from pathlib import Path

from websailor.cli import main


def _traj(i: int, correct: bool) -> dict:
    messages = [{"role": "system", "content": "Answer."}, {"role": "user", "content": f"Which article {i}?"},
                {"role": "assistant", "content": f"<think>look</think>\n<answer>Title {i}</answer>"}]
    return {"id": f"t{i}", "task": {"id": f"t{i}", "question": f"Which article {i}?", "answer": f"Title {i}"},
            "messages": messages, "reward": float(correct), "is_correct": correct, "termination": "answer",
            "num_tool_calls": 0, "policy": "p"}


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_eval_folder_report_shows_results_and_trajectories(tmp_path, capsys):
    folder = tmp_path / "eval"
    folder.mkdir()
    (folder / "summary.json").write_text(json.dumps({"sft": {"pass@1": 0.5, "num_tasks": 2, "k": 1,
                                                             "mean_tool_calls": 1.0,
                                                             "terminations": {"answer": 2}}}))
    _jsonl(folder / "sft.trajectories.jsonl", [_traj(1, True), _traj(2, False)])
    assert main(["report", str(folder)]) == 0
    page = (folder / "report.html").read_text()
    assert "websailor-gym evaluation" in page and "Results" in page and "Which article 2?" in page
    assert "compact observations" not in page and "?" not in page.split("<h1>")[1].split("</h1>")[0]
    assert capsys.readouterr().out.strip().endswith("report.html")


def test_training_folders_report_curves_and_rollouts(tmp_path):
    sft = tmp_path / "sft"
    _jsonl(sft / "metrics.jsonl", [{"step": s, "loss/sft": 2.0 / s} for s in (1, 2, 3)])
    (sft / "summary.json").write_text(json.dumps({"steps": 3, "final_loss": 0.67, "filters": {"kept": 4, "read": 5},
                                                  "examples": 4, "parameters": 100, "trainable": 20}))
    assert main(["report", str(sft)]) == 0
    page = (sft / "report.html").read_text()
    assert "websailor-gym SFT" in page and "SFT learning curves" in page and "0.67" in page and "data:image/png" in page
    grpo = tmp_path / "grpo"
    _jsonl(grpo / "metrics.jsonl", [{"step": s, "reward/mean": 0.1 * s, "groups/groups": 2, "groups/all_equal": 1}
                                    for s in (1, 2)])
    for step in (1, 2, 10):
        _jsonl(grpo / "rollouts" / f"step-{step}.jsonl", [dict(_traj(step, step > 1), step=step, group=0, sample=0)])
    assert main(["report", str(grpo)]) == 0
    page = (grpo / "report.html").read_text()
    assert "websailor-gym GRPO" in page and "GRPO step 10" in page and "Which article 10?" in page
    assert "rollouts/step-2.jsonl" in page and "steps 1-10" in page


def test_a_folder_with_nothing_known_is_one_line(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hello")
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nothing to report" in err and not (tmp_path / "report.html").exists()
