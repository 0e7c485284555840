"""Every common chat template end to end, with its real text: rollout ids equal what a trainer
tokenizes (SFT), and the GRPO, eval and verl entry points pass the template switch.

Template texts come from the installed TRL (``trl/chat_templates/``); SmolLM2's is not shipped by
any installed package, so ``templates/smollm2_chat_template.jinja`` keeps a copy of the one in
HuggingFaceTB/SmolLM2-135M-Instruct; ``smollm2_tools`` is the tool-calling template that
:mod:`trainers.adapters.tool_template` attaches to it for TRL. The tokenizer is the local byte-level BPE of
:mod:`trainers.subword` (markers are one special id each, as in the real tokenizers), with
Llama 3's header and end-of-turn tokens added for the Llama templates.
"""

from __future__ import annotations

import asyncio
import functools
import json
from pathlib import Path

import pytest
import torch
import trl

from envs.protocol import format_turn
from envs.tokens import end_of_turn_text, observation_ids, prompt_ids, stop_sequences, tokenize_messages
from tests.envs.conftest import TASKS
from tests.trainers import toy_env
from trainers.adapters.tool_template import SMOLLM2_TOOL_TEMPLATE, tool_calling_tokenizer
from trainers.policies import Generation, TransformersPolicy
from trainers.rollout import RolloutConfig, collect

from .conftest import MINI_SHORT_ENV_ID, small_subword_tokenizer

TRL_TEMPLATES = Path(trl.__file__).parent / "chat_templates"
TEMPLATES = {
    "qwen3": TRL_TEMPLATES / "qwen3.jinja",  # thinking, as shipped
    "qwen3_2507": TRL_TEMPLATES / "qwen3_instruct_2507.jinja",
    "qwen2_5": TRL_TEMPLATES / "qwen2_5.jinja",
    "llama3": TRL_TEMPLATES / "llama3.jinja",
    "llama3_1": TRL_TEMPLATES / "llama3_1.jinja",
    "llama3_2": TRL_TEMPLATES / "llama3_2.jinja",
    "smollm2": Path(__file__).parent / "templates" / "smollm2_chat_template.jinja",
    "smollm2_tools": SMOLLM2_TOOL_TEMPLATE,  # the text itself
    "chatml": None,  # no template: the documented ChatML fallback
}
LLAMA_SPECIALS = ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
ANSWERS = {t["question"]: t["answer"] for t in TASKS}


@functools.lru_cache(maxsize=None)
def template_tokenizer(name: str):
    tok = small_subword_tokenizer()
    if name.startswith("llama"):
        tok.add_special_tokens({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                                "additional_special_tokens": LLAMA_SPECIALS})
    path = TEMPLATES[name]
    tok.chat_template = path if isinstance(path, str) or path is None else path.read_text(encoding="utf-8")
    return tok


def canonical_turn(think: str, **kw) -> str:
    """A protocol turn as Qwen3's template renders one (``</think>`` then a blank line)."""
    return format_turn(think, **kw).replace("</think>\n", "</think>\n\n", 1)


class ScriptedPolicy:
    """search -> answer, as ids, for any template (the turn is found by counting tool responses)."""

    def __init__(self, tokenizer):
        self.tokenizer, self.eot = tokenizer, end_of_turn_text(tokenizer)

    def generate(self, prompts, *, max_new_tokens, temperature, top_p, stop_ids=()):
        out = []
        for p in prompts:
            text = self.tokenizer.decode(p)
            question = next(q for q in ANSWERS if q in text)
            if "</tool_response>" in text.split(question, 1)[1]:
                turn = canonical_turn("found it", answer=ANSWERS[question])
            else:
                turn = canonical_turn("search first", tool_call=("search", {"query": [question[:40]]}))
            ids = self.tokenizer.encode(turn + self.eot, add_special_tokens=False)[:max_new_tokens]
            out.append(Generation(ids, [-0.01] * len(ids), turn, "stop"))
        return out


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_rollout_ids_equal_the_trainers_tokenization(name):
    tok = template_tokenizer(name)
    config = RolloutConfig(env_id=MINI_SHORT_ENV_ID, num_envs=2, tool_workers=2, max_new_tokens=256)
    trajs = collect(ScriptedPolicy(tok), TASKS[:2], config, group_size=1, progress=False)
    for traj in trajs:
        assert (traj.termination, traj.is_correct, traj.num_turns) == ("answer", True, 2)
        seq = traj.prompt_ids + traj.token_ids
        whole = tokenize_messages(traj.messages, tok)
        n = len(seq)
        assert whole.input_ids[:n].tolist() == seq, name
        assert whole.loss_mask[:n].tolist() == [0] * len(traj.prompt_ids) + traj.loss_mask
        assert tok.decode(whole.input_ids[n:]).strip() == "" and not whole.loss_mask[n:].any()
        text = tok.decode(traj.prompt_ids)
        if TEMPLATES[name] is None or name.startswith("smollm2"):
            assert text.startswith("<|im_start|>system\n")
        elif name.startswith("llama"):
            assert text.startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>")
    if name.startswith("llama"):
        assert end_of_turn_text(tok) == "<|eot_id|>"
        assert [tok.convert_tokens_to_ids("<|eot_id|>")] in stop_sequences(tok)
    else:
        assert end_of_turn_text(tok) == "<|im_end|>"


