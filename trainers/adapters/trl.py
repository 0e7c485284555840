"""Train on the environments under TRL's ``GRPOTrainer`` (optional extra ``trl``).

TRL offers two hooks for multi-turn environments. ``environment_factory`` exposes an
environment's *methods* as tools and lets the trainer parse tool calls through the
tokenizer's chat template and response schema; our environments speak the ReAct text
protocol (``<think>``, ``<tool_call>``, ``<answer>``) and a byte-level test tokenizer has no
template, so this adapter uses the other hook, ``rollout_func``: it plays whole episodes
in ``gym.make``'s environment with :func:`trainers.rollout.collect`, sampling through the
trainer's own generation path (its vLLM engine with ``use_vllm=True``, colocate or server; else its
model unwrapped as TRL unwraps it for ZeRO-3/FSDP: :mod:`trainers.adapters.trl_generation`), and
hands TRL, per rollout, the ids it needs:

- ``prompt_ids``: the first prompt (system message, question, generation prompt);
- ``completion_ids``: everything after it, the sampled ids and the environment's
  observations, exactly as the model saw them (nothing decoded and re-encoded);
- ``logprobs``: sampling log-probabilities (0.0 on environment ids);
- ``env_mask``: 1 on sampled ids, 0 on environment ids; TRL multiplies its loss mask by it
  (its "tool mask"), so tool responses carry no gradient; all 0 for an episode left out of the
  loss (cut off by a limit, an answer cut by the token limit, or no verdict: :func:`in_loss`);
- ``env_reward``: the episode's reward, passed on to reward functions; :func:`env_reward`
  is the reward function that returns it.

Usage (see :func:`make_grpo_trainer` for the whole wiring)::

    rollout = EnvRollout(tasks, RolloutConfig(env_kwargs={"wiki_dir": DIR, "tasks": tasks}, ...))
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[env_reward],
                          train_dataset=rollout.dataset(), rollout_func=rollout, args=GRPOConfig(...))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from trainers.rollout import RolloutConfig, Trajectory, collect


def _require_trl() -> None:
    try:
        import datasets  # noqa: F401
        import trl  # noqa: F401
    except ImportError:
        raise ImportError("the TRL adapter needs trl and datasets: pip install 'websailor-gym[trl]'") from None


def _question(prompt: Any) -> str:
    """The question of a dataset prompt: a string, or the last user message of a conversation."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        users = [m.get("content") for m in prompt if isinstance(m, Mapping) and m.get("role") == "user"]
        if users and isinstance(users[-1], str):
            return users[-1]
    raise ValueError(f"expected a prompt string or a list of messages with a user message, got {str(prompt)[:100]!r}")


def in_loss(t: Trajectory) -> bool:
    """Whether a trajectory feeds the loss, as in ``websailor grpo``: not cut off by a limit
    (:func:`trainers.grpo_data.is_cut_off`: the tool-call budget, the context, the clock, an answer
    cut by the token limit) and not without a verdict (:func:`~trainers.grpo_data.is_error`)."""
    from trainers.grpo_data import is_cut_off, is_error

    return not (is_cut_off(t) or is_error(t))


def call_seed(seed: int, process_index: int, global_step: int, call: int) -> int:
    """The rollout seed of one ``rollout_func`` call: episodes are seeded from it and their task
    (:func:`trainers.rollout.episode_seed`), so it must differ between processes (TRL spreads a
    prompt's ``num_generations`` copies over them: the same seed would sample the same episodes
    twice), between steps and between calls."""
    import hashlib
    import json

    key = json.dumps([int(seed), int(process_index), int(global_step), int(call)]).encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") >> 1


def rollout_outputs(trajectories: Sequence[Trajectory], *, mask_excluded: bool = True,
                    filler_id: int | None = None) -> dict[str, list]:
    """TRL's ``rollout_func`` result for finished trajectories (one completion each).

    With ``mask_excluded`` a trajectory left out of the loss (:func:`in_loss`) gets an all-zero
    ``env_mask``: TRL multiplies its loss mask by it, so the episode adds no gradient while its
    reward still counts in its group's mean (as TRL's own ``mask_truncated_completions`` does).

    An episode that failed before its first turn (the environment raised at reset: no ids) gets the
    one-id completion ``[filler_id]`` (the tokenizer's EOS; the prompt too when it has none), masked, so
    the run goes on.

    Raises ``ValueError`` when a trajectory's fields disagree in length (TRL would pad them
    silently and train on shifted masks: TRL #5144), or has no ids and no ``filler_id`` is given.
    """
    out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [],
                            "env_reward": [], "is_correct": [], "num_tool_calls": [], "termination": [],
                            "in_loss": []}
    for t in trajectories:
        if not (len(t.token_ids) == len(t.loss_mask) == len(t.logprobs)):
            raise ValueError(f"trajectory {t.index}: token_ids ({len(t.token_ids)}), loss_mask ({len(t.loss_mask)}) "
                             f"and logprobs ({len(t.logprobs)}) must have the same length")
        keep = in_loss(t) or not mask_excluded
        ids, mask, logprobs = list(t.token_ids), [int(m) for m in t.loss_mask], [float(x) for x in t.logprobs]
        if not ids:
            if filler_id is None:
                raise ValueError(f"trajectory {t.index}: no completion ids (the episode produced no turn)")
            ids, mask, logprobs, keep = [int(filler_id)], [0], [0.0], False
        out["prompt_ids"].append(list(t.prompt_ids) or [int(filler_id or 0)])  # a reset that raised: no prompt
        out["completion_ids"].append(ids)
        out["logprobs"].append(logprobs)
        out["env_mask"].append(mask if keep else [0] * len(mask))
        out["env_reward"].append(float(t.reward))
        out["is_correct"].append(bool(t.is_correct))
        out["num_tool_calls"].append(int(t.num_tool_calls))
        out["termination"].append(str(t.termination))
        out["in_loss"].append(keep)
    return out


