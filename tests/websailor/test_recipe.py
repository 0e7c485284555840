"""The learning recipe: gold turns, splits per level, intervals, GRPO task selection, and the
learning benchmark's scoring."""

from __future__ import annotations

import json

import pytest

from websailor import recipe


def test_wilson_interval_matches_hand_computed_values():
    lo, hi = recipe.wilson(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)
    assert recipe.wilson(0, 20)[0] == 0.0 and recipe.wilson(0, 20)[1] == pytest.approx(0.1611, abs=1e-4)
    assert recipe.wilson(0, 0) == (0.0, 1.0)


def test_difference_interval_excludes_zero_only_for_a_real_difference():
    lo, hi = recipe.diff_interval(6, 46, 0, 46)  # overlapping Wilson intervals, yet a real difference
    assert recipe.wilson(6, 46)[0] < recipe.wilson(0, 46)[1] and 0 < lo < 0.13 < hi
    lo, hi = recipe.diff_interval(3, 20, 2, 20)
    assert lo < 0 < hi
    assert recipe.better({"success": 6 / 46, "episodes": 46}, {"success": 0.0, "episodes": 46})
    assert not recipe.better({"success": 0.15, "episodes": 20}, {"success": 0.1, "episodes": 20})


def test_separated_needs_disjoint_intervals():
    assert recipe.separated({"success_ci95": [0.5, 0.8]}, {"success_ci95": [0.0, 0.3]})
    assert not recipe.separated({"success_ci95": [0.25, 0.8]}, {"success_ci95": [0.0, 0.3]})


def test_split_by_level_holds_out_the_asked_count_of_each_level():
    tasks = [{"id": f"{lv}{i}", "level": lv} for lv in ("a", "b") for i in range(5)]
    train, held = recipe.split_by_level(tasks, {"a": 2, "b": 1}, seed=0)
    assert sorted(t["level"] for t in held) == ["a", "a", "b"] and len(train) == 7
    assert {t["id"] for t in train}.isdisjoint({t["id"] for t in held})
    assert recipe.split_by_level(tasks, {"a": 2, "b": 1}, seed=0) == (train, held)


def test_quoted_query_copies_the_first_words_of_the_quote():
    q = 'Which Wikipedia article begins with this sentence (its subject replaced by ___): "___ was an ancient ' \
        'city in modern Iraq, on the eastern bank of the Tigris, about 35 km southeast of Baghdad."?'
    assert recipe.quoted_query(q) == "was an ancient city in modern Iraq, on the eastern"


def test_gold_trajectories_are_correct_two_turn_episodes(default_wiki):
    from envs.protocol import parse_turn

    tasks = recipe.lookup_tasks(str(default_wiki), 12, seed=0)
    gold = recipe.gold_trajectories(str(default_wiki), tasks, limit=6)
    assert 3 <= len(gold) <= 6
    for record in gold:
        assert record["is_correct"] and record["num_tool_calls"] == 1 and record["policy"] == "gold"
        turns = [m["content"] for m in record["messages"] if m["role"] == "assistant"]
        assert len(turns) == 2 and all(parse_turn(t).strict for t in turns)
        assert record["messages"][0]["content"] == recipe.COMPACT_SYSTEM_PROMPT
        assert json.dumps(record)  # a plain trajectory record
        title = record["task"]["answer"] if record["task"]["answer"] in turns[1] else None
        assert title and f". [{title}] matches.</think>" in turns[1]  # the thought repeats the hit's line
    # The train split lists tasks level by level; a gold set cut short still holds both lookup levels.
    by_level = sorted(tasks, key=lambda t: t["level"])
    levels = {r["task"]["level"] for r in recipe.gold_trajectories(str(default_wiki), by_level, limit=4)}
    assert levels == {"lookup-description", "lookup-lead"}


def test_gold_trajectories_of_hop_tasks_read_the_answer_from_the_hit_or_the_visit(default_wiki):
    from envs.protocol import parse_turn

    hops = recipe.hop_tasks(str(default_wiki), 40, seed=0)
    assert len(hops) == 40 and {t["level"] for t in hops} == {"lookup-hop"}
    assert recipe.hop_tasks(str(default_wiki), 40, seed=0) == hops
    gold = recipe.gold_trajectories(str(default_wiki), hops, limit=40)
    assert len(gold) >= 36  # the feasibility check searched for the same words and visited the same page
    reads = {"hit": 0, "visit": 0}
    for record in gold:
        task = record["task"]
        reads[task["read"]] += 1
        turns = [m["content"] for m in record["messages"] if m["role"] == "assistant"]
        assert record["is_correct"] and all(parse_turn(t).strict for t in turns)
        assert turns[-1].endswith(f"[{task['via']}] names the {task['type']} {task['answer']}.</think>\n"
                                  f"<answer>{task['answer']}</answer>")
        assert task["answer"] in record["messages"][-2]["content"]  # the last observation shows it
        if task["read"] == "hit":
            assert record["num_tool_calls"] == 1 and turns[1].startswith("<think>Hit ")
        else:
            assert record["num_tool_calls"] == 2 and turns[1].startswith("<think>Hit ") and " is the page." in turns[1]
            assert '"name": "visit"' in turns[1] and f'"goal": "{task["type"]}"' in turns[1]
    assert reads["hit"] >= 1 and reads["visit"] >= 20


