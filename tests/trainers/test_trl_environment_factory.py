"""The simulator as a TRL environment_factory: same tool outputs as the environment, the judge's
reward, and one real GRPOTrainer step through TRL's own tool-calling loop (tiny model, CPU)."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest
import torch

trl = pytest.importorskip("trl")
pytest.importorskip("datasets")

from envs.derived_tasks import derive_tasks  # noqa: E402
from envs.servers.episode import unwrap_tool_response  # noqa: E402
from trainers.adapters.trl_env import (environment_dataset, tool_calling_tokenizer,  # noqa: E402
                                      wikisim_environment)
from trainers.tiny_lm import tiny_lm  # noqa: E402


@pytest.fixture(scope="module")
def tasks(default_wiki):
    return [t.to_dict() for t in derive_tasks(default_wiki, 2, seed=3)]


def _env_output(wiki, task, name, arguments, tools=("search", "visit")):
    env = gym.make("websailor/WikiSim-v0", wiki_dir=str(wiki), tasks=[task], tools=list(tools))
    env.reset(options={"task": task})
    obs, *_ = env.step(f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>")
    env.close()
    return unwrap_tool_response(obs)


def test_tools_give_the_environments_outputs_and_the_judges_reward(default_wiki, tasks):
    from transformers.utils import get_json_schema

    Env = wikisim_environment(default_wiki)
    row = environment_dataset(tasks)[0]
    env = Env()
    assert env.reset(**row) is None  # the prompt already holds the question
    query = [tasks[0]["question"][:60]]
    found = env.search(query)
    assert found == _env_output(default_wiki, tasks[0], "search", {"query": query}) and "wikipedia.org" in found
    url = "https://en.wikipedia.org/wiki/" + tasks[0]["answer"].replace(" ", "_")
    page = env.visit([url], "what it is")
    assert page == _env_output(default_wiki, tasks[0], "visit", {"url": [url], "goal": "what it is"})
    assert env.visit([], "x").startswith("Error")  # a bad argument is the environment's error text
    schemas = {m: get_json_schema(getattr(env, m))["function"]["parameters"] for m in ("search", "visit", "answer")}
    assert schemas["search"]["properties"]["query"]["type"] == "array"
    assert set(schemas["visit"]["required"]) == {"url", "goal"}
    assert env.get_reward() == 0.0  # no answer yet
    env.answer(tasks[0]["answer"])
    assert env.get_reward() == 1.0 and env.info["is_correct"]
    assert env.search(query).startswith("Error: the episode is over")
    env.reset(**environment_dataset(tasks)[1])  # reused by TRL across batches: a fresh episode
    env.answer("certainly not this")
    assert env.get_reward() == 0.0
    with pytest.raises(ValueError, match="needs a simulator"):
        type("Unbound", (type(env).__mro__[1],), {})()


def _tool_call(name, arguments):
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call><|im_end|>'


def _scripted_turns(tokenizer, tasks, seen_tool_text):
    """TRL's single-turn generation, scripted: search, then answer (right in every other rollout, so
    the group has variance), then stop. Replies end with ``<|im_end|>`` and the EOS id (once when
    they are the same token)."""
    answers = {t["question"]: t["answer"] for t in tasks}
    calls = {"n": 0}

    def scripted(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        out = []
        for ids in prompt_ids:
            text = tokenizer.decode(ids, skip_special_tokens=True)
            question = next(q for q in answers if q in text)
            if "<tool_response>" not in text:
                reply = _tool_call("search", {"query": [question[:50]]})
            elif "Your answer was recorded" in text:
                reply = "Done.<|im_end|>"
            else:
                seen_tool_text.append(text.rsplit("<tool_response>", 1)[1])
                calls["n"] += 1
                reply = _tool_call("answer", {"answer": answers[question] if calls["n"] % 2 else "wrong"})
            reply_ids = tokenizer(reply, add_special_tokens=False)["input_ids"]
            out.append(reply_ids + ([tokenizer.eos_token_id] if reply_ids[-1] != tokenizer.eos_token_id else []))
        return out, None

    return scripted


def _grpo_step(model, tokenizer, wiki, tasks, out_dir):
    """One GRPOTrainer step through environment_factory with scripted completions; the trainer."""
    seen_tool_text: list[str] = []
    args = trl.GRPOConfig(output_dir=str(out_dir), per_device_train_batch_size=4, num_generations=4,
                          max_steps=1, learning_rate=1e-2, logging_steps=1, report_to="none", save_strategy="no",
                          use_cpu=True, bf16=False, max_completion_length=6000, max_tool_calling_iterations=2, seed=0)
    Env = wikisim_environment(wiki, max_tool_calls=3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer = trl.GRPOTrainer(model=model, processing_class=tokenizer, args=args,
                              train_dataset=environment_dataset(tasks[:1]), environment_factory=Env)
    trainer._generate_single_turn = _scripted_turns(tokenizer, tasks, seen_tool_text).__get__(trainer)
    trainer.train()
    assert seen_tool_text and all("wikipedia.org/wiki/" in t for t in seen_tool_text)  # the search ran
    rewards = sorted(e.get_reward() for e in trainer.environments)
    assert rewards == [0.0, 0.0, 1.0, 1.0]
    after = trainer.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert logged and all(torch.isfinite(torch.tensor(h["loss"])) for h in logged)
    assert any(abs(v - 0.5) < 1e-6 for h in logged for k, v in h.items() if k.endswith("WikiSimEnvironment/mean"))
    return trainer


def test_one_grpo_step_through_environment_factory(default_wiki, tasks, tmp_path):
    """TRL parses the tool calls, runs our tools, scores with get_reward and takes a step. The
    completions are scripted (a random tiny model never writes a tool call); the loss and its
    gradient are the tiny model's own."""
    from trl.chat_template_utils import qwen3_chat_template

    model, tokenizer = tiny_lm(hidden=32, seed=0)
    tokenizer.chat_template = qwen3_chat_template
    _grpo_step(model, tokenizer, default_wiki, tasks, tmp_path / "trl")


