"""SFT: both input formats, rejection-sampling filters, assistant-only loss, exact resume, CLI, LoRA."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from envs.protocol import format_turn
from trainers.sft import SFTConfig, lr_factor, masked_token_loss_sum, step_batch, train
from trainers.sft_data import FilterConfig, build_examples, read_records
from trainers.models import load_lm
from trainers.tiny_lm import save_tiny_lm, tiny_lm

# ../shared/reference relative to the repository (one more level up for a git worktree under wt/).
_REPO = Path(__file__).resolve().parents[2]
REFERENCE = next((p for p in (_REPO.parent / "shared" / "reference" / "webdancer_sample_traj.jsonl",
                              _REPO.parent.parent / "shared" / "reference" / "webdancer_sample_traj.jsonl")
                  if p.is_file()), _REPO.parent / "shared" / "reference" / "webdancer_sample_traj.jsonl")


def _record(i: int, *, correct: bool = True, calls: int = 1, system: str = "Be brief.") -> dict:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": f"Question {i}?"}]
    for c in range(calls):
        messages.append({"role": "assistant", "content": format_turn(f"look {i}.{c}", tool_call=("search", {"query": [f"q{i}"]}))})
        messages.append({"role": "user", "content": f"<tool_response>\nhit {i}\n</tool_response>"})
    messages.append({"role": "assistant", "content": format_turn("done", answer=f"A{i}")})
    return {"id": f"t{i}", "task": {"id": f"t{i}", "question": f"Question {i}?", "answer": f"A{i}"},
            "messages": messages, "reward": float(correct), "is_correct": correct, "termination": "answer",
            "num_tool_calls": calls, "policy": "test"}


def _write(path: Path, records: list) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return str(path)


# ---------------------------------------------------------------- reading and filtering

def test_own_format_filters_and_report(tmp_path):
    records = [_record(0), _record(1, correct=False), _record(2, calls=0), _record(3, calls=2),
               _record(4, system="x" * 5000)]
    path = _write(tmp_path / "t.jsonl", records)
    recs = read_records([path])
    assert [r.num_tool_calls for r in recs] == [1, 1, 0, 2, 1] and recs[0].fmt == "websailor"
    assert recs[0].answers == ("A0",) and recs[0].final_answer == "A0"
    _, tok = tiny_lm(hidden=32)
    examples, report = build_examples(recs, tok, FilterConfig(max_tokens=2000))
    assert report.to_dict() == {"read": 5, "kept": 2, "dropped": {"incorrect": 1, "few_tool_calls": 1, "too_long": 1}}
    assert [e.source for e in examples] == [f"{path}:1", f"{path}:4"]
    examples, report = build_examples(recs, tok, FilterConfig(require_correct=False, min_tool_calls=0,
                                                              max_tokens=100_000))
    assert report.kept == 5


def test_a_turn_longer_than_the_policy_may_write_is_dropped(tmp_path):
    """A trajectory whose assistant turn is past the per-turn generation limit teaches a turn the policy is cut
    off in; the limit counts the turn's tokens and its end."""
    recs = read_records([_write(tmp_path / "t.jsonl", [_record(0), _record(1)])])
    _, tok = tiny_lm(hidden=32)
    longest = max(len(tok(m["content"], add_special_tokens=False)["input_ids"])
                  for m in recs[0].messages if m["role"] == "assistant")
    _, report = build_examples(recs, tok, FilterConfig(max_turn_tokens=longest))
    assert report.to_dict() == {"read": 2, "kept": 0, "dropped": {"turn_too_long": 2}}
    _, report = build_examples(recs, tok, FilterConfig(max_turn_tokens=longest + 1))
    assert report.kept == 2
    assert build_examples(recs, tok, FilterConfig())[1].kept == 2  # 0: no limit
    with pytest.raises(ValueError, match="max_turn_tokens must be >= 0"):
        FilterConfig(max_turn_tokens=-1)


def test_loss_mask_covers_exactly_the_assistant_turns(tmp_path):
    rec = _record(7)
    _, tok = tiny_lm(hidden=32)
    (ex,), _ = build_examples(read_records([_write(tmp_path / "t.jsonl", [rec])]), tok, FilterConfig())
    trained = tok.decode(ex.input_ids[ex.loss_mask.bool()].tolist())
    turns = [m["content"] for m in rec["messages"] if m["role"] == "assistant"]
    assert trained == "".join(t + "<|im_end|>" for t in turns)
    assert "Question 7?" not in trained and "hit 7" not in trained


