"""report.html from damaged or hostile run files: it builds, shows what it can, and stays small."""

from __future__ import annotations

import json
from pathlib import Path

from websailor.report import build_report, topology_class


def _write(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value if isinstance(value, str) else json.dumps(value), encoding="utf-8")


def _jsonl(path: Path, records) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


MATH_TITLES = ["$x^$", "$\\foo$", "a $b_{", "Plain"]


def _task(i: int) -> dict:
    nodes = [{"title": t} for t in MATH_TITLES]
    edges = [{"source": MATH_TITLES[k], "target": MATH_TITLES[(k + 1) % 4]} for k in range(4)]
    return {"id": f"t{i}", "question": f"Which $x^$ is {i}?", "answer": "$\\foo$", "level": "sailorfog",
            "wl_hash": "$x^$abcdef", "uncertainty": ["$\\bar$"], "difficulty": {"oracle_tool_calls": "three"},
            "subgraph": {"nodes": nodes, "edges": edges, "target": "$x^$"}}


def test_report_builds_on_math_titles_null_rewards_and_wrong_types(tmp_path):
    run = tmp_path / "run"
    _write(run / "run.json", {"config": ["not", "a", "dict"], "stages": {"sft": "done", "grpo": {"seconds": "fast"},
                                                                       "report": {"seconds": None}},
                              "finished_at": 12})
    _jsonl(run / "tasks" / "heldout.jsonl", [_task(0), _task(1)])
    _write(run / "eval" / "summary.json", {"sft": {"success": "high", "success_ci95": [0.1], "terminations": [1],
                                                   "per_level": {"sailorfog": {"success": None}}, "k": "3"},
                                           "grpo": None, "$x^$": {"success": 0.5, "success_ci95": [0.2, 0.8]}})
    _jsonl(run / "eval" / "sft.trajectories.jsonl", [
        {"task": _task(0), "reward": None, "is_correct": None, "messages": [
            {"role": "assistant", "content": "<think>$x^$</think><answer>$\\foo$</answer>"}]},
        {"task": "not a dict", "reward": "high", "messages": "none"},
        {"task": _task(1), "reward": float("nan"), "messages": [{"role": "assistant", "content": None}]},
    ])
    _jsonl(run / "grpo" / "metrics.jsonl", [{"step": 1, "reward/mean": None, "grad/norm": "big"},
                                           {"step": 2, "reward/mean": 0.5, "grad/norm": 1.0, "policy/entropy": 2.0,
                                            "groups/groups": 4, "groups/all_equal": 1}])
    (run / "sft").mkdir()
    (run / "sft" / "metrics.jsonl").write_text('{"step": 1, "loss/sft": null}\nnot json\n[1, 2]\n')

    page = build_report(run).read_text(encoding="utf-8")
    assert "could not be built" not in page
    for heading in ("Results", "Learning curves", "Synthesized tasks", "Trajectories", "Configuration"):
        assert f"<h2>{heading}</h2>" in page, heading
    assert "<td>$x^$</td>" in page and "Which $x^$ is 0?" in page
    assert page.count("data:image/png;base64,") >= 3  # GRPO figure, synthesis statistics, a subgraph


def test_topology_classes_come_from_the_subgraph_not_invented():
    assert topology_class({"question": "a derived lookup"}) is None
    assert topology_class(_task(0)).startswith("4n/4e, 1 cycle(s)")


def test_report_caps_what_it_embeds_and_links_the_trajectory_files(tmp_path, monkeypatch):
    from websailor import report

    monkeypatch.setattr(report, "MAX_VIEWER_CHARS", 300_000)
    run = tmp_path / "run"
    _write(run / "run.json", {"config": {}, "stages": {}})
    big = "x" * 6_000
    records = [{"task": {"id": f"t{i}", "question": f"q{i}"}, "reward": 0.0, "is_correct": False,
                "messages": [m for _ in range(40) for m in ({"role": "assistant", "content": f"<think>{big}</think>"},
                                                           {"role": "user", "content": big})]}
               for i in range(30)]
    for name in ("a", "b"):
        _jsonl(run / "eval" / f"{name}.trajectories.jsonl", records)
    size = 2 * (run / "eval" / "a.trajectories.jsonl").stat().st_size
    page = build_report(run).read_text(encoding="utf-8")
    assert size > 25_000_000 and len(page) < 600_000
    assert 'href="eval/a.trajectories.jsonl"' in page and 'href="eval/b.trajectories.jsonl"' in page
    assert "more left out" in page and "more steps in the trajectory file" in page


def test_report_skips_an_over_long_jsonl_line(tmp_path):
    from websailor.report import read_jsonl

    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"a": "x" * 5000}) + "\n" + json.dumps({"b": 1}) + "\n")
    assert read_jsonl(path, max_line=1000) == [{"b": 1}]
    assert read_jsonl(path, limit=1) == [{"a": "x" * 5000}]
