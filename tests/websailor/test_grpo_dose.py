"""benchmarks/grpo_dose.py: the smoke run's JSON line, its paired fields per dose and level, the figure;
bad step lists are one-line errors (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

PAIRED = {"difference", "low", "high", "tasks", "verdict"}


@pytest.fixture(scope="module")
def smoke(default_wiki: Path, tmp_path_factory: pytest.TempPathFactory):
    from benchmarks.grpo_dose import main

    out = tmp_path_factory.mktemp("grpo_dose")
    result = main(["--smoke", "--wiki-dir", str(default_wiki), "--out-dir", str(out), "--steps", "0,1,2",
                   "--samples", "2", "--control-steps", "1", "--no-progress", "--jobs", "2"])
    return out, result


def test_smoke_run_reports_every_dose_paired_against_sft_per_level(smoke):
    out, result = smoke
    assert result["benchmark"] == "grpo_dose" and result["mode"] == "smoke" and result["samples"] == 2
    assert [d["steps"] for d in result["doses"]] == [0, 1, 2]
    levels = set(result["heldout_per_level"])
    assert levels and levels <= {"lookup-description", "lookup-lead", "sailorfog"}
    for dose in result["doses"]:
        for key in ("vs_sft", "vs_sft_greedy", "greedy_vs_sft_greedy"):
            assert set(dose[key]) == PAIRED and dose[key]["tasks"] == result["heldout_tasks"]
            assert dose[key]["low"] <= dose[key]["difference"] <= dose[key]["high"]
        assert 0 <= dose["sampled"] <= 1 and 0 <= dose["greedy"] <= 1
        assert set(dose["per_level"]) == levels
        for level, row in dose["per_level"].items():
            assert row["tasks"] == result["heldout_per_level"][level]
            assert set(row["vs_sft"]) == PAIRED and set(row["greedy_vs_sft_greedy"]) == PAIRED
    assert result["doses"][0]["vs_sft"]["difference"] == 0  # step 0 is the SFT model itself
    controls = result["controls"]
    assert {"sft_sampled", "sft_greedy", "heuristic", "sft_more"} <= set(controls)
    assert controls["sft_more"]["steps"] == 1 and set(controls["sft_more"]["largest_dose_vs"]) == PAIRED
    assert Path(result["figure"]).is_file() and Path(result["figure"]).stat().st_size > 1000
    assert (out / "dose" / "models" / "step-2" / "config.json").is_file()
    pool = result["grpo"]["pool"]
    assert pool["tasks"] > 0 and "note" not in pool  # no step drew from a dry pool
    assert pool["sized_for_steps"] == pool["tasks"] // (2 * result["grpo"]["tasks_per_step"])


def test_steps_drawn_from_a_dry_pool_are_said(tmp_path):
    from benchmarks.grpo_dose import grpo_pool

    assert grpo_pool(tmp_path, 4, 8) == {}  # no probe made yet
    (tmp_path / "grpo").mkdir()
    (tmp_path / "grpo" / "selection.json").write_text(json.dumps({"tasks": [{"id": str(i)} for i in range(128)],
                                                                  "wanted": 128}))
    assert grpo_pool(tmp_path, 4, 16) == {"tasks": 128, "sized_for_steps": 16}
    # the pool's active tasks after each step, as the trainer logs them: 4 left after step 24
    rows = [{"step": k, "data/active_tasks": max(4, 128 - 5 * k), "data/fresh_used": 128} for k in range(1, 35)]
    # extended before step 35: 87 fresh tasks joined, so step 35 drew from them
    rows += [{"step": k, "data/active_tasks": 80, "data/fresh_used": 215} for k in range(35, 40)]
    (tmp_path / "grpo" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert "note" not in grpo_pool(tmp_path, 4, 16)
    pool = grpo_pool(tmp_path, 4, 32)
    assert pool["dry_steps"] == [26, 32, 7]
    assert pool["note"] == "7 steps between 26 and 32 drew from a dry pool of at most 4 tasks, the same ones each step"
    assert grpo_pool(tmp_path, 4, 39)["dry_steps"] == [26, 34, 9]


def test_an_extended_dose_run_gets_fresh_tasks_of_the_probed_levels(tmp_path):
    from benchmarks.grpo_dose import extend_pool, grpo_pool
    from websailor.pipeline import PipelineConfig
    from websailor.stages import write_jsonl

    level = lambda i: "lookup-lead" if i % 2 else "lookup-description"  # noqa: E731
    train = [{"id": f"t{i}", "question": "q", "answer": "a", "level": level(i)} for i in range(60)]
    write_jsonl(tmp_path / "tasks" / "train.jsonl", train)
    write_jsonl(tmp_path / "trajectories" / "gold.jsonl", [{"task": {"id": f"t{i}"}} for i in range(10)])
    config = PipelineConfig(out=str(tmp_path / "run"), model="tiny", lookup_tasks=60, grpo_tasks_per_step=2,
                            probe=2, progress=False)
    pool = [t for t in train[10:] if t["level"] == "lookup-lead"][2:6]  # after the probe's first 2 of the level
    (tmp_path / "grpo").mkdir()
    selection = {"tasks": pool, "wanted": 4, "probe_rounds": 1,
                 "probe_success": {"lookup-description": 0.0, "lookup-lead": 0.5, "sailorfog": 0.0}}
    (tmp_path / "grpo" / "selection.json").write_text(json.dumps(selection))
    assert extend_pool(config, tmp_path, 1) is None  # enough for 1 step: 2 per group drawn
    added = extend_pool(config, tmp_path, 4)
    assert added == {"to_steps": 4, "wanted": 12, "added": 12, "per_level": {"lookup-lead": 12}}
    tasks = json.loads((tmp_path / "grpo" / "selection.json").read_text())["tasks"]
    ids = [t["id"] for t in tasks]
    assert len(ids) == len(set(ids)) == 16 and ids[:4] == [t["id"] for t in pool]
    probed = {"t11", "t13", "t10", "t12"}  # each level's first 2 unseen tasks
    assert not probed & set(ids) and all(int(i[1:]) >= 10 for i in ids)  # none SFT saw, none probed
    assert grpo_pool(tmp_path, 2, 4)["sized_for_steps"] == 4
    # past what is left: the rest of the level's tasks, and the shortfall said
    added = extend_pool(config, tmp_path, 8)
    assert added["wanted"] == 16 and added["added"] == 7  # 25 lead tasks unseen, 2 probed, 16 taken
    assert grpo_pool(tmp_path, 2, 8)["extended"][-1] == added
    # none of the pool's level left: nothing added, nothing written (descriptions, which the probe left out,
    # stay out)
    before = (tmp_path / "grpo" / "selection.json").read_text()
    assert extend_pool(config, tmp_path, 16)["added"] == 0
    assert (tmp_path / "grpo" / "selection.json").read_text() == before



@pytest.mark.parametrize("body", [b'{"tasks": [', b"\xff\xfe not utf-8", b"[1, 2]", b'{"tasks": 3}'])
def test_a_damaged_pool_file_is_one_line_error(tmp_path, body):
    from benchmarks.grpo_dose import extend_pool, grpo_pool, read_selection

    (tmp_path / "grpo").mkdir()
    (tmp_path / "grpo" / "selection.json").write_bytes(body)
    for call in (lambda: read_selection(tmp_path), lambda: grpo_pool(tmp_path, 4, 8),
                 lambda: extend_pool(None, tmp_path, 8)):
        with pytest.raises(ValueError, match="is not the GRPO pool this benchmark writes") as exc:
            call()
        assert "\n" not in str(exc.value)


def test_more_threads_than_cores_is_one_line_error(capsys):
    import os

    from benchmarks.grpo_dose import main

    with pytest.raises(SystemExit) as exc:
        main(["--smoke", f"--threads={(os.cpu_count() or 1) + 1}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and "--threads must be at most" in err[0]

def test_json_line_is_printed_last(default_wiki, tmp_path, capsys, smoke):
    from benchmarks.grpo_dose import main

    out, first = smoke
    # A second run over the same folder reuses every trained dose and evaluation.
    main(["--smoke", "--wiki-dir", str(default_wiki), "--out-dir", str(out), "--steps", "0,1,2", "--samples", "2",
          "--control-steps", "1", "--no-progress"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    again = json.loads(last)
    assert again["benchmark"] == "grpo_dose" and again["doses"] == first["doses"]


def test_parallel_evaluations_equal_one_at_a_time(default_wiki, smoke):
    from benchmarks.grpo_dose import main

    out, first = smoke  # evaluated in two worker processes, which merged the summary one at a time
    summary = json.loads((out / "dose" / "eval" / "summary.json").read_text())
    assert {f"{n}-{m}" for n in ("step-0", "step-1", "step-2", "sft-more-1") for m in ("sampled", "greedy")} <= set(summary)
    for cached in (out / "dose" / "eval").glob("step-*"):
        cached.unlink()
    again = main(["--smoke", "--wiki-dir", str(default_wiki), "--out-dir", str(out), "--steps", "0,1,2",
                  "--samples", "2", "--control-steps", "1", "--no-progress", "--jobs", "1"])
    assert again["doses"] == first["doses"]


def test_a_longer_control_is_trained_apart_from_a_shorter_one(default_wiki, smoke):
    from benchmarks.grpo_dose import main

    out, first = smoke  # a dose run extended (here: its control set longer) never reuses the shorter control
    again = main(["--smoke", "--wiki-dir", str(default_wiki), "--out-dir", str(out), "--steps", "0,1,2",
                  "--samples", "2", "--control-steps", "2", "--no-progress", "--jobs", "1"])
    assert again["controls"]["sft_more"]["steps"] == 2 and again["controls"]["sft_more"]["name"] == "sft+2"
    assert (out / "dose" / "sft-more-1" / "model" / "config.json").is_file()
    assert (out / "dose" / "sft-more-2" / "model" / "config.json").is_file()
    assert again["doses"] == first["doses"]


@pytest.mark.parametrize("flag", ["--jobs=0", "--samples=0", "--threads=0"])
def test_bad_counts_are_one_line_errors(flag, capsys):
    from benchmarks.grpo_dose import main

    with pytest.raises(SystemExit) as exc:
        main(["--smoke", flag])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("grpo_dose: error: --") and ">= 1" in err[0]


@pytest.mark.parametrize("steps", ["0,5,3", "0,2,2", "a,b", "-1,2", ","])
def test_bad_step_lists_are_one_line_errors(steps, capsys):
    from benchmarks.grpo_dose import main

    with pytest.raises(SystemExit) as exc:
        main(["--smoke", f"--steps={steps}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("grpo_dose: error: --steps")


def test_extra_heldout_adds_unseen_lookups_to_every_comparison(default_wiki, smoke):
    from benchmarks.grpo_dose import main
    from websailor.stages import read_jsonl

    out, first = smoke
    for cached in (out / "dose" / "eval").glob("step-2-*"):  # step 2 is evaluated afresh, with the extra tasks
        cached.unlink()
    result = main(["--smoke", "--wiki-dir", str(default_wiki), "--out-dir", str(out), "--steps", "0,1,2",
                   "--samples", "2", "--control-steps", "1", "--no-progress", "--extra-heldout", "4"])
    assert result["extra_heldout"] == 4 and result["heldout_tasks"] == first["heldout_tasks"] + 4
    extra = read_jsonl(out / "dose" / "extra-heldout-4.jsonl")
    used = {t["answer"] for t in read_jsonl(out / "dose" / "tasks" / "all.jsonl")}
    assert len(extra) == 4 and not used & {t["answer"] for t in extra}
    assert {t["level"] for t in extra} == {"lookup-description", "lookup-lead"}
    for dose in result["doses"]:
        assert dose["vs_sft"]["tasks"] == result["heldout_tasks"]
    assert result["controls"]["sft_more"]["largest_dose_vs"]["tasks"] == result["heldout_tasks"]
    assert (out / "dose" / "eval" / "step-2-extra4-sampled.jsonl").is_file()
    # a dose first evaluated here plays the extra tasks once, under their own name
    own = read_jsonl(out / "dose" / "eval" / "step-2-sampled.jsonl")
    assert own and not [r for r in own if str(r["id"]).startswith("extra-")]
    assert len(read_jsonl(out / "dose" / "eval" / "heuristic-extra4.jsonl")) == 4  # the heuristic covers them too


def test_sft_first_starts_grpo_and_the_control_from_a_further_trained_sft_model(default_wiki, tmp_path, capsys):
    from benchmarks.grpo_dose import main

    args = ["--smoke", "--wiki-dir", str(default_wiki), "--out-dir", str(tmp_path), "--steps", "0,1",
            "--samples", "1", "--control-steps", "1", "--no-progress", "--jobs", "1"]
    result = main([*args, "--sft-first", "2"])
    work = tmp_path / "dose"
    assert result["sft_first"] == 2 and (work / "sft").resolve() == (work / "sft-start").resolve()
    assert (work / "sft-start" / "model" / "config.json").is_file()
    steps = [m["step"] for m in map(json.loads, (work / "sft-start" / "metrics.jsonl").read_text().splitlines())
             if "step" in m]
    assert steps and max(steps) == 2  # two SFT steps from the run's SFT model
    # The same folder with another start is refused, not mixed with the cached doses.
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("grpo_dose: error:") and "use another --out-dir" in err[-1]


def test_set_changes_grpo_settings_of_an_existing_run_and_a_folder_keeps_its_settings(default_wiki, smoke,
                                                                                      tmp_path, capsys):
    from benchmarks.grpo_dose import main
    from trainers.checkpoint_io import latest_checkpoint, load_state

    out, _ = smoke
    args = ["--run-dir", str(out / "run-smoke"), "--wiki-dir", str(default_wiki), "--out-dir", str(tmp_path),
            "--steps", "0,1", "--samples", "1", "--control-steps", "0", "--no-progress", "--jobs", "1"]
    result = main([*args, "--set", "grpo_kl_beta=0.1"])
    assert result["grpo"]["kl_beta"] == 0.1
    state = load_state(latest_checkpoint(tmp_path / "dose" / "grpo") / "trainer_state.pt")
    assert state["config"]["kl_beta"] == 0.1 and "ref_model" in state  # the trainer kept the SFT model to pull to
    # The folder's doses were trained with beta 0.1: another beta is refused, not mixed with them.
    with pytest.raises(SystemExit) as exc:
        main([*args, "--set", "grpo_kl_beta=0.2"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("grpo_dose: error:") and "grpo_kl_beta 0.1 -> 0.2" in err[-1]
    # A setting of the run's earlier stages cannot change with --run-dir.
    with pytest.raises(SystemExit) as exc:
        main([*args, "--set", "sft_steps=3"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--set sft_steps would change the stages of --run-dir" in err[0]


def test_a_damaged_settings_file_is_a_one_line_refusal(tmp_path):
    from benchmarks.grpo_dose import SETTINGS_FILE, grpo_settings
    from websailor.pipeline import PipelineConfig

    config = PipelineConfig(out=str(tmp_path / "run"), model="tiny")
    assert grpo_settings(config, tmp_path)["grpo_kl_beta"] == 0.0  # written once, whole
    assert grpo_settings(config, tmp_path) == grpo_settings(config, tmp_path)
    for damaged in (b'{"grpo_lr": 0.0', b"\xff\xfe", b"[1, 2]"):
        (tmp_path / SETTINGS_FILE).write_bytes(damaged)
        with pytest.raises(ValueError, match="is not the JSON this benchmark writes; use another --out-dir"):
            grpo_settings(config, tmp_path)