def test_qwen3_observation_and_what_the_model_saw():
    tok = template_tokenizer("qwen3")
    obs = tok.decode(observation_ids("<tool_response>\nx\n</tool_response>", tok))
    assert obs == "\n<|im_start|>user\n<tool_response>\nx\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    # A plain user turn (which Qwen3 counts as a new question and before which it drops thoughts) too.
    assert tok.decode(observation_ids("hi", tok)) == "\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_a_rewritten_transcript_is_one_error_naming_the_template_and_the_switch():
    tok = template_tokenizer("qwen3")
    messages = [{"role": "user", "content": TASKS[0]["question"]},
                {"role": "assistant", "content": "<tool_call>\n{}\n</tool_call>"},  # no think block
                {"role": "user", "content": "<tool_response>\nx\n</tool_response>"},
                {"role": "assistant", "content": "<answer>Paris</answer>"}]
    with pytest.raises(ValueError) as err:
        tokenize_messages(messages, tok)
    assert "Qwen3 thinking template" in str(err.value) and "--chat-template off" in str(err.value)
    assert "\n" not in str(err.value)
    off = tokenize_messages(messages, tok, use_chat_template=False)
    assert tok.decode(off.input_ids).startswith("<|im_start|>user\n")


def _grpo_trainer(tmp_path, tok, chat_template):
    from trainers.grpo import GRPOConfig, GRPOTrainer

    cfg = GRPOConfig(model="-", tasks="-", output_dir=str(tmp_path / chat_template), env_id=toy_env.SPEC,
                     batch_size=4, group_size=2, micro_batch_size=4, max_new_tokens=8, pool_size=2,
                     save_every=0, device="cpu", tensorboard="off", steps=1, chat_template=chat_template)
    return GRPOTrainer(cfg, toy_env.tiny_model(tok, hidden=32), tok, toy_env.TASKS[:2])


@pytest.mark.parametrize("name", ["qwen3", "llama3_1"])
def test_grpo_rolls_out_and_updates_with_the_template_or_the_fallback(tmp_path, name):
    torch.manual_seed(0)
    tok = template_tokenizer(name)
    head = "<|im_start|>system" if name == "qwen3" else "<|begin_of_text|><|start_header_id|>system"
    for switch, start in (("on", head), ("off", "<|im_start|>system")):
        trainer = _grpo_trainer(tmp_path, tok, switch)
        trajs = trainer.collect([trainer.pool.task(i) for i in trainer.pool.draw(2)])
        assert all(tok.decode(t.prompt_ids).startswith(start) for t in trajs)
        metrics = trainer.train_step()
        assert metrics["step"] == 1 and "loss/policy" in metrics


def test_eval_passes_the_switch(tmp_path):
    from trainers.eval import EvalConfig, evaluate

    tok = template_tokenizer("llama3_2")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in TASKS[:1]))
    policy = TransformersPolicy(toy_env.tiny_model(tok, hidden=32), tok)
    for switch, start in (("on", "<|begin_of_text|>"), ("off", "<|im_start|>")):
        cfg = EvalConfig(tasks=str(tasks), policy="transformers", model="-", env_id=MINI_SHORT_ENV_ID, k=1,
                         max_new_tokens=8, max_tool_calls=2, num_envs=1, chat_template=switch)
        _, _, trajs = evaluate(policy, TASKS[:1], cfg)
        assert tok.decode(trajs[0].prompt_ids).startswith(start)


