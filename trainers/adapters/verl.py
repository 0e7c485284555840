"""Train on the environments with verl (multi-node RL): an agent loop for verl's ``AgentLoopWorker``.

verl runs one ``AgentLoopBase`` instance per sample; its ``async run(sampling_params,
**dataset_fields)`` talks to verl's inference servers through
``server_manager.generate(request_id, prompt_ids=..., sampling_params=...)`` (which returns
``TokenOutput(token_ids, log_probs, ...)``) and returns an ``AgentLoopOutput`` with
``prompt_ids``, ``response_ids``, ``response_mask`` (1 on sampled ids, 0 on tool output),
``response_logprobs`` (optional), ``reward_score``, ``num_turns``, ``metrics`` and ``extra_fields``
(verl ``verl/experimental/agent_loop/agent_loop.py``; verl pads ``response_logprobs`` and stacks them
as ``rollout_log_probs``, which its bypass mode and rollout-correction metrics read).

:class:`WebSailorAgentLoop` plays one episode of a ``gym.make`` environment per sample with
:func:`play_episode`, which is plain Python (no verl import; unit-tested here): the prompt is
:func:`envs.tokens.prompt_ids` of the first observation, each turn's sampled ids are kept as
sampled (mask 1), the environment's text is added with :func:`envs.tokens.observation_ids`
(mask 0), and the response never exceeds ``response_length`` (verl pads it to that length and
cannot take more). The reward is the environment's, so verl's reward manager is not needed.
Log-probabilities are the server's or none (never made up); an episode cut by ``response_length``
or another limit, or without a verdict, is left out of the loss through ``response_mask``
(:func:`output_fields`).

Wiring (verl's agent loop config file, ``actor_rollout_ref.rollout.agent.agent_loop_config_path``)::

    - name: websailor_agent
      _target_: trainers.adapters.verl.WebSailorAgentLoop
      env_id: websailor/WikiSim-v0
      env_kwargs: {wiki_dir: /data/wiki}

and each dataset row carries ``agent_name: websailor_agent`` and its task in
``extra_info: {task: {question, answer, aliases}}`` (or ``reward_model.ground_truth`` as the
answer and the question as the last user message of ``raw_prompt``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping

from envs.tokens import end_of_turn_ids, ends_with_any, observation_ids, prompt_ids, stop_sequences

# (prompt ids, max new tokens) -> (sampled ids, their log-probs or None)
Generate = Callable[[list[int], int], Awaitable[tuple[list[int], list[float] | None]]]


@dataclass
class EpisodeIds:
    """One episode as verl's ``AgentLoopOutput`` wants it."""

    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    """1 on sampled ids, 0 on ids the environment added."""
    response_logprobs: list[float] | None = field(default_factory=list)
    """The server's sampling log-probabilities of the sampled ids (0.0 on environment ids, as verl's
    own ``ToolAgentLoop`` pads them); None when the server returned none (verl's ``rollout.calculate_log_probs``
    off): never invented."""
    reward: float = 0.0
    num_turns: int = 0
    """Messages after the prompt (assistant turns and observations), as verl counts turns."""
    termination: str = ""
    """The environment's ``info["termination"]``; ``response_length`` when the budget ended it;
    ``token_limit`` for an answer cut by ``max_new_tokens``; ``env_error`` when the environment raised."""
    last_turn_cut: bool = False
    """The last sampled turn ended without a stop sequence (``max_new_tokens`` or the budget cut it)."""
    error: str = ""
    """What the environment raised (``termination == "env_error"``)."""

    def add(self, ids: list[int], mask: int, logprobs: list[float] | None, budget: int) -> bool:
        """Append up to the budget; False when the response is full.

        Raises ``ValueError`` when sampled ids come with fewer log-probabilities than ids, or when the
        server gave log-probabilities for some turns and not others (verl stacks them per batch)."""
        room = budget - len(self.response_ids)
        ids = ids[:max(0, room)]
        if mask:
            self._check_logprobs(ids, logprobs)
        if self.response_logprobs is not None:
            self.response_logprobs += [float(x) for x in logprobs[:len(ids)]] if mask else [0.0] * len(ids)
        self.response_ids += ids
        self.response_mask += [mask] * len(ids)
        return len(self.response_ids) < budget

    def _check_logprobs(self, ids: list[int], logprobs: list[float] | None) -> None:
        sampled_before = any(self.response_mask)
        if logprobs is None:
            if self.response_logprobs is not None and sampled_before:
                raise ValueError("the inference server returned log-probs for an earlier turn but none for this one; "
                                 "check actor_rollout_ref.rollout.calculate_log_probs and the server")
            self.response_logprobs = None
            return
        if self.response_logprobs is None and sampled_before:
            raise ValueError("the inference server returned log-probs for this turn but none for an earlier one")
        if len(logprobs) < len(ids):
            raise ValueError(f"the inference server returned {len(logprobs)} log-probs for {len(ids)} sampled ids")

    @property
    def in_loss(self) -> bool:
        """False for an episode left out of the loss, as ``websailor grpo`` leaves it out
        (:func:`trainers.grpo_data.is_cut_off`, :func:`~trainers.grpo_data.is_error`): cut by
        ``response_length``, the tool-call budget, the context or the clock, its last turn cut by
        ``max_new_tokens``, or no verdict (the environment or the policy endpoint failed; an answer the
        judge could not grade is a wrong answer, in the loss)."""
        from trainers.grpo_data import is_cut_off, is_error

        return not (self.termination == "response_length" or is_cut_off(self) or is_error(self))


