"""trainers.eval: pass@k, per-task results, summary, budget sweep, the CLI."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from envs.tasks import write_jsonl_tasks, task_from_dict
from trainers.eval import EvalConfig, pass_at_k, run_eval
from websailor.cli import main

from tests.envs.conftest import TASKS

from .conftest import MINI_ENV_ID, MINI_SHORT_ENV_ID, tiny_qwen2


def test_pass_at_k_hand_computed():
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(5, 2, 3) == pytest.approx(0.9)  # 1 - C(3,3)/C(5,3) = 1 - 1/10
    assert pass_at_k(3, 0, 3) == 0.0 and pass_at_k(3, 3, 1) == 1.0 and pass_at_k(4, 1, 1) == 0.25
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


@pytest.fixture()
def task_file(tmp_path):
    path = tmp_path / "tasks.jsonl"
    write_jsonl_tasks(path, [task_from_dict(t) for t in TASKS])
    return path


def test_heuristic_eval_writes_results_and_sweep(task_file, tmp_path):
    out = tmp_path / "eval"
    config = EvalConfig(tasks=str(task_file), policy="heuristic", env_id=MINI_ENV_ID, out=str(out), k=2,
                        num_envs=2, sweep_tool_calls=[1, 2, 4], sweep_context_tokens=[200, 100000])
    summary = run_eval(config)
    rows = [json.loads(line) for line in (out / "heuristic.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [t["id"] for t in TASKS]
    assert all(r["samples"] == 2 and len(r["terminations"]) == 2 for r in rows)
    assert summary["pass@1"] == pytest.approx(sum(r["pass@1"] for r in rows) / 3) and summary["pass@1"] > 0.5
    assert sum(summary["terminations"].values()) == 6
    trajectories = (out / "heuristic.trajectories.jsonl").read_text().splitlines()
    assert len(trajectories) == 6 and json.loads(trajectories[0])["policy"] == "heuristic"
    saved = json.loads((out / "summary.json").read_text())
    assert saved["heuristic"]["pass@2"] == summary["pass@2"]
    sweep = json.loads((out / "heuristic.budget_sweep.json").read_text())["points"]
    assert [p["budget"] for p in sweep["max_tool_calls"]] == [1, 2, 4]
    calls = [p["mean_tool_calls"] for p in sweep["max_tool_calls"]]
    assert calls[0] <= 1 and calls == sorted(calls)  # the budget binds
    assert sweep["max_context_tokens"][0]["pass@1"] <= sweep["max_context_tokens"][1]["pass@1"]
    assert (out / "heuristic.budget_sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_transformers_policy_eval_through_the_cli(task_file, tmp_path, capsys):
    model_dir = tmp_path / "tiny"
    tiny_qwen2().save_pretrained(model_dir)
    out = tmp_path / "eval"
    code = main(["eval", "--tasks", str(task_file), "--policy", "transformers", "--model", str(model_dir),
                 "--tokenizer", "byt5",
                 "--env-id", MINI_SHORT_ENV_ID, "--out", str(out), "--k", "2", "--limit", "1", "--max-new-tokens", "8",
                 "--num-envs", "4"])
    assert code == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["name"] == f"{tmp_path.name}_tiny" and last["num_tasks"] == 1 and last["temperature"] == 0.85 and last["top_p"] == 0.95
    rows = [json.loads(line) for line in (out / f"{tmp_path.name}_tiny.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["samples"] == 2 and rows[0]["terminations"] == ["format_error"] * 2
    record = json.loads((out / f"{tmp_path.name}_tiny.trajectories.jsonl").read_text().splitlines()[0])
    assert record["token_ids"] and sum(record["loss_mask"]) > 0


def test_bad_eval_input(task_file, tmp_path, capsys):
    assert main(["eval", "--tasks", str(tmp_path / "none.jsonl")]) == 2
    assert "task file not found" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--model"):
        EvalConfig(tasks=str(task_file), policy="transformers", env_id=MINI_ENV_ID)
    with pytest.raises(ValueError, match="--wiki-dir"):
        EvalConfig(tasks=str(task_file))
    with pytest.raises(ValueError, match="--judge-base-url"):
        EvalConfig(tasks=str(task_file), env_id=MINI_ENV_ID, judge="llm")
    with pytest.raises(ValueError, match="sweep-tool-calls"):
        EvalConfig(tasks=str(task_file), env_id=MINI_ENV_ID, sweep_tool_calls=[0])


class _AgentAndGrader(BaseHTTPRequestHandler):
    """Plays the agent (always answers Paris) and the LLM grader (yes when the response is the gold answer)."""

    seen: list[dict] = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _AgentAndGrader.seen.append(body)
        last = body["messages"][-1]["content"]
        if "Judge whether" in last:
            response = re.search(r"<<<RESPONSE (\w+)>>>\n(.*)\n<<<END RESPONSE \1>>>", last).group(2).strip()
            gold = last.split("[correct_answer]:", 1)[1].split("\n", 1)[0].strip()
            verdict = "yes" if response == gold else "no"
            content = f"extracted_final_answer: {response.strip()}\nreasoning: r\ncorrect: {verdict}\nconfidence: 90%"
        else:
            content = "<think>\nI know it.\n</think>\n<answer>Paris</answer>"
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": content},
                                        "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_openai_policy_with_llm_judge_on_a_loopback_server(task_file, tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _AgentAndGrader)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        config = EvalConfig(tasks=str(task_file), policy="openai", model="agent-model", base_url=base,
                            env_id=MINI_SHORT_ENV_ID, out=str(tmp_path / "eval"), judge="llm",
                            judge_base_url=base, judge_model="grader", num_envs=3)
        summary = run_eval(config)
    finally:
        server.shutdown()
        server.server_close()
    rows = {r["id"]: r for r in map(json.loads, (tmp_path / "eval" / "agent-model.jsonl").read_text().splitlines())}
    assert rows["capital"]["is_correct"] == [True] and rows["horse"]["is_correct"] == [False]
    assert summary["pass@1"] == pytest.approx(1 / 3) and summary["judge"] == "llm"
    agent_requests = [b for b in _AgentAndGrader.seen if b["model"] == "agent-model"]
    assert agent_requests[0]["temperature"] == 0.85 and agent_requests[0]["top_p"] == 0.95
    assert agent_requests[0]["messages"][0]["role"] == "system"


def test_environment_that_cannot_be_made_is_a_one_line_error(task_file, tmp_path, capsys):
    """gym.make runs in the baseline's worker threads: its failure must reach the caller, not end
    a thread quietly and leave an empty evaluation."""
    out = tmp_path / "eval"
    code = main(["eval", "--tasks", str(task_file), "--policy", "heuristic", "--wiki-dir", str(tmp_path / "no-wiki"),
                 "--out", str(out), "--num-envs", "2"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no simulator at" in err, err
    assert not out.exists() or not any(out.iterdir())  # nothing half-written
    config = EvalConfig(tasks=str(task_file), policy="heuristic", env_id="test/NoSuchEnv-v0", out=str(out))
    with pytest.raises(ValueError, match=r"could not make the environment 'test/NoSuchEnv-v0': NameNotFound"):
        run_eval(config)


def test_model_policy_with_an_environment_that_cannot_be_made_is_a_one_line_error(task_file, tmp_path, capsys):
    """The rollout path (a model policy) makes its environments itself: same one-line error."""
    model_dir = tmp_path / "tiny"
    tiny_qwen2().save_pretrained(model_dir)
    code = main(["eval", "--tasks", str(task_file), "--policy", "transformers", "--model", str(model_dir),
                 "--tokenizer", "byt5", "--env-id", "test/NoSuchEnv-v0", "--out", str(tmp_path / "eval"),
                 "--limit", "1", "--max-new-tokens", "4", "--num-envs", "1"])
    assert code == 2
    err = capsys.readouterr().err.strip()  # (transformers' own loading bars come before it)
    assert "Traceback" not in err
    assert "could not make the environment 'test/NoSuchEnv-v0'" in err.splitlines()[-1], err


def test_a_lone_surrogate_in_a_task_loses_nothing(tmp_path):
    """A task with "\\ud800" (valid JSON, not encodable as UTF-8) used to crash the final write."""
    tasks = tmp_path / "tasks.jsonl"
    bad = {"id": "bad", "question": "Who is \ud800?", "answer": "x\ud800"}
    tasks.write_text("\n".join(json.dumps(t) for t in [*TASKS, bad]) + "\n", encoding="utf-8")  # ASCII escapes
    out = tmp_path / "eval"
    summary = run_eval(EvalConfig(tasks=str(tasks), policy="heuristic", env_id=MINI_ENV_ID, out=str(out), num_envs=2))
    assert summary["num_tasks"] == 4
    rows = [json.loads(line) for line in (out / "heuristic.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == [t["id"] for t in TASKS] + ["bad"] and rows[3]["answer"] == "x\ud800"
    lines = (out / "heuristic.trajectories.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4 and json.loads(lines[3])["task"]["question"] == "Who is \ud800?"
    assert not list(out.glob("*.partial")) and not list(out.glob("*.tmp"))


def test_trajectories_reach_the_disk_as_episodes_finish(tmp_path, monkeypatch):
    """A run that dies after some episodes keeps them in <name>.trajectories.jsonl.partial, and
    nothing under the final names."""
    import trainers.eval as ev

    tasks = tmp_path / "tasks.jsonl"
    write_jsonl_tasks(tasks, [task_from_dict(t) for t in TASKS])
    out = tmp_path / "eval"
    real = ev.per_task_rows

    def crash(*args, **kwargs):
        raise RuntimeError("boom after the episodes")

    monkeypatch.setattr(ev, "per_task_rows", crash)
    with pytest.raises(RuntimeError, match="boom"):
        run_eval(EvalConfig(tasks=str(tasks), policy="heuristic", env_id=MINI_ENV_ID, out=str(out), k=2, num_envs=2))
    kept = (out / "heuristic.trajectories.jsonl.partial").read_text(encoding="utf-8").splitlines()
    assert len(kept) == 6 and {json.loads(x)["task"]["id"] for x in kept} == {t["id"] for t in TASKS}
    assert not (out / "heuristic.trajectories.jsonl").exists() and not (out / "heuristic.jsonl").exists()
    monkeypatch.setattr(ev, "per_task_rows", real)
    run_eval(EvalConfig(tasks=str(tasks), policy="heuristic", env_id=MINI_ENV_ID, out=str(out), k=2, num_envs=2))
    assert not (out / "heuristic.trajectories.jsonl.partial").exists()
    assert len((out / "heuristic.trajectories.jsonl").read_text(encoding="utf-8").splitlines()) == 6


def test_results_are_named_by_more_than_the_model_folder(task_file):
    def name(model):
        return EvalConfig(tasks=str(task_file), policy="openai", base_url="http://127.0.0.1:1/v1", model=model,
                          env_id=MINI_ENV_ID).results_name

    assert name("runs/sft/model") == "sft_model" and name("runs/grpo/model/") == "grpo_model"
    assert name("/home/me/runs/sft/model") == "sft_model" and name("smollm2-135m") == "smollm2-135m"
    assert name("../x/y z") == "x_y_z"


def test_an_existing_result_name_is_refused_unless_overwrite(task_file, tmp_path, capsys):
    """Evaluating runs/sft/model and then runs/grpo/model wrote both to model.jsonl: the second run
    replaced the first's results. Now a name in use is refused, in one line, before any episode."""
    out = tmp_path / "eval"
    args = ["eval", "--tasks", str(task_file), "--policy", "heuristic", "--env-id", MINI_ENV_ID, "--out", str(out),
            "--limit", "1"]
    assert main(args) == 0
    first = (out / "heuristic.jsonl").read_bytes()
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "already holds results named 'heuristic'" in err and "--overwrite" in err
    assert len(err.strip().splitlines()) == 1 and (out / "heuristic.jsonl").read_bytes() == first
    (out / "heuristic.jsonl").unlink()
    (out / "heuristic.trajectories.jsonl").unlink()
    assert main(args) == 2  # its entry in summary.json is enough
    assert main(args + ["--overwrite"]) == 0 and (out / "heuristic.jsonl").is_file()
    assert main(args + ["--name", "second"]) == 0
    assert set(json.loads((out / "summary.json").read_text())) == {"heuristic", "second"}
