"""A small multi-task text environment in the research environments' protocol, for trainer
tests and the GRPO learning-curve benchmark.

It is the real :class:`envs.env.ResearchEnv` (same turn protocol: ``<think>...</think>``
then a ``<tool_call>`` or an ``<answer>``; same ChatML, exact-match judge and reward), with
a one-line system prompt and a tiny tool so that a 2-layer byte-level model can play it on
a CPU:

- each task asks for the code word of one colour (``"Code for red?"`` -> ``"cat"``); the
  answers differ from task to task, so only a policy that reads the question can solve
  more than one task: a policy that ignores it gives every question the same answer
  distribution, so its per-task pass rates add up to at most 1;
- the ``lookup`` tool (``{"key": "red"}``) returns the code word of the colour named in its
  arguments, inside a ``<tool_response>`` (``tools=["lookup"]``).

Registered as ``websailor-test/Toy-v0``; from another process, make it with
``gym.make("tests.trainers.toy_env:websailor-test/Toy-v0")`` (the module is imported first).
Tasks come from the trainer per episode (``next_task`` / ``reset(options={"task": ...})``),
or, with none given, are drawn from :data:`TASKS`.
"""

from __future__ import annotations

import random
from typing import Any, Sequence

import torch
from gymnasium.envs.registration import register, registry

from envs.env import ResearchEnv
from envs.tools.base import ToolResult

ENV_ID = "websailor-test/Toy-v0"
SPEC = f"{__name__}:{ENV_ID}"
SYSTEM = "Reply <think>...</think><answer>word</answer>."
WORDS = ["cat", "dog", "sun", "cup", "pen", "box", "hat", "key", "map", "egg", "fox", "owl", "ant", "bee", "cow", "pig"]
"""Every answer the format-only cold start samples from (uniformly)."""
KEYS = ["red", "blue", "green", "purple", "crimson", "lavender", "turquoise", "aquamarine"]
CODES = dict(zip(KEYS, ["cat", "dog", "sun", "pen", "box", "hat", "key", "map"]))
"""The code word of each colour: a different answer for every task."""
TASKS = [{"id": k, "question": f"Code for {k}?", "answer": CODES[k]} for k in KEYS]
THINK = "<think>{key}</think>"
"""The thought the cold start writes before its answer (the protocol's strict form): it names the
colour the question asks about."""


def key_of(question: str) -> str:
    """The colour a toy question asks about (``"Code for red?"`` -> ``"red"``)."""
    return question.removeprefix("Code for ").removesuffix("?")


class LookupTool:
    """``lookup {"key": str}``: the code word of a colour."""

    name = "lookup"
    description = "Look up the code word of a colour."
    parameters = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        key = str(arguments.get("key", ""))
        return ToolResult(text=CODES.get(key, "unknown"))


def make_toy_env(tasks: Sequence[dict] | None = None, tools: Sequence[str] = (), **kwargs: Any) -> ResearchEnv:
    """The toy environment; ``tools=["lookup"]`` adds the lookup tool."""
    table = {"lookup": LookupTool}
    kwargs.setdefault("system_prompt", SYSTEM)
    kwargs.setdefault("current_date", "2026-01-01")
    return ResearchEnv([table[t]() for t in tools], list(tasks or TASKS), **kwargs)


if ENV_ID not in registry:
    register(id=ENV_ID, entry_point=f"{__name__}:make_toy_env")


def toy_tokenizer(kind: str = "subword") -> Any:
    """``"byte"``: ``ByT5Tokenizer``; ``"subword"``: the byte-level BPE of :mod:`trainers.subword` trained on
    this environment's text (system prompt, questions, thoughts, answers), so that every colour in a
    question and every code word is one token (nothing downloaded)."""
    from transformers import ByT5Tokenizer

    if kind == "byte":
        return ByT5Tokenizer()
    if kind != "subword":
        raise ValueError(f"kind must be 'subword' or 'byte', got {kind!r}")
    from trainers.subword import train_subword_tokenizer

    texts = [SYSTEM] + [t["question"] for t in TASKS] + [
        f"{THINK.format(key=k)}<answer>{w}</answer>" for k in KEYS for w in WORDS]
    return train_subword_tokenizer(texts * 20 + WORDS * 200 + KEYS * 200, vocab_size=400)


def tiny_model(tokenizer: Any, seed: int = 0, hidden: int = 64, layers: int = 2) -> Any:
    """A randomly initialised 2-layer Qwen2 for ``tokenizer`` (nothing downloaded)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=1024, pad_token_id=tokenizer.pad_token_id,
                      eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=True)
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(cfg)


def cold_start(model: Any, tokenizer: Any, tasks: Sequence[dict] = TASKS, steps: int = 300, lr: float = 5e-3,
               seed: int = 0, words: Sequence[str] = WORDS, per_prompt: int = 2, think: bool = True) -> None:
    """A short SFT cold start that teaches the turn *format* only: for every question, the
    target is ``<think>code</think><answer>W</answer>`` with ``W`` drawn uniformly from
    ``words``, independently of the question (so the model then answers each task correctly
    with probability about ``1 / len(words)``, and reward starts near 0). ``think=False`` leaves
    the thought out (shorter turns; the environment then counts the turn as not strict, which
    the default reward weights ignore)."""
    from envs.tokens import IM_END, prompt_ids

    rng = random.Random(seed)
    prompts = [prompt_ids([{"role": "system", "content": SYSTEM}, {"role": "user", "content": t["question"]}],
                          tokenizer) for t in tasks]
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        rows, masks = [], []
        for t, p in zip(tasks, prompts):
            for _ in range(per_prompt):
                word = rng.choice(words)
                thought = THINK.format(key=key_of(t["question"])) if think else ""
                body = tokenizer.encode(f"{thought}<answer>{word}</answer>{IM_END}",
                                        add_special_tokens=False)
                rows.append(p + body)
                masks.append([0] * len(p) + [1] * len(body))
        width = max(len(r) for r in rows)
        ids = torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])
        mask = torch.tensor([m + [0] * (width - len(m)) for m in masks], dtype=torch.float32)
        logits = model(input_ids=ids, attention_mask=(torch.arange(width)[None] < torch.tensor(
            [len(r) for r in rows])[:, None]).long()).logits[:, :-1]
        nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                                                reduction="none").view(ids.shape[0], -1)
        loss = (nll * mask[:, 1:]).sum() / mask[:, 1:].sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()


def pass_rates(trainer: Any, tasks: Sequence[dict], episodes: int = 16) -> dict[str, float]:
    """Per task id: the share of ``episodes`` sampled episodes (the trainer's own rollouts, at its
    temperature) that answer correctly."""
    trajectories = trainer.collect(list(tasks))
    # trainer.collect runs group_size episodes per task; run more rounds for ``episodes``
    rounds = max(1, -(-episodes // trainer.config.group_size))
    for _ in range(rounds - 1):
        trajectories += trainer.collect(list(tasks))
    rates: dict[str, list[float]] = {t["id"]: [] for t in tasks}
    for traj in trajectories:
        rates[traj.task["id"]].append(1.0 if traj.is_correct else 0.0)
    return {k: sum(v) / len(v) for k, v in rates.items()}