def test_grpo_selection_prefers_the_level_nearest_one_half():
    tasks = [{"id": f"{lv}{i}", "level": lv} for lv in ("easy", "mid", "hard") for i in range(20)]
    chosen, why = recipe.select_grpo_tasks(tasks, {"easy": [1.0] * 8, "mid": [1, 0, 1, 0, 0, 1, 0, 0],
                                                   "hard": [0.0] * 8}, n=10, seed=0)
    counts = why["chosen_per_level"]
    assert counts.get("mid", 0) >= 8 and "hard" not in counts and len(chosen) == 10
    assert why["fallback"] is None and why["wanted"] == 10 and why["short"] == 0
    # Nothing solved anywhere: the probe cannot tell the levels apart, so each gets an equal share
    # (not the first level listed), and the fallback says so.
    chosen, why = recipe.select_grpo_tasks(tasks, {"hard": [0.0] * 4, "mid": [0.0] * 4, "easy": [0.0] * 4},
                                           n=12, seed=0)
    assert why["chosen_per_level"] == {"easy": 4, "mid": 4, "hard": 4} and "no success" in why["fallback"]


def test_grpo_selection_fills_a_short_level_from_the_other_chosen_levels():
    tasks = ([{"id": f"mid{i}", "level": "mid"} for i in range(3)]
             + [{"id": f"easy{i}", "level": "easy"} for i in range(20)]
             + [{"id": f"hard{i}", "level": "hard"} for i in range(20)])
    # "mid" (p = 1/2) would take most of 10 draws but holds 3 tasks: the rest come from "easy" (some
    # success), none from "hard" (no success: its groups would carry no signal).
    chosen, why = recipe.select_grpo_tasks(tasks, {"mid": [1, 0], "easy": [1, 1, 1, 0], "hard": [0, 0]}, n=10,
                                           seed=0)
    assert len(chosen) == 10 and len({t["id"] for t in chosen}) == 10 and why["short"] == 0
    assert why["chosen_per_level"] == {"mid": 3, "easy": 7}
    # Fewer tasks than draws in all: counted, not hidden.
    chosen, why = recipe.select_grpo_tasks(tasks[:5], {"mid": [1, 0], "easy": [1, 0]}, n=8, seed=0)
    assert len(chosen) == 5 and why["short"] == 3


def test_policy_stats_count_well_formed_turns_and_levels():
    good = {"role": "assistant", "content": "<think>x</think>\n<answer>A</answer>"}
    bad = {"role": "assistant", "content": "A"}
    trajectories = [{"task": {"level": "l1"}, "is_correct": True, "messages": [good]},
                    {"task": {"level": "l2"}, "is_correct": False, "messages": [bad, good]}]
    s = recipe.policy_stats(trajectories, {})
    assert s["success"] == 0.5 and s["turns"] == 3 and s["well_formed_turns"] == pytest.approx(2 / 3)
    assert s["per_level"]["l1"]["success"] == 1.0 and s["per_level"]["l2"]["episodes"] == 1


