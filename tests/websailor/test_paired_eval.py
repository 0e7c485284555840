"""benchmarks/paired_eval.py: saved models paired on fresh lookups that no task of the run asks for; the
JSON line, the figure, the cache; bad arguments are one-line errors (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

PAIRED = {"difference", "low", "high", "tasks", "verdict"}


@pytest.fixture(scope="module")
def paired(small_run: Path, tmp_path_factory: pytest.TempPathFactory):
    from benchmarks.paired_eval import main

    out = tmp_path_factory.mktemp("paired_eval")
    argv = ["--run-dir", str(small_run), "--out-dir", str(out), "--model", f"sft={small_run / 'sft' / 'model'}",
            "--model", f"grpo={small_run / 'grpo' / 'model'}", "--tasks", "6", "--samples", "2", "--jobs", "2",
            "--exclude", str(small_run / "tasks" / "heldout.jsonl")]
    return out, argv, main(argv)


def test_fresh_tasks_ask_for_no_page_of_the_run_and_alternate_the_levels(paired, small_run):
    from websailor.stages import read_jsonl

    out, _, result = paired
    fresh = read_jsonl(out / "tasks" / "heldout.jsonl")
    run_pages = {t["answer"] for t in read_jsonl(small_run / "tasks" / "all.jsonl")}
    assert len(fresh) == result["tasks"] == 6
    assert not {t["answer"] for t in fresh} & run_pages
    assert [t["level"] for t in fresh] == ["lookup-description", "lookup-lead"] * 3


def test_every_model_is_paired_against_the_reference_both_ways_and_per_level(paired):
    out, _, result = paired
    assert result["benchmark"] == "paired_eval" and result["reference"] == "sft"
    assert set(result["versus"]) == {"grpo"}
    row = result["versus"]["grpo"]
    for key in ("greedy_vs_greedy", "sampled_vs_sampled", "sampled_vs_greedy"):
        assert set(row[key]) == PAIRED and row[key]["tasks"] == 6
    assert set(row["per_level"]) == {"lookup-description", "lookup-lead"}
    assert row["per_level"]["lookup-lead"]["greedy_vs_greedy"]["tasks"] == 3
    means = result["means"]["grpo"]
    assert row["greedy_vs_greedy"]["difference"] == pytest.approx(means["greedy"] - result["means"]["sft"]["greedy"],
                                                                  abs=1e-3)
    assert 0.0 <= result["heuristic"] <= 1.0
    sampled = [json.loads(line) for line in (out / "eval" / "grpo-sampled.jsonl").read_text().splitlines()]
    assert sum(int(r.get("scored", r.get("samples", 0)) or 0) for r in sampled) == 12  # 6 tasks x 2 samples
    assert (out / "paired_eval.png").stat().st_size > 0


def test_a_rerun_reuses_the_evaluations_and_prints_the_json_line_last(paired, capsys):
    from benchmarks.paired_eval import main

    out, argv, first = paired
    stamps = {p.name: p.stat().st_mtime_ns for p in (out / "eval").glob("*.jsonl")}
    again = main(argv)
    assert {p.name: p.stat().st_mtime_ns for p in (out / "eval").glob("*.jsonl")} == stamps
    assert again["versus"] == first["versus"]
    models = [i for i, a in enumerate(argv) if a == "--model"]
    default = [a for i, a in enumerate(argv) if i not in models and i - 1 not in models]
    assert main(default)["versus"] == first["versus"]  # no --model: the run's sft and grpo models, reused
    assert {p.name: p.stat().st_mtime_ns for p in (out / "eval").glob("*.jsonl")} == stamps
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["benchmark"] == "paired_eval"


def test_a_name_moved_to_another_model_is_refused(paired, small_run, capsys):
    from benchmarks.paired_eval import main

    out, argv, _ = paired
    swapped = [a.replace("grpo=", "x=").replace("sft=", "grpo=").replace("x=", "sft=") for a in argv]
    with pytest.raises(SystemExit) as exc:
        main(swapped)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "give the new folder another name" in err


@pytest.mark.parametrize("change, message", [
    (["--tasks", "5"], "--tasks must be even"),
    (["--reference", "nope"], "--reference 'nope' is not one of"),
    (["--model", "sft=/nonexistent"], "given twice"),
    (["--model", "bad name=/x"], "NAME=FOLDER"),
    (["--model", "other=/nonexistent"], "holds no saved model"),
    (["--exclude", "/nonexistent.jsonl"], "no such task file"),
    (["--samples", "0"], "--samples must be >= 1"),
])
def test_bad_arguments_are_one_line_errors(small_run, tmp_path, capsys, change, message):
    from benchmarks.paired_eval import main

    argv = ["--run-dir", str(small_run), "--out-dir", str(tmp_path / "o"),
            "--model", f"sft={small_run / 'sft' / 'model'}", "--model", f"grpo={small_run / 'grpo' / 'model'}",
            "--jobs", "1", *change]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


def test_one_model_is_not_a_comparison(small_run, tmp_path, capsys):
    from benchmarks.paired_eval import main

    with pytest.raises(SystemExit):
        main(["--run-dir", str(small_run), "--out-dir", str(tmp_path), "--model", f"sft={small_run / 'sft' / 'model'}"])
    assert "at least twice" in capsys.readouterr().err


@pytest.mark.parametrize("body", ["[1,2", '{"sft": 5}', "\udcff"])
def test_a_damaged_names_file_is_a_one_line_refusal(small_run, tmp_path, capsys, body):
    from benchmarks.paired_eval import MODELS_FILE, main

    (tmp_path / MODELS_FILE).write_text(body, encoding="utf-8", errors="surrogateescape")
    with pytest.raises(SystemExit) as exc:
        main(["--run-dir", str(small_run), "--out-dir", str(tmp_path), "--model", f"sft={small_run / 'sft' / 'model'}",
              "--model", f"grpo={small_run / 'grpo' / 'model'}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is damaged" in err, err
    assert not (tmp_path / "tasks").exists()