def _smollm2_tokenizer(kind):
    """SmolLM2's tokenizer as setup converts it (skipped when the folder is missing), or the local
    subword tokenizer with SmolLM2's shipped template (no tool support either way)."""
    if kind == "smollm2":
        from trainers.models import ModelError, load_tokenizer

        try:
            return load_tokenizer("smollm2-135m")
        except ModelError as exc:
            pytest.skip(f"no converted SmolLM2 folder ({exc})")
    from .conftest import small_subword_tokenizer

    tok = small_subword_tokenizer()
    tok.chat_template = (Path(__file__).parent / "templates" / "smollm2_chat_template.jinja").read_text()
    return tok


@pytest.mark.parametrize("kind", ["subword", "smollm2"])
def test_smollm2_takes_a_grpo_step_with_the_tool_template(default_wiki, tasks, tmp_path, kind):
    """SmolLM2's own template makes TRL refuse environment_factory; tool_calling_tokenizer attaches
    the tool-calling template and its parser, and TRL then renders our tools, parses the scripted
    tool calls with it and takes a step (tiny model over SmolLM2's vocabulary)."""
    tokenizer = _smollm2_tokenizer(kind)
    model, _ = tiny_lm(hidden=32, seed=0, tokenizer=tokenizer)
    args = trl.GRPOConfig(output_dir=str(tmp_path / "refused"), report_to="none", use_cpu=True, num_generations=2,
                          per_device_train_batch_size=2)
    with pytest.raises(ValueError, match="does not support tool calling"):
        trl.GRPOTrainer(model=model, processing_class=tokenizer, args=args, train_dataset=environment_dataset(tasks),
                        environment_factory=wikisim_environment(default_wiki))
    tokenizer = tool_calling_tokenizer(tokenizer)
    trainer = _grpo_step(model, tokenizer, default_wiki, tasks, tmp_path / kind)
    assert trainer.chat_template is None  # prefix-preserving as attached: TRL keeps it
    prompt = tokenizer.decode(trainer.processing_class.apply_chat_template(
        environment_dataset(tasks[:1])[0]["prompt"], tools=trainer.tools, add_generation_prompt=True,
        return_dict=False))
    assert '<tools>\n{"type": "function", "function": {"name": "answer"' in prompt


def test_python_variant_adds_the_sandboxed_tool(default_wiki, tasks):
    Env = wikisim_environment(default_wiki, python=True)
    env = Env()
    env.reset(**environment_dataset(tasks)[0])
    out = env.python("print(6 * 7)")
    assert out == _env_output(default_wiki, tasks[0], "python", {"code": "print(6 * 7)"}, ["search", "visit", "python"])
    assert "42" in out or "sandbox is unavailable" in out
    with pytest.raises(ValueError, match="sets the tools itself"):
        wikisim_environment(default_wiki, tools=["search"])
