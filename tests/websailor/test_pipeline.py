"""``websailor pipeline`` end to end on the default simulator (one small real run, shared), and
what it does with a run directory that already holds a run: refuse, resume, overwrite."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import fields
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.websailor.conftest import copy_run, small_run_argv
from websailor import pipeline
from websailor.cli import main
from websailor.pipeline import RUN_FILE, STAGES

POLICIES = ("random", "heuristic", "fewshot", "sft", "sft-greedy", "grpo", "grpo-greedy")
HELD = 5  # 2 + 2 title lookups, 1 synthesized task


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _state(run_dir: Path) -> dict:
    return json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))


def _sampled_ids(trajectories: Path) -> list[tuple[str, list[int]]]:
    return sorted((row["id"], row["token_ids"]) for row in _jsonl(trajectories))


def _mtimes(run_dir: Path) -> dict[str, int]:
    return {str(p.relative_to(run_dir)): p.stat().st_mtime_ns for p in sorted(run_dir.rglob("*")) if p.is_file()}


# ----------------------------------------------------------------------------- a finished run


def test_run_directory_holds_every_stage_output(small_run):
    for name in ("run.json", "report.html", "tasks/all.jsonl", "tasks/train.jsonl", "tasks/heldout.jsonl",
                 "trajectories/oracle.jsonl", "trajectories/gold.jsonl", "eval/summary.json",
                 "sft/metrics.jsonl", "sft/model/config.json", "grpo/metrics.jsonl", "grpo/model/config.json",
                 "grpo/selection.json"):
        assert (small_run / name).is_file(), name
    every = _jsonl(small_run / "tasks" / "all.jsonl")
    train, held = _jsonl(small_run / "tasks" / "train.jsonl"), _jsonl(small_run / "tasks" / "heldout.jsonl")
    assert len(every) == 16 and len(train) + len(held) == 16 and len(held) == HELD
    assert {t["id"] for t in train}.isdisjoint({t["id"] for t in held})
    assert sorted(t["level"] for t in held) == ["lookup-description"] * 2 + ["lookup-lead"] * 2 + ["sailorfog"]
    gold = _jsonl(small_run / "trajectories" / "gold.jsonl")
    assert gold and all(g["is_correct"] and g["task"]["id"] in {t["id"] for t in train} for g in gold)
    summary = json.loads((small_run / "eval" / "summary.json").read_text())
    assert sorted(summary) == sorted(POLICIES)
    for name in POLICIES:
        rows = _jsonl(small_run / "eval" / f"{name}.jsonl")
        trajectories = _jsonl(small_run / "eval" / f"{name}.trajectories.jsonl")
        k = 2 if name in ("sft", "grpo") else 1  # --eval-samples: the trained models' sampled evaluations
        assert len(rows) == HELD and len(trajectories) == k * HELD, name
        assert all(r["samples"] == k for r in rows) and [t["task"]["id"] for t in trajectories[::k]] == \
            [r["id"] for r in rows]
        s = summary[name]
        assert s["num_tasks"] == HELD and sum(s["terminations"].values()) == k * HELD and s["k"] == k
        assert all(t["policy"] == name for t in trajectories)
        lo, hi = s["success_ci95"]
        assert 0 <= lo <= s["success"] <= hi <= 1 and 0 <= s["well_formed_turns"] <= 1
        assert sum(v["episodes"] for v in s["per_level"].values()) == k * HELD
    # Each policy is labelled with its own backend and model.
    assert [summary[n]["policy"] for n in POLICIES] == ["random", "heuristic"] + ["transformers"] * 5
    assert summary["sft-greedy"]["temperature"] == 0.0 and summary["sft"]["temperature"] == 0.7
    assert summary["fewshot"]["model"].startswith("tiny") and summary["grpo"]["model"].endswith("+ grpo")
    # The scripted heuristic finds something on the simulator; it is the floor trained agents must beat.
    assert summary["heuristic"]["mean_tool_calls"] > 0
    assert len(_jsonl(small_run / "grpo" / "metrics.jsonl")) == 1
    report = (small_run / "report.html").read_text()
    assert "sft, grpo: sampled at temperature 0.7, top-p 1, 2 samples per task" in report


def test_run_json_records_each_stage(small_run):
    state = _state(small_run)
    assert state["kind"] == pipeline.RUN_KIND
    assert state["finished"] is True and state["finished_at"]
    assert list(state["stages"]) == list(STAGES)
    for name, stage in state["stages"].items():
        assert stage["status"] == "done" and stage["seconds"] > 0, name
    assert state["config"]["lookup_tasks"] == 12 and state["config"]["grpo_steps"] == 1
    assert state["stages"]["tasks"]["result"]["heldout"] == HELD
    grpo = state["stages"]["grpo"]["result"]
    assert grpo["steps"] == 1 and grpo["signal_steps"] + grpo["no_signal_steps"] == 1
    assert set(grpo["probe_success"]) == {"lookup-description", "lookup-lead", "sailorfog"}
    # A probe that sees no success anywhere tries fresh tasks before it falls back to equal shares.
    from websailor.stages import PROBE_ROUNDS
    assert 1 <= grpo["probe_rounds"] <= PROBE_ROUNDS and grpo["pool_tasks"] >= 2 and grpo["groups_drawn"] >= 0
    if not any(grpo["probe_success"].values()):
        assert grpo["probe_rounds"] == PROBE_ROUNDS and "no success" in grpo["probe_fallback"]
    else:
        assert grpo["probe_fallback"] is None
    assert set(state["stages"]["eval"]["result"]) == {"sft", "grpo", "sft-greedy", "grpo-greedy"}


def test_summary_prints_intervals_and_grpo_signal(small_run, capsys):
    pipeline.print_summary(small_run, _state(small_run))
    out = capsys.readouterr().out
    assert "95% interval" in out and "well-formed" in out and "success per level" in out
    assert "grpo: 1 steps" in out and "with signal" in out and "groups drawn from a pool of" in out
    assert "sft-greedy, grpo-greedy: greedy" in out and "sft, grpo: sampled at temperature 0.7, top-p 1, 2 samples" in out
    assert "sft - fewshot: success" in out and "paired 95% interval" in out and "held-out tasks (" in out
    assert "grpo - sft-greedy: success" in out and "grpo-greedy - sft-greedy: success" in out
    for name in POLICIES:
        assert f"\n{name} " in out, name
    assert " 0.0s" not in out.split("stages:")[1]  # every stage that ran shows its time


class _Resources(HTMLParser):
    """Every URL-valued attribute, every tag and the text of <style> blocks."""

    URL_ATTRS = {"src", "href", "action", "srcset", "poster", "data", "formaction", "background", "xlink:href"}

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[tuple[str, str, str]] = []
        self.tags: dict[str, int] = {}
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        self._in_style = tag == "style"
        for key, value in attrs:
            if key in self.URL_ATTRS and value is not None:
                self.urls.append((tag, key, value))

    def handle_endtag(self, tag):
        self._in_style = False if tag == "style" else self._in_style

    def handle_data(self, data):
        if self._in_style:
            self.styles.append(data)


def test_report_is_self_contained_and_shows_the_run(small_run):
    page = (small_run / "report.html").read_text(encoding="utf-8")
    parser = _Resources()
    parser.feed(page)
    # No resource from anywhere: no absolute or protocol-relative URL in any attribute, no CSS import.
    remote = [u for u in parser.urls if re.match(r"\s*(https?:)?//", u[2], re.I)]
    assert remote == []
    assert not re.search(r"@import|url\(\s*['\"]?\s*(https?:)?//", "".join(parser.styles), re.I)
    images = [value for tag, key, value in parser.urls if tag == "img" and key == "src"]
    assert images and all(src.startswith("data:image/png;base64,") for src in images)
    assert len(images) >= 4  # learning curves (SFT, GRPO), synthesis statistics, subgraphs
    for heading in ("Run", "Results", "Learning curves", "Synthesized tasks", "Trajectories", "Configuration"):
        assert f"<h2>{heading}</h2>" in page, heading
    for name in POLICIES:
        assert f"<td>{name}</td>" in page, name
    assert "reward/mean" in page and "loss/sft" in page and "grad/norm" in page and "policy/entropy" in page
    assert "95% interval" in page and "well-formed turns" in page and "Success per level" in page
    assert "pass@1" not in page  # k = 1: success is pass@1; pass@k columns only for k > 1
    assert "websailor/WikiSim-v0" in page and "could not be built" not in page
    assert 'id="task-picker"' in page and parser.tags.get("details", 0) >= 1
    held = _jsonl(small_run / "tasks" / "heldout.jsonl")
    assert any(t["question"][:40].replace("&", "&amp;").replace('"', "&quot;") in page for t in held)


# ----------------------------------------------------------------------------- an existing run


def test_a_finished_run_is_refused_without_resume_or_overwrite(small_run, default_wiki, capsys):
    before = _mtimes(small_run)
    code = main(small_run_argv(small_run, default_wiki))
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "finished run" in err and "--resume" in err and "--overwrite" in err
    assert "Traceback" not in err
    assert _mtimes(small_run) == before


def test_resume_and_overwrite_exclude_each_other(small_run, default_wiki, capsys):
    assert main(small_run_argv(small_run, default_wiki, "--resume", "--overwrite")) == 2
    assert "exclude each other" in capsys.readouterr().err


def test_other_settings_in_the_same_run_directory_are_refused(small_run, default_wiki, tmp_path, capsys):
    run = copy_run(small_run, tmp_path / "run")
    assert main(small_run_argv(run, default_wiki, "--resume", "--seed", "1")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "other settings (seed)" in err


def test_overwrite_refuses_a_directory_that_holds_no_run(tmp_path, default_wiki, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    assert main(small_run_argv(folder, default_wiki, "--overwrite")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds no run" in err
    assert (folder / "notes.txt").read_text() == "keep me"


def _recording(monkeypatch, fail: str | None = None) -> list[str]:
    """Record which stages run; ``fail`` names one that raises (an interruption) before any work."""
    calls: list[str] = []
    for name, fn in dict(pipeline.STAGE_FUNCTIONS).items():
        def wrapped(config, run_dir, _name=name, _fn=fn):
            calls.append(_name)
            if _name == fail:
                raise RuntimeError(f"simulated interruption in {_name}")
            return _fn(config, run_dir)
        monkeypatch.setitem(pipeline.STAGE_FUNCTIONS, name, wrapped)
    return calls


def test_an_interrupted_run_resumes_from_its_last_finished_stage(small_run, default_wiki, tmp_path, monkeypatch,
                                                                 capsys):
    run = copy_run(small_run, tmp_path / "run")
    state = _state(run)
    # The run stopped after GRPO: evaluation and report never finished.
    for name in ("eval", "report"):
        del state["stages"][name]
    state["finished"] = False
    del state["finished_at"]
    (run / RUN_FILE).write_text(json.dumps(state))
    (run / "report.html").unlink()
    summary = json.loads((run / "eval" / "summary.json").read_text())
    (run / "eval" / "summary.json").write_text(json.dumps({k: summary[k] for k in ("random", "heuristic",
                                                                                  "fewshot")}))
    sampled = {name: _sampled_ids(run / "eval" / f"{name}.trajectories.jsonl") for name in ("sft", "grpo")}
    for name in ("sft", "grpo"):
        (run / "eval" / f"{name}.jsonl").unlink()
        (run / "eval" / f"{name}.trajectories.jsonl").unlink()
    earlier = {k: v for k, v in _mtimes(run).items() if not k.startswith("eval/") and k != RUN_FILE}

    # Interrupted again, in evaluation: run.json still says where it stands.
    calls = _recording(monkeypatch, fail="eval")
    with pytest.raises(RuntimeError, match="simulated interruption"):
        main(small_run_argv(run, default_wiki))
    assert calls == ["eval"]
    stopped = _state(run)
    assert [k for k, v in stopped["stages"].items() if v["status"] == "done"] == \
        ["simulator", "tasks", "baselines", "fewshot", "sft", "grpo"]
    assert stopped["stages"]["eval"]["status"] == "failed"
    assert "simulated interruption" in stopped["stages"]["eval"]["error"]
    assert stopped["finished"] is False

    # Resumed (an unfinished run needs no flag): only evaluation and the report run.
    monkeypatch.undo()
    calls = _recording(monkeypatch)
    assert main(small_run_argv(run, default_wiki)) == 0
    assert calls == ["eval", "report"]
    after = _state(run)
    assert after["finished"] is True and list(after["stages"]) == list(STAGES)
    assert {k: v for k, v in _mtimes(run).items() if k in earlier} == earlier  # nothing earlier rewritten
    assert sorted(json.loads((run / "eval" / "summary.json").read_text())) == sorted(POLICIES)
    # The evaluation played again samples the same tokens: its batches do not depend on tool-call timing.
    assert {name: _sampled_ids(run / "eval" / f"{name}.trajectories.jsonl") for name in sampled} == sampled
    assert "run:" in capsys.readouterr().out


def test_resume_of_a_finished_run_only_rebuilds_the_report(small_run, default_wiki, tmp_path, monkeypatch):
    run = copy_run(small_run, tmp_path / "run")
    before = _state(run)
    calls = _recording(monkeypatch)
    assert main(small_run_argv(run, default_wiki, "--resume")) == 0
    assert calls == ["report"]
    after = _state(run)
    assert {k: v for k, v in after["stages"].items() if k != "report"} == \
        {k: v for k, v in before["stages"].items() if k != "report"}


def test_overwrite_starts_over(small_run, default_wiki, tmp_path, monkeypatch):
    run = copy_run(small_run, tmp_path / "run")
    old_started = _state(run)["started_at"]
    (run / "eval" / "stale.txt").write_text("from the old run")
    # Stop the new run in its first stage: enough to see it started from scratch in a clean directory.
    calls = _recording(monkeypatch, fail="simulator")
    with pytest.raises(RuntimeError):
        main(small_run_argv(run, default_wiki, "--overwrite"))
    assert calls == ["simulator"]
    assert sorted(p.name for p in run.iterdir()) == [RUN_FILE]
    state = _state(run)
    assert list(state["stages"]) == ["simulator"] and state["stages"]["simulator"]["status"] == "failed"
    assert state["finished"] is False
    assert state["started_at"] >= old_started


def test_overwrite_refuses_a_run_json_of_another_tool_before_deleting_anything(tmp_path, default_wiki, capsys):
    folder = tmp_path / "thesis"
    (folder / "src").mkdir(parents=True)
    (folder / RUN_FILE).write_text(json.dumps({"name": "my-other-tool"}))
    (folder / "thesis.tex").write_text("\\documentclass{article}")
    (folder / "src" / "main.c").write_text("int main(void) { return 0; }")
    before = _mtimes(folder)
    assert main(small_run_argv(folder, default_wiki, "--overwrite")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "will not delete" in err and "not a websailor pipeline run record" in err
    assert _mtimes(folder) == before and (folder / "thesis.tex").read_text() == "\\documentclass{article}"


def test_overwrite_refuses_a_run_folder_that_also_holds_other_files(small_run, default_wiki, tmp_path, capsys):
    run = copy_run(small_run, tmp_path / "run")
    (run / "thesis.tex").write_text("mine")
    assert main(small_run_argv(run, default_wiki, "--overwrite")) == 2
    err = capsys.readouterr().err
    assert "will not delete" in err and "thesis.tex" in err
    assert (run / "thesis.tex").read_text() == "mine" and (run / "sft" / "model" / "config.json").is_file()


def test_resume_in_a_new_directory_starts_a_run(tmp_path, default_wiki, monkeypatch):
    # The README's first command passes --resume so that running it again does no harm; the first time,
    # there is nothing to resume and the run starts.
    calls = _recording(monkeypatch, fail="simulator")
    with pytest.raises(RuntimeError):
        main(small_run_argv(tmp_path / "new", default_wiki, "--resume"))
    assert calls == ["simulator"]
    assert _state(tmp_path / "new")["stages"]["simulator"]["status"] == "failed"


def test_a_folder_that_holds_something_else_is_refused(tmp_path, default_wiki, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    assert main(small_run_argv(folder, default_wiki)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not empty and holds no run" in err
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


def test_an_unreadable_run_file_is_a_clear_error(tmp_path, default_wiki, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / RUN_FILE).write_text("{not json")
    assert main(small_run_argv(run, default_wiki)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not valid JSON" in err and "--overwrite" in err


def test_report_command_rebuilds_the_page_from_the_run_files(small_run, tmp_path, capsys):
    run = copy_run(small_run, tmp_path / "run")
    (run / "report.html").unlink()
    assert main(["report", str(run)]) == 0
    assert capsys.readouterr().out.strip() == str(run / "report.html")
    page = (run / "report.html").read_text(encoding="utf-8")
    assert "<h2>Trajectories</h2>" in page and "<td>heuristic</td>" in page
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "is not a run directory" in capsys.readouterr().err


def test_evaluations_in_worker_processes_equal_those_played_here(small_run, tmp_path):
    """The eval stage's models played in two processes at once: the same per-task rows as one after
    another, the summary in the jobs' order (not the order they finished in), bad worker counts refused."""
    from websailor.stages import EvalJob, evaluate_models, read_jsonl

    config = pipeline.PipelineConfig(**{k: v for k, v in _state(small_run)["config"].items()
                                        if k in {f.name for f in fields(pipeline.PipelineConfig)}},
                                     out=str(tmp_path), progress=False)
    held = read_jsonl(small_run / "tasks" / "heldout.jsonl")
    jobs = [EvalJob("a", str(small_run / "grpo" / "model"), held, samples=2),
            EvalJob("b", str(small_run / "sft" / "model"), held[:2], temperature=0.0)]
    for workers, where in ((2, tmp_path / "two"), (1, tmp_path / "one")):
        (where / "tasks").mkdir(parents=True)
        shutil.copy(small_run / "tasks" / "heldout.jsonl", where / "tasks")
        evaluate_models(config, where, jobs, workers)
    for name in ("a", "b"):
        assert read_jsonl(tmp_path / "two" / "eval" / f"{name}.jsonl") == read_jsonl(tmp_path / "one" / "eval" / f"{name}.jsonl")
    assert list(json.loads((tmp_path / "two" / "eval" / "summary.json").read_text())) == ["a", "b"]
    with pytest.raises(ValueError, match="--workers must be >= 0, got -1"):
        pipeline.PipelineConfig(out="x", workers=-1)