def test_verl_episode_with_the_qwen3_template():
    from trainers.adapters.verl import play_episode

    tok = template_tokenizer("qwen3")
    env = toy_env.make_toy_env(toy_env.TASKS[:1])
    task = toy_env.TASKS[0]
    turn = canonical_turn("done", answer="x")

    async def generate(ids, max_tokens):
        out = tok.encode(turn + "<|im_end|>", add_special_tokens=False)[:max_tokens]
        return out, [-0.1] * len(out)

    try:
        for switch, start in ((None, "<|im_start|>system"), (False, "<|im_start|>system")):
            ep = asyncio.run(play_episode(env, task, generate, tok, response_length=2000, max_new_tokens=200,
                                          use_chat_template=switch))
            assert ep.termination == "answer" and tok.decode(ep.prompt_ids).startswith(start)
            assert ep.response_ids == tok.encode(turn + "<|im_end|>", add_special_tokens=False)
    finally:
        env.close()


def test_sft_trains_with_the_template_or_the_switch(tmp_path):
    from trainers.sft import SFTConfig, train

    tok = template_tokenizer("qwen3")
    canonical = [{"role": "user", "content": TASKS[0]["question"]},
                 {"role": "assistant", "content": canonical_turn("go", tool_call=("search", {"query": ["x"]}))},
                 {"role": "user", "content": "<tool_response>\nx\n</tool_response>"},
                 {"role": "assistant", "content": canonical_turn("done", answer=TASKS[0]["answer"])}]
    bare = [dict(m, content=m["content"].split("</think>\n\n")[-1]) for m in canonical]  # no think blocks
    for name, messages, switch in (("canonical", canonical, "auto"), ("bare", bare, "off")):
        data = tmp_path / f"{name}.jsonl"
        data.write_text(json.dumps({"messages": messages, "is_correct": True, "num_tool_calls": 1}) + "\n")
        cfg = SFTConfig(data=[str(data)], model="-", output_dir=str(tmp_path / name), batch_size=1,
                        micro_batch_size=1, max_steps=1, save_every=1, tensorboard="off", chat_template=switch)
        result = train(cfg, model=toy_env.tiny_model(tok, hidden=32), tokenizer=tok)
        assert result is not None
    cfg = SFTConfig(data=[str(data)], model="-", output_dir=str(tmp_path / "err"), batch_size=1, micro_batch_size=1,
                    max_steps=1, tensorboard="off")
    with pytest.raises(ValueError, match="Qwen3 thinking template.*--chat-template off"):
        train(cfg, model=toy_env.tiny_model(tok, hidden=32), tokenizer=tok)


@pytest.mark.parametrize("switch", [None, False])
def test_sft_format_check_prompts_with_the_switch(monkeypatch, switch):
    from trainers import sft_eval

    tok = template_tokenizer("llama3_2")
    seen = []

    def fake_turn(model, tokenizer, ids, **kw):
        seen.append(list(ids))
        return tokenizer.encode("<answer>x</answer>", add_special_tokens=False)

    monkeypatch.setattr(sft_eval, "generate_turn", fake_turn)
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<answer>x</answer>"}]
    model = torch.nn.Linear(1, 1)
    sft_eval.format_validity_on_transcripts(model, tok, [messages], use_chat_template=switch)
    assert seen == [prompt_ids(messages[:1], tok, use_chat_template=switch)]
    assert seen[0] != prompt_ids(messages[:1], tok, use_chat_template=not switch if switch is not None else False)


# ---------------------------------------------------------------- SmolLM2 with tools (TRL's tool loop)


def _fresh(name):
    """A tokenizer of its own (tool_calling_tokenizer modifies the one it is given)."""
    tok = small_subword_tokenizer()
    path = TEMPLATES[name]
    tok.chat_template = path if isinstance(path, str) or path is None else path.read_text(encoding="utf-8")
    return tok


def _search_schema():
    from envs.tools.base import tool_schema
    from envs.tools.search import SearchTool
    from tests.envs.conftest import MiniWiki

    tool = SearchTool(MiniWiki())
    return tool, {"type": "function", "function": tool_schema(tool)}


