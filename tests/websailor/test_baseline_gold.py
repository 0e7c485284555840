"""`websailor env baseline --policy gold` writes the main job's gold trajectories; --compact is its setting."""

from __future__ import annotations

import json

from websailor import recipe


def test_gold_baseline_writes_the_main_jobs_gold_trajectories(default_wiki, tmp_path, capsys):
    from websailor.cli import main

    tasks = recipe.lookup_tasks(str(default_wiki), 6, seed=3)
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    out = tmp_path / "gold.jsonl"
    assert main(["env", "baseline", "--wiki-dir", str(default_wiki), "--tasks", str(task_file), "--policy", "gold",
                 "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert summary["policy"] == "gold" and summary["episodes"] == len(records) == 6
    assert summary["correct"] == sum(r["is_correct"] for r in records) > 0
    expected = {r["task"]["id"]: r for r in recipe.gold_trajectories(str(default_wiki), tasks, limit=6)}
    mine = {r["task"]["id"]: r for r in records if r["is_correct"]}
    assert set(mine) == set(expected)
    for task_id, record in mine.items():
        assert record["messages"] == expected[task_id]["messages"] and record["policy"] == "gold"


def test_compact_flag_is_the_main_jobs_setting(default_wiki, tmp_path):
    from websailor.baseline import BaselineConfig
    from envs.cli import baseline_env_kwargs

    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text(json.dumps({"question": "Which?", "answer": "x"}) + "\n")
    config = BaselineConfig(wiki_dir=str(default_wiki), tasks=str(task_file), compact=True)
    assert baseline_env_kwargs(config) == recipe.compact_env_kwargs(str(default_wiki))
    config = BaselineConfig(wiki_dir=str(default_wiki), tasks=str(task_file))
    assert baseline_env_kwargs(config) == {"wiki_dir": str(default_wiki), "max_tool_calls": 100,
                                           "tools": ["search", "visit", "python"]}
    assert BaselineConfig(wiki_dir=str(default_wiki), tasks=str(task_file), policy="gold").compact