def test_learning_benchmark_scores_families_and_targets(tmp_path):
    from benchmarks.learning import family_stats, targets

    good = {"role": "assistant", "content": "<think>x</think>\n<answer>A</answer>"}
    for name, wins in (("fewshot", 0), ("sft", 18), ("grpo", 19), ("heuristic", 15)):
        records = [{"task": {"level": "lookup-lead" if i < 20 else "sailorfog"}, "is_correct": i < wins,
                    "messages": [good if name != "fewshot" else {"role": "assistant", "content": "no"}]}
                   for i in range(24)]
        path = tmp_path / "eval" / f"{name}.trajectories.jsonl"
        path.parent.mkdir(exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    stats = family_stats(tmp_path)
    assert stats["title lookups"]["SFT"]["episodes"] == 20 and stats["synthesized"]["SFT"]["success"] == 0.0
    met = targets(stats)
    assert met["sft_gt_fewshot"] and met["sft_gt_fewshot_well_formed"] and met["grpo_point_ge_sft"]
    assert met["grpo_gt_sft"] is False and met["grpo_ge_heuristic_lookups"] is True


def test_learning_benchmark_overrides_are_typed_pipeline_settings():
    from benchmarks.learning import overrides

    assert overrides(["sft_steps=60", "grpo-lr=1e-4"]) == {"sft_steps": 60, "grpo_lr": 1e-4}
    for bad in (["sft_steps"], ["no_such=1"], ["sft_steps=many"], ["out=/tmp/x"]):
        with pytest.raises(ValueError, match="--set"):
            overrides(bad)


def test_paired_interval_uses_the_pairing():
    from websailor.recipe import paired_interval, paired_verdict, task_success

    # 40 tasks: both solve 20, both miss 12, only a solves 8 -> +0.2, and the pairing separates it
    a = {f"t{i}": 1.0 if i < 28 else 0.0 for i in range(40)}
    b = {f"t{i}": 1.0 if i < 20 else 0.0 for i in range(40)}
    diff, lo, hi, n = paired_interval(a, b)
    assert n == 40 and abs(diff - 0.2) < 1e-12 and lo > 0 and hi <= 0.2 + 0.2
    assert paired_verdict(lo, hi) == "above 0: better"
    # the unpaired interval of the same rates (0.70 vs 0.50 on 40 each) includes 0
    from websailor.recipe import diff_interval

    assert diff_interval(28, 40, 20, 40)[0] < 0
    assert paired_interval(a, b) == paired_interval(a, b)  # seeded
    assert paired_verdict(*paired_interval(b, a)[1:3]) == "below 0: worse"
    same = paired_interval(a, a)
    assert same[:3] == (0.0, 0.0, 0.0) and paired_verdict(same[1], same[2]) == "includes 0: not separated"
    few = paired_interval({"x": 1.0, "y": 0.0}, {"x": 0.0, "y": 1.0})
    assert "too few tasks" in paired_verdict(few[1], few[2])
    rows = [{"id": "t1", "scored": 4, "correct": 3}, {"id": "t2", "scored": 0, "correct": 0}]
    assert task_success(rows) == {"t1": 0.75}
    assert paired_interval({"x": 1.0}, {"y": 1.0})[3] == 0


def test_decoding_text_says_how_each_policy_decoded():
    from websailor.recipe import decoding_text

    summary = {"heuristic": {"policy": "heuristic", "temperature": 0.7},
               "sft": {"policy": "transformers", "temperature": 0.7, "top_p": 1.0, "k": 2},
               "grpo": {"policy": "transformers", "temperature": 0.7, "top_p": 1.0, "k": 2},
               "sft-greedy": {"policy": "transformers", "temperature": 0.0, "top_p": 1.0, "k": 1},
               "fewshot": {"policy": "transformers", "temperature": 0.7, "top_p": 1.0, "k": 1}}
    text = decoding_text(summary)
    assert "heuristic: baseline, no model" in text and "sft-greedy: greedy" in text
    assert "sft, grpo: sampled at temperature 0.7, top-p 1, 2 samples per task" in text
    assert "fewshot: sampled at temperature 0.7, top-p 1. " in text and "paired bootstrap over tasks" in text

    damaged = decoding_text({"a": {"temperature": 0.7, "top_p": "x", "k": "2"}, "b": [1], "c": {"temperature": None}})
    assert "a: sampled at temperature 0.7, top-p ?" in damaged and "c: ?" in damaged and "b:" not in damaged


def test_fixed_level_shares_replace_the_probe_weights_and_bad_ones_are_refused():
    tasks = [{"id": f"{lv}{i}", "level": lv} for lv in ("lookup-hop", "lookup-lead", "lookup-description")
             for i in range(40)]
    shares = recipe.parse_level_shares(" lookup-hop=0.75, lookup-lead=0.25 ")
    assert shares == {"lookup-hop": 0.75, "lookup-lead": 0.25}
    probe = {"lookup-hop": [0.0] * 8, "lookup-lead": [1, 0] * 4, "lookup-description": [0.0] * 8}
    chosen, why = recipe.select_grpo_tasks(tasks, probe, n=16, seed=0, shares=shares)
    assert why["chosen_per_level"] == {"lookup-hop": 12, "lookup-lead": 4} and "fixed shares" in why["fallback"]
    assert why["probe_success"]["lookup-hop"] == 0.0  # the probe is still reported
    assert recipe.select_grpo_tasks(tasks, probe, n=16, seed=0)[1]["chosen_per_level"] == {"lookup-lead": 16}
    seen_all_lead = [t for t in tasks if t["level"] != "lookup-lead"]  # SFT trained on every lead task
    with pytest.raises(ValueError, match="SFT saw, or the probe played, every train task of lookup-lead; raise"):
        recipe.select_grpo_tasks(seen_all_lead, probe, n=16, seed=0, shares=shares)
    assert recipe.parse_level_shares("") == {}
    for text, message in [("lookup-hopp=1", "LEVEL one of"), ("lookup-hop", "LEVEL=SHARE"),
                          ("lookup-hop=0", "positive number"), ("lookup-hop=nan", "positive number"),
                          ("lookup-hop=1,lookup-hop=2", "named twice")]:
        with pytest.raises(ValueError, match=message):
            recipe.parse_level_shares(text)
    with pytest.raises(ValueError, match="SFT saw, or the probe played, every train task of sailorfog; raise"):
        recipe.select_grpo_tasks(tasks, probe, n=4, seed=0, shares={"sailorfog": 1.0})