def task_from_sample(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The task of a verl dataset row: ``extra_info.task``, else the last user message of
    ``raw_prompt`` as the question and ``reward_model.ground_truth`` as the answer."""
    extra = fields.get("extra_info") or {}
    if isinstance(extra, Mapping) and isinstance(extra.get("task"), Mapping):
        return dict(extra["task"])
    prompt = fields.get("raw_prompt") or []
    users = [m.get("content") for m in prompt if isinstance(m, Mapping) and m.get("role") == "user"]
    answer = (fields.get("reward_model") or {}).get("ground_truth")
    if not users or not isinstance(users[-1], str) or answer is None:
        raise ValueError("a verl sample needs extra_info.task, or raw_prompt with a user message and "
                         "reward_model.ground_truth")
    return {"question": users[-1], "answer": answer if isinstance(answer, str) else str(answer)}


def _cut_at_stop(ids: list[int], stops: list[list[int]]) -> tuple[list[int], bool]:
    """The ids up to and including the first stop sequence, and whether one was found."""
    for end in range(1, len(ids) + 1):
        if ends_with_any(ids[:end], stops):
            return ids[:end], True
    return ids, False


async def play_episode(env: Any, task: Mapping[str, Any], generate: Generate, tokenizer: Any, *,
                       response_length: int, max_new_tokens: int,
                       use_chat_template: bool | None = None) -> EpisodeIds:
    """Play ``task`` in ``env`` (a Gymnasium research environment) with ``generate``.

    Environment steps (tool calls) run in the default executor so the event loop, which
    verl shares across many agent loops, is never blocked. An environment that raises ends the
    episode with ``termination="env_error"`` (left out of the loss, :attr:`EpisodeIds.in_loss`)
    instead of failing verl's whole batch.
    """
    if response_length < 1 or max_new_tokens < 1:
        raise ValueError(f"expected response_length >= 1 and max_new_tokens >= 1, got {response_length}, "
                         f"{max_new_tokens}")
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, lambda: env.reset(options={"task": dict(task)}))
    switch = {"use_chat_template": use_chat_template}
    episode = EpisodeIds(prompt_ids=prompt_ids(env.unwrapped.messages(), tokenizer, **switch))
    stops, eot = stop_sequences(tokenizer, **switch), end_of_turn_ids(tokenizer, **switch)
    while True:
        room = response_length - len(episode.response_ids)
        sampled, logprobs = await generate(episode.prompt_ids + episode.response_ids, min(max_new_tokens, room))
        sampled, stopped = _cut_at_stop(list(sampled), stops)
        logprobs = None if logprobs is None else list(logprobs)[:len(sampled)]
        text_ids = sampled[:len(sampled) - len(eot)] if stopped and ends_with_any(sampled, [eot]) else sampled
        episode.num_turns += 1
        episode.last_turn_cut = not stopped
        if not episode.add(sampled, 1, logprobs, response_length):
            episode.termination = "response_length"
            return episode
        text = tokenizer.decode(text_ids, skip_special_tokens=False)
        try:
            obs, reward, terminated, truncated, info = await loop.run_in_executor(None, env.step, text)
        except Exception as exc:  # one broken environment must not fail verl's whole batch
            episode.termination, episode.error = "env_error", f"{type(exc).__name__}: {exc}"[:500]
            episode.reward = 0.0
            return episode
        episode.reward += float(reward)
        if terminated or truncated:
            episode.termination = str(info.get("termination", ""))
            if episode.last_turn_cut and episode.termination == "answer":  # `<answer>Par`: truncated, not answered
                episode.termination, episode.reward = "token_limit", 0.0
            return episode
        extra = [] if ends_with_any(sampled, [eot]) else list(eot)  # close a turn cut off before its marker
        episode.num_turns += 1
        if not episode.add(extra + observation_ids(obs, tokenizer, **switch), 0, None, response_length):
            episode.termination = "response_length"
            return episode


def output_fields(episode: EpisodeIds, *, mask_excluded: bool = True) -> dict[str, Any]:
    """``AgentLoopOutput`` keyword arguments for an episode (all but ``metrics``).

    An episode left out of the loss (:attr:`EpisodeIds.in_loss`) gets an all-zero ``response_mask``
    when ``mask_excluded``: verl's loss aggregation leaves fully masked sequences out
    (``verl/trainer/ppo/core_algos.py``, ``agg_loss``: "exclude fully masked sequences"), and its
    advantage of 0 there. verl has no truncation flag of its own for agent loops; its reward (0)
    still enters the GRPO group mean, as in TRL's ``mask_truncated_completions``. ``extra_fields``
    keep ``termination`` and ``in_loss`` (verl copies them into ``non_tensor_batch``).
    """
    keep = episode.in_loss or not mask_excluded
    extra: dict[str, Any] = {"termination": episode.termination, "in_loss": keep}
    if episode.error:
        extra["error"] = episode.error
    return {"prompt_ids": list(episode.prompt_ids), "response_ids": list(episode.response_ids),
            "response_mask": list(episode.response_mask) if keep else [0] * len(episode.response_mask),
            "response_logprobs": None if episode.response_logprobs is None else list(episode.response_logprobs),
            "reward_score": float(episode.reward), "num_turns": episode.num_turns, "extra_fields": extra}


AGENT_NAME = "websailor_agent"
"""The name :class:`WebSailorAgentLoop` is registered under (a dataset row's ``agent_name``)."""

# Matched against verl's verl/experimental/agent_loop/agent_loop.py (volcengine/verl b178a3c, 0.8.0.dev):
# AgentLoopBase.__init__(trainer_config, server_manager, tokenizer, processor, dataset_cls, dataset_config),
# async run(sampling_params, **dataset_fields) -> AgentLoopOutput, and register(name), which records
# {"_target_": f"{cls.__module__}.{cls.__qualname__}"} for hydra.utils.instantiate: so the class is defined
# at module level (a function-local class has a qualname hydra cannot import).
try:
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
except ImportError as exc:  # verl pins its own transformers and torch: usually a separate environment
    _VERL_MISSING: str | None = f"{type(exc).__name__}: {exc}"
else:
    _VERL_MISSING = None

if _VERL_MISSING is None:
    @register(AGENT_NAME)
    class WebSailorAgentLoop(AgentLoopBase):
        """verl agent loop over a ``gym.make`` research environment (see the module docstring).

        ``mask_excluded`` (default True) zeroes the ``response_mask`` of episodes left out of the
        loss (:func:`output_fields`)."""

        def __init__(self, *args: Any, env_id: str = "websailor/WikiSim-v0",
                     env_kwargs: Mapping[str, Any] | None = None, max_new_tokens: int | None = None,
                     chat_template: str = "auto", mask_excluded: bool = True, **kwargs: Any):
            from envs.tokens import template_switch

            super().__init__(*args, **kwargs)
            self.use_chat_template = template_switch(chat_template)  # type: ignore[arg-type]
            self.env_id, self.env_kwargs = env_id, dict(env_kwargs or {})
            self.response_length = int(self.config.actor_rollout_ref.rollout.response_length)
            self.max_new_tokens = int(max_new_tokens or self.response_length)
            self.mask_excluded = bool(mask_excluded)

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
            import time
            from uuid import uuid4

            import gymnasium as gym

            import envs  # noqa: F401  (registers the environment ids)

            task = task_from_sample(kwargs)
            request_id = uuid4().hex  # one sticky server session per episode
            spent = {"generate_sequences": 0.0}

            async def generate(ids: list[int], max_tokens: int) -> tuple[list[int], list[float] | None]:
                started = time.perf_counter()
                out = await self.server_manager.generate(request_id=request_id, prompt_ids=ids,
                                                         sampling_params={**sampling_params, "max_tokens": max_tokens})
                spent["generate_sequences"] += time.perf_counter() - started
                return list(out.token_ids), (list(out.log_probs) if out.log_probs is not None else None)

            env = gym.make(self.env_id, tasks=[task], **self.env_kwargs)
            try:
                ep = await play_episode(env, task, generate, self.tokenizer, response_length=self.response_length,
                                        max_new_tokens=self.max_new_tokens,
                                        use_chat_template=self.use_chat_template)
            finally:
                env.close()
            return AgentLoopOutput(metrics=spent, **output_fields(ep, mask_excluded=self.mask_excluded))
else:
    class WebSailorAgentLoop:  # type: ignore[no-redef]
        """Stands in for the agent loop when verl is not importable; says what to install."""

        def __init__(self, *args: Any, **kwargs: Any):
            raise ImportError(f"WebSailorAgentLoop needs verl ({_VERL_MISSING}): pip install verl (it pins its own "
                              "transformers and torch versions, so use a separate environment)")