def test_malformed_lines_name_file_and_line(tmp_path):
    good = json.dumps(_record(0))
    cases = {
        "{not json": r"bad.jsonl:2: not valid JSON",
        json.dumps({"messages": "nope", "is_correct": True}): r"bad.jsonl:2: expected a non-empty 'messages' list",
        json.dumps({"messages": [{"role": "robot", "content": "x"}], "task": {}}): r"bad.jsonl:2: messages\[0\]",
        json.dumps({"messages": [{"role": "user", "content": "only a question"}], "task": {}}): "at least one assistant",
        json.dumps({"messages": _record(0)["messages"]}): "neither a websailor trajectory",
        json.dumps([1, 2]): r"bad.jsonl:2: expected a JSON object",
    }
    for line, pattern in cases.items():
        with pytest.raises(ValueError, match=pattern):
            read_records([_write(tmp_path / "bad.jsonl", [good, line])])
    with pytest.raises(ValueError, match="not found"):
        read_records([str(tmp_path / "missing.jsonl")])


@pytest.mark.skipif(not REFERENCE.is_file(), reason="../shared/reference is not present")
def test_released_webdancer_file_is_read_unchanged():
    recs = read_records([str(REFERENCE)])
    assert len(recs) == 200 and {r.fmt for r in recs} == {"released"}
    assert all(r.is_correct is None and r.answers and r.num_tool_calls >= 1 for r in recs)
    assert recs[0].answers == ("English horse race Derby",) and "Epsom Derby" in recs[0].final_answer

    def judged(**kw):
        from trainers.sft_data import judged_correct
        cfg = FilterConfig(**kw)
        return sum(judged_correct(r, cfg) is not False for r in recs)

    # Released final answers are sentences around the reference: exact match keeps none, recall most.
    assert judged() == 0 and judged(unlabelled="drop") == 0 and judged(unlabelled="keep") == 200
    assert 150 <= judged(judge="recall") < 200


# ---------------------------------------------------------------- math

def test_lr_schedule_warmup_then_cosine_to_min():
    f = [lr_factor(s, 4, 20, 1e-5) for s in range(20)]
    assert f[:4] == [0.25, 0.5, 0.75, 1.0]
    assert f[4] == pytest.approx(1.0) and f[-1] == pytest.approx(1e-5)
    assert all(a >= b for a, b in zip(f[4:], f[5:]))


def test_masked_loss_is_cross_entropy_on_marked_tokens_only():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 7, requires_grad=True)
    ids = torch.randint(0, 7, (2, 5))
    mask = torch.tensor([[0, 0, 1, 1, 0], [1, 0, 0, 1, 1]])
    loss = masked_token_loss_sum(logits, ids, mask)
    logp = torch.log_softmax(logits, -1)
    expected = -(logp[0, 1, ids[0, 2]] + logp[0, 2, ids[0, 3]] + logp[1, 2, ids[1, 3]] + logp[1, 3, ids[1, 4]])
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-6)
    loss.backward()
    assert torch.all(logits.grad[0, [0, 3, 4]] == 0) and torch.all(logits.grad[1, [0, 1, 4]] == 0)


def test_data_position_follows_from_the_step():
    seen = [i for s in range(3) for i in step_batch(s, 7, 3, seed=5)]
    assert sorted(seen) == list(range(7))  # one epoch: every example once, last batch short
    assert step_batch(4, 7, 3, seed=5) == step_batch(4, 7, 3, seed=5)


# ---------------------------------------------------------------- training

def _config(tmp_path: Path, data: str, **kw) -> SFTConfig:
    base = dict(data=[data], model="-", output_dir=str(tmp_path / "out"), lr=3e-3, batch_size=2, micro_batch_size=1,
                max_steps=6, save_every=2, tensorboard="off", warmup_ratio=0.2)
    base.update(kw)
    return SFTConfig(**base)


def test_config_validation_says_expected_and_actual(tmp_path):
    with pytest.raises(ValueError, match=r"batch_size \(6\) must be divisible by micro_batch_size \(4\)"):
        _config(tmp_path, "x", batch_size=6, micro_batch_size=4)
    with pytest.raises(ValueError, match="min_lr <= lr"):
        _config(tmp_path, "x", min_lr=1.0)
    with pytest.raises(ValueError, match="threshold must be in"):
        _config(tmp_path, "x", threshold=2.0)