def test_smollm2_tool_template_renders_plain_chats_as_smollm2_does():
    own = template_tokenizer("smollm2")
    chats = [[{"role": "user", "content": "q"}],
             [{"role": "system", "content": "S"}, {"role": "user", "content": "q"}],
             [{"role": "user", "content": "q"}, {"role": "assistant", "content": canonical_turn("t", answer="a")},
              {"role": "user", "content": "<tool_response>\nx\n</tool_response>"},
              {"role": "assistant", "content": ""}],
             [{"role": "system", "content": "S"}, {"role": "user", "content": "q"}, {"role": "system", "content": "T"}]]
    for chat in chats:
        for gen in (False, True):
            assert (own.apply_chat_template(chat, tokenize=False, add_generation_prompt=gen)
                    == own.apply_chat_template(chat, tokenize=False, add_generation_prompt=gen,
                                               chat_template=SMOLLM2_TOOL_TEMPLATE))


def test_smollm2_tool_template_speaks_the_turn_protocol():
    from envs.prompts import FORMAT_RULES, system_prompt, tool_response
    from trl.chat_template_utils import is_chat_template_prefix_preserving, parse_response, supports_tool_calling

    tok = tool_calling_tokenizer(_fresh("smollm2"))
    assert tok.chat_template == SMOLLM2_TOOL_TEMPLATE and supports_tool_calling(tok)
    assert is_chat_template_prefix_preserving(tok)  # else TRL swaps in a training template it has none of
    tool, schema = _search_schema()
    call = {"type": "function", "function": {"name": "search", "arguments": {"query": ["a", "b"]}}}
    messages = [{"role": "system", "content": "R"}, {"role": "user", "content": "q"},
                {"role": "assistant", "content": "<think>\nt\n</think>", "tool_calls": [call]},
                {"role": "tool", "name": "search", "content": "x"}, {"role": "tool", "name": "search", "content": "y"}]
    text = tok.apply_chat_template(messages, tools=[schema], tokenize=False, add_generation_prompt=True)
    turn = canonical_turn("t", tool_call=("search", {"query": ["a", "b"]})).replace("</think>\n\n", "</think>\n")
    system = system_prompt([tool], "2025-07-18", role="R").split("\n\n" + FORMAT_RULES)[0]  # the env's own text
    assert text == (f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\nq<|im_end|>\n"
                    f"<|im_start|>assistant\n{turn}<|im_end|>\n"
                    f"<|im_start|>user\n{tool_response('x')}\n{tool_response('y')}<|im_end|>\n<|im_start|>assistant\n")
    # What the model writes parses back to the message (thought, call), which renders to the same text.
    prefix = tok.apply_chat_template(messages[:2], tools=[schema], add_generation_prompt=True, return_dict=False)
    parsed = parse_response(tok, tok.encode(turn + "<|im_end|>", add_special_tokens=False), prefix=prefix,
                            tools=[schema])
    assert parsed["reasoning_content"] == "t" and parsed["tool_calls"] == [call] and parsed["content"] == ""
    assert tok.apply_chat_template(messages[:2] + [parsed], tools=[schema], tokenize=False) == text.split(
        "<|im_start|>user\n<tool_response>")[0]
    # String arguments (OpenAI style) go in as written; no default-system prompt when a system message is given.
    string_call = {"type": "function", "function": {"name": "search", "arguments": '{"query": ["a", "b"]}'}}
    again = tok.apply_chat_template(messages[:2] + [dict(messages[2], tool_calls=[string_call])], tools=[schema],
                                    tokenize=False)
    assert again == tok.apply_chat_template(messages[:3], tools=[schema], tokenize=False) and "SmolLM" not in again
    assert tool_calling_tokenizer(tok) is tok and tok.chat_template == SMOLLM2_TOOL_TEMPLATE  # idempotent


def test_tool_calling_tokenizer_leaves_tool_templates_and_refuses_others_in_one_line():
    qwen = _fresh("qwen3")
    assert tool_calling_tokenizer(qwen).chat_template == template_tokenizer("qwen3").chat_template
    for name, what in (("chatml", "has no chat template"), ("llama3", "cannot render tool calls")):
        tok = _fresh(name)
        with pytest.raises(ValueError) as err:
            tool_calling_tokenizer(tok)
        assert what in str(err.value) and "chat_template=" in str(err.value) and "\n" not in str(err.value)
    tok = _fresh("llama3")
    own = tok.chat_template
    with pytest.raises(ValueError, match="does not render tools.*pass one that does"):
        tool_calling_tokenizer(tok, chat_template=own)
    assert tok.chat_template == own  # left as it was
    forced = tool_calling_tokenizer(_fresh("chatml"), chat_template=SMOLLM2_TOOL_TEMPLATE)
    assert forced.chat_template == SMOLLM2_TOOL_TEMPLATE and forced.response_template["start_anchor"]