@dataclass
class EnvRollout:
    """A TRL ``rollout_func`` that plays each prompt's task in the environment.

    ``tasks`` are task dicts (``question``, ``answer``, ...); the dataset's prompts are their
    questions (:meth:`dataset`), and a prompt is mapped back to its task by the question.
    ``config`` says which environment (``env_id``, ``env_kwargs``) and how to sample; its
    ``temperature`` is replaced by the trainer's ``args.temperature``.
    """

    tasks: Sequence[Mapping[str, Any]]
    config: RolloutConfig
    progress: bool = False
    mask_excluded: bool = True
    """Zero the ``env_mask`` of episodes left out of the loss (:func:`rollout_outputs`)."""

    def __post_init__(self) -> None:
        self._by_question: dict[str, Mapping[str, Any]] = {}
        for task in self.tasks:
            question = task.get("question") if isinstance(task, Mapping) else None
            if not isinstance(question, str) or not question:
                raise ValueError(f"every task needs a non-empty 'question' string, got {str(task)[:100]!r}")
            if question in self._by_question and self._by_question[question] != task:
                raise ValueError(f"two different tasks share the question {question[:100]!r}; "
                                 "the rollout cannot tell them apart")
            self._by_question[question] = task

    def dataset(self) -> Any:
        """A ``datasets.Dataset`` with one conversational ``prompt`` per task."""
        _require_trl()
        from datasets import Dataset

        return Dataset.from_list([{"prompt": [{"role": "user", "content": q}]} for q in self._by_question])

    def __call__(self, prompts: list, trainer: Any) -> dict[str, list]:
        from dataclasses import replace

        from trainers.adapters.trl_generation import VLLM_MISSING, TRLVLLMPolicy, transformers_policy

        tasks = []
        for prompt in prompts:
            question = _question(prompt)
            if question not in self._by_question:
                raise ValueError(f"no task has the question {question[:100]!r}")
            tasks.append(dict(self._by_question[question]))
        args = trainer.args
        step = int(getattr(getattr(trainer, "state", None), "global_step", 0) or 0)
        rank = int(getattr(getattr(trainer, "accelerator", None), "process_index", 0) or 0)
        self._calls = getattr(self, "_calls", 0) + 1
        config = replace(self.config, temperature=float(getattr(args, "temperature", self.config.temperature)),
                         top_p=float(getattr(args, "top_p", self.config.top_p)),
                         seed=call_seed(self.config.seed, rank, step, self._calls))
        # TRL's sampler already repeats each prompt num_generations times: one episode per prompt.
        if getattr(trainer, "use_vllm", False):
            if getattr(trainer, "vllm_generation", None) is None:
                raise ImportError(VLLM_MISSING)
            policy = TRLVLLMPolicy(trainer, config.max_total_tokens)  # TRL synced the weights before calling us
            try:
                trajectories = collect(policy, tasks, config, group_size=1, progress=self.progress)
            finally:
                policy.finish()
        else:
            with transformers_policy(trainer) as policy:
                try:
                    trajectories = collect(policy, tasks, config, group_size=1, progress=self.progress)
                finally:
                    policy.finish()
        tok = trainer.processing_class
        filler = next((i for i in (getattr(tok, "eos_token_id", None), getattr(tok, "pad_token_id", None))
                       if isinstance(i, int)), None)
        return rollout_outputs(trajectories, mask_excluded=self.mask_excluded, filler_id=filler)


def env_reward(prompts: list, completions: list, env_reward: list[float], **kwargs: Any) -> list[float]:
    """TRL reward function: the environment's episode reward, as ``rollout_func`` returned it."""
    return [float(r) for r in env_reward]


def make_grpo_trainer(model: Any, tokenizer: Any, rollout: EnvRollout, args: Any,
                      reward_funcs: Sequence[Any] = (), **kwargs: Any) -> Any:
    """A ``trl.GRPOTrainer`` over the environment: ``env_reward`` plus any extra ``reward_funcs``."""
    _require_trl()
    from trl import GRPOTrainer

    from trainers.adapters.trl_generation import VLLM_MISSING, vllm_installed

    if getattr(args, "use_vllm", False) and not vllm_installed():
        raise ImportError(VLLM_MISSING)
    tokenizer.padding_side = "left"
    return GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[env_reward, *reward_funcs],
                       train_dataset=rollout.dataset(), rollout_func=rollout, args=args, **kwargs)
