"""The pass-rate filter and the synthesis report (plots, reference side-by-side)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sailorfog.filter import FilterConfig, filter_by_pass_rate, pass_rates, run_filter
from sailorfog.report import (FUZZY_QUANTITIES, PARTIAL_NAMES, VAGUE_TIME, ReportConfig, count_constraints,
                              question_stats, run_report)

REFERENCE = Path(__file__).resolve().parents[2] / ".." / "shared" / "reference"


def trajectories(results: dict[str, list[bool]]):
    return [{"id": f"{tid}-{k}", "task": {"id": tid}, "is_correct": ok}
            for tid, oks in results.items() for k, ok in enumerate(oks)]


def test_filter_drops_tasks_every_or_no_rollout_solves():
    rates = pass_rates(trajectories({"a": [True, True], "b": [False, False], "c": [True, False], "d": [True]}))
    assert rates == {"a": (2, 2), "b": (2, 0), "c": (2, 1), "d": (1, 1)}
    tasks = [{"id": t, "question": "q", "answer": "x"} for t in "abcde"]
    kept, why = filter_by_pass_rate(tasks, rates, min_rollouts=2)
    assert [t["id"] for t in kept] == ["c"] and kept[0]["pass_rate"] == 0.5
    assert why == {"kept": 1, "all_solved": 1, "none_solved": 1, "unmeasured": 2}
    kept, _ = filter_by_pass_rate(tasks, rates, min_rollouts=2, keep_unmeasured=True)
    assert [t["id"] for t in kept] == ["c", "d", "e"]
    with pytest.raises(ValueError, match="min_rate < max_rate"):
        filter_by_pass_rate(tasks, rates, min_rate=0.5, max_rate=0.5)


def test_filter_command_writes_the_kept_tasks(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": t, "question": "q", "answer": "x"}) + "\n" for t in "abc"))
    trajs = tmp_path / "traj.jsonl"
    trajs.write_text("".join(json.dumps(r) + "\n" for r in trajectories({"a": [1, 1], "b": [0, 1], "c": [0, 0]})))
    out = tmp_path / "kept.jsonl"
    why = run_filter(FilterConfig(str(tasks), [str(trajs)], str(out)))
    assert why["kept"] == 1 and [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["b"]
    with pytest.raises(ValueError, match="file not found"):
        FilterConfig(str(tasks), [str(tmp_path / "missing.jsonl")], str(out))


def test_style_detectors():
    assert VAGUE_TIME.search("in the early 2010s") and VAGUE_TIME.search("the last decade of the 19th century")
    assert PARTIAL_NAMES.search("a person whose surname begins with F") and not PARTIAL_NAMES.search("a river")
    assert FUZZY_QUANTITIES.search("between 120 and 190 people") and FUZZY_QUANTITIES.search("more than 50")
    assert count_constraints("A river. It flows north, which is rare, and it is long?") >= 4
    stats = question_stats(["In the 1990s a city of more than 40 people.", "Whose name begins with Q?"])
    assert stats["share_vague_time"] == 0.5 and stats["share_partial_names"] == 0.5


def record(i: int) -> dict:
    return {"id": str(i), "question": f"In the early 1990s, between {i} and {i + 9} people met. Which is X?",
            "answer": "X", "uncertainty": ["vague_time", "fuzzy_quantities"][: 1 + i % 2], "wl_hash": f"h{i % 3}",
            "target_orbit": i % 2, "hops": 1 + i % 3, "clues": [{}] * 3,
            "subgraph": {"nodes": [{}] * (3 + i % 2)}, "difficulty": {"oracle_tool_calls": 4 + i,
                                                                         "heuristic_solved": i % 4 == 0}}


def test_report_writes_counts_and_plots(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(record(i)) + "\n" for i in range(12)))
    report = run_report(ReportConfig(str(tasks), out_dir=str(tmp_path / "rep"), reference_dir=str(tmp_path)))
    summary = report["summary"]
    assert summary["tasks"] == 12 and summary["topology_classes"] == 3
    assert summary["uncertainty"] == {"vague_time": 12, "fuzzy_quantities": 6} and summary["target_role"] == {"?": 12}
    assert summary["oracle_tool_calls_over_10"] == round(5 / 12, 3)
    for name in report["plots"]:
        assert (tmp_path / "rep" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report["questions"]["ours"]["share_vague_time"] == 1.0
    assert json.loads((tmp_path / "rep" / "summary.json").read_text())["summary"]["tasks"] == 12


@pytest.mark.skipif(not (REFERENCE / "sailorfog_qa_sample.jsonl").is_file(), reason="no ../shared/reference")
def test_report_compares_with_the_released_samples(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(record(i)) + "\n" for i in range(4)))
    report = run_report(ReportConfig(str(tasks), out_dir=str(tmp_path / "rep")))
    sample = report["questions"]["sailorfog_qa_sample"]
    assert sample["questions"] == 20 and sample["words_median"] > 30
    assert 0 < sample["share_vague_time"] < 1
    assert report["questions"]["webshaper_500"]["questions"] == 500
    assert not list(tmp_path.glob("**/sailorfog_qa_sample.jsonl"))  # read in place, never copied