def test_interrupted_run_resumes_to_the_same_result(tmp_path):
    data = _write(tmp_path / "t.jsonl", [_record(i, calls=1 + i % 2) for i in range(6)])
    model, tok = tiny_lm(hidden=32, seed=1)
    full = train(_config(tmp_path / "a", data), model=model, tokenizer=tok)
    assert full.steps == 6 and full.final_loss < full.history[0]["loss/sft"]

    class Interrupt(Exception):
        pass

    def stop_at_3(metrics):
        if metrics["step"] == 3:
            raise Interrupt

    model, tok = tiny_lm(hidden=32, seed=1)
    with pytest.raises(Interrupt):
        train(_config(tmp_path / "b", data), model=model, tokenizer=tok, on_step=stop_at_3)
    fresh, tok = tiny_lm(hidden=32, seed=99)  # different weights: everything must come from the checkpoint
    resumed = train(_config(tmp_path / "b", data), model=fresh, tokenizer=tok)
    assert [h["step"] for h in resumed.history] == [3, 4, 5, 6]  # from the step-2 checkpoint
    a, b = (load_lm(tmp_path / d / "out" / "model")[0].state_dict() for d in ("a", "b"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    lines = [json.loads(x) for x in (tmp_path / "b" / "out" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2, 3, 4, 5, 6]
    assert [m["loss/sft"] for m in lines] == [h["loss/sft"] for h in full.history]
    assert {"loss/sft", "train/lr", "train/tokens"} <= set(lines[0])
    with pytest.raises(ValueError, match="checkpoint was written with"):
        train(_config(tmp_path / "b", data, max_steps=8), model=fresh, tokenizer=tok)


def test_loss_on_all_trains_every_token_for_pretraining(tmp_path):
    data = _write(tmp_path / "t.jsonl", [_record(i) for i in range(2)])
    _, tok = tiny_lm(hidden=32)
    examples, _ = build_examples(read_records([data]), tok, FilterConfig())
    counted = {}
    for mode in ("assistant", "all"):
        model, tok = tiny_lm(hidden=32, seed=1)
        result = train(_config(tmp_path / mode, data, loss_on=mode, max_steps=1), model=model, tokenizer=tok)
        counted[mode] = result.history[0]["train/loss_tokens"]
    assert counted["assistant"] == sum(int(ex.loss_mask[1:].sum()) for ex in examples)
    assert counted["all"] == sum(ex.input_ids.numel() - 1 for ex in examples) > counted["assistant"]
    with pytest.raises(ValueError, match="loss_on must be 'assistant' or 'all', got 'prompt'"):
        _config(tmp_path, data, loss_on="prompt")


def test_nonfinite_loss_steps_are_skipped_then_stop(tmp_path):
    data = _write(tmp_path / "t.jsonl", [_record(i) for i in range(4)])
    model, tok = tiny_lm(hidden=32)
    with torch.no_grad():
        model.lm_head.weight[5, 0] = float("nan")  # tied embeddings: byte 2 (id 5) gives NaN logits
    with pytest.raises(RuntimeError, match="2 steps in a row had a non-finite loss"):
        train(_config(tmp_path, data, max_nonfinite=2), model=model, tokenizer=tok)
    lines = [json.loads(x) for x in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert [m["train/skipped"] for m in lines] == [1, 1] and lines[0]["loss/sft"] is None


def test_cli_trains_a_saved_tiny_model_and_reports_bad_input(tmp_path, capsys):
    from websailor.cli import main

    model_dir = save_tiny_lm(tmp_path / "tiny", hidden=32)
    data = _write(tmp_path / "t.jsonl", [_record(i) for i in range(3)])
    out = tmp_path / "run"
    rc = main(["sft", "train", "--data", data, "--model", model_dir, "--output-dir", str(out), "--lr", "1e-3",
               "--batch-size", "2", "--max-steps", "2", "--tensorboard", "off"])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["steps"] == 2 and math.isfinite(summary["final_loss"])
    assert load_lm(out / "model")[0].config.num_hidden_layers == 2
    bad = _write(tmp_path / "bad.jsonl", [json.dumps(_record(0)), "{oops"])
    rc = main(["sft", "train", "--data", bad, "--model", model_dir, "--output-dir", str(tmp_path / "r2")])
    assert rc == 2 and "bad.jsonl:2" in capsys.readouterr().err


def test_lora_trains_adapters_only_and_saves_a_merged_model(tmp_path):
    pytest.importorskip("peft")
    data = _write(tmp_path / "t.jsonl", [_record(i) for i in range(4)])
    model, tok = tiny_lm(hidden=32)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = train(_config(tmp_path, data, lora=True, lora_r=4, max_steps=3, lr=1e-2), model=model, tokenizer=tok)
    assert math.isfinite(result.final_loss)
    merged = load_lm(tmp_path / "out" / "model")[0].state_dict()
    assert set(merged) == set(before)  # a plain model, adapters merged
    assert torch.equal(merged["model.layers.0.mlp.up_proj.weight"], before["model.layers.0.mlp.up_proj.weight"])
    assert not torch.equal(merged["model.layers.0.self_attn.q_proj.weight"],
                           before["model.layers.0.self_attn.q_proj.weight"])


def test_a_chat_template_is_used_when_the_tokenizer_has_one(tmp_path):
    _, tok = tiny_lm(hidden=32)
    tok.chat_template = ("{% for m in messages %}<<{{ m['role'] }}>>{{ m['content'] }}<<end>>\n{% endfor %}"
                         "{% if add_generation_prompt %}<<assistant>>{% endif %}")
    rec = _record(3)
    (ex,), _ = build_examples(read_records([_write(tmp_path / "t.jsonl", [rec])]), tok, FilterConfig())
    text = tok.decode(ex.input_ids.tolist())
    assert text.startswith("<<system>>Be brief.<<end>>") and "<|im_start|>" not in text
    turns = [m["content"] for m in rec["messages"] if m["role"] == "assistant"]
    assert tok.decode(ex.input_ids[ex.loss_mask.bool()].tolist()) == "".join(t + "<<end>>" for t in turns)
